//! The EtherCAT master against `chunkrt ecsim`'s drives with the MuJoCo arm behind them
//! (rt-config/arm-ethercat-mujoco.toml, in-process, virtual clock): what the master reads
//! back through the drives' process data (0x6064 position, 0x6077 torque, scaled by the
//! configuration's mounts) is judged against the physics: the pose the arm starts in, the
//! torque that holds it against gravity as MuJoCo computes it for that pose
//! (`qfrc_bias`, on a second arm built apart), and how that torque changes when the arm
//! is moved to another pose. With each drive's own motor model (no arm behind the
//! drives) no torque holds anything at rest; with a drive mounted reversed
//! (`direction = -1`, the shoulder and elbow here) a torque read without its direction
//! comes back with the wrong sign.

#[path = "../../crates/chunkrt-ethercat/tests/common/mod.rs"]
mod common;

use chunkrt_config::Config;
use chunkrt_core::{Backend, DriveRequest, Feedback, JointVec, MAX_DOF};
use chunkrt_ecsim::{SimConfig, SimNetwork};
use chunkrt_ethercat::EthercatBackend;
use chunkrt_mujoco::MujocoArm;
use common::{hold, t};
use std::path::Path;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("rt-config").is_dir())
        .expect("rt-config above the crate")
}

/// The MuJoCo veth configuration, made fit for a test process.
fn config() -> Config {
    let path = repo().join("rt-config/arm-ethercat-mujoco.toml");
    let mut cfg = Config::load(&path).expect("rt-config/arm-ethercat-mujoco.toml loads");
    cfg.control.lock_memory = false;
    cfg.control.cpu = -1;
    cfg.inference.cpu = -1;
    cfg
}

/// The master on a virtual-clock chain of 7 drives moved by the configuration's arm.
fn master_on_the_arm(cfg: &Config) -> EthercatBackend {
    let plant = chunkrt_rt::build::ecsim_arm(cfg).expect("the configuration's arm builds");
    let mut sim = SimConfig::virtual_chain(7);
    sim.cycle_us = (cfg.control.period_ms * 1000.0).round() as u64;
    let mut net = SimNetwork::new(sim).expect("valid simulator config");
    net.set_plant(Box::new(plant)).expect("7 joints, 7 drives");
    EthercatBackend::simulated(common::params(cfg), net).0
}

/// MuJoCo's gravity + Coriolis torque (`qfrc_bias`) on each joint of the configuration's
/// arm at rest at `pose`: a second arm, built apart from the one behind the drives.
fn holding_torque(cfg: &Config, pose: &JointVec) -> JointVec {
    let mut params = chunkrt_rt::build::mujoco_params(cfg).expect("[mujoco]");
    params.initial_pos_rad = *pose;
    let arm = MujocoArm::new(params).expect("the arm builds");
    let mut tau = [0.0; MAX_DOF];
    for (j, t) in tau.iter_mut().enumerate().take(7) {
        *t = arm.joint(j).expect("joint").bias_torque_nm;
    }
    tau
}

/// Holds the command `pose` for `cycles` 1 ms cycles from cycle `k`; the torque read
/// back, averaged over the last 200 cycles (one reading is within a few per mille of
/// the rated torque: the drive's loop on a quantized encoder, and 0x6077's own step).
fn hold_at(
    b: &mut EthercatBackend,
    fb: &mut Feedback,
    pose: &JointVec,
    k: &mut u64,
    cycles: u64,
) -> JointVec {
    let mut cmd = hold(fb, DriveRequest::Track);
    cmd.pos_rad = *pose;
    let mut sum = [0.0; MAX_DOF];
    for i in 0..cycles {
        *k += 1;
        b.exchange(t(*k, 1.0), &cmd, fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
        if i + 200 >= cycles {
            for (s, t) in sum.iter_mut().zip(&fb.torque_nm) {
                *s += t / 200.0;
            }
        }
    }
    sum
}

/// Each joint's read-back torque (`read`) against the physics' holding torque, within
/// the 0x6077 resolution (one per mille of the rated torque) plus 1 %.
fn assert_holds(read: &JointVec, cfg: &Config, expected: &JointVec, what: &str) {
    let ec = cfg.ethercat.as_ref().expect("[ethercat]");
    let worst = (0..7).fold(0.0f64, |w, j| w.max((read[j] - expected[j]).abs()));
    eprintln!(
        "{what}: read {:?} N m, physics {:?} N m, worst {worst:.4} N m",
        &read[..7],
        &expected[..7]
    );
    for d in &ec.drive {
        let j = d.joint;
        let tol = 1e-3 * d.rated_torque_nm + 0.01 * expected[j].abs();
        assert!(
            (read[j] - expected[j]).abs() <= tol,
            "{what}: joint {j} reads {:.3} N m, the physics holds it with {:.3} N m \
             (tolerance {tol:.3}); every joint: read {:?}, physics {:?}",
            read[j],
            expected[j],
            &read[..7],
            &expected[..7]
        );
    }
}

#[test]
fn the_master_reads_back_the_arm_behind_the_drives_its_pose_and_the_torque_that_holds_it() {
    let cfg = config();
    let start_pose = cfg
        .mujoco
        .as_ref()
        .unwrap()
        .initial_pos_rad
        .clone()
        .unwrap();
    let mut start = [0.0; MAX_DOF];
    for (j, q) in start.iter_mut().enumerate().take(7) {
        *q = start_pose.get(j);
    }
    let mut b = master_on_the_arm(&cfg);
    let mut fb = common::start(&mut b);
    // The pose the arm starts in, through each drive's offset and direction (a wrong
    // offset or direction is off by thousands of counts or twice the angle): within
    // what the holding brakes let the loaded joints sag before the drives take over
    // (measured: 45 urad on the elbow, 7.5 counts).
    for (j, (got, want)) in fb.pos_rad.iter().zip(&start).enumerate().take(7) {
        assert!(
            (got - want).abs() < 2e-4,
            "joint {j}: the master reads {got} rad, the arm starts at {want} rad"
        );
    }

    // Held there for a second: the drives hold the arm against gravity with the torque
    // the physics needs there, and the read-back pose stays put.
    let mut k = 1;
    let read = hold_at(&mut b, &mut fb, &start, &mut k, 1000);
    let at_start = holding_torque(&cfg, &start);
    assert!(
        at_start[3].abs() > 5.0,
        "the pose loads the elbow: {:?}",
        &at_start[..7]
    );
    assert_holds(&read, &cfg, &at_start, "at the start pose");
    for (j, (got, want)) in fb.pos_rad.iter().zip(&start).enumerate().take(7) {
        assert!(
            (got - want).abs() < 1e-3,
            "joint {j} sagged to {got} rad from {want} rad"
        );
    }

    // Shoulder forward by 0.4 rad over 2 s (a cosine ramp), then held: the load on the
    // shoulder and the elbow is now the other pose's.
    let mut moved = start;
    moved[1] += 0.4;
    let ramp = 2000u64;
    let mut cmd = hold(&fb, DriveRequest::Track);
    for i in 1..=ramp {
        let s = 0.5 - 0.5 * (std::f64::consts::PI * i as f64 / ramp as f64).cos();
        cmd.pos_rad = start;
        cmd.pos_rad[1] = start[1] + 0.4 * s;
        k += 1;
        b.exchange(t(k, 1.0), &cmd, &mut fb)
            .unwrap_or_else(|e| panic!("ramp cycle {i}: {e}"));
    }
    let read = hold_at(&mut b, &mut fb, &moved, &mut k, 1000);
    assert!(
        (fb.pos_rad[1] - moved[1]).abs() < 1e-3,
        "the shoulder reached {} rad, commanded {} rad",
        fb.pos_rad[1],
        moved[1]
    );
    let at_moved = holding_torque(&cfg, &moved);
    assert!(
        (at_moved[1] - at_start[1]).abs() > 5.0,
        "the move changes the shoulder's load: {:?} -> {:?} N m",
        &at_start[..7],
        &at_moved[..7]
    );
    assert_holds(&read, &cfg, &at_moved, "after the shoulder moved");
}

/// A quick stop on the bus ends with the arm at rest and the drives switched off, and
/// the holding brakes keep it where it stopped: the joints do not fall under gravity.
#[test]
fn a_quick_stop_ends_at_rest_and_the_brakes_hold_the_arm() {
    let cfg = config();
    let mut b = master_on_the_arm(&cfg);
    let mut fb = common::start(&mut b);
    let pose = fb.pos_rad;
    let mut k = 1;
    let _ = hold_at(&mut b, &mut fb, &pose, &mut k, 500);
    let stop = hold(&fb, DriveRequest::QuickStop);
    for _ in 0..3000 {
        k += 1;
        let _ = b.exchange(t(k, 1.0), &stop, &mut fb);
    }
    for (j, (got, was)) in fb.pos_rad.iter().zip(&pose).enumerate().take(7) {
        assert!(
            (got - was).abs() < 5e-3,
            "joint {j} moved from {was} to {got} rad after the stop"
        );
        assert!(
            fb.vel_rad_s[j].abs() < 1e-3,
            "joint {j} still moves at {} rad/s",
            fb.vel_rad_s[j]
        );
    }
}
