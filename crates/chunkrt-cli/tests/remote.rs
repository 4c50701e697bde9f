//! `policy.kind = "remote"` through the binary (issue 42): the bundled flow policy served
//! by scripts/policy_server.py (openpi's protocol, openpi_client's codec, onnxruntime) in
//! another process, the arm the simulated one. Judged from the run's records: the goals
//! reached (`chunkrt_tests::playback`, which knows only the goal list and the limits), no
//! chunk expired, the round trip and the server's time in the latency table; a server
//! that is not there refuses the run before anything moves; a server that dies mid-run
//! takes the policy's authority (its chunks age out) and, back, gives it back, the
//! reconnection counted.

mod common;

use chunkrt_config::Config;
use chunkrt_testkit::edit::Edit;
use chunkrt_tests::playback;
use common::{repo, temp_dir, wait};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A Python with the server's packages.
fn python() -> Option<PathBuf> {
    let py = std::env::var_os("CHUNKRT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"));
    Command::new(&py)
        .args([
            "-c",
            "import openpi_client.msgpack_numpy, websockets, onnxruntime, mcap",
        ])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        .then_some(py)
}

fn prerequisites(test: &str) -> Option<PathBuf> {
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite(test, &e.to_string());
        return None;
    }
    let py = python();
    if py.is_none() {
        chunkrt_testkit::missing_prerequisite(
            test,
            "no Python with openpi_client, websockets, onnxruntime and mcap: ./scripts/setup.sh",
        );
    }
    py
}

/// scripts/policy_server.py serving the flow policy on `port`; killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(py: &Path, port: u16, extra: &[&str]) -> Server {
    let mut child = Command::new(py)
        .arg(repo().join("scripts/policy_server.py"))
        .arg("--manifest")
        .arg(repo().join("rt-config/policies/flow.toml"))
        .args(["--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.starts_with("listening on ws://"),
        "the server said {line:?}"
    );
    Server(child)
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// rt-config/sim-remote.toml asking the server on `port`, threads unpinned, paths
/// absolute, written to `dir`.
fn config(dir: &Path, port: u16) -> PathBuf {
    let policies = repo().join("rt-config/policies");
    let text = std::fs::read_to_string(repo().join("rt-config/sim-remote.toml"))
        .unwrap()
        .edit(
            "manifest = \"policies/",
            &format!("manifest = \"{}/", policies.display()),
        )
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n")
        .edit(
            "url = \"ws://127.0.0.1:8765\"",
            &format!("url = \"ws://127.0.0.1:{port}\""),
        );
    let path = dir.join("remote.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `chunkrt run` of `cfg` for `duration` into `out`; exit status and stderr.
fn run(cfg: &Path, out: &Path, duration: &str) -> (Option<i32>, String) {
    let mut child = Command::new(common::bin())
        .args(["run", "--duration", duration, "--no-plots", "--config"])
        .arg(cfg)
        .arg("--out")
        .arg(out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chunkrt starts");
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let status = wait(&mut child, Duration::from_secs(180));
    (status, reader.join().unwrap())
}

fn report(out: &Path) -> serde_json::Value {
    common::read_json_checked(&out.join("report.json"))
}

#[test]
fn the_flow_policy_served_from_another_process_reaches_its_goals() {
    let Some(py) = prerequisites("remote") else {
        return;
    };
    let dir = temp_dir("remote", "goals");
    let port = free_port();
    let _server = serve(&py, port, &[]);
    let cfg_path = config(&dir, port);
    served_run_reaches_its_goals("remote", &cfg_path, &dir);
}

/// A 30 s run of `cfg_path` into `dir`/run, judged from its records: the goals reached
/// (four or more), no chunk expired, no inference error, nothing out of domain; every
/// published chunk a round trip whose server time was said, the round trip longer than
/// the server's time.
fn served_run_reaches_its_goals(name: &str, cfg_path: &Path, dir: &Path) {
    let out = dir.join("run");
    let (status, err) = run(cfg_path, &out, "30s");
    assert_eq!(status, Some(0), "{err}");
    let cfg = Config::load(cfg_path).unwrap();
    let p = playback::judge_run(&cfg, &out).unwrap();
    p.assert_judged(name, playback::min_playing(30.0, cfg.control.period_ms));
    eprintln!("{name}: {}", p.line());
    assert!(p.goal_times_s.len() >= 4, "{}", p.line());
    let r = report(&out);
    for k in ["chunks_expired", "inference_errors", "out_of_domain"] {
        assert_eq!(r["counters"][k].as_u64(), Some(0), "{k}: {}", r["counters"]);
    }
    // Every published chunk was a round trip, and the server said its time for each.
    let published = r["counters"]["chunks_published"].as_u64().unwrap();
    for m in ["network_rtt", "server_time"] {
        let n = r["metrics"][m]["count"].as_u64().unwrap_or(0);
        assert!(
            n >= published && published > 100,
            "{m}: {n} samples, {published} chunks"
        );
    }
    let rtt = r["metrics"]["network_rtt"]["p50"].as_f64().unwrap();
    let server = r["metrics"]["server_time"]["p50"].as_f64().unwrap();
    eprintln!(
        "{name}: round trip P50 {:.2} ms, the server's own time P50 {:.2} ms",
        rtt * 1e-6,
        server * 1e-6
    );
    assert!(
        rtt > server,
        "round trip {rtt} ns holds the server's {server} ns"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// scripts/oip_server.py (MLServer) serving the flow policy on `port`, its URL.
fn serve_oip(py: &Path, port: u16) -> (Server, String) {
    let mut child = Command::new(py)
        .arg(repo().join("scripts/oip_server.py"))
        .arg("--manifest")
        .arg(repo().join("rt-config/policies/flow.toml"))
        .args(["--port", &port.to_string(), "--model", "flow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("oip_server.py said {line:?}"))
        .to_string();
    (Server(child), url)
}

#[test]
fn the_flow_policy_served_by_mlserver_over_oip_reaches_its_goals() {
    let Some(py) = prerequisites("remote-oip") else {
        return;
    };
    let mlserver = Command::new(&py)
        .args(["-c", "import mlserver"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mlserver {
        chunkrt_testkit::missing_prerequisite("remote-oip", "no mlserver: ./scripts/setup.sh");
        return;
    }
    let dir = temp_dir("remote", "oip");
    let port = free_port();
    let (_server, url) = serve_oip(&py, port);
    assert_eq!(url, format!("http://127.0.0.1:{port}"));
    let text = std::fs::read_to_string(config(&dir, port)).unwrap().edit(
        &format!("url = \"ws://127.0.0.1:{port}\""),
        &format!("protocol = \"oip\"\nurl = \"{url}\"\nmodel = \"flow\""),
    );
    let cfg_path = dir.join("remote-oip.toml");
    std::fs::write(&cfg_path, text).unwrap();
    served_run_reaches_its_goals("remote-oip", &cfg_path, &dir);
}

#[test]
fn a_server_that_is_not_there_refuses_the_run_before_anything_moves() {
    if prerequisites("remote").is_none() {
        return;
    }
    let dir = temp_dir("remote", "absent");
    let port = free_port();
    let out = dir.join("run");
    let (status, err) = run(&config(&dir, port), &out, "5s");
    assert_eq!(status, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "cannot connect to the policy server at ws://127.0.0.1:{port}"
        )),
        "{err}"
    );
    assert!(!out.join("report.json").exists(), "a run was written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_dies_mid_run_takes_authority_and_gives_it_back_when_it_is_back() {
    let Some(py) = prerequisites("remote") else {
        return;
    };
    let dir = temp_dir("remote", "crash");
    let port = free_port();
    // About 5 s of chunks (the warm-up, then 20 a second), then the process is gone.
    let first = serve(&py, port, &["--exit-after", "100"]);
    let cfg_path = config(&dir, port);
    let out = dir.join("run");
    let runner = {
        let (cfg_path, out) = (cfg_path.clone(), out.clone());
        std::thread::spawn(move || run(&cfg_path, &out, "20s"))
    };
    std::thread::sleep(Duration::from_secs(9));
    drop(first);
    let _second = serve(&py, port, &[]);
    let (status, err) = runner.join().unwrap();
    assert_eq!(status, Some(0), "{err}");
    let r = report(&out);
    let c = &r["counters"];
    assert!(c["policy_reconnects"].as_u64() >= Some(1), "{c}");
    assert!(c["inference_errors"].as_u64() >= Some(1), "{c}");
    // The arm was not left to the last chunk: authority went and came back.
    let events: Vec<serde_json::Value> = std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let modes: Vec<(f64, &str)> = events
        .iter()
        .filter(|e| e["event"] == "mode")
        .map(|e| (e["t_s"].as_f64().unwrap(), e["to"].as_str().unwrap()))
        .collect();
    let left = modes.iter().position(|m| m.1 != "Playing" && m.0 > 4.0);
    let back = left.and_then(|i| modes[i..].iter().position(|m| m.1 == "Playing"));
    assert!(left.is_some() && back.is_some(), "modes {modes:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The server in its own network namespace behind a veth pair, as a policy server on
/// another machine. This kernel has no `tc netem` (CONFIG_NET_SCH_NETEM is not set), so
/// the network's delay is a relay in the namespace (scripts/net_delay.py: each
/// direction delayed by a normal draw, in order) in front of the server, and its loss an
/// nftables rule dropping packets at random on the namespace's end of the pair, each
/// direction (real losses: TCP retransmits).
struct Netns {
    name: String,
    host_if: String,
    ns_if: String,
    server_ip: String,
    delay_file: PathBuf,
    server: Option<Server>,
    relay: Option<Server>,
}

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Netns {
    /// Namespace number `k` (its own /24), or why it cannot be made here.
    fn new(k: u8) -> Result<Netns, String> {
        if unsafe { libc::geteuid() } != 0 {
            return Err("needs root (network namespace, veth pair, nftables)".into());
        }
        let id = std::process::id() % 10_000;
        let n = Netns {
            name: format!("chunkrt-rm{id}-{k}"),
            host_if: format!("crmh{id}{k}"),
            ns_if: format!("crmn{id}{k}"),
            server_ip: format!("10.77.{k}.2"),
            delay_file: std::env::temp_dir().join(format!("chunkrt-remote-delay-{id}-{k}")),
            server: None,
            relay: None,
        };
        std::fs::write(&n.delay_file, "0 0").map_err(|e| e.to_string())?;
        sh(&["ip", "netns", "add", &n.name])?;
        let ns = n.name.as_str();
        sh(&[
            "ip", "link", "add", &n.host_if, "type", "veth", "peer", "name", &n.ns_if,
        ])?;
        sh(&["ip", "link", "set", &n.ns_if, "netns", ns])?;
        sh(&[
            "ip",
            "addr",
            "add",
            &format!("10.77.{k}.1/24"),
            "dev",
            &n.host_if,
        ])?;
        sh(&["ip", "link", "set", &n.host_if, "up"])?;
        let inside = |args: &[&str]| {
            let mut a = vec!["ip", "netns", "exec", ns];
            a.extend_from_slice(args);
            sh(&a)
        };
        inside(&[
            "ip",
            "addr",
            "add",
            &format!("{}/24", n.server_ip),
            "dev",
            &n.ns_if,
        ])?;
        inside(&["ip", "link", "set", &n.ns_if, "up"])?;
        inside(&["ip", "link", "set", "lo", "up"])?;
        Ok(n)
    }

    /// Each direction delayed by `mean_ms` +- `spread_ms` (a normal draw), from now on.
    fn delay(&self, mean_ms: f64, spread_ms: f64) {
        std::fs::write(&self.delay_file, format!("{mean_ms} {spread_ms}")).unwrap();
    }

    /// `percent` % of the packets dropped at random, each direction.
    fn loss(&self, percent: u32) {
        let inside = |args: &[&str]| {
            let mut a = vec!["ip", "netns", "exec", self.name.as_str(), "nft"];
            a.extend_from_slice(args);
            sh(&a).unwrap()
        };
        inside(&["add", "table", "inet", "loss"]);
        for (chain, dir) in [("input", "iifname"), ("output", "oifname")] {
            let hook = format!("{{ type filter hook {chain} priority 0; }}");
            inside(&["add", "chain", "inet", "loss", chain, &hook]);
            let pct = percent.to_string();
            inside(&[
                "add",
                "rule",
                "inet",
                "loss",
                chain,
                dir,
                &self.ns_if,
                "numgen",
                "random",
                "mod",
                "100",
                "<",
                &pct,
                "drop",
            ]);
        }
    }

    /// The flow policy's server inside (on its loopback, port 8766), behind the delaying
    /// relay on the pair's address, port 8765.
    fn serve(&mut self, py: &Path) {
        let started = |mut child: Child, ready: &str| {
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert!(line.starts_with(ready), "it said {line:?}");
            Server(child)
        };
        let server = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(py)
            .arg(repo().join("scripts/policy_server.py"))
            .arg("--manifest")
            .arg(repo().join("rt-config/policies/flow.toml"))
            .args(["--host", "127.0.0.1", "--port", "8766"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("ip netns exec starts");
        self.server = Some(started(server, "listening on ws://"));
        let relay = Command::new("ip")
            .args(["netns", "exec", &self.name])
            .arg(py)
            .arg(repo().join("scripts/net_delay.py"))
            .args(["--listen", &format!("{}:8765", self.server_ip)])
            .args(["--to", "127.0.0.1:8766", "--delay-file"])
            .arg(&self.delay_file)
            .stdout(Stdio::piped())
            .spawn()
            .expect("ip netns exec starts");
        self.relay = Some(started(relay, "relaying"));
    }

    /// The remote config asking this namespace's server (plain text allowed: the
    /// test's own veth pair), with `extra` lines in `[policy.remote]`.
    fn config(&self, dir: &Path, extra: &str) -> PathBuf {
        let path = config(dir, 8765);
        let text = std::fs::read_to_string(&path).unwrap().edit(
            "url = \"ws://127.0.0.1:8765\"",
            &format!(
                "url = \"ws://{}:8765\"\nallow_plaintext_remote = true\n{extra}",
                self.server_ip
            ),
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.relay.take();
        self.server.take();
        let _ = std::fs::remove_file(&self.delay_file);
        let _ = sh(&["ip", "link", "del", &self.host_if]);
        let _ = sh(&["ip", "netns", "del", &self.name]);
    }
}

/// Prerequisites and a namespace, or `None` after saying what is missing.
fn netns(test: &str, k: u8) -> Option<(PathBuf, Netns)> {
    let py = prerequisites(test)?;
    match Netns::new(k) {
        Ok(n) => Some((py, n)),
        Err(why) => {
            chunkrt_testkit::missing_prerequisite(test, &why);
            None
        }
    }
}

/// The modes the run went through, from its event log: (t_s, to, reason).
fn modes(out: &Path) -> Vec<(f64, String, String)> {
    std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "mode")
        .map(|e| {
            (
                e["t_s"].as_f64().unwrap(),
                e["to"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// 60 s of the flow policy served across a network that delays each direction by
/// 20 ms +- 5 ms: its goals, no chunk expired, the gate idle.
#[test]
fn across_20_ms_each_way_the_served_policy_reaches_its_goals() {
    let Some((py, mut ns)) = netns("remote-netem", 1) else {
        return;
    };
    ns.delay(20.0, 5.0);
    ns.serve(&py);
    let dir = temp_dir("remote", "netem20");
    let cfg_path = ns.config(&dir, "");
    let out = dir.join("run");
    let (status, err) = run(&cfg_path, &out, "60s");
    assert_eq!(status, Some(0), "{err}");
    let cfg = Config::load(&cfg_path).unwrap();
    let p = playback::judge_run(&cfg, &out).unwrap();
    p.assert_judged(
        "netem 20 ms",
        playback::min_playing(60.0, cfg.control.period_ms),
    );
    eprintln!("netem 20 ms: {}", p.line());
    let r = report(&out);
    eprintln!(
        "netem 20 ms: network_rtt p50 {} p99 {} ns, chunk_age p99 {} ns",
        r["metrics"]["network_rtt"]["p50"],
        r["metrics"]["network_rtt"]["p99"],
        r["metrics"]["chunk_age"]["p99"]
    );
    assert!(p.goal_times_s.len() >= 10, "{}", p.line());
    assert_eq!(
        r["counters"]["chunks_expired"].as_u64(),
        Some(0),
        "{}",
        r["counters"]
    );
    assert!(
        p.altered_pct() <= 1.0,
        "gate altered {:.2} %",
        p.altered_pct()
    );
    // The round trip crossed the delay both ways.
    let rtt_p50 = r["metrics"]["network_rtt"]["p50"].as_f64().unwrap();
    assert!(rtt_p50 > 40e6, "network_rtt P50 {rtt_p50} ns");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The delay grows to 150 ms each way mid-run: every chunk then arrives older than
/// `max_chunk_age_ms` (200 ms) and is refused, none is played, and the arm stops within
/// its braking envelope.
#[test]
fn at_150_ms_each_way_every_chunk_is_refused_for_its_age_and_the_arm_stops() {
    let Some((py, mut ns)) = netns("remote-netem", 2) else {
        return;
    };
    ns.delay(20.0, 0.0);
    ns.serve(&py);
    let dir = temp_dir("remote", "netem150");
    let cfg_path = ns.config(&dir, "");
    let out = dir.join("run");
    let runner = {
        let (cfg_path, out) = (cfg_path.clone(), out.clone());
        std::thread::spawn(move || run(&cfg_path, &out, "16s"))
    };
    std::thread::sleep(Duration::from_secs(8));
    ns.delay(150.0, 0.0);
    let (status, err) = runner.join().unwrap();
    assert_eq!(status, Some(0), "{err}");
    let cfg = Config::load(&cfg_path).unwrap();
    let (cycles, events) = chunkrt_tests::recording::read(&out.join("recording.mcap")).unwrap();
    let expired: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| {
            e["event"] == "chunk_rejected"
                && e["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("Expired"))
        })
        .collect();
    assert!(
        expired.len() >= 10,
        "{} chunks refused for their age",
        expired.len()
    );
    // Nothing was played after the first refusal for age.
    let first = expired[0]["t_s"].as_f64().unwrap();
    let t0 = cycles[0].t_deadline_ns;
    let seq_at = |t: f64| {
        cycles
            .iter()
            .filter(|c| (c.t_deadline_ns - t0) as f64 * 1e-9 >= t)
            .map(|c| c.chunk_seq)
            .max()
            .unwrap_or(0)
    };
    let last_playing = cycles
        .iter()
        .rposition(|c| c.mode == "Playing")
        .expect("it played before");
    let t_last_playing = (cycles[last_playing].t_deadline_ns - t0) as f64 * 1e-9;
    assert!(
        t_last_playing < first + 0.3,
        "still playing at {t_last_playing} s, the first chunk refused for its age at {first} s"
    );
    assert!(
        seq_at(first + 0.3) <= seq_at(first - 0.5) + 1,
        "a refused chunk was played"
    );
    let t = cfg.period_ns() as f64 * 1e-9;
    for (j, lim) in cfg.joint_limits().joint[..cfg.control.joints]
        .iter()
        .enumerate()
    {
        let q: Vec<f64> = cycles.iter().map(|c| c.command_rad[j]).collect();
        chunkrt_tests::braking::check_stop(&q, last_playing, lim, t)
            .unwrap_or_else(|e| panic!("joint {j}: {e}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// 5 % of the packets lost each way, a reply timeout of 150 ms: replies held up by
/// TCP's retransmissions time out, the connection is made again (counted), and
/// playback resumes each time fresh chunks come.
#[test]
fn with_5_percent_loss_reconnects_are_counted_and_playback_resumes() {
    let Some((py, mut ns)) = netns("remote-netem", 3) else {
        return;
    };
    ns.serve(&py);
    let dir = temp_dir("remote", "netemloss");
    let cfg_path = ns.config(&dir, "");
    let text = std::fs::read_to_string(&cfg_path)
        .unwrap()
        .edit("reply_timeout_ms = 1000.0", "reply_timeout_ms = 150.0");
    std::fs::write(&cfg_path, text).unwrap();
    let out = dir.join("run");
    // The loss starts once the run is up: at start a lost packet (a 200 ms TCP
    // retransmission against the 150 ms reply timeout) would refuse the run before
    // anything moves, as a server that cannot be reached does (tested above); the
    // loss mid-run is what this test is about.
    let runner = {
        let (cfg_path, out) = (cfg_path.clone(), out.clone());
        std::thread::spawn(move || run(&cfg_path, &out, "30s"))
    };
    std::thread::sleep(Duration::from_secs(3));
    ns.loss(5);
    let (status, err) = runner.join().unwrap();
    assert_eq!(status, Some(0), "{err}");
    let r = report(&out);
    let c = &r["counters"];
    eprintln!("5 % loss: {c}");
    assert!(c["policy_reconnects"].as_u64() >= Some(1), "{c}");
    let m = modes(&out);
    let left = m.iter().position(|x| x.1 != "Playing" && x.0 > 3.0);
    let back = left.and_then(|i| m[i..].iter().position(|x| x.1 == "Playing"));
    assert!(left.is_some() && back.is_some(), "modes {m:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- issue 56: every reply bounded, refused chunks never offered, a policy that gave
// nothing fails the run. The servers are chunkrt_testkit::openpi_server, in this process
// (no Python, no ONNX Runtime: a served policy loads only its manifest). ----

use chunkrt_testkit::openpi_server::{self, Behaviour, Dribble};

/// The flow policy's digest, horizon and joints.
fn flow_manifest() -> chunkrt_policy::Manifest {
    chunkrt_policy::Manifest::load(&repo().join("rt-config/policies/flow.toml")).unwrap()
}

/// rt-config/sim-remote.toml asking the in-process server at `url`, with `extra` lines
/// in `[policy.remote]` and a reply timeout of `reply_ms`.
fn config_for(dir: &Path, url: &str, reply_ms: u32, extra: &str) -> PathBuf {
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let path = config(dir, port);
    let text = std::fs::read_to_string(&path).unwrap().edit(
        "reply_timeout_ms = 1000.0",
        &format!("reply_timeout_ms = {reply_ms}.0\n{extra}"),
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn events(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A server whose every chunk is 1e30 rad (finite, absurd): each chunk is refused on
/// the inference thread, counted and said in the event log, none is offered to the
/// executor, the arm never plays and no command leaves the joint limits; the policy
/// produced no usable chunk, so the run exits 9 (its report written, the model said to
/// be verified: the server named the manifest's digest). Before, 48 of 99 such chunks
/// were played, `setpoint_rad` 8.56e27 was recorded, and the run exited 0.
#[test]
fn absurd_chunks_are_refused_at_ingestion_and_a_policy_that_gave_nothing_exits_9() {
    let m = flow_manifest();
    let server = openpi_server::serve(Behaviour::new(
        Some(&m.model_sha256),
        m.horizon,
        m.d_a,
        1e30,
    ));
    let dir = temp_dir("remote", "absurd");
    let cfg_path = config_for(&dir, &server.url, 1000, "");
    let out = dir.join("run");
    let (status, err) = run(&cfg_path, &out, "2s");
    assert_eq!(status, Some(9), "{err}");
    assert!(err.contains("the policy produced no usable chunk"), "{err}");
    let r = report(&out);
    let c = &r["counters"];
    let refused = c["chunks_out_of_bounds"].as_u64().unwrap();
    assert!(refused >= 5, "{c}");
    assert_eq!(c["chunks_published"].as_u64(), Some(0), "{c}");
    assert_eq!(c["chunks_offered"].as_u64(), Some(0), "{c}");
    assert!(r["policy_unusable"].is_string(), "{r}");
    assert_eq!(
        r["config"]["policy_model_verified"], true,
        "{}",
        r["config"]
    );
    // The event log names each refusal: where, and what the bound was.
    let said: Vec<_> = events(&out)
        .into_iter()
        .filter(|e| e["event"] == "chunk_out_of_bounds")
        .collect();
    assert!(!said.is_empty(), "no chunk_out_of_bounds event");
    assert!(said.iter().all(|e| e["value_rad"].as_f64() > Some(1e29)));
    // The commands the arm got: never playing, every one within the limits.
    let cfg = Config::load(&cfg_path).unwrap();
    let limits = cfg.joint_limits();
    let (cycles, _) = chunkrt_tests::recording::read(&out.join("recording.mcap")).unwrap();
    assert!(cycles.len() > 50, "{} cycles", cycles.len());
    for c in &cycles {
        assert_ne!(c.mode, "Playing", "cycle {}", c.cycle);
        for (j, q) in c.command_rad.iter().enumerate().take(cfg.control.joints) {
            let l = &limits.joint[j];
            assert!(
                (l.pos_min_rad..=l.pos_max_rad).contains(q),
                "cycle {}: {q}",
                c.cycle
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that names no model digest, taken with `verify_model = false`, that answers
/// the warm-up and then dribbles every reply a byte every 10 ms (18 s a reply): each
/// chunk fails by its 200 ms deadline, the 2 s run ends on time with its report (the
/// server still dribbling when it ended), the report says the model was not verified,
/// and the run exits 9 (no usable chunk). Before, each read waited for the whole
/// frame: a 5 s run lived past 23 s, deaf to SIGINT, and exited 0.
#[test]
fn a_dribbling_unverified_server_cannot_stretch_the_run_and_no_chunk_exits_9() {
    let m = flow_manifest();
    let mut b = Behaviour::new(None, m.horizon, m.d_a, 0.1);
    b.dribble = Dribble::Replies(Duration::from_millis(10));
    b.dribble_from = 2;
    let server = openpi_server::serve(b);
    let dir = temp_dir("remote", "dribble");
    let cfg_path = config_for(&dir, &server.url, 200, "verify_model = false");
    let out = dir.join("run");
    let (status, err) = run(&cfg_path, &out, "2s");
    let c = &server.counts;
    assert!(c.dribbles_begun.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    assert_eq!(
        c.dribbles_done.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the run waited for a dribbled reply to end"
    );
    assert_eq!(status, Some(9), "{err}");
    let r = report(&out);
    assert_eq!(
        r["config"]["policy_model_verified"], false,
        "{}",
        r["config"]
    );
    let counters = &r["counters"];
    assert!(
        counters["inference_errors"].as_u64() >= Some(1),
        "{counters}"
    );
    assert_eq!(counters["chunks_published"].as_u64(), Some(0), "{counters}");
    // The same server, the model's digest required (the default): refused at start,
    // nothing moved, the key that would let it through named.
    let cfg_path = config_for(&dir, &server.url, 200, "");
    let (status, err) = run(&cfg_path, &dir.join("refused"), "2s");
    assert_eq!(status, Some(2), "{err}");
    assert!(
        err.contains("names no model_sha256") && err.contains("verify_model = false"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
