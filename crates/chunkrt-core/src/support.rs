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
}
