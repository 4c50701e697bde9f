//! Properties of executor + gate under arbitrary chunk streams (garbage included)
//! and arbitrary arrival times:
//! * no executed command breaks a position, velocity, acceleration or jerk limit;
//! * nothing non-finite leaves the gate;
//! * the executor's output is continuous at every seam (with blending on) and at
//!   every fallback mode change (jerk-bounded from the previous output);
//! * the chunk counters reconcile.

mod common;

use chunkrt_core::{
    Chunk, Command, Executor, ExecutorConfig, Gate, JointLimit, JointLimits, Mode,
    ModeChangeReason, MonoTime, Resume, Setpoint, MAX_DOF, NS_PER_MS,
};
use proptest::prelude::*;

const DOF: usize = 3;

/// Case count: `PROPTEST_CASES` when set (for long soak runs), else the default that
/// keeps the suite quick.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Debug)]
enum Action {
    Offer {
        seq_step: i64,
        obs_lag_ms: u64,
        start_offset_ms: i64,
        dt_ms: u64,
        len: u16,
        dof: u16,
        amp: f64,
        freq_hz: f64,
        offset: f64,
        nan_at: Option<(usize, usize)>,
    },
    Force,
    Rearm,
}

#[derive(Clone, Debug)]
struct Scenario {
    vel: f64,
    acc: f64,
    jerk_ratio: f64,
    brake_frac: f64,
    pos_min: f64,
    pos_max: f64,
    period_ms: u64,
    jitter: Vec<u64>,
    blend_ms: u64,
    /// Seams cross by transition (else crossfade).
    transition: bool,
    lookahead_ms: u64,
    max_age_ms: u64,
    manual: bool,
    init: f64,
    actions: Vec<(usize, Action)>,
    ticks: usize,
    /// A regular, mostly good stream: one chunk every `stream_ms`, observation lag
    /// `lag_ms[i]`, amplitude/offset varying, silent during `stall`.
    stream_ms: u64,
    lag_ms: Vec<u64>,
    shapes: Vec<(f64, f64, f64)>,
    stall: (u64, u64),
}

fn action() -> impl Strategy<Value = Action> {
    let offer = (
        (-2i64..4, 0u64..300, -120i64..120),
        (
            prop::sample::select(vec![0u64, 5, 10, 20, 20, 20, 20, 150]),
            0u16..70,
        ),
        prop::sample::select(vec![3u16, 3, 3, 3, 3, 2, 4]),
        (0.0f64..1.5, 0.0f64..3.0, -4.0f64..4.0),
        prop::option::weighted(0.1, (0usize..70, 0usize..DOF)),
    )
        .prop_map(
            |(
                (seq_step, obs_lag_ms, start_offset_ms),
                (dt_ms, len),
                dof,
                (amp, freq_hz, offset),
                nan_at,
            )| {
                Action::Offer {
                    seq_step,
                    obs_lag_ms,
                    start_offset_ms,
                    dt_ms,
                    len,
                    dof,
                    amp,
                    freq_hz,
                    offset,
                    nan_at,
                }
            },
        );
    prop_oneof![20 => offer, 1 => Just(Action::Force), 1 => Just(Action::Rearm)]
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        (0.5f64..3.0, 2.0f64..20.0, 10.0f64..100.0, 0.5f64..1.0),
        (-3.0f64..-0.5, 0.5f64..3.0),
        prop::sample::select(vec![1u64, 2, 4, 10, 20]),
        (
            // Blends longer than the chunk interval chain (executor tests).
            prop::sample::select(vec![0u64, 0, 20, 40, 60, 150, 300]),
            0u64..6,
            60u64..300,
            any::<bool>(),
        ),
        any::<bool>(),
        -1.0f64..1.0,
        prop::collection::vec((0usize..1500, action()), 1..80),
        prop::collection::vec(0u64..500_000, 16),
        (
            20u64..120,
            prop::collection::vec(0u64..45, 8),
            prop::collection::vec((0.0f64..1.0, 0.0f64..2.0, -1.5f64..1.5), 8),
            (0u64..3000, 0u64..2500),
        ),
    )
        .prop_map(
            |(
                (vel, acc, jerk_ratio, brake_frac),
                (pos_min, pos_max),
                period_ms,
                (blend_ms, lookahead_ms, max_age_ms, transition),
                manual,
                init,
                mut actions,
                jitter,
                (stream_ms, lag_ms, shapes, stall),
            )| {
                actions.sort_by_key(|a| a.0);
                let init = init * pos_max.min(-pos_min) * 0.9;
                Scenario {
                    vel,
                    acc,
                    jerk_ratio,
                    brake_frac,
                    pos_min,
                    pos_max,
                    period_ms,
                    jitter,
                    blend_ms,
                    transition,
                    lookahead_ms,
                    max_age_ms,
                    manual,
                    init,
                    actions,
                    ticks: 1500,
                    stream_ms,
                    lag_ms,
                    shapes,
                    stall,
                }
            },
        )
}

fn build_chunk(a: &Action, seq: u64, now: MonoTime) -> Chunk {
    let Action::Offer {
        obs_lag_ms,
        start_offset_ms,
        dt_ms,
        len,
        dof,
        amp,
        freq_hz,
        offset,
        nan_at,
        ..
    } = a
    else {
        unreachable!()
    };
    let t_obs = now.add_signed_ns(-((*obs_lag_ms * NS_PER_MS) as i64));
    let t_start = t_obs.add_signed_ns(start_offset_ms * NS_PER_MS as i64);
    let mut c = Chunk {
        seq,
        t_obs,
        t_start,
        t_publish: now,
        dt_ns: dt_ms * NS_PER_MS,
        len: *len,
        dof: *dof,
        ..Chunk::default()
    };
    for i in 0..(*len as usize).min(64) {
        let t = c.t_of(i).as_secs_f64();
        for j in 0..MAX_DOF {
            c.pos_rad[i][j] = offset + amp * (std::f64::consts::TAU * freq_hz * t + j as f64).sin();
        }
    }
    if let Some((i, j)) = nan_at {
        c.pos_rad[*i % 64][*j] = f64::NAN;
    }
    c
}

fn run(s: &Scenario) -> Result<(), TestCaseError> {
    let lim = JointLimit {
        pos_min_rad: s.pos_min,
        pos_max_rad: s.pos_max,
        pos_margin_rad: 0.02,
        max_vel_rad_s: s.vel,
        max_acc_rad_s2: s.acc,
        max_jerk_rad_s3: s.acc * s.jerk_ratio,
        brake_acc_rad_s2: s.acc * s.brake_frac,
    };
    let limits = JointLimits::uniform(DOF, lim);
    let cfg = ExecutorConfig {
        dof: DOF,
        max_chunk_age_ns: s.max_age_ms * NS_PER_MS,
        blend_ns: s.blend_ms * NS_PER_MS,
        seam: if s.transition {
            chunkrt_core::SeamMode::Transition
        } else {
            chunkrt_core::SeamMode::Crossfade
        },
        lookahead_ns: s.lookahead_ms * NS_PER_MS,
        safe_stop_after_ns: 400 * NS_PER_MS,
        resume: if s.manual {
            Resume::Manual
        } else {
            Resume::Auto
        },
        dt_min_ns: NS_PER_MS,
        dt_max_ns: 100 * NS_PER_MS,
        min_len: 2,
        max_time_offset_ns: 100 * NS_PER_MS,
        ensemble_coeff: 0.0,
        ensemble_chunks: 8,
    };
    let period_ns = s.period_ms * NS_PER_MS;
    let t = period_ns as f64 * 1e-9;
    let init = [s.init; MAX_DOF];
    let t0 = MonoTime::from_ms(5_000);
    let mut exec = Executor::new(cfg, limits, &init, t0);
    let mut gate = Gate::new(limits, period_ns, &init);
    let mut hist: Vec<[f64; MAX_DOF]> = vec![init; 3];
    let mut seq = 0u64;
    let mut ai = 0;
    let mut sp = Setpoint::default();
    let mut cmd = Command::default();
    let mut prev_out: Option<(Setpoint, MonoTime, Mode)> = None;
    let jerk_max = lim.max_jerk_rad_s3;
    for k in 0..s.ticks {
        // Tick times jitter (up to half a period late) but never go backwards.
        let jit = s.jitter[k % s.jitter.len()] % (period_ns / 2).max(1);
        let now = t0.add_ns(k as u64 * period_ns + jit);
        while ai < s.actions.len() && s.actions[ai].0 <= k {
            match &s.actions[ai].1 {
                a @ Action::Offer { seq_step, .. } => {
                    seq = (seq as i64 + seq_step).max(0) as u64;
                    let c = build_chunk(a, seq, now);
                    let _ = exec.offer(&c, now);
                }
                Action::Force => exec.force_fallback(now, ModeChangeReason::BackendError),
                Action::Rearm => exec.rearm(now),
            }
            ai += 1;
        }
        let t_ms = (k as u64 * period_ns) / NS_PER_MS;
        let in_stall = t_ms >= s.stall.0 && t_ms < s.stall.0 + s.stall.1;
        let due = (k as u64 * period_ns) / (s.stream_ms * NS_PER_MS)
            != ((k as u64).saturating_sub(1) * period_ns) / (s.stream_ms * NS_PER_MS);
        if (k == 0 || due) && !in_stall {
            let i = k % s.lag_ms.len();
            let (amp, freq_hz, offset) = s.shapes[(k / 7) % s.shapes.len()];
            let good = Action::Offer {
                seq_step: 1,
                obs_lag_ms: s.lag_ms[i],
                start_offset_ms: 0,
                dt_ms: 20,
                len: 25,
                dof: DOF as u16,
                amp,
                freq_hz,
                offset,
                nan_at: None,
            };
            seq += 1;
            let c = build_chunk(&good, seq, now);
            let _ = exec.offer(&c, now);
        }
        exec.tick(now, &mut sp);
        let seam = exec.first_use().is_some();
        let mode = exec.mode();
        // Executor continuity at fallback mode changes: from the previous output the
        // trajectory moved with a jerk of at most max_jerk.
        if let Some((p, pt, pmode)) = prev_out {
            let dt = now.add_ns(s.lookahead_ms * NS_PER_MS).diff_ns(pt) as f64 * 1e-9;
            let fallback_change = mode != pmode && mode != Mode::Playing;
            if fallback_change {
                for j in 0..DOF {
                    // The fallback continues the previous output with its velocity and
                    // acceleration clipped to the limits (they exceed them only inside a
                    // blend the gate is already clipping).
                    let pv = p.vel_rad_s[j].clamp(-lim.max_vel_rad_s, lim.max_vel_rad_s);
                    let pa = p.acc_rad_s2[j].clamp(-lim.max_acc_rad_s2, lim.max_acc_rad_s2);
                    let pred = p.pos_rad[j] + dt * (pv + 0.5 * dt * pa);
                    let vpred = pv + dt * pa;
                    let scale = 1.0 + p.pos_rad[j].abs();
                    prop_assert!(
                        (sp.pos_rad[j] - pred).abs() <= jerk_max * dt.powi(3) / 6.0 + 1e-9 * scale,
                        "position jump at {:?} -> {:?}: {} vs {}",
                        pmode,
                        mode,
                        sp.pos_rad[j],
                        pred
                    );
                    prop_assert!(
                        (sp.vel_rad_s[j] - vpred).abs() <= jerk_max * dt * dt / 2.0 + 1e-7,
                        "velocity jump at {:?} -> {:?}: prev {} {} {} now {} {} {} dt {}",
                        pmode,
                        mode,
                        p.pos_rad[j],
                        pv,
                        pa,
                        sp.pos_rad[j],
                        sp.vel_rad_s[j],
                        sp.acc_rad_s2[j],
                        dt
                    );
                }
            }
        }
        if seam && s.blend_ms > 0 {
            // With blending on, a seam never moves the position. (Velocity and
            // acceleration are continuous too while the output is within the limits,
            // see the executor tests; a blend source beyond them is clipped first, and
            // the executed command's continuity is the limit check below.)
            let st = exec.seam_stats();
            prop_assert!(st.max_pos_step_rad < 1e-9, "{st:?}");
        }
        prev_out = Some((sp, now.add_ns(s.lookahead_ms * NS_PER_MS), mode));
        gate.filter(&sp, &mut cmd);
        // The executed command against every limit, by finite differences.
        let n = hist.len();
        let (q0, q1, q2) = (hist[n - 3], hist[n - 2], hist[n - 1]);
        for j in 0..DOF {
            let q = cmd.pos_rad[j];
            prop_assert!(q.is_finite() && cmd.vel_rad_s[j].is_finite());
            prop_assert!(q <= lim.pos_max_rad - lim.pos_margin_rad + 1e-9, "pos {q}");
            prop_assert!(q >= lim.pos_min_rad + lim.pos_margin_rad - 1e-9, "pos {q}");
            let v = (q - q2[j]) / t;
            let v1 = (q2[j] - q1[j]) / t;
            let v0 = (q1[j] - q0[j]) / t;
            let a = (v - v1) / t;
            let a1 = (v1 - v0) / t;
            let jerk = (a - a1) / t;
            prop_assert!(
                v.abs() <= lim.max_vel_rad_s * (1.0 + 1e-9) + 1e-9,
                "vel {v} at {k}"
            );
            prop_assert!(
                a.abs() <= lim.max_acc_rad_s2 * (1.0 + 1e-9) + 1e-6,
                "acc {a} at {k}"
            );
            prop_assert!(
                jerk.abs() <= jerk_max * (1.0 + 1e-9) + 1e-12 / (t * t * t),
                "jerk {jerk} at {k}"
            );
        }
        hist.push(cmd.pos_rad);
        while exec.pop_event().is_some() {}
    }
    prop_assert!(exec.counts().reconciles(), "{:?}", exec.counts());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), ..ProptestConfig::default() })]

    #[test]
    fn executed_commands_keep_every_limit_and_seams_are_smooth(s in scenario()) {
        run(&s)?;
    }
}

/// Checks the next command `q` after the commands `hist` (at least three) against the
/// position range [-1.95, 2.45] and the speed and acceleration limits by finite
/// differences; returns its acceleration and the one before.
fn kept_pos_vel_acc(
    hist: &[f64],
    q: f64,
    t: f64,
    vel: f64,
    acc: f64,
) -> Result<(f64, f64), TestCaseError> {
    prop_assert!(q.is_finite());
    prop_assert!((-1.95 - 1e-9..=2.45 + 1e-9).contains(&q), "pos {q}");
    let n = hist.len();
    let v = (q - hist[n - 1]) / t;
    let v1 = (hist[n - 1] - hist[n - 2]) / t;
    let v0 = (hist[n - 2] - hist[n - 3]) / t;
    let (a, a1) = ((v - v1) / t, (v1 - v0) / t);
    prop_assert!(v.abs() <= vel * (1.0 + 1e-9) + 1e-9, "vel {v}");
    prop_assert!(a.abs() <= acc * (1.0 + 1e-9) + 1e-6, "acc {a}");
    Ok((a, a1))
}

/// A proposal value: mostly plausible, sometimes wild, sometimes not a number.
fn proposal_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => -4.0f64..4.0,
        1 => -1e6f64..1e6,
        1 => prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    /// The gate alone, fed arbitrary proposals (jumps, garbage, out of range).
    #[test]
    fn gate_keeps_every_limit_whatever_is_proposed(
        vel in 0.5f64..3.0,
        acc in 2.0f64..20.0,
        jerk_ratio in 10.0f64..100.0,
        brake_frac in 0.5f64..1.0,
        period_ms in prop::sample::select(vec![1u64, 2, 4, 10, 20]),
        hold in 1usize..200,
        props in prop::collection::vec((proposal_value(), proposal_value(), proposal_value()), 1..40),
    ) {
        let lim = JointLimit {
            pos_min_rad: -2.0,
            pos_max_rad: 2.5,
            pos_margin_rad: 0.05,
            max_vel_rad_s: vel,
            max_acc_rad_s2: acc,
            max_jerk_rad_s3: acc * jerk_ratio,
            brake_acc_rad_s2: acc * brake_frac,
        };
        let limits = JointLimits::uniform(1, lim);
        let period_ns = period_ms * NS_PER_MS;
        let t = period_ns as f64 * 1e-9;
        let mut gate = Gate::new(limits, period_ns, &[0.0; MAX_DOF]);
        let mut cmd = Command::default();
        let mut hist = vec![0.0f64; 3];
        for (p, v, a) in props {
            // Each proposal is held for `hold` periods (a step input), then the next.
            for _ in 0..hold {
                let mut sp = Setpoint { dof: 1, ..Setpoint::default() };
                sp.pos_rad[0] = p;
                sp.vel_rad_s[0] = v;
                sp.acc_rad_s2[0] = a;
                gate.filter(&sp, &mut cmd);
                let q = cmd.pos_rad[0];
                prop_assert!(cmd.vel_rad_s[0].is_finite());
                let (a, a1) = kept_pos_vel_acc(&hist, q, t, vel, acc)?;
                prop_assert!(((a - a1) / t).abs() <= acc * jerk_ratio * (1.0 + 1e-9) + 1e-3, "jerk");
                hist.push(q);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    /// The torque slew-rate limit and the low-pass action filter on the gate, fed
    /// arbitrary proposals and stops: the torque the commanded motion asks of the
    /// joint's inertia changes by at most `max_torque / rise_time` per second in every
    /// period, a stop included (read from the commanded positions' third differences),
    /// and every other limit still holds with the filter in front of the gate.
    #[test]
    fn the_torque_slew_limit_holds_whatever_is_proposed_stops_included(
        vel in 0.5f64..3.0,
        acc in 2.0f64..20.0,
        jerk_ratio in 10.0f64..100.0,
        slew_frac in 0.05f64..0.9,
        inertia in 0.01f64..2.0,
        rise_ms in 5.0f64..200.0,
        cutoff_hz in prop::option::of(0.5f64..20.0),
        period_ms in prop::sample::select(vec![1u64, 2, 4, 10, 20]),
        hold in 1usize..200,
        props in prop::collection::vec(
            (proposal_value(), proposal_value(), proposal_value(), prop::bool::weighted(0.2)),
            1..40,
        ),
    ) {
        let jerk = acc * jerk_ratio;
        let lim = JointLimit {
            pos_min_rad: -2.0,
            pos_max_rad: 2.5,
            pos_margin_rad: 0.05,
            max_vel_rad_s: vel,
            max_acc_rad_s2: acc,
            max_jerk_rad_s3: jerk,
            brake_acc_rad_s2: acc,
        };
        // The torque a drive may add per second, and the jerk it allows this inertia.
        let rise_s = rise_ms * 1e-3;
        let max_torque = slew_frac * jerk * rise_s * inertia;
        let torque_rate = max_torque / rise_s;
        let mut slew = [f64::INFINITY; MAX_DOF];
        slew[0] = max_torque / (rise_s * inertia);
        let period_ns = period_ms * NS_PER_MS;
        let t = period_ns as f64 * 1e-9;
        let mut gate = Gate::new(JointLimits::uniform(1, lim), period_ns, &[0.0; MAX_DOF])
            .with_torque_slew(Some(slew))
            .with_action_filter(cutoff_hz);
        let mut cmd = Command::default();
        let mut hist = vec![0.0f64; 3];
        for (p, v, a, stop) in props {
            for _ in 0..hold {
                let mut sp = Setpoint { dof: 1, stop, ..Setpoint::default() };
                sp.pos_rad[0] = p;
                sp.vel_rad_s[0] = v;
                sp.acc_rad_s2[0] = a;
                gate.filter(&sp, &mut cmd);
                let q = cmd.pos_rad[0];
                let (a, a1) = kept_pos_vel_acc(&hist, q, t, vel, acc)?;
                let dtau_dt = inertia * (a - a1) / t;
                prop_assert!(
                    dtau_dt.abs() <= torque_rate * (1.0 + 1e-9) + 1e-3 * inertia,
                    "torque slew {dtau_dt} N m/s over {torque_rate}"
                );
                hist.push(q);
            }
        }
    }
}
