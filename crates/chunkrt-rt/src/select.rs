//! Coherent chunks without retraining: draw several candidates, keep the one that
//! continues the trajectory being played most smoothly (bidirectional decoding's
//! idea, judged on the seam the executor will actually make).
//!
//! A generative policy's chunks drawn with fresh noise differ: consecutive chunks of
//! the bundled flow model start with velocities 0.1-0.3 rad/s apart, and blending
//! such a difference in over 40 ms asks more acceleration than the arm may use, so
//! the gate clamps. Here the inference thread draws `n` candidates for the same
//! observation (one policy call each: the bundled graphs have a batch dimension of
//! 1), evaluates each and the chunk it published last (what the executor is playing
//! once the last blend is over) at the time the new chunk will first be played (the
//! next control deadline plus the lookahead), and publishes the candidate whose
//! seam asks the least acceleration of the worst joint, relative to its limit:
//! `(|da| + 1.875 |dv| / T + 5.77 |dp| / T^2) / A` for a quintic blend of length `T`
//! (the peak acceleration such a blend adds to the difference's own).
//! Candidates are drawn while the time spent stays within the budget, so a slow
//! model degrades to fewer candidates, never to a late chunk.

use chunkrt_core::blend::{hermite5, smoothstep5};
use chunkrt_core::spline::{ChunkSpline, Pva};
use chunkrt_core::{Chunk, JointVec, MonoTime, MAX_DOF};

/// Points across the blend window at which a candidate's seam is judged (plus one).
const BLEND_SAMPLES: usize = 8;

/// Settings of the candidate selection.
#[derive(Clone, Copy, Debug)]
pub struct SelectionConfig {
    /// Candidates per chunk (1: no selection).
    pub candidates: usize,
    /// Joints.
    pub dof: usize,
    /// Acceleration limit per joint.
    pub acc_max: JointVec,
    /// Seam blend length (0: the control period is used).
    pub blend_ns: u64,
    /// The executor crosses seams by transition (else crossfade).
    pub transition: bool,
    /// The executor's lookahead.
    pub lookahead_ns: u64,
    /// Stop drawing candidates once this much time has been spent on the chunk.
    pub budget_ns: u64,
}

/// The selection's state: candidate buffers and the last published chunk.
pub struct Selection {
    cfg: SelectionConfig,
    /// Candidate chunks (allocated once).
    pub candidates: Vec<Box<Chunk>>,
    prev: Box<ChunkSpline>,
    prev_valid: bool,
    scratch: Box<ChunkSpline>,
}

impl Selection {
    /// Buffers for `cfg.candidates` chunks.
    pub fn new(cfg: SelectionConfig) -> Self {
        let n = cfg.candidates.max(1);
        Selection {
            cfg: SelectionConfig {
                candidates: n,
                dof: cfg.dof.min(MAX_DOF),
                ..cfg
            },
            candidates: (0..n).map(|_| Box::default()).collect(),
            prev: Box::default(),
            prev_valid: false,
            scratch: Box::default(),
        }
    }

    /// Candidates to draw.
    pub fn count(&self) -> usize {
        self.cfg.candidates
    }

    /// Whether another candidate may be drawn `spent_ns` into the chunk's budget.
    pub fn within_budget(&self, spent_ns: u64) -> bool {
        spent_ns < self.cfg.budget_ns
    }

    /// The seam cost of `c` (see the module docs) if it is first played at
    /// `t_first`; 0 when nothing was published before.
    pub fn mismatch(&mut self, c: &Chunk, t_first: MonoTime) -> f64 {
        self.scratch.rebuild(c);
        self.scratch_mismatch(t_first)
    }

    /// [`Selection::mismatch`] of candidate `i`.
    pub fn mismatch_of(&mut self, i: usize, t_first: MonoTime) -> f64 {
        self.scratch.rebuild(&self.candidates[i]);
        self.scratch_mismatch(t_first)
    }

    fn scratch_mismatch(&mut self, t_first: MonoTime) -> f64 {
        if !self.prev_valid {
            return 0.0;
        }
        let ts = t_first.add_ns(self.cfg.lookahead_ns);
        let (mut old, mut new) = (Pva::default(), Pva::default());
        let blend_ns = self.cfg.blend_ns.max(1_000_000);
        let t = blend_ns as f64 * 1e-9;
        let mut worst: f64 = 0.0;
        // The seam's offset (played minus candidate) where a transition starts (k = 0).
        let mut seam = Pva::default();
        // The acceleration the blend adds to the old trajectory's, at BLEND_SAMPLES + 1
        // points across its window: (p, v, a) differences weighted by the quintic
        // smoothstep and its derivatives. Two candidates that leave the same state on
        // different sides of an obstacle differ little at the splice but much within the
        // window; this tells them apart.
        for k in 0..=BLEND_SAMPLES {
            let u = k as f64 / BLEND_SAMPLES as f64;
            let at = ts.add_ns(blend_ns * k as u64 / BLEND_SAMPLES as u64);
            self.prev.eval(at, &mut old);
            self.scratch.eval(at, &mut new);
            let (w, w1, w2) = smoothstep5(u);
            let (w1, w2) = (w1 / t, w2 / (t * t));
            let (_, _, h2) = hermite5(u);
            for j in 0..self.cfg.dof {
                let dp = new.pos_rad[j] - old.pos_rad[j];
                let dv = new.vel_rad_s[j] - old.vel_rad_s[j];
                let da = new.acc_rad_s2[j] - old.acc_rad_s2[j];
                if k == 0 {
                    seam.pos_rad[j] = -dp;
                    seam.vel_rad_s[j] = -dv;
                    seam.acc_rad_s2[j] = -da;
                }
                let added = if self.cfg.transition {
                    // The offset at the seam, faded out (chunkrt_core's transition).
                    (seam.pos_rad[j] * h2[0] / (t * t)
                        + seam.vel_rad_s[j] * h2[1] / t
                        + seam.acc_rad_s2[j] * h2[2])
                        .abs()
                } else {
                    (w * da + 2.0 * w1 * dv + w2 * dp).abs()
                };
                let cost = added / self.cfg.acc_max[j].max(1e-9);
                worst = worst.max(if cost.is_finite() { cost } else { f64::MAX });
            }
        }
        // Past the blend, over the rest of the overlap: where the candidate's intent
        // parts from the one being played (a chunk that passes the obstacle on the other
        // side starts almost as the played one does, and differs by tenths of a radian
        // half a second on). Costed as the acceleration a blend over the whole overlap
        // would need to absorb the difference at its end, and added to the seam's: a
        // candidate may win only by being smooth at the seam *and* on the same course.
        let mut course: f64 = 0.0;
        let end = self.prev.t_end().min(self.scratch.t_end());
        let blend_end = ts.add_ns(blend_ns);
        if end > blend_end {
            let span = end.diff_ns(ts) as f64 * 1e-9;
            self.prev.eval(end, &mut old);
            self.scratch.eval(end, &mut new);
            for j in 0..self.cfg.dof {
                let dp = (new.pos_rad[j] - old.pos_rad[j]).abs();
                let cost = 5.77 * dp / (span * span) / self.cfg.acc_max[j].max(1e-9);
                course = course.max(if cost.is_finite() { cost } else { f64::MAX });
            }
        }
        worst + course
    }

    /// Remembers the chunk that was published (the next seams are judged against it).
    pub fn published(&mut self, c: &Chunk) {
        self.prev.rebuild(c);
        self.prev_valid = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chunkrt_core::NS_PER_MS;

    fn ramp(seq: u64, t0: MonoTime, v: f64) -> Chunk {
        let mut c = Chunk {
            seq,
            t_obs: t0,
            t_start: t0,
            dt_ns: 20 * NS_PER_MS,
            len: 25,
            dof: 1,
            ..Chunk::default()
        };
        for i in 0..25 {
            c.pos_rad[i][0] = v * i as f64 * 0.02;
        }
        c
    }

    #[test]
    fn the_candidate_that_continues_the_played_chunk_costs_least() {
        let mut acc = [0.0; MAX_DOF];
        acc[0] = 10.0;
        let mut s = Selection::new(SelectionConfig {
            candidates: 3,
            dof: 1,
            acc_max: acc,
            blend_ns: 40 * NS_PER_MS,
            transition: false,
            lookahead_ns: 0,
            budget_ns: 10 * NS_PER_MS,
        });
        let t0 = MonoTime::from_ms(1_000);
        assert_eq!(
            s.mismatch(&ramp(1, t0, 0.5), t0),
            0.0,
            "nothing published yet"
        );
        s.published(&ramp(1, t0, 0.5));
        let t1 = t0.add_ns(100 * NS_PER_MS);
        // The same motion re-anchored in time: continues exactly (position and
        // velocity at t1 equal) ...
        let mut same = ramp(2, t1, 0.5);
        for i in 0..25 {
            same.pos_rad[i][0] += 0.5 * 0.1;
        }
        let slower = {
            let mut c = ramp(3, t1, 0.3);
            for i in 0..25 {
                c.pos_rad[i][0] += 0.5 * 0.1;
            }
            c
        };
        let t_first = t1.add_ns(20 * NS_PER_MS);
        let a = s.mismatch(&same, t_first);
        let b = s.mismatch(&slower, t_first);
        assert!(a < 1e-6, "{a}");
        // 0.2 rad/s over a 40 ms blend: 1.875 * 0.2 / 0.04 = 9.4 rad/s2, plus the
        // position that has drifted apart by then, of a 10 rad/s2 limit.
        assert!(b > 0.9, "{b}");
    }
}
