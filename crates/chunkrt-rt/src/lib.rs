//! chunkrt-rt (being built).
