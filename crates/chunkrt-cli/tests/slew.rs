//! The torque slew-rate limit and the low-pass action filter through the binary
//! (issue 41): the scripted policy at 2 rad/s on the simulated arm (acceleration
//! limits lowered to 4-6 rad/s^2), with `[limits.torque_slew]` (the simulated arm's own
//! peak torques and inertias, 4 s from zero to peak: slow enough that the policy's own
//! jerk meets it on joints 0 and 1) and `limits.action_filter_hz = 8`.
//!
//! The oracle reads what the drives were sent (the recording's commanded positions):
//! the torque the commanded motion asks of each joint's inertia, `I * a` from the
//! positions' second differences, changes by no more than `max_torque / rise_time` per
//! second in any cycle, the end-of-run stop included. The same run without the two
//! is the witness that the policy asks for more: there the bound is broken.

mod common;

use chunkrt_tests::recording;
use common::{repo, temp_dir};
use std::path::{Path, PathBuf};
use std::process::Command;

const RISE_MS: f64 = 4000.0;
const INERTIA: [f64; 7] = [0.6, 0.6, 0.3, 0.3, 0.05, 0.05, 0.02];
const MAX_TORQUE: [f64; 7] = [87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0];

fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `rt-config/sim-scripted.toml`, threads unpinned, with the slew limit and filter
/// when `limited`.
fn config_in(dir: &Path, limited: bool) -> PathBuf {
    let mut text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml"))
        .unwrap()
        .replace("cpu = 1 ", "cpu = -1 ")
        .replace("cpu = 0\n", "cpu = -1\n")
        .replace("max_vel_rad_s = 0.8\n", "max_vel_rad_s = 2.0\n")
        .replace(
            "max_acc_rad_s2 = [15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0]",
            "max_acc_rad_s2 = [4.0, 4.0, 4.0, 4.0, 6.0, 6.0, 6.0]",
        )
        .replace(
            "brake_acc_rad_s2 = [7.5, 3.75, 5.0, 6.25, 7.5, 10.0, 10.0]",
            "brake_acc_rad_s2 = [4.0, 3.75, 4.0, 4.0, 6.0, 6.0, 6.0]",
        );
    if limited {
        let at = text.find("brake_acc_rad_s2").expect("a [limits] section");
        let end = at + text[at..].find('\n').unwrap() + 1;
        text.insert_str(
            end,
            &format!(
                "action_filter_hz = 8.0\n\n[limits.torque_slew]\nmax_torque_nm = [{}]\n\
                 rise_time_ms = {RISE_MS}\ninertia_kg_m2 = [{}]\n",
                list(&MAX_TORQUE),
                list(&INERTIA)
            ),
        );
    }
    let path = dir.join(if limited { "slew.toml" } else { "plain.toml" });
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `config` for 4 s; the commanded positions per cycle, the period, and the
/// report.
fn run(config: &Path, out: &Path) -> (Vec<Vec<f64>>, f64, serde_json::Value) {
    let o = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args([
            "run",
            "--duration",
            "2.5s",
            "--quiet",
            "--no-plots",
            "--config",
        ])
        .arg(config)
        .arg("--out")
        .arg(out)
        .env("CHUNKRT_LOG", "warn")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cfg = chunkrt_config::Config::load(config).unwrap();
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    (
        cycles.into_iter().map(|c| c.command_rad).collect(),
        cfg.period_ns() as f64 * 1e-9,
        report,
    )
}

/// The largest `|d(I a)/dt| / (max_torque / rise_time)` per joint over the commands.
fn worst_slew_ratio(q: &[Vec<f64>], t: f64) -> [f64; 7] {
    let mut worst = [0.0f64; 7];
    for k in 3..q.len() {
        for j in 0..7 {
            let a = |k: usize| (q[k][j] - 2.0 * q[k - 1][j] + q[k - 2][j]) / (t * t);
            let rate = INERTIA[j] * (a(k) - a(k - 1)) / t;
            worst[j] = worst[j].max(rate.abs() / (MAX_TORQUE[j] / (RISE_MS * 1e-3)));
        }
    }
    worst
}

#[test]
fn the_commanded_torque_never_slews_faster_than_its_limit() {
    let dir = temp_dir("slew", "sim");
    let (q, t, report) = run(&config_in(&dir, true), &dir.join("slew"));
    let worst = worst_slew_ratio(&q, t);
    for (j, w) in worst.iter().enumerate() {
        assert!(
            *w <= 1.0 + 1e-6,
            "joint {j}: torque slewed at {w:.3} x its limit"
        );
    }
    let gate = &report["gate"];
    assert!(gate["torque_slew"].as_u64().unwrap() > 0, "{gate}");
    let logged = std::fs::read_to_string(dir.join("slew/gate.jsonl")).unwrap();
    assert!(
        logged.contains("\"constraint\":\"torque_slew\""),
        "gate.jsonl names it"
    );
    // The witness: the same policy without the limit asks for faster torque changes.
    let (q, t, report) = run(&config_in(&dir, false), &dir.join("plain"));
    let unlimited = worst_slew_ratio(&q, t);
    assert!(
        unlimited.iter().any(|w| *w > 1.5),
        "without the limit the commands stay within it ({unlimited:?}): the test shows nothing"
    );
    assert_eq!(report["gate"]["torque_slew"], 0);
    assert_eq!(report["gate"]["action_filter"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}
