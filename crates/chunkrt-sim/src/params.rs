//! Parameters of the simulated arm, their defaults and their validation.

use chunkrt_core::{JointVec, MAX_DOF};

/// The default arm's per-joint values (a Franka-like 7-joint arm; heavier at the base).
/// Joints past the seventh repeat the last column.
const DEFAULT_INERTIA_KG_M2: [f64; 7] = [0.6, 0.6, 0.3, 0.3, 0.05, 0.05, 0.02];
const DEFAULT_COULOMB_NM: [f64; 7] = [1.0, 1.0, 0.8, 0.8, 0.3, 0.3, 0.2];
const DEFAULT_MAX_TORQUE_NM: [f64; 7] = [87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0];
const DEFAULT_QUICK_STOP_RAD_S2: [f64; 7] = [10.0, 10.0, 10.0, 10.0, 20.0, 20.0, 20.0];
const DEFAULT_POS_MIN_RAD: [f64; 7] = [
    -2.8973, -1.7628, -2.8973, -3.0718, -2.8973, -0.0175, -2.8973,
];
const DEFAULT_POS_MAX_RAD: [f64; 7] = [2.8973, 1.7628, 2.8973, -0.0698, 2.8973, 3.7525, 2.8973];
const DEFAULT_INITIAL_POS_RAD: [f64; 7] = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785];

/// Ratio of the drive's velocity-loop bandwidth to its position-loop bandwidth. Four
/// keeps the inner loop out of the outer loop's way (about 80 degrees of phase margin
/// in the outer loop) while staying well inside what a 100 us sub-step can integrate.
pub const VELOCITY_LOOP_RATIO: f64 = 4.0;

/// Largest `velocity-loop bandwidth (rad/s) x sub-step (s)` accepted. Above it the
/// explicit discrete loop loses phase margin to the sub-step itself (at 0.2 the
/// sub-step's half-sample delay costs about 6 degrees).
pub const MAX_LOOP_GAIN_PER_SUBSTEP: f64 = 0.2;

/// Physical and drive parameters of the simulated arm. Per-joint vectors use their
/// first `joints` entries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimArmParams {
    /// Number of joints, 1 to `MAX_DOF`.
    pub joints: usize,
    /// Integration sub-step (the drives' internal loop period) in nanoseconds.
    pub substep_ns: u64,
    /// Position-loop bandwidth of every drive in Hz; the velocity loop runs at
    /// `VELOCITY_LOOP_RATIO` times this.
    pub bandwidth_hz: f64,
    /// Motor + link inertia seen at the joint.
    pub inertia_kg_m2: JointVec,
    /// Viscous friction coefficient.
    pub viscous_nm_s_rad: JointVec,
    /// Coulomb friction torque (static and sliding, stick-slip model).
    pub coulomb_nm: JointVec,
    /// Drive torque limit (the controller's output saturates here).
    pub max_torque_nm: JointVec,
    /// Lower hard stop.
    pub pos_min_rad: JointVec,
    /// Upper hard stop.
    pub pos_max_rad: JointVec,
    /// Position at construction (at rest).
    pub initial_pos_rad: JointVec,
    /// Deceleration of the drive's own quick-stop ramp.
    pub quick_stop_decel_rad_s2: JointVec,
    /// Whether the drive uses `Command::vel_rad_s` as velocity feed-forward and to
    /// extrapolate the target between commands (CSP with velocity offset). Without it
    /// the target is held constant between commands.
    pub velocity_feedforward: bool,
    /// How long after the last command the drive keeps extrapolating the target with
    /// the commanded velocity before it holds it (a drive that misses setpoints must
    /// not run away).
    pub max_extrapolation_ns: u64,
    /// Play between the motor, where the drive and its encoder sit, and the link,
    /// whose position the host reads (a link-side encoder): the link stays put until
    /// the motor has crossed the gap, then is carried at its edge (rad; 0: none).
    pub backlash_rad: JointVec,
}

impl Default for SimArmParams {
    /// The 7-joint arm of `rt-config/sim.toml`: 100 us sub-step, 20 Hz position loops.
    fn default() -> Self {
        SimArmParams::with_joints(7)
    }
}

impl SimArmParams {
    /// The default arm with `joints` joints: the 7-joint table, joints past the seventh
    /// repeating the last (wrist) joint. `joints` is checked by [`validate`](Self::validate),
    /// not here: values past `MAX_DOF` are simply dropped.
    pub fn with_joints(joints: usize) -> Self {
        let table = |t: &[f64; 7]| -> JointVec {
            let mut v = [0.0; MAX_DOF];
            for (j, x) in v.iter_mut().enumerate() {
                *x = t[j.min(6)];
            }
            v
        };
        SimArmParams {
            joints,
            substep_ns: 100_000,
            bandwidth_hz: 20.0,
            inertia_kg_m2: table(&DEFAULT_INERTIA_KG_M2),
            viscous_nm_s_rad: [0.5; MAX_DOF],
            coulomb_nm: table(&DEFAULT_COULOMB_NM),
            max_torque_nm: table(&DEFAULT_MAX_TORQUE_NM),
            pos_min_rad: table(&DEFAULT_POS_MIN_RAD),
            pos_max_rad: table(&DEFAULT_POS_MAX_RAD),
            initial_pos_rad: table(&DEFAULT_INITIAL_POS_RAD),
            quick_stop_decel_rad_s2: table(&DEFAULT_QUICK_STOP_RAD_S2),
            velocity_feedforward: true,
            max_extrapolation_ns: 40_000_000,
            backlash_rad: [0.0; MAX_DOF],
        }
    }

    /// Position-loop gain (1/s).
    pub fn position_gain(&self) -> f64 {
        2.0 * core::f64::consts::PI * self.bandwidth_hz
    }

    /// Velocity-loop bandwidth (rad/s).
    pub fn velocity_loop_rad_s(&self) -> f64 {
        self.position_gain() * VELOCITY_LOOP_RATIO
    }

    /// Checks every field; the error names the field, the joint and the value.
    pub fn validate(&self) -> Result<(), SimError> {
        if self.joints == 0 || self.joints > MAX_DOF {
            return Err(SimError::JointCount {
                joints: self.joints,
            });
        }
        if self.substep_ns == 0 || self.substep_ns > 10_000_000 {
            return Err(SimError::Substep {
                substep_ns: self.substep_ns,
            });
        }
        if !(self.bandwidth_hz.is_finite() && self.bandwidth_hz > 0.0) {
            return Err(SimError::Bandwidth {
                bandwidth_hz: self.bandwidth_hz,
            });
        }
        let gain_per_step = self.velocity_loop_rad_s() * self.substep_ns as f64 * 1e-9;
        if gain_per_step > MAX_LOOP_GAIN_PER_SUBSTEP {
            return Err(SimError::SubstepTooCoarse {
                substep_ns: self.substep_ns,
                bandwidth_hz: self.bandwidth_hz,
                max_substep_ns: (MAX_LOOP_GAIN_PER_SUBSTEP / self.velocity_loop_rad_s() * 1e9)
                    as u64,
            });
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        let n = self.joints;
        check(n, "inertia_kg_m2", &self.inertia_kg_m2, positive, "> 0")?;
        check(
            n,
            "viscous_nm_s_rad",
            &self.viscous_nm_s_rad,
            non_negative,
            ">= 0",
        )?;
        check(n, "coulomb_nm", &self.coulomb_nm, non_negative, ">= 0")?;
        check(n, "backlash_rad", &self.backlash_rad, non_negative, ">= 0")?;
        check(n, "max_torque_nm", &self.max_torque_nm, positive, "> 0")?;
        check(
            n,
            "quick_stop_decel_rad_s2",
            &self.quick_stop_decel_rad_s2,
            positive,
            "> 0",
        )?;
        let finite = |v: f64| v.is_finite();
        check(n, "pos_min_rad", &self.pos_min_rad, finite, "finite")?;
        check(n, "pos_max_rad", &self.pos_max_rad, finite, "finite")?;
        check(
            n,
            "initial_pos_rad",
            &self.initial_pos_rad,
            finite,
            "finite",
        )?;
        for j in 0..n {
            let (min, max) = (self.pos_min_rad[j], self.pos_max_rad[j]);
            if min >= max {
                return Err(SimError::LimitsInverted { joint: j, min, max });
            }
            let pos = self.initial_pos_rad[j];
            if pos < min || pos > max {
                return Err(SimError::InitialOutsideLimits {
                    joint: j,
                    pos,
                    min,
                    max,
                });
            }
        }
        Ok(())
    }
}

fn check(
    joints: usize,
    field: &'static str,
    values: &JointVec,
    ok: impl Fn(f64) -> bool,
    expected: &'static str,
) -> Result<(), SimError> {
    match values[..joints].iter().position(|&v| !ok(v)) {
        None => Ok(()),
        Some(joint) => Err(SimError::Field {
            field,
            joint,
            value: values[joint],
            expected,
        }),
    }
}

/// Invalid simulated-arm parameters.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum SimError {
    /// `joints` outside 1..=MAX_DOF.
    #[error("sim: joints = {joints}, expected 1 to {max}", max = MAX_DOF)]
    JointCount {
        /// The requested count.
        joints: usize,
    },
    /// `substep_ns` zero or above 10 ms.
    #[error("sim: substep_ns = {substep_ns}, expected 1 ns to 10 ms")]
    Substep {
        /// The requested sub-step.
        substep_ns: u64,
    },
    /// `bandwidth_hz` not a positive number.
    #[error("sim: bandwidth_hz = {bandwidth_hz}, expected a positive number")]
    Bandwidth {
        /// The requested bandwidth.
        bandwidth_hz: f64,
    },
    /// The sub-step is too long for the drives' loop bandwidth (the discrete loop
    /// would lose its phase margin to the integration itself).
    #[error(
        "sim: substep_ns = {substep_ns} is too coarse for bandwidth_hz = {bandwidth_hz}; \
         use at most {max_substep_ns} ns or a lower bandwidth"
    )]
    SubstepTooCoarse {
        /// The requested sub-step.
        substep_ns: u64,
        /// The requested bandwidth.
        bandwidth_hz: f64,
        /// The longest sub-step this bandwidth allows.
        max_substep_ns: u64,
    },
    /// A per-joint value outside its range.
    #[error("sim: {field}[{joint}] = {value}, expected {expected}")]
    Field {
        /// The parameter.
        field: &'static str,
        /// The joint.
        joint: usize,
        /// Its value.
        value: f64,
        /// What it should be.
        expected: &'static str,
    },
    /// `pos_min_rad` not below `pos_max_rad`.
    #[error("sim: joint {joint}: pos_min_rad {min} must be below pos_max_rad {max}")]
    LimitsInverted {
        /// The joint.
        joint: usize,
        /// Lower stop.
        min: f64,
        /// Upper stop.
        max: f64,
    },
    /// A joint index past the last joint.
    #[error("sim: joint {joint} does not exist (the arm has {joints})")]
    NoSuchJoint {
        /// The index asked for.
        joint: usize,
        /// Number of joints.
        joints: usize,
    },
    /// `initial_pos_rad` outside the hard stops.
    #[error("sim: joint {joint}: initial_pos_rad {pos} is outside the stops [{min}, {max}]")]
    InitialOutsideLimits {
        /// The joint.
        joint: usize,
        /// Initial position.
        pos: f64,
        /// Lower stop.
        min: f64,
        /// Upper stop.
        max: f64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_arm_is_valid() {
        assert_eq!(SimArmParams::default().validate(), Ok(()));
        assert_eq!(SimArmParams::with_joints(MAX_DOF).validate(), Ok(()));
        assert_eq!(SimArmParams::with_joints(1).validate(), Ok(()));
    }

    #[test]
    fn errors_name_the_field_and_joint() {
        let mut p = SimArmParams::default();
        p.inertia_kg_m2[3] = 0.0;
        let err = p.validate().unwrap_err();
        assert_eq!(err.to_string(), "sim: inertia_kg_m2[3] = 0, expected > 0");

        let mut p = SimArmParams::default();
        p.coulomb_nm[6] = f64::NAN;
        assert!(matches!(
            p.validate(),
            Err(SimError::Field {
                field: "coulomb_nm",
                joint: 6,
                ..
            })
        ));

        let mut p = SimArmParams::default();
        p.pos_min_rad[1] = 2.0;
        assert!(matches!(
            p.validate(),
            Err(SimError::LimitsInverted { joint: 1, .. })
        ));

        let mut p = SimArmParams::default();
        p.initial_pos_rad[3] = 0.0; // joint 3's range is [-3.07, -0.07]
        assert!(matches!(
            p.validate(),
            Err(SimError::InitialOutsideLimits { joint: 3, .. })
        ));
    }

    #[test]
    fn counts_and_rates_are_checked() {
        assert!(matches!(
            SimArmParams::with_joints(0).validate(),
            Err(SimError::JointCount { joints: 0 })
        ));
        assert!(matches!(
            SimArmParams::with_joints(MAX_DOF + 1).validate(),
            Err(SimError::JointCount { .. })
        ));
        // 1 ms at 20 Hz: 0.5 rad per step in the velocity loop.
        let mut p = SimArmParams {
            substep_ns: 1_000_000,
            ..SimArmParams::default()
        };
        let err = p.validate().unwrap_err();
        assert!(matches!(err, SimError::SubstepTooCoarse { .. }), "{err}");
        assert!(err.to_string().contains("substep_ns = 1000000"));
        p.bandwidth_hz = -1.0;
        assert!(matches!(p.validate(), Err(SimError::Bandwidth { .. })));
    }

    #[test]
    fn extra_joints_repeat_the_wrist() {
        let p = SimArmParams::with_joints(9);
        assert_eq!(p.inertia_kg_m2[8], p.inertia_kg_m2[6]);
        assert_eq!(p.initial_pos_rad[8], p.initial_pos_rad[6]);
    }
}
