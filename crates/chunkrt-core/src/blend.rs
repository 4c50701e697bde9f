//! The seam blend chain: what the executor's output is made of while chunks blend in.
//!
//! The output is a *base* (a chunk's spline at full weight, or an output state
//! continued with constant acceleration) with zero or more *layers* on top, oldest
//! first. Layer `k` crosses from everything below it onto its chunk's spline over
//! `blend_ns` from its seam time `t_k`, with the quintic smoothstep weight
//! `s_k = s((t - t_k) / blend)`: `out_k = out_{k-1} + s_k (spline_k - out_{k-1})`,
//! with the chain rule applied to velocity and acceleration.
//!
//! A chunk spliced while others are still blending in becomes one more layer, so its
//! blend starts exactly on the trajectory being played: the output stays C2 whatever
//! the blend length and the chunk rate. (Continuing the output state with constant
//! acceleration instead, as a single-blend executor must, drifts from the trajectory
//! it replaces within tens of milliseconds; with blends longer than the chunk period
//! every seam started from such an extrapolation and the drifts compounded.) When a
//! layer's crossing is over, everything below it no longer contributes and is dropped,
//! which frees its spline slot.
//!
//! A *transition* ([`BlendChain::transition`], `executor.seam = "transition"`) plays the
//! new chunk at once plus the output's offset from it at the seam, faded out over
//! `blend_ns` by the quintic Hermite polynomial that matches that offset's position,
//! velocity and acceleration at the seam and is zero with its first two derivatives at
//! the end: C2 as well, but what it adds is only what the seam itself differs by. A
//! crossfade also adds what the two chunks' *intents* differ by over the whole window
//! (`2 s' dv + s'' dp` of a difference that keeps growing): for chunks that already
//! continue the trajectory being played (a policy observing the plan), that is most of
//! the seam's acceleration.
//!
//! An *ensemble* ([`BlendChain::ensemble_push`], `executor.seam = "ensemble"`) is ACT's
//! temporal ensembling made continuous: the output is the weighted mean of every recent
//! chunk's spline, chunk `k` weighted `exp(-coeff * k)` counted from the oldest (ACT's
//! weights: with `coeff > 0` older predictions weigh more). A chunk's weight fades in
//! over the blend from its seam and out over the blend when it is evicted (more than
//! `ensemble_chunks` members) or nears the end of its horizon, by the quintic
//! smoothstep; the quotient rule carries velocity and acceleration, so the output is C2.
//! With `blend_ms = 0` the weights switch at once and the output at the chunks' own
//! setpoint times is exactly ACT's `ACTTemporalEnsembler`.

use crate::spline::{ChunkSpline, Pva};
use crate::time::MonoTime;

/// Spline slots of the executor: the chain's chunks plus one for the pending chunk.
///
/// Enough for a blend fourteen times longer than the interval between chunks (a 280 ms
/// blend with a chunk every 20 ms); a seam that would need more restarts the chain
/// (see [`BlendChain::push`]).
pub(crate) const SLOTS: usize = 16;

/// Quintic smoothstep `s(u) = 10u^3 - 15u^4 + 6u^5` and its first two derivatives
/// with respect to `u`; zero first and second derivatives at both ends make the
/// blend C2.
pub fn smoothstep5(u: f64) -> (f64, f64, f64) {
    let u = u.clamp(0.0, 1.0);
    let u2 = u * u;
    let s = u2 * u * (10.0 + u * (-15.0 + 6.0 * u));
    let ds = 30.0 * u2 * (1.0 - u) * (1.0 - u);
    let dds = 60.0 * u * (1.0 - u) * (1.0 - 2.0 * u);
    (s, ds, dds)
}

/// The quintic Hermite basis on `u` in [0, 1] for a value, slope and curvature at 0 that
/// go to zero (with their first two derivatives) at 1: values, first and second
/// derivatives of the three basis polynomials (position, velocity x T, acceleration x T^2).
pub fn hermite5(u: f64) -> ([f64; 3], [f64; 3], [f64; 3]) {
    let u = u.clamp(0.0, 1.0);
    let (u2, u3) = (u * u, u * u * u);
    let (u4, u5) = (u3 * u, u3 * u2);
    (
        [
            1.0 - 10.0 * u3 + 15.0 * u4 - 6.0 * u5,
            u - 6.0 * u3 + 8.0 * u4 - 3.0 * u5,
            0.5 * u2 - 1.5 * u3 + 1.5 * u4 - 0.5 * u5,
        ],
        [
            -30.0 * u2 + 60.0 * u3 - 30.0 * u4,
            1.0 - 18.0 * u2 + 32.0 * u3 - 15.0 * u4,
            u - 4.5 * u2 + 6.0 * u3 - 2.5 * u4,
        ],
        [
            -60.0 * u + 180.0 * u2 - 120.0 * u3,
            -36.0 * u + 96.0 * u2 - 60.0 * u3,
            1.0 - 9.0 * u + 18.0 * u2 - 10.0 * u3,
        ],
    )
}

/// What the layers are blended onto.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Base {
    /// A chunk's spline (slot index) at full weight.
    Spline(usize),
    /// The output state at a seam (`BlendChain::state`), continued with constant
    /// acceleration.
    State,
}

/// One chunk blending in from `t0`.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
struct Layer {
    slot: usize,
    t0: MonoTime,
}

/// The offset a transition fades out: the output minus the new chunk at the seam.
#[derive(Clone, Copy, Debug, Default)]
struct Offset {
    t0: MonoTime,
    d: Pva,
    active: bool,
}

/// One member of an ensemble (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
struct Member {
    slot: usize,
    /// Its seam: the weight fades in from here.
    t_in: MonoTime,
    /// Where its weight starts fading out (`None`: the newest member, never).
    t_out: Option<MonoTime>,
    /// Its chunk's last setpoint time.
    t_end: MonoTime,
    /// Arrival count: weights are `exp(-coeff * (index - oldest index))`.
    index: u64,
}

/// ACT-style temporal ensembling: the members and their weights.
#[derive(Clone, Debug)]
struct Ensemble {
    coeff: f64,
    max: usize,
    members: [Member; SLOTS],
    n: usize,
    next_index: u64,
}

/// The base and the layers blending in over it (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct BlendChain {
    blend_ns: u64,
    offset: Offset,
    base: Base,
    /// Source of `Base::State` and its time.
    state: Pva,
    state_t0: MonoTime,
    layers: [Layer; SLOTS],
    n: usize,
    /// Seams that found the chain full and restarted it from the output state (or, for
    /// an ensemble, dropped a member before its fade was over).
    collapsed: u64,
    ensemble: Ensemble,
}

impl BlendChain {
    /// A chain playing slot 0 alone.
    pub(crate) fn new(blend_ns: u64) -> Self {
        BlendChain {
            blend_ns,
            offset: Offset::default(),
            base: Base::Spline(0),
            state: Pva::default(),
            state_t0: MonoTime::ZERO,
            layers: [Layer::default(); SLOTS],
            n: 0,
            collapsed: 0,
            ensemble: Ensemble {
                coeff: 0.0,
                max: 1,
                members: [Member::default(); SLOTS],
                n: 0,
                next_index: 0,
            },
        }
    }

    /// Sets the ensemble's weight decay per chunk and its largest membership (at most
    /// `SLOTS - 4`: fading members and the pending chunk need slots too).
    pub(crate) fn set_ensemble(&mut self, coeff: f64, max: usize) {
        self.ensemble.coeff = coeff;
        self.ensemble.max = max.clamp(1, SLOTS - 4);
    }

    /// Plays `slot` alone from now on (no blend).
    pub(crate) fn solo(&mut self, slot: usize) {
        self.base = Base::Spline(slot);
        self.n = 0;
        self.offset.active = false;
        self.ensemble.n = 0;
    }

    /// Adds `slot` (its chunk ends at `t_end`) to the ensemble at `ts`. A first member
    /// (no ensemble playing) plays at full weight plus `offset` (the output minus the chunk
    /// at `ts`) faded out, as a transition does. Returns whether a member had to be
    /// dropped before its fade was over (no slot left).
    pub(crate) fn ensemble_push(
        &mut self,
        slot: usize,
        ts: MonoTime,
        t_end: MonoTime,
        offset: &Pva,
    ) -> bool {
        self.prune(ts);
        let tb = self.blend_ns;
        let e = &mut self.ensemble;
        let member = Member {
            slot,
            t_in: ts,
            t_out: None,
            t_end,
            index: e.next_index,
        };
        e.next_index += 1;
        if e.n == 0 {
            self.n = 0;
            self.base = Base::Spline(slot);
            self.offset = Offset {
                t0: ts,
                d: *offset,
                active: tb > 0,
            };
            // Enters at full weight: nothing to fade in against.
            e.members[0] = Member {
                t_in: MonoTime::ZERO,
                ..member
            };
            e.n = 1;
            return false;
        }
        // (A first member's offset keeps fading out: it is part of what is playing.)
        // The members so far start fading out where their horizon ends (not before now).
        let horizon_fade = |m: &Member| m.t_end.add_signed_ns(-(tb as i64)).max(ts);
        for m in &mut e.members[..e.n] {
            let h = horizon_fade(m);
            m.t_out = Some(m.t_out.map_or(h, |o| o.min(h)));
        }
        // Evict the oldest members still at full weight beyond `max`.
        let staying = e.members[..e.n]
            .iter()
            .filter(|m| m.t_out.is_some_and(|o| o > ts))
            .count();
        let mut evict = (staying + 1).saturating_sub(e.max);
        for m in &mut e.members[..e.n] {
            if evict == 0 {
                break;
            }
            if m.t_out.is_some_and(|o| o > ts) {
                m.t_out = Some(ts);
                evict -= 1;
            }
        }
        // No slot left for the pending chunk after this one: drop the oldest now.
        let mut dropped = false;
        if e.n + 2 > SLOTS {
            e.members.copy_within(1..e.n, 0);
            e.n -= 1;
            self.collapsed += 1;
            dropped = true;
        }
        e.members[e.n] = member;
        e.n += 1;
        dropped
    }

    /// Plays `slot` from `ts` plus `offset` (the output minus the chunk at `ts`) faded
    /// out over the blend (see the module docs).
    pub(crate) fn transition(&mut self, slot: usize, ts: MonoTime, offset: &Pva) {
        self.solo(slot);
        self.offset = Offset {
            t0: ts,
            d: *offset,
            active: self.blend_ns > 0,
        };
    }

    /// Blends `slot` in from `ts`, starting on `state` (the output there) continued
    /// with constant acceleration: for seams that do not start on a chunk (after a
    /// deceleration or a hold) and for a chain that is full.
    pub(crate) fn restart_from(&mut self, state: &Pva, ts: MonoTime, slot: usize) {
        self.offset.active = false;
        self.base = Base::State;
        self.state = *state;
        self.state_t0 = ts;
        self.layers[0] = Layer { slot, t0: ts };
        self.n = 1;
    }

    /// Blends `slot` in from `ts` on top of what is playing. When that would leave no
    /// free slot for the next pending chunk, the chain restarts from `state` (the
    /// output at `ts`, continued with constant acceleration) instead and the
    /// collapse is counted. Returns whether it collapsed.
    pub(crate) fn push(&mut self, slot: usize, ts: MonoTime, state: &Pva) -> bool {
        self.offset.active = false;
        let base_slots = usize::from(matches!(self.base, Base::Spline(_)));
        // After the push: base + layers + the new one, and one slot left for pending.
        if base_slots + self.n + 2 > SLOTS {
            self.collapsed += 1;
            self.restart_from(state, ts, slot);
            return true;
        }
        self.layers[self.n] = Layer { slot, t0: ts };
        self.n += 1;
        false
    }

    /// Drops what no longer contributes at `ts`: everything below the newest layer
    /// whose crossing is over (that layer becomes the base).
    pub(crate) fn prune(&mut self, ts: MonoTime) {
        let (e, tb) = (&mut self.ensemble, self.blend_ns);
        if e.n > 0 {
            // Members whose fade-out is over (the newest never fades).
            let mut k = 0;
            for i in 0..e.n {
                let m = e.members[i];
                if m.t_out.is_none_or(|o| ts < o.add_ns(tb)) {
                    e.members[k] = m;
                    k += 1;
                }
            }
            e.n = k;
            return;
        }
        if let Some(k) = self.settled_layer(ts) {
            self.base = Base::Spline(self.layers[k].slot);
            self.layers.copy_within(k + 1..self.n, 0);
            self.n -= k + 1;
        }
    }

    /// Index of the newest layer whose crossing is over at `ts`.
    fn settled_layer(&self, ts: MonoTime) -> Option<usize> {
        self.layers[..self.n]
            .iter()
            .rposition(|l| ts >= l.t0.add_ns(self.blend_ns))
    }

    /// Whether the chain holds `slot` (the base's or a layer's spline).
    pub(crate) fn uses(&self, slot: usize) -> bool {
        self.base == Base::Spline(slot)
            || self.layers[..self.n].iter().any(|l| l.slot == slot)
            || self.ensemble.members[..self.ensemble.n]
                .iter()
                .any(|m| m.slot == slot)
    }

    /// The ensemble's weighted mean at `ts` (see the module docs); false when no member
    /// has weight there.
    fn eval_ensemble(
        &self,
        splines: &[ChunkSpline],
        dof: usize,
        ts: MonoTime,
        out: &mut Pva,
    ) -> bool {
        let e = &self.ensemble;
        let tb = self.blend_ns as f64 * 1e-9;
        // Weight ramp at `tau` seconds past its start: (value, d/dt, d2/dt2).
        let ramp = |tau: f64| -> (f64, f64, f64) {
            if tb <= 0.0 {
                (if tau >= 0.0 { 1.0 } else { 0.0 }, 0.0, 0.0)
            } else {
                let (s, ds, dds) = smoothstep5(tau / tb);
                (s, ds / tb, dds / (tb * tb))
            }
        };
        let oldest = e.members[..e.n].iter().map(|m| m.index).min().unwrap_or(0);
        let (mut d0, mut d1, mut d2) = (0.0, 0.0, 0.0);
        let (mut n0, mut n1, mut n2) = (Pva::default(), Pva::default(), Pva::default());
        let mut p = Pva::default();
        for m in &e.members[..e.n] {
            let base = (-e.coeff * (m.index - oldest) as f64).exp();
            let (si, dsi, ddsi) = ramp(ts.diff_ns(m.t_in) as f64 * 1e-9);
            let (so, dso, ddso) = match m.t_out {
                Some(o) => ramp(ts.diff_ns(o) as f64 * 1e-9),
                None => (0.0, 0.0, 0.0),
            };
            let (r, dr, ddr) = (1.0 - so, -dso, -ddso);
            let w = base * si * r;
            let w1 = base * (dsi * r + si * dr);
            let w2 = base * (ddsi * r + 2.0 * dsi * dr + si * ddr);
            if w == 0.0 && w1 == 0.0 && w2 == 0.0 {
                continue;
            }
            splines[m.slot].eval(ts, &mut p);
            d0 += w;
            d1 += w1;
            d2 += w2;
            for j in 0..dof {
                let (x, v, a) = (p.pos_rad[j], p.vel_rad_s[j], p.acc_rad_s2[j]);
                n0.pos_rad[j] += w * x;
                n1.pos_rad[j] += w1 * x + w * v;
                n2.pos_rad[j] += w2 * x + 2.0 * w1 * v + w * a;
            }
        }
        if d0 <= 0.0 {
            return false;
        }
        for j in 0..dof {
            let f = n0.pos_rad[j] / d0;
            let f1 = (n1.pos_rad[j] - f * d1) / d0;
            let f2 = (n2.pos_rad[j] - 2.0 * f1 * d1 - f * d2) / d0;
            out.pos_rad[j] = f;
            out.vel_rad_s[j] = f1;
            out.acc_rad_s2[j] = f2;
        }
        true
    }

    /// Seams that restarted a full chain from the output state.
    pub(crate) fn collapsed(&self) -> u64 {
        self.collapsed
    }

    /// The output at `ts` for the first `dof` joints. No allocation.
    pub(crate) fn eval(&self, splines: &[ChunkSpline], dof: usize, ts: MonoTime, out: &mut Pva) {
        let ensemble = self.ensemble.n > 0 && self.eval_ensemble(splines, dof, ts, out);
        // A settled layer hides everything below it: start there.
        let first = if ensemble {
            self.n
        } else {
            match self.settled_layer(ts) {
                Some(k) => {
                    splines[self.layers[k].slot].eval(ts, out);
                    k + 1
                }
                None => {
                    match self.base {
                        Base::Spline(slot) => splines[slot].eval(ts, out),
                        Base::State => {
                            let (state, tau) =
                                (&self.state, ts.diff_ns(self.state_t0) as f64 * 1e-9);
                            for j in 0..dof {
                                let a = state.acc_rad_s2[j];
                                out.pos_rad[j] =
                                    state.pos_rad[j] + tau * (state.vel_rad_s[j] + 0.5 * a * tau);
                                out.vel_rad_s[j] = state.vel_rad_s[j] + a * tau;
                                out.acc_rad_s2[j] = a;
                            }
                        }
                    }
                    0
                }
            }
        };
        let tb = self.blend_ns as f64 * 1e-9;
        if self.offset.active {
            let tau = ts.diff_ns(self.offset.t0) as f64 * 1e-9;
            if tau < tb {
                let (h, d1, d2) = hermite5(tau / tb);
                let d = &self.offset.d;
                for j in 0..dof {
                    let (p, v, a) = (d.pos_rad[j], d.vel_rad_s[j] * tb, d.acc_rad_s2[j] * tb * tb);
                    out.pos_rad[j] += p * h[0] + v * h[1] + a * h[2];
                    out.vel_rad_s[j] += (p * d1[0] + v * d1[1] + a * d1[2]) / tb;
                    out.acc_rad_s2[j] += (p * d2[0] + v * d2[1] + a * d2[2]) / (tb * tb);
                }
            }
        }
        let mut new = Pva::default();
        for layer in &self.layers[first..self.n] {
            splines[layer.slot].eval(ts, &mut new);
            let tau = ts.diff_ns(layer.t0) as f64 * 1e-9;
            let (s, ds_du, dds_du) = smoothstep5(tau / tb);
            let (ds, dds) = (ds_du / tb, dds_du / (tb * tb));
            for j in 0..dof {
                let dp = new.pos_rad[j] - out.pos_rad[j];
                let dv = new.vel_rad_s[j] - out.vel_rad_s[j];
                let da = new.acc_rad_s2[j] - out.acc_rad_s2[j];
                out.pos_rad[j] += s * dp;
                out.vel_rad_s[j] += s * dv + ds * dp;
                out.acc_rad_s2[j] += s * da + 2.0 * ds * dv + dds * dp;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smoothstep_is_c2_at_the_ends() {
        assert_eq!(smoothstep5(0.0), (0.0, 0.0, 0.0));
        let (s, ds, dds) = smoothstep5(1.0);
        assert_eq!((s, ds, dds), (1.0, 0.0, 0.0));
        let (s, ..) = smoothstep5(0.5);
        assert!((s - 0.5).abs() < 1e-12);
    }

    #[test]
    fn the_hermite_basis_starts_on_its_unit_and_ends_at_rest() {
        let (h, d1, d2) = hermite5(0.0);
        assert_eq!(
            (h, d1, d2),
            ([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0])
        );
        let (h, d1, d2) = hermite5(1.0);
        for v in h.iter().chain(&d1).chain(&d2) {
            assert!(v.abs() < 1e-12, "{h:?} {d1:?} {d2:?}");
        }
    }
}
