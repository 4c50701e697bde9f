//! chunkrt-telemetry (being built).
