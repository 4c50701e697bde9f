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
    /// A goal schedule naming a goal the list does not have, or out of order.
    #[error(
        "goal schedule entry {entry} ([{seq}, {goal}]): {why} (the goal list has {len} goals)"
    )]
    BadSchedule {
        /// Index of the entry.
        entry: usize,
        /// Its observation.
        seq: u64,
        /// Its goal.
        goal: usize,
        /// Goals in the list.
        len: usize,
        /// What is wrong with it.
        why: &'static str,
    },
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
    /// Replayed goal changes: from observation `.0` on, goal `.1` (empty: goals
    /// advance on arrival).
    schedule: Vec<(u64, usize)>,
    /// The observation last taken by [`Self::observe`].
    last_seq: Option<u64>,
    /// An advance decided during one observation, taken at the next.
    pending: bool,
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
            schedule: Vec::new(),
            last_seq: None,
            pending: false,
        })
    }

    /// Pursues `goal` alone from now on (an episode's goal): the list becomes that one
    /// pose, the arrival and any schedule forgotten. Joints past `dof` are ignored.
    pub fn pursue_only(&mut self, goal: &JointVec) {
        let mut g = [0.0; MAX_DOF];
        g[..self.dof].copy_from_slice(&goal[..self.dof]);
        self.goals.clear();
        self.goals.push(g);
        self.index = 0;
        self.reached_since = None;
        self.schedule.clear();
        self.pending = false;
    }

    /// The goals change as `schedule` says instead of on arrival: from observation
    /// (its cycle) `seq` on, goal `index`, entries in ascending `seq` (the goal
    /// changes of a recorded run, replayed: the margin instrument's unprobed twin and
    /// its probed run then pursue the same goal at every instant).
    pub fn with_schedule(mut self, schedule: &[(u64, usize)]) -> Result<Self, GoalError> {
        for (entry, &(seq, goal)) in schedule.iter().enumerate() {
            let bad = |why| GoalError::BadSchedule {
                entry,
                seq,
                goal,
                len: self.goals.len(),
                why,
            };
            if goal >= self.goals.len() {
                return Err(bad("no such goal"));
            }
            if entry > 0 && seq <= schedule[entry - 1].0 {
                return Err(bad("observations must ascend"));
            }
        }
        self.schedule = schedule.to_vec();
        Ok(self)
    }

    /// The goals follow a schedule ([`Self::with_schedule`]).
    pub fn scheduled(&self) -> bool {
        !self.schedule.is_empty()
    }

    /// Moves to the next goal at the next observation [`Self::observe`] takes: every
    /// chunk drawn for one observation (the runtime's candidates) then pursues one
    /// goal, so a run's goal per observation can be replayed.
    pub fn advance_at_next_observation(&mut self) {
        self.pending = true;
    }

    /// Takes the observation captured in cycle `seq` with the arm at `pos_rad` (once
    /// per chunk drawn: several times with candidates): the scheduled goal for it,
    /// else a pending advance on a new observation, else [`Self::update`]; returns
    /// whether the goal changed.
    pub fn observe(&mut self, seq: u64, pos_rad: &JointVec, now: MonoTime) -> bool {
        let fresh = self.last_seq != Some(seq);
        self.last_seq = Some(seq);
        if self.pending {
            if fresh {
                self.pending = false;
                self.advance();
            }
            return fresh;
        }
        if !self.scheduled() {
            return self.update(pos_rad, now);
        }
        let index = self
            .schedule
            .iter()
            .take_while(|&&(s, _)| s <= seq)
            .last()
            .map_or(0, |&(_, g)| g);
        let changed = index != self.index;
        self.index = index;
        changed
    }

    /// The goal the arm is heading for.
    pub fn current(&self) -> &JointVec {
        &self.goals[self.index]
    }

    /// Every goal, in order (as loaded; an episode's `pursue_only` replaces them).
    pub fn all(&self) -> &[JointVec] {
        &self.goals
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

    /// Takes one observation of the arm at `pos_rad`; returns true when the arm has
    /// settled near the current goal (the caller moves `goals` on). Never for a
    /// scheduled sequence ([`GoalSequence::with_schedule`]).
    pub fn observe(&mut self, goals: &GoalSequence, pos_rad: &JointVec) -> bool {
        if goals.scheduled() {
            return false;
        }
        let motion = (0..goals.dof).fold(0.0f64, |acc, j| {
            acc.max((pos_rad[j] - self.prev_pos[j]).abs())
        });
        self.prev_pos = *pos_rad;
        if goals.distance_rad(pos_rad) <= self.radius_rad && motion < self.motion_rad {
            self.settled_for += 1;
            if self.settled_for >= self.chunks {
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
    fn a_schedule_sets_the_goal_by_observation_and_arrival_no_longer_counts() {
        let goals = [vec![0.0], vec![1.0], vec![2.0]];
        let mut g = GoalSequence::new(1, &goals, 0.01, 0)
            .unwrap()
            .with_schedule(&[(10, 2), (20, 1)])
            .unwrap();
        let at_goal_0 = [0.0; MAX_DOF];
        let t = MonoTime::from_ns(1);
        // At goal 0 and past the dwell: on arrival it would advance; scheduled, not.
        assert!(!g.observe(9, &at_goal_0, t));
        assert_eq!(g.index(), 0);
        // A settler never calls it settled either.
        let mut settler = Settler::new(1.0, 1.0, 1);
        assert!(!settler.observe(&g, &at_goal_0));
        assert!(!settler.observe(&g, &at_goal_0));
        assert_eq!(g.index(), 0);
        // An observation past an entry takes its goal, skipped ones included.
        assert!(g.observe(12, &at_goal_0, t));
        assert_eq!(g.index(), 2);
        assert!(!g.observe(19, &at_goal_0, t));
        assert!(g.observe(25, &at_goal_0, t));
        assert_eq!(g.index(), 1);
        // Unscheduled, the same observation advances on arrival.
        let mut free = GoalSequence::new(1, &goals, 0.01, 0).unwrap();
        assert!(free.observe(9, &at_goal_0, t));
        assert_eq!(free.index(), 1);
    }

    /// A settled arm's advance decided while drawing one observation's candidates is
    /// taken at the next observation: every candidate of one observation pursues one
    /// goal, and arrival is not judged in between (no goal skipped).
    #[test]
    fn an_advance_at_the_next_observation_waits_for_it() {
        let goals = [vec![0.0], vec![1.0], vec![2.0]];
        let mut g = GoalSequence::new(1, &goals, 0.01, 0).unwrap();
        let far = [5.0; MAX_DOF];
        let t = MonoTime::from_ns(1);
        assert!(!g.observe(1, &far, t));
        g.advance_at_next_observation();
        // More candidates of observation 1, even at goal 0: no change.
        assert!(!g.observe(1, &[0.0; MAX_DOF], t));
        assert_eq!(g.index(), 0);
        assert!(g.observe(2, &far, t));
        assert_eq!(g.index(), 1);
        assert!(!g.observe(3, &far, t));
        assert_eq!(g.index(), 1);
    }

    #[test]
    fn a_schedule_naming_a_missing_goal_or_out_of_order_is_refused() {
        let g = || GoalSequence::new(1, &[vec![0.0], vec![1.0]], 0.01, 0).unwrap();
        assert_eq!(
            g().with_schedule(&[(5, 1), (8, 2)])
                .unwrap_err()
                .to_string(),
            "goal schedule entry 1 ([8, 2]): no such goal (the goal list has 2 goals)"
        );
        assert_eq!(
            g().with_schedule(&[(5, 1), (5, 0)])
                .unwrap_err()
                .to_string(),
            "goal schedule entry 1 ([5, 0]): observations must ascend (the goal list has 2 goals)"
        );
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
