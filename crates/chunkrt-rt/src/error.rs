//! Why a run could not start or failed: the runtime's error at its seam with the
//! CLI and the builders.

use std::path::PathBuf;

/// A run could not start or failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The backend could not be built or brought up.
    #[error("backend: {0}")]
    Backend(String),
    /// The policy could not be built.
    #[error("policy: {0}")]
    Policy(String),
    /// The output directory could not be used.
    #[error("output directory {dir}: {message}")]
    Output {
        /// The directory.
        dir: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A thread could not be started or died.
    #[error("thread: {0}")]
    Thread(String),
    /// The camera could not be opened, or does not fit the policy.
    #[error("camera: {0}")]
    Camera(String),
    /// The operator's channel (`[operator]`) could not be opened as configured: its
    /// socket's path, directory or group (a configuration error).
    #[error("[operator]: {0}")]
    Operator(String),
    /// A file the configuration names (the wear ledger) cannot be used; found before
    /// anything moved.
    #[error("configuration: {0}")]
    Config(String),
}
