//! The residual gate in front of the permission gate, fed any correction a residual
//! model could return (out of scale, absurd but finite, constant), judged on the
//! commands that leave the gate against the base's setpoints:
//! * wherever the permission gate did not act on a joint, its command is within the
//!   residual bound of the base's setpoint;
//! * with the base's setpoint outside the activity region the proposal is the base's
//!   exactly (every field);
//! * deep inside the region the correction changes by at most its rate per period;
//! * every limit holds on the commands (finite differences);
//! * a residual gate that was given no correction leaves the commands bit for bit
//!   those of a gate without one (the frozen base).

use chunkrt_core::{
    ActivityRegion, Chunk, Command, Gate, JointLimit, JointLimits, MonoTime, ResidualLimits,
    Setpoint, MAX_DOF, NS_PER_MS, SHAPING_BITS,
};
use proptest::prelude::*;

const DOF: usize = 2;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn limits() -> JointLimits {
    JointLimits::uniform(
        DOF,
        JointLimit {
            pos_min_rad: -2.0,
            pos_max_rad: 2.5,
            pos_margin_rad: 0.05,
            max_vel_rad_s: 2.0,
            max_acc_rad_s2: 10.0,
            max_jerk_rad_s3: 400.0,
            brake_acc_rad_s2: 10.0,
        },
    )
}

/// What a residual model returns for one chunk.
#[derive(Clone, Debug)]
enum Output {
    /// The same value at every setpoint (per joint).
    Constant([f64; DOF]),
    /// Values anywhere in `±scale` (far out of scale included).
    Wild(f64, Vec<[f64; DOF]>),
}

fn output() -> impl Strategy<Value = Output> {
    prop_oneof![
        prop::array::uniform2(-1e3f64..1e3).prop_map(Output::Constant),
        (
            prop::sample::select(vec![0.01, 0.3, 5.0, 1e4]),
            prop::collection::vec(prop::array::uniform2(-1.0f64..1.0), 2..32),
        )
            .prop_map(|(s, v)| Output::Wild(s, v)),
    ]
}

fn residual_chunk(out: &Output, seq: u64, t_start: MonoTime, dt_ns: u64) -> Chunk {
    let mut c = Chunk {
        seq,
        t_obs: t_start,
        t_start,
        dt_ns,
        dof: DOF as u16,
        ..Chunk::default()
    };
    match out {
        Output::Constant(v) => {
            c.len = 16;
            for row in c.pos_rad.iter_mut().take(16) {
                row[..DOF].copy_from_slice(v);
            }
        }
        Output::Wild(scale, rows) => {
            c.len = rows.len() as u16;
            for (row, v) in c.pos_rad.iter_mut().zip(rows) {
                row[0] = v[0] * scale;
                row[1] = v[1] * scale;
            }
        }
    }
    c
}

/// The base: a smooth motion per joint from rest, well inside the limits.
fn base_at(t: f64, amp: f64, freq: f64) -> Setpoint {
    let mut sp = Setpoint {
        dof: DOF as u16,
        chunk_seq: 1,
        ..Setpoint::default()
    };
    let w = 2.0 * std::f64::consts::PI * freq;
    for j in 0..DOF {
        let phase = j as f64;
        sp.pos_rad[j] = 0.2 + phase * 0.1 + amp * (1.0 - (w * t).cos());
        sp.vel_rad_s[j] = amp * w * (w * t).sin();
        sp.acc_rad_s2[j] = amp * w * w * (w * t).cos();
    }
    sp
}

fn inside(region: &ActivityRegion, q: &[f64; MAX_DOF]) -> bool {
    (0..DOF).all(|j| q[j] > region.lo_rad[j] && q[j] < region.hi_rad[j])
}

fn deep_inside(region: &ActivityRegion, q: &[f64; MAX_DOF]) -> bool {
    (0..DOF).all(|j| {
        q[j] >= region.lo_rad[j] + region.fade_rad && q[j] <= region.hi_rad[j] - region.fade_rad
    })
}

/// The permission gate's own bits per joint this cycle (the shaping stages taken out).
fn gate_acted(gate: &Gate) -> [bool; DOF] {
    let mut acted = [false; DOF];
    for iv in gate.interventions() {
        if (iv.joint as usize) < DOF && iv.mask.0 & !SHAPING_BITS != 0 {
            acted[iv.joint as usize] = true;
        }
    }
    acted
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), ..ProptestConfig::default() })]

    #[test]
    fn any_correction_stays_within_its_bound_region_and_rate_and_every_limit_holds(
        bound in 0.0f64..0.3,
        rate in 0.05f64..1.0,
        lo in -0.6f64..0.1,
        hi_ofs in -0.02f64..0.02,
        fade in 0.01f64..0.15,
        amp in 0.05f64..0.5,
        freq in 0.2f64..0.3,
        period_ms in prop::sample::select(vec![1u64, 2, 10, 20]),
        every in 1u64..40,
        outputs in prop::collection::vec((output(), prop::bool::weighted(0.85)), 1..12),
    ) {
        let region = ActivityRegion {
            lo_rad: [lo; MAX_DOF],
            // Half way up the base's swing: every case leaves the region and comes back.
            hi_rad: [0.2 + amp + hi_ofs; MAX_DOF],
            fade_rad: fade,
        };
        let rl = ResidualLimits {
            dof: DOF,
            bound_rad: [bound; MAX_DOF],
            rate_rad_s: [rate; MAX_DOF],
            region: Some(region),
        };
        let period_ns = period_ms * NS_PER_MS;
        let t = period_ns as f64 * 1e-9;
        let first = base_at(0.0, amp, freq);
        let mut gate = Gate::new(limits(), period_ns, &first.pos_rad).with_residual(Some(rl));
        let mut cmd = Command::default();
        let mut hist: Vec<[f64; DOF]> = vec![[first.pos_rad[0], first.pos_rad[1]]; 3];
        let mut prev: Option<(Setpoint, Setpoint)> = None;
        let mut k = 0u64;
        let (mut judged_free, mut judged_outside) = (0usize, 0usize);
        for (seq, (out, playing)) in outputs.iter().enumerate() {
            let t0 = MonoTime::from_ns(k * period_ns);
            let chunk = residual_chunk(out, seq as u64 + 1, t0, 20 * NS_PER_MS);
            prop_assert!(gate.residual_mut().unwrap().offer(&chunk));
            // At least 3 s in all: time for the gate to rejoin after a correction's turn.
            for _ in 0..(every * 10).max(3000 / period_ms / outputs.len() as u64) {
                let now = MonoTime::from_ns(k * period_ns);
                let base = base_at(k as f64 * t, amp, freq);
                let mut sp = base;
                gate.add_residual(now, *playing, &mut sp);
                gate.filter(&sp, &mut cmd);
                let acted = gate_acted(&gate);
                #[allow(clippy::needless_range_loop)]
                for j in 0..DOF {
                    let r = sp.pos_rad[j] - base.pos_rad[j];
                    prop_assert!(r.abs() <= bound * (1.0 + 1e-12) + 1e-15, "correction {r} over {bound}");
                    if !acted[j] {
                        judged_free += 1;
                        let off = cmd.pos_rad[j] - base.pos_rad[j];
                        prop_assert!(off.abs() <= bound + 1e-9, "cycle {k} joint {j}: command {off} off the base");
                    }
                }
                if !inside(&region, &base.pos_rad) {
                    judged_outside += 1;
                    prop_assert_eq!(sp, base, "outside the region the base exactly");
                }
                if let Some((pb, ps)) = prev {
                    if deep_inside(&region, &pb.pos_rad) && deep_inside(&region, &base.pos_rad) {
                        for j in 0..DOF {
                            let dr = (sp.pos_rad[j] - base.pos_rad[j]) - (ps.pos_rad[j] - pb.pos_rad[j]);
                            prop_assert!(dr.abs() <= rate * t * (1.0 + 1e-9) + 1e-12, "rate {dr}");
                        }
                    }
                }
                // Every limit on the commands.
                for j in 0..DOF {
                    let q = cmd.pos_rad[j];
                    let n = hist.len();
                    prop_assert!(q.is_finite() && (-1.95 - 1e-9..=2.45 + 1e-9).contains(&q));
                    let v = (q - hist[n - 1][j]) / t;
                    let v1 = (hist[n - 1][j] - hist[n - 2][j]) / t;
                    let v0 = (hist[n - 2][j] - hist[n - 3][j]) / t;
                    let (a, a1) = ((v - v1) / t, (v1 - v0) / t);
                    prop_assert!(v.abs() <= 2.0 * (1.0 + 1e-9) + 1e-9, "vel {v}");
                    prop_assert!(a.abs() <= 10.0 * (1.0 + 1e-9) + 1e-6, "acc {a}");
                    prop_assert!(((a - a1) / t).abs() <= 400.0 * (1.0 + 1e-9) + 1e-3, "jerk");
                }
                hist.push([cmd.pos_rad[0], cmd.pos_rad[1]]);
                prev = Some((base, sp));
                k += 1;
            }
        }
        // Something was judged: the bound on free joints at least.
        prop_assert!(judged_free > 0, "no cycle had a joint the gate left alone");
        prop_assert!(judged_outside > 0, "the base never left the region");
    }

    #[test]
    fn a_residual_gate_given_nothing_leaves_the_base_commands_bit_for_bit(
        amp in 0.1f64..1.5,
        freq in 0.05f64..3.0,
        period_ms in prop::sample::select(vec![1u64, 2, 10, 20]),
        playing in prop::collection::vec(prop::bool::ANY, 1..20),
    ) {
        let period_ns = period_ms * NS_PER_MS;
        let t = period_ns as f64 * 1e-9;
        let first = base_at(0.0, amp, freq);
        let rl = ResidualLimits {
            dof: DOF,
            bound_rad: [0.2; MAX_DOF],
            rate_rad_s: [1.0; MAX_DOF],
            region: None,
        };
        let mut frozen = Gate::new(limits(), period_ns, &first.pos_rad);
        let mut with = Gate::new(limits(), period_ns, &first.pos_rad).with_residual(Some(rl));
        let (mut c0, mut c1) = (Command::default(), Command::default());
        let mut k = 0u64;
        for p in playing {
            for _ in 0..25 {
                let base = base_at(k as f64 * t, amp, freq);
                let mut sp = base;
                with.add_residual(MonoTime::from_ns(k * period_ns), p, &mut sp);
                prop_assert_eq!(sp, base);
                let m0 = frozen.filter(&base, &mut c0);
                let m1 = with.filter(&sp, &mut c1);
                prop_assert_eq!(m0, m1);
                for j in 0..DOF {
                    prop_assert_eq!(c0.pos_rad[j].to_bits(), c1.pos_rad[j].to_bits());
                    prop_assert_eq!(c0.vel_rad_s[j].to_bits(), c1.vel_rad_s[j].to_bits());
                }
                k += 1;
            }
        }
    }
}
