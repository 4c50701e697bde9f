//! chunkrt-config (being built).
