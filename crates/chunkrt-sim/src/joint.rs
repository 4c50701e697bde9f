//! One simulated joint: a CSP drive (`drive.rs`: cascaded position / velocity loop,
//! torque limit, quick-stop ramp) on a rigid motor + link with viscous and stick-slip
//! Coulomb friction and hard stops. Pure and deterministic: time comes in as arguments.

use chunkrt_core::DriveState;

use crate::drive::{Drive, DriveTuning};
use crate::params::{SimArmParams, VELOCITY_LOOP_RATIO};

/// Below this speed a joint counts as at rest. A position loop settles exponentially,
/// so "exactly zero" may never come; 1e-4 rad/s is 0.006 degrees per second.
pub const REST_VEL_RAD_S: f64 = 1e-4;

/// A snapshot of one joint, for tests and analysis tools.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointState {
    /// Position (of the motor, where the drive's encoder sits).
    pub pos_rad: f64,
    /// The link's position, which the host reads: `pos_rad` but for the backlash.
    pub link_pos_rad: f64,
    /// Velocity.
    pub vel_rad_s: f64,
    /// Torque the drive applies (after saturation).
    pub torque_nm: f64,
    /// External load torque acting on the joint.
    pub external_torque_nm: f64,
    /// Drive state.
    pub state: DriveState,
    /// Drive error code (0 = none).
    pub error_code: u16,
    /// Position target the drive tracks at this instant (extrapolated command or
    /// quick-stop ramp).
    pub target_pos_rad: f64,
    /// Velocity target (feed-forward) at this instant.
    pub target_vel_rad_s: f64,
}

/// Drive + plant of one joint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Joint {
    // Plant.
    inertia_kg_m2: f64,
    viscous_nm_s_rad: f64,
    coulomb_nm: f64,
    pos_min_rad: f64,
    pos_max_rad: f64,
    /// Play between motor and link.
    backlash_rad: f64,
    // Plant state.
    pos_rad: f64,
    /// The link behind the backlash.
    link_pos_rad: f64,
    vel_rad_s: f64,
    external_torque_nm: f64,
    drive: Drive,
}

impl Joint {
    /// Joint `j` of validated `params`, at rest at its initial position, disabled.
    pub(crate) fn new(params: &SimArmParams, j: usize) -> Joint {
        let pos = params.initial_pos_rad[j];
        let tuning = DriveTuning {
            quick_stop_decel_rad_s2: params.quick_stop_decel_rad_s2[j],
            velocity_feedforward: params.velocity_feedforward,
            max_extrapolation_ns: params.max_extrapolation_ns,
            ..DriveTuning::cascade(
                params.inertia_kg_m2[j],
                params.velocity_loop_rad_s(),
                VELOCITY_LOOP_RATIO,
                params.max_torque_nm[j],
            )
        };
        Joint {
            inertia_kg_m2: params.inertia_kg_m2[j],
            viscous_nm_s_rad: params.viscous_nm_s_rad[j],
            coulomb_nm: params.coulomb_nm[j],
            pos_min_rad: params.pos_min_rad[j],
            pos_max_rad: params.pos_max_rad[j],
            backlash_rad: params.backlash_rad[j],
            pos_rad: pos,
            link_pos_rad: pos,
            vel_rad_s: 0.0,
            external_torque_nm: 0.0,
            drive: Drive::new(tuning, pos),
        }
    }

    pub(crate) fn state(&self) -> DriveState {
        self.drive.state()
    }

    pub(crate) fn error_code(&self) -> u16 {
        self.drive.error_code()
    }

    pub(crate) fn snapshot(&self, t_ns: u64) -> JointState {
        let (target_pos_rad, target_vel_rad_s) = self.drive.target(t_ns, self.pos_rad);
        JointState {
            pos_rad: self.pos_rad,
            link_pos_rad: self.link_pos_rad,
            vel_rad_s: self.vel_rad_s,
            torque_nm: self.drive.torque_nm(),
            external_torque_nm: self.external_torque_nm,
            state: self.drive.state(),
            error_code: self.drive.error_code(),
            target_pos_rad,
            target_vel_rad_s,
        }
    }

    pub(crate) fn set_external_torque(&mut self, torque_nm: f64) {
        self.external_torque_nm = torque_nm;
    }

    /// Operation enabled, holding the current position.
    pub(crate) fn enable_holding(&mut self, t_ns: u64) {
        self.drive.enable_holding(self.pos_rad, t_ns);
    }

    /// Latches a new setpoint (only meaningful while enabled).
    pub(crate) fn latch(&mut self, pos_rad: f64, vel_rad_s: f64, t_ns: u64) {
        self.drive.latch(pos_rad, vel_rad_s, t_ns);
    }

    /// Enters quick stop from operation enabled (the drive's own ramp to rest).
    pub(crate) fn quick_stop(&mut self) {
        self.drive.quick_stop(self.pos_rad, self.vel_rad_s);
    }

    /// No torque (a fault stays a fault until reset).
    pub(crate) fn disable(&mut self) {
        self.drive.disable();
    }

    /// Fault reaction: torque off, error code set.
    pub(crate) fn fault(&mut self, code: u16) {
        self.drive.fault(code);
    }

    /// Clears a fault; the drive is then disabled until enabled again.
    pub(crate) fn reset_fault(&mut self) {
        self.drive.reset_fault();
    }

    /// Whether the joint is at rest (below `REST_VEL_RAD_S`) and its drive is not moving
    /// its target.
    pub(crate) fn at_rest(&self) -> bool {
        self.vel_rad_s.abs() < REST_VEL_RAD_S && self.drive.ramp_at_rest()
    }

    /// Advances drive and plant by one sub-step `dt_s` starting at sim time `t_ns`.
    pub(crate) fn step(&mut self, t_ns: u64, dt_s: f64) {
        self.drive.step(t_ns, dt_s, self.pos_rad, self.vel_rad_s);
        self.integrate(dt_s);
        // The link is carried at the gap's edge (`max`/`min`, not `clamp`: a position
        // that is not a number must not panic the backend).
        let half = 0.5 * self.backlash_rad;
        self.link_pos_rad = self
            .link_pos_rad
            .max(self.pos_rad - half)
            .min(self.pos_rad + half);
    }

    /// Semi-implicit Euler on `J dv/dt = tau + tau_ext - b v - friction`, with
    /// stick-slip Coulomb friction (the joint stays stuck while the other torques do
    /// not exceed the Coulomb level, and stops instead of reversing when friction would
    /// carry the velocity through zero) and hard stops at the limits.
    fn integrate(&mut self, dt_s: f64) {
        let v = self.vel_rad_s;
        let applied = self.drive.torque_nm() + self.external_torque_nm - self.viscous_nm_s_rad * v;
        let mut v_next = if v == 0.0 {
            if applied.abs() <= self.coulomb_nm {
                0.0
            } else {
                let net = applied - self.coulomb_nm.copysign(applied);
                net / self.inertia_kg_m2 * dt_s
            }
        } else {
            let net = applied - self.coulomb_nm.copysign(v);
            let v_next = v + net / self.inertia_kg_m2 * dt_s;
            if v_next.signum() != v.signum() {
                0.0 // crossed zero: stick for now, break away next sub-step if pushed
            } else {
                v_next
            }
        };
        let mut p_next = self.pos_rad + v_next * dt_s;
        if p_next <= self.pos_min_rad {
            p_next = self.pos_min_rad;
            v_next = v_next.max(0.0);
        } else if p_next >= self.pos_max_rad {
            p_next = self.pos_max_rad;
            v_next = v_next.min(0.0);
        }
        self.pos_rad = p_next;
        self.vel_rad_s = v_next;
    }
}
