//! Executor behaviour with a hand-driven clock: time alignment, lookahead,
//! rejection reasons, blending and every rung of the fallback ladder.

mod common;

use chunkrt_core::{
    Executor, Mode, ModeChangeReason, MonoTime, RejectReason, Resume, Setpoint, MAX_DOF, NS_PER_MS,
};
use common::*;

fn new_exec(cfg: chunkrt_core::ExecutorConfig, now: MonoTime) -> Executor {
    Executor::new(cfg, limits(cfg.dof), &[0.0; MAX_DOF], now)
}

fn events(e: &mut Executor) -> Vec<(Mode, Mode, ModeChangeReason)> {
    std::iter::from_fn(|| e.pop_event())
        .map(|ev| (ev.from, ev.to, ev.reason))
        .collect()
}

#[test]
fn starts_holding_then_plays_the_first_fresh_chunk() {
    let mut clk = Clock::start();
    let mut e = new_exec(config(DOF), clk.now());
    let mut sp = Setpoint::default();
    e.tick(clk.now(), &mut sp);
    assert_eq!(e.mode(), Mode::Holding);
    assert_eq!(sp.pos_rad[0], 0.0);
    let now = clk.advance_ms(1);
    e.offer(&still_chunk(1, now, 0.3), now).unwrap();
    e.tick(now, &mut sp);
    assert_eq!(e.mode(), Mode::Playing);
    assert_eq!(e.first_use().map(|c| c.seq), Some(1));
    assert_eq!(sp.chunk_seq, 1);
    // Blended from rest: no jump at the seam, arrives after the blend window.
    assert!(sp.pos_rad[0].abs() < 1e-12);
    assert_eq!(
        events(&mut e),
        vec![(Mode::Holding, Mode::Playing, ModeChangeReason::FreshChunk)]
    );
    clk.advance_ms(40);
    e.tick(clk.now(), &mut sp);
    assert!((sp.pos_rad[0] - 0.3).abs() < 1e-12);
    assert_eq!(e.first_use(), None);
}

#[test]
fn late_chunks_are_entered_at_the_current_time() {
    let mut clk = Clock::start();
    let mut cfg = config(1);
    cfg.blend_ns = 0;
    let mut e = new_exec(cfg, clk.now());
    // Setpoints describe p(t) = t - t0 (1 rad/s), started 30 ms ago.
    let t0 = clk.now();
    let now = clk.advance_ms(30);
    let c = chunk_from(1, t0, t0, 20, 10, 1, |t, _| t - t0.as_secs_f64());
    e.offer(&c, now).unwrap();
    let mut sp = Setpoint::default();
    e.tick(now, &mut sp);
    assert!((sp.pos_rad[0] - 0.030).abs() < 1e-9, "{}", sp.pos_rad[0]);
    assert!((sp.vel_rad_s[0] - 1.0).abs() < 1e-9);
}

#[test]
fn lookahead_shifts_the_sampled_time() {
    let mut clk = Clock::start();
    let mut cfg = config(1);
    cfg.blend_ns = 0;
    cfg.lookahead_ns = 5 * NS_PER_MS;
    let mut e = new_exec(cfg, clk.now());
    let t0 = clk.now();
    let c = chunk_from(1, t0, t0, 20, 10, 1, |t, _| t - t0.as_secs_f64());
    e.offer(&c, t0).unwrap();
    let mut sp = Setpoint::default();
    let now = clk.advance_ms(10);
    e.tick(now, &mut sp);
    assert!((sp.pos_rad[0] - 0.015).abs() < 1e-9, "{}", sp.pos_rad[0]);
}

#[test]
fn future_chunks_wait_for_their_start_time() {
    let mut clk = Clock::start();
    let mut e = new_exec(config(DOF), clk.now());
    let now = clk.now();
    let c = chunk_from(1, now, now.add_ns(10 * NS_PER_MS), 20, 10, DOF, |_, _| 0.1);
    e.offer(&c, now).unwrap();
    let mut sp = Setpoint::default();
    e.tick(clk.advance_ms(5), &mut sp);
    assert_eq!(e.mode(), Mode::Holding);
    assert_eq!(e.counts().pending, 1);
    e.tick(clk.advance_ms(5), &mut sp);
    assert_eq!(e.mode(), Mode::Playing);
    assert!(e.counts().reconciles());
}

#[test]
fn every_rejection_reason_is_named_and_leaves_the_chunk_playing() {
    let mut clk = Clock::start();
    let cfg = config(DOF);
    let mut e = new_exec(cfg, clk.now());
    let now = clk.now();
    e.offer(&still_chunk(5, now, 0.2), now).unwrap();
    let mut sp = Setpoint::default();
    e.tick(now, &mut sp);
    let now = clk.advance_ms(1);

    let mut nan = still_chunk(6, now, 0.2);
    nan.pos_rad[3][1] = f64::NAN;
    assert_eq!(
        e.offer(&nan, now),
        Err(RejectReason::NonFinite { row: 3, joint: 1 })
    );
    let mut inf = still_chunk(6, now, 0.2);
    inf.pos_rad[0][2] = f64::INFINITY;
    assert_eq!(
        e.offer(&inf, now),
        Err(RejectReason::NonFinite { row: 0, joint: 2 })
    );
    let wrong_dof = chunk_from(6, now, now, 20, 10, 2, |_, _| 0.0);
    assert_eq!(
        e.offer(&wrong_dof, now),
        Err(RejectReason::WrongDof {
            got: 2,
            expected: 3
        })
    );
    let short = chunk_from(6, now, now, 20, 1, DOF, |_, _| 0.0);
    assert_eq!(
        e.offer(&short, now),
        Err(RejectReason::WrongLength { got: 1 })
    );
    let mut long = still_chunk(6, now, 0.0);
    long.len = 65;
    assert_eq!(
        e.offer(&long, now),
        Err(RejectReason::WrongLength { got: 65 })
    );
    assert_eq!(
        e.offer(&still_chunk(5, now, 0.0), now),
        Err(RejectReason::StaleSeq { seq: 5, last: 5 })
    );
    let mut dt = still_chunk(6, now, 0.0);
    dt.dt_ns = 0;
    assert_eq!(
        e.offer(&dt, now),
        Err(RejectReason::DtOutOfRange { dt_ns: 0 })
    );
    dt.dt_ns = 200 * NS_PER_MS;
    assert_eq!(
        e.offer(&dt, now),
        Err(RejectReason::DtOutOfRange {
            dt_ns: 200 * NS_PER_MS
        })
    );
    let far = chunk_from(
        6,
        now,
        now.add_ns(2_000 * NS_PER_MS),
        20,
        10,
        DOF,
        |_, _| 0.0,
    );
    assert_eq!(
        e.offer(&far, now),
        Err(RejectReason::StartTooFar {
            offset_ns: 2_000 * NS_PER_MS as i64
        })
    );
    let old_obs = now.add_signed_ns(-300 * NS_PER_MS as i64);
    let old = chunk_from(6, old_obs, now, 20, 10, DOF, |_, _| 0.0);
    assert_eq!(
        e.offer(&old, now),
        Err(RejectReason::Expired {
            age_ns: 300 * NS_PER_MS
        })
    );
    let passed_start = now.add_signed_ns(-100 * NS_PER_MS as i64);
    let passed = chunk_from(6, now, passed_start, 20, 3, DOF, |_, _| 0.0);
    assert_eq!(
        e.offer(&passed, now),
        Err(RejectReason::HorizonPassed {
            late_ns: 60 * NS_PER_MS
        })
    );
    e.tick(now, &mut sp);
    assert_eq!(e.mode(), Mode::Playing);
    assert_eq!(sp.chunk_seq, 5);
    let c = e.counts();
    assert_eq!((c.offered, c.rejected, c.accepted, c.used), (12, 11, 1, 1));
    assert!(c.reconciles());
}

#[test]
fn stalled_chunks_walk_the_whole_ladder_and_auto_resume() {
    let mut clk = Clock::start();
    let cfg = config(DOF);
    let mut e = new_exec(cfg, clk.now());
    let mut sp = Setpoint::default();
    // A moving chunk (0.5 rad/s) long enough that it expires by age, not horizon.
    let t0 = clk.now();
    let c = chunk_from(1, t0, t0, 20, 40, DOF, |t, _| 0.5 * (t - t0.as_secs_f64()));
    e.offer(&c, t0).unwrap();
    let mut prev = None::<Setpoint>;
    let mut saw = vec![];
    for _ in 0..1_600 {
        let now = clk.advance_ms(1);
        e.tick(now, &mut sp);
        if let Some(p) = prev {
            // Continuous in position and velocity through every mode change.
            assert!((sp.pos_rad[0] - p.pos_rad[0]).abs() < 2.5 * 1e-3);
            assert!((sp.vel_rad_s[0] - p.vel_rad_s[0]).abs() < 0.5);
        }
        prev = Some(sp);
        while let Some(ev) = e.pop_event() {
            saw.push((ev.to, ev.reason));
        }
    }
    assert_eq!(
        saw,
        vec![
            (Mode::Playing, ModeChangeReason::FreshChunk),
            (Mode::Decelerating, ModeChangeReason::ChunkExpired),
            (Mode::Holding, ModeChangeReason::AtRest),
            (Mode::SafeStop, ModeChangeReason::SafeStopTimeout),
        ]
    );
    assert!(e.quick_stop_requested());
    assert_eq!(sp.vel_rad_s[0], 0.0);
    let c = e.counts();
    assert_eq!((c.expired, c.fallback_entries), (1, 1));
    // Auto: a fresh chunk brings it back.
    let now = clk.advance_ms(1);
    e.offer(&still_chunk(2, now, sp.pos_rad[0]), now).unwrap();
    e.tick(now, &mut sp);
    assert_eq!(e.mode(), Mode::Playing);
    assert!(e.counts().reconciles());
}

#[test]
fn horizon_end_is_its_own_reason() {
    let mut clk = Clock::start();
    let mut e = new_exec(config(DOF), clk.now());
    let mut sp = Setpoint::default();
    let now = clk.now();
    e.offer(&chunk_from(1, now, now, 20, 3, DOF, |_, _| 0.0), now)
        .unwrap();
    for _ in 0..50 {
        e.tick(clk.advance_ms(1), &mut sp);
    }
    let evs = events(&mut e);
    assert_eq!(
        evs[1],
        (
            Mode::Playing,
            Mode::Decelerating,
            ModeChangeReason::HorizonEnd
        )
    );
    assert_eq!(e.counts().horizon_ended, 1);
}

#[test]
fn manual_resume_needs_rearm_after_the_ladder() {
    let mut clk = Clock::start();
    let mut cfg = config(DOF);
    cfg.resume = Resume::Manual;
    let mut e = new_exec(cfg, clk.now());
    let mut sp = Setpoint::default();
    let now = clk.now();
    // A new executor is armed: the first chunk plays.
    e.offer(&chunk_from(1, now, now, 20, 3, DOF, |_, _| 0.0), now)
        .unwrap();
    e.tick(now, &mut sp);
    assert_eq!(e.mode(), Mode::Playing);
    for _ in 0..200 {
        e.tick(clk.advance_ms(1), &mut sp);
    }
    assert_eq!(e.mode(), Mode::Holding);
    assert!(!e.armed());
    let now = clk.advance_ms(1);
    assert_eq!(
        e.offer(&still_chunk(2, now, 0.0), now),
        Err(RejectReason::NotArmed)
    );
    e.rearm(now);
    e.offer(&still_chunk(3, now, 0.0), now).unwrap();
    e.tick(now, &mut sp);
    assert_eq!(e.mode(), Mode::Playing);
}

#[test]
fn rearm_leaves_safe_stop() {
    let mut clk = Clock::start();
    let mut cfg = config(DOF);
    cfg.resume = Resume::Manual;
    let mut e = new_exec(cfg, clk.now());
    let mut sp = Setpoint::default();
    for _ in 0..1_100 {
        e.tick(clk.advance_ms(1), &mut sp);
    }
    assert_eq!(e.mode(), Mode::SafeStop);
    let now = clk.advance_ms(1);
    e.rearm(now);
    assert_eq!(e.mode(), Mode::Holding);
    let evs = events(&mut e);
    assert_eq!(
        evs.last(),
        Some(&(Mode::SafeStop, Mode::Holding, ModeChangeReason::Rearmed))
    );
    e.tick(clk.advance_ms(1), &mut sp);
    assert_eq!(e.mode(), Mode::Holding, "safe-stop timer restarted");
}

#[test]
fn forced_fallback_takes_authority_until_a_newer_observation() {
    let mut clk = Clock::start();
    let mut e = new_exec(config(DOF), clk.now());
    let mut sp = Setpoint::default();
    let now = clk.now();
    e.offer(&still_chunk(1, now, 0.0), now).unwrap();
    e.tick(now, &mut sp);
    let now = clk.advance_ms(1);
    e.force_fallback(now, ModeChangeReason::OutOfDomain);
    assert_eq!(e.mode(), Mode::Decelerating);
    e.tick(now, &mut sp);
    // Already at rest: the stop is empty and it holds at once.
    assert_eq!(e.mode(), Mode::Holding);
    // A chunk computed from an observation before the fallback cannot resume.
    let stale_obs = now.add_signed_ns(-(NS_PER_MS as i64));
    let c = chunk_from(2, stale_obs, now, 20, 10, DOF, |_, _| 0.0);
    assert!(matches!(
        e.offer(&c, now),
        Err(RejectReason::PredatesFallback { .. })
    ));
    let now = clk.advance_ms(1);
    e.offer(&still_chunk(3, now, 0.0), now).unwrap();
    e.tick(now, &mut sp);
    assert_eq!(e.mode(), Mode::Playing);
    let evs = events(&mut e);
    assert!(evs.contains(&(
        Mode::Playing,
        Mode::Decelerating,
        ModeChangeReason::OutOfDomain
    )));
}

#[test]
fn blending_removes_the_seam_jump_that_newest_wins_shows() {
    for (blend_ms, expect_jump) in [(40, false), (0, true)] {
        let mut clk = Clock::start();
        let mut cfg = config(1);
        cfg.blend_ns = blend_ms * NS_PER_MS;
        let mut e = new_exec(cfg, clk.now());
        let mut sp = Setpoint::default();
        let now = clk.now();
        e.offer(&chunk_from(1, now, now, 20, 25, 1, |_, _| 0.0), now)
            .unwrap();
        e.tick(now, &mut sp);
        for _ in 0..100 {
            e.tick(clk.advance_ms(1), &mut sp);
        }
        // Second chunk disagrees by 0.1 rad.
        let now = clk.advance_ms(1);
        e.offer(&chunk_from(2, now, now, 20, 25, 1, |_, _| 0.1), now)
            .unwrap();
        let before = sp;
        e.tick(now, &mut sp);
        let s = e.seam_stats();
        assert_eq!(s.seams, 2);
        if expect_jump {
            assert!((s.max_pos_step_rad - 0.1).abs() < 1e-12);
            assert!((sp.pos_rad[0] - before.pos_rad[0] - 0.1).abs() < 1e-12);
        } else {
            assert!(s.max_pos_step_rad < 1e-12 && s.max_vel_step_rad_s < 1e-9);
            assert!((sp.pos_rad[0] - before.pos_rad[0]).abs() < 1e-12);
        }
    }
}

#[test]
fn chunks_that_agree_are_played_exactly_whatever_the_blend_length() {
    // A chunk every 20 ms, all samples of one trajectory: a blend 10x longer than the
    // chunk interval starts every seam on the trajectory being played (a chain of
    // blends), so the output is that trajectory, with its velocity and acceleration.
    // (Continuing the output state with constant acceleration from each seam, as a
    // single-blend executor must, leaves it by millimetres within one blend.)
    let f = |t: f64, j: usize| 0.3 * (2.0 * t + j as f64).sin();
    let df = |t: f64, j: usize| 0.6 * (2.0 * t + j as f64).cos();
    let mut clk = Clock::start();
    let mut cfg = config(DOF);
    cfg.blend_ns = 200 * NS_PER_MS;
    let now = clk.now();
    let mut init = [0.0; MAX_DOF];
    for (j, p) in init.iter_mut().enumerate().take(DOF) {
        *p = f(now.as_secs_f64(), j);
    }
    let mut e = Executor::new(cfg, limits(DOF), &init, now);
    let mut sp = Setpoint::default();
    let mut seq = 0;
    let mut worst = (0.0f64, 0.0f64);
    for k in 0..2_000u64 {
        let now = clk.advance_ms(1);
        if k % 20 == 0 {
            seq += 1;
            e.offer(&chunk_from(seq, now, now, 20, 30, DOF, f), now)
                .unwrap();
        }
        e.tick(now, &mut sp);
        // The first chunk blends in from rest; from then on every seam is chained.
        if k >= 300 {
            let t = now.as_secs_f64();
            for j in 0..DOF {
                worst.0 = worst.0.max((sp.pos_rad[j] - f(t, j)).abs());
                worst.1 = worst.1.max((sp.vel_rad_s[j] - df(t, j)).abs());
            }
        }
    }
    assert_eq!(e.seam_stats().seams, 100);
    assert_eq!(e.seam_stats().blend_restarts, 0);
    // The spline through 20 ms knots of a 2 rad/s sine is within ~1e-6 rad of it.
    assert!(worst.0 < 1e-5, "position off the trajectory by {}", worst.0);
    assert!(worst.1 < 1e-3, "velocity off the trajectory by {}", worst.1);
}

#[test]
fn a_full_blend_chain_restarts_from_the_output_state_and_says_so() {
    // A 1 s blend with a chunk every 20 ms needs 50 layers; the chain holds 15, then
    // blends the next chunk in from the output state. Position stays continuous.
    let mut clk = Clock::start();
    let mut cfg = config(1);
    cfg.blend_ns = 1_000 * NS_PER_MS;
    let mut e = new_exec(cfg, clk.now());
    let mut sp = Setpoint::default();
    let mut prev: Option<f64> = None;
    for k in 0..1_000u64 {
        let now = clk.advance_ms(1);
        if k % 20 == 0 {
            let target = if (k / 20) % 2 == 0 { 0.05 } else { -0.05 };
            e.offer(&chunk_from(k + 1, now, now, 20, 30, 1, |_, _| target), now)
                .unwrap();
        }
        e.tick(now, &mut sp);
        assert!(sp.pos_rad[0].is_finite());
        if let Some(p) = prev {
            assert!((sp.pos_rad[0] - p).abs() < 2e-3, "jump at tick {k}");
        }
        prev = Some(sp.pos_rad[0]);
    }
    let st = e.seam_stats();
    assert_eq!(st.seams, 50);
    assert!(st.blend_restarts > 0, "{st:?}");
    assert!(st.max_pos_step_rad < 1e-12, "{st:?}");
}

#[test]
fn counters_follow_every_chunk_to_one_outcome() {
    let mut clk = Clock::start();
    let mut e = new_exec(config(DOF), clk.now());
    let mut sp = Setpoint::default();
    let now = clk.now();
    // Two chunks before a tick: the first never plays (superseded).
    e.offer(&still_chunk(1, now, 0.0), now).unwrap();
    e.offer(&still_chunk(2, now, 0.0), now).unwrap();
    e.tick(now, &mut sp);
    assert_eq!(e.first_use().map(|c| c.seq), Some(2));
    // A chunk that starts later than its freshness lasts is discarded unplayed.
    let now = clk.advance_ms(1);
    let late_start = now.add_ns(300 * NS_PER_MS);
    e.offer(
        &chunk_from(3, now, late_start, 20, 10, DOF, |_, _| 0.0),
        now,
    )
    .unwrap();
    for _ in 0..310 {
        e.tick(clk.advance_ms(1), &mut sp);
    }
    // A rejected one.
    let now = clk.advance_ms(1);
    assert!(e.offer(&still_chunk(3, now, 0.0), now).is_err());
    let c = e.counts();
    assert_eq!(
        (
            c.offered,
            c.accepted,
            c.rejected,
            c.used,
            c.superseded,
            c.discarded,
            c.pending
        ),
        (4, 3, 1, 1, 1, 1, 0)
    );
    assert!(c.reconciles());
    assert_eq!(
        e.current_chunk(),
        None,
        "the ladder took over after chunk 2 expired"
    );
}

#[test]
fn the_plan_state_is_the_newest_chunk_without_the_blend_toward_it() {
    let mut clk = Clock::start();
    let mut cfg = config(1);
    cfg.blend_ns = 100 * NS_PER_MS;
    let mut e = new_exec(cfg, clk.now());
    let mut sp = Setpoint::default();
    let mut plan = chunkrt_core::Pva::default();
    // Before any chunk: the plan is where the executor holds.
    e.plan_state(clk.now(), &mut plan);
    assert_eq!((plan.pos_rad[0], plan.vel_rad_s[0]), (0.0, 0.0));
    // A chunk moving at 1 rad/s from 0.1 rad: blended in from rest over 100 ms.
    let t0 = clk.now();
    let c = chunk_from(1, t0, t0, 20, 20, 1, |t, _| 0.1 + (t - t0.as_secs_f64()));
    e.offer(&c, t0).unwrap();
    let now = clk.advance_ms(30);
    e.tick(now, &mut sp);
    assert_eq!(e.mode(), Mode::Playing);
    e.plan_state(now, &mut plan);
    // The plan is the chunk itself at `now`; the output is still blending toward it.
    assert!(
        (plan.pos_rad[0] - 0.130).abs() < 1e-9,
        "{}",
        plan.pos_rad[0]
    );
    assert!(
        (plan.vel_rad_s[0] - 1.0).abs() < 1e-9,
        "{}",
        plan.vel_rad_s[0]
    );
    assert!((sp.pos_rad[0] - 0.130).abs() > 1e-3, "{}", sp.pos_rad[0]);
    assert!((sp.vel_rad_s[0] - 1.0).abs() > 1e-2, "{}", sp.vel_rad_s[0]);
    // Without a chunk (the fallback), the plan is the last command the executor was told of.
    let mut cmd = chunkrt_core::Pva::default();
    cmd.pos_rad[0] = 0.2;
    cmd.vel_rad_s[0] = 0.5;
    e.note_command(&cmd);
    e.force_fallback(now, ModeChangeReason::BackendError);
    e.plan_state(now, &mut plan);
    assert_eq!((plan.pos_rad[0], plan.vel_rad_s[0]), (0.2, 0.5));
}
