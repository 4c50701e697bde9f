//! The `chunkrt` binary as a user meets it: exit statuses and error messages.

use chunkrt_testkit::edit::Edit;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chunkrt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("chunkrt-cli-{name}-{}", std::process::id()));
    // A directory left by an earlier process with the same id holds a run.
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_misspelled_key_names_the_key_and_the_file_and_exits_2() {
    let dir = temp_dir("typo");
    let text = std::fs::read_to_string(repo().join("rt-config/sim.toml"))
        .unwrap()
        .edit("blend_ms = ", "blend_msec = ");
    let file = dir.join("typo.toml");
    std::fs::write(&file, text).unwrap();
    for args in [vec!["validate"], vec!["run", "--config"]] {
        let out = chunkrt().args(&args).arg(&file).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("executor.blend_msec"), "{err}");
        assert!(err.contains("typo.toml"), "{err}");
        assert!(err.contains("unknown field"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn usage_errors_exit_2_without_a_panic() {
    for args in [
        vec!["run", "--duration", "ten"],
        vec!["run", "--bus-period-ms", "50", "--duration", "1s"],
        vec!["frobnicate"],
        vec!["run", "--config", "/nonexistent/chunkrt.toml"],
    ] {
        let out = chunkrt().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn validate_accepts_the_default_config() {
    let out = chunkrt()
        .arg("validate")
        .arg(repo().join("rt-config/sim.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("OK"));
}

#[test]
fn a_short_run_writes_a_report_with_the_documented_schema() {
    let dir = temp_dir("run");
    let out = chunkrt()
        .args(["run", "--duration", "2s", "--quiet", "--out"])
        .arg(&dir)
        .arg("--config")
        .arg(repo().join("rt-config/sim.toml"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("wake_latency"), "{stdout}");
    let report: serde_json::Value =
        chunkrt_tests::schema::read_json_checked(&dir.join("report.json"));
    for key in ["kernel", "preempt", "sched_fifo", "mlockall"] {
        assert!(report["host"].get(key).is_some(), "host.{key}");
    }
    assert!(report["duration_s"].as_f64().unwrap() > 1.5);
    for m in [
        "wake_latency",
        "cycle_time",
        "chunk_age",
        "inference_latency",
    ] {
        let s = &report["metrics"][m];
        assert_eq!(s["unit"], "ns", "{m}");
        for k in ["count", "min", "p50", "p90", "p99", "p999", "max", "mean"] {
            assert!(s.get(k).is_some(), "metrics.{m}.{k}");
        }
    }
    for c in [
        "cycles",
        "deadline_overruns",
        "chunks_published",
        "chunks_used",
        "chunks_expired",
        "fallback_entries",
        "ring_drops",
    ] {
        assert!(report["counters"].get(c).is_some(), "counters.{c}");
    }
    assert!(report["counters"]["cycles"].as_u64().unwrap() > 50);
}

#[test]
fn a_1ms_bus_period_plays_the_20ms_setpoint_grid() {
    let dir = temp_dir("bus1ms");
    let out = chunkrt()
        .args([
            "run",
            "--duration",
            "2s",
            "--quiet",
            "--bus-period-ms",
            "1",
            "--out",
        ])
        .arg(&dir)
        .arg("--config")
        .arg(repo().join("rt-config/sim-scripted.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        chunkrt_tests::schema::read_json_checked(&dir.join("report.json"));
    assert_eq!(report["config"]["period_ms"], 1.0);
    let cycles = report["counters"]["cycles"].as_u64().unwrap();
    assert!(cycles > 1500, "about 2000 cycles at 1 ms, got {cycles}");
    assert!(report["counters"]["chunks_used"].as_u64().unwrap() > 20);
    assert_eq!(report["counters"]["chunks_expired"], 0);
}
