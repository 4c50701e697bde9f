//! chunkrt-policy (being built).
