//! `[live_view]` (issue 59): the recording's channels published live over the Foxglove
//! WebSocket protocol, received during a run of the real binary by an independent
//! client of the protocol (`scripts/foxglove_client.py`, Python `websockets`): every
//! advertised channel is the recording's (topic, schema name, JSON Schema, encoding, as
//! `recording.mcap` holds them), each carries messages at most at `rate_hz` and at a
//! good part of it, and each message is byte for byte one the recording wrote. A client
//! past `max_clients` is closed; a non-loopback address is refused. `CHUNKRT_BIN` runs
//! them against another build (the one before the change refuses `[live_view]`).

mod common;

use common::{free_port, repo, sim_with};
use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("live-view", name)
}

fn start_run(config: &Path, out: &Path, duration: &str) -> Child {
    Command::new(common::bin())
        .args([
            "run",
            "--quiet",
            "--no-plots",
            "--duration",
            duration,
            "--config",
        ])
        .arg(config)
        .arg("--out")
        .arg(out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_listening(port: u16) {
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "nothing listens on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn client(py: &Path, port: u16, seconds: f64) -> Command {
    let mut c = Command::new(py);
    c.arg(repo().join("scripts/foxglove_client.py"))
        .arg(format!("ws://127.0.0.1:{port}"))
        .args(["--seconds", &seconds.to_string()]);
    c
}

/// Every message of `recording.mcap` per topic (its payloads), and each topic's schema
/// (name, encoding, text) and message encoding.
type Recorded = BTreeMap<String, (Vec<Vec<u8>>, (String, String, String, String))>;

fn recorded(path: &Path) -> Recorded {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Recorded::new();
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        let s = m.channel.schema.as_ref().unwrap();
        let schema = (
            s.name.clone(),
            s.encoding.clone(),
            String::from_utf8(s.data.to_vec()).unwrap(),
            m.channel.message_encoding.clone(),
        );
        out.entry(m.channel.topic.clone())
            .or_insert_with(|| (Vec::new(), schema))
            .0
            .push(m.data.to_vec());
    }
    out
}

#[test]
fn a_foxglove_client_receives_every_channel_of_the_recording_at_its_rate() {
    let Some(py) = common::python_that_imports("websockets") else {
        chunkrt_testkit::missing_prerequisite(
            "live_view: a Foxglove protocol client",
            "a Python with websockets (scripts/setup.sh makes .venv)",
        );
        return;
    };
    let dir = temp_dir("rate");
    let port = free_port();
    let rate_hz = 10.0;
    // A stall of the control thread now and then: chunks expire and the mode changes,
    // so the events channel carries messages too.
    let config = sim_with(
        &dir,
        "sim.toml",
        &format!(
            "[live_view]\nlisten = \"127.0.0.1:{port}\"\nrate_hz = {rate_hz}\n\
             [inject]\ncycle_stall_ms = 300.0\ncycle_stall_every = 60"
        ),
    );
    let out = dir.join("run");
    let mut run = start_run(&config, &out, "10s");
    wait_listening(port);
    let seconds = 4.0;
    let o = client(&py, port, seconds).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(common::wait(&mut run, Duration::from_secs(120)), Some(0));
    let got: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rec = recorded(&out.join("recording.mcap"));

    // The channels advertised are the recording's, as it holds them.
    let mut advertised: Vec<String> = Vec::new();
    for ch in got["channels"].as_array().unwrap() {
        let topic = ch["topic"].as_str().unwrap().to_string();
        let (_, (name, enc, schema, msg_enc)) = rec
            .get(&topic)
            .unwrap_or_else(|| panic!("{topic} advertised, not in the recording"));
        assert_eq!(ch["schemaName"], name.as_str(), "{topic}");
        assert_eq!(ch["schemaEncoding"], enc.as_str(), "{topic}");
        assert_eq!(ch["schema"], schema.as_str(), "{topic}");
        assert_eq!(ch["encoding"], msg_enc.as_str(), "{topic}");
        advertised.push(topic);
    }
    advertised.sort();
    let in_recording: Vec<String> = rec.keys().cloned().collect();
    assert_eq!(
        advertised, in_recording,
        "the channels differ from the recording's"
    );

    // Every channel carried messages, each one the recording's own, at most rate_hz
    // (the events: every one) and at a good part of it.
    let most = (rate_hz * seconds).ceil() as u64 + 1;
    for topic in &advertised {
        let t = &got["topics"][topic.as_str()];
        let n = t["count"].as_u64().unwrap_or(0);
        assert!(n > 0, "{topic}: no message in {seconds} s: {got}");
        if topic != "/chunkrt/events" {
            assert!(
                n <= most,
                "{topic}: {n} messages in {seconds} s, over {rate_hz} Hz"
            );
            assert!(
                n as f64 >= rate_hz * seconds / 4.0,
                "{topic}: {n} messages in {seconds} s, far under {rate_hz} Hz"
            );
        }
        for p in t["payloads"].as_array().unwrap() {
            let p = p.as_str().unwrap().as_bytes();
            assert!(
                rec[topic].0.iter().any(|r| r == p),
                "{topic}: a message the recording does not hold: {}",
                String::from_utf8_lossy(p)
            );
        }
    }
}

#[test]
fn a_client_past_max_clients_is_closed_and_a_remote_address_is_refused() {
    let Some(py) = common::python_that_imports("websockets") else {
        chunkrt_testkit::missing_prerequisite(
            "live_view: a Foxglove protocol client",
            "a Python with websockets (scripts/setup.sh makes .venv)",
        );
        return;
    };
    let dir = temp_dir("clients");
    let port = free_port();
    let config = sim_with(
        &dir,
        "sim.toml",
        &format!("[live_view]\nlisten = \"127.0.0.1:{port}\"\nmax_clients = 1"),
    );
    let out = dir.join("run");
    let mut run = start_run(&config, &out, "10s");
    wait_listening(port);
    let first = client(&py, port, 4.0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Until the first holds its place (it has subscribed and receives).
    std::thread::sleep(Duration::from_millis(1500));
    let second = client(&py, port, 1.0).output().unwrap();
    let first = first.wait_with_output().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        !second.status.success(),
        "a second client was served with max_clients = 1: {}",
        String::from_utf8_lossy(&second.stdout)
    );
    assert_eq!(common::wait(&mut run, Duration::from_secs(120)), Some(0));

    let config = sim_with(&dir, "sim.toml", "[live_view]\nlisten = \"0.0.0.0:8765\"");
    let o = Command::new(common::bin())
        .arg("validate")
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("live_view.listen") && stderr.contains("not a loopback address"),
        "{stderr}"
    );
}
