//! Which of chunkrt's file kinds a TOML file is, for `chunkrt validate`.

use std::path::Path;

/// The kinds of TOML file chunkrt reads (all of them live in `rt-config/`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A runtime configuration (`chunkrt run --config`): `[control]`, `[backend]`, ...
    Run,
    /// A timing-gap budget (`chunkrt bench --budget`): `[metrics.*]`, `[counters]`, `[baseline]`.
    Budget,
    /// An EtherCAT simulator configuration (`chunkrt ecsim --config`): `[drive]`,
    /// `[frames]`, `[[drive_fault]]`, ...
    Ecsim,
    /// A policy manifest beside its ONNX model: `format`, `model_file`, `[io]`, ...
    PolicyManifest,
}

impl FileKind {
    /// The kind's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            FileKind::Run => "run configuration",
            FileKind::Budget => "budget",
            FileKind::Ecsim => "ecsim configuration",
            FileKind::PolicyManifest => "policy manifest",
        }
    }

    /// Tells the kind from the file's top-level keys, each kind having keys no
    /// other has; when the text is not TOML or names none of them (an empty
    /// ecsim file is valid: every key has a default), from the file's name
    /// (`budget*`, `ecsim*`, a manifest in `policies/`), else a run configuration,
    /// whose loader then says what is wrong.
    pub fn detect(path: &Path, text: &str) -> FileKind {
        if let Ok(table) = text.parse::<toml::Table>() {
            let has = |keys: &[&str]| keys.iter().any(|k| table.contains_key(*k));
            if has(&["control", "backend", "limits", "executor", "inference"]) {
                return FileKind::Run;
            }
            if has(&["model_file", "model_sha256", "normalisation", "encoding"]) {
                return FileKind::PolicyManifest;
            }
            if has(&["metrics", "counters", "baseline"]) {
                return FileKind::Budget;
            }
            if has(&[
                "drive",
                "frames",
                "drive_fault",
                "refuse_transition",
                "link_cut",
                "drives",
                "clock",
                "cycle_us",
            ]) {
                return FileKind::Ecsim;
            }
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        let in_policies = path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|d| d == "policies");
        if name.starts_with("budget") {
            FileKind::Budget
        } else if name.starts_with("ecsim") {
            FileKind::Ecsim
        } else if in_policies {
            FileKind::PolicyManifest
        } else {
            FileKind::Run
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_by_their_keys_then_by_name() {
        let p = Path::new("x.toml");
        assert_eq!(FileKind::detect(p, "[control]\njoints = 7"), FileKind::Run);
        assert_eq!(
            FileKind::detect(p, "description = \"d\"\n[counters]\nx = 0"),
            FileKind::Budget
        );
        assert_eq!(FileKind::detect(p, "seed = 3\n[frames]\n"), FileKind::Ecsim);
        assert_eq!(
            FileKind::detect(p, "format = 1\nmodel_file = \"m.onnx\""),
            FileKind::PolicyManifest
        );
        assert_eq!(
            FileKind::detect(Path::new("ecsim-x.toml"), ""),
            FileKind::Ecsim
        );
        assert_eq!(
            FileKind::detect(Path::new("budget.toml"), "not toml ="),
            FileKind::Budget
        );
        assert_eq!(FileKind::detect(p, ""), FileKind::Run);
    }
}
