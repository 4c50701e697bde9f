//! `chunkrt run` as the arm's service (issue 59), through the real binary: the shipped
//! unit file passes `systemd-analyze verify`; under a `NOTIFY_SOCKET` that this test
//! plays systemd on (a datagram socket) the run says `READY=1` after bring-up,
//! `WATCHDOG=1` only while the control loop cycles (none through an injected stall of
//! the control thread) and `STOPPING=1` at the stop, in that order; runs into one
//! `--runs-dir` are never overwritten, `latest` follows the newest and retention
//! removes only what its rule allows (not a killed run, not a faulted one, never a
//! running one). `CHUNKRT_BIN` runs them against another build (the one before the
//! change has no `--runs-dir` and says nothing to a service manager: they fail there).

mod common;

use chunkrt_testkit::edit::Edit;
use common::{repo, sim_with, wait};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const UNIT: &str = "deploy/systemd/chunkrt-arm.service";
const SHIPPED_BIN: &str = "/opt/chunkrt/target/release/chunkrt";

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("service", name)
}

fn unit_text() -> String {
    std::fs::read_to_string(repo().join(UNIT)).unwrap()
}

/// The unit's `ExecStart=` arguments after the binary (`run` first).
fn exec_start_args() -> Vec<String> {
    let text = unit_text();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("the unit has an ExecStart=");
    let mut words = line.split_whitespace().map(String::from);
    assert_eq!(words.next().as_deref(), Some(SHIPPED_BIN), "{line}");
    words.collect()
}

/// The unit's arguments with `--config`, `--duration` and `--runs-dir` replaced (the
/// simulated arm instead of the EtherCAT arm, a bounded run, a temporary directory);
/// every other flag as shipped.
fn unit_args(config: &Path, duration: &str, runs: &Path) -> Vec<String> {
    let mut args = exec_start_args();
    let mut replaced = 0;
    for (flag, value) in [
        ("--config", config.display().to_string()),
        ("--duration", duration.to_string()),
        ("--runs-dir", runs.display().to_string()),
    ] {
        let i = args
            .iter()
            .position(|a| a == flag)
            .unwrap_or_else(|| panic!("the unit's ExecStart has no {flag}"));
        args[i + 1] = value;
        replaced += 1;
    }
    assert_eq!(replaced, 3);
    args
}

#[test]
fn the_shipped_unit_passes_systemd_analyze_verify() {
    let text = unit_text();
    for want in [
        "Type=notify",
        "WatchdogSec=",
        "NotifyAccess=main",
        "--runs-dir",
    ] {
        assert!(text.contains(want), "the unit lacks {want}");
    }
    assert!(
        !text.contains("--overwrite") && !text.contains("--out "),
        "a service must not overwrite its runs"
    );
    let Ok(probe) = Command::new("systemd-analyze").arg("--version").output() else {
        chunkrt_testkit::missing_prerequisite(
            "the_shipped_unit_passes_systemd_analyze_verify",
            "systemd-analyze (Debian's systemd package; scripts/setup.sh installs it)",
        );
        return;
    };
    assert!(probe.status.success());
    // The one path that exists only where the unit is installed: the binary under test.
    let dir = temp_dir("verify");
    let unit = dir.join("chunkrt-arm.service");
    std::fs::write(
        &unit,
        text.edit(SHIPPED_BIN, &common::bin().display().to_string()),
    )
    .unwrap();
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify {UNIT}: {}\n{stderr}",
        o.status
    );
    // And the check sees a broken unit (so its silence above means something).
    std::fs::write(&unit, unit_text().edit("WatchdogSec=", "WatchdogSecs=")).unwrap();
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&o.stderr).trim().is_empty(),
        "systemd-analyze verify did not object to an unknown key"
    );
}

/// One datagram from the run, when it arrived.
struct Message {
    at: Instant,
    lines: Vec<String>,
}

impl Message {
    fn has(&self, line: &str) -> bool {
        self.lines.iter().any(|l| l == line)
    }
}

/// Collects datagrams on `sock` until `child` exits (at most `limit`); its status.
fn collect(
    sock: &UnixDatagram,
    child: &mut std::process::Child,
    limit: Duration,
) -> (Option<i32>, Vec<Message>) {
    sock.set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 4096];
    let mut exited = None;
    loop {
        while let Ok(n) = sock.recv(&mut buf) {
            got.push(Message {
                at: Instant::now(),
                lines: String::from_utf8_lossy(&buf[..n])
                    .lines()
                    .map(String::from)
                    .collect(),
            });
        }
        if let Some(status) = exited {
            return (status, got);
        }
        if let Some(s) = child.try_wait().unwrap() {
            // One more pass for what was sent just before the exit.
            exited = Some(s.code());
        } else if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, got);
        }
    }
}

/// The simulated arm whose control thread is held busy for `stall_ms` every
/// `every`-th cycle (`[inject] cycle_stall_ms`): a loop that stops cycling.
fn stalled_config(dir: &Path, stall_ms: f64, every: u64) -> PathBuf {
    sim_with(
        dir,
        "stalled.toml",
        &format!("[inject]\ncycle_stall_ms = {stall_ms}\ncycle_stall_every = {every}"),
    )
}

#[test]
fn under_a_notify_socket_ready_then_watchdog_only_while_the_loop_cycles_then_stopping() {
    let dir = temp_dir("notify");
    let sock_path = dir.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    // 50 Hz: the first stall at cycle 150 (3 s into the loop), 1.5 s long.
    let stall = Duration::from_millis(1500);
    let config = stalled_config(&dir, stall.as_secs_f64() * 1e3, 150);
    let watchdog = Duration::from_millis(400);
    let mut child = Command::new(common::bin())
        .args(unit_args(&config, "5s", &dir.join("runs")))
        .arg("--no-plots")
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", watchdog.as_micros().to_string())
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, msgs) = collect(&sock, &mut child, Duration::from_secs(120));
    let stderr = {
        use std::io::Read;
        let mut s = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut s);
        s
    };
    let shown: Vec<String> = msgs.iter().map(|m| m.lines.join("|")).collect();
    assert_eq!(status, Some(0), "{stderr}\nmessages: {shown:#?}");
    let first = |line: &str| msgs.iter().position(|m| m.has(line));
    let count = |line: &str| msgs.iter().filter(|m| m.has(line)).count();
    let ready = first("READY=1").unwrap_or_else(|| panic!("no READY=1: {shown:#?}"));
    let stopping = first("STOPPING=1").unwrap_or_else(|| panic!("no STOPPING=1: {shown:#?}"));
    assert_eq!(count("READY=1"), 1, "{shown:#?}");
    assert_eq!(count("STOPPING=1"), 1, "{shown:#?}");
    assert!(ready < stopping, "{shown:#?}");
    assert!(
        msgs[0]
            .lines
            .iter()
            .any(|l| l.starts_with("STATUS=loading")),
        "the first message is not the loading status: {shown:#?}"
    );
    let pings: Vec<usize> = (0..msgs.len())
        .filter(|&i| msgs[i].has("WATCHDOG=1"))
        .collect();
    assert!(
        pings.iter().all(|&i| ready < i && i < stopping),
        "a WATCHDOG=1 outside READY..STOPPING: {shown:#?}"
    );
    assert!(pings.len() >= 3, "{} pings: {shown:#?}", pings.len());
    // Never faster than half the interval (the rule), and a gap at least most of the
    // stall long while the control thread was held: no ping for a loop not cycling.
    let mut times: Vec<Instant> = vec![msgs[ready].at];
    times.extend(pings.iter().map(|&i| msgs[i].at));
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    println!("messages: {shown:#?}\nping gaps: {gaps:?}");
    let floor = watchdog / 2 - Duration::from_millis(30);
    assert!(
        gaps.iter().all(|g| *g >= floor),
        "pings closer than half the watchdog interval: {gaps:?}"
    );
    let longest = gaps.iter().max().copied().unwrap_or_default();
    assert!(
        longest >= stall * 8 / 10,
        "no gap in the pings through the {stall:?} stall of the control loop: {gaps:?}"
    );
    let last = msgs.last().unwrap();
    assert!(
        last.lines
            .iter()
            .any(|l| l.starts_with("STATUS=ended with exit status 0")),
        "{shown:#?}"
    );
    // The run went to a directory of its own, with its ending.
    let latest = dir.join("runs/latest");
    assert!(latest.join("report.json").is_file());
    let ending: serde_json::Value =
        serde_json::from_slice(&std::fs::read(latest.join("ending.json")).unwrap()).unwrap();
    assert_eq!(ending["exit_status"], 0, "{ending}");
}

fn run_into(runs: &Path, config: &Path, extra: &[&str], duration: &str) -> Command {
    let mut c = Command::new(common::bin());
    c.args([
        "run",
        "--quiet",
        "--no-plots",
        "--duration",
        duration,
        "--config",
    ])
    .arg(config)
    .arg("--runs-dir")
    .arg(runs)
    .args(extra)
    .env("CHUNKRT_LOG", "warn")
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    c
}

/// Runs to the end; its exit status (the stderr in the message when it is not `want`).
fn run_to_end(mut c: Command, want: i32) {
    let o = c.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(want),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The run directories in `runs` by name, oldest first.
fn run_names(runs: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(runs)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn latest(runs: &Path) -> String {
    std::fs::read_link(runs.join("latest"))
        .unwrap()
        .display()
        .to_string()
}

fn exit_status_in(runs: &Path, name: &str) -> Option<u64> {
    let f = runs.join(name).join("ending.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(f).ok()?).ok()?;
    v["exit_status"].as_u64()
}

/// Starts a long run and SIGKILLs it once it has written its first records.
fn killed_run(runs: &Path, config: &Path) {
    let mut child = run_into(runs, config, &["--keep", "100"], "60s")
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        let started = std::fs::read_link(runs.join("latest"))
            .ok()
            .map(|l| runs.join(l).join("events.jsonl"))
            .and_then(|f| std::fs::metadata(f).ok())
            .is_some_and(|m| m.len() > 0);
        if started || t.elapsed() > Duration::from_secs(60) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn ten_restarts_into_one_runs_dir_keep_ten_runs_and_retention_follows_its_rule() {
    let dir = temp_dir("restarts");
    let runs = dir.join("runs");
    let sim = repo().join("rt-config/sim.toml");
    let faulty = sim_with(
        &dir,
        "faulty.toml",
        "[inject]\npanic = { thread = \"inference\", after_ms = 300.0 }",
    );
    // Ten starts, as a service restarted ten times: the 4th killed (SIGKILL), the 7th
    // ending in a fault (a thread's panic, exit 7).
    for i in 1..=10 {
        match i {
            4 => killed_run(&runs, &sim),
            7 => run_to_end(run_into(&runs, &faulty, &["--keep", "10"], "2s"), 7),
            _ => run_to_end(run_into(&runs, &sim, &["--keep", "10"], "1s"), 0),
        }
    }
    let names = run_names(&runs);
    assert_eq!(names.len(), 10, "{names:?}");
    assert_eq!(latest(&runs), names[9]);
    let statuses: Vec<Option<u64>> = names.iter().map(|n| exit_status_in(&runs, n)).collect();
    let want: Vec<Option<u64>> = (1..=10)
        .map(|i| match i {
            4 => None,
            7 => Some(7),
            _ => Some(0),
        })
        .collect();
    assert_eq!(statuses, want, "{names:?}");
    // Nothing was overwritten: every run kept its own report (the killed one has none).
    for (i, n) in names.iter().enumerate() {
        assert_eq!(runs.join(n).join("report.json").is_file(), i != 3, "{n}");
    }

    // An 11th with --keep 3: the newest three stay; of the older, only those that ended
    // normally go (the killed 4th and the faulted 7th stay).
    run_to_end(run_into(&runs, &sim, &["--keep", "3"], "1s"), 0);
    let after = run_names(&runs);
    let kept: Vec<&str> = [3, 6, 8, 9].iter().map(|&i| names[i].as_str()).collect();
    assert_eq!(after.len(), 5, "{after:?}");
    assert_eq!(&after[..4], &kept[..], "{after:?}");
    assert_eq!(latest(&runs), after[4]);

    // A run in progress is never removed, even with --prune-faulted --keep 1.
    let mut live = run_into(&runs, &sim, &["--keep", "100"], "60s")
        .spawn()
        .unwrap();
    let t = Instant::now();
    while run_names(&runs).len() < 6 && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let live_name = latest(&runs);
    std::thread::sleep(Duration::from_millis(500));
    run_to_end(
        run_into(&runs, &sim, &["--keep", "1", "--prune-faulted"], "1s"),
        0,
    );
    let last = run_names(&runs);
    assert_eq!(last.len(), 2, "{last:?}");
    assert_eq!(last[0], live_name, "the running run was removed: {last:?}");
    assert_eq!(latest(&runs), last[1]);
    // SIGTERM: the controlled stop, exit 0.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(live.id() as i32, libc::SIGTERM) };
    assert_eq!(wait(&mut live, Duration::from_secs(60)), Some(0));
    assert_eq!(exit_status_in(&runs, &live_name), Some(0));
}

#[test]
fn runs_dir_refuses_a_latest_that_is_not_a_link_and_conflicting_flags() {
    let dir = temp_dir("refusals");
    let runs = dir.join("runs");
    std::fs::create_dir_all(runs.join("latest")).unwrap();
    let sim = repo().join("rt-config/sim.toml");
    let o = run_into(&runs, &sim, &[], "1s").output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is not a symbolic link") && stderr.contains("nothing was moved"),
        "{stderr}"
    );
    assert!(runs.join("latest").is_dir(), "the directory was touched");
    for extra in [&["--out", "x"][..], &["--overwrite"][..]] {
        let o = run_into(&dir.join("other"), &sim, extra, "1s")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{extra:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("cannot be used with"),
            "{extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}
