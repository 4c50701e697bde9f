//! The thermal monitor on the permission path through the binary (issue 41): the
//! scripted policy moves the MuJoCo arm (gravity on) with joint 3 rated far below the
//! torque it holds against gravity (`[limits.thermal]`, 12 N m continuous against
//! about 16 to 18 N m measured). Its I²t load rises, the gate derates its speed, then the
//! policy loses authority and the arm stops.
//!
//! The oracle recomputes the load from the torques the plant reported (the
//! recording's `feedback_torque_nm`, one update per recorded cycle, the first-order
//! thermal model of the `[limits.thermal]` docs) and judges what the drives were sent:
//! the derated cycles' commanded speed is within the derated limit, the withdrawal
//! comes in the cycle the recomputed load crosses `withdraw_at` (one cycle either
//! way: the monitor also took the bring-up's measurement), no cycle plays after it,
//! every joint stops within its braking envelope, and the report's high-water mark is
//! the recomputed peak. Then (issue 56) the heat is carried over: the wear ledger holds
//! the run's end load, and the next run of the same arm starts from it, cooled.

mod common;

use chunkrt_config::Config;
use chunkrt_testkit::edit::Edit;
use chunkrt_tests::braking::check_stop;
use chunkrt_tests::recording;
use common::{repo, temp_dir};
use std::path::{Path, PathBuf};
use std::process::Command;

const JOINT: usize = 3;
const CONTINUOUS_NM: f64 = 12.0;
const TIME_CONSTANT_S: f64 = 3.0;
const DERATE_AT: f64 = 0.3;
const WITHDRAW_AT: f64 = 0.95;
const MIN_DERATE: f64 = 0.1;
const VMAX3: f64 = 1.0;

/// `rt-config/sim-scripted.toml` on the MuJoCo arm (its `[mujoco]` section from
/// `sim-mujoco.toml`, paths absolute, threads unpinned), joint 3's speed limit 1 rad/s
/// and the thermal monitor on, the motors declared cold where the wear ledger has no
/// line of the arm (`initial_load = 0`).
fn config_in(dir: &Path) -> PathBuf {
    let mujoco = std::fs::read_to_string(repo().join("rt-config/sim-mujoco.toml")).unwrap();
    let start = mujoco.find("[mujoco]").unwrap();
    let end = mujoco[start + 1..]
        .find("\n[")
        .map_or(mujoco.len(), |i| start + 1 + i);
    let section = mujoco[start..end].to_string().edit(
        "model = \"../models/",
        &format!("model = \"{}/", repo().join("models").display()),
    );
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml"))
        .unwrap()
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n")
        .edit("[backend]\nkind = \"sim\"", "[backend]\nkind = \"mujoco\"")
        .edit(
            "max_vel_rad_s = [2.175, 2.175, 2.175, 2.175, 2.61,",
            &format!("max_vel_rad_s = [2.175, 2.175, 2.175, {VMAX3}, 2.61,"),
        )
        .edit(
            "brake_acc_rad_s2 = [7.5, 3.75, 5.0, 6.25, 7.5, 10.0, 10.0]\n",
            &format!(
                "brake_acc_rad_s2 = [7.5, 3.75, 5.0, 6.25, 7.5, 10.0, 10.0]\n\n\
                 [limits.thermal]\n\
                 continuous_torque_nm = [87.0, 87.0, 87.0, {CONTINUOUS_NM}, 12.0, 12.0, 12.0]\n\
                 time_constant_s = {TIME_CONSTANT_S}\n\
                 derate_at = {DERATE_AT}\n\
                 withdraw_at = {WITHDRAW_AT}\n\
                 min_derate = {MIN_DERATE}\n\
                 initial_load = 0.0\n"
            ),
        )
        + "\n"
        + &section
        + "\n[wear]\nledger = \"wear.jsonl\"\nhardware_id = \"panda-under-test\"\n";
    let path = dir.join("thermal.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The speed-limit factor at load `r` (the `[limits.thermal]` docs).
fn factor(r: f64) -> f64 {
    if r <= DERATE_AT {
        1.0
    } else if r >= WITHDRAW_AT {
        MIN_DERATE
    } else {
        1.0 - (1.0 - MIN_DERATE) * (r - DERATE_AT) / (WITHDRAW_AT - DERATE_AT)
    }
}

#[test]
fn a_joint_held_against_gravity_past_its_rating_is_derated_then_loses_authority() {
    let dir = temp_dir("thermal", "mujoco");
    let config = config_in(&dir);
    let out = dir.join("run");
    let o = Command::new(common::bin())
        .args([
            "run",
            "--duration",
            "6s",
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
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cfg = Config::load(&config).unwrap();
    let t = cfg.period_ns() as f64 * 1e-9;
    let (cycles, events) = recording::read(&out.join("recording.mcap")).unwrap();
    // loads[k]: the load cycle k is judged by, from the torques measured up to the
    // cycle before, each held for the periods until the next cycle (skipped deadlines
    // included). The monitor also took the bring-up's measurement: its load is one
    // period's heating ahead.
    let keep = (-t / TIME_CONSTANT_S).exp();
    let mut x = 0.0;
    let mut loads = vec![0.0];
    for k in 1..cycles.len() {
        let tau = cycles[k - 1].feedback_torque_nm[JOINT];
        let alpha = 1.0 - keep.powi(1 + cycles[k].missed as i32);
        x += alpha * (tau * tau - x);
        loads.push(x / (CONTINUOUS_NM * CONTINUOUS_NM));
    }
    let predicted = loads
        .iter()
        .position(|&r| r >= WITHDRAW_AT)
        .expect("the load reaches withdraw_at within the run");
    let withdrawn = cycles
        .iter()
        .position(|c| c.mode != "Playing" && c.cycle > 5)
        .expect("the policy lost authority");
    assert!(
        withdrawn.abs_diff(predicted) <= 1,
        "authority taken at cycle {withdrawn}, the load crossed {WITHDRAW_AT} for cycle {predicted}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "Thermal" && e["from"] == "Playing"),
        "a Thermal withdrawal among the events"
    );
    assert!(
        cycles[withdrawn..].iter().all(|c| c.mode != "Playing"),
        "no cycle plays the policy after it (the load only rises while the arm holds)"
    );
    // The derated cycles: the gate bound joint 3 by the derated speed, and the command
    // kept it.
    let gate = std::fs::read_to_string(out.join("gate.jsonl")).unwrap();
    let thermal: Vec<serde_json::Value> = gate
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["constraint"] == "thermal")
        .collect();
    assert!(!thermal.is_empty(), "the gate derated joint 3's speed");
    assert!(thermal.iter().all(|v| v["joint"] == JOINT as u64));
    let thermal_bit = chunkrt_core::Constraint::Thermal.bit();
    let derated: Vec<usize> = (2..withdrawn)
        .filter(|&k| cycles[k].gate_mask & thermal_bit != 0)
        .collect();
    assert!(!derated.is_empty(), "derated cycles before the withdrawal");
    for &k in &derated {
        // The monitor's load is one period's heating ahead of ours: the bound of ours
        // is the looser one.
        assert!(loads[k + 1] > DERATE_AT, "cycle {k}: load {}", loads[k]);
        let speed = (cycles[k].command_rad[JOINT] - cycles[k - 1].command_rad[JOINT]).abs() / t;
        let limit = factor(loads[k]) * VMAX3;
        assert!(
            speed <= limit + 1e-9,
            "cycle {k}: joint 3 commanded at {speed} rad/s, derated limit {limit}"
        );
    }
    let limits = cfg.joint_limits();
    for (j, lim) in limits.joint[..cfg.control.joints].iter().enumerate() {
        let q: Vec<f64> = cycles.iter().map(|c| c.command_rad[j]).collect();
        check_stop(&q, withdrawn - 1, lim, t).unwrap_or_else(|e| panic!("joint {j}: {e}"));
    }
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    let peak = report["thermal_peak_load"][JOINT].as_f64().unwrap();
    let ours = loads.iter().cloned().fold(0.0, f64::max);
    assert!(
        (peak - ours).abs() <= 0.02 * ours,
        "report {peak}, recomputed {ours}"
    );
    eprintln!(
        "derated {} cycles from cycle {} (load {:.3}); authority taken at cycle {withdrawn} \
         (load {:.3}); peak load {ours:.3}",
        derated.len(),
        derated[0],
        loads[derated[0]],
        loads[withdrawn]
    );
    hot_restart(&config, &dir, *loads.last().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 56, heat carried over: the run above (declared cold, no ledger line) appended
/// its end load to the wear ledger, the load the oracle recomputed for its last cycle.
/// A second run of the same arm moments later starts from that load cooled by the
/// model for the time since (`r exp(-dt / T)`, `dt` as the report states it, within
/// the wall-clock time the test saw pass), above `withdraw_at`: the policy never plays
/// (its first cycle is already withdrawn), where the cold run played for its first
/// ~100 cycles. Before, every run started cold and the second played as the first did.
fn hot_restart(config: &Path, dir: &Path, end_load: f64) {
    let ledger = dir.join("wear.jsonl");
    let line: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(&ledger)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    let i2t_end = line["i2t_end"][JOINT].as_f64().unwrap();
    assert!(
        (i2t_end - end_load).abs() <= 0.02 * end_load,
        "ledger i2t_end {i2t_end}, recomputed {end_load}"
    );
    assert!(i2t_end > WITHDRAW_AT, "the first run ended hot: {i2t_end}");
    let t_written = std::time::SystemTime::now();
    let out = dir.join("run-hot");
    let o = Command::new(common::bin())
        .args([
            "run",
            "--duration",
            "1s",
            "--quiet",
            "--no-plots",
            "--config",
        ])
        .arg(config)
        .arg("--out")
        .arg(&out)
        .env("CHUNKRT_LOG", "warn")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let seen_s = t_written.elapsed().unwrap().as_secs_f64()
        + (t_written
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            - line["t_end_unix_s"].as_f64().unwrap());
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    let from = &report["thermal_initial_from"][0];
    assert_eq!(from["from"], "ledger", "{from}");
    assert_eq!(from["recorded"], "i2t_end", "{from}");
    let cooled_s = from["cooled_s"].as_f64().unwrap();
    assert!(
        (0.0..=seen_s).contains(&cooled_s),
        "cooled for {cooled_s} s, {seen_s} s passed"
    );
    let start = report["thermal_initial_load"][JOINT].as_f64().unwrap();
    let want = i2t_end * (-cooled_s / TIME_CONSTANT_S).exp();
    assert!(
        (start - want).abs() <= 1e-12 * want,
        "started at {start}, closed form {want}"
    );
    assert!(start > WITHDRAW_AT, "still hot after {cooled_s} s: {start}");
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    assert!(cycles.len() > 20, "{} cycles", cycles.len());
    let played = cycles.iter().filter(|c| c.mode == "Playing").count();
    assert_eq!(played, 0, "the hot arm's policy played {played} cycles");
    eprintln!(
        "hot restart: ledger end load {i2t_end:.3}, started at {start:.3} after {cooled_s:.2} s, \
         0 of {} cycles played",
        cycles.len()
    );
}
