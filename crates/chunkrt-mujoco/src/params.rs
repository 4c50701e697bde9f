//! What the MuJoCo arm is built from: the model file and its digest, the drives' tuning
//! and the mechanisms between the drive and the physics; their validation.

use std::path::PathBuf;

use chunkrt_core::{JointVec, MAX_DOF};

use crate::gear::GearParams;

/// Largest `gear natural frequency (rad/s) x physics step (s)` accepted: the gear's
/// motor side is integrated explicitly against the link, stable with room below 2.
pub const MAX_GEAR_RAD_PER_STEP: f64 = 0.5;

/// Longest transport delay a drive may be given (the delay line holds this much).
pub const MAX_TRANSPORT_DELAY_NS: u64 = 100_000_000;

/// Ratio of each drive's velocity-loop bandwidth to its position-loop bandwidth (as the
/// simulated arm's drives: about 80 degrees of phase margin in the outer loop).
pub const VELOCITY_LOOP_RATIO: f64 = 4.0;

/// Largest `velocity-loop bandwidth (rad/s) x physics step (s)` accepted: above it the
/// discrete loop loses phase margin to the step itself.
pub const MAX_LOOP_GAIN_PER_STEP: f64 = 0.2;

/// How the arm is built.
#[derive(Clone, Debug, PartialEq)]
pub struct MujocoParams {
    /// The MJCF file of the arm (its hinge joints, in model order, are the drives).
    pub model_path: PathBuf,
    /// The SHA-256 the file must have (hex); `None` takes any file and any files it
    /// names (tests only: the configuration requires it).
    pub model_sha256: Option<String>,
    /// The digest the files the model names (`<include>`s, meshes, textures) must have
    /// together (see `mjcf.rs`); `None`: the model names no other file.
    pub model_files_sha256: Option<String>,
    /// Number of joints the runtime drives; the model must have exactly this many hinges.
    pub joints: usize,
    /// Position-loop bandwidth of every drive (Hz); the velocity loop runs
    /// [`VELOCITY_LOOP_RATIO`] times faster.
    pub bandwidth_hz: f64,
    /// Load inertia each drive's velocity loop is tuned for. `None`: the diagonal of the
    /// model's joint-space inertia (armature included) at the initial pose, as a drive's
    /// auto-tuning measures it there.
    pub inertia_kg_m2: Option<JointVec>,
    /// Each drive's torque limit. `None`: the model's `actuatorfrcrange`.
    pub max_torque_nm: Option<JointVec>,
    /// Encoder counts per revolution (the measured position is quantized to them and
    /// the velocity is estimated from them); 0: the exact position and velocity.
    pub encoder_counts_per_rev: u64,
    /// Corner of the first-order filter on the velocity estimated from the encoder (Hz).
    pub velocity_filter_hz: f64,
    /// Time from a setpoint's arrival to the drive's loop acting on it (rounded down to
    /// whole physics steps; at most [`MAX_TRANSPORT_DELAY_NS`]).
    pub transport_delay_ns: u64,
    /// Whether gravity acts (the model's `gravity`); off for tests of the drive alone.
    pub gravity: bool,
    /// Whether each joint has a holding brake, engaged while its drive's power stage is
    /// off (disabled, faulted), holding up to the drive's torque limit.
    pub brakes: bool,
    /// Starting pose (at rest).
    pub initial_pos_rad: JointVec,
    /// Deceleration of each drive's own quick-stop ramp.
    pub quick_stop_decel_rad_s2: JointVec,
    /// Whether the drives feed `Command::vel_rad_s` forward (CSP with velocity offset).
    pub velocity_feedforward: bool,
    /// How long a drive extrapolates its target after the last command.
    pub max_extrapolation_ns: u64,
    /// Each joint's gear between motor and link (compliance, backlash; see
    /// [`GearParams`]); all rigid by default.
    pub gears: [GearParams; MAX_DOF],
    /// The site of the model whose `<force>` and `<torque>` sensors are the wrist
    /// force/torque sensor (none: the arm measures no force).
    pub ft_site: Option<String>,
}

impl MujocoParams {
    /// The Franka Panda of `models/franka_panda/panda.xml` at `model_path`, with the
    /// defaults of `rt-config/sim.toml`'s arm: 20 Hz position loops, a 27-bit encoder at the
    /// joint (a 20-bit motor encoder behind a gear of about 100),
    /// no transport delay, gravity on.
    pub fn panda(model_path: PathBuf) -> MujocoParams {
        let mut initial = [0.0; MAX_DOF];
        initial[..7].copy_from_slice(&[0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8]);
        let mut decel = [0.0; MAX_DOF];
        decel[..7].copy_from_slice(&[10.0, 10.0, 10.0, 10.0, 20.0, 20.0, 20.0]);
        MujocoParams {
            model_path,
            model_sha256: None,
            model_files_sha256: None,
            joints: 7,
            bandwidth_hz: 20.0,
            inertia_kg_m2: None,
            max_torque_nm: None,
            encoder_counts_per_rev: 1 << 27,
            velocity_filter_hz: 1000.0,
            transport_delay_ns: 0,
            gravity: true,
            brakes: true,
            initial_pos_rad: initial,
            quick_stop_decel_rad_s2: decel,
            velocity_feedforward: true,
            max_extrapolation_ns: 50_000_000,
            gears: [GearParams::default(); MAX_DOF],
            ft_site: None,
        }
    }

    /// Velocity-loop bandwidth (rad/s).
    pub fn velocity_loop_rad_s(&self) -> f64 {
        2.0 * std::f64::consts::PI * self.bandwidth_hz * VELOCITY_LOOP_RATIO
    }

    /// Checks what does not need the model: counts, rates and per-joint values.
    pub fn validate(&self) -> Result<(), MujocoError> {
        let n = self.joints;
        if n == 0 || n > MAX_DOF {
            return Err(MujocoError::Param {
                field: "joints",
                joint: None,
                why: format!("{n}, expected 1 to {MAX_DOF}"),
            });
        }
        positive("bandwidth_hz", None, self.bandwidth_hz)?;
        positive("velocity_filter_hz", None, self.velocity_filter_hz)?;
        if self.transport_delay_ns > MAX_TRANSPORT_DELAY_NS {
            return Err(MujocoError::Param {
                field: "transport_delay",
                joint: None,
                why: format!(
                    "{} ms, at most {} ms",
                    self.transport_delay_ns as f64 * 1e-6,
                    MAX_TRANSPORT_DELAY_NS / 1_000_000
                ),
            });
        }
        for j in 0..n {
            positive(
                "quick_stop_decel_rad_s2",
                Some(j),
                self.quick_stop_decel_rad_s2[j],
            )?;
            if !self.initial_pos_rad[j].is_finite() {
                return Err(MujocoError::Param {
                    field: "initial_pos_rad",
                    joint: Some(j),
                    why: format!("{}, expected finite", self.initial_pos_rad[j]),
                });
            }
            if let Some(v) = &self.inertia_kg_m2 {
                positive("inertia_kg_m2", Some(j), v[j])?;
            }
            if let Some(v) = &self.max_torque_nm {
                positive("max_torque_nm", Some(j), v[j])?;
            }
            self.gears[j]
                .check()
                .map_err(|(field, why)| MujocoError::Param {
                    field,
                    joint: Some(j),
                    why,
                })?;
        }
        Ok(())
    }
}

fn positive(field: &'static str, joint: Option<usize>, v: f64) -> Result<(), MujocoError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(MujocoError::Param {
            field,
            joint,
            why: format!("{v}, expected finite and > 0"),
        })
    }
}

/// Why a MuJoCo arm could not be built.
#[derive(Debug, thiserror::Error)]
pub enum MujocoError {
    /// A parameter is out of range.
    #[error("mujoco: {field}{}: {why}", joint.map(|j| format!(" of joint {j}")).unwrap_or_default())]
    Param {
        /// The parameter.
        field: &'static str,
        /// The joint, for per-joint values.
        joint: Option<usize>,
        /// What is wrong.
        why: String,
    },
    /// The model file, or a file it names, could not be read (no regular file, too
    /// large, unreadable).
    #[error("mujoco: {0}")]
    File(#[from] chunkrt_files::FileError),
    /// The model file is not the one the configuration names.
    #[error("mujoco: the model {path} has SHA-256 {got}, the configuration says {expected}: a different arm model than the one configured")]
    Digest {
        /// The file.
        path: PathBuf,
        /// The configured digest.
        expected: String,
        /// The file's digest.
        got: String,
    },
    /// The files the model names are not the ones the configuration names (or it names
    /// files and the configuration pins none).
    #[error("mujoco: the model {path} {why}")]
    FilesDigest {
        /// The model file.
        path: PathBuf,
        /// What differs, with the digest found.
        why: String,
    },
    /// MuJoCo refused the model.
    #[error("mujoco: MuJoCo could not load {path}: {why}")]
    Load {
        /// The file.
        path: PathBuf,
        /// MuJoCo's message.
        why: String,
    },
    /// The model does not fit the runtime (joint count, joint types, limits).
    #[error("mujoco: the model {path} {why}")]
    Model {
        /// The file.
        path: PathBuf,
        /// What does not fit.
        why: String,
    },
    /// A joint index past the last joint.
    #[error("mujoco: no joint {joint} (the arm has {joints})")]
    NoSuchJoint {
        /// The index asked for.
        joint: usize,
        /// The arm's joint count.
        joints: usize,
    },
}
