//! Every file in rt-config/ loads; every fixture gives the expected result.

use chunkrt_config::{Config, FileKind};
use chunkrt_testkit::edit::Edit;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Files in `rt-config/` that are runtime configurations (budgets, policy manifests
/// and simulator configs have their own loaders, tested in tests/tests/rt_config_files.rs).
fn is_runtime_config(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "toml")
        && FileKind::detect(p, &std::fs::read_to_string(p).unwrap()) == FileKind::Run
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
            // Every message names the file and, when the key is in it, its line.
            assert!(!err.trim().is_empty(), "{name}: empty message");
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

/// A minimal valid config with `key = value` put into `[policy]`.
fn with_policy_key(key: &str, value: &str) -> String {
    let base = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid-minimal.toml"),
    )
    .unwrap();
    base.edit(
        "kind = \"scripted\"\n",
        &format!("kind = \"scripted\"\n{key} = {value}\n"),
    )
}

#[test]
fn a_100_mb_string_value_gives_a_short_error_with_its_line() {
    let huge = format!("\"{}\"", "x".repeat(100 << 20));
    // A range check that quotes the value (line 8), and a schema error (serde
    // quotes the unknown variant) on line 7.
    let cases = [
        (
            with_policy_key("execution_provider", &huge),
            "huge.toml:8: key `policy.execution_provider`",
        ),
        (
            with_policy_key("seed", "1").edit("kind = \"scripted\"", &format!("kind = {huge}")),
            "huge.toml:7: key `policy.kind`",
        ),
    ];
    for (text, start) in cases {
        let err = Config::parse_str(&text, Path::new("huge.toml"))
            .err()
            .unwrap_or_else(|| panic!("{start}: a 100 MB value must be refused"))
            .to_string();
        assert!(
            err.len() <= 600,
            "{start}: a {} byte message: {}...",
            err.len(),
            &err[..300.min(err.len())]
        );
        assert!(err.starts_with(start), "{err}");
        assert!(err.contains("more bytes not shown"), "{err}");
    }
}

/// A config path that names no regular file, or one too large to be a config, is
/// refused before it is read: `/dev/zero` and a FIFO would otherwise read (or block)
/// forever.
#[test]
fn a_path_that_is_not_a_config_file_is_refused_without_reading_it() {
    let dir = std::env::temp_dir().join(format!("chunkrt-config-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo.toml");
    let _ = std::fs::remove_file(&fifo);
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let big = dir.join("big.toml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(5 << 20)
        .unwrap();
    let binary = dir.join("model.onnx");
    std::fs::write(&binary, b"\x08\x08\x12\x07pytorch\xff\xfe").unwrap();
    for (path, expected) in [
        (Path::new("/dev/zero").to_path_buf(), "/dev/zero: is a character device, not a regular file: the run configuration is read from a regular file"),
        (dir.clone(), "is a directory, not a regular file"),
        (fifo, "fifo.toml: is a FIFO (named pipe), not a regular file"),
        (big, "big.toml: 5.0 MiB is more than the 4.0 MiB a run configuration may have"),
        (binary, "model.onnx: a binary file (an ONNX model?), not TOML text"),
    ] {
        let err = Config::load(&path).err().unwrap().to_string();
        assert!(err.contains(expected), "{}: {err}", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
