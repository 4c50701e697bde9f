//! Why a figure could not be drawn or saved.

use std::path::PathBuf;

/// A figure that could not be made: the recording it is drawn from, the place it
/// goes, or the drawing itself.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The run's recording could not be found or read (the message names the file).
    #[error("{0}")]
    Recording(#[from] crate::readback::ReadError),
    /// The recording holds no cycle to draw.
    #[error("the recording holds no cycle")]
    NoCycle,
    /// The recording holds no cycle in the window asked for.
    #[error("the recording has no cycle between {from_s} s and {to_s} s")]
    NoCycleInWindow {
        /// Start of the window (s since the run's start).
        from_s: f64,
        /// End of the window (s since the run's start).
        to_s: f64,
    },
    /// The output directory could not be created.
    #[error("{}: {source}", dir.display())]
    OutputDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A drawn figure could not be written to its file.
    #[error("{}: {message}", file.display())]
    Write {
        /// The file (`.svg`, `.png`).
        file: PathBuf,
        /// plotters' message.
        message: String,
    },
    /// plotters refused to draw (its message).
    #[error("{0}")]
    Draw(String),
}
