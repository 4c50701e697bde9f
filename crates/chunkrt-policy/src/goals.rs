//! A cyclic sequence of goal poses, advanced when the arm arrives at the current one.
//!
//! Shared by the scripted policy (which plans toward the goal) and the ONNX policy (whose
//! observation vector carries the goal, as in its training data).

use chunkrt_core::{JointVec, MonoTime, MAX_DOF};

/// Why a goal list was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GoalError {
    /// No goal at all.
    #[error("goal list is empty: at least one goal pose is needed")]
    Empty,
    /// A goal with the wrong number of joints.
    #[error("goal {index} has {got} joint values, expected {dof}")]
    WrongLength {
        /// Index of the goal in the list.
        index: usize,
        /// Values it has.
        got: usize,
        /// Joints of the arm.
        dof: usize,
    },
    /// A NaN or infinite value.
    #[error("goal {index}, joint {joint} is not finite ({value})")]
    NotFinite {
        /// Index of the goal in the list.
        index: usize,
        /// Joint index.
        joint: usize,
        /// The value.
        value: f64,
    },
    /// Tolerance not positive and finite.
    #[error("goal tolerance must be positive and finite, got {0}")]
    BadTolerance(f64),
}

/// Goal poses visited in order, wrapping around.
#[derive(Clone, Debug)]
pub struct GoalSequence {
    dof: usize,
    goals: Vec<JointVec>,
    index: usize,
    tolerance_rad: f64,
    dwell_ns: u64,
    reached_since: Option<MonoTime>,
}

impl GoalSequence {
    /// Validates the goals (each `dof` finite values) and starts at goal 0.
    ///
    /// A goal counts as reached when every joint is within `tolerance_rad` of it; the
    /// sequence moves on after the arm has stayed there for `dwell_ns`.
    pub fn new(
        dof: usize,
        goals: &[Vec<f64>],
        tolerance_rad: f64,
        dwell_ns: u64,
    ) -> Result<Self, GoalError> {
        if goals.is_empty() {
            return Err(GoalError::Empty);
        }
        if !(tolerance_rad.is_finite() && tolerance_rad > 0.0) {
            return Err(GoalError::BadTolerance(tolerance_rad));
        }
        let mut out = Vec::with_capacity(goals.len());
        for (index, g) in goals.iter().enumerate() {
            if g.len() != dof || dof > MAX_DOF {
                return Err(GoalError::WrongLength {
                    index,
                    got: g.len(),
                    dof,
                });
            }
            let mut v = [0.0; MAX_DOF];
            for (joint, &value) in g.iter().enumerate() {
                if !value.is_finite() {
                    return Err(GoalError::NotFinite {
                        index,
                        joint,
                        value,
                    });
                }
                v[joint] = value;
            }
            out.push(v);
        }
        Ok(GoalSequence {
            dof,
            goals: out,
            index: 0,
            tolerance_rad,
            dwell_ns,
            reached_since: None,
        })
    }

    /// The goal the arm is heading for.
    pub fn current(&self) -> &JointVec {
        &self.goals[self.index]
    }

    /// Index of the current goal.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Number of goals.
    pub fn len(&self) -> usize {
        self.goals.len()
    }

    /// Always false: a sequence holds at least one goal.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Largest per-joint distance from `pos_rad` to the current goal.
    pub fn distance_rad(&self, pos_rad: &JointVec) -> f64 {
        (0..self.dof).fold(0.0f64, |m, j| {
            m.max((pos_rad[j] - self.goals[self.index][j]).abs())
        })
    }

    /// Moves to the next goal now (a supervisor decided the current one is done).
    pub fn advance(&mut self) {
        self.index = (self.index + 1) % self.goals.len();
        self.reached_since = None;
    }

    /// Moves to the next goal once the arm has been within tolerance of the current one for
    /// the dwell time; returns whether it moved.
    pub fn update(&mut self, pos_rad: &JointVec, now: MonoTime) -> bool {
        if self.distance_rad(pos_rad) > self.tolerance_rad {
            self.reached_since = None;
            return false;
        }
        let since = *self.reached_since.get_or_insert(now);
        if now.saturating_since(since) < self.dwell_ns {
            return false;
        }
        self.index = (self.index + 1) % self.goals.len();
        self.reached_since = None;
        true
    }
}

/// Moves a goal sequence on when a learned policy has settled near its goal without
/// reaching the tolerance (model bias): within `radius_rad` of it on every joint, and
/// every joint moving less than `motion_rad` between consecutive observations, for
/// `chunks` observations in a row.
#[derive(Clone, Debug)]
pub struct Settler {
    radius_rad: f64,
    motion_rad: f64,
    chunks: u32,
    settled_for: u32,
    prev_pos: JointVec,
}

impl Settler {
    /// A settler with the given radius, stillness and count.
    pub fn new(radius_rad: f64, motion_rad: f64, chunks: u32) -> Self {
        Settler {
            radius_rad,
            motion_rad,
            chunks: chunks.max(1),
            settled_for: 0,
            prev_pos: [f64::NAN; MAX_DOF],
        }
    }

    /// Starts counting afresh (the goal changed).
    pub fn restart(&mut self) {
        self.settled_for = 0;
    }

    /// Takes one observation of the arm at `pos_rad`; advances `goals` and returns true
    /// when the arm has settled near the current goal.
    pub fn observe(&mut self, goals: &mut GoalSequence, pos_rad: &JointVec) -> bool {
        let motion = (0..goals.dof).fold(0.0f64, |acc, j| {
            acc.max((pos_rad[j] - self.prev_pos[j]).abs())
        });
        self.prev_pos = *pos_rad;
        if goals.distance_rad(pos_rad) <= self.radius_rad && motion < self.motion_rad {
            self.settled_for += 1;
            if self.settled_for >= self.chunks {
                goals.advance();
                self.settled_for = 0;
                return true;
            }
        } else {
            self.settled_for = 0;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_after_dwell_and_wraps() {
        let mut g = GoalSequence::new(2, &[vec![0.0, 0.0], vec![1.0, 1.0]], 0.01, 100).unwrap();
        let mut at = [0.0; MAX_DOF];
        assert!(!g.update(&at, MonoTime::from_ns(1000)));
        assert!(g.update(&at, MonoTime::from_ns(1100)));
        assert_eq!(g.index(), 1);
        at[0] = 1.0;
        at[1] = 0.995;
        assert!(!g.update(&at, MonoTime::from_ns(2000)));
        assert!(g.update(&at, MonoTime::from_ns(2100)));
        assert_eq!(g.index(), 0);
    }

    #[test]
    fn refuses_bad_goals() {
        let e = GoalSequence::new(2, &[vec![0.0]], 0.01, 0).unwrap_err();
        assert_eq!(e.to_string(), "goal 0 has 1 joint values, expected 2");
        let e = GoalSequence::new(1, &[vec![0.0], vec![f64::NAN]], 0.01, 0).unwrap_err();
        assert_eq!(e.to_string(), "goal 1, joint 0 is not finite (NaN)");
        assert_eq!(
            GoalSequence::new(1, &[], 0.01, 0).unwrap_err(),
            GoalError::Empty
        );
        assert_eq!(
            GoalSequence::new(1, &[vec![0.0]], 0.0, 0).unwrap_err(),
            GoalError::BadTolerance(0.0)
        );
    }
}
