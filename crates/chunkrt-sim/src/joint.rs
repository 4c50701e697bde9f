//! One simulated joint: a CSP drive (cascaded position / velocity loop, torque limit,
//! quick-stop ramp) on a rigid motor + link with viscous and stick-slip Coulomb friction
//! and hard stops. Pure and deterministic: time comes in as arguments.

use chunkrt_core::DriveState;

use crate::params::{SimArmParams, VELOCITY_LOOP_RATIO};

/// Integral corner of the velocity PI as a fraction of the velocity-loop bandwidth:
/// a quarter keeps about 76 degrees of phase margin in the inner loop.
const INTEGRAL_CORNER_RATIO: f64 = 0.25;

/// Below this speed a joint counts as at rest. A position loop settles exponentially,
/// so "exactly zero" may never come; 1e-4 rad/s is 0.006 degrees per second.
pub const REST_VEL_RAD_S: f64 = 1e-4;

/// A snapshot of one joint, for tests and analysis tools.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointState {
    /// Position.
    pub pos_rad: f64,
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
    // Drive tuning.
    max_torque_nm: f64,
    kp_pos: f64,
    kv_rad_s: f64,
    ki_rad_s: f64,
    quick_stop_decel_rad_s2: f64,
    velocity_feedforward: bool,
    max_extrapolation_ns: u64,
    // Plant state.
    pos_rad: f64,
    vel_rad_s: f64,
    torque_nm: f64,
    external_torque_nm: f64,
    // Drive state.
    state: DriveState,
    error_code: u16,
    /// Integral of the velocity error (rad).
    vel_err_integral: f64,
    /// The latched command and the sim time it was latched at.
    cmd_pos_rad: f64,
    cmd_vel_rad_s: f64,
    t_latch_ns: u64,
    /// Quick-stop ramp state.
    ramp_pos_rad: f64,
    ramp_vel_rad_s: f64,
}

impl Joint {
    /// Joint `j` of validated `params`, at rest at its initial position, disabled.
    pub(crate) fn new(params: &SimArmParams, j: usize) -> Joint {
        let kv = params.velocity_loop_rad_s();
        let pos = params.initial_pos_rad[j];
        Joint {
            inertia_kg_m2: params.inertia_kg_m2[j],
            viscous_nm_s_rad: params.viscous_nm_s_rad[j],
            coulomb_nm: params.coulomb_nm[j],
            pos_min_rad: params.pos_min_rad[j],
            pos_max_rad: params.pos_max_rad[j],
            max_torque_nm: params.max_torque_nm[j],
            kp_pos: kv / VELOCITY_LOOP_RATIO,
            kv_rad_s: kv,
            ki_rad_s: kv * INTEGRAL_CORNER_RATIO,
            quick_stop_decel_rad_s2: params.quick_stop_decel_rad_s2[j],
            velocity_feedforward: params.velocity_feedforward,
            max_extrapolation_ns: params.max_extrapolation_ns,
            pos_rad: pos,
            vel_rad_s: 0.0,
            torque_nm: 0.0,
            external_torque_nm: 0.0,
            state: DriveState::Disabled,
            error_code: 0,
            vel_err_integral: 0.0,
            cmd_pos_rad: pos,
            cmd_vel_rad_s: 0.0,
            t_latch_ns: 0,
            ramp_pos_rad: pos,
            ramp_vel_rad_s: 0.0,
        }
    }

    pub(crate) fn state(&self) -> DriveState {
        self.state
    }

    pub(crate) fn error_code(&self) -> u16 {
        self.error_code
    }

    pub(crate) fn snapshot(&self, t_ns: u64) -> JointState {
        let (target_pos_rad, target_vel_rad_s) = self.target(t_ns);
        JointState {
            pos_rad: self.pos_rad,
            vel_rad_s: self.vel_rad_s,
            torque_nm: self.torque_nm,
            external_torque_nm: self.external_torque_nm,
            state: self.state,
            error_code: self.error_code,
            target_pos_rad,
            target_vel_rad_s,
        }
    }

    pub(crate) fn set_external_torque(&mut self, torque_nm: f64) {
        self.external_torque_nm = torque_nm;
    }

    /// Operation enabled, holding the current position (bumpless enable: the first
    /// target is the actual position, as CSP drives latch it on enable).
    pub(crate) fn enable_holding(&mut self, t_ns: u64) {
        self.state = DriveState::Enabled;
        self.vel_err_integral = 0.0;
        self.cmd_pos_rad = self.pos_rad;
        self.cmd_vel_rad_s = 0.0;
        self.t_latch_ns = t_ns;
    }

    /// Latches a new setpoint (only meaningful while enabled).
    pub(crate) fn latch(&mut self, pos_rad: f64, vel_rad_s: f64, t_ns: u64) {
        self.cmd_pos_rad = pos_rad;
        self.cmd_vel_rad_s = if self.velocity_feedforward {
            vel_rad_s
        } else {
            0.0
        };
        self.t_latch_ns = t_ns;
    }

    /// Enters quick stop from operation enabled: the drive ramps its own target
    /// velocity from the measured one to zero and holds where the ramp ends.
    pub(crate) fn quick_stop(&mut self) {
        if self.state == DriveState::Enabled {
            self.state = DriveState::QuickStop;
            self.ramp_pos_rad = self.pos_rad;
            self.ramp_vel_rad_s = self.vel_rad_s;
        }
    }

    /// No torque (a fault stays a fault until reset).
    pub(crate) fn disable(&mut self) {
        if self.state != DriveState::Fault {
            self.state = DriveState::Disabled;
            self.torque_nm = 0.0;
        }
    }

    /// Fault reaction: torque off, error code set.
    pub(crate) fn fault(&mut self, code: u16) {
        self.state = DriveState::Fault;
        self.error_code = code;
        self.torque_nm = 0.0;
    }

    /// Clears a fault; the drive is then disabled until enabled again.
    pub(crate) fn reset_fault(&mut self) {
        if self.state == DriveState::Fault {
            self.state = DriveState::Disabled;
            self.error_code = 0;
        }
    }

    /// Whether the joint is at rest (below `REST_VEL_RAD_S`) and its drive is not moving
    /// its target.
    pub(crate) fn at_rest(&self) -> bool {
        self.vel_rad_s.abs() < REST_VEL_RAD_S
            && (self.state != DriveState::QuickStop || self.ramp_vel_rad_s == 0.0)
    }

    /// The target the drive tracks at sim time `t_ns`.
    fn target(&self, t_ns: u64) -> (f64, f64) {
        match self.state {
            DriveState::Enabled => {
                let since_ns = t_ns
                    .saturating_sub(self.t_latch_ns)
                    .min(self.max_extrapolation_ns);
                let pos = self.cmd_pos_rad + self.cmd_vel_rad_s * since_ns as f64 * 1e-9;
                let vel = if since_ns < self.max_extrapolation_ns {
                    self.cmd_vel_rad_s
                } else {
                    0.0
                };
                (pos, vel)
            }
            DriveState::QuickStop => (self.ramp_pos_rad, self.ramp_vel_rad_s),
            _ => (self.pos_rad, 0.0),
        }
    }

    /// Advances drive and plant by one sub-step `dt_s` starting at sim time `t_ns`.
    pub(crate) fn step(&mut self, t_ns: u64, dt_s: f64) {
        if self.state == DriveState::QuickStop {
            self.advance_ramp(dt_s);
        }
        self.torque_nm = match self.state {
            DriveState::Enabled | DriveState::QuickStop => self.drive_torque(t_ns, dt_s),
            _ => {
                self.vel_err_integral = 0.0;
                0.0
            }
        };
        self.integrate(dt_s);
    }

    /// Moves the quick-stop ramp one sub-step toward rest.
    fn advance_ramp(&mut self, dt_s: f64) {
        let dv = self.quick_stop_decel_rad_s2 * dt_s;
        let v = self.ramp_vel_rad_s;
        self.ramp_vel_rad_s = if v.abs() <= dv {
            0.0
        } else {
            v - dv * v.signum()
        };
        self.ramp_pos_rad += self.ramp_vel_rad_s * dt_s;
    }

    /// Cascaded P (position) / PI (velocity) law scaled by the inertia, saturated,
    /// with conditional integration so the integral does not wind up in saturation.
    fn drive_torque(&mut self, t_ns: u64, dt_s: f64) -> f64 {
        let (target_pos, target_vel) = self.target(t_ns);
        let vel_ref = target_vel + self.kp_pos * (target_pos - self.pos_rad);
        let vel_err = vel_ref - self.vel_rad_s;
        let integral = self.vel_err_integral + vel_err * dt_s;
        let gain = self.inertia_kg_m2 * self.kv_rad_s;
        let torque = gain * (vel_err + self.ki_rad_s * integral);
        if torque.abs() <= self.max_torque_nm {
            self.vel_err_integral = integral;
            torque
        } else {
            self.max_torque_nm.copysign(torque)
        }
    }

    /// Semi-implicit Euler on `J dv/dt = tau + tau_ext - b v - friction`, with
    /// stick-slip Coulomb friction (the joint stays stuck while the other torques do
    /// not exceed the Coulomb level, and stops instead of reversing when friction would
    /// carry the velocity through zero) and hard stops at the limits.
    fn integrate(&mut self, dt_s: f64) {
        let v = self.vel_rad_s;
        let applied = self.torque_nm + self.external_torque_nm - self.viscous_nm_s_rad * v;
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
