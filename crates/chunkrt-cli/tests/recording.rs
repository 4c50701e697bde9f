//! The full-rate recording (`recording.mcap`) read by an independent reader: the
//! Python `mcap` package (scripts/read_recording.py, installed in .venv by
//! scripts/setup.sh). Its cycles reproduce the report's cycle count, its gate
//! events the gate's per-constraint counts and its cycles' gate masks the number
//! of cycles the gate acted on, across rotated segments; its chunks are every
//! chunk the inference thread published. Without a Python that has
//! `mcap` the test prints a visible SKIP, and fails under `CI=true`.

mod common;

use chunkrt_testkit::edit::Edit;
use common::repo;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The Python with `mcap`, or a visible SKIP (a failure under CI=true).
fn python_or_skip(test: &str) -> Option<PathBuf> {
    let py = common::python_with_mcap();
    if py.is_none() {
        chunkrt_testkit::missing_prerequisite(
            test,
            "no python3 with the mcap package (pip install -r scripts/requirements-test.txt, \
             or set CHUNKRT_PYTHON; scripts/setup.sh installs it)",
        );
    }
    py
}

#[test]
fn an_independent_reader_reproduces_the_reports_counts_from_the_recording() {
    let Some(py) = python_or_skip("an_independent_reader_reproduces_the_reports_counts") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("chunkrt-recording-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Joint speed limits below the policy's: the gate acts all along. Segments of
    // 40 KiB: the recording rotates a few times in 3 s.
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml")).unwrap();
    let limits = "max_vel_rad_s = [2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61]";
    let status = "status_interval_ms = 1000.0";
    assert!(
        text.contains(limits) && text.contains(status),
        "sim-scripted.toml changed"
    );
    let text = text
        .edit(
            limits,
            "max_vel_rad_s = [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]",
        )
        .edit(status, &format!("{status}\nrecord_segment_mb = 0.04"));
    let config = dir.join("gated.toml");
    std::fs::write(&config, text).unwrap();
    let out = dir.join("run");
    let run = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["run", "--duration", "3s", "--quiet", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    let files: Vec<PathBuf> = report["recording"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| out.join(f.as_str().unwrap()))
        .collect();
    assert!(files.len() >= 2, "rotated: {files:?}");
    let seen = read_recording(&py, &files);
    // A closed recording reads to its footer: nothing cut short.
    assert_eq!(seen["cut_short"], serde_json::json!([]), "{seen}");

    let c = &report["counters"];
    assert_eq!(c["recording_dropped"], 0, "{c}");
    let cycles = c["cycles"].as_u64().unwrap();
    assert!(cycles > 100, "{c}");
    assert_eq!(seen["messages"]["/chunkrt/cycle"], cycles, "{seen}");
    assert_eq!(seen["cycles_distinct"], cycles, "{seen}");
    // The file's own statistics agree with its messages.
    assert_eq!(seen["statistics"], seen["messages"], "{seen}");
    assert_eq!(seen["gate_cycles"], c["gate_interventions"], "{seen}");
    assert_eq!(seen["log_times_monotonic_per_topic"], true, "{seen}");
    // Every gate intervention is a recorded event, per constraint, as the gate
    // counted it (when the event ring dropped nothing).
    assert_eq!(c["ring_drops_event"], 0, "{c}");
    for (constraint, n) in report["gate"].as_object().unwrap() {
        let recorded = seen["gate"].get(constraint).cloned().unwrap_or(0.into());
        assert_eq!(&recorded, n, "gate {constraint}: {seen}");
    }
    // The events of events.jsonl are all in the recording too.
    let logged = std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .count() as u64;
    let gate_events: u64 = report["gate"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(
        seen["messages"]["/chunkrt/events"],
        logged + gate_events,
        "{seen}"
    );
    // Every published chunk, whole: as many as the inference thread counted, in
    // order, each with len setpoints of dof positions.
    assert_eq!(c["ring_drops_chunk"], 0, "{c}");
    let published = c["chunks_published"].as_u64().unwrap();
    assert!(published > 20, "{c}");
    assert_eq!(seen["messages"]["/chunkrt/chunk"], published, "{seen}");
    assert_eq!(seen["chunk_seq_last"], published, "{seen}");
    assert_eq!(seen["chunk_seqs_increasing"], true, "{seen}");
    assert_eq!(seen["chunk_shapes_ok"], true, "{seen}");
    // Each inference call's observation is the measurement and the command of the
    // cycle that captured it, as that cycle's own message recorded them.
    let o = &seen["observations"];
    assert!(o["given"].as_u64().unwrap() >= published, "{o}");
    assert_eq!(o["matched"], o["given"], "{o}");
    assert_eq!(o["max_abs_err_rad"], 0.0, "{o}");
    // The wall-clock offset is in every segment.
    let clock = seen["clock"].as_array().unwrap();
    assert_eq!(clock.len(), files.len(), "{seen}");
    assert_eq!(clock[0]["clock"], "CLOCK_MONOTONIC");
    assert!(clock[0]["wall_minus_mono_ns"]
        .as_str()
        .unwrap()
        .parse::<i64>()
        .is_ok());
    assert_setpoints_are_the_chunks(&seen, 20);
}

/// Runs scripts/read_recording.py on `files` with sim-scripted.toml's blend.
fn read_recording(py: &Path, files: &[PathBuf]) -> serde_json::Value {
    let blend = SCRIPTED_BLEND_MS.to_string();
    common::read_recording(py, &["--blend-ms", &blend], files)
}

/// `executor.blend_ms` of rt-config/sim-scripted.toml (checked against the file).
const SCRIPTED_BLEND_MS: f64 = 40.0;

/// Past each seam's blend, every executed setpoint is the recorded chunk's spline
/// (rebuilt by the reader from the chunk's setpoints): the recording holds what
/// was played, and the executor plays what the policy proposed.
fn assert_setpoints_are_the_chunks(seen: &serde_json::Value, at_least: u64) {
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml")).unwrap();
    assert!(
        text.contains(&format!("blend_ms = {SCRIPTED_BLEND_MS:.1}")),
        "sim-scripted.toml's blend changed"
    );
    let s = &seen["setpoints_from_chunks"];
    assert_eq!(s["chunk_missing"], 0, "{s}");
    assert!(s["checked"].as_u64().unwrap() >= at_least, "{s}");
    assert!(s["in_blend"].as_u64().unwrap() > 0, "{s}");
    // Rounding only: the spline is built in another order of operations.
    let err = s["max_abs_err_rad"].as_f64().unwrap();
    assert!(
        err < 1e-9,
        "setpoint differs from its chunk by {err} rad: {s}"
    );
}

#[test]
fn at_1_ms_the_setpoints_between_the_knots_are_the_recorded_chunks_splines() {
    let Some(py) = python_or_skip("at_1_ms_the_setpoints_between_the_knots") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("chunkrt-setpoints-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["run", "--duration", "2s", "--quiet", "--bus-period-ms", "1"])
        .arg("--config")
        .arg(repo().join("rt-config/sim-scripted.toml"))
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let seen = read_recording(&py, &[dir.join("recording.mcap")]);
    // 2 s at 1 ms, a chunk every 40-60 ms of which the first 40 ms blend: a few
    // hundred cycles between seams, most of them between the 20 ms knots.
    assert_setpoints_are_the_chunks(&seen, 200);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn record_file_takes_the_recording_and_an_existing_one_is_refused() {
    let dir = std::env::temp_dir().join(format!("chunkrt-record-flag-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = dir.join("recordings/arm.mcap");
    let run = |out: &str, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_chunkrt"))
            .args(["run", "--duration", "1s", "--quiet", "--config"])
            .arg(repo().join("rt-config/sim-scripted.toml"))
            .arg("--out")
            .arg(dir.join(out))
            .arg("--record")
            .arg(&file)
            .args(extra)
            .output()
            .unwrap()
    };
    let first = run("a", &[]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.starts_with(b"\x89MCAP0\r\n"), "an MCAP file");
    assert!(
        bytes.ends_with(b"\x89MCAP0\r\n"),
        "closed: footer and magic"
    );
    assert!(!dir.join("a/recording.mcap").exists());
    let report: serde_json::Value = common::read_json_checked(&dir.join("a/report.json"));
    assert_eq!(report["recording"]["files"][0], file.display().to_string());
    assert!(report["counters"]["recording_messages"].as_u64().unwrap() > 40);

    let second = run("b", &[]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{err}");
    assert!(
        err.contains("already exists") && err.contains("--overwrite"),
        "{err}"
    );
    assert!(err.contains("nothing was moved"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "untouched");

    let third = run("c", &["--overwrite"]);
    assert!(
        third.status.success(),
        "{}",
        String::from_utf8_lossy(&third.stderr)
    );
}
