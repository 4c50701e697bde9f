//! One CSP servo drive, apart from what it moves: the CiA 402 states it is in, the
//! setpoint it latched, its quick-stop ramp, and the cascaded loop that turns a target
//! and a measurement into a torque. The simulated arm's joints (`joint.rs`) put it on a
//! rigid motor + link; `chunkrt-mujoco` puts one per joint on a physics model of a whole
//! arm. Pure and deterministic: time and the measurement come in as arguments.

use chunkrt_core::DriveState;

/// Integral corner of the velocity PI as a fraction of the velocity-loop bandwidth:
/// a quarter keeps about 76 degrees of phase margin in the inner loop.
pub const INTEGRAL_CORNER_RATIO: f64 = 0.25;

/// A drive's tuning: the loops' gains, its torque limit and how it handles setpoints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DriveTuning {
    /// Load inertia the velocity loop is tuned for (its gain is `inertia x bandwidth`).
    pub inertia_kg_m2: f64,
    /// Position-loop gain (1/s): the target velocity per radian of position error.
    pub kp_pos: f64,
    /// Velocity-loop bandwidth (rad/s).
    pub kv_rad_s: f64,
    /// Velocity-loop integral corner (rad/s).
    pub ki_rad_s: f64,
    /// The torque the loop's output saturates at.
    pub max_torque_nm: f64,
    /// Deceleration of the drive's own quick-stop ramp.
    pub quick_stop_decel_rad_s2: f64,
    /// Whether the commanded velocity is fed forward and extrapolates the target until
    /// the next command (CSP with velocity offset).
    pub velocity_feedforward: bool,
    /// How long the target is extrapolated after the last command before it is held.
    pub max_extrapolation_ns: u64,
}

impl DriveTuning {
    /// The cascade the simulated arm's drives use: a velocity loop of `kv_rad_s`, the
    /// position loop `velocity_loop_ratio` times slower, the integral corner at
    /// [`INTEGRAL_CORNER_RATIO`] of the velocity loop.
    pub fn cascade(
        inertia_kg_m2: f64,
        kv_rad_s: f64,
        velocity_loop_ratio: f64,
        max_torque_nm: f64,
    ) -> DriveTuning {
        DriveTuning {
            inertia_kg_m2,
            kp_pos: kv_rad_s / velocity_loop_ratio,
            kv_rad_s,
            ki_rad_s: kv_rad_s * INTEGRAL_CORNER_RATIO,
            max_torque_nm,
            quick_stop_decel_rad_s2: 10.0,
            velocity_feedforward: true,
            max_extrapolation_ns: 50_000_000,
        }
    }
}

/// One drive: its state machine, latched setpoint, quick-stop ramp and loop state.
#[derive(Clone, Copy, Debug)]
pub struct Drive {
    tuning: DriveTuning,
    state: DriveState,
    error_code: u16,
    /// Integral of the velocity error (rad).
    vel_err_integral: f64,
    /// The latched command and the time it was latched at.
    cmd_pos_rad: f64,
    cmd_vel_rad_s: f64,
    t_latch_ns: u64,
    /// Quick-stop ramp state.
    ramp_pos_rad: f64,
    ramp_vel_rad_s: f64,
    /// The torque of the last step (after saturation; zero unless enabled).
    torque_nm: f64,
}

impl Drive {
    /// A disabled drive whose setpoint is `pos_rad`.
    pub fn new(tuning: DriveTuning, pos_rad: f64) -> Drive {
        Drive {
            tuning,
            state: DriveState::Disabled,
            error_code: 0,
            vel_err_integral: 0.0,
            cmd_pos_rad: pos_rad,
            cmd_vel_rad_s: 0.0,
            t_latch_ns: 0,
            ramp_pos_rad: pos_rad,
            ramp_vel_rad_s: 0.0,
            torque_nm: 0.0,
        }
    }

    /// The tuning it was built with.
    pub fn tuning(&self) -> &DriveTuning {
        &self.tuning
    }

    /// Its CiA 402 state.
    pub fn state(&self) -> DriveState {
        self.state
    }

    /// Its error code (0 = none).
    pub fn error_code(&self) -> u16 {
        self.error_code
    }

    /// The torque it applies (after saturation; zero unless enabled or stopping).
    pub fn torque_nm(&self) -> f64 {
        self.torque_nm
    }

    /// Operation enabled, holding the measured position `pos_rad` (bumpless enable:
    /// the first target is the actual position, as CSP drives latch it on enable).
    pub fn enable_holding(&mut self, pos_rad: f64, t_ns: u64) {
        self.state = DriveState::Enabled;
        self.vel_err_integral = 0.0;
        self.cmd_pos_rad = pos_rad;
        self.cmd_vel_rad_s = 0.0;
        self.t_latch_ns = t_ns;
    }

    /// Pre-loads the velocity loop's integral so that, at rest on target, the drive
    /// applies `torque_nm` (clamped to its limit): what a drive does on enable before it
    /// releases the holding brake, so that a load resting on the brake (gravity) does
    /// not sag while the integral builds up.
    pub fn preload(&mut self, torque_nm: f64) {
        let t = &self.tuning;
        let gain = t.inertia_kg_m2 * t.kv_rad_s * t.ki_rad_s;
        if gain > 0.0 {
            self.vel_err_integral = torque_nm.clamp(-t.max_torque_nm, t.max_torque_nm) / gain;
        }
    }

    /// Latches a new setpoint (only meaningful while enabled).
    pub fn latch(&mut self, pos_rad: f64, vel_rad_s: f64, t_ns: u64) {
        self.cmd_pos_rad = pos_rad;
        self.cmd_vel_rad_s = if self.tuning.velocity_feedforward {
            vel_rad_s
        } else {
            0.0
        };
        self.t_latch_ns = t_ns;
    }

    /// Enters quick stop from operation enabled: the drive ramps its own target
    /// velocity from the measured one to zero and holds where the ramp ends.
    pub fn quick_stop(&mut self, pos_rad: f64, vel_rad_s: f64) {
        if self.state == DriveState::Enabled {
            self.state = DriveState::QuickStop;
            self.ramp_pos_rad = pos_rad;
            self.ramp_vel_rad_s = vel_rad_s;
        }
    }

    /// No torque (a fault stays a fault until reset).
    pub fn disable(&mut self) {
        if self.state != DriveState::Fault {
            self.state = DriveState::Disabled;
            self.torque_nm = 0.0;
        }
    }

    /// Fault reaction: torque off, error code set.
    pub fn fault(&mut self, code: u16) {
        self.state = DriveState::Fault;
        self.error_code = code;
        self.torque_nm = 0.0;
    }

    /// Clears a fault; the drive is then disabled until enabled again.
    pub fn reset_fault(&mut self) {
        if self.state == DriveState::Fault {
            self.state = DriveState::Disabled;
            self.error_code = 0;
        }
    }

    /// Whether its quick-stop ramp (if one runs) has reached rest.
    pub fn ramp_at_rest(&self) -> bool {
        self.state != DriveState::QuickStop || self.ramp_vel_rad_s == 0.0
    }

    /// The target it tracks at time `t_ns`, for a joint measured at `pos_rad`.
    pub fn target(&self, t_ns: u64, pos_rad: f64) -> (f64, f64) {
        match self.state {
            DriveState::Enabled => {
                let since_ns = t_ns
                    .saturating_sub(self.t_latch_ns)
                    .min(self.tuning.max_extrapolation_ns);
                let pos = self.cmd_pos_rad + self.cmd_vel_rad_s * since_ns as f64 * 1e-9;
                let vel = if since_ns < self.tuning.max_extrapolation_ns {
                    self.cmd_vel_rad_s
                } else {
                    0.0
                };
                (pos, vel)
            }
            DriveState::QuickStop => (self.ramp_pos_rad, self.ramp_vel_rad_s),
            _ => (pos_rad, 0.0),
        }
    }

    /// One step of `dt_s` at time `t_ns` on the measurement (`pos_rad`, `vel_rad_s`):
    /// the quick-stop ramp moved on, the loop's torque computed. Returns the torque.
    pub fn step(&mut self, t_ns: u64, dt_s: f64, pos_rad: f64, vel_rad_s: f64) -> f64 {
        if self.state == DriveState::QuickStop {
            self.advance_ramp(dt_s);
        }
        self.torque_nm = match self.state {
            DriveState::Enabled | DriveState::QuickStop => {
                self.loop_torque(t_ns, dt_s, pos_rad, vel_rad_s)
            }
            _ => {
                self.vel_err_integral = 0.0;
                0.0
            }
        };
        self.torque_nm
    }

    /// Moves the quick-stop ramp one step toward rest.
    fn advance_ramp(&mut self, dt_s: f64) {
        let dv = self.tuning.quick_stop_decel_rad_s2 * dt_s;
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
    fn loop_torque(&mut self, t_ns: u64, dt_s: f64, pos_rad: f64, vel_rad_s: f64) -> f64 {
        let t = &self.tuning;
        let (target_pos, target_vel) = self.target(t_ns, pos_rad);
        let vel_ref = target_vel + t.kp_pos * (target_pos - pos_rad);
        let vel_err = vel_ref - vel_rad_s;
        let integral = self.vel_err_integral + vel_err * dt_s;
        let gain = t.inertia_kg_m2 * t.kv_rad_s;
        let torque = gain * (vel_err + t.ki_rad_s * integral);
        if torque.abs() <= t.max_torque_nm {
            self.vel_err_integral = integral;
            torque
        } else {
            t.max_torque_nm.copysign(torque)
        }
    }
}
