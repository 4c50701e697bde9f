//! The command-stream oracle: how smooth the commands the backend received were.
//!
//! Independent of the executor's view of itself (whose splice-instant seam figures
//! are zero by construction with blending): from the positions handed to the
//! backend each cycle it takes velocity, acceleration and jerk by backward finite
//! differences over the deadlines' spacing, divides each joint's acceleration and
//! jerk by that joint's limit, and keeps the largest ratio over the joints per cycle
//! in HDR histograms, separately for cycles in a window around a seam (from the
//! cycle a new chunk is first played until the blend is over plus two periods, the
//! differences' reach) and for the cycles between seams. It also keeps the gap
//! between the executor's proposal and the command (`|proposed - executed|`, the
//! largest over the joints), which is zero exactly when the gate did not act.
//!
//! Only cycles in which the policy plays are judged (`Playing`): a controlled stop is
//! the gate braking the command on purpose at its limits, and a hold is no motion;
//! they are counted apart (`other_cycles`), and the differences restart after them.

use crate::records::CycleRecord;
use chunkrt_core::{JointLimits, Mode, MonoTime, MAX_DOF};
use hdrhistogram::Histogram;
use serde_json::json;

/// Ratios are kept in parts per million of the limit.
const PPM: f64 = 1e6;
/// Gaps are kept in nanoradians.
const NRAD: f64 = 1e9;

fn histogram() -> Histogram<u64> {
    // Up to 1000x the limit / 1000 rad, 3 significant digits.
    Histogram::new_with_bounds(1, 1_000_000_000_000, 3).expect("static bounds")
}

fn record(h: &mut Histogram<u64>, v: f64) {
    if v.is_finite() {
        h.saturating_record(v.max(0.0) as u64);
    }
}

fn summary(h: &Histogram<u64>, scale: f64) -> serde_json::Value {
    if h.is_empty() {
        return json!({ "count": 0 });
    }
    json!({
        "count": h.len(),
        "p50": h.value_at_quantile(0.5) as f64 / scale,
        "p99": h.value_at_quantile(0.99) as f64 / scale,
        "p999": h.value_at_quantile(0.999) as f64 / scale,
        "max": h.max() as f64 / scale,
    })
}

/// Accumulates the command-stream figures; fed every cycle record.
pub struct CommandOracle {
    acc_max: [f64; MAX_DOF],
    jerk_max: [f64; MAX_DOF],
    window_ns: u64,
    hist: [[f64; MAX_DOF]; 3],
    t_hist: [MonoTime; 3],
    n_hist: usize,
    prev_acc: [f64; MAX_DOF],
    last_seq: u64,
    seam_until: MonoTime,
    seams: u64,
    acc_seam: Histogram<u64>,
    acc_between: Histogram<u64>,
    jerk_seam: Histogram<u64>,
    jerk_between: Histogram<u64>,
    gap: Histogram<u64>,
    cycles: u64,
    other: u64,
    gated: u64,
    cost_chosen: Histogram<u64>,
    cost_first: Histogram<u64>,
    candidates: u64,
    chunks: u64,
}

impl CommandOracle {
    /// An oracle for joints with `limits`, seams windowed over `blend_ns` plus two
    /// control periods of `period_ns`.
    pub fn new(limits: &JointLimits, blend_ns: u64, period_ns: u64) -> Self {
        let mut acc_max = [f64::INFINITY; MAX_DOF];
        let mut jerk_max = [f64::INFINITY; MAX_DOF];
        for j in 0..limits.dof.min(MAX_DOF) {
            acc_max[j] = limits.joint[j].max_acc_rad_s2;
            jerk_max[j] = limits.joint[j].max_jerk_rad_s3;
        }
        CommandOracle {
            acc_max,
            jerk_max,
            window_ns: blend_ns + 2 * period_ns,
            hist: [[0.0; MAX_DOF]; 3],
            t_hist: [MonoTime::ZERO; 3],
            n_hist: 0,
            prev_acc: [0.0; MAX_DOF],
            last_seq: 0,
            seam_until: MonoTime::ZERO,
            seams: 0,
            acc_seam: histogram(),
            acc_between: histogram(),
            jerk_seam: histogram(),
            jerk_between: histogram(),
            gap: histogram(),
            cycles: 0,
            other: 0,
            gated: 0,
            cost_chosen: histogram(),
            cost_first: histogram(),
            candidates: 0,
            chunks: 0,
        }
    }

    /// Takes one chunk's candidate selection (`chunkrt_rt::select`).
    pub fn chunk(&mut self, candidates: u16, cost: f32, cost_first: f32) {
        self.chunks += 1;
        self.candidates += candidates.max(1) as u64;
        record(&mut self.cost_chosen, cost as f64 * PPM);
        record(&mut self.cost_first, cost_first as f64 * PPM);
    }

    /// Takes one cycle's command.
    pub fn cycle(&mut self, r: &CycleRecord) {
        let dof = (r.dof as usize).min(MAX_DOF);
        if r.mode != Mode::Playing as u8 {
            self.other += 1;
            self.n_hist = 0;
            return;
        }
        self.cycles += 1;
        // The permission gate's own clamps: the shaping stages in front of it (the
        // action filter, the residual gate) change the proposal, not the command.
        if r.gate_mask & !chunkrt_core::SHAPING_BITS != 0 {
            self.gated += 1;
        }
        let mut gap: f64 = 0.0;
        for j in 0..dof {
            gap = gap.max((r.setpoint_pos_rad[j] - r.cmd_pos_rad[j]).abs());
        }
        record(&mut self.gap, gap * NRAD);
        if r.chunk_seq != 0 && r.chunk_seq != self.last_seq {
            if self.last_seq != 0 {
                self.seams += 1;
                self.seam_until = r.t_deadline.add_ns(self.window_ns);
            }
            self.last_seq = r.chunk_seq;
        }
        // A skipped deadline breaks the finite differences: start again.
        if r.missed > 0 {
            self.n_hist = 0;
        }
        self.hist.rotate_left(1);
        self.t_hist.rotate_left(1);
        self.hist[2][..dof].copy_from_slice(&r.cmd_pos_rad[..dof]);
        self.t_hist[2] = r.t_deadline;
        self.n_hist = (self.n_hist + 1).min(4);
        if self.n_hist < 3 {
            return;
        }
        let dt = |a: MonoTime, b: MonoTime| (a.diff_ns(b) as f64 * 1e-9).max(1e-9);
        let (t1, t2) = (
            dt(self.t_hist[1], self.t_hist[0]),
            dt(self.t_hist[2], self.t_hist[1]),
        );
        let (mut acc_ratio, mut jerk_ratio) = (0.0f64, 0.0f64);
        for j in 0..dof {
            let v1 = (self.hist[1][j] - self.hist[0][j]) / t1;
            let v2 = (self.hist[2][j] - self.hist[1][j]) / t2;
            let a = (v2 - v1) / t2;
            acc_ratio = acc_ratio.max(a.abs() / self.acc_max[j]);
            if self.n_hist >= 4 {
                let jerk = (a - self.prev_acc[j]) / t2;
                jerk_ratio = jerk_ratio.max(jerk.abs() / self.jerk_max[j]);
            }
            self.prev_acc[j] = a;
        }
        let in_seam = r.t_deadline <= self.seam_until;
        let (acc_h, jerk_h) = if in_seam {
            (&mut self.acc_seam, &mut self.jerk_seam)
        } else {
            (&mut self.acc_between, &mut self.jerk_between)
        };
        record(acc_h, acc_ratio * PPM);
        if self.n_hist >= 4 {
            record(jerk_h, jerk_ratio * PPM);
        }
    }

    /// The figures, as the report's `command_stream` block.
    pub fn summary(&self) -> serde_json::Value {
        let mut acc_all = self.acc_seam.clone();
        let _ = acc_all.add(&self.acc_between);
        let mut jerk_all = self.jerk_seam.clone();
        let _ = jerk_all.add(&self.jerk_between);
        json!({
            "what": "commands the backend received while the policy played: |acceleration| \
                     and |jerk| by finite differences as a fraction of each joint's limit \
                     (largest joint per cycle), in seam windows (blend + 2 periods) and \
                     between; |proposed - executed| in rad",
            "cycles": self.cycles,
            "other_cycles": self.other,
            "seams": self.seams,
            "gate_clamped_cycles": self.gated,
            "gate_clamped_pct": if self.cycles > 0 {
                100.0 * self.gated as f64 / self.cycles as f64
            } else {
                0.0
            },
            "acc_ratio": {
                "all": summary(&acc_all, PPM),
                "seam": summary(&self.acc_seam, PPM),
                "between": summary(&self.acc_between, PPM),
            },
            "jerk_ratio": {
                "all": summary(&jerk_all, PPM),
                "seam": summary(&self.jerk_seam, PPM),
                "between": summary(&self.jerk_between, PPM),
            },
            "proposal_gap_rad": summary(&self.gap, NRAD),
            "selection": {
                "what": "seam cost of each published chunk as a fraction of the acceleration \
                         limit (chosen), and of the first candidate drawn (what one candidate \
                         would have given)",
                "candidates_mean": if self.chunks > 0 {
                    self.candidates as f64 / self.chunks as f64
                } else {
                    0.0
                },
                "chosen": summary(&self.cost_chosen, PPM),
                "first": summary(&self.cost_first, PPM),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chunkrt_core::{JointLimit, JointLimits};

    fn rec(k: u64, period_ns: u64, pos: f64, seq: u64) -> CycleRecord {
        let mut r = CycleRecord {
            cycle: k,
            t_deadline: MonoTime(1_000_000_000 + k * period_ns),
            dof: 1,
            chunk_seq: seq,
            ..CycleRecord::default()
        };
        r.cmd_pos_rad[0] = pos;
        r.setpoint_pos_rad[0] = pos;
        r
    }

    #[test]
    fn a_parabola_has_its_acceleration_and_a_step_is_seen_at_the_seam() {
        let lim = JointLimits::uniform(1, JointLimit::default()); // A 10, J 500
        let period = 10_000_000;
        let mut o = CommandOracle::new(&lim, 0, period);
        // q = 2 t^2: acceleration 4 rad/s2 = 0.4 of the limit, no jerk.
        for k in 0..100 {
            let t = k as f64 * 0.01;
            o.cycle(&rec(k, period, 2.0 * t * t, 1));
        }
        // A new chunk starts with a velocity step of 0.1 rad/s: 10 rad/s2 over one
        // period, 1.0 of the limit, inside the seam window.
        let q0 = 2.0 * 0.99f64.powi(2);
        let v = 4.0 * 0.99 + 0.1;
        for k in 100..110 {
            let t = (k - 99) as f64 * 0.01;
            o.cycle(&rec(k, period, q0 + v * t + 2.0 * t * t, 2));
        }
        let s = o.summary();
        let between = s["acc_ratio"]["between"]["max"].as_f64().unwrap();
        assert!((between - 0.4).abs() < 0.01, "{s}");
        let seam = s["acc_ratio"]["seam"]["max"].as_f64().unwrap();
        assert!((seam - 1.4).abs() < 0.02, "{s}");
        assert_eq!(s["seams"], 1);
        assert_eq!(s["proposal_gap_rad"]["max"].as_f64().unwrap(), 0.0);
    }

    #[test]
    fn a_stop_is_not_judged_as_playback() {
        let lim = JointLimits::uniform(1, JointLimit::default()); // A 10
        let period = 10_000_000;
        let mut o = CommandOracle::new(&lim, 0, period);
        for k in 0..50 {
            o.cycle(&rec(k, period, 0.0, 1));
        }
        // A stop: the gate brakes at the limit, away from the proposal.
        for k in 50..60 {
            let mut r = rec(k, period, 0.0, 0);
            r.mode = Mode::Decelerating as u8;
            r.cmd_pos_rad[0] = 0.5 * 10.0 * ((k - 49) as f64 * 0.01).powi(2);
            r.gate_mask = 1;
            o.cycle(&r);
        }
        let s = o.summary();
        assert_eq!(
            (s["cycles"].as_u64(), s["other_cycles"].as_u64()),
            (Some(50), Some(10))
        );
        assert_eq!(s["gate_clamped_cycles"], 0);
        assert_eq!(s["acc_ratio"]["all"]["max"].as_f64().unwrap(), 0.0);
        assert_eq!(s["proposal_gap_rad"]["max"].as_f64().unwrap(), 0.0);
    }
}
