//! `chunkrt gap`'s measurement on the simulated arm: nothing found between a plant
//! and itself, and known mechanisms injected on one side found at their analytic size
//! (a drive delay as phase lag, an encoder offset as bias). Real runs of the runtime,
//! on its real threads and clock.

use chunkrt_config::{Config, PerJoint};
use chunkrt_gap::{compare, measure_plant, GapRow, GapSetup, PlantMeasurement, Tolerances};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn config(name: &str) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../rt-config")
        .join(name);
    Config::load(&path).unwrap_or_else(|e| panic!("rt-config/{name}: {e}"))
}

fn sim(period_ms: f64) -> Config {
    let mut cfg = config("sim.toml");
    cfg.control.period_ms = period_ms;
    cfg
}

/// A fresh directory for one test's runs (left behind when the test fails, for a look).
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("chunkrt-gap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn measure(cfg: &Config, name: &str, dir: &Path) -> PlantMeasurement {
    measure_joints(cfg, name, dir, &[0])
}

fn measure_joints(cfg: &Config, name: &str, dir: &Path, joints: &[usize]) -> PlantMeasurement {
    let stop = Arc::new(AtomicBool::new(false));
    let setup = GapSetup {
        joints: joints.to_vec(),
        ..GapSetup::default()
    };
    measure_plant(cfg, name, &setup, &dir.join(name), stop)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn row<'a>(rows: &'a [GapRow], metric: &str, joint: Option<usize>) -> &'a GapRow {
    rows.iter()
        .find(|r| r.metric == metric && r.joint == joint)
        .unwrap_or_else(|| panic!("no row {metric} joint {joint:?} in {rows:#?}"))
}

fn over(rows: &[GapRow]) -> Vec<&GapRow> {
    rows.iter().filter(|r| r.over).collect()
}

#[test]
fn a_plant_against_itself_shows_no_gap_and_play_and_an_encoder_offset_are_found_at_their_size() {
    let dir = scratch("bias");
    let reference = measure(&sim(20.0), "sim", &dir);
    let same = measure(&sim(20.0), "sim-again", &dir);
    let tol = Tolerances::default();
    let rows = compare(&reference, &same, &tol);
    assert!(
        over(&rows).is_empty(),
        "sim against itself: {:#?}",
        over(&rows)
    );
    // Every channel is there: 4 frequencies x (lag, gain), the backlash and the step's
    // settling time and overshoot, 6 coupled joints, and per joint load, bias and
    // noise, then 3 timing rows.
    assert_eq!(rows.len(), 11 + 6 + 7 * 3 + 3, "{rows:#?}");

    // The plant: 2 mrad of play on joint 0 (the host reads the link behind it), and
    // its positions read through an offset on joints 1 and 5.
    let mut worn = sim(20.0);
    worn.sim.as_mut().unwrap().backlash_rad =
        Some(PerJoint::Each(vec![0.002, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]));
    worn.inject.feedback_bias_rad =
        Some(PerJoint::Each(vec![0.0, 0.01, 0.0, 0.0, 0.0, -0.004, 0.0]));
    let plant = measure(&worn, "sim-worn", &dir);
    let rows = compare(&reference, &plant, &tol);
    for (metric, j, size) in [
        ("bias_rad", 1, 0.01),
        ("bias_rad", 5, -0.004),
        ("backlash_rad", 0, 0.002),
    ] {
        let r = row(&rows, metric, Some(j));
        assert!(r.over, "{r:?}");
        assert!(
            (r.difference - size).abs() <= 0.1 * f64::abs(size),
            "{metric} joint {j}: {r:?}"
        );
    }
    // Nothing else is over but what the play does to joint 0's own response (the
    // probe's millirad strokes are lost in its 2 mrad).
    for r in over(&rows) {
        let expected = matches!((r.metric.as_str(), r.joint), ("bias_rad", Some(1 | 5)))
            || (r.channel == "actuator" && r.joint == Some(0));
        assert!(expected, "{r:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_transport_delay_of_8_ms_is_found_as_its_phase_lag_at_every_probe_frequency() {
    let dir = scratch("delay");
    let reference = measure(&sim(1.0), "sim-1ms", &dir);
    let mut delayed = sim(1.0);
    delayed.inject.transport_delay_ms = 8.0;
    let plant = measure(&delayed, "sim-1ms-delayed", &dir);
    let rows = compare(&reference, &plant, &Tolerances::default());
    // A pure delay T lags by 360 f T degrees and leaves the gain: 28.8 degrees at 10 Hz.
    for (f, lag) in [("1", 2.88), ("2", 5.76), ("5", 14.4), ("10", 28.8)] {
        let r = row(&rows, &format!("phase_lag_deg@{f}Hz"), Some(0));
        assert!((r.difference - lag).abs() <= 2.0, "{f} Hz: {r:?}");
        let g = row(&rows, &format!("gain_db@{f}Hz"), Some(0));
        assert!(g.difference.abs() < 0.2, "{f} Hz: {g:?}");
    }
    assert!(row(&rows, "phase_lag_deg@10Hz", Some(0)).over);
    assert!(!row(&rows, "phase_lag_deg@1Hz", Some(0)).over);
    // The step response is the same one 8 ms later: it settles 8 ms later (measured
    // from the command's step, within a 1 ms bus period) with the same overshoot.
    let s = row(&rows, "step_settling_ms", Some(0));
    assert!((s.difference - 8.0).abs() <= 1.0, "{s:?}");
    assert!(!s.over, "8 ms is within the 15 ms tolerance: {s:?}");
    let o = row(&rows, "step_overshoot_pct", Some(0));
    assert!(o.difference.abs() < 1.0, "{o:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn against_the_mujoco_arm_the_gap_names_gravity_per_joint_and_the_coupling_of_the_links() {
    let dir = scratch("mujoco");
    let reference = measure_joints(&sim(20.0), "sim", &dir, &[1]);
    let mj = config("sim-mujoco.toml");
    let plant = measure_joints(&mj, "mujoco", &dir, &[1]);
    let rows = compare(&reference, &plant, &Tolerances::default());
    // The oracle: MuJoCo's own gravity torque on each joint at the start pose
    // (`qfrc_bias` at rest), from the model directly, not from any run.
    let params = chunkrt_rt::build::mujoco_params(&mj).expect("[mujoco]");
    let arm = chunkrt_mujoco::MujocoArm::new(params).expect("the Panda model loads");
    for j in 0..7 {
        let gravity = arm.joint(j).unwrap().bias_torque_nm;
        let r = row(&rows, "hold_torque_nm", Some(j));
        // The simulated arm has no gravity: its drives hold nothing at rest.
        assert!(r.reference.abs() < 0.05, "joint {j}: {r:?}");
        assert!(
            (r.plant - gravity).abs() <= 0.05 * gravity.abs() + 0.2,
            "joint {j}: held {} N m against MuJoCo's gravity {gravity} N m: {r:?}",
            r.plant
        );
        assert_eq!(
            r.over,
            gravity.abs() > 1.2,
            "joint {j} (gravity {gravity} N m): {r:?}"
        );
    }
    // Joint 1's probe moves the links beyond it on the MuJoCo arm; the simulated
    // arm's joints are independent.
    let coupled: Vec<&GapRow> = rows.iter().filter(|r| r.channel == "coupling").collect();
    assert_eq!(coupled.len(), 6);
    assert!(coupled.iter().all(|r| r.reference < 1e-9), "{coupled:#?}");
    assert!(coupled.iter().any(|r| r.plant > 1e-3), "{coupled:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}
