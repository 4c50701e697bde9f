//! The permission gate (API contract; implementation pending).

use crate::chunk::{JointVec, MAX_DOF};
use crate::executor::Setpoint;
use crate::io::Command;
use crate::limits::JointLimits;

/// One kind of intervention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Constraint {
    /// Non-finite value replaced by the previous command.
    NonFinite = 0,
    /// Position limit (with margin).
    Position = 1,
    /// Braking envelope.
    Braking = 2,
    /// Velocity limit.
    Velocity = 3,
    /// Acceleration limit.
    Acceleration = 4,
    /// Jerk limit.
    Jerk = 5,
    /// Observation outside the operating domain.
    Domain = 6,
}

/// Number of constraint kinds.
pub const CONSTRAINT_COUNT: usize = 7;

/// One bit per constraint that intervened this cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct GateMask(pub u32);

/// One intervention on one joint.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Intervention {
    /// Joint index.
    pub joint: u16,
    /// Constraint that acted (the last one in the chain).
    pub constraint: Constraint,
    /// Proposed position.
    pub proposed_rad: f64,
    /// Executed position.
    pub executed_rad: f64,
}

/// Clamps every command (API contract; implementation pending).
pub struct Gate {
    _private: (),
}

impl Gate {
    /// A gate for `limits` at the given command period, starting at rest at `initial_pos`.
    pub fn new(_limits: JointLimits, _period_ns: u64, _initial_pos: &JointVec) -> Self {
        todo!("issue 3")
    }

    /// Filters `proposed` into `cmd`; returns which constraints acted.
    pub fn filter(&mut self, _proposed: &Setpoint, _cmd: &mut Command) -> GateMask {
        todo!("issue 3")
    }

    /// Interventions of the last `filter` call.
    pub fn interventions(&self) -> &[Intervention] {
        todo!("issue 3")
    }

    /// Interventions per constraint so far.
    pub fn counts(&self) -> &[u64; CONSTRAINT_COUNT] {
        todo!("issue 3")
    }
}

#[allow(dead_code)]
const _: usize = MAX_DOF;
