//! `chunkrt validate FILE` on every kind of file chunkrt reads, and on configs
//! that parse but cannot run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn validate(file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .arg("validate")
        .arg(file)
        .output()
        .unwrap()
}

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            toml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "toml") {
            out.push(p);
        }
    }
}

#[test]
fn every_file_in_rt_config_validates_and_says_its_kind() {
    let mut files = vec![];
    toml_files(&repo().join("rt-config"), &mut files);
    files.sort();
    let mut kinds = std::collections::BTreeSet::new();
    for f in &files {
        let out = validate(f);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stderr}", f.display());
        let name = f.file_name().unwrap().to_string_lossy();
        let expected = if f.parent().unwrap().ends_with("policies") {
            "policy manifest"
        } else if name.starts_with("budget") {
            "budget"
        } else if name.starts_with("ecsim") {
            "ecsim configuration"
        } else {
            "run configuration"
        };
        assert!(
            stdout.contains(&format!(": OK: {expected}: ")),
            "{}: {stdout}",
            f.display()
        );
        kinds.insert(expected);
    }
    assert_eq!(kinds.len(), 4, "kinds found in rt-config/: {kinds:?}");
}

#[test]
fn a_config_that_cannot_play_is_refused_with_file_line_and_key() {
    let dir = std::env::temp_dir().join(format!("chunkrt-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    let line_of = |key: &str| 1 + sim.lines().position(|l| l.starts_with(key)).unwrap();
    for (key, from, to, why) in [
        (
            "period_ms",
            "period_ms = 20.0",
            "period_ms = 0.05",
            "control.period_ms`: expected a bus period of 1 to 20 ms",
        ),
        (
            "max_chunk_age_ms",
            "max_chunk_age_ms = 200.0",
            "max_chunk_age_ms = 15.0",
            "executor.max_chunk_age_ms`: 15 ms expires every chunk",
        ),
    ] {
        assert!(sim.contains(from), "rt-config/sim.toml has no `{from}`");
        let file = dir.join(format!("{key}.toml"));
        std::fs::write(&file, sim.replace(from, to)).unwrap();
        let out = validate(&file);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{key}: {err}");
        let at = format!("{key}.toml:{}: key `{why}", line_of(key));
        assert!(err.contains(&at), "{key}: expected `{at}` in\n{err}");
        assert!(err.contains("read as a run configuration"), "{err}");
    }
}
