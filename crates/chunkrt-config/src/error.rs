//! Configuration errors: always the file, the key path and what was expected.

use std::path::{Path, PathBuf};

/// A configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read: {message}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The OS error.
        message: String,
    },
    /// The file is not valid TOML or does not fit the schema (unknown key, wrong type).
    #[error("{}:{line}: key `{path}`: {message}", file.display())]
    Parse {
        /// The file.
        file: PathBuf,
        /// Line of the error (1-based, 0 when unknown).
        line: usize,
        /// Dotted key path (`executor.blend_ms`).
        path: String,
        /// What was wrong and what was expected.
        message: String,
    },
    /// A value is out of range or inconsistent with another.
    #[error("{}: key `{path}`: {message}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// Dotted key path.
        path: String,
        /// What was wrong and what was expected.
        message: String,
    },
}

impl ConfigError {
    pub(crate) fn from_toml(
        file: &Path,
        text: &str,
        e: serde_path_to_error::Error<toml::de::Error>,
    ) -> ConfigError {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let line = inner
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(0);
        // toml's own message repeats the source line with a caret; keep its first
        // sentence only, the file and line are already given.
        let message = inner.message().trim().to_string();
        ConfigError::Parse {
            file: file.to_path_buf(),
            line,
            path: if path.is_empty() || path == "." {
                "(top level)".to_string()
            } else {
                path
            },
            message,
        }
    }
}
