//! Per-joint values: one number for every joint, or a list with one per joint.

use serde::{Deserialize, Serialize};

/// A value given once for all joints (`max_vel_rad_s = 2.0`) or per joint
/// (`max_vel_rad_s = [2.0, 2.0, 2.5, ...]`).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PerJoint {
    /// The same value for every joint.
    All(f64),
    /// One value per joint, in joint order.
    Each(Vec<f64>),
}

impl PerJoint {
    /// The value for joint `j` (validated: `Each` has exactly `joints` entries).
    pub fn get(&self, j: usize) -> f64 {
        match self {
            PerJoint::All(v) => *v,
            PerJoint::Each(v) => v.get(j).copied().unwrap_or(f64::NAN),
        }
    }

    /// Checks the length and that every value is finite and satisfies `ok`.
    pub(crate) fn check(
        &self,
        path: &str,
        joints: usize,
        ok: impl Fn(f64) -> bool,
        expected: &str,
    ) -> Result<(), (String, String)> {
        if let PerJoint::Each(v) = self {
            if v.len() != joints {
                return Err((
                    path.to_string(),
                    format!("expected {joints} values (one per joint), got {}", v.len()),
                ));
            }
        }
        for j in 0..joints {
            let v = self.get(j);
            if !v.is_finite() || !ok(v) {
                return Err((
                    path.to_string(),
                    format!("joint {j}: expected {expected}, got {v}"),
                ));
            }
        }
        Ok(())
    }
}
