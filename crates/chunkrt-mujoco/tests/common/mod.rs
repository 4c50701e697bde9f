//! Helpers shared by the MuJoCo arm's tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::PathBuf;

use chunkrt_core::{Backend, Command, DriveRequest, Feedback, MonoTime, MAX_DOF};
use chunkrt_mujoco::{MujocoArm, MujocoParams};

/// Arbitrary non-zero epoch, so nothing depends on the clock starting at 0.
pub const T0: MonoTime = MonoTime(5_000_000_000);

/// A 1 kHz bus.
pub const PERIOD_NS: u64 = 1_000_000;

/// The bundled arm model.
pub fn panda_xml() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/franka_panda/panda.xml")
}

/// The bundled Panda starting at rest at `pose`.
pub fn panda_at(pose: &[f64; 7]) -> MujocoParams {
    let mut p = MujocoParams::panda(panda_xml());
    p.initial_pos_rad[..7].copy_from_slice(pose);
    p
}

/// An arm built from `params` and started at `T0`, with its first feedback.
pub fn started(params: MujocoParams) -> (MujocoArm, Feedback) {
    let mut arm = MujocoArm::new(params).expect("the bundled model loads");
    let mut fb = Feedback::default();
    arm.start(T0, &mut fb).expect("start");
    (arm, fb)
}

/// A `Track` command for the first `pos.len()` joints at `pos`, at rest.
pub fn track(pos: &[f64]) -> Command {
    let mut cmd = Command {
        dof: pos.len() as u16,
        request: DriveRequest::Track,
        ..Command::default()
    };
    cmd.pos_rad[..pos.len()].copy_from_slice(pos);
    cmd
}

/// The time of bus cycle `k` after `T0`.
pub fn cycle(k: u64) -> MonoTime {
    T0.add_ns(k * PERIOD_NS)
}

/// Unused joints of a `JointVec`-sized array.
pub const fn zeros() -> [f64; MAX_DOF] {
    [0.0; MAX_DOF]
}
