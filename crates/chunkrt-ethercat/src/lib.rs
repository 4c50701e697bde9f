//! chunkrt-ethercat (being built).
