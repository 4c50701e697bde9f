//! chunkrt-ecsim (being built).
