//! Two runs of the runtime in one process, as `chunkrt gap` and `chunkrt margin` run
//! them, with `[operator] socket` (issue 56): an operator's `stop` in the first run, never
//! re-armed, does not hold the second (each run starts without a hold), and one listener
//! serves both: the same socket, one listener thread. Real threads, the simulated arm,
//! the socket spoken to as an operator does. (Its own test binary: the operator's channel
//! is process-wide.)

use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_tests::sim_config;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

fn ask(sock: &Path, command: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    writeln!(s, "{command}").unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line
}

/// The reasons of the report's mode events.
fn reasons(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["event"] == "mode")
        .map(|e| e["reason"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Threads of this process whose name begins as the listener's (the kernel keeps 15
/// bytes of a name).
fn listener_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "chunkrt-operato")
        .count()
}

#[test]
fn a_later_run_starts_without_an_earlier_runs_stop_and_one_listener_serves_both() {
    let dir = std::env::temp_dir().join(format!("chunkrt-operator-runs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("op.sock");
    let cfg = sim_config(|c| {
        c.operator = Some(serde_json::from_value(serde_json::json!({ "socket": sock })).unwrap());
    });
    let opts = |s: f64| RunOptions {
        duration: Some(Duration::from_secs_f64(s)),
        ..RunOptions::default()
    };
    // The first run: stopped by the operator a third of a second in (it plays from its
    // first chunk, 50 ms), never re-armed.
    let at = sock.clone();
    let operator = std::thread::spawn(move || {
        let t0 = Instant::now();
        while !at.exists() {
            assert!(t0.elapsed() < Duration::from_secs(30), "no socket");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(300));
        ask(&at, "stop")
    });
    let first = Runtime::from_config(&cfg).unwrap().run(&opts(0.8)).unwrap();
    let answer = operator.join().unwrap();
    assert!(answer.starts_with("ok"), "{answer}");
    assert!(
        reasons(&first.report.events).contains(&"OperatorHold".to_string()),
        "{:?}",
        first.report.events
    );
    let socket = std::fs::symlink_metadata(&sock).unwrap().ino();
    // The second run plays, with no hold.
    let second = Runtime::from_config(&cfg).unwrap().run(&opts(0.5)).unwrap();
    let events = &second.report.events;
    assert!(
        !reasons(events).contains(&"OperatorHold".to_string()),
        "{events:?}"
    );
    assert!(events.iter().any(|e| e["to"] == "Playing"), "{events:?}");
    assert_eq!(listener_threads(), 1);
    assert_eq!(std::fs::symlink_metadata(&sock).unwrap().ino(), socket);
    // Between runs a command has nothing to act on, and says so.
    let answer = ask(&sock, "stop");
    assert!(answer.starts_with("error: no run in progress"), "{answer}");
    let _ = std::fs::remove_dir_all(&dir);
}
