//! The operator's command channel through the binary (issue 40): `[operator] socket`, and
//! `stdin = true` with the keys, on a run of two episodes (the flow policy on the
//! simulated arm, frozen). Mid-way through the first episode an operator marks it
//! intervened and stops it; re-armed, the run goes on with the second.
//!
//! Judged on the records: the first episode ends as `operator_stop`, intervened once,
//! with a mode event `OperatorHold` and an intervention record of the mark; the second
//! episode, after the re-arm, reaches its goal; an unknown command is answered as such.

mod common;

use common::{flow_sim_config_text, output_text, temp_dir};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn ask(sock: &std::path::Path, command: &str) -> String {
    let mut s = UnixStream::connect(sock).unwrap();
    writeln!(s, "{command}").unwrap();
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).unwrap();
    line
}

/// The two-episode run with `[operator]` set to `operator` (a TOML body), started.
fn start(dir: &Path, operator: &str) -> Child {
    let text = flow_sim_config_text()
        + &format!(
            "\n[operator]\n{operator}\n\n[episodes]\ncount = 2\n\
             starts_rad = [[0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8]]\n\
             goals_rad = [[0.9, 0.1, -0.4, -1.2, 0.5, 1.0, 0.2]]\n\
             time_limit_s = 20.0\ntolerance_rad = 0.05\n"
        );
    let config = dir.join("operator.toml");
    std::fs::write(&config, text).unwrap();
    std::process::Command::new(env!("CARGO_BIN_EXE_chunkrt"))
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
        .arg(dir.join("run"))
        .env("CHUNKRT_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(path: &Path) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_operator_marks_and_stops_an_episode_and_the_run_goes_on_after_the_rearm() {
    let dir = temp_dir("operator", "stop");
    let sock = dir.join("operator.sock");
    let child = start(&dir, &format!("socket = \"{}\"", sock.display()));
    wait_for(&sock);
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
    judge(&dir.join("run"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same through standard input, with the keys: `i`, `s`, then `r`; an endless line
/// in between is refused in pieces and changes nothing.
#[test]
fn an_operator_at_the_terminal_does_the_same_with_keys_on_standard_input() {
    let dir = temp_dir("operator", "stdin");
    let mut child = start(&dir, "stdin = true");
    // The recording opens as the loop starts.
    wait_for(&dir.join("run/recording.mcap"));
    std::thread::sleep(Duration::from_millis(1000));
    let mut input = child.stdin.take().unwrap();
    writeln!(input, "i").unwrap();
    writeln!(input, "s").unwrap();
    input.write_all(&vec![b'x'; 5000]).unwrap();
    writeln!(input).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    writeln!(input, "r").unwrap();
    drop(input); // the channel closes; the run goes on to its end
    let o = child.wait_with_output().unwrap();
    let text = output_text(&o);
    assert!(o.status.success(), "{text}");
    for answer in [
        "operator: ok: the running episode is marked intervened",
        "operator: ok: the policy holds off until rearm",
        "operator: ok: re-armed",
    ] {
        assert_eq!(text.matches(answer).count(), 1, "{answer}: {text}");
    }
    // 5000 bytes in lines of at most 1024: five pieces, each refused.
    assert_eq!(
        text.matches("operator: error: unknown command").count(),
        5,
        "{text}"
    );
    judge(&dir.join("run"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The first episode ended as the operator's stop, marked once, with its records; the
/// second, after the re-arm, reached its goal.
fn judge(out: &Path) {
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
}
