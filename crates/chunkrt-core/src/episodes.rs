//! Episodes: a run as a sequence of attempts at a task, each from a start pose toward a
//! goal, judged by a success rule, with a reset move between them; and the residual's
//! intervention budget, evaluated at the end of each episode.
//!
//! The control loop feeds [`Episodes`] every cycle (the measurement, whether the policy
//! plays, what the gate did, the tracking error) and every withdrawal of authority; it
//! answers with the phase (`Reset`: the arm is moved to the next start pose, under the
//! gate, by the reset planner on the inference thread; `Running`: the policy has
//! authority) and, when an episode ends, its [`EpisodeSummary`]. An episode ends as:
//! - `Success`: every joint measured within `tolerance_rad` of the goal and slower than
//!   `settle_vel_rad_s` for `settle_ns` without a break;
//! - `Timeout`: `time_limit_ns` passed first;
//! - `GateStop`: a check took authority from the policy (gate saturation, following
//!   error, domain, omission-log region, thermal monitor, probe guard);
//! - `Fault`: a drive fault, a backend error, a drive lost;
//! - `OperatorStop`: an operator stopped it (a stop request, the enable switch released);
//! - `Ended`: the run ended before it did (its duration, a reset that could not
//!   finish).
//!
//! Fixed-size, no allocation: it runs on the control thread.

use crate::chunk::{JointVec, MAX_DOF};
use crate::ladder::ModeChangeReason;
pub use crate::phase::{EpisodeTag, Phase};
use crate::time::MonoTime;

/// Start poses and goals an episode plan holds at most.
pub const MAX_POSES: usize = 16;

/// Bins of the per-episode tracking-error histogram (log-spaced, 1e-6 to 10 rad).
const BINS: usize = 140;
const BIN_LO_RAD: f64 = 1e-6;
/// Bins per decade.
const PER_DECADE: f64 = 20.0;

/// What the episodes are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpisodePlan {
    /// Joints.
    pub dof: usize,
    /// Episodes to run.
    pub count: u32,
    /// Start poses; episode `k` starts at `starts[k % n_starts]`.
    pub starts: [JointVec; MAX_POSES],
    /// How many.
    pub n_starts: usize,
    /// Which starts are held out (never seen in training: the evaluation's).
    pub held_out: [bool; MAX_POSES],
    /// Goals; episode `k` pursues `goals[k % n_goals]`.
    pub goals: [JointVec; MAX_POSES],
    /// How many.
    pub n_goals: usize,
    /// An episode's time limit (ns).
    pub time_limit_ns: u64,
    /// The reset move's time limit (ns): past it the run ends.
    pub reset_limit_ns: u64,
    /// Success: every joint within this of the goal (rad).
    pub tolerance_rad: f64,
    /// A finished reset: every joint within this of the start pose (rad).
    pub reset_tolerance_rad: f64,
    /// And slower than this (rad/s).
    pub settle_vel_rad_s: f64,
    /// For this long without a break (ns).
    pub settle_ns: u64,
}

impl EpisodePlan {
    /// Episode `k`'s start pose index.
    pub fn start_index(&self, k: u32) -> usize {
        k as usize % self.n_starts.clamp(1, MAX_POSES)
    }

    /// Episode `k`'s start pose.
    pub fn start(&self, k: u32) -> &JointVec {
        &self.starts[self.start_index(k)]
    }

    /// Episode `k`'s goal.
    pub fn goal(&self, k: u32) -> &JointVec {
        &self.goals[k as usize % self.n_goals.clamp(1, MAX_POSES)]
    }

    /// Whether episode `k` starts from a held-out pose.
    pub fn held_out(&self, k: u32) -> bool {
        self.held_out[self.start_index(k)]
    }
}

/// The residual's intervention budget (a figure `None`: not limited).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Budget {
    /// Cycles in which the permission gate acted, per episode.
    pub max_gate_cycles: Option<u64>,
    /// Operator stops within the last `window_episodes` episodes.
    pub max_operator_stops: Option<u32>,
    /// The window for operator stops (1 to 64 episodes).
    pub window_episodes: u32,
    /// The episode's tracking error P99 (rad).
    pub max_track_p99_rad: Option<f64>,
}

/// Which figure broke the budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Breach {
    /// Permission-gate cycles in the episode.
    GateCycles = 0,
    /// Operator stops in the window.
    OperatorStops = 1,
    /// Tracking error P99.
    TrackingP99 = 2,
}

impl Breach {
    /// Lower-case name for logs and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Breach::GateCycles => "gate_interventions",
            Breach::OperatorStops => "operator_stops",
            Breach::TrackingP99 => "tracking_error_p99",
        }
    }
}

/// How an episode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    /// At the goal, settled.
    Success = 0,
    /// The time limit passed first.
    Timeout = 1,
    /// A check took authority from the policy.
    GateStop = 2,
    /// A drive or the backend failed.
    Fault = 3,
    /// An operator stopped it.
    OperatorStop = 4,
    /// The run ended before it did.
    Ended = 5,
}

impl Outcome {
    /// Lower-case name for logs and reports.
    pub const fn name(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Timeout => "timeout",
            Outcome::GateStop => "gate_stop",
            Outcome::Fault => "fault",
            Outcome::OperatorStop => "operator_stop",
            Outcome::Ended => "ended",
        }
    }
}

/// One episode, as it ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpisodeSummary {
    /// Its index in the run (0-based).
    pub index: u32,
    /// Its start pose's index in the plan.
    pub start: u16,
    /// The start pose is held out.
    pub held_out: bool,
    /// How it ended.
    pub outcome: Outcome,
    /// The withdrawal that ended it (`GateStop`, `Fault`), else `None`.
    pub reason: Option<ModeChangeReason>,
    /// When the policy got authority.
    pub t_begin: MonoTime,
    /// When it ended.
    pub t_end: MonoTime,
    /// Control cycles in it.
    pub cycles: u64,
    /// Cycles in which the permission gate acted on the proposal (its own constraints:
    /// not the shaping stages', not the support monitor's `Domain` mark).
    pub gate_cycles: u64,
    /// Cycles in which the residual gate acted.
    pub residual_cycles: u64,
    /// The residual had authority in it (not frozen, not rolled back).
    pub residual: bool,
    /// Largest |measured - goal| over the joints at its end (rad).
    pub goal_err_rad: f64,
    /// The tracking error's P99 (rad; the upper edge of its histogram bin, a
    /// twentieth of a decade).
    pub track_p99_rad: f64,
    /// The tracking error's maximum (rad).
    pub track_max_rad: f64,
    /// Operator stops in the budget's window, this one included.
    pub operator_stops_window: u32,
    /// The figure that broke the residual's budget at its end (the residual then
    /// loses authority for the rest of the run).
    pub breach: Option<Breach>,
    /// Times an operator marked it intervened (`intervene`).
    pub marks: u32,
}

/// What one cycle tells the episodes.
#[derive(Clone, Copy, Debug)]
pub struct CycleFacts<'a> {
    /// The cycle's deadline.
    pub now: MonoTime,
    /// Measured positions.
    pub pos_rad: &'a JointVec,
    /// Measured velocities.
    pub vel_rad_s: &'a JointVec,
    /// The gate's bits this cycle (every joint's).
    pub gate_mask: u32,
    /// Of those, the permission gate's own on the proposal (counted as its
    /// interventions: `crate::constraint::PERMISSION_BITS`).
    pub permission_bits: u32,
    /// Of those, the residual gate's.
    pub residual_bits: u32,
    /// Largest |command - measurement| (rad).
    pub track_err_rad: f64,
}

/// The episode state machine (see the module docs).
#[derive(Clone, Debug)]
pub struct Episodes {
    plan: EpisodePlan,
    budget: Budget,
    k: u32,
    phase: Phase,
    t_phase: MonoTime,
    settled_since: Option<MonoTime>,
    residual: bool,
    cycles: u64,
    gate_cycles: u64,
    residual_cycles: u64,
    track_max: f64,
    hist: [u32; BINS],
    /// Operator stops of the last 64 episodes, newest in bit 0.
    stops: u64,
    last_goal_err: f64,
    marks: u32,
}

impl Episodes {
    /// Starts with the first reset move at `now`; `residual`: a residual policy has
    /// authority (its budget is evaluated).
    pub fn new(plan: EpisodePlan, budget: Budget, now: MonoTime, residual: bool) -> Self {
        Episodes {
            plan,
            budget,
            k: 0,
            phase: if plan.count == 0 {
                Phase::Done
            } else {
                Phase::Reset
            },
            t_phase: now,
            settled_since: None,
            residual,
            cycles: 0,
            gate_cycles: 0,
            residual_cycles: 0,
            track_max: 0.0,
            hist: [0; BINS],
            stops: 0,
            last_goal_err: f64::NAN,
            marks: 0,
        }
    }

    /// The plan.
    pub fn plan(&self) -> &EpisodePlan {
        &self.plan
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The current episode's index (the one being reset for, or running).
    pub fn index(&self) -> u32 {
        self.k
    }

    /// Whether the residual still has authority.
    pub fn residual(&self) -> bool {
        self.residual
    }

    /// One cycle's measurement and what the gate did; returns the episode's summary
    /// when it ended this cycle (success or timeout), and moves a finished reset on
    /// to the episode.
    pub fn observe(&mut self, f: &CycleFacts) -> Option<EpisodeSummary> {
        match self.phase {
            Phase::Done => None,
            Phase::Reset => {
                let target = *self.plan.start(self.k);
                if self.settled(f, &target, self.plan.reset_tolerance_rad) {
                    self.phase = Phase::Running;
                    self.t_phase = f.now;
                    self.settled_since = None;
                    self.clear_stats();
                } else if f.now.saturating_since(self.t_phase) > self.plan.reset_limit_ns {
                    self.phase = Phase::Done;
                }
                None
            }
            Phase::Running => {
                self.tally(f);
                let goal = *self.plan.goal(self.k);
                self.last_goal_err = max_err(f.pos_rad, &goal, self.plan.dof);
                if self.settled(f, &goal, self.plan.tolerance_rad) {
                    Some(self.end(f.now, Outcome::Success, None))
                } else if f.now.saturating_since(self.t_phase) > self.plan.time_limit_ns {
                    Some(self.end(f.now, Outcome::Timeout, None))
                } else {
                    None
                }
            }
        }
    }

    /// A check took authority from the policy (`reason`): a running episode ends as
    /// a gate stop or a fault. Nothing outside a running episode.
    pub fn withdrawn(&mut self, now: MonoTime, reason: ModeChangeReason) -> Option<EpisodeSummary> {
        if self.phase != Phase::Running {
            return None;
        }
        let outcome = match reason {
            ModeChangeReason::GateSaturated
            | ModeChangeReason::FollowingError
            | ModeChangeReason::OutOfDomain
            | ModeChangeReason::Excluded
            | ModeChangeReason::Thermal
            | ModeChangeReason::ProbeExcursion
            | ModeChangeReason::ForceTripwire => Outcome::GateStop,
            ModeChangeReason::BackendError
            | ModeChangeReason::DriveLost
            | ModeChangeReason::DrivesRecovered => Outcome::Fault,
            ModeChangeReason::EnableReleased | ModeChangeReason::OperatorHold => {
                Outcome::OperatorStop
            }
            _ => return None,
        };
        Some(self.end(now, outcome, Some(reason)))
    }

    /// An operator marked the running episode intervened `n` times (false: none runs).
    pub fn mark(&mut self, n: u32) -> bool {
        if self.phase == Phase::Running {
            self.marks = self.marks.saturating_add(n);
            true
        } else {
            false
        }
    }

    /// An operator stopped the running episode (nothing otherwise).
    pub fn operator_stop(&mut self, now: MonoTime) -> Option<EpisodeSummary> {
        (self.phase == Phase::Running).then(|| self.end(now, Outcome::OperatorStop, None))
    }

    /// The run ends: a running episode ends as `Ended`; no episode follows.
    pub fn end_of_run(&mut self, now: MonoTime) -> Option<EpisodeSummary> {
        let summary = (self.phase == Phase::Running).then(|| self.end(now, Outcome::Ended, None));
        self.phase = Phase::Done;
        summary
    }

    fn clear_stats(&mut self) {
        self.cycles = 0;
        self.gate_cycles = 0;
        self.residual_cycles = 0;
        self.track_max = 0.0;
        self.hist = [0; BINS];
        self.last_goal_err = f64::NAN;
        self.marks = 0;
    }

    fn tally(&mut self, f: &CycleFacts) {
        self.cycles += 1;
        if f.gate_mask & f.permission_bits != 0 {
            self.gate_cycles += 1;
        }
        if f.gate_mask & f.residual_bits != 0 {
            self.residual_cycles += 1;
        }
        let e = if f.track_err_rad.is_finite() {
            f.track_err_rad.abs()
        } else {
            f64::MAX
        };
        self.track_max = self.track_max.max(e);
        self.hist[bin(e)] += 1;
    }

    /// Within `tolerance_rad` of `target` and slow, for the settle time.
    fn settled(&mut self, f: &CycleFacts, target: &JointVec, tolerance_rad: f64) -> bool {
        let dof = self.plan.dof.min(MAX_DOF);
        let near = max_err(f.pos_rad, target, dof) <= tolerance_rad
            && f.vel_rad_s[..dof]
                .iter()
                .all(|v| v.abs() <= self.plan.settle_vel_rad_s);
        if !near {
            self.settled_since = None;
            return false;
        }
        let since = *self.settled_since.get_or_insert(f.now);
        f.now.saturating_since(since) >= self.plan.settle_ns
    }

    fn end(
        &mut self,
        now: MonoTime,
        outcome: Outcome,
        reason: Option<ModeChangeReason>,
    ) -> EpisodeSummary {
        self.stops = (self.stops << 1) | u64::from(outcome == Outcome::OperatorStop);
        let window = self.budget.window_episodes.clamp(1, 64);
        let mask = if window >= 64 {
            u64::MAX
        } else {
            (1u64 << window) - 1
        };
        let stops_window = (self.stops & mask).count_ones();
        let p99 = self.p99();
        let mut s = EpisodeSummary {
            index: self.k,
            start: self.plan.start_index(self.k) as u16,
            held_out: self.plan.held_out(self.k),
            outcome,
            reason,
            t_begin: self.t_phase,
            t_end: now,
            cycles: self.cycles,
            gate_cycles: self.gate_cycles,
            residual_cycles: self.residual_cycles,
            residual: self.residual,
            goal_err_rad: self.last_goal_err,
            track_p99_rad: p99,
            track_max_rad: self.track_max,
            operator_stops_window: stops_window,
            breach: None,
            marks: self.marks,
        };
        if self.residual {
            s.breach = self.breach(&s);
            if s.breach.is_some() {
                self.residual = false;
            }
        }
        self.k += 1;
        self.phase = if self.k >= self.plan.count {
            Phase::Done
        } else {
            Phase::Reset
        };
        self.t_phase = now;
        self.settled_since = None;
        s
    }

    fn breach(&self, s: &EpisodeSummary) -> Option<Breach> {
        let b = &self.budget;
        if b.max_gate_cycles.is_some_and(|m| s.gate_cycles > m) {
            Some(Breach::GateCycles)
        } else if b
            .max_operator_stops
            .is_some_and(|m| s.operator_stops_window > m)
        {
            Some(Breach::OperatorStops)
        } else if b.max_track_p99_rad.is_some_and(|m| s.track_p99_rad > m) {
            Some(Breach::TrackingP99)
        } else {
            None
        }
    }

    /// The upper edge of the bin holding the 99th percentile (0 without cycles).
    fn p99(&self) -> f64 {
        let n: u64 = self.hist.iter().map(|&c| u64::from(c)).sum();
        if n == 0 {
            return 0.0;
        }
        let rank = (n as f64 * 0.99).ceil() as u64;
        let mut seen = 0u64;
        for (i, &c) in self.hist.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                return upper_edge(i);
            }
        }
        upper_edge(BINS - 1)
    }
}

fn max_err(pos: &JointVec, target: &JointVec, dof: usize) -> f64 {
    let mut e: f64 = 0.0;
    for (p, t) in pos.iter().zip(target).take(dof.min(MAX_DOF)) {
        let d = (p - t).abs();
        e = if d.is_nan() { f64::INFINITY } else { e.max(d) };
    }
    e
}

/// Bin 0 holds everything up to `BIN_LO_RAD`; bin `i` up to `BIN_LO_RAD * 10^(i / 20)`.
fn bin(e: f64) -> usize {
    if e <= BIN_LO_RAD {
        return 0;
    }
    let i = ((e / BIN_LO_RAD).log10() * PER_DECADE).ceil();
    (i as usize).min(BINS - 1)
}

fn upper_edge(i: usize) -> f64 {
    BIN_LO_RAD * 10f64.powf(i as f64 / PER_DECADE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> EpisodePlan {
        let mut p = EpisodePlan {
            dof: 2,
            count: 3,
            starts: [[0.0; MAX_DOF]; MAX_POSES],
            n_starts: 2,
            held_out: [false; MAX_POSES],
            goals: [[0.0; MAX_DOF]; MAX_POSES],
            n_goals: 1,
            time_limit_ns: 2_000_000_000,
            reset_limit_ns: 5_000_000_000,
            tolerance_rad: 0.01,
            reset_tolerance_rad: 0.01,
            settle_vel_rad_s: 0.05,
            settle_ns: 100_000_000,
        };
        p.starts[1] = [0.5; MAX_DOF];
        p.held_out[1] = true;
        p.goals[0] = [0.3; MAX_DOF];
        p
    }

    fn at(now_ms: u64, q: f64, track: f64, mask: u32) -> (JointVec, JointVec, MonoTime, f64, u32) {
        (
            [q; MAX_DOF],
            [0.0; MAX_DOF],
            MonoTime::from_ms(now_ms),
            track,
            mask,
        )
    }

    fn feed(
        e: &mut Episodes,
        v: (JointVec, JointVec, MonoTime, f64, u32),
    ) -> Option<EpisodeSummary> {
        e.observe(&CycleFacts {
            now: v.2,
            pos_rad: &v.0,
            vel_rad_s: &v.1,
            gate_mask: v.4,
            permission_bits: !(1 << 10),
            residual_bits: 1 << 10,
            track_err_rad: v.3,
        })
    }

    /// Issue 56: the budget counts the permission gate's own interventions on the
    /// proposal: not the shaping stages' bits, not the support monitor's `Domain` mark.
    #[test]
    fn only_the_permission_gates_own_interventions_count() {
        use crate::constraint::{Constraint, PERMISSION_BITS};
        let mut e = Episodes::new(plan(), Budget::default(), MonoTime::from_ms(0), true);
        let mut t = 0;
        while e.phase() == Phase::Reset {
            feed(&mut e, at(t, 0.0, 0.0, 0));
            t += 20;
        }
        let masks = [
            Constraint::Domain.bit(),
            Constraint::ResidualRate.bit() | Constraint::ActionFilter.bit(),
            Constraint::Acceleration.bit() | Constraint::ResidualRate.bit(),
            Constraint::Jerk.bit(),
        ];
        let (mut s, mut fed_permission) = (None, 0);
        for (k, m) in masks.iter().cycle().take(400).enumerate() {
            fed_permission += u64::from(m & PERMISSION_BITS != 0);
            s = e.observe(&CycleFacts {
                now: MonoTime::from_ms(t + 20 * k as u64),
                pos_rad: &[0.1; MAX_DOF],
                vel_rad_s: &[0.0; MAX_DOF],
                gate_mask: *m,
                permission_bits: PERMISSION_BITS,
                residual_bits: 1 << 10,
                track_err_rad: 0.0,
            });
            if s.is_some() {
                break;
            }
        }
        let s = s.expect("the episode timed out");
        // The acceleration and jerk cycles, half of those fed; the others not.
        assert_eq!(s.gate_cycles, fed_permission, "{s:?}");
        assert!(s.cycles >= 2 * fed_permission - 1, "{s:?}");
    }

    #[test]
    fn reset_then_success_then_timeout_then_done() {
        let budget = Budget {
            max_track_p99_rad: Some(0.02),
            window_episodes: 4,
            ..Budget::default()
        };
        let mut e = Episodes::new(plan(), budget, MonoTime::from_ms(0), true);
        assert_eq!(e.phase(), Phase::Reset);
        // Settled at the first start for 100 ms: running.
        let mut t = 0;
        while e.phase() == Phase::Reset {
            assert!(feed(&mut e, at(t, 0.0, 0.0, 0)).is_none());
            t += 20;
            assert!(t < 1000);
        }
        assert_eq!(t, 120);
        // At the goal, settled: success with its figures.
        let mut s = None;
        while s.is_none() {
            s = feed(
                &mut e,
                at(t, 0.3, 0.001, if t % 40 == 0 { 1 << 3 } else { 1 << 10 }),
            );
            t += 20;
            assert!(t < 10_000);
        }
        let s = s.unwrap();
        assert_eq!(
            (s.index, s.outcome, s.start, s.held_out),
            (0, Outcome::Success, 0, false)
        );
        assert!(s.gate_cycles > 0 && s.residual_cycles > 0 && s.breach.is_none());
        assert!(
            (s.track_p99_rad - 0.001).abs() < 0.001 * 0.13,
            "{}",
            s.track_p99_rad
        );
        assert_eq!(e.phase(), Phase::Reset);
        // Second episode from the held-out start: reset there, then the time runs out
        // with a tracking error over the budget: the residual is rolled back.
        while e.phase() == Phase::Reset {
            feed(&mut e, at(t, 0.5, 0.0, 0));
            t += 20;
        }
        assert_eq!(e.phase(), Phase::Running);
        let mut s = None;
        while s.is_none() {
            s = feed(&mut e, at(t, 0.1, 0.05, 0));
            t += 20;
            assert!(t < 20_000);
        }
        let s = s.unwrap();
        assert_eq!(
            (s.outcome, s.held_out, s.breach),
            (Outcome::Timeout, true, Some(Breach::TrackingP99))
        );
        assert!((s.goal_err_rad - 0.2).abs() < 1e-12);
        assert!(!e.residual());
        // Third: a gate stop ends it; then done.
        while e.phase() == Phase::Reset {
            feed(&mut e, at(t, 0.0, 0.0, 0));
            t += 20;
        }
        assert!(e
            .withdrawn(MonoTime::from_ms(t), ModeChangeReason::ChunkExpired)
            .is_none());
        let s = e
            .withdrawn(MonoTime::from_ms(t), ModeChangeReason::GateSaturated)
            .unwrap();
        assert_eq!(
            (s.outcome, s.residual, s.breach),
            (Outcome::GateStop, false, None)
        );
        assert_eq!(e.phase(), Phase::Done);
        assert!(e.end_of_run(MonoTime::from_ms(t)).is_none());
    }

    #[test]
    fn operator_stops_over_the_window_break_the_budget() {
        let budget = Budget {
            max_operator_stops: Some(1),
            window_episodes: 3,
            ..Budget::default()
        };
        let mut p = plan();
        p.count = 5;
        let mut e = Episodes::new(p, budget, MonoTime::from_ms(0), true);
        let mut t = 0;
        let run_to_start = |e: &mut Episodes, t: &mut u64| {
            while e.phase() == Phase::Reset {
                let q = e.plan().start(e.index())[0];
                feed(e, at(*t, q, 0.0, 0));
                *t += 20;
            }
        };
        run_to_start(&mut e, &mut t);
        let s = e.operator_stop(MonoTime::from_ms(t)).unwrap();
        assert_eq!((s.operator_stops_window, s.breach), (1, None));
        run_to_start(&mut e, &mut t);
        let s = e.operator_stop(MonoTime::from_ms(t)).unwrap();
        assert_eq!(
            (s.operator_stops_window, s.breach),
            (2, Some(Breach::OperatorStops))
        );
        run_to_start(&mut e, &mut t);
        let s = e.end_of_run(MonoTime::from_ms(t)).unwrap();
        assert_eq!((s.outcome, s.residual), (Outcome::Ended, false));
        assert_eq!(e.phase(), Phase::Done);
    }

    #[test]
    fn a_reset_that_cannot_finish_ends_the_run() {
        let mut e = Episodes::new(plan(), Budget::default(), MonoTime::from_ms(0), false);
        let mut t = 0;
        while e.phase() == Phase::Reset {
            feed(&mut e, at(t, 1.0, 0.0, 0));
            t += 20;
        }
        assert_eq!(e.phase(), Phase::Done);
        assert!(t > 5000);
    }

    #[test]
    fn the_histogram_bins_bracket_the_error() {
        for e in [2e-6, 1.1e-4, 0.0123, 0.5, 3.0] {
            let i = bin(e);
            assert!(upper_edge(i) >= e && upper_edge(i - 1) < e, "{e}");
        }
        assert_eq!(bin(0.0), 0);
        assert_eq!(bin(f64::MAX), BINS - 1);
    }
}
