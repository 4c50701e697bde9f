//! `chunkrt validate` on a policy manifest: everything a run checks when it loads the
//! policy, without running it.

use std::path::{Path, PathBuf};

use crate::error::PolicyLoadError;
use crate::manifest::read_manifest_text;
use crate::manifest2::{check_any_manifest, manifest_format};
use crate::session::SessionOptions;

/// What was found of a manifest and its model.
#[derive(Clone, Debug)]
pub struct ManifestVerdict {
    /// One line: what the manifest describes.
    pub summary: String,
    /// The model file.
    pub model: PathBuf,
    /// Its size in bytes.
    pub model_bytes: u64,
    /// `None` when the graph was opened in ONNX Runtime and its inputs and outputs
    /// agree with the manifest; otherwise why it could not be checked (no ONNX Runtime
    /// library). The model's size and digest are checked either way.
    pub graph_unchecked: Option<String>,
}

/// Loads the manifest as a run does: text read with a bound and checked, the model read
/// with a bound (its size against `model_bytes` when declared) and its SHA-256 against
/// `model_sha256`, the graph opened in ONNX Runtime and its inputs and outputs checked
/// against the manifest. Any refusal is the error the run would give.
///
/// When ONNX Runtime cannot be loaded, the digest has already been checked (it is read
/// before the library is looked for) and the verdict says the graph was not checked.
pub fn verify_manifest(
    path: &Path,
    opts: &SessionOptions,
) -> Result<ManifestVerdict, PolicyLoadError> {
    let text = read_manifest_text(path)?;
    let summary = check_any_manifest(path, &text)?;
    let format = manifest_format(path, &text)?;
    let (model, loaded) = if format == 2 {
        let m = crate::CheckedManifest2::parse(path, &text)?;
        let model = m.raw.model_path(path);
        (model, crate::ImportedModel::load(path, opts).map(drop))
    } else {
        let m = crate::Manifest::parse(path, &text)?;
        let model = m.model_path(path);
        (model, crate::PolicyModel::load(path, opts).map(drop))
    };
    let graph_unchecked = match loaded {
        Ok(()) => None,
        Err(
            e @ (PolicyLoadError::OrtLibraryMissing { .. } | PolicyLoadError::OrtLibrary { .. }),
        ) => Some(e.to_string()),
        Err(e) => return Err(e),
    };
    let model_bytes = std::fs::metadata(&model).map(|m| m.len()).unwrap_or(0);
    Ok(ManifestVerdict {
        summary,
        model,
        model_bytes,
        graph_unchecked,
    })
}

/// A manifest's summary line and its provenance ledger (`chunkrt policy inspect
/// MANIFEST.toml`), after the manifest is checked and the digests of the files the
/// ledger cites are compared (the model's digest is `validate`'s).
pub fn ledger_text(path: &Path) -> Result<String, PolicyLoadError> {
    let text = read_manifest_text(path)?;
    let summary = check_any_manifest(path, &text)?;
    let (model_sha256, ledger) = if manifest_format(path, &text)? == 2 {
        let m = crate::CheckedManifest2::load(path)?.raw;
        (m.model_sha256.clone(), m.provenance().describe())
    } else {
        let m = crate::Manifest::load(path)?;
        (m.model_sha256.clone(), m.provenance().describe())
    };
    Ok(format!(
        "{}: {summary}\nmodel sha256 {model_sha256}\n{ledger}",
        path.display()
    ))
}
