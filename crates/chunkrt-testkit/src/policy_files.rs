//! The bundled policies' files, copied for a test that edits or cites them.

use std::path::{Path, PathBuf};

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `rt-config/policies`.
pub fn policies() -> PathBuf {
    repo().join("rt-config/policies")
}

/// Copies the measurements the bundled manifests' omission logs cite (`gap-*.json`)
/// into `dir`.
pub fn copy_cited_measurements(dir: &Path) {
    for e in std::fs::read_dir(policies()).expect("rt-config/policies") {
        let e = e.expect("a directory entry");
        if e.file_name().to_string_lossy().starts_with("gap-") {
            std::fs::copy(e.path(), dir.join(e.file_name())).expect("copy a measurement");
        }
    }
}

/// Copies the bundled policy `<name>.toml`, its `<name>.onnx` and the measurements its
/// omission log cites into `dir`; returns the manifest's path there.
pub fn copy_bundled_policy(name: &str, dir: &Path) -> PathBuf {
    for ext in ["toml", "onnx"] {
        let file = format!("{name}.{ext}");
        std::fs::copy(policies().join(&file), dir.join(&file)).expect("copy the policy");
    }
    copy_cited_measurements(dir);
    dir.join(format!("{name}.toml"))
}
