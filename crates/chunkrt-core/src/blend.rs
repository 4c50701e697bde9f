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

use crate::ladder::smoothstep5;
use crate::spline::{ChunkSpline, Pva};
use crate::time::MonoTime;

/// Spline slots of the executor: the chain's chunks plus one for the pending chunk.
///
/// Enough for a blend fourteen times longer than the interval between chunks (a 280 ms
/// blend with a chunk every 20 ms); a seam that would need more restarts the chain
/// (see [`BlendChain::push`]).
pub(crate) const SLOTS: usize = 16;

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

/// The base and the layers blending in over it (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct BlendChain {
    blend_ns: u64,
    base: Base,
    /// Source of `Base::State` and its time.
    state: Pva,
    state_t0: MonoTime,
    layers: [Layer; SLOTS],
    n: usize,
    /// Seams that found the chain full and restarted it from the output state.
    collapsed: u64,
}

impl BlendChain {
    /// A chain playing slot 0 alone.
    pub(crate) fn new(blend_ns: u64) -> Self {
        BlendChain {
            blend_ns,
            base: Base::Spline(0),
            state: Pva::default(),
            state_t0: MonoTime::ZERO,
            layers: [Layer::default(); SLOTS],
            n: 0,
            collapsed: 0,
        }
    }

    /// Plays `slot` alone from now on (no blend).
    pub(crate) fn solo(&mut self, slot: usize) {
        self.base = Base::Spline(slot);
        self.n = 0;
    }

    /// Blends `slot` in from `ts`, starting on `state` (the output there) continued
    /// with constant acceleration: for seams that do not start on a chunk (after a
    /// deceleration or a hold) and for a chain that is full.
    pub(crate) fn restart_from(&mut self, state: &Pva, ts: MonoTime, slot: usize) {
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
        self.base == Base::Spline(slot) || self.layers[..self.n].iter().any(|l| l.slot == slot)
    }

    /// Seams that restarted a full chain from the output state.
    pub(crate) fn collapsed(&self) -> u64 {
        self.collapsed
    }

    /// The output at `ts` for the first `dof` joints. No allocation.
    pub(crate) fn eval(&self, splines: &[ChunkSpline], dof: usize, ts: MonoTime, out: &mut Pva) {
        // A settled layer hides everything below it: start there.
        let first = match self.settled_layer(ts) {
            Some(k) => {
                splines[self.layers[k].slot].eval(ts, out);
                k + 1
            }
            None => {
                match self.base {
                    Base::Spline(slot) => splines[slot].eval(ts, out),
                    Base::State => {
                        let (state, tau) = (&self.state, ts.diff_ns(self.state_t0) as f64 * 1e-9);
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
        };
        let tb = self.blend_ns as f64 * 1e-9;
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
