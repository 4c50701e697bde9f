//! The residual gate: a learned correction added to the frozen base policy's proposal.
//!
//! A residual policy (its own model, bound to the base's digest) returns a correction
//! chunk for each base chunk. On the control thread the correction passes this gate
//! before it is added to the base's setpoint, ahead of the action filter and the
//! permission gate:
//! 1. **bound**: each joint's correction clamped to `±bound_rad` (`ResidualBound`);
//! 2. **rate**: its change per period to `rate_rad_s · Δt` (`ResidualRate`); a
//!    correction that loses authority (the policy stops playing, the chunk has no
//!    residual, the residual is rolled back) goes to zero at this rate, never at once;
//! 3. **activity region**: multiplied by the region's weight `w` in `[0, 1]`, 0 outside
//!    a box of joint positions and 1 inside it deeper than `fade_rad`, the product over
//!    joints of the quintic smoothstep of the depth (`ResidualRegion` where `w < 1` held
//!    a correction back). The weight is taken on the base's setpoint, a C2 trajectory,
//!    so the fade is C2 in time; outside the box the proposal is exactly the base's.
//!
//! The applied correction is therefore within `bound_rad` of zero always, and zero
//! outside the region. Velocity and acceleration feed-forward get the correction's
//! backward differences (the gate's own discrete model) wherever the correction is not
//! zero. Nothing here allocates.

use crate::blend::smoothstep5;
use crate::chunk::{Chunk, JointVec, MAX_DOF};
use crate::constraint::Constraint;
use crate::executor::Setpoint;
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

/// The residual gate's limits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResidualLimits {
    /// Joints.
    pub dof: usize,
    /// Largest correction per joint (rad, >= 0).
    pub bound_rad: JointVec,
    /// Largest change of the correction per joint (rad/s, >= 0).
    pub rate_rad_s: JointVec,
    /// Where the correction may act (`None`: everywhere).
    pub region: Option<ActivityRegion>,
}

/// The residual's state on the control thread (see the module docs).
#[derive(Clone, Debug)]
pub struct ResidualGate {
    lim: ResidualLimits,
    /// The period (s).
    t: f64,
    /// The newest residual chunk accepted, as a spline.
    spline: ChunkSpline,
    has_chunk: bool,
    /// Rolled back: the residual has lost authority for the rest of the run.
    withdrawn: bool,
    /// The bounded, rate-limited correction (before the region's weight).
    held: JointVec,
    /// The correction added to the base this cycle, and its first two backward
    /// differences.
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
        ResidualGate {
            lim,
            t: period_ns.max(1) as f64 * 1e-9,
            spline: ChunkSpline::default(),
            has_chunk: false,
            withdrawn: false,
            held: [0.0; MAX_DOF],
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
    /// correction goes to zero at its rate limit).
    pub fn withdraw(&mut self) {
        self.withdrawn = true;
        self.has_chunk = false;
    }

    /// Whether the residual was rolled back.
    pub fn withdrawn(&self) -> bool {
        self.withdrawn
    }

    /// Restarts at zero correction (the gate resynchronised after a stop).
    pub fn reset(&mut self) {
        self.held = [0.0; MAX_DOF];
        self.applied = Pva::default();
        self.raw = [0.0; MAX_DOF];
        self.weight = 0.0;
        self.bits = [0; MAX_DOF];
    }

    /// Adds the gated correction for the setpoint of time `t` to `sp` (the base's).
    /// `playing`: the policy has authority; otherwise (and in a stop) the target is
    /// zero. Where the applied correction is zero the setpoint is left untouched.
    pub fn apply(&mut self, t: MonoTime, playing: bool, sp: &mut Setpoint) {
        let dof = self.lim.dof.min(MAX_DOF).min(sp.dof as usize);
        let active = playing && !sp.stop && self.has_chunk && !self.withdrawn;
        self.raw = [0.0; MAX_DOF];
        if active {
            let mut p = Pva::default();
            let t = t.max(self.spline.t_start).min(self.spline.t_end());
            self.spline.eval(t, &mut p);
            self.raw = p.pos_rad;
        }
        self.weight = match self.lim.region {
            Some(r) => r.weight(&sp.pos_rad, dof),
            None => 1.0,
        };
        let prev = self.applied;
        for j in 0..dof {
            let mut bits = 0;
            let b = self.lim.bound_rad[j].max(0.0);
            let target = self.raw[j].clamp(-b, b);
            if target != self.raw[j] {
                bits |= Constraint::ResidualBound.bit();
            }
            let step = self.lim.rate_rad_s[j].max(0.0) * self.t;
            let change = target - self.held[j];
            let s = if change.abs() > step {
                if active {
                    bits |= Constraint::ResidualRate.bit();
                }
                self.held[j] + step.copysign(change)
            } else {
                target
            };
            self.held[j] = s;
            let r = self.weight * s;
            if self.weight < 1.0 && s != 0.0 {
                bits |= Constraint::ResidualRegion.bit();
            }
            let v = (r - prev.pos_rad[j]) / self.t;
            self.applied.acc_rad_s2[j] = (v - prev.vel_rad_s[j]) / self.t;
            self.applied.vel_rad_s[j] = v;
            self.applied.pos_rad[j] = r;
            self.bits[j] = bits;
            // Zero correction (outside the region, none held): the base exactly, its
            // feed-forward too.
            if r != 0.0 {
                sp.pos_rad[j] += r;
                sp.vel_rad_s[j] += v;
                sp.acc_rad_s2[j] += self.applied.acc_rad_s2[j];
            }
        }
    }

    /// The correction added this cycle (position, and its backward differences).
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

    /// Forgets this cycle's bits (the permission gate counted them).
    pub fn clear_bits(&mut self) {
        self.bits = [0; MAX_DOF];
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

    #[test]
    fn an_absurd_correction_is_bounded_and_rises_at_its_rate() {
        let mut g = ResidualGate::new(lim(None), 10_000_000);
        assert!(g.offer(&constant_chunk(50.0)));
        let mut last = 0.0;
        for k in 0..30 {
            let mut sp = setpoint(0.3);
            g.apply(MonoTime::from_ns(k * 10_000_000), true, &mut sp);
            let r = sp.pos_rad[0] - 0.3;
            assert!(r <= 0.1 + 1e-15, "cycle {k}: {r}");
            assert!(r - last <= 0.01 + 1e-12, "cycle {k}: step {}", r - last);
            assert!(g.bits()[0] & Constraint::ResidualBound.bit() != 0);
            last = r;
        }
        assert!((last - 0.1).abs() < 1e-12);
        assert!((g.applied().pos_rad[1] + 0.1).abs() < 1e-12);
    }

    #[test]
    fn outside_the_region_the_setpoint_is_the_base_exactly() {
        let region = ActivityRegion {
            lo_rad: [-0.5; MAX_DOF],
            hi_rad: [0.5; MAX_DOF],
            fade_rad: 0.1,
        };
        let mut g = ResidualGate::new(lim(Some(region)), 10_000_000);
        assert!(g.offer(&constant_chunk(0.05)));
        for k in 0..20 {
            let mut sp = setpoint(0.0);
            g.apply(MonoTime::from_ns(k * 10_000_000), true, &mut sp);
        }
        assert!((g.applied().pos_rad[0] - 0.05).abs() < 1e-12);
        let base = setpoint(0.7);
        let mut sp = base;
        g.apply(MonoTime::from_ns(200_000_000), true, &mut sp);
        assert_eq!(sp, base);
        assert!(g.bits()[0] & Constraint::ResidualRegion.bit() != 0);
        // In the fade band: part of it, continuously.
        let mut sp = setpoint(0.45);
        g.apply(MonoTime::from_ns(210_000_000), true, &mut sp);
        let w = smoothstep5(0.5).0 * smoothstep5(0.5).0;
        assert!((g.weight() - w).abs() < 1e-12);
        assert!((sp.pos_rad[0] - 0.45 - w * 0.05).abs() < 1e-12);
    }

    #[test]
    fn a_non_finite_chunk_is_refused_and_the_correction_leaves_at_its_rate() {
        let mut g = ResidualGate::new(lim(None), 10_000_000);
        assert!(g.offer(&constant_chunk(0.1)));
        for k in 0..20 {
            let mut sp = setpoint(0.0);
            g.apply(MonoTime::from_ns(k * 10_000_000), true, &mut sp);
        }
        let mut bad = constant_chunk(0.1);
        bad.pos_rad[2][1] = f64::NAN;
        assert!(!g.offer(&bad));
        assert_eq!(g.refused(), 1);
        let mut sp = setpoint(0.0);
        g.apply(MonoTime::from_ns(200_000_000), true, &mut sp);
        assert!((sp.pos_rad[0] - 0.09).abs() < 1e-12, "{}", sp.pos_rad[0]);
    }
}
