//! C2 cubic spline over a chunk's setpoints (API contract; implementation pending).

use crate::chunk::{Chunk, JointVec};
use crate::time::MonoTime;

/// Position, velocity and acceleration of every joint at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Pva {
    /// Positions.
    pub pos_rad: JointVec,
    /// Velocities.
    pub vel_rad_s: JointVec,
    /// Accelerations.
    pub acc_rad_s2: JointVec,
}

/// A C2 cubic spline through a chunk's setpoints, built on arrival, evaluated in O(1).
#[derive(Clone, Debug)]
pub struct ChunkSpline {
    _private: (),
}

impl ChunkSpline {
    /// Builds the spline of `chunk` (no allocation).
    pub fn build(_chunk: &Chunk) -> Self {
        todo!("issue 3")
    }

    /// Evaluates position, velocity and acceleration at `t` (clamped to the horizon).
    pub fn eval(&self, _t: MonoTime, _out: &mut Pva) {
        todo!("issue 3")
    }
}
