//! Episodes and the residual's intervention budget through the binary (issue 40): the
//! bundled flow policy on the simulated arm as the frozen base, LeRobot's ACT graph as an
//! out-of-scale residual (its corrections held at the 0.05 rad bound push the arm off
//! the goal), three episodes from two start poses (one held out) toward one goal.
//!
//! Judged on the records a user reads: `events.jsonl`'s episodes (outcome, whether the
//! residual had authority, the budget's breach) against the recording's cycles (the
//! correction let through, the commands and the measurement): the residual acts in the
//! first episode, its tracking error P99 computed from the recording is over the budget,
//! the correction leaves at its rate limit right after that episode's end and is zero
//! for the rest of the run, and the base alone then reaches the goal from both starts.

mod common;

use chunkrt_testkit::edit::Edit;
use chunkrt_tests::recording;
use common::{
    act_residual_manifest, bundled_model_sha256, flow_sim_config_text, output_text, temp_dir,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

const BOUND: f64 = 0.05;
const RATE: f64 = 0.2;
const BUDGET_P99: f64 = 0.002;

/// `rt-config/sim.toml` (the flow base) unpinned, with the residual, its budget and
/// three episodes.
fn config_in(dir: &Path) -> PathBuf {
    act_residual_manifest(dir, &bundled_model_sha256("flow.toml"));
    let text = flow_sim_config_text().edit_once(
        "\n[executor]",
        &format!(
            "\n[policy.residual]\nmanifest = \"residual.toml\"\nbound_rad = {BOUND}\n\
             rate_rad_s = {RATE}\n\n[policy.residual.budget]\n\
             max_tracking_error_p99_rad = {BUDGET_P99}\n\n[executor]"
        ),
    ) + "\n[episodes]\ncount = 3\n\
           starts_rad = [[0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8], [-0.6, 0.2, 0.5, -1.0, -0.4, 1.5, 1.1]]\n\
           held_out = [false, true]\n\
           goals_rad = [[0.9, 0.1, -0.4, -1.2, 0.5, 1.0, 0.2]]\n\
           time_limit_s = 6.0\ntolerance_rad = 0.05\n";
    let path = dir.join("episodes.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn episodes_of(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "episode")
        .collect()
}

/// The 99th percentile of `v` (nearest rank).
fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1]
}

#[test]
fn a_residual_over_its_budget_is_rolled_back_mid_run_and_the_base_finishes_the_episodes() {
    let dir = temp_dir("episodes", "rollback");
    let config = config_in(&dir);
    let out = dir.join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_chunkrt"))
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
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let eps = episodes_of(&out);
    assert_eq!(eps.len(), 3, "{eps:?}");
    let (e0, e1, e2) = (&eps[0], &eps[1], &eps[2]);
    assert_eq!(
        (e0["residual"].clone(), e0["budget_breach"].clone()),
        (Value::Bool(true), Value::from("tracking_error_p99")),
        "{e0}"
    );
    for e in [e1, e2] {
        assert_eq!(
            e["residual"], false,
            "rolled back for the rest of the run: {e}"
        );
        assert_eq!(e["outcome"], "success", "{e}");
        assert!(e["goal_err_rad"].as_f64().unwrap() <= 0.05, "{e}");
    }
    assert_eq!(
        (e1["held_out"].clone(), e2["held_out"].clone()),
        (Value::Bool(true), Value::Bool(false))
    );

    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let period = 0.02;
    let (t_begin, t_end) = (
        e0["t_begin_s"].as_f64().unwrap(),
        e0["t_s"].as_f64().unwrap(),
    );
    // Episode 0 from the recording: the residual acted, and its tracking error (largest
    // |command - measurement| per cycle) has a P99 over the budget, as the event says.
    let in_e0: Vec<&recording::RecordedCycle> = cycles
        .iter()
        .filter(|c| c.t_s >= t_begin && c.t_s <= t_end)
        .collect();
    assert!(in_e0.len() > 200, "{} cycles in episode 0", in_e0.len());
    assert!(in_e0
        .iter()
        .any(|c| c.residual_rad.iter().any(|r| r.abs() > 0.9 * BOUND)));
    let track: Vec<f64> = in_e0
        .iter()
        .map(|c| {
            c.command_rad
                .iter()
                .zip(&c.feedback_rad)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max)
        })
        .collect();
    let measured = p99(track);
    let reported = e0["tracking_error_p99_rad"].as_f64().unwrap();
    assert!(
        measured > BUDGET_P99,
        "P99 {measured} within the budget: no breach to judge"
    );
    // The report gives its histogram bin's upper edge (a twentieth of a decade).
    assert!(
        reported >= measured * (1.0 - 1e-9) && reported <= measured * 1.13,
        "reported {reported} against {measured} from the recording"
    );
    // After the breach: the correction leaves at its rate, then is zero to the end.
    let after: Vec<&recording::RecordedCycle> = cycles.iter().filter(|c| c.t_s > t_end).collect();
    let mut last = in_e0.last().unwrap().residual_rad.clone();
    let mut zero_from = None;
    for (k, c) in after.iter().enumerate() {
        for (r, l) in c.residual_rad.iter().zip(&last) {
            assert!(
                r.abs() <= l.abs() + 1e-12,
                "the correction grew after the rollback"
            );
            assert!(
                (r - l).abs() <= RATE * period * (1.0 + 1e-9) + 1e-12,
                "left faster than its rate"
            );
        }
        if c.residual_rad.iter().all(|r| *r == 0.0) {
            zero_from.get_or_insert(k);
        } else {
            assert!(
                zero_from.is_none(),
                "the correction came back after reaching zero"
            );
        }
        last = c.residual_rad.clone();
    }
    let zero_from = zero_from.expect("the correction never reached zero");
    assert!(
        zero_from as f64 * period <= BOUND / RATE + 2.0 * period,
        "zero only {zero_from} cycles after the rollback"
    );
    // The events say the same: the rollback is counted.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["counters"]["residual_rollbacks"], 1);
    assert_eq!(report["episodes"]["list"].as_array().unwrap().len(), 3);

    // `chunkrt episodes` tabulates them: the held-out frozen start succeeded.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["episodes", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let sums: Value = serde_json::from_slice(&o.stdout).unwrap();
    let held = sums["summaries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["starts"] == "held_out" && s["policy"] == "frozen")
        .expect("a held-out frozen summary");
    assert_eq!(held["success_rate"], 1.0);
    let _ = std::fs::remove_dir_all(&dir);
}
