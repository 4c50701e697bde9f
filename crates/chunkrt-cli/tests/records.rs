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

/// `rt-config/sim.toml` with `executor.max_chunk_age_ms = age` and its manifest
/// path made absolute, written into `dir`; both edits must match.
fn sim_with_age(dir: &std::path::Path, age: &str) -> PathBuf {
    let sim = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    let text = sim
        .edit(
            "max_chunk_age_ms = 200.0",
            &format!("max_chunk_age_ms = {age}"),
        )
        .edit(
            "manifest = \"",
            &format!("manifest = \"{}/rt-config/", repo().display()),
        );
    let file = dir.join(format!("age-{age}.toml"));
    std::fs::write(&file, text).unwrap();
    file
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
        let file = sim_with_age(&dir, age);
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

/// Issue 37: the config check can only assume the inference time (one tick without
/// `policy.deadline_ms`), so a slower policy passed it and then expired chunks with
/// nothing naming the cause. With 45 ms of inference injected, 100 ms passes the
/// check (80) and the run says, from the inference time it measures, which value
/// holds: a warning on stderr and a `config_warning` event. Judged by what the
/// executor did: that run expired chunks, and a run with the value the warning
/// named says nothing and expires none at any inference time up to the one the value
/// is derived for (the value minus the chunk period in ticks). A chunk expires when
/// its successor's inference is slower than that; the warning is derived from the
/// median, so where this run's own slowest inference went past it (a host busier than
/// the first run's, issue 37: two expiries at 120 ms beside a cargo build), the
/// expiries are not the value's to answer for, and the test says so instead.
#[test]
fn a_chunk_age_short_of_the_measured_inference_time_is_said_with_the_value_that_holds() {
    let dir = temp_dir("records", "measured-age");
    let run = |age: &str| {
        let file = sim_with_age(&dir, age);
        let out = dir.join(format!("run-{age}"));
        let o = Command::new(bin())
            .args(["run", "--quiet", "--no-plots", "--duration", "4s"])
            .args(["--inject-inference-ms", "45", "--config"])
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{err}");
        let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
        let expired = report["counters"]["chunks_expired"].as_u64().unwrap();
        let slowest_ms = report["metrics"]["inference_latency"]["max"]
            .as_f64()
            .unwrap()
            * 1e-6;
        let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
        (err, expired, events, slowest_ms)
    };
    let (err, expired, events, _) = run("100.0");
    let said = err
        .lines()
        .find(|l| l.starts_with("chunkrt: warning: executor.max_chunk_age_ms 100 expires"))
        .unwrap_or_else(|| panic!("no warning: {err}"));
    assert!(said.contains("ms median"), "{said}");
    assert!(events.contains("\"config_warning\""), "{events}");
    assert!(
        expired > 0,
        "100 ms expired no chunk: the warning was wrong"
    );
    let fix = said
        .split("set it to ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap_or_else(|| panic!("no value in: {said}"));
    let (err, expired, events, slowest_ms) = run(&format!("{fix}.0"));
    assert!(!err.contains("warning: executor.max_chunk_age_ms"), "{err}");
    assert!(!events.contains("\"config_warning\""), "{events}");
    // The value covers the chunk period (50 ms, 3 ticks of 20 ms) and an inference
    // time of up to the rest.
    let fix_ms: f64 = fix.parse().unwrap();
    let supported_ms = fix_ms - 60.0;
    if slowest_ms <= supported_ms {
        assert_eq!(
            expired, 0,
            "{fix} ms, as the warning said, still expired chunks though no inference took \
             over {supported_ms} ms (slowest {slowest_ms:.1} ms)"
        );
    } else {
        eprintln!(
            "records: at {fix} ms an inference took {slowest_ms:.1} ms, over the \
             {supported_ms} ms the value covers: {expired} expired, not judged"
        );
    }
}
