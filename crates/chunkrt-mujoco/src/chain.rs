//! The MuJoCo arm behind `chunkrt ecsim`'s drives: one model of the whole arm moves every
//! drive's shaft (see `chunkrt_ecsim::plant`), so the EtherCAT path runs against coupled
//! physics (gravity that changes with the pose, inertia shared between joints, each
//! drive's torque limit), not independent motor models.
//!
//! Each simulated CiA 402 drive keeps its own state machine and supervision; the drive
//! model inside the arm (position and velocity loops, saturation, quick-stop ramp,
//! holding brake) does what that state asks. Timing is a CSP drive's: a target that
//! arrives with a frame is interpolated from the previous one over the next bus period.

use chunkrt_core::{Feedback, MonoTime, MAX_DOF};
use chunkrt_ecsim::{ChainPlant, ShaftCommand, ShaftState};

use crate::arm::{JointRequest, MujocoArm};
use crate::params::MujocoError;

/// How a joint sits on its drive: encoder resolution, the count at joint angle 0, the
/// drive's counting direction, and the rated torque its 0x6077 is a per mille of. The
/// same numbers a master's `[[ethercat.drive]]` gives for the drive, so that the master
/// reads back the joint the arm really has.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ShaftMount {
    /// Counts per joint radian.
    pub counts_per_rad: f64,
    /// The count at joint angle 0.
    pub offset_counts: f64,
    /// `1` or `-1`: whether counts grow with the joint angle.
    pub direction: f64,
    /// The torque 0x6077 reports as 1000 per mille (N m at the joint).
    pub rated_torque_nm: f64,
}

impl ShaftMount {
    fn check(&self, joint: usize) -> Result<(), MujocoError> {
        let bad = |field: &'static str, why: String| MujocoError::Param {
            field,
            joint: Some(joint),
            why,
        };
        if !(self.counts_per_rad.is_finite() && self.counts_per_rad > 0.0) {
            return Err(bad(
                "counts_per_rad",
                format!("{}: expected a positive count", self.counts_per_rad),
            ));
        }
        if !self.offset_counts.is_finite() {
            return Err(bad(
                "offset_counts",
                format!("{}: expected a finite count", self.offset_counts),
            ));
        }
        if self.direction != 1.0 && self.direction != -1.0 {
            return Err(bad(
                "direction",
                format!("{}: expected 1 or -1", self.direction),
            ));
        }
        if !(self.rated_torque_nm.is_finite() && self.rated_torque_nm > 0.0) {
            return Err(bad(
                "rated_torque_nm",
                format!("{}: expected a positive torque", self.rated_torque_nm),
            ));
        }
        Ok(())
    }

    fn counts(&self, rad: f64) -> f64 {
        self.offset_counts + self.direction * self.counts_per_rad * rad
    }

    fn rad(&self, counts: f64) -> f64 {
        (counts - self.offset_counts) * self.direction / self.counts_per_rad
    }
}

/// A [`MujocoArm`] as the plant of a simulated EtherCAT chain: shaft `i` is joint `i`.
pub struct MujocoChain {
    arm: MujocoArm,
    mounts: [ShaftMount; MAX_DOF],
    /// The plant's own time: the sum of the steps it was given.
    t_ns: u64,
    /// The bus period as the frames' spacing gives it (a running mean, each step's
    /// length clamped to half to twice it): the period over which a new target is
    /// interpolated, as a CSP drive interpolates over its SYNC0 period, not over the
    /// spacing of two frames that one late frame brought close together.
    period_ns: u64,
    /// The drives' measurement after the last step.
    fb: Feedback,
    requests: [JointRequest; MAX_DOF],
}

impl MujocoChain {
    /// The chain's plant: `arm` (at rest where its parameters put it, drives off, brakes
    /// on where it has them) with one mount per joint. Refuses a count of mounts other
    /// than the arm's joints, and mounts out of range, naming the joint.
    pub fn new(mut arm: MujocoArm, mounts: &[ShaftMount]) -> Result<MujocoChain, MujocoError> {
        let n = arm.params().joints;
        if mounts.len() != n {
            return Err(MujocoError::Param {
                field: "drives",
                joint: None,
                why: format!(
                    "{} drive mount(s) for an arm of {n} joints: one per joint",
                    mounts.len()
                ),
            });
        }
        let mut all = [ShaftMount {
            counts_per_rad: 1.0,
            offset_counts: 0.0,
            direction: 1.0,
            rated_torque_nm: 1.0,
        }; MAX_DOF];
        for (j, m) in mounts.iter().enumerate() {
            m.check(j)?;
            all[j] = *m;
        }
        arm.set_clock(MonoTime::from_ns(0));
        let mut fb = Feedback::default();
        arm.fill_feedback(MonoTime::from_ns(0), &mut fb);
        Ok(MujocoChain {
            arm,
            mounts: all,
            t_ns: 0,
            period_ns: 0,
            fb,
            requests: [JointRequest::Disable; MAX_DOF],
        })
    }

    /// The arm inside.
    pub fn arm(&self) -> &MujocoArm {
        &self.arm
    }
}

impl ChainPlant for MujocoChain {
    fn shafts(&self) -> usize {
        self.arm.params().joints
    }

    fn shaft(&self, i: usize) -> ShaftState {
        if i >= self.shafts() {
            return ShaftState::default();
        }
        let m = &self.mounts[i];
        ShaftState {
            pos_counts: m.counts(self.fb.pos_rad[i]),
            vel_counts_s: m.direction * m.counts_per_rad * self.fb.vel_rad_s[i],
            torque_per_mille: m.direction * self.fb.torque_nm[i] / m.rated_torque_nm * 1000.0,
            at_rest: self.arm.joint_at_rest(i),
        }
    }

    /// Moves the arm over the `dt_ns` that just passed under what its drives were asked
    /// before, then hands each drive its request for the period that starts now: a CSP
    /// target is interpolated from `from_counts` (reached now) to `to_counts` over one
    /// bus period (the frames' mean spacing; held at `from_counts` on the very first
    /// step).
    fn step(&mut self, dt_ns: u64, commands: &[ShaftCommand]) {
        let n = self.shafts();
        self.t_ns = self.t_ns.saturating_add(dt_ns);
        let now = MonoTime::from_ns(self.t_ns);
        self.arm.advance_to(now);
        if dt_ns > 0 {
            self.period_ns = if self.period_ns == 0 {
                dt_ns
            } else {
                let d = dt_ns.clamp(self.period_ns / 2, self.period_ns * 2);
                (self.period_ns * 15 + d) / 16
            };
        }
        let period_s = self.period_ns as f64 * 1e-9;
        for (j, c) in commands.iter().enumerate().take(n) {
            let m = &self.mounts[j];
            self.requests[j] = match *c {
                ShaftCommand::Track {
                    from_counts,
                    to_counts,
                } => {
                    let (from, to) = (m.rad(from_counts), m.rad(to_counts));
                    JointRequest::Track {
                        pos_rad: from,
                        vel_rad_s: if period_s > 0.0 {
                            (to - from) / period_s
                        } else {
                            0.0
                        },
                    }
                }
                ShaftCommand::Stop => JointRequest::QuickStop,
                ShaftCommand::Off => JointRequest::Disable,
            };
        }
        // Targets come from int32 counts through finite mounts: always finite. Were one
        // not, the arm refuses the whole set and its drives keep what they had.
        let _refused = self.arm.apply_joints(now, &self.requests[..n]);
        self.arm.fill_feedback(now, &mut self.fb);
    }

    fn describe(&self) -> String {
        format!(
            "MuJoCo arm {} (sha256 {}{}, {} joints)",
            self.arm.params().model_path.display(),
            self.arm.model_sha256(),
            self.arm
                .model_files_sha256()
                .map_or(String::new(), |f| format!(", files sha256 {f}")),
            self.shafts()
        )
    }
}
