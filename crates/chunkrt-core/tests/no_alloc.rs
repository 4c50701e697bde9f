//! `offer`, `tick` and `filter` never touch the heap: a counting global allocator
//! over 10 000 ticks of executor + gate with chunks (good, late, garbage) arriving,
//! seams, a stall through the whole fallback ladder and a forced fallback.

mod common;

use chunkrt_alloc_count::{count_allocations, CountingAllocator};
use chunkrt_core::{Command, Executor, Gate, ModeChangeReason, Setpoint, MAX_DOF, NS_PER_MS};
use common::*;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

#[test]
fn ten_thousand_ticks_without_allocation() {
    let mut clk = Clock::start();
    let lim = limits(DOF);
    let mut e = Executor::new(config(DOF), lim, &[0.0; MAX_DOF], clk.now());
    let mut g = Gate::new(lim, NS_PER_MS, &[0.0; MAX_DOF]);
    let (mut sp, mut cmd) = (Setpoint::default(), Command::default());
    // Chunks prepared up front (the runtime receives them by copy from the buffer).
    let now = clk.now();
    let mut good = chunk_from(0, now, now, 20, 30, DOF, |t, j| 0.3 * (t + j as f64).sin());
    let mut garbage = good;
    garbage.pos_rad[4][1] = f64::NAN;
    let mut seq = 0;
    let ((), allocs) = count_allocations(|| {
        for k in 0..10_000u64 {
            let now = clk.advance_ms(1);
            // A stall from 4 s to 6 s walks the whole ladder.
            if k % 50 == 0 && !(4_000..6_000).contains(&k) {
                seq += 1;
                good.seq = seq;
                good.t_obs = now.add_signed_ns(-((k % 40) as i64) * NS_PER_MS as i64);
                good.t_start = good.t_obs;
                let _ = e.offer(&good, now);
                garbage.seq = seq + 1;
                let _ = e.offer(&garbage, now);
            }
            if k == 8_000 {
                e.force_fallback(now, ModeChangeReason::OutOfDomain);
                g.flag_out_of_domain(Some(0));
            }
            e.tick(now, &mut sp);
            g.filter(&sp, &mut cmd);
            while e.pop_event().is_some() {}
            std::hint::black_box((g.interventions(), e.seam_stats(), e.counts()));
        }
    });
    assert_eq!(allocs, 0, "{allocs} allocations on the control path");
    assert!(e.counts().used > 100 && e.counts().fallback_entries >= 2);
}

/// The gate with the Cartesian stage (tool speed, a keep-out plane and a touched one)
/// over 10 000 ticks at 1 ms of a proposal swinging the tool into both planes: the
/// projection, the gate's repeated passes, the stop preview and the braking fallback
/// all run (checked by their counts) without touching the heap.
#[test]
fn the_cartesian_stage_does_not_allocate() {
    use chunkrt_core::{CartesianFilter, CartesianLimits, Chain, Constraint, Iso, Link, Plane};
    let link = |x: f64, y: f64| Link {
        fixed: Iso::from_pos_quat([x, y, 0.0], [1.0, 0.0, 0.0, 0.0]),
        anchor: [0.0; 3],
        axis: [0.0, 0.0, 1.0],
    };
    // A planar arm of DOF links 0.3 m long.
    let links: Vec<Link> = (0..DOF)
        .map(|j| link(if j == 0 { 0.0 } else { 0.3 }, 0.0))
        .collect();
    let chain = Chain::new(
        &links,
        Iso::from_pos_quat([0.3, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]),
    )
    .unwrap();
    let reach = 0.3 * DOF as f64;
    let planes = [
        Plane::new([0.0, 0.3 * reach, 0.0], [0.0, -1.0, 0.0]).unwrap(),
        Plane::new([0.0, -0.3 * reach, 0.0], [0.0, 1.0, 0.0])
            .unwrap()
            .touched_at(0.02)
            .unwrap(),
    ];
    let cart = CartesianFilter::new(
        chain,
        CartesianLimits::new(Some(0.25), 2.0, &planes).unwrap(),
    );
    let lim = limits(DOF);
    let mut g = Gate::new(lim, NS_PER_MS, &[0.0; MAX_DOF]).with_cartesian(Some(cart));
    let (mut sp, mut cmd) = (Setpoint::default(), Command::default());
    sp.dof = DOF as u16;
    let ((), allocs) = count_allocations(|| {
        for k in 0..10_000u64 {
            let phase = k as f64 * 1e-3;
            for j in 0..DOF {
                sp.pos_rad[j] = 1.2 * (0.7 * phase).sin();
            }
            sp.stop = (7_000..7_200).contains(&k);
            g.filter(&sp, &mut cmd);
            std::hint::black_box(g.interventions());
        }
    });
    assert_eq!(allocs, 0, "{allocs} allocations on the control path");
    let counts = g.counts();
    assert!(counts[Constraint::Approach as usize] > 0, "{counts:?}");
    assert!(counts[Constraint::ToolSpeed as usize] > 0, "{counts:?}");
}
