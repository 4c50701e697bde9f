//! Finding and loading the ONNX Runtime shared library (ort `load-dynamic`).
//!
//! Lookup order: the configured path (policy config key `ort_library`), then the
//! `ORT_DYLIB_PATH` environment variable, then `.ort/lib/libonnxruntime.so.1.31.1` in the
//! repository, found by walking up from the current directory and from the executable's
//! directory (where `./scripts/bootstrap-ort.sh` puts it). The library is loaded once per
//! process; one `ort::environment::Environment` is shared by every session.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ort::environment::Environment;

use crate::error::PolicyLoadError;

/// File name of the pinned ONNX Runtime release (matches ort 2.0.0-rc.15, API 31).
pub const ORT_LIBRARY_NAME: &str = "libonnxruntime.so.1.31.1";
/// Where `scripts/bootstrap-ort.sh` places the library, relative to the repository root.
pub const ORT_LOCAL_DIR: &str = ".ort/lib";

/// Resolves the library path without loading it.
///
/// `configured` wins when given (and must exist); otherwise `ORT_DYLIB_PATH` (must exist
/// when set); otherwise the repository-local copy.
pub fn find_ort_library(configured: Option<&Path>) -> Result<PathBuf, PolicyLoadError> {
    if let Some(p) = configured {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(PolicyLoadError::OrtLibraryMissing {
                tried: format!("{} (policy key ort_library)", p.display()),
            })
        };
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(PolicyLoadError::OrtLibraryMissing {
                tried: format!("{} (ORT_DYLIB_PATH)", p.display()),
            })
        };
    }
    let mut starts = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        starts.push(cwd);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        starts.push(dir);
    }
    // Tests run with the crate directory as cwd; the manifest dir is a third anchor.
    starts.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let mut tried = Vec::new();
    for start in &starts {
        for dir in start.ancestors() {
            let candidate = dir.join(ORT_LOCAL_DIR).join(ORT_LIBRARY_NAME);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
        tried.push(format!(
            "{ORT_LOCAL_DIR}/{ORT_LIBRARY_NAME} in {} and its parents",
            start.display()
        ));
    }
    Err(PolicyLoadError::OrtLibraryMissing {
        tried: tried.join("; "),
    })
}

/// The process-wide environment and the library it came from.
struct Loaded {
    path: PathBuf,
    env: Environment,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();
static LOADING: Mutex<()> = Mutex::new(());

/// Loads ONNX Runtime (once per process) and returns the shared environment and the
/// library's path.
///
/// A later call that resolves to a different library is refused: ONNX Runtime cannot be
/// loaded twice into one process.
pub fn ort_environment(
    configured: Option<&Path>,
) -> Result<(Environment, PathBuf), PolicyLoadError> {
    let path = find_ort_library(configured)?;
    let _guard = LOADING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = LOADED.get() {
        return if same_file(&l.path, &path) {
            Ok((l.env.clone(), l.path.clone()))
        } else {
            Err(PolicyLoadError::OrtLibrary {
                path,
                message: format!(
                    "ONNX Runtime is already loaded in this process from {}; one process \
                     cannot load two libraries",
                    l.path.display()
                ),
            })
        };
    }
    let builder = ort::init_from(&path).map_err(|e| PolicyLoadError::OrtLibrary {
        path: path.clone(),
        message: e.to_string(),
    })?;
    let env = builder
        .with_name("chunkrt")
        .build()
        .map_err(|e| PolicyLoadError::OrtLibrary {
            path: path.clone(),
            message: e.to_string(),
        })?;
    let loaded = LOADED.get_or_init(|| Loaded {
        path: path.clone(),
        env,
    });
    Ok((loaded.env.clone(), loaded.path.clone()))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_path_must_exist() {
        let e = find_ort_library(Some(Path::new("/nonexistent/libonnxruntime.so"))).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("/nonexistent/libonnxruntime.so (policy key ort_library)"),
            "{msg}"
        );
        assert!(msg.contains("./scripts/bootstrap-ort.sh"), "{msg}");
    }
}
