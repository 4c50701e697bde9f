//! Configuration errors: always the file, the key path and what was expected.

use crate::locate::clip;
use std::path::{Path, PathBuf};

/// A configuration file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read: missing, not a regular file (a directory, FIFO or
    /// device), or larger than a TOML file may be.
    #[error(transparent)]
    File(#[from] chunkrt_files::FileError),
    /// The file is not UTF-8 text.
    #[error("{}: {}", file.display(), not_text_message(file, *onnx, *offset))]
    NotText {
        /// The file.
        file: PathBuf,
        /// Byte offset of the first byte that is not UTF-8.
        offset: usize,
        /// Whether it looks like an ONNX model (by its name or its first bytes).
        onnx: bool,
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
    #[error("{}{}: key `{path}`: {message}", file.display(), at_line(*line))]
    Invalid {
        /// The file.
        file: PathBuf,
        /// Line of the key (1-based; 0 when unknown, e.g. a limit judged after loading).
        line: usize,
        /// Dotted key path.
        path: String,
        /// What was wrong and what was expected.
        message: String,
    },
}

/// A value set in code after loading (a tool's command-line override) that the
/// configuration's checks refuse: the key and what was expected. No file or line:
/// the value did not come from one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct OverrideError {
    /// Dotted key path (`inject.transport_delay_ms`).
    pub key: String,
    /// What was wrong and what was expected.
    pub message: String,
}

/// What to say of a file that is not text.
fn not_text_message(file: &Path, onnx: bool, offset: usize) -> String {
    if onnx {
        format!(
            "a binary file (an ONNX model?), not TOML text: `chunkrt validate` reads \
             chunkrt's TOML files; `chunkrt policy inspect {}` lists a model's inputs and \
             outputs, and `chunkrt validate` on the manifest that names the model checks it \
             against the manifest",
            file.display()
        )
    } else {
        format!(
            "not UTF-8 text (byte {offset}): chunkrt's files (run configurations, budgets, \
             ecsim configurations, policy manifests) are TOML in UTF-8"
        )
    }
}

/// `:LINE` when the line is known.
fn at_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}")
    }
}

impl ConfigError {
    /// A range or consistency error on the key at `path` of the file `file` whose
    /// text is `text`: the line is looked up in the text, path and message are
    /// clipped to a readable size.
    pub fn invalid(file: &Path, text: &str, path: &str, message: &str) -> ConfigError {
        ConfigError::Invalid {
            file: file.to_path_buf(),
            line: crate::locate::line_of(text, path),
            path: clip(path),
            message: clip(message),
        }
    }

    /// A file with a carriage return not followed by a line feed (old Mac line
    /// endings), refused before parsing with the line where it is.
    pub(crate) fn lone_cr(file: &Path, text: &str, offset: usize) -> ConfigError {
        ConfigError::Parse {
            file: file.to_path_buf(),
            line: crate::locate::line_at(text, offset),
            path: "(top level)".to_string(),
            message: "carriage return (CR) without a line feed at the end of this line: \
                      TOML lines end with LF or CRLF; convert the file (e.g. `tr '\\r' '\\n'`)"
                .to_string(),
        }
    }

    pub(crate) fn from_toml(
        file: &Path,
        text: &str,
        e: serde_path_to_error::Error<toml::de::Error>,
    ) -> ConfigError {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let line = inner
            .span()
            .map(|s| crate::locate::line_at(text, s.start))
            .unwrap_or(0);
        // toml's own message repeats the source line with a caret; keep its first
        // sentence only, the file and line are already given.
        let message = inner.message().trim();
        ConfigError::Parse {
            file: file.to_path_buf(),
            line,
            path: if path.is_empty() || path == "." {
                "(top level)".to_string()
            } else {
                clip(&path)
            },
            message: if message.is_empty() {
                "not valid TOML here".to_string()
            } else {
                clip(message)
            },
        }
    }
}
