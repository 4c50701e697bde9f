//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// The bundled policies.
pub fn policies() -> PathBuf {
    repo_root().join("rt-config/policies")
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("chunkrt-policy-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Copies `<name>.toml`, its model and the measurements its omission log cites
/// (`gap-*.json`) into `dir`, returns the manifest path.
pub fn copy_policy(name: &str, dir: &Path) -> PathBuf {
    chunkrt_testkit::policy_files::copy_bundled_policy(name, dir)
}

/// Rewrites a manifest through `edit` on its TOML table.
pub fn edit_manifest(path: &Path, edit: impl FnOnce(&mut toml::Table)) {
    let mut t: toml::Table = std::fs::read_to_string(path).unwrap().parse().unwrap();
    edit(&mut t);
    std::fs::write(path, toml::to_string(&t).unwrap()).unwrap();
}

/// The observation at which the demonstrations split: at rest at goal 0, heading for goal 1.
pub fn ambiguous_obs(manifest: &Path) -> Vec<f64> {
    let m = chunkrt_policy::Manifest::load(manifest).unwrap();
    let mut obs = m.encoding.goals[0].clone();
    obs.extend_from_slice(&m.encoding.goals[1]);
    // At rest: zero velocities where the encoding has them.
    obs.resize(m.d_obs, 0.0);
    obs
}
