//! `SeamMode::Ensemble` (ACT's temporal ensembling, made continuous): with a blend the
//! output is C2 however the chunks disagree, judged from the output alone (finite
//! differences of the positions against the reported velocities and accelerations); with
//! no blend the weights switch at once and the same judge sees the steps. Its agreement
//! with LeRobot's `ACTTemporalEnsembler` is `chunkrt-policy/tests/lerobot_golden.rs`.

mod common;

use chunkrt_core::{Executor, Mode, SeamMode, Setpoint, MAX_DOF, NS_PER_MS};
use common::{chunk_from, config, limits, Clock, DOF};

/// Largest mismatch of finite differences (1 ms apart) against the reported velocity
/// and acceleration over 3 s of chunks every 50 ms that disagree with each other (each a
/// different sinusoid, 16 setpoints 50 ms apart), and the fewest members seen playing.
fn play(blend_ms: u64, coeff: f64, members: usize) -> (f64, f64) {
    let (mut e, mut clk) = executor(blend_ms, coeff, members);
    run(&mut e, &mut clk)
}

fn executor(blend_ms: u64, coeff: f64, members: usize) -> (Executor, Clock) {
    let mut cfg = config(DOF);
    cfg.seam = SeamMode::Ensemble;
    cfg.blend_ns = blend_ms * NS_PER_MS;
    cfg.ensemble_coeff = coeff;
    cfg.ensemble_chunks = members;
    cfg.max_chunk_age_ns = 1_000 * NS_PER_MS;
    let clk = Clock::start();
    let e = Executor::new(cfg, limits(DOF), &[0.0; MAX_DOF], clk.now());
    (e, clk)
}

fn run(e: &mut Executor, clk: &mut Clock) -> (f64, f64) {
    let mut prev: Option<Setpoint> = None;
    let (mut dv_worst, mut da_worst) = (0.0f64, 0.0f64);
    let h = 1e-3;
    for k in 0..3_000u64 {
        let now = clk.advance_ms(1);
        if k % 50 == 0 {
            let seq = k / 50 + 1;
            // Chunks that disagree: amplitude, frequency and offset vary with the chunk.
            let (a, w, o) = (
                0.2 + 0.05 * (seq % 3) as f64,
                2.0 + 0.7 * (seq % 4) as f64,
                0.03 * ((seq * 7) % 5) as f64,
            );
            let c = chunk_from(seq, now, now, 50, 16, DOF, move |t, j| {
                a * (w * t + j as f64).sin() + o
            });
            e.offer(&c, now).unwrap();
        }
        let mut sp = Setpoint::default();
        e.tick(now, &mut sp);
        assert_eq!(e.mode(), Mode::Playing, "tick {k}");
        if let Some(p) = prev {
            if k > 100 {
                for j in 0..DOF {
                    let fd_v = (sp.pos_rad[j] - p.pos_rad[j]) / h;
                    let mid_v = 0.5 * (sp.vel_rad_s[j] + p.vel_rad_s[j]);
                    dv_worst = dv_worst.max((fd_v - mid_v).abs());
                    let fd_a = (sp.vel_rad_s[j] - p.vel_rad_s[j]) / h;
                    let mid_a = 0.5 * (sp.acc_rad_s2[j] + p.acc_rad_s2[j]);
                    da_worst = da_worst.max((fd_a - mid_a).abs());
                }
            }
        }
        prev = Some(sp);
    }
    (dv_worst, da_worst)
}

#[test]
fn the_ensemble_is_c2_with_a_blend_and_steps_without() {
    for (coeff, members) in [(0.01, 8), (0.0, 4), (-0.5, 12), (0.5, 2)] {
        let (dv, da) = play(100, coeff, members);
        eprintln!("blend 100 ms, coeff {coeff}, {members} members: velocity {dv:.2e} rad/s, acceleration {da:.2e} rad/s2");
        assert!(dv < 1e-2, "coeff {coeff}: velocity mismatch {dv} rad/s");
        assert!(da < 3.0, "coeff {coeff}: acceleration mismatch {da} rad/s2");
    }
    // The judge sees a step: without a blend, members enter and leave at once.
    let (dv, _) = play(0, 0.01, 8);
    eprintln!("blend 0: velocity mismatch {dv:.2e} rad/s");
    assert!(
        dv > 0.1,
        "no blend, yet the finite differences agree to {dv} rad/s"
    );
}

#[global_allocator]
static GLOBAL: chunkrt_alloc_count::CountingAllocator = chunkrt_alloc_count::CountingAllocator;

/// The ensemble's splice, prune and evaluation touch no heap (the control thread runs them).
#[test]
fn the_ensemble_allocates_nothing() {
    let (mut e, mut clk) = executor(100, 0.01, 12);
    let (_, allocations) = chunkrt_alloc_count::count_allocations(|| run(&mut e, &mut clk));
    assert_eq!(allocations, 0);
}
