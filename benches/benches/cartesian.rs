//! The gate's Cartesian stage (issue 57) beside the gate without it, 7 joints (the
//! Panda's chain written out by hand, as in `chunkrt-core/tests/cartesian.rs`), 1 ms
//! bus period, a proposal swinging every joint. Three regimes, one iteration a tick:
//! - `gate`: the permission gate alone;
//! - `gate_cartesian_idle`: with a plane the tool never nears and no speed limit
//!   (what the stage costs when it does not act: one projection, the exact check, the
//!   stop preview's distance test);
//! - `gate_cartesian_far`: the same with a tool-speed limit of 0.25 m/s the motion
//!   exceeds (the gate run again on the bounded step);
//! - `gate_cartesian_near`: with a plane 2 cm under the start, the motion driving into
//!   it (repeated gate passes, the stop preview, braking).
//!
//! `cargo bench -p chunkrt-benches --bench cartesian -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use chunkrt_core::{
    CartesianFilter, CartesianLimits, Chain, Command, Constraint, Gate, Iso, JointLimit,
    JointLimits, Link, Plane, Setpoint, MAX_DOF, NS_PER_MS,
};
use criterion::{criterion_group, criterion_main, Criterion};

const DOF: usize = 7;

fn panda() -> Chain {
    let bodies: [([f64; 3], [f64; 4]); DOF] = [
        ([0.0, 0.0, 0.333], [1.0, 0.0, 0.0, 0.0]),
        ([0.0, 0.0, 0.0], [1.0, -1.0, 0.0, 0.0]),
        ([0.0, -0.316, 0.0], [1.0, 1.0, 0.0, 0.0]),
        ([0.0825, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]),
        ([-0.0825, 0.384, 0.0], [1.0, -1.0, 0.0, 0.0]),
        ([0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]),
        ([0.088, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]),
    ];
    let links = bodies.map(|(pos, quat)| Link {
        fixed: Iso::from_pos_quat(pos, quat),
        anchor: [0.0; 3],
        axis: [0.0, 0.0, 1.0],
    });
    Chain::new(
        &links,
        Iso::from_pos_quat([0.0, 0.0, 0.107], [1.0, 0.0, 0.0, 0.0]),
    )
    .unwrap()
}

const START: [f64; DOF] = [0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.8];

fn gate(plane_below_m: Option<f64>, speed_m_s: Option<f64>) -> Gate {
    let limits = JointLimits::uniform(
        DOF,
        JointLimit {
            pos_min_rad: -3.0,
            pos_max_rad: 3.8,
            ..JointLimit::default()
        },
    );
    let mut start = [0.0; MAX_DOF];
    start[..DOF].copy_from_slice(&START);
    let g = Gate::new(limits, NS_PER_MS, &start);
    let Some(below) = plane_below_m else {
        return g;
    };
    let chain = panda();
    let p = chain.tool_point(&start);
    let plane = Plane::new([p[0], p[1], p[2] - below], [0.0, 0.0, 1.0]).unwrap();
    let limits = CartesianLimits::new(speed_m_s, 2.0, &[plane]).unwrap();
    g.with_cartesian(Some(CartesianFilter::new(chain, limits)))
}

/// Ticks of `gate` on the swinging proposal; returns the approach and tool-speed
/// counts so the caller can check which regime was measured.
fn bench(c: &mut Criterion, name: &str, mut g: Gate) -> [u64; 2] {
    let mut sp = Setpoint {
        dof: DOF as u16,
        ..Setpoint::default()
    };
    let mut cmd = Command::default();
    let mut k = 0u64;
    c.bench_function(name, |b| {
        b.iter(|| {
            k += 1;
            let phase = k as f64 * 1e-3;
            for (j, (p, s)) in sp.pos_rad.iter_mut().zip(START).enumerate() {
                *p = s + 0.6 * (0.8 * phase + j as f64).sin();
            }
            let mask = g.filter(&sp, &mut cmd);
            black_box((&cmd, mask));
        })
    });
    let counts = g.counts();
    [
        counts[Constraint::Approach as usize],
        counts[Constraint::ToolSpeed as usize],
    ]
}

fn cartesian(c: &mut Criterion) {
    bench(c, "gate", gate(None, None));
    let idle = bench(c, "gate_cartesian_idle", gate(Some(10.0), None));
    let far = bench(c, "gate_cartesian_far", gate(Some(10.0), Some(0.25)));
    let near = bench(c, "gate_cartesian_near", gate(Some(0.02), Some(0.25)));
    if far != [0, 0] || near != [0, 0] {
        // The regimes are what they say (when not filtered out by name).
        assert_eq!(idle, [0, 0], "the idle stage acted: {idle:?}");
        assert!(far[0] == 0 && far[1] > 0, "far: {far:?}");
        assert!(near[0] > 0, "the near plane never acted: {near:?}");
    }
}

criterion_group!(benches, cartesian);
criterion_main!(benches);
