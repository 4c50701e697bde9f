//! The permission gate: the last word on every command, in every mode.
//!
//! Per joint, in this order:
//! 1. a non-finite proposal is replaced by the previous command (`NonFinite`);
//! 2. the proposed position is clipped into the position limits shrunk by the
//!    margin (`Position`);
//! 3. the next commanded acceleration `a'` (the second backward difference of the
//!    commanded positions) is confined to an interval that keeps, at once:
//!    jerk `|a' - a| <= J t` (`Jerk`), `|a'| <= A` (`Acceleration`), a velocity
//!    that can still be kept within `V` (`Velocity`), and a position from which a
//!    jerk-limited brake at `brake_acc` stops inside the limits (`Braking`: the
//!    jerk-aware form of `|v| <= sqrt(2 a_brake d)`). See `envelope.rs` for why
//!    that interval does not become empty, i.e. why the executed commands never
//!    break a limit whatever is proposed (checked by the proptests in
//!    `tests/properties.rs`);
//! 4. if the proposal is reachable inside that interval it is executed exactly;
//!    otherwise the gate steers toward it with a discrete braking curve (the
//!    largest acceleration in the interval from which a jerk-limited stop still
//!    lands on the proposal, found by bisection; see `Gate::track`), and records
//!    which bound the proposal broke. That approach is time-optimal up to a period
//!    or so and does not overshoot at any command period (`tests/gate_convergence.rs`).
//!
//! Like libfranka's `limitRate`, limits are enforced by rate limiting against the
//! previous commands; unlike it, the bounds are derived from braking rules, so the
//! velocity and position limits are approached without ever needing more jerk than
//! allowed.

use crate::action_filter::ActionFilter;
use crate::cartesian::CartesianFilter;
use crate::chunk::{JointVec, MAX_DOF};
pub use crate::constraint::{
    Constraint, GateMask, CONSTRAINT_COUNT, PERMISSION_BITS, SHAPING_BITS,
};
use crate::envelope::{
    bisect_max, pos_peak, pos_peak_bound, stop_peak, vel_peak, vel_peak_inverse,
};
use crate::executor::Setpoint;
use crate::io::Command;
use crate::limits::{JointLimit, JointLimits};
use crate::spline::Pva;

/// The last shaping stage that acted on a joint (the action filter runs after the
/// residual gate); `NonFinite` (a placeholder the permission gate overwrites when it
/// acts) where none did.
#[inline]
fn last_shaping(shaping: u32) -> Constraint {
    if shaping & Constraint::ToolSpeed.bit() != 0 {
        Constraint::ToolSpeed
    } else if shaping & Constraint::Approach.bit() != 0 {
        Constraint::Approach
    } else if shaping & Constraint::ActionFilter.bit() != 0 {
        Constraint::ActionFilter
    } else if shaping & Constraint::ResidualRegion.bit() != 0 {
        Constraint::ResidualRegion
    } else if shaping & Constraint::ResidualRate.bit() != 0 {
        Constraint::ResidualRate
    } else if shaping & Constraint::ResidualBound.bit() != 0 {
        Constraint::ResidualBound
    } else {
        Constraint::NonFinite
    }
}

/// One joint's interventions in one cycle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Intervention {
    /// Joint index.
    pub joint: u16,
    /// The binding constraint (the last one in the chain).
    pub constraint: Constraint,
    /// Every constraint that acted on this joint this cycle (`constraint` included).
    pub mask: GateMask,
    /// Proposed position.
    pub proposed_rad: f64,
    /// Executed position.
    pub executed_rad: f64,
}

/// Smallest jerk step / braking deceleration used, so a zero limit cannot divide by zero.
const TINY: f64 = 1e-12;

/// Commanded state of one joint (backward differences of the commands).
#[derive(Clone, Copy, Debug, Default)]
struct JointState {
    q: f64,
    v: f64,
    a: f64,
    /// The last command was the proposal itself (no rate intervention).
    on_track: bool,
}

/// Admissible interval of the next acceleration and what set each end.
struct Bounds {
    lo: f64,
    lo_by: Constraint,
    hi: f64,
    hi_by: Constraint,
}

/// Upper bound on `a'` for the upward direction; the lower bound is the mirror image.
/// `(lo_hard, hi_hard)` is the jerk/acceleration interval, `pos_hi` the upper
/// position limit (already shrunk by the margin).
fn upper_bound(
    s: &JointState,
    lo_hard: f64,
    hi_hard: f64,
    hi_by: Constraint,
    pos_hi: f64,
    lim: &JointLimit,
    t: f64,
) -> (f64, Constraint) {
    let d = (lim.max_jerk_rad_s3 * t).max(TINY);
    let b = lim.brake_acc_rad_s2.min(lim.max_acc_rad_s2).max(TINY);
    let v_max = lim.max_vel_rad_s;
    let (mut hi, mut by) = (hi_hard, hi_by);
    if vel_peak(s.v, hi, t, d) > v_max {
        hi = if vel_peak(s.v, lo_hard, t, d) > v_max {
            lo_hard
        } else {
            vel_peak_inverse(s.v, v_max, t, d).clamp(lo_hard, hi)
        };
        by = Constraint::Velocity;
    }
    if pos_peak_bound(s.q, s.v, hi, t, d, b) > pos_hi && pos_peak(s.q, s.v, hi, t, d, b) > pos_hi {
        hi = if pos_peak(s.q, s.v, lo_hard, t, d, b) > pos_hi {
            lo_hard
        } else {
            bisect_max(lo_hard, hi, |x| pos_peak(s.q, s.v, x, t, d, b) <= pos_hi)
        };
        by = Constraint::Braking;
    }
    (hi, by)
}

fn bounds(s: &JointState, lo_pos: f64, hi_pos: f64, lim: &JointLimit, t: f64) -> Bounds {
    let a_max = lim.max_acc_rad_s2;
    let d = lim.max_jerk_rad_s3 * t;
    let (hi_hard, hi_hard_by) = if s.a + d < a_max {
        (s.a + d, Constraint::Jerk)
    } else {
        (a_max, Constraint::Acceleration)
    };
    let (lo_hard, lo_hard_by) = if s.a - d > -a_max {
        (s.a - d, Constraint::Jerk)
    } else {
        (-a_max, Constraint::Acceleration)
    };
    // The state never leaves |a| <= A; should it (limits changed), jerk wins.
    let (lo_hard, hi_hard) = if lo_hard <= hi_hard {
        (lo_hard, hi_hard)
    } else {
        let m = s.a.clamp(-a_max, a_max).clamp(s.a - d, s.a + d);
        (m, m)
    };
    let (hi, hi_by) = upper_bound(s, lo_hard, hi_hard, hi_hard_by, hi_pos, lim, t);
    let mirrored = JointState {
        q: -s.q,
        v: -s.v,
        a: -s.a,
        on_track: s.on_track,
    };
    let (neg_lo, lo_by) = upper_bound(&mirrored, -hi_hard, -lo_hard, lo_hard_by, -lo_pos, lim, t);
    Bounds {
        lo: -neg_lo,
        lo_by,
        hi,
        hi_by,
    }
}

/// Whether `alpha` keeps every limit now and leaves a state from which the braking
/// rules keep them for ever (the predicates whose ends `bounds` bisects for).
fn admissible(
    s: &JointState,
    alpha: f64,
    lo_pos: f64,
    hi_pos: f64,
    lim: &JointLimit,
    t: f64,
) -> bool {
    let a_max = lim.max_acc_rad_s2;
    let d = (lim.max_jerk_rad_s3 * t).max(TINY);
    let b = lim.brake_acc_rad_s2.min(a_max).max(TINY);
    let v_max = lim.max_vel_rad_s;
    let pos_ok = |q: f64, v: f64, x: f64, limit: f64| {
        pos_peak_bound(q, v, x, t, d, b) <= limit || pos_peak(q, v, x, t, d, b) <= limit
    };
    alpha.abs() <= a_max
        && (alpha - s.a).abs() <= lim.max_jerk_rad_s3 * t
        && vel_peak(s.v, alpha, t, d) <= v_max
        && vel_peak(-s.v, -alpha, t, d) <= v_max
        && pos_ok(s.q, s.v, alpha, hi_pos)
        && pos_ok(-s.q, -s.v, -alpha, -lo_pos)
}

/// A proposal made finite: a non-finite position is replaced by the commanded one (and
/// its derivatives by 0), non-finite derivatives alone by 0 (they are only
/// feed-forward); the `NonFinite` bit when either happened.
#[inline]
fn sanitize(pd: f64, vd: f64, ad: f64, q: f64) -> (f64, f64, f64, u32) {
    if !pd.is_finite() {
        (q, 0.0, 0.0, Constraint::NonFinite.bit())
    } else if !vd.is_finite() || !ad.is_finite() {
        (pd, 0.0, 0.0, Constraint::NonFinite.bit())
    } else {
        (pd, vd, ad, 0)
    }
}

/// The admissible position range: the limits less their margin (the mid-point when
/// the margins overlap).
#[inline]
fn position_range(lim: &JointLimit) -> (f64, f64) {
    let lo = lim.pos_min_rad + lim.pos_margin_rad;
    let hi = lim.pos_max_rad - lim.pos_margin_rad;
    if lo > hi {
        let mid = 0.5 * (lim.pos_min_rad + lim.pos_max_rad);
        (mid, mid)
    } else {
        (lo, hi)
    }
}

/// The next acceleration of the quickest stop from `s`, in the gate's own discrete
/// model: the hardest braking (within the jerk and acceleration limits) that does not
/// reverse the motion once the acceleration is swung back to zero at full jerk
/// ([`vel_peak`], mirrored), kept inside the admissible interval. Applied every
/// period, this is the discrete time-optimal stop: full jerk into full braking, held,
/// then swung back so that velocity and acceleration reach zero together. Where the
/// commanded acceleration already reverses the motion, the reversal is braked in turn.
fn brake(s: &JointState, lo_pos: f64, hi_pos: f64, lim: &JointLimit, t: f64) -> f64 {
    let d = (lim.max_jerk_rad_s3 * t).max(TINY);
    let landing = if s.v > 0.0 {
        -vel_peak_inverse(-s.v, 0.0, t, d)
    } else {
        vel_peak_inverse(s.v, 0.0, t, d)
    };
    let b = bounds(s, lo_pos, hi_pos, lim, t);
    if b.lo > b.hi {
        0.5 * (b.lo + b.hi)
    } else {
        landing.clamp(b.lo, b.hi)
    }
}

/// Clamps every command (see the module docs).
pub struct Gate {
    limits: JointLimits,
    t: f64,
    state: [JointState; MAX_DOF],
    pending_domain: Option<Option<u16>>,
    interventions: [Intervention; MAX_DOF + 1],
    n_interventions: usize,
    counts: [u64; CONSTRAINT_COUNT],
    saturated: [Saturation; MAX_DOF],
    /// Speed-limit factor per joint from the thermal monitor (1: not derated).
    derate: [f64; MAX_DOF],
    /// The low-pass action filter on the proposal (`limits.action_filter_hz`).
    action_filter: Option<ActionFilter>,
    /// The jerk that keeps the torque slew-rate limit per joint (infinite: none).
    slew_jerk: [f64; MAX_DOF],
    /// This cycle's proposal went through [`Gate::shape`] already.
    shaped: bool,
    /// What the filter acted on in `shape` (the `ActionFilter` bit per joint) and
    /// the positions it was given.
    filter_bits: [u32; MAX_DOF],
    shaped_raw: JointVec,
    /// What the residual stage did to this cycle's proposal (its bits per joint), for
    /// the next `filter` to count ([`Gate::note_residual`]).
    residual_bits: [u32; MAX_DOF],
    /// The proposal before the residual stage acted (base + raw correction), per joint.
    residual_raw: JointVec,
    /// The Cartesian filter (`[cartesian]`) on the joints' step (boxed at load: the
    /// cycle moves the pointer, never the table).
    cartesian: Option<Box<CartesianFilter>>,
}

/// Gate passes after the first one with the Cartesian stage: where a joint cannot land
/// on the bounded step (off its track), the next pass bounds the step it took.
const CARTESIAN_PASSES: usize = 4;

/// Periods of the gate's stop previewed by the Cartesian stage ([`Gate::filter`]).
const STOP_PREVIEW: usize = 256;

/// Bounds on joint `s`'s travel and speed in the gate's stop: the speed, raised by what
/// its acceleration adds while swung to zero at full jerk (the peak), held over the
/// stop's time (acceleration swung to zero, the peak braked at the acceleration limit,
/// swung in and out again, a period each side).
fn stop_bound(s: &JointState, lim: &JointLimit, t: f64) -> (f64, f64) {
    let (a, j) = (lim.max_acc_rad_s2.max(TINY), lim.max_jerk_rad_s3.max(TINY));
    let peak = s.v.abs() + s.a * s.a / (2.0 * j);
    let time = s.a.abs() / j + peak / a + 2.0 * a / j + 2.0 * t;
    (peak * time, peak)
}

/// What a gate pass changes, to undo it ([`Gate::joints_cartesian`]).
struct Snapshot {
    state: [JointState; MAX_DOF],
    saturated: [Saturation; MAX_DOF],
    counts: [u64; CONSTRAINT_COUNT],
    n_interventions: usize,
}

/// How long a joint's command has differed from the proposal without a break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Saturation {
    /// Consecutive cycles in which the gate changed this joint's proposal (0: on track).
    pub cycles: u32,
    /// The binding constraint of the first cycle of that run.
    pub constraint: Constraint,
}

impl Default for Saturation {
    fn default() -> Self {
        Saturation {
            cycles: 0,
            constraint: Constraint::NonFinite,
        }
    }
}

impl Gate {
    /// A gate for `limits` at the given command period, starting at rest at `initial_pos`.
    ///
    /// `period_ns` must be positive (the config layer guarantees it; 0 is treated as 1 ns).
    pub fn new(limits: JointLimits, period_ns: u64, initial_pos: &JointVec) -> Self {
        let mut g = Gate {
            limits,
            t: period_ns.max(1) as f64 * 1e-9,
            state: [JointState::default(); MAX_DOF],
            pending_domain: None,
            interventions: [Intervention {
                joint: 0,
                constraint: Constraint::NonFinite,
                mask: GateMask(0),
                proposed_rad: 0.0,
                executed_rad: 0.0,
            }; MAX_DOF + 1],
            n_interventions: 0,
            counts: [0; CONSTRAINT_COUNT],
            saturated: [Saturation::default(); MAX_DOF],
            derate: [1.0; MAX_DOF],
            action_filter: None,
            slew_jerk: [f64::INFINITY; MAX_DOF],
            shaped: false,
            filter_bits: [0; MAX_DOF],
            shaped_raw: [0.0; MAX_DOF],
            residual_bits: [0; MAX_DOF],
            residual_raw: [0.0; MAX_DOF],
            cartesian: None,
        };
        g.resync(initial_pos);
        g
    }

    /// With the low-pass action filter at `cutoff_hz` (at most
    /// [`crate::action_filter::MAX_CUTOFF_HZ`]) on every proposal while the policy has
    /// authority; a stop bypasses it and it restarts from the commanded state.
    pub fn with_action_filter(mut self, cutoff_hz: Option<f64>) -> Self {
        self.action_filter = cutoff_hz.map(|fc| {
            let mut f = ActionFilter::new(fc, self.t, &[0.0; MAX_DOF]);
            f.reset_to(&self.commanded_state());
            f
        });
        self
    }

    /// With the torque slew-rate limit: per joint, the largest change of the commanded
    /// acceleration per second (`max_torque / (rise_time * inertia)`, rad/s^3) where it
    /// is below the jerk limit; it holds in a stop too.
    pub fn with_torque_slew(mut self, max_jerk_rad_s3: Option<JointVec>) -> Self {
        self.slew_jerk = max_jerk_rad_s3.unwrap_or([f64::INFINITY; MAX_DOF]);
        self
    }

    /// With the Cartesian filter (tool speed, approach envelope) on every proposal
    /// while the policy has authority, after the shaping stages; a stop bypasses it.
    pub fn with_cartesian(mut self, filter: Option<CartesianFilter>) -> Self {
        self.cartesian = filter.map(Box::new);
        self
    }

    /// The Cartesian filter, if any.
    pub fn cartesian(&self) -> Option<&CartesianFilter> {
        self.cartesian.as_deref()
    }

    /// Notes what the residual stage in front of the gate did to this cycle's proposal
    /// (`bits`: its constraints per joint; `raw_rad`: the proposal before it, base plus
    /// raw correction), for the next `filter` to count and record with the gate's own.
    pub fn note_residual(&mut self, bits: &[u32; MAX_DOF], raw_rad: &JointVec) {
        self.residual_bits = *bits;
        self.residual_raw = *raw_rad;
    }

    /// The action filter, when one is set.
    pub fn action_filter(&self) -> Option<&ActionFilter> {
        self.action_filter.as_ref()
    }

    /// Restarts from rest at `pos` (e.g. measured positions after the drives were
    /// stopped by a quick stop and re-enabled). Non-finite entries become 0.
    pub fn resync(&mut self, pos: &JointVec) {
        self.saturated = [Saturation::default(); MAX_DOF];
        for (s, p) in self.state.iter_mut().zip(pos.iter()) {
            *s = JointState {
                q: if p.is_finite() { *p } else { 0.0 },
                v: 0.0,
                a: 0.0,
                on_track: true,
            };
        }
        let rest = self.commanded_state();
        if let Some(f) = self.action_filter.as_mut() {
            f.reset_to(&rest);
        }
    }

    /// Scales joint `j`'s speed limit by `factor` and its acceleration limit by its
    /// square root (the thermal monitor's derating, in `(0, 1]`; 1 restores them).
    /// Where the derated speed limit binds, the intervention is `Thermal`. The gate
    /// slows the joint within its acceleration and jerk limits.
    pub fn set_derate(&mut self, j: usize, factor: f64) {
        if j < MAX_DOF {
            self.derate[j] = if factor > 0.0 { factor.min(1.0) } else { 1.0 };
        }
    }

    /// Marks that the support monitor found the observation outside the operating
    /// domain; the next `filter` reports the `Domain` bit and logs it (`joint`: the
    /// offending joint where known). The authority change itself is the executor's
    /// `force_fallback`.
    pub fn flag_out_of_domain(&mut self, joint: Option<u16>) {
        self.pending_domain = Some(joint);
    }

    fn record(&mut self, joint: usize, c: Constraint, bits: u32, proposed: f64, executed: f64) {
        if self.n_interventions < self.interventions.len() {
            self.interventions[self.n_interventions] = Intervention {
                joint: joint as u16,
                constraint: c,
                mask: GateMask(bits),
                proposed_rad: proposed,
                executed_rad: executed,
            };
            self.n_interventions += 1;
        }
    }

    /// Filters `proposed` into `cmd`; returns which constraints acted.
    ///
    /// Writes `cmd.pos_rad`, `cmd.vel_rad_s`, `cmd.dof` and `cmd.chunk_seq`; leaves
    /// `t_cmd` and `request` to the caller. No allocation.
    ///
    /// Per joint, in order: finite values (`sanitize`), the position range
    /// (`position_range`), the executor's stop (braking, not an intervention), the
    /// acceleration that keeps every limit (`acceleration`), one step, and the
    /// accounting of what acted (`account`).
    pub fn filter(&mut self, proposed: &Setpoint, cmd: &mut Command) -> GateMask {
        let dof = self.limits.dof.min(MAX_DOF);
        self.n_interventions = 0;
        let mut mask = self.report_domain(proposed);
        // Without a filter the proposal goes on as it is: no copy on the cycle's path.
        let mut shaped;
        let filtered = if self.action_filter.is_some() && !self.shaped {
            shaped = *proposed;
            self.shape(&mut shaped);
            &shaped
        } else {
            // Shaped in place by the caller already, or no filter (its bits stay 0).
            proposed
        };
        self.shaped = false;
        mask |= match self.cartesian.take() {
            Some(c) if !proposed.stop => {
                let m = self.joints_cartesian(&c, dof, filtered, cmd);
                self.cartesian = Some(c);
                m
            }
            other => {
                self.cartesian = other;
                self.joints(dof, filtered, filtered, &[0; MAX_DOF], cmd)
            }
        };
        self.residual_bits = [0; MAX_DOF];
        if proposed.stop {
            let now = self.commanded_state();
            if let Some(f) = self.action_filter.as_mut() {
                f.reset_to(&now);
            }
        }
        cmd.dof = dof as u16;
        cmd.chunk_seq = proposed.chunk_seq;
        GateMask(mask)
    }

    /// The action filter stage while the policy's authority is withdrawn (a stop, a
    /// hold): bypassed. The proposal goes to the gate as it is (the braking reference or
    /// the hold) and the filter restarts from the commanded state, so that it can add
    /// no motion now and starts where the commands are when the policy plays again.
    pub fn bypass_shaping(&mut self) {
        self.shaped = true;
        self.filter_bits = [0; MAX_DOF];
        let now = self.commanded_state();
        if let Some(f) = self.action_filter.as_mut() {
            f.reset_to(&now);
        }
    }

    /// The action filter stage, before [`Gate::filter`]: filters the proposal in
    /// place (no change without a filter, or in a stop) and notes on which joints it
    /// acted, for `filter` to count. The control loop calls it before the margin
    /// probe is added, so the recorded setpoint is the filtered one and the measured
    /// loop holds the filter's lag; `filter` calls it itself when it was not called.
    pub fn shape(&mut self, sp: &mut Setpoint) {
        self.shaped = true;
        self.filter_bits = [0; MAX_DOF];
        let Some(f) = self.action_filter.as_mut() else {
            return;
        };
        if sp.stop {
            return;
        }
        let raw = *sp;
        self.shaped_raw = raw.pos_rad;
        f.apply(sp);
        for (j, b) in self
            .filter_bits
            .iter_mut()
            .enumerate()
            .take((sp.dof as usize).min(MAX_DOF))
        {
            if f.acted(&raw, sp, j) {
                *b = Constraint::ActionFilter.bit();
            }
        }
    }

    /// Every joint through the gate toward `target` (`shaped`: the proposal before the
    /// Cartesian stage, whose positions are the raw ones where no earlier stage acted;
    /// `extra`: the Cartesian stage's bits per joint).
    fn joints(
        &mut self,
        dof: usize,
        target: &Setpoint,
        shaped: &Setpoint,
        extra: &[u32; MAX_DOF],
        cmd: &mut Command,
    ) -> u32 {
        let mut mask = 0;
        for (j, &cart) in extra.iter().enumerate().take(dof) {
            let rb = self.residual_bits[j];
            let fb = self.filter_bits[j];
            let raw = if rb != 0 {
                self.residual_raw[j]
            } else if fb != 0 {
                self.shaped_raw[j]
            } else {
                shaped.pos_rad[j]
            };
            mask |= self.filter_joint(j, target, raw, fb | rb | cart, cmd);
        }
        mask
    }

    /// The joints with the Cartesian stage: a first pass gives the step the joints'
    /// limits allow; the Cartesian filter bounds that step (from the commanded
    /// positions); where it changed it, the pass is undone and run again toward the
    /// bounded step (its velocity the step's, its acceleration 0). Bounding the gate's
    /// own step, not the proposal, is what keeps a joint that lags its proposal from
    /// turning the tool toward a surface. No allocation.
    fn joints_cartesian(
        &mut self,
        c: &CartesianFilter,
        dof: usize,
        shaped: &Setpoint,
        cmd: &mut Command,
    ) -> u32 {
        let before = self.snapshot();
        let mut mask = self.joints(dof, shaped, shaped, &[0; MAX_DOF], cmd);
        let mut from = [0.0; MAX_DOF];
        for (j, f) in from.iter_mut().enumerate().take(dof) {
            *f = before.state[j].q;
        }
        // The tool at the commanded pose, once a cycle for every pass and the preview.
        let jac = c.chain().tool_jacobian(&from);
        let mut bounded = *shaped;
        let mut extra = [0; MAX_DOF];
        for _ in 0..CARTESIAN_PASSES {
            let mut to = cmd.pos_rad;
            let bits = c.apply_at(&from, &jac, &mut to, self.t).bits();
            if bits == 0 {
                break;
            }
            self.restore(&before);
            for j in 0..dof {
                if to[j] != cmd.pos_rad[j] {
                    bounded.pos_rad[j] = to[j];
                    bounded.vel_rad_s[j] = (to[j] - from[j]) / self.t;
                    bounded.acc_rad_s2[j] = 0.0;
                    extra[j] |= bits;
                }
            }
            mask = self.joints(dof, &bounded, shaped, &extra, cmd);
        }
        if self.stop_keeps_out(c, jac.point, dof) {
            return mask;
        }
        // The step, or the stop after it, would cross a plane: brake instead. The stop
        // from the last command was previewed and kept out when that command was
        // accepted, and braking is that stop's first step.
        self.restore(&before);
        self.brake_cartesian(dof, shaped, cmd)
    }

    /// What a gate pass changes ([`Snapshot`]), to undo it.
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.state,
            saturated: self.saturated,
            counts: self.counts,
            n_interventions: self.n_interventions,
        }
    }

    /// Undoes the passes since `s` was taken.
    fn restore(&mut self, s: &Snapshot) {
        self.state = s.state;
        self.saturated = s.saturated;
        self.counts = s.counts;
        self.n_interventions = s.n_interventions;
    }

    /// Every joint brakes as in a stop; counted and recorded as the approach envelope's
    /// intervention.
    fn brake_cartesian(&mut self, dof: usize, shaped: &Setpoint, cmd: &mut Command) -> u32 {
        let braking = Setpoint {
            stop: true,
            ..*shaped
        };
        let bit = Constraint::Approach.bit();
        for j in 0..dof {
            self.filter_joint(j, &braking, shaped.pos_rad[j], 0, cmd);
            let q1 = self.state[j].q;
            self.account(j, bit, Constraint::Approach, shaped.pos_rad[j], q1);
        }
        bit
    }

    /// Whether the commanded step, from the tool point `from` (the last command's) to
    /// the state the gate is in now, and the gate's own stop after it keep every plane:
    /// the stop is previewed period by period (the braking `filter` does for a stop)
    /// until every joint rests, at most [`STOP_PREVIEW`] periods; not at rest by then
    /// counts as not kept. Ended early where bounds on the stop's travel and speed show
    /// no plane can be broken (`stop_is_clear`). No allocation.
    fn stop_keeps_out(
        &self,
        c: &CartesianFilter,
        from: crate::kinematics::Vec3,
        dof: usize,
    ) -> bool {
        let chain = c.chain();
        let mut q = [0.0; MAX_DOF];
        for (j, qj) in q.iter_mut().enumerate().take(dof) {
            *qj = self.state[j].q;
        }
        let mut prev = chain.tool_point(&q);
        if !c.keeps_out(from, prev, self.t) {
            return false;
        }
        let mut s = self.state;
        for _ in 0..STOP_PREVIEW {
            if self.stop_is_clear(c, &s, prev, dof) {
                return true;
            }
            let mut moving = false;
            for j in 0..dof {
                let mut lim = self.limits.joint[j];
                lim.max_jerk_rad_s3 = lim.max_jerk_rad_s3.min(self.slew_jerk[j]);
                let (lo, hi) = position_range(&lim);
                let alpha = brake(&s[j], lo, hi, &lim, self.t);
                let v1 = s[j].v + alpha * self.t;
                s[j] = JointState {
                    q: s[j].q + v1 * self.t,
                    v: v1,
                    a: alpha,
                    on_track: false,
                };
                q[j] = s[j].q;
                moving |= v1.abs() > TINY || alpha.abs() > TINY;
            }
            let p = chain.tool_point(&q);
            if !c.keeps_out(prev, p, self.t) {
                return false;
            }
            if !moving {
                return true;
            }
            prev = p;
        }
        false
    }

    /// Whether the rest of a stop from joint states `s` (tool at `p`) cannot break any
    /// plane, by bounds alone: per plane, the tool farther from it than the stop can
    /// carry the tool, or (a touched plane) the tool never faster than its touch speed.
    /// The bounds are `reach × (distance, speed)` of each joint's stop, with half again
    /// as margin.
    fn stop_is_clear(
        &self,
        c: &CartesianFilter,
        s: &[JointState; MAX_DOF],
        p: crate::kinematics::Vec3,
        dof: usize,
    ) -> bool {
        let chain = c.chain();
        let (mut travel, mut speed) = (0.0, 0.0);
        for (j, sj) in s.iter().enumerate().take(dof) {
            let (d, v) = stop_bound(sj, &self.limits.joint[j], self.t);
            travel += 1.5 * chain.reach(j) * d;
            speed += 1.5 * chain.reach(j) * v;
        }
        c.limits()
            .planes()
            .iter()
            .all(|pl| pl.distance(p) > travel || (pl.touch_m_s > 0.0 && speed <= pl.touch_m_s))
    }

    /// The `Domain` bit and its record when the support monitor flagged the observation.
    fn report_domain(&mut self, proposed: &Setpoint) -> u32 {
        let Some(joint) = self.pending_domain.take() else {
            return 0;
        };
        self.counts[Constraint::Domain as usize] += 1;
        let j = joint.map_or(0, |j| (j as usize).min(MAX_DOF - 1));
        let q = self.state[j].q;
        let bit = Constraint::Domain.bit();
        self.record(j, Constraint::Domain, bit, proposed.pos_rad[j], q);
        bit
    }

    /// One joint through the gate (`proposed` after the residual gate and the action
    /// filter, `raw` the position before them, `shaping` what they did, of
    /// [`SHAPING_BITS`]); returns the constraint bits that acted on it.
    #[inline]
    fn filter_joint(
        &mut self,
        j: usize,
        proposed: &Setpoint,
        raw: f64,
        shaping: u32,
        cmd: &mut Command,
    ) -> u32 {
        let mut lim = self.limits.joint[j];
        let derated = self.derate[j] < 1.0;
        // Speed by the factor, acceleration by its square root: the derated limits
        // still meet together (v >= a^2 / jerk), as the braking bounds assume.
        if derated {
            lim.max_vel_rad_s *= self.derate[j];
            lim.max_acc_rad_s2 *= self.derate[j].sqrt();
        }
        // The torque slew limit is a jerk limit (config checks it still meets the
        // speed and acceleration limits together).
        let slewed = self.slew_jerk[j] < lim.max_jerk_rad_s3;
        if slewed {
            lim.max_jerk_rad_s3 = self.slew_jerk[j];
        }
        let s = self.state[j];
        let (mut pd, mut vd, mut ad, mut bits) = sanitize(
            proposed.pos_rad[j],
            proposed.vel_rad_s[j],
            proposed.acc_rad_s2[j],
            s.q,
        );
        bits |= shaping;
        let mut last = last_shaping(shaping);
        let (lo, hi) = position_range(&lim);
        if pd > hi || pd < lo {
            bits |= Constraint::Position.bit();
            last = Constraint::Position;
            pd = pd.clamp(lo, hi);
            (vd, ad) = (0.0, 0.0);
        }
        if proposed.stop {
            // The executor has withdrawn the policy's authority: stop from the
            // commanded state, with the joint's full limits (a derated joint stops as
            // any other; the torque slew limit still holds). Not an intervention
            // (nothing proposed is changed).
            let mut stop_lim = self.limits.joint[j];
            stop_lim.max_jerk_rad_s3 = stop_lim.max_jerk_rad_s3.min(self.slew_jerk[j]);
            let alpha = brake(&s, lo, hi, &stop_lim, self.t);
            self.step(j, alpha, false, cmd);
            self.saturated[j].cycles = 0;
            return 0;
        }
        let (alpha, exact, mut acted) = self.acceleration(&s, pd, vd, ad, lo, hi, &lim);
        if derated && matches!(acted, Some(Constraint::Velocity | Constraint::Acceleration)) {
            acted = Some(Constraint::Thermal);
        }
        if slewed && acted == Some(Constraint::Jerk) {
            acted = Some(Constraint::TorqueSlew);
        }
        if let Some(c) = acted {
            bits |= c.bit();
            last = c;
        }
        let q1 = self.step(j, alpha, exact, cmd);
        cmd.vel_rad_s[j] = if bits & !SHAPING_BITS == 0 {
            vd.clamp(-lim.max_vel_rad_s, lim.max_vel_rad_s)
        } else {
            self.state[j].v
        };
        self.account(j, bits, last, raw, q1);
        bits
    }

    /// The acceleration for the next period: the one that lands on the proposal
    /// (`exact`) when that keeps every limit now and lets the joint stay on track, else
    /// the admissible one closest to tracking it, with the constraint that bound it.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn acceleration(
        &self,
        s: &JointState,
        pd: f64,
        vd: f64,
        ad: f64,
        lo: f64,
        hi: f64,
        lim: &JointLimit,
    ) -> (f64, bool, Option<Constraint>) {
        let t = self.t;
        let alpha_dead = ((pd - s.q) / t - s.v) / t;
        // Off track, rejoin only where the next period's catch-up (velocity
        // matched too) and the return to the proposal's own acceleration after it
        // are also within the limits; otherwise a one-period position match leaves
        // a velocity or acceleration mismatch that kicks back out (a wobble).
        let rejoin_ok = s.on_track || {
            let v1 = s.v + alpha_dead * t;
            let alpha_next = (vd + 0.5 * ad * t - v1) / t;
            let d = lim.max_jerk_rad_s3 * t;
            (alpha_next - alpha_dead).abs() <= d
                && (ad - alpha_next).abs() <= d
                && alpha_next.abs() <= lim.max_acc_rad_s2
        };
        // The common case costs one evaluation of each safety predicate; the
        // interval's ends (bisection) are only needed when the proposal fails one.
        if rejoin_ok && admissible(s, alpha_dead, lo, hi, lim, t) {
            return (alpha_dead, true, None);
        }
        let b = bounds(s, lo, hi, lim, t);
        if b.lo > b.hi {
            // Only reachable with degenerate limits (e.g. a position range
            // shorter than a braking distance); keep jerk and acceleration.
            return (0.5 * (b.lo + b.hi), false, Some(Constraint::Braking));
        }
        let by = if alpha_dead > b.hi {
            b.hi_by
        } else if alpha_dead < b.lo {
            b.lo_by
        } else {
            Constraint::Jerk // admissible now, but rejoining breaks it next
        };
        let alpha = self.track(s, pd, vd, ad, lim, &b).clamp(b.lo, b.hi);
        (alpha, false, Some(by))
    }

    /// Counts and records what acted on joint `j` this cycle, and its saturation run.
    #[inline]
    fn account(&mut self, j: usize, bits: u32, last: Constraint, raw: f64, q1: f64) {
        if bits == 0 {
            self.saturated[j].cycles = 0;
            return;
        }
        for c in Constraint::ALL {
            if bits & c.bit() != 0 {
                self.counts[c as usize] += 1;
            }
        }
        self.record(j, last, bits, raw, q1);
        if bits & !SHAPING_BITS == 0 {
            // The filter and the residual gate are meant to act: not a command held
            // off the proposal.
            self.saturated[j].cycles = 0;
            return;
        }
        if self.saturated[j].cycles == 0 {
            self.saturated[j].constraint = last;
        }
        self.saturated[j].cycles = self.saturated[j].cycles.saturating_add(1);
    }

    /// Advances joint `j` by one period with acceleration `alpha`; writes the command.
    fn step(&mut self, j: usize, alpha: f64, on_track: bool, cmd: &mut Command) -> f64 {
        let s = self.state[j];
        let v1 = s.v + alpha * self.t;
        let q1 = s.q + v1 * self.t;
        self.state[j] = JointState {
            q: q1,
            v: v1,
            a: alpha,
            on_track,
        };
        cmd.pos_rad[j] = q1;
        cmd.vel_rad_s[j] = v1;
        q1
    }

    /// Acceleration that steers toward the proposal when it cannot be reached in one
    /// period: a discrete time-optimal (bang-bang) approach in the frame of the
    /// proposal, restricted to the admissible interval `[lo, hi]`.
    ///
    /// The proposal is taken to continue at its own velocity and acceleration, so
    /// the tracking error `e = q - p` is again a discrete triple integrator whose
    /// acceleration is `a' - ad`. When the error is negative the chosen `a'` is the
    /// largest admissible one from which a jerk-limited stop of the error
    /// ([`stop_peak`]: acceleration swung toward `-ae` by `J t` per period, held,
    /// then swung back to zero so that it ends at rest) still ends at or below zero
    /// error; the mirror image when it is positive. That is a braking curve in
    /// discrete time: full acceleration while there is room, then exactly as much
    /// braking as lands on the proposal. `stop_peak` is monotone in `a'`, so a
    /// bounded bisection (16 halvings) finds that acceleration, erring on the side of
    /// stopping short: no overshoot, whatever the period. Where even the hardest
    /// admissible braking crosses, it brakes as hard as allowed.
    ///
    /// The approach brakes at the full acceleration limit (less what the proposal's
    /// own acceleration uses), not at `brake_acc`: that one only shapes the
    /// position-limit envelope, which `[lo, hi]` already contains.
    fn track(
        &self,
        s: &JointState,
        pd: f64,
        vd: f64,
        ad: f64,
        lim: &JointLimit,
        b: &Bounds,
    ) -> f64 {
        let t = self.t;
        let a_max = lim.max_acc_rad_s2.max(TINY);
        let d = (lim.max_jerk_rad_s3 * t).max(TINY);
        // Authority left beside the proposal's own acceleration (a floor keeps an
        // infeasible proposal from freezing the approach).
        let ae = (a_max - ad.abs()).max(0.1 * a_max);
        // The proposal in the gate's discrete terms: a backward-difference velocity
        // lags the instantaneous one by half a period.
        let vdd = vd - 0.5 * ad * t;
        // Error now (`e0`) and its velocity "one period back" (`ev0`), chosen so that
        // stepping it with error acceleration `x - ad` gives the error after this
        // period: the same convention as `stop_peak`'s `(q, v, alpha)`.
        let e0 = s.q + vdd * t - pd;
        let ev0 = s.v - vdd + ad * t;
        let above = |x: f64| stop_peak(e0, ev0, x - ad, t, d, ae);
        let below = |x: f64| -stop_peak(-e0, -ev0, ad - x, t, d, ae);
        // Even the most upward acceleration ends below the proposal (approach from
        // below), or even the most downward one ends above it (from above). A
        // previous period's bisection leaves the hardest braking landing exactly on
        // the proposal; rounding must not read that as an unavoidable crossing.
        let eps = 1e-12 * (1.0 + pd.abs());
        let ends_below = below(b.hi) < -eps;
        let ends_above = above(b.lo) > eps;
        let from_below = match (ends_below, ends_above) {
            (true, false) => true,
            (false, true) => false,
            // Crossing is unavoidable: brake the motion as hard as allowed.
            (true, true) => {
                return if ev0 + (s.a - ad) * t > 0.0 {
                    b.lo
                } else {
                    b.hi
                }
            }
            // Either side can still be kept: stay on the side the error is on now.
            (false, false) => e0 < 0.0,
        };
        if from_below {
            if above(b.hi) <= 0.0 {
                b.hi
            } else {
                bisect_max(b.lo, b.hi, |x| above(x) <= 0.0)
            }
        } else if below(b.lo) >= 0.0 {
            b.lo
        } else {
            -bisect_max(-b.hi, -b.lo, |y| below(-y) >= 0.0)
        }
    }

    /// Interventions of the last `filter` call.
    pub fn interventions(&self) -> &[Intervention] {
        &self.interventions[..self.n_interventions]
    }

    /// Interventions per constraint so far (one per joint and cycle).
    pub fn counts(&self) -> &[u64; CONSTRAINT_COUNT] {
        &self.counts
    }

    /// The limits enforced.
    pub fn limits(&self) -> &JointLimits {
        &self.limits
    }

    /// The last executed command's position, velocity and acceleration of `joint`
    /// (backward differences), e.g. to seed a fallback from what was really sent.
    pub fn commanded(&self, joint: usize) -> (f64, f64, f64) {
        let s = self.state[joint.min(MAX_DOF - 1)];
        (s.q, s.v, s.a)
    }

    /// The commanded state at the instant of the last command, for planning what
    /// follows it (the fallback's stop): per joint, the quadratic through the last
    /// three commanded positions evaluated at the last one, i.e. position `q`,
    /// velocity `v + a t / 2` (the backward difference lags it by half a period) and
    /// acceleration `a`. A trajectory that starts from this state and is sampled at
    /// the command period continues the command stream with no step in its second
    /// differences.
    pub fn commanded_state(&self) -> Pva {
        let mut out = Pva::default();
        for j in 0..self.limits.dof.min(MAX_DOF) {
            let s = self.state[j];
            out.pos_rad[j] = s.q;
            out.vel_rad_s[j] = s.v + 0.5 * s.a * self.t;
            out.acc_rad_s2[j] = s.a;
        }
        out
    }

    /// How long each joint's command has been held off the proposal (see [`Saturation`]).
    pub fn saturation(&self, joint: usize) -> Saturation {
        self.saturated[joint.min(MAX_DOF - 1)]
    }
}
