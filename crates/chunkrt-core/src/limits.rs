//! Per-joint limits that the permission gate enforces and the fallback respects.

use crate::chunk::MAX_DOF;

/// Limits of one joint. Validated where it is born (config), trusted afterwards.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointLimit {
    /// Lower position limit.
    pub pos_min_rad: f64,
    /// Upper position limit.
    pub pos_max_rad: f64,
    /// Commands stay this far inside the position limits.
    pub pos_margin_rad: f64,
    /// Largest commanded speed.
    pub max_vel_rad_s: f64,
    /// Largest commanded acceleration.
    pub max_acc_rad_s2: f64,
    /// Largest commanded jerk.
    pub max_jerk_rad_s3: f64,
    /// Deceleration assumed by the braking envelope `|v| <= sqrt(2 a d)`.
    pub brake_acc_rad_s2: f64,
}

impl Default for JointLimit {
    fn default() -> Self {
        JointLimit {
            pos_min_rad: -3.0,
            pos_max_rad: 3.0,
            pos_margin_rad: 0.02,
            max_vel_rad_s: 2.0,
            max_acc_rad_s2: 10.0,
            max_jerk_rad_s3: 500.0,
            brake_acc_rad_s2: 8.0,
        }
    }
}

/// Limits for every joint of an arm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointLimits {
    /// Number of joints in use.
    pub dof: usize,
    /// One entry per joint; entries past `dof` are unused.
    pub joint: [JointLimit; MAX_DOF],
}

impl JointLimits {
    /// The same limit for `dof` joints.
    pub fn uniform(dof: usize, limit: JointLimit) -> Self {
        assert!(dof <= MAX_DOF, "dof {dof} exceeds MAX_DOF {MAX_DOF}");
        JointLimits {
            dof,
            joint: [limit; MAX_DOF],
        }
    }
}
