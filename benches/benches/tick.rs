//! One control tick: chunkrt's executor + permission gate beside a naive
//! newest-wins linear-interpolation player, 7 joints, 1 ms bus period, a chunk
//! (50 setpoints on the 20 ms grid) arriving every 50 ms. Each iteration is one
//! tick; the chunk arrivals (splice, spline build) are amortised over the 50 ticks
//! between them, as on the real loop.
//!
//! `cargo bench -p chunkrt-benches --bench tick -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use chunkrt_benches::{ChunkStream, NaivePlayer};
use chunkrt_core::{
    Command, Executor, ExecutorConfig, Gate, JointLimit, JointLimits, MonoTime, Resume, Setpoint,
    MAX_DOF, NS_PER_MS,
};
use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};

const DOF: usize = 7;
const PERIOD_NS: u64 = NS_PER_MS;

fn config() -> ExecutorConfig {
    ExecutorConfig {
        dof: DOF,
        max_chunk_age_ns: 200 * NS_PER_MS,
        blend_ns: 40 * NS_PER_MS,
        seam: chunkrt_core::SeamMode::Crossfade,
        lookahead_ns: 0,
        safe_stop_after_ns: 1_000 * NS_PER_MS,
        resume: Resume::Auto,
        dt_min_ns: NS_PER_MS,
        dt_max_ns: 100 * NS_PER_MS,
        min_len: 2,
        max_time_offset_ns: 1_000 * NS_PER_MS,
        ensemble_coeff: 0.0,
        ensemble_chunks: 8,
    }
}

/// Executor + gate on a stream of sine amplitude `amp`; returns the gate's
/// intervention count so the caller can check which regime was measured (`None`
/// when a name filter skipped the bench).
fn bench_chunkrt(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, amp: f64) -> Option<u64> {
    let start = MonoTime::from_ms(1_000);
    let limits = JointLimits::uniform(DOF, JointLimit::default());
    let mut exec = Executor::new(config(), limits, &[0.0; MAX_DOF], start);
    let mut gate = Gate::new(limits, PERIOD_NS, &[0.0; MAX_DOF]);
    let mut stream = ChunkStream::new(DOF, amp, start);
    let mut now = start;
    let mut sp = Setpoint::default();
    let mut cmd = Command::default();
    group.bench_function(name, |b| {
        b.iter(|| {
            now = now.add_ns(PERIOD_NS);
            if let Some(chunk) = stream.poll(now) {
                let _ = exec.offer(chunk, now);
            }
            exec.tick(now, &mut sp);
            let mask = gate.filter(&sp, &mut cmd);
            black_box((&cmd, mask));
        })
    });
    if exec.counts().offered == 0 {
        return None;
    }
    // The measured loop really played chunks (not a fallback hold).
    assert!(exec.counts().used > 0, "executor never played a chunk");
    assert_eq!(
        exec.counts().fallback_entries,
        0,
        "fallback during the bench"
    );
    Some(gate.counts().iter().sum())
}

fn tick(c: &mut Criterion) {
    let mut group = c.benchmark_group("tick_7dof_1ms");
    let nominal = bench_chunkrt(&mut group, "chunkrt_executor_gate", 0.2);
    let saturated = bench_chunkrt(&mut group, "chunkrt_executor_gate_saturated", 0.4);
    // Within the limits the gate only acts at start-up (blend from rest); beyond
    // them it acts all the time.
    if let (Some(nominal), Some(saturated)) = (nominal, saturated) {
        assert!(
            nominal < saturated,
            "nominal {nominal} vs saturated {saturated} interventions"
        );
    }

    // Worst case of the gate: every joint pressed against its upper position limit
    // (the braking bound is evaluated exactly and bisected on every tick).
    let limits = JointLimits::uniform(DOF, JointLimit::default());
    let near = [limits.joint[0].pos_max_rad - limits.joint[0].pos_margin_rad; MAX_DOF];
    let mut gate = Gate::new(limits, PERIOD_NS, &near);
    let mut push = Setpoint {
        dof: DOF as u16,
        ..Setpoint::default()
    };
    push.pos_rad = [10.0; MAX_DOF];
    push.vel_rad_s = [2.0; MAX_DOF];
    let mut cmd = Command::default();
    group.bench_function("gate_only_pressed_on_position_limit", |b| {
        b.iter(|| black_box(gate.filter(black_box(&push), &mut cmd)))
    });

    // The gate's other hard case, averaged over a 2 s cycle: every joint races from
    // 0 toward a target beyond its upper limit (velocity bound, then the braking
    // bound bisected every tick while it brakes), comes to rest on the limit, and
    // starts over.
    let mut gate = Gate::new(limits, PERIOD_NS, &[0.0; MAX_DOF]);
    let mut k = 0u32;
    group.bench_function("gate_only_racing_into_position_limit_cycle", |b| {
        b.iter(|| {
            k += 1;
            if k == 2_000 {
                k = 0;
                gate.resync(&[0.0; MAX_DOF]);
            }
            black_box(gate.filter(black_box(&push), &mut cmd))
        })
    });

    let mut naive = NaivePlayer::default();
    let start = MonoTime::from_ms(1_000);
    let mut stream = ChunkStream::new(DOF, 0.2, start);
    let mut now = start;
    let mut out = [0.0; MAX_DOF];
    group.bench_function("naive_newest_wins_lerp", |b| {
        b.iter(|| {
            now = now.add_ns(PERIOD_NS);
            if let Some(chunk) = stream.poll(now) {
                naive.offer(chunk);
            }
            naive.tick(now, &mut out);
            black_box(&out);
        })
    });
    group.finish();
}

criterion_group!(benches, tick);
criterion_main!(benches);
