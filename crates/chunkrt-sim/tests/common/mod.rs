//! Helpers shared by the sim's integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use chunkrt_core::{Command, DriveRequest, MonoTime, MAX_DOF};
use chunkrt_sim::{SimArm, SimArmParams};

/// Arbitrary non-zero epoch, so nothing depends on the clock starting at 0.
pub const T0: MonoTime = MonoTime(5_000_000_000);

/// One frictionless-ish joint with wide stops, for clean response measurements.
pub fn single_joint(bandwidth_hz: f64) -> SimArmParams {
    let mut p = SimArmParams::with_joints(1);
    p.bandwidth_hz = bandwidth_hz;
    p.inertia_kg_m2[0] = 0.1;
    p.viscous_nm_s_rad[0] = 0.0;
    p.coulomb_nm[0] = 0.0;
    p.max_torque_nm[0] = 1000.0;
    p.pos_min_rad[0] = -3.0;
    p.pos_max_rad[0] = 3.0;
    p.initial_pos_rad[0] = 0.0;
    p
}

pub fn arm(params: SimArmParams) -> SimArm {
    SimArm::new(params).expect("valid params")
}

/// A command for every joint of `arm`: `pos` / `vel` for joint `j`, the rest at `rest`.
pub fn command(dof: usize, request: DriveRequest, pos: &[f64], vel: &[f64]) -> Command {
    let mut cmd = Command {
        dof: dof as u16,
        request,
        ..Command::default()
    };
    cmd.pos_rad[..pos.len()].copy_from_slice(pos);
    cmd.vel_rad_s[..vel.len()].copy_from_slice(vel);
    cmd
}

/// Positions of the first `dof` joints.
pub fn positions(arm: &SimArm) -> [f64; MAX_DOF] {
    let mut p = [0.0; MAX_DOF];
    for (j, x) in p.iter_mut().enumerate().take(arm.params().joints) {
        *x = arm.joint(j).expect("joint exists").pos_rad;
    }
    p
}
