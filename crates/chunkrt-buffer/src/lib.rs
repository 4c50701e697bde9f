//! chunkrt-buffer (being built).
