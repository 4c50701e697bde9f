//! Why a policy model could not be loaded or sampled.

use std::path::{Path, PathBuf};

/// ` (model_file of manifest M)` when a manifest named the model.
fn named_by(manifest: Option<&Path>) -> String {
    manifest
        .map(|m| format!(" (model_file of manifest {})", m.display()))
        .unwrap_or_default()
}

/// A refusal at load time (or a failure of the offline sampling helpers).
///
/// Every variant names the file and the mismatch, so that an operator can tell which model
/// was refused and why without reading code.
#[derive(Debug, thiserror::Error)]
pub enum PolicyLoadError {
    /// The manifest file cannot be read: missing, not a regular file, or larger than
    /// a manifest may be (the message names the path).
    #[error(transparent)]
    ManifestRead(chunkrt_files::FileError),
    /// The manifest is not valid TOML or lacks/misnames a field.
    #[error("policy manifest {path}: {message}")]
    ManifestParse {
        /// The manifest path.
        path: PathBuf,
        /// The parser's message (names the field and its line).
        message: String,
    },
    /// The manifest parses but a value is inconsistent or out of range.
    #[error("policy manifest {path}: {what}")]
    ManifestInvalid {
        /// The manifest path.
        path: PathBuf,
        /// What is wrong, naming the key.
        what: String,
    },
    /// The model file cannot be read: missing, not a regular file, larger than a
    /// model may be, or of another size than its manifest's `model_bytes` (the message
    /// names the path).
    #[error("{error}{}", named_by(manifest.as_deref()))]
    ModelRead {
        /// The manifest that names it (none for `chunkrt policy inspect FILE`).
        manifest: Option<PathBuf>,
        /// Why it cannot be read (in the message, not a `source`: said once).
        error: chunkrt_files::FileError,
    },
    /// The model file's SHA-256 differs from the manifest's `model_sha256`.
    #[error(
        "policy model {path}: SHA-256 {actual} ({size} bytes) does not match model_sha256 {expected} \
         in its manifest: the file was changed, truncated or replaced"
    )]
    DigestMismatch {
        /// The model path.
        path: PathBuf,
        /// Digest in the manifest.
        expected: String,
        /// Digest of the file.
        actual: String,
        /// File size in bytes.
        size: u64,
    },
    /// The graph's inputs or outputs disagree with the manifest.
    #[error("policy model {path}: {what}")]
    GraphMismatch {
        /// The model path.
        path: PathBuf,
        /// Which input/output and how it differs.
        what: String,
    },
    /// No ONNX Runtime library where it was looked for.
    #[error(
        "ONNX Runtime library not found (looked for {tried}); run ./scripts/bootstrap-ort.sh \
         from the repository root, or set ORT_DYLIB_PATH or the policy's ort_library key to \
         libonnxruntime.so.1.31.1"
    )]
    OrtLibraryMissing {
        /// The places looked at, in order.
        tried: String,
    },
    /// The ONNX Runtime library exists but could not be loaded or initialised.
    #[error("ONNX Runtime library {path}: {message}")]
    OrtLibrary {
        /// The library path.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The configured execution provider is unknown or not available.
    #[error("execution provider `{name}`: {message}")]
    ExecutionProvider {
        /// The provider named in the configuration.
        name: String,
        /// Why it cannot be used.
        message: String,
    },
    /// ONNX Runtime refused the model or a run failed.
    #[error("ONNX Runtime, model {path}: {message}")]
    Runtime {
        /// The model path.
        path: PathBuf,
        /// ONNX Runtime's message.
        message: String,
    },
    /// A request to the sampling helpers is inconsistent with the model.
    #[error("policy request: {0}")]
    Request(String),
}
