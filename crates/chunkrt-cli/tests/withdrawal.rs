//! The stop begins where the arm is (issue 12), through the real binary.
//!
//! Two policies a new user can bring by mistake, run by `chunkrt run` on the
//! simulated arm with the real ONNX Runtime:
//! * the bundled flow model with every `act_std` x10 (model and digest unchanged),
//!   stopped by SIGINT mid-motion;
//! * a model whose output is constant, which walks the arm out of its declared
//!   domain: the support monitor takes authority away.
//!
//! Since issue 56 the inference thread refuses a chunk whose playable setpoints leave
//! the joints' range (`chunks_out_of_bounds`): both policies plan past the limits
//! within a chunk's reach after a while, so their authority may end that way instead,
//! the chunk being played expiring with no successor (`ChunkExpired`). The stop is
//! judged the same way whatever took the authority.
//!
//! The oracle reads `recording.mcap` (the commands the backend received, parsed by
//! the `mcap` crate) and the limits of the config file: after the last withdrawal
//! every joint stays within the braking distance of its commanded state
//! (`chunkrt_tests::braking::check_stop`), no joint comes within 1 mrad of a soft
//! limit it was not already at, and the report's per-constraint gate counts equal the
//! sums over `gate.jsonl`.

mod common;

use chunkrt_config::Config;
use chunkrt_testkit::edit::Edit;
use chunkrt_tests::braking::check_stop;
use chunkrt_tests::recording::{self, RecordedCycle};
use common::{repo, wait};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn temp_dir(name: &str) -> PathBuf {
    common::temp_dir("withdrawal", name)
}

/// `rt-config/sim.toml` with the policy manifest `manifest` (a fixture), unpinned
/// threads (tests run beside each other), written into `dir`.
fn config_with(dir: &Path, manifest: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    let fixture = repo().join("tests/fixtures/policies").join(manifest);
    assert!(fixture.exists(), "{}", fixture.display());
    let text = text
        .edit(
            "manifest = \"policies/flow.toml\"",
            &format!("manifest = \"{}\"", fixture.display()),
        )
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n");
    assert!(text.contains(&fixture.display().to_string()));
    let path = dir.join("sim.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn start(config: &Path, out: &Path, duration: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["run", "--duration", duration, "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("chunkrt starts")
}

/// Checks every joint's commands after the last withdrawal (the last cycle that
/// played a chunk) against the braking oracle and the soft limits; returns the
/// largest distance moved after it, over the joints.
fn check_last_withdrawal(cycles: &[RecordedCycle], cfg: &Config) -> f64 {
    let limits = cfg.joint_limits();
    let t = cfg.period_ns() as f64 * 1e-9;
    let last_playing = cycles
        .iter()
        .rposition(|c| c.mode == "Playing")
        .expect("the policy played");
    assert!(
        last_playing + 1 < cycles.len(),
        "the run ended while playing"
    );
    assert!(
        last_playing >= 2,
        "withdrawn within two cycles of the start"
    );
    let mut moved_max: f64 = 0.0;
    for (j, lim) in limits.joint[..cfg.control.joints].iter().enumerate() {
        let q: Vec<f64> = cycles.iter().map(|c| c.command_rad[j]).collect();
        let s = check_stop(&q, last_playing, lim, t).unwrap_or_else(|e| {
            panic!("joint {j}: {e}");
        });
        moved_max = moved_max.max(s.moved_rad);
        let (lo, hi) = (
            lim.pos_min_rad + lim.pos_margin_rad,
            lim.pos_max_rad - lim.pos_margin_rad,
        );
        let gap = |x: f64| (x - lo).min(hi - x);
        if gap(q[last_playing]) > 2e-3 {
            let closest = q[last_playing..]
                .iter()
                .cloned()
                .map(gap)
                .fold(f64::MAX, f64::min);
            assert!(
                closest > 1e-3,
                "joint {j} came within {closest} rad of a soft limit after the withdrawal"
            );
        }
    }
    moved_max
}

/// The report's per-constraint gate counts equal the sums of `repeats` in gate.jsonl.
fn gate_counts_reconcile(out: &Path) {
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    let mut sums = std::collections::BTreeMap::<String, u64>::new();
    let log = std::fs::read_to_string(out.join("gate.jsonl")).unwrap();
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        *sums
            .entry(v["constraint"].as_str().unwrap().to_string())
            .or_default() += v["repeats"].as_u64().unwrap();
    }
    let gate = report["gate"].as_object().unwrap();
    for (name, count) in gate {
        assert_eq!(
            sums.get(name).copied().unwrap_or(0),
            count.as_u64().unwrap(),
            "constraint {name}: report {count} vs gate.jsonl {:?}",
            sums.get(name)
        );
    }
    assert_eq!(
        report["counters"]["ring_drops_event"].as_u64(),
        Some(0),
        "no gate record may be lost for the sums to be complete"
    );
}

/// How many chunks the run refused at ingestion for setpoints past the joints' range.
fn refused_out_of_bounds(out: &Path) -> u64 {
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    report["counters"]["chunks_out_of_bounds"]
        .as_u64()
        .expect("chunks_out_of_bounds in the report")
}

fn mode_events(out: &Path) -> Vec<serde_json::Value> {
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    report["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "mode")
        .cloned()
        .collect()
}

#[test]
fn sigint_mid_motion_with_an_out_of_scale_policy_stops_where_the_arm_is() {
    let dir = temp_dir("scale");
    let config = config_with(&dir, "out-of-scale.toml");
    let cfg = Config::load(&config).unwrap();
    let out = dir.join("out");
    let mut child = start(&config, &out, "30s");
    // Mid-motion: once the live status says Playing (not a time), then 1 s of it.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(l) => {
                let hit = l.contains("mode=Playing");
                seen.push(l);
                if hit {
                    break;
                }
            }
            Err(_) => {
                let _ = child.kill();
                panic!("never played:\n{}", seen.join("\n"));
            }
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    // SAFETY: kill(2) on our own child, not yet reaped.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let code = wait(&mut child, Duration::from_secs(60));
    let rest: Vec<String> = rx.try_iter().collect();
    assert_eq!(code, Some(0), "{}", rest.join("\n"));

    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let moved = check_last_withdrawal(&cycles, &cfg);
    eprintln!("out-of-scale policy, SIGINT: moved at most {moved:.4} rad after the withdrawal");
    // The policy lost authority: by the SIGINT, or before it (this policy may leave
    // its domain or hold the gate saturated first; then the stop was that one's; or its
    // chunks planned past the joints' range, were refused, and the last one expired).
    let modes = mode_events(&out);
    let refused = refused_out_of_bounds(&out);
    assert!(
        modes.iter().any(|m| m["to"] == "Decelerating"
            && (["Shutdown", "OutOfDomain", "GateSaturated"]
                .contains(&m["reason"].as_str().unwrap_or(""))
                || (m["reason"] == "ChunkExpired" && refused > 0))),
        "{modes:?}, {refused} chunks refused out of bounds"
    );
    // Holding is logged only when the commands are at rest, and holds them there.
    let last = cycles.last().unwrap();
    assert!(
        last.mode == "Holding" || last.mode == "SafeStop",
        "{}",
        last.mode
    );
    gate_counts_reconcile(&out);
}

#[test]
fn a_constant_policy_leaving_its_domain_is_stopped_where_the_arm_is() {
    let dir = temp_dir("constant");
    let config = config_with(&dir, "constant.toml");
    let cfg = Config::load(&config).unwrap();
    let out = dir.join("out");
    let mut child = start(&config, &out, "4s");
    let code = wait(&mut child, Duration::from_secs(60));
    assert_eq!(code, Some(0));
    let modes = mode_events(&out);
    let refused = refused_out_of_bounds(&out);
    assert!(
        modes.iter().any(|m| m["to"] == "Decelerating"
            && (m["reason"] == "OutOfDomain" || (m["reason"] == "ChunkExpired" && refused > 0))),
        "the support monitor, or the refusal of chunks headed past the limits, takes \
         authority away: {modes:?}, {refused} chunks refused out of bounds"
    );
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let moved = check_last_withdrawal(&cycles, &cfg);
    eprintln!("constant policy, out of domain: moved at most {moved:.4} rad after the withdrawal");
    // Every transition to Holding happens with the commands at rest: the command
    // does not move from the first Holding cycle to the next cycle.
    for w in cycles.windows(2) {
        if w[0].mode == "Holding" && w[1].mode == "Holding" {
            for j in 0..cfg.control.joints {
                assert!(
                    (w[1].command_rad[j] - w[0].command_rad[j]).abs() < 1e-9,
                    "cycle {}: joint {j} moves while Holding",
                    w[1].cycle
                );
            }
        }
    }
    gate_counts_reconcile(&out);
}
