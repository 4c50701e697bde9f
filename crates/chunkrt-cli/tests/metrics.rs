//! The `[metrics]` endpoint (issue 59) scraped by a real Prometheus server (Debian's
//! `prometheus`) during a run of the real binary: the series are there while the arm
//! moves and grow, and the values Prometheus stored last (the run's final values,
//! served for `linger_ms`) are the report's: every counter and gate count exactly, every
//! stage's percentiles from the same histograms. A non-loopback address is refused by
//! `validate`, a port already taken by `run` before anything moves. `CHUNKRT_BIN` runs
//! them against another build (the one before the change has no `[metrics]`: its
//! config is refused, and these fail there).

mod common;

use common::{free_port, sim_with};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("metrics", name)
}

/// An HTTP/1.0 GET; the body of a 200 answer.
fn http_get(port: u16, target: &str) -> Option<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(c, "GET {target} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    let (head, body) = s.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.to_string())
        .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_string()))
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus query's `data.result`.
fn query(port: u16, q: &str, at: Option<f64>) -> Vec<serde_json::Value> {
    let mut target = format!("/api/v1/query?query={}", percent(q));
    if let Some(t) = at {
        target.push_str(&format!("&time={t:.3}"));
    }
    let body = http_get(port, &target).unwrap_or_else(|| panic!("prometheus: {target}"));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// Prometheus scraping `127.0.0.1:target` every 250 ms; killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prometheus(dir: &Path, target: u16) -> Option<Prometheus> {
    let probe = Command::new("prometheus").arg("--version").output();
    if !probe.is_ok_and(|o| o.status.success()) {
        chunkrt_testkit::missing_prerequisite(
            "metrics: a real Prometheus server",
            "prometheus (Debian's prometheus package; scripts/setup.sh installs it)",
        );
        return None;
    }
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\nscrape_configs:\n  - job_name: chunkrt\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    let p = Prometheus { child, port };
    let t = Instant::now();
    while http_get(port, "/-/ready").is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "prometheus did not become ready: {}",
            std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Its scrape loop starts at its first target reload (seconds after it is ready):
    // wait for a first scrape (of nothing yet: "down") before the run starts.
    let t = Instant::now();
    loop {
        let health = http_get(port, "/api/v1/targets")
            .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
            .and_then(|v| {
                v["data"]["activeTargets"][0]["health"]
                    .as_str()
                    .map(String::from)
            });
        if health.as_deref().is_some_and(|h| h != "unknown") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "prometheus never scraped"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(p)
}

/// `(timestamp, value)` of every sample of `series` in the last two minutes.
fn samples(port: u16, series: &str) -> Vec<(f64, f64)> {
    let r = query(port, &format!("{series}[2m]"), None);
    let Some(first) = r.first() else {
        return Vec::new();
    };
    first["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_f64().unwrap(),
                p[1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn prometheus_scrapes_the_run_live_and_ends_with_the_reports_values() {
    let dir = temp_dir("scrape");
    let mport = free_port();
    let Some(prom) = prometheus(&dir, mport) else {
        return;
    };
    let config = sim_with(
        &dir,
        "sim.toml",
        &format!("[metrics]\nlisten = \"127.0.0.1:{mport}\"\nlinger_ms = 2000.0"),
    );
    let out = dir.join("run");
    let o = Command::new(common::bin())
        .args([
            "run",
            "--quiet",
            "--no-plots",
            "--duration",
            "4s",
            "--config",
        ])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .env("CHUNKRT_LOG", "warn")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));

    // Live: scraped while the run went on (run_ended 0), the cycle count growing.
    let ended = samples(prom.port, "chunkrt_run_ended");
    let cycles = samples(prom.port, "chunkrt_cycles_total");
    let live: Vec<f64> = cycles
        .iter()
        .filter(|(t, _)| ended.iter().any(|(te, v)| te == t && *v == 0.0))
        .map(|(_, v)| *v)
        .collect();
    assert!(
        live.len() >= 3 && live.windows(2).all(|w| w[0] <= w[1]) && live[0] < live[live.len() - 1],
        "live cycle counts: {live:?} (run_ended samples {ended:?})"
    );
    // The last scrape of the final values: everything Prometheus has then.
    let t_end = ended
        .iter()
        .rev()
        .find(|(_, v)| *v == 1.0)
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("no scrape of the final values: {ended:?}"));
    let all = query(prom.port, "{__name__=~\"chunkrt_.+\"}", Some(t_end));
    let value = |name: &str, labels: &[(&str, &str)]| -> Option<f64> {
        all.iter()
            .find(|s| {
                s["metric"]["__name__"] == name && labels.iter().all(|(k, v)| s["metric"][*k] == *v)
            })
            .map(|s| s["value"][1].as_str().unwrap().parse().unwrap())
    };
    let counters = report["counters"].as_object().unwrap();
    assert!(counters.len() > 10, "{counters:?}");
    for (k, v) in counters {
        let got = value(&format!("chunkrt_{k}_total"), &[]);
        assert_eq!(got, v.as_f64(), "counter {k}");
    }
    for (k, v) in report["gate"].as_object().unwrap() {
        let got = value(
            "chunkrt_gate_interventions_by_constraint_total",
            &[("constraint", k)],
        );
        assert_eq!(got, v.as_f64(), "gate {k}");
    }
    let metrics = report["metrics"].as_object().unwrap();
    assert!(metrics.contains_key("wake_latency"), "{metrics:?}");
    for (stage, m) in metrics {
        for (q, key) in [
            ("0.5", "p50"),
            ("0.9", "p90"),
            ("0.99", "p99"),
            ("0.999", "p999"),
        ] {
            let got = value(
                "chunkrt_stage_latency_seconds",
                &[("stage", stage), ("quantile", q)],
            )
            .unwrap_or_else(|| panic!("{stage} {q}"));
            assert_eq!(
                (got * 1e9).round(),
                m[key].as_f64().unwrap(),
                "{stage} {key}"
            );
        }
        let max = value("chunkrt_stage_latency_max_seconds", &[("stage", stage)]).unwrap();
        assert_eq!(
            (max * 1e9).round(),
            m["max"].as_f64().unwrap(),
            "{stage} max"
        );
        let n = value("chunkrt_stage_samples_total", &[("stage", stage)]);
        assert_eq!(n, m["count"].as_f64(), "{stage} count");
    }
    // Every joint's drive state: one state at a time, Operation Enabled as the run ended.
    let joints = report["config"]["joints"].as_u64().unwrap();
    for j in 0..joints {
        let j = j.to_string();
        let on: Vec<&str> = [
            "disabled",
            "ready",
            "enabled",
            "quick_stop",
            "fault",
            "missing",
        ]
        .into_iter()
        .filter(|st| value("chunkrt_drive_state", &[("joint", &j), ("state", st)]) == Some(1.0))
        .collect();
        assert_eq!(on, ["enabled"], "joint {j}");
    }
    // The mode the run ended in.
    let modes: Vec<&str> = ["Playing", "Decelerating", "Holding", "SafeStop"]
        .into_iter()
        .filter(|m| value("chunkrt_mode", &[("mode", m)]) == Some(1.0))
        .collect();
    assert_eq!(modes.len(), 1, "{modes:?}");
}

#[test]
fn a_remote_address_is_refused_and_a_taken_port_moves_nothing() {
    let dir = temp_dir("refused");
    let config = sim_with(&dir, "sim.toml", "[metrics]\nlisten = \"0.0.0.0:9464\"");
    let o = Command::new(common::bin())
        .arg("validate")
        .arg(&config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("metrics.listen") && stderr.contains("not a loopback address"),
        "{stderr}"
    );
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let config = sim_with(
        &dir,
        "sim.toml",
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\""),
    );
    let out = dir.join("run");
    let o = Command::new(common::bin())
        .args([
            "run",
            "--quiet",
            "--no-plots",
            "--duration",
            "2s",
            "--config",
        ])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot listen there") && stderr.contains("nothing was moved"),
        "{stderr}"
    );
    assert!(!out.join("report.json").exists());
}

#[test]
fn status_shows_a_running_controller_and_says_when_none_answers() {
    let dir = temp_dir("status");
    let port = free_port();
    let config = sim_with(
        &dir,
        "sim.toml",
        &format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\nlinger_ms = 500.0"),
    );
    let runs = dir.join("runs");
    let mut child = Command::new(common::bin())
        .args([
            "run",
            "--quiet",
            "--no-plots",
            "--duration",
            "60s",
            "--config",
        ])
        .arg(&config)
        .arg("--runs-dir")
        .arg(&runs)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = || {
        Command::new(common::bin())
            .args(["status", "--metrics", &format!("127.0.0.1:{port}"), "--run"])
            .arg(runs.join("latest"))
            .output()
            .unwrap()
    };
    // Until the arm plays (the policy has authority).
    let t = Instant::now();
    let text = loop {
        let o = status();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        if o.status.success() && text.contains("mode Playing: the policy has authority") {
            break text;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // SIGTERM: the controlled stop.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(common::wait(&mut child, Duration::from_secs(60)), Some(0));
    assert!(text.starts_with("running for "), "{text}");
    for want in [
        "cycles ",
        "drives (joint 0 on): enabled enabled enabled enabled enabled enabled enabled",
        "faults and errors: none",
        "wake_latency",
        "last events (",
    ] {
        assert!(text.contains(want), "no `{want}` in\n{text}");
    }
    // The events shown are the run's own last lines.
    let events = std::fs::read_to_string(runs.join("latest/events.jsonl")).unwrap();
    let shown: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("last events"))
        .skip(1)
        .map(str::trim)
        .collect();
    assert!(!shown.is_empty(), "{text}");
    assert!(
        shown.iter().all(|l| events.lines().any(|e| e == *l)),
        "{text}"
    );
    // Nothing listens now: said, exit 1.
    let o = status();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no controller answers at"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
