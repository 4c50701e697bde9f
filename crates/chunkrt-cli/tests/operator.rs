//! The operator's command channel through the binary (issue 40): `[operator] socket` on
//! a run of two episodes (the flow policy on the simulated arm, frozen). Mid-way through
//! the first episode an operator marks it intervened and stops it; re-armed, the run
//! goes on with the second.
//!
//! Judged on the records: the first episode ends as `operator_stop`, intervened once,
//! with a mode event `OperatorHold` and an intervention record of the mark; the second
//! episode, after the re-arm, reaches its goal; an unknown command is answered as such.

mod common;

use common::{flow_sim_config_text, output_text, temp_dir};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

fn ask(sock: &std::path::Path, command: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    writeln!(s, "{command}").unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line
}

#[test]
fn an_operator_marks_and_stops_an_episode_and_the_run_goes_on_after_the_rearm() {
    let dir = temp_dir("operator", "stop");
    let sock = dir.join("operator.sock");
    let text = flow_sim_config_text()
        + &format!(
            "\n[operator]\nsocket = \"{}\"\n\n[episodes]\ncount = 2\n\
             starts_rad = [[0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8]]\n\
             goals_rad = [[0.9, 0.1, -0.4, -1.2, 0.5, 1.0, 0.2]]\n\
             time_limit_s = 20.0\ntolerance_rad = 0.05\n",
            sock.display()
        );
    let config = dir.join("operator.toml");
    std::fs::write(&config, text).unwrap();
    let out = dir.join("run");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args([
            "run",
            "--duration",
            "0",
            "--quiet",
            "--no-plots",
            "--config",
        ])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "no socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first episode starts where the arm is (a reset of a few hundred ms) and
    // takes over two seconds to its goal: one second in, it runs.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(ask(&sock, "intervene").starts_with("ok"));
    assert!(ask(&sock, "stop").starts_with("ok"));
    assert!(ask(&sock, "launch").starts_with("error: unknown command"));
    std::thread::sleep(Duration::from_millis(1000));
    assert!(ask(&sock, "rearm").starts_with("ok"));
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", output_text(&o));

    let events: Vec<Value> = std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let eps: Vec<&Value> = events.iter().filter(|e| e["event"] == "episode").collect();
    assert_eq!(eps.len(), 2, "{events:?}");
    assert_eq!(eps[0]["outcome"], "operator_stop", "{}", eps[0]);
    assert_eq!(eps[0]["reason"], "OperatorHold", "{}", eps[0]);
    assert_eq!(eps[0]["intervened"], 1, "{}", eps[0]);
    assert_eq!(eps[1]["outcome"], "success", "{}", eps[1]);
    assert_eq!(eps[1]["intervened"], 0, "{}", eps[1]);
    assert!(events
        .iter()
        .any(|e| e["event"] == "operator_intervention" && e["episode"] == 0));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let records = report["interventions"].as_array().expect("records");
    assert!(
        records.iter().any(|r| r["kind"] == "operator_intervention"),
        "{records:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "withdrawal" && r["detail"] == "OperatorHold"),
        "{records:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
