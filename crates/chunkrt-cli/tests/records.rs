//! Issue 37, records and the checks around them: a chunk-age limit that the timing of
//! the control and inference threads cannot hold is refused before a run.

mod common;

use chunkrt_testkit::edit::Edit;
use common::{repo, temp_dir};
use std::path::PathBuf;
use std::process::Command;

/// The binary under test: this build's, or `CHUNKRT_BIN` (another build, e.g. the one
/// before a change, to see these checks fail there).
fn bin() -> PathBuf {
    std::env::var_os("CHUNKRT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_chunkrt")))
}

/// Issue 37: `max_chunk_age_ms = 60` at a 20 ms bus was accepted and then expired chunks
/// every half second. The oracle is worked out by hand from rt-config/sim.toml: the
/// inference thread starts every 50 ms on the first 20 ms tick at or after its slot, so
/// two chunks' observations lie up to 60 ms apart, and the successor plays at least one
/// tick after that: 80 ms is the smallest sound limit.
#[test]
fn a_chunk_age_below_chunk_period_plus_ticks_is_refused_naming_cause_and_fix() {
    let dir = temp_dir("records", "age");
    let sim = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    assert!(sim.contains("period_ms = 20.0") && sim.contains("chunk_period_ms = 50.0"));
    let run = |age: &str| {
        let file = dir.join(format!("age-{age}.toml"));
        let text = sim
            .edit(
                "max_chunk_age_ms = 200.0",
                &format!("max_chunk_age_ms = {age}"),
            )
            .replace(
                "manifest = \"",
                &format!("manifest = \"{}/rt-config/", repo().display()),
            );
        std::fs::write(&file, text).unwrap();
        Command::new(bin())
            .arg("validate")
            .arg(&file)
            .output()
            .unwrap()
    };
    let out = run("60.0");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "60 ms at a 20 ms bus was accepted: {err}"
    );
    for needle in [
        "executor.max_chunk_age_ms",
        "control.period_ms 20",
        "inference.chunk_period_ms 50",
        "80 or more",
    ] {
        assert!(err.contains(needle), "expected `{needle}` in\n{err}");
    }
    let out = run("80.0");
    assert!(
        out.status.success(),
        "the smallest sound limit is refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
