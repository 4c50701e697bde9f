//! chunkrt-sim (being built).
