//! Support monitor: is the observation inside the policy's declared operating domain?
//!
//! A learned policy is only trustworthy on states like those it was trained on.
//! The runtime runs this check on every observation; when it fails, the runtime
//! calls `Executor::force_fallback(now, OutOfDomain)` and `Gate::flag_out_of_domain`
//! so the policy loses authority and the intervention is logged. Today the domain is
//! a per-joint box from config; the policy manifest will add a statistical check
//! (e.g. Mahalanobis distance) as another variant of [`SupportMonitor`].

use crate::chunk::{JointVec, MAX_DOF};
use crate::io::Observation;

/// A per-joint box on observed positions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DomainBox {
    /// Number of joints checked.
    pub dof: usize,
    /// Lower bound per joint.
    pub lo_rad: JointVec,
    /// Upper bound per joint.
    pub hi_rad: JointVec,
}

impl DomainBox {
    /// First joint whose observed position is outside the box (or not finite).
    pub fn first_violation(&self, pos_rad: &JointVec) -> Option<usize> {
        let dof = self.dof.min(MAX_DOF);
        (0..dof).find(|&j| {
            let p = pos_rad[j];
            !(p >= self.lo_rad[j] && p <= self.hi_rad[j])
        })
    }
}

/// Most regions a policy's omission log may exclude from its declared domain.
pub const MAX_EXCLUSIONS: usize = 16;

/// A region of joint state a policy's omission log removes from its declared domain
/// (a mechanism the reality gap found unclosed there): the states where every bound
/// holds, each joint's position in `[pos_lo, pos_hi]` and velocity in
/// `[vel_lo, vel_hi]` (an unbounded side is infinite).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExcludedRegion {
    /// The omission-log entry that excludes it (its index in the manifest).
    pub entry: u16,
    /// Lower position bound per joint (rad).
    pub pos_lo_rad: JointVec,
    /// Upper position bound per joint (rad).
    pub pos_hi_rad: JointVec,
    /// Lower velocity bound per joint (rad/s).
    pub vel_lo_rad_s: JointVec,
    /// Upper velocity bound per joint (rad/s).
    pub vel_hi_rad_s: JointVec,
}

impl ExcludedRegion {
    /// The region of entry `entry` with no bound yet (every state: bound it before use).
    pub const fn unbounded(entry: u16) -> ExcludedRegion {
        ExcludedRegion {
            entry,
            pos_lo_rad: [f64::NEG_INFINITY; MAX_DOF],
            pos_hi_rad: [f64::INFINITY; MAX_DOF],
            vel_lo_rad_s: [f64::NEG_INFINITY; MAX_DOF],
            vel_hi_rad_s: [f64::INFINITY; MAX_DOF],
        }
    }

    /// Whether the measured state lies inside (a component that is not a number is
    /// outside every region; the domain box refuses it).
    pub fn contains(&self, pos_rad: &JointVec, vel_rad_s: &JointVec) -> bool {
        (0..MAX_DOF).all(|j| {
            let (p, v) = (pos_rad[j], vel_rad_s[j]);
            let pos_free =
                self.pos_lo_rad[j] == f64::NEG_INFINITY && self.pos_hi_rad[j] == f64::INFINITY;
            let vel_free =
                self.vel_lo_rad_s[j] == f64::NEG_INFINITY && self.vel_hi_rad_s[j] == f64::INFINITY;
            (pos_free || (p >= self.pos_lo_rad[j] && p <= self.pos_hi_rad[j]))
                && (vel_free || (v >= self.vel_lo_rad_s[j] && v <= self.vel_hi_rad_s[j]))
        })
    }

    /// The first joint the region bounds (what the gate's flag names).
    pub fn first_joint(&self) -> u16 {
        (0..MAX_DOF)
            .find(|&j| {
                self.pos_lo_rad[j] > f64::NEG_INFINITY
                    || self.pos_hi_rad[j] < f64::INFINITY
                    || self.vel_lo_rad_s[j] > f64::NEG_INFINITY
                    || self.vel_hi_rad_s[j] < f64::INFINITY
            })
            .unwrap_or(0) as u16
    }
}

/// The regions excluded from a policy's declared domain, held inline (checked on the
/// control thread every cycle: no allocation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Exclusions {
    regions: [ExcludedRegion; MAX_EXCLUSIONS],
    len: usize,
}

impl Default for Exclusions {
    fn default() -> Self {
        Exclusions::NONE
    }
}

impl Exclusions {
    /// No region excluded.
    pub const NONE: Exclusions = Exclusions {
        regions: [ExcludedRegion::unbounded(0); MAX_EXCLUSIONS],
        len: 0,
    };

    /// Adds a region; `false` when [`MAX_EXCLUSIONS`] are held already.
    pub fn push(&mut self, region: ExcludedRegion) -> bool {
        if self.len == MAX_EXCLUSIONS {
            return false;
        }
        self.regions[self.len] = region;
        self.len += 1;
        true
    }

    /// The regions.
    pub fn regions(&self) -> &[ExcludedRegion] {
        &self.regions[..self.len]
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first region the measured state lies in (O(regions x dof), no allocation).
    pub fn find(&self, pos_rad: &JointVec, vel_rad_s: &JointVec) -> Option<&ExcludedRegion> {
        self.regions()
            .iter()
            .find(|r| r.contains(pos_rad, vel_rad_s))
    }
}

/// Which support check the runtime applies to each observation.
// Built once at start-up and borrowed afterwards: the size difference costs nothing,
// and boxing would put a heap pointer on the control path.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum SupportMonitor {
    /// No declared domain: every observation is accepted.
    #[default]
    Off,
    /// Observed positions must lie in a per-joint box.
    Box(DomainBox),
}

/// The result of a support check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SupportVerdict {
    /// Inside the declared domain.
    Inside,
    /// Outside; `joint` names the first offending joint where the check is per joint.
    Outside {
        /// Offending joint, if the check is per joint.
        joint: Option<u16>,
    },
}

impl SupportMonitor {
    /// Checks one observation (pure, O(dof), no allocation).
    pub fn check(&self, obs: &Observation) -> SupportVerdict {
        match self {
            SupportMonitor::Off => SupportVerdict::Inside,
            SupportMonitor::Box(b) => match b.first_violation(&obs.pos_rad) {
                None => SupportVerdict::Inside,
                Some(j) => SupportVerdict::Outside {
                    joint: Some(j as u16),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_flags_the_first_joint_outside_and_nan() {
        let b = DomainBox {
            dof: 3,
            lo_rad: [-1.0; MAX_DOF],
            hi_rad: [1.0; MAX_DOF],
        };
        let m = SupportMonitor::Box(b);
        let mut obs = Observation {
            dof: 3,
            ..Observation::default()
        };
        assert_eq!(m.check(&obs), SupportVerdict::Inside);
        obs.pos_rad[2] = 1.5;
        assert_eq!(m.check(&obs), SupportVerdict::Outside { joint: Some(2) });
        obs.pos_rad[1] = f64::NAN;
        assert_eq!(m.check(&obs), SupportVerdict::Outside { joint: Some(1) });
        // Joints past dof are not checked.
        obs.pos_rad = [0.0; MAX_DOF];
        obs.pos_rad[5] = 9.0;
        assert_eq!(m.check(&obs), SupportVerdict::Inside);
        assert_eq!(SupportMonitor::Off.check(&obs), SupportVerdict::Inside);
    }

    #[test]
    fn an_excluded_region_holds_states_inside_every_bound() {
        let mut r = ExcludedRegion::unbounded(3);
        r.pos_lo_rad[1] = 0.4;
        r.pos_hi_rad[1] = 0.6;
        r.vel_lo_rad_s[2] = -0.1;
        r.vel_hi_rad_s[2] = 0.1;
        let mut ex = Exclusions::NONE;
        assert!(ex.push(r));
        let (mut pos, mut vel) = ([0.0; MAX_DOF], [0.0; MAX_DOF]);
        assert_eq!(
            ex.find(&pos, &vel),
            None,
            "joint 1 at 0 is outside [0.4, 0.6]"
        );
        pos[1] = 0.4;
        assert_eq!(
            ex.find(&pos, &vel).map(|r| r.entry),
            Some(3),
            "bounds are closed"
        );
        vel[2] = 0.2;
        assert_eq!(
            ex.find(&pos, &vel),
            None,
            "joint 2 moves too fast to be inside"
        );
        vel[2] = -0.1;
        pos[0] = 1e9;
        assert!(ex.find(&pos, &vel).is_some(), "joint 0 is not bounded");
        pos[1] = f64::NAN;
        assert_eq!(ex.find(&pos, &vel), None);
        assert_eq!(r.first_joint(), 1);
        for _ in 1..MAX_EXCLUSIONS {
            assert!(ex.push(r));
        }
        assert!(!ex.push(r), "full");
        assert_eq!(ex.regions().len(), MAX_EXCLUSIONS);
    }
}
