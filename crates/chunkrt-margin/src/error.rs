//! Why a margin measurement failed.

/// The measurement failed.
#[derive(Debug, thiserror::Error)]
pub enum MarginError {
    /// The setup is unusable.
    #[error("margin setup: {0}")]
    Setup(String),
    /// The simulated arm refused its parameters.
    #[error("simulated arm: {0}")]
    Sim(#[from] chunkrt_sim::SimError),
    /// The arm refused a command or faulted.
    #[error("simulated arm exchange: {0}")]
    Backend(#[from] chunkrt_core::BackendError),
    /// The arm could not start.
    #[error("simulated arm start: {0}")]
    Start(String),
    /// A run of the runtime's loop failed.
    #[error("runtime loop: {0}")]
    Run(String),
    /// A run's recording could not be read back.
    #[error("runtime loop: {0}")]
    Recording(#[from] chunkrt_telemetry::readback::ReadError),
    /// The config, with the measurement's overrides, is refused.
    #[error("margin setup: {0}")]
    Config(#[from] chunkrt_config::OverrideError),
    /// A run of the runtime's loop ended as a run must not (a panic, a failed
    /// shutdown, a drive lost, a quick stop, lost records): the sweep ends with it.
    #[error("runtime loop: {message}")]
    Ended {
        /// How the run ended (`chunkrt` exits with its status).
        ending: chunkrt_rt::Ending,
        /// What happened.
        message: String,
    },
    /// `|L|` does not cross 1 in the frequency range.
    #[error(
        "no gain crossover between {lo_hz} Hz and {hi_hz} Hz (|L| from {mag_lo:.3} to {mag_hi:.3})"
    )]
    NoCrossover {
        /// Lowest frequency.
        lo_hz: f64,
        /// Highest frequency.
        hi_hz: f64,
        /// `|L|` there.
        mag_lo: f64,
        /// `|L|` there.
        mag_hi: f64,
    },
}
