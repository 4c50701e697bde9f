//! Why a gap measurement failed.

/// The measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum GapError {
    /// The setup or a config is unusable for the excitations.
    #[error("gap setup: {0}")]
    Setup(String),
    /// A config, with the excitation's overrides, is refused.
    #[error("gap setup: {0}")]
    Config(#[from] chunkrt_config::OverrideError),
    /// A run of the runtime failed to build or run.
    #[error("{plant}: {message}")]
    Run {
        /// The plant's name (its config).
        plant: String,
        /// What happened.
        message: String,
    },
    /// A run ended as a measurement run must not (a fallback stop, a panic, a drive
    /// lost): its numbers would describe the stop, not the plant.
    #[error("{plant}: the excitation run ended early: {message}")]
    Ended {
        /// The plant's name.
        plant: String,
        /// How the run ended (`chunkrt` exits with its status).
        ending: chunkrt_rt::Ending,
        /// What happened.
        message: String,
    },
    /// A run's recording could not be read back, or holds too little.
    #[error("{plant}: {message}")]
    Recording {
        /// The plant's name.
        plant: String,
        /// What was wrong.
        message: String,
    },
}
