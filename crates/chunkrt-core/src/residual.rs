//! The residual stage: a learned correction added to the frozen base policy's proposal.
//!
//! A residual policy (its own model, bound to the base's digest) returns a correction
//! chunk for each base chunk. On the control thread the correction passes this stage
//! before it is added to the base's setpoint, ahead of the action filter and the
//! permission gate (the first stage of the command path: proposal = base + residual):
//! 1. **activity region**: the correction's target is the residual chunk's value times
//!    the region's weight `w` in `[0, 1]`, 0 outside a box of joint positions and 1
//!    inside it deeper than `fade_rad`, the product over joints of the quintic
//!    smoothstep of the depth (`ResidualRegion` where `w < 1` held a correction back).
//!    The weight is taken on the base's setpoint;
//! 2. **bound, rate, acceleration and jerk**: the applied correction follows that target
//!    as a virtual joint through the permission gate's own discrete limiter
//!    ([`Gate`]) with `±bound_rad` as its position range and `rate_rad_s`,
//!    `acc_rad_s2`, `jerk_rad_s3` as its limits (`ResidualBound` where the bound held
//!    it, `ResidualRate` where the rate, acceleration or jerk did). The gate's
//!    guarantees (its proptests) carry over: the correction never leaves its bound and
//!    its velocity, acceleration and jerk (backward differences) never exceed their
//!    limits, so a correction that sets in or goes away is as smooth as the motion it
//!    rides on, and the permission gate has no step to catch. A correction that loses
//!    its chunk (the reset planner plays, the chunk has no residual, the residual is
//!    rolled back, the base leaves the region) goes to zero within the same limits.
//!
//! **A withdrawal bypasses it.** Once the policy's authority is withdrawn (the executor
//! leaves `Playing`: a stop, a hold), [`ResidualGate::apply`] adds nothing and the
//! correction restarts from zero: the executor's stop brakes the commanded state (which
//! already holds the correction the arm was given) and its hold holds that state, and
//! nothing here may add motion to either. When the policy plays again the correction
//! sets in from zero within its limits.
//!
//! Velocity and acceleration feed-forward get the correction's own (the limiter's
//! commanded state) wherever it is not zero. Nothing here allocates.

use crate::blend::smoothstep5;
use crate::chunk::{Chunk, JointVec, MAX_DOF};
use crate::constraint::Constraint;
use crate::executor::Setpoint;
use crate::gate::Gate;
use crate::io::Command;
use crate::limits::{JointLimit, JointLimits};
use crate::spline::{ChunkSpline, Pva};
use crate::time::MonoTime;

/// A box of joint positions with a fade band inside its faces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActivityRegion {
    /// Lower corner (rad).
    pub lo_rad: JointVec,
    /// Upper corner (rad).
    pub hi_rad: JointVec,
    /// Depth over which the weight rises from 0 at a face to 1 (rad, > 0).
    pub fade_rad: f64,
}

impl ActivityRegion {
    /// The weight at joint positions `q` (first `dof` joints): 0 outside (and for a
    /// non-finite position), 1 deeper than `fade_rad` inside every face, the product of
    /// the faces' quintic smoothsteps between.
    pub fn weight(&self, q: &JointVec, dof: usize) -> f64 {
        let fade = self.fade_rad.max(f64::MIN_POSITIVE);
        let mut w = 1.0;
        let faces = self.lo_rad.iter().zip(&self.hi_rad);
        for (q, (lo, hi)) in q.iter().zip(faces).take(dof.min(MAX_DOF)) {
            let depth = (q - lo).min(hi - q);
            if depth.is_nan() || depth <= 0.0 {
                return 0.0;
            }
            if depth < fade {
                w *= smoothstep5(depth / fade).0;
            }
        }
        w
    }
}

/// The residual stage's limits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResidualLimits {
    /// Joints.
    pub dof: usize,
    /// Largest correction per joint (rad, >= 0).
    pub bound_rad: JointVec,
    /// Largest speed of the correction per joint (rad/s, > 0).
    pub rate_rad_s: JointVec,
    /// Largest acceleration of the correction per joint (rad/s², > 0).
    pub acc_rad_s2: JointVec,
    /// Largest jerk of the correction per joint (rad/s³, > 0).
    pub jerk_rad_s3: JointVec,
    /// Where the correction may act (`None`: everywhere).
    pub region: Option<ActivityRegion>,
}

impl ResidualLimits {
    /// The correction of each joint as a virtual joint of the permission gate's limiter:
    /// its bound as the position range (no margin), its rate, acceleration and jerk as
    /// the limits, braking at its acceleration limit.
    fn as_joint_limits(&self) -> JointLimits {
        let dof = self.dof.min(MAX_DOF);
        let mut out = JointLimits::uniform(dof, JointLimit::default());
        for (j, l) in out.joint.iter_mut().enumerate().take(dof) {
            let b = self.bound_rad[j].max(0.0);
            let acc = self.acc_rad_s2[j].max(0.0);
            *l = JointLimit {
                pos_min_rad: -b,
                pos_max_rad: b,
                pos_margin_rad: 0.0,
                max_vel_rad_s: self.rate_rad_s[j].max(0.0),
                max_acc_rad_s2: acc,
                max_jerk_rad_s3: self.jerk_rad_s3[j].max(0.0),
                brake_acc_rad_s2: acc,
            };
        }
        out
    }
}

/// Who has the arm this cycle, as the residual stage sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authority {
    /// The policy plays: the correction follows the residual's chunk.
    Policy,
    /// The executor plays under authority, but not the policy (the reset planner between
    /// episodes): the correction goes to zero within its limits.
    Planner,
    /// Authority withdrawn (a stop, a hold): no correction at all; it restarts from zero.
    Withdrawn,
}

/// The residual's state on the control thread (see the module docs).
pub struct ResidualGate {
    lim: ResidualLimits,
    /// The newest residual chunk accepted, as a spline.
    spline: ChunkSpline,
    has_chunk: bool,
    /// Rolled back: the residual has lost authority for the rest of the run.
    withdrawn: bool,
    /// The correction per joint as a virtual joint (see [`ResidualLimits`]).
    limiter: Gate,
    /// The limiter's proposal (the weighted target) and command, kept to reuse.
    target: Setpoint,
    out: Command,
    /// The correction added to the base this cycle: the limiter's commanded state.
    applied: Pva,
    /// The raw correction sampled this cycle (0 where none).
    raw: JointVec,
    /// The region's weight this cycle.
    weight: f64,
    /// The residual constraints that acted this cycle, per joint.
    bits: [u32; MAX_DOF],
    /// Residual chunks refused (non-finite, wrong joints, empty).
    refused: u64,
}

impl ResidualGate {
    /// At zero correction, for a loop of `period_ns`.
    pub fn new(lim: ResidualLimits, period_ns: u64) -> Self {
        let dof = lim.dof.min(MAX_DOF);
        ResidualGate {
            lim,
            spline: ChunkSpline::default(),
            has_chunk: false,
            withdrawn: false,
            limiter: Gate::new(lim.as_joint_limits(), period_ns, &[0.0; MAX_DOF]),
            target: Setpoint {
                dof: dof as u16,
                ..Setpoint::default()
            },
            out: Command::default(),
            applied: Pva::default(),
            raw: [0.0; MAX_DOF],
            weight: 0.0,
            bits: [0; MAX_DOF],
            refused: 0,
        }
    }

    /// The limits.
    pub fn limits(&self) -> &ResidualLimits {
        &self.lim
    }

    /// Takes `chunk` as the correction for the base chunk just accepted. A chunk with
    /// non-finite values, other joints or no setpoint is refused (returns `false`) and
    /// the correction goes to zero.
    pub fn offer(&mut self, chunk: &Chunk) -> bool {
        let n = chunk.len as usize;
        let dof = self.lim.dof.min(MAX_DOF);
        let ok = n > 0
            && n <= chunk.pos_rad.len()
            && chunk.dof as usize == dof
            && chunk.pos_rad[..n]
                .iter()
                .all(|row| row[..dof].iter().all(|x| x.is_finite()));
        if ok {
            self.spline.rebuild(chunk);
        } else {
            self.refused += 1;
        }
        self.has_chunk = ok;
        ok
    }

    /// The base chunk just accepted has no correction: the correction goes to zero.
    pub fn clear(&mut self) {
        self.has_chunk = false;
    }

    /// Rolls the residual back: it loses authority for the rest of the run (its
    /// correction goes to zero within its limits).
    pub fn withdraw(&mut self) {
        self.withdrawn = true;
        self.has_chunk = false;
    }

    /// Whether the residual was rolled back.
    pub fn withdrawn(&self) -> bool {
        self.withdrawn
    }

    /// Restarts at zero correction, at rest (authority withdrawn; the gate
    /// resynchronised after a stop).
    pub fn reset(&mut self) {
        self.limiter.resync(&[0.0; MAX_DOF]);
        self.applied = Pva::default();
        self.raw = [0.0; MAX_DOF];
        self.weight = 0.0;
        self.bits = [0; MAX_DOF];
    }

    /// Adds the correction for the setpoint of sample time `t` to `sp` (the base's).
    /// With the authority withdrawn (or a stop in `sp`) it adds nothing and restarts
    /// from zero; for the reset planner its target is zero. Where the applied correction
    /// is zero (and at rest) the setpoint is left untouched.
    pub fn apply(&mut self, t: MonoTime, authority: Authority, sp: &mut Setpoint) {
        if authority == Authority::Withdrawn || sp.stop {
            self.reset();
            return;
        }
        let dof = self.lim.dof.min(MAX_DOF).min(sp.dof as usize);
        let active = authority == Authority::Policy && self.has_chunk && !self.withdrawn;
        self.sample(t, active, &sp.pos_rad, dof);
        self.limiter.filter(&self.target, &mut self.out);
        self.applied = self.limiter.commanded_state();
        self.settle_at_zero(dof);
        self.account(active, dof);
        for j in 0..dof {
            let (p, v, a) = (
                self.applied.pos_rad[j],
                self.applied.vel_rad_s[j],
                self.applied.acc_rad_s2[j],
            );
            // Zero correction at rest (outside the region, none held): the base exactly,
            // its feed-forward too.
            if p != 0.0 || v != 0.0 || a != 0.0 {
                sp.pos_rad[j] += p;
                sp.vel_rad_s[j] += v;
                sp.acc_rad_s2[j] += a;
            }
        }
    }

    /// A correction heading for zero ends exactly there: the limiter's braking lands on
    /// its target to rounding (1e-219 was seen), and the base should be exact again.
    fn settle_at_zero(&mut self, dof: usize) {
        let a = &self.applied;
        let resting = (0..dof).all(|j| {
            self.target.pos_rad[j] == 0.0
                && a.pos_rad[j].abs() < 1e-12
                && a.vel_rad_s[j].abs() < 1e-9
                && a.acc_rad_s2[j].abs() < 1e-6
        });
        if resting && a.pos_rad[..dof].iter().any(|p| *p != 0.0) {
            self.limiter.resync(&[0.0; MAX_DOF]);
            self.applied = Pva::default();
        }
    }

    /// The raw correction at `t` (none unless `active`) and the limiter's target: the
    /// raw correction times the region's weight at the base's positions `base_rad`.
    fn sample(&mut self, t: MonoTime, active: bool, base_rad: &JointVec, dof: usize) {
        let mut p = Pva::default();
        if active {
            let tc = t.max(self.spline.t_start).min(self.spline.t_end());
            self.spline.eval(tc, &mut p);
            if tc != t {
                // Held at the chunk's end (or start): a constant, no feed-forward.
                p.vel_rad_s = [0.0; MAX_DOF];
                p.acc_rad_s2 = [0.0; MAX_DOF];
            }
        }
        self.raw = p.pos_rad;
        self.weight = match self.lim.region {
            Some(r) => r.weight(base_rad, dof),
            None => 1.0,
        };
        let w = self.weight;
        for j in 0..dof {
            self.target.pos_rad[j] = w * p.pos_rad[j];
            self.target.vel_rad_s[j] = w * p.vel_rad_s[j];
            self.target.acc_rad_s2[j] = w * p.acc_rad_s2[j];
        }
    }

    /// This cycle's residual constraints per joint, from what the limiter did (only
    /// while the correction follows a chunk: going to zero is not an intervention).
    fn account(&mut self, active: bool, dof: usize) {
        self.bits = [0; MAX_DOF];
        if !active {
            return;
        }
        const RATE: u32 = Constraint::Velocity.bit()
            | Constraint::Acceleration.bit()
            | Constraint::Jerk.bit()
            | Constraint::Braking.bit();
        for iv in self.limiter.interventions() {
            let j = iv.joint as usize;
            if j >= dof {
                continue;
            }
            if iv.mask.0 & Constraint::Position.bit() != 0 {
                self.bits[j] |= Constraint::ResidualBound.bit();
            }
            if iv.mask.0 & RATE != 0 {
                self.bits[j] |= Constraint::ResidualRate.bit();
            }
        }
        if self.weight < 1.0 {
            for j in 0..dof {
                if self.raw[j] != 0.0 {
                    self.bits[j] |= Constraint::ResidualRegion.bit();
                }
            }
        }
    }

    /// The correction added this cycle (position, and its velocity and acceleration).
    pub fn applied(&self) -> &Pva {
        &self.applied
    }

    /// The raw correction the residual chunk proposed this cycle (0 without authority).
    pub fn raw(&self) -> &JointVec {
        &self.raw
    }

    /// The region's weight this cycle.
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// The residual constraints that acted on each joint this cycle.
    pub fn bits(&self) -> &[u32; MAX_DOF] {
        &self.bits
    }

    /// Residual chunks refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(region: Option<ActivityRegion>) -> ResidualLimits {
        ResidualLimits {
            dof: 2,
            bound_rad: [0.1; MAX_DOF],
            rate_rad_s: [1.0; MAX_DOF],
            acc_rad_s2: [20.0; MAX_DOF],
            jerk_rad_s3: [1000.0; MAX_DOF],
            region,
        }
    }

    fn constant_chunk(v: f64) -> Chunk {
        let mut c = Chunk {
            seq: 1,
            len: 4,
            dof: 2,
            dt_ns: 20_000_000,
            ..Chunk::default()
        };
        for row in c.pos_rad.iter_mut().take(4) {
            row[0] = v;
            row[1] = -v;
        }
        c
    }

    fn setpoint(q: f64) -> Setpoint {
        let mut sp = Setpoint {
            dof: 2,
            ..Setpoint::default()
        };
        sp.pos_rad[0] = q;
        sp.pos_rad[1] = q;
        sp
    }

    /// Runs `cycles` cycles of 10 ms from cycle `k0` with the base at `q`; the applied
    /// corrections of joint 0.
    fn run(g: &mut ResidualGate, k0: u64, cycles: u64, who: Authority, q: f64) -> Vec<f64> {
        (k0..k0 + cycles)
            .map(|k| {
                let mut sp = setpoint(q);
                g.apply(MonoTime::from_ns(k * 10_000_000), who, &mut sp);
                sp.pos_rad[0] - q
            })
            .collect()
    }

    /// Speed, acceleration and jerk of a correction sampled every `t` s (finite
    /// differences), the largest of each.
    fn derivatives(r: &[f64], t: f64) -> (f64, f64, f64) {
        let d = |x: &[f64]| x.windows(2).map(|w| (w[1] - w[0]) / t).collect::<Vec<_>>();
        let (v, a) = (d(r), d(&d(r)));
        let j = d(&a);
        let max = |x: &[f64]| x.iter().fold(0.0f64, |m, y| m.max(y.abs()));
        (max(&v), max(&a), max(&j))
    }

    #[test]
    fn an_absurd_correction_is_bounded_and_rises_within_its_rate_acceleration_and_jerk() {
        let mut g = ResidualGate::new(lim(None), 10_000_000);
        assert!(g.offer(&constant_chunk(50.0)));
        let mut r = vec![0.0, 0.0];
        r.extend(run(&mut g, 0, 60, Authority::Policy, 0.3));
        assert!(r.iter().all(|x| *x <= 0.1 + 1e-12), "{r:?}");
        let (v, a, j) = derivatives(&r, 0.01);
        assert!(
            v <= 1.0 + 1e-9 && a <= 20.0 + 1e-6 && j <= 1000.0 + 1e-3,
            "{v} {a} {j}"
        );
        assert!((r.last().unwrap() - 0.1).abs() < 1e-12);
        assert!(g.bits()[0] & Constraint::ResidualBound.bit() != 0);
        assert!((g.applied().pos_rad[1] + 0.1).abs() < 1e-12);
    }

    #[test]
    fn outside_the_region_the_correction_leaves_within_its_limits_then_the_base_is_exact() {
        let region = ActivityRegion {
            lo_rad: [-0.5; MAX_DOF],
            hi_rad: [0.5; MAX_DOF],
            fade_rad: 0.1,
        };
        let mut g = ResidualGate::new(lim(Some(region)), 10_000_000);
        assert!(g.offer(&constant_chunk(0.05)));
        let inside = run(&mut g, 0, 40, Authority::Policy, 0.0);
        assert!((inside.last().unwrap() - 0.05).abs() < 1e-12);
        // The base leaves the box: the correction goes to zero, smoothly.
        let mut r = inside[inside.len() - 3..].to_vec();
        r.extend(run(&mut g, 40, 40, Authority::Policy, 0.7));
        let (v, a, j) = derivatives(&r, 0.01);
        assert!(
            v <= 1.0 + 1e-9 && a <= 20.0 + 1e-6 && j <= 1000.0 + 1e-3,
            "{v} {a} {j}"
        );
        assert_eq!(*r.last().unwrap(), 0.0);
        let base = setpoint(0.7);
        let mut sp = base;
        g.apply(MonoTime::from_ns(800_000_000), Authority::Policy, &mut sp);
        assert_eq!(sp, base);
        assert!(g.bits()[0] & Constraint::ResidualRegion.bit() != 0);
        // In the fade band: the weighted target, reached once the limiter settles.
        let r = run(&mut g, 81, 40, Authority::Policy, 0.45);
        let w = smoothstep5(0.5).0 * smoothstep5(0.5).0;
        assert!((g.weight() - w).abs() < 1e-12);
        assert!((r.last().unwrap() - w * 0.05).abs() < 1e-12);
    }

    #[test]
    fn a_non_finite_chunk_is_refused_and_the_correction_leaves_within_its_limits() {
        let mut g = ResidualGate::new(lim(None), 10_000_000);
        assert!(g.offer(&constant_chunk(0.1)));
        let mut r = run(&mut g, 0, 40, Authority::Policy, 0.0);
        let mut bad = constant_chunk(0.1);
        bad.pos_rad[2][1] = f64::NAN;
        assert!(!g.offer(&bad));
        assert_eq!(g.refused(), 1);
        r.extend(run(&mut g, 40, 40, Authority::Policy, 0.0));
        assert!(r[40] < 0.1 && r[40] > 0.09, "{}", r[40]);
        let (v, a, j) = derivatives(&r, 0.01);
        assert!(
            v <= 1.0 + 1e-9 && a <= 20.0 + 1e-6 && j <= 1000.0 + 1e-3,
            "{v} {a} {j}"
        );
        assert_eq!(*r.last().unwrap(), 0.0);
    }

    /// The defect of issue 56: the hold point already holds the correction; a correction
    /// still added while withdrawn moved the arm past the stop and back.
    #[test]
    fn withdrawn_it_adds_nothing_and_sets_in_again_from_zero() {
        let mut g = ResidualGate::new(lim(None), 10_000_000);
        assert!(g.offer(&constant_chunk(0.05)));
        run(&mut g, 0, 40, Authority::Policy, 0.2);
        for k in 40..80 {
            let base = setpoint(0.25);
            let mut sp = base;
            g.apply(
                MonoTime::from_ns(k * 10_000_000),
                Authority::Withdrawn,
                &mut sp,
            );
            assert_eq!(sp, base, "cycle {k}");
            assert_eq!(g.applied().pos_rad[0], 0.0);
        }
        // A stop in the setpoint is a withdrawal too, whatever the authority says.
        let mut sp = setpoint(0.25);
        sp.stop = true;
        let base = sp;
        g.apply(MonoTime::from_ns(800_000_000), Authority::Policy, &mut sp);
        assert_eq!(sp, base);
        // Playing again: from zero, within its limits.
        let mut r = vec![0.0, 0.0];
        r.extend(run(&mut g, 81, 40, Authority::Policy, 0.25));
        let (v, a, j) = derivatives(&r, 0.01);
        assert!(
            v <= 1.0 + 1e-9 && a <= 20.0 + 1e-6 && j <= 1000.0 + 1e-3,
            "{v} {a} {j}"
        );
        assert!(r[2] > 0.0 && r[2] <= 1000.0 * 1e-6 + 1e-12, "{}", r[2]);
        // The reset planner in the policy's place: the correction leaves, smoothly.
        let mut r2 = r[r.len() - 3..].to_vec();
        r2.extend(run(&mut g, 121, 40, Authority::Planner, 0.25));
        let (v, a, j) = derivatives(&r2, 0.01);
        assert!(
            v <= 1.0 + 1e-9 && a <= 20.0 + 1e-6 && j <= 1000.0 + 1e-3,
            "{v} {a} {j}"
        );
        assert_eq!(*r2.last().unwrap(), 0.0);
    }
}
