//! The `chunkrt` process under faults a user causes: SIGINT, SIGTERM and SIGHUP mid-run (the
//! arm is brought to rest, the report is written, exit 0) and an output directory
//! that cannot be written (a clear message, exit 2, nothing moved).

mod common;

use common::{lines_of, repo, wait};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("signals", name)
}

/// Starts a long run on the simulated arm with the scripted policy, live status on.
fn start_run(out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["run", "--duration", "120s", "--config"])
        .arg(repo().join("rt-config/sim-scripted.toml"))
        .arg("--out")
        .arg(out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chunkrt starts")
}

/// Stops a run with `signal` once it plays, after sending it the signals in `first`;
/// checks the controlled stop and returns the output directory.
fn stop_mid_run_with(first: &[libc::c_int], signal: libc::c_int, name: &str) -> PathBuf {
    let out = temp_dir(name);
    let mut child = start_run(&out);
    let lines = lines_of(&mut child);
    // Mid-run means playing: wait for the live status line to say so (not for a time).
    let mut seen = Vec::new();
    let playing = loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => {
                let hit = l.contains("mode=Playing");
                seen.push(l);
                if hit {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    if !playing {
        let _ = child.kill();
        panic!("the run never reported Playing:\n{}", seen.join("\n"));
    }
    for &sig in first.iter().chain([&signal]) {
        // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
        let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0);
    }
    let code = wait(&mut child, Duration::from_secs(60));
    let rest: Vec<String> = lines.try_iter().collect();
    assert_eq!(
        code,
        Some(0),
        "exit status after {name}:\n{}",
        rest.join("\n")
    );
    assert!(!rest.iter().any(|l| l.contains("panicked")), "{rest:?}");

    let report = common::read_json_checked(&out.join("report.json"));
    assert!(
        report["duration_s"].as_f64().unwrap() < 100.0,
        "stopped by the signal"
    );
    let modes: Vec<&serde_json::Value> = report["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "mode")
        .collect();
    assert!(
        modes
            .iter()
            .any(|m| m["to"] == "Decelerating" && m["reason"] == "Shutdown"),
        "the stop is a logged Shutdown: {modes:?}"
    );
    let last = modes.last().unwrap();
    assert!(
        last["to"] == "Holding" || last["to"] == "SafeStop",
        "the arm ends at rest: {last}"
    );
    // The same events are in events.jsonl, and the operator's stop with them.
    let log = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    assert!(log.contains("\"Shutdown\""), "{log}");
    assert!(log.contains("\"event\":\"operator_stop\""), "{log}");
    // The operator's stop is an intervention record, cited by its digest.
    let records = report["extra"]["interventions"]
        .as_array()
        .or_else(|| report["interventions"].as_array())
        .expect("the report lists the interventions");
    let stop = records
        .iter()
        .find(|r| r["kind"] == "operator_stop")
        .unwrap_or_else(|| panic!("no operator_stop record: {records:?}"));
    let file = out.join(stop["file"].as_str().unwrap());
    let head = std::fs::read_to_string(&file).unwrap();
    assert!(head.starts_with("{"), "{}", file.display());
    assert!(
        head.contains("\"intervention\":\"operator_stop\""),
        "{}",
        file.display()
    );
    // Records complete: every cycle that ran is recorded or counted as dropped.
    let c = &report["counters"];
    assert_eq!(
        c["cycles_run"].as_u64().unwrap(),
        c["cycles"].as_u64().unwrap() + c["ring_drops_cycle"].as_u64().unwrap()
    );
    out
}

#[test]
fn sigusr1_is_an_operator_rearm_logged_in_the_record_not_a_kill() {
    // SIGUSR1's default action would kill the process; chunkrt takes it as a re-arm
    // (ControlLoop::rearm, checked before the stop flag in the same cycle).
    let out = stop_mid_run_with(&[libc::SIGUSR1], libc::SIGINT, "sigusr1");
    let log = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    assert!(log.contains("\"Rearmed\""), "{log}");
}

#[test]
fn sigint_mid_run_brings_the_arm_to_rest_writes_the_report_and_exits_0() {
    stop_mid_run_with(&[], libc::SIGINT, "sigint");
}

#[test]
fn sigterm_mid_run_brings_the_arm_to_rest_writes_the_report_and_exits_0() {
    stop_mid_run_with(&[], libc::SIGTERM, "sigterm");
}

#[test]
fn sighup_mid_run_is_a_stop_like_sigterm() {
    // What a dropped SSH session sends: the default action would kill the process
    // mid-motion, with no stop sequence and no report.
    stop_mid_run_with(&[], libc::SIGHUP, "sighup");
}

#[test]
fn an_unwritable_output_directory_is_refused_before_anything_moves() {
    let dir = temp_dir("unwritable");
    // A path below a regular file cannot be created, even by root (for whom
    // permission bits would not stop the write).
    let file = dir.join("not-a-directory");
    std::fs::write(&file, b"").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["run", "--duration", "2s", "--quiet", "--config"])
        .arg(repo().join("rt-config/sim-scripted.toml"))
        .arg("--out")
        .arg(file.join("run"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("output directory"), "{err}");
    assert!(err.contains("not-a-directory/run"), "{err}");
    assert!(err.contains("nothing was moved"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // Nothing was brought up: the start banner never appeared.
    assert!(!err.contains("stops safely"), "{err}");
}
