//! The `chunkrt` process fails safe (issue 36), through the real binary on the
//! simulated arm with the bundled flow policy (real ONNX Runtime):
//! * repeated stop requests escalate: a second SIGINT within the controlled stop makes
//!   it the drives' quick stop (exit 8, a line on stderr, the report says how it
//!   ended), a third ends the wait at once; the commands recorded after the first
//!   signal stay within the braking envelope of the state they were in;
//! * a panic in a runtime thread ends `run`, `bench` and `margin` with one status (7).
//!
//! The oracle reads what the drives were sent (`recording.mcap`, parsed by the `mcap`
//! crate) against the brute-force braking reference, and the files on disk.

mod common;

use chunkrt_config::Config;
use chunkrt_testkit::edit::Edit;
use chunkrt_tests::braking::check_stop;
use common::{lines_of, repo, wait};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("failsafe", name)
}

/// `rt-config/<file>` with its policy manifest `policies/<manifest>` made absolute,
/// unpinned threads and `extra` appended, written into `dir`.
fn config_from(dir: &Path, file: &str, manifest: &str, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("rt-config").join(file)).unwrap();
    let absolute = repo().join("rt-config/policies").join(manifest);
    let edited = text
        .edit(
            &format!("manifest = \"policies/{manifest}\""),
            &format!("manifest = \"{}\"", absolute.display()),
        )
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n");
    assert!(
        edited.contains(&absolute.display().to_string()),
        "manifest not replaced"
    );
    assert_ne!(edited.matches("cpu = -1").count(), 0, "cpus not unpinned");
    let path = dir.join(file);
    std::fs::write(&path, format!("{edited}\n{extra}\n")).unwrap();
    path
}

/// `rt-config/sim.toml` (bundled flow policy), as [`config_from`] makes it.
fn config(dir: &Path, extra: &str) -> PathBuf {
    config_from(dir, "sim.toml", "flow.toml", extra)
}

fn spawn(args: &[&str], config: &Path, out: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(args)
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chunkrt starts")
}

/// Waits for the live status line to report `Playing` (the arm moving).
fn wait_playing(child: &mut Child, lines: &mpsc::Receiver<String>) {
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(l) if l.contains("mode=Playing") => return,
            Ok(l) => seen.push(l),
            Err(_) => {
                let _ = child.kill();
                panic!("the run never reported Playing:\n{}", seen.join("\n"));
            }
        }
    }
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the pid of our own child, which has not been reaped yet.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    assert_eq!(rc, 0);
}

fn report(out: &Path) -> serde_json::Value {
    common::read_json_checked(&out.join("report.json"))
}

/// Every joint's recorded commands after the last cycle that played stay within the
/// braking envelope (the brute-force reference), and the arm ends at rest.
fn assert_braked(out: &Path, cfg_path: &Path) {
    let cfg = Config::load(cfg_path).unwrap();
    let (cycles, _) = chunkrt_tests::recording::read(&out.join("recording.mcap")).unwrap();
    assert!(cycles.len() > 50, "{} cycles recorded", cycles.len());
    let last_playing = cycles
        .iter()
        .rposition(|c| c.mode == "Playing")
        .expect("the policy played");
    assert!(
        last_playing + 3 < cycles.len(),
        "the recording ends while playing"
    );
    let t = cfg.period_ns() as f64 * 1e-9;
    for (j, lim) in cfg.joint_limits().joint[..cfg.control.joints]
        .iter()
        .enumerate()
    {
        let q: Vec<f64> = cycles.iter().map(|c| c.command_rad[j]).collect();
        assert!(q.iter().all(|x| x.is_finite()), "joint {j}: NaN command");
        check_stop(&q, last_playing, lim, t).unwrap_or_else(|e| panic!("joint {j}: {e}"));
        let n = q.len();
        assert!(
            (q[n - 1] - q[n - 2]).abs() < 1e-9,
            "joint {j}: the last command still moves ({} rad)",
            q[n - 1] - q[n - 2]
        );
    }
}

/// Runs until playing, then sends `count` SIGINTs 50 ms apart; returns the exit
/// status, stderr after the signals, and the output directory.
fn interrupted(name: &str, count: usize) -> (Option<i32>, Vec<String>, PathBuf, PathBuf) {
    let dir = temp_dir(name);
    let cfg = config(&dir, "");
    let out = dir.join("run");
    let mut child = spawn(&["run", "--duration", "120s", "--no-plots"], &cfg, &out);
    let lines = lines_of(&mut child);
    wait_playing(&mut child, &lines);
    for i in 0..count {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        signal(&child, libc::SIGINT);
    }
    let code = wait(&mut child, Duration::from_secs(60));
    // The reader thread ends with the child's stderr.
    std::thread::sleep(Duration::from_millis(100));
    let rest: Vec<String> = lines.try_iter().collect();
    (code, rest, out, cfg)
}

#[test]
fn a_second_sigint_makes_the_stop_the_drives_quick_stop_and_exits_8() {
    let (code, stderr, out, cfg) = interrupted("double-sigint", 2);
    assert_eq!(code, Some(8), "stderr:\n{}", stderr.join("\n"));
    assert!(
        stderr.iter().any(|l| l
            .contains("a second stop request switched to the drives' quick stop")
            && l.contains("drives disabled")),
        "stderr says what was done:\n{}",
        stderr.join("\n")
    );
    let r = report(&out);
    let q = &r["quick_stop"];
    assert_eq!(q["by_signal"], true, "{r:#}");
    assert_eq!(q["third_signal"], false);
    assert_eq!(q["standstill"], true, "{q}");
    assert_eq!(q["disabled"], true, "{q}");
    assert_braked(&out, &cfg);
}

#[test]
fn a_third_sigint_ends_the_wait_and_still_disables_the_drives() {
    let (code, stderr, out, cfg) = interrupted("triple-sigint", 3);
    assert_eq!(code, Some(8), "stderr:\n{}", stderr.join("\n"));
    let r = report(&out);
    let q = &r["quick_stop"];
    assert_eq!(q["by_signal"], true, "{r:#}");
    assert_eq!(q["disabled"], true, "{q}");
    // Whether the third one came before standstill depends on the arm's speed; what
    // the drives were sent up to the end still brakes.
    let (cycles, _) = chunkrt_tests::recording::read(&out.join("recording.mcap")).unwrap();
    assert!(cycles.iter().rposition(|c| c.mode == "Playing").is_some());
    let cfg_parsed = Config::load(&cfg).unwrap();
    let t = cfg_parsed.period_ns() as f64 * 1e-9;
    let last_playing = cycles.iter().rposition(|c| c.mode == "Playing").unwrap();
    for (j, lim) in cfg_parsed.joint_limits().joint[..cfg_parsed.control.joints]
        .iter()
        .enumerate()
    {
        let q: Vec<f64> = cycles.iter().map(|c| c.command_rad[j]).collect();
        match check_stop(&q, last_playing, lim, t) {
            Ok(_) => {}
            // A stop cut short by the third signal need not have reached rest: it is
            // judged on the distance and the speed only.
            Err(e) if e.contains("still moving") => {}
            Err(e) => panic!("joint {j}: {e}"),
        }
    }
}

/// `[inject] panic` in the inference thread 2 s in: `run`, `bench` and `margin` all
/// end with status 7 and say which thread panicked.
#[test]
fn run_bench_and_margin_end_a_panicked_run_with_the_same_status() {
    let dir = temp_dir("panic-status");
    let cfg = config(
        &dir,
        "[inject]\npanic = { thread = \"inference\", after_ms = 2000.0 }",
    );
    let budget = repo().join("rt-config/budget.toml");
    let cases: [(&str, Vec<String>); 3] = [
        (
            "run",
            vec![
                "run".into(),
                "--duration".into(),
                "30s".into(),
                "--no-plots".into(),
            ],
        ),
        (
            "bench",
            vec![
                "bench".into(),
                "--duration".into(),
                "30s".into(),
                "--budget".into(),
                budget.display().to_string(),
            ],
        ),
        (
            "margin",
            vec![
                "margin".into(),
                "--loop".into(),
                "runtime".into(),
                "--delays".into(),
                "0ms".into(),
            ],
        ),
    ];
    for (name, args) in cases {
        let out = dir.join(name);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = spawn(&args, &cfg, &out);
        let lines = lines_of(&mut child);
        let code = wait(&mut child, Duration::from_secs(120));
        std::thread::sleep(Duration::from_millis(100));
        let stderr: Vec<String> = lines.try_iter().collect();
        assert_eq!(code, Some(7), "{name}: stderr:\n{}", stderr.join("\n"));
        assert!(
            stderr
                .iter()
                .any(|l| l.contains("thread chunkrt-infer panicked: injected panic")),
            "{name}: stderr names the thread:\n{}",
            stderr.join("\n")
        );
    }
}

/// The camera thread panics 2 s in (the visuomotor policy on the synthetic camera):
/// the run ends in the quick stop with status 7, the commands brake.
#[test]
fn a_panic_in_the_camera_thread_ends_in_the_quick_stop() {
    let dir = temp_dir("panic-camera");
    let cfg = config_from(
        &dir,
        "sim-vision.toml",
        "vision-flow.toml",
        "[inject]\npanic = { thread = \"camera\", after_ms = 2000.0 }",
    );
    let out = dir.join("run");
    let mut child = spawn(&["run", "--duration", "60s", "--no-plots"], &cfg, &out);
    let lines = lines_of(&mut child);
    let code = wait(&mut child, Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(100));
    let stderr: Vec<String> = lines.try_iter().collect();
    assert_eq!(code, Some(7), "stderr:\n{}", stderr.join("\n"));
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("thread chunkrt-camera panicked: injected panic")),
        "stderr names the thread:\n{}",
        stderr.join("\n")
    );
    let r = report(&out);
    assert_eq!(r["thread_panics"][0]["thread"], "chunkrt-camera", "{r:#}");
    assert_eq!(r["quick_stop"]["standstill"], true, "{r:#}");
    assert_eq!(r["quick_stop"]["disabled"], true);
    assert_braked(&out, &cfg);
}

/// Ctrl-C while a large model is being read and hashed (a 2000 MB sparse file, read
/// in full before its digest can be judged; about 8 s here): nothing is powered, so
/// the process ends at once with status 130 and says so; the output directory, claimed
/// only after loading, is not left behind.
#[test]
fn sigint_during_a_slow_model_load_ends_the_process_at_once() {
    let dir = temp_dir("slow-load");
    let big = dir.join("big.onnx");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(2000 << 20)
        .unwrap();
    let flow = std::fs::read_to_string(repo().join("rt-config/policies/flow.toml")).unwrap();
    let manifest_text = flow.edit(
        "model_file = \"flow.onnx\"",
        &format!("model_file = \"{}\"", big.display()),
    );
    assert!(
        manifest_text.contains(&big.display().to_string()),
        "model_file not replaced"
    );
    let manifest = dir.join("flow.toml");
    std::fs::write(&manifest, manifest_text).unwrap();
    // The measurements its omission log cites travel with it.
    chunkrt_testkit::policy_files::copy_cited_measurements(&dir);
    let text = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    let edited = text.edit(
        "manifest = \"policies/flow.toml\"",
        &format!("manifest = \"{}\"", manifest.display()),
    );
    assert!(
        edited.contains(&manifest.display().to_string()),
        "manifest not replaced"
    );
    let cfg = dir.join("sim.toml");
    std::fs::write(&cfg, edited).unwrap();
    let out = dir.join("run");
    let mut child = spawn(&["run", "--duration", "10s"], &cfg, &out);
    let lines = lines_of(&mut child);
    std::thread::sleep(Duration::from_millis(500));
    let sent = std::time::Instant::now();
    signal(&child, libc::SIGINT);
    let code = wait(&mut child, Duration::from_secs(60));
    let took = sent.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    let stderr: Vec<String> = lines.try_iter().collect();
    eprintln!("exit {code:?} {took:?} after SIGINT");
    assert_eq!(code, Some(130), "stderr:\n{}", stderr.join("\n"));
    assert!(
        stderr
            .iter()
            .any(|l| l.contains("stopped while loading") && l.contains("nothing was moved")),
        "stderr:\n{}",
        stderr.join("\n")
    );
    assert!(!out.exists(), "the output directory was left behind");
}
