//! Every file in rt-config/ loads; every fixture gives the expected result.

use chunkrt_config::Config;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Files in `rt-config/` that are runtime configurations (budgets, policy manifests
/// and simulator configs have their own loaders and tests).
fn is_runtime_config(p: &Path) -> bool {
    let name = p.file_name().unwrap().to_string_lossy();
    p.extension().is_some_and(|e| e == "toml")
        && !name.starts_with("budget")
        && !name.starts_with("ecsim")
}

#[test]
fn every_runtime_config_in_rt_config_loads() {
    let mut n = 0;
    for entry in std::fs::read_dir(repo().join("rt-config")).unwrap() {
        let p = entry.unwrap().path();
        if is_runtime_config(&p) {
            Config::load(&p).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 1, "no config found in rt-config/");
}

#[test]
fn valid_fixtures_load_and_invalid_ones_give_their_expected_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let (mut valid, mut invalid) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        if name.starts_with("valid-") {
            Config::load(&p).unwrap_or_else(|e| panic!("{name} should load: {e}"));
            valid += 1;
        } else if name.starts_with("invalid-") {
            let expected_file = p.with_extension("expected");
            let expected = std::fs::read_to_string(&expected_file)
                .unwrap_or_else(|_| panic!("{name} needs {}", expected_file.display()));
            let err = match Config::load(&p) {
                Ok(_) => panic!("{name} should be refused"),
                Err(e) => e.to_string(),
            };
            for line in expected.lines().filter(|l| !l.trim().is_empty()) {
                assert!(
                    err.contains(line.trim()),
                    "{name}: error\n  {err}\nshould contain\n  {line}"
                );
            }
            invalid += 1;
        }
    }
    assert!(
        valid >= 2 && invalid >= 5,
        "too few fixtures: {valid} valid, {invalid} invalid"
    );
}
