//! The Cartesian filter judged by what leaves it, with the arm's tool point computed by
//! the forward kinematics at the commanded poses:
//! * no step approaches a declared plane faster than the braking curve allows at the
//!   pose it reaches (`v² ≤ 2·a·z'`, `z' ≥ 0`), whatever the pose, plane and proposal;
//! * no step moves the tool faster than the speed limit;
//! * a step that keeps the bounds passes unchanged; one that does not keeps its motion
//!   along the plane (minimal intervention, not a stop);
//! * through the whole `Gate`, a proposal aimed behind a plane never takes the
//!   commanded tool through it nor toward it faster than the envelope, and the joints'
//!   own limits still hold; a stop bypasses the filter.
//!
//! The arm is the Panda's chain written out by hand from `models/franka_panda/panda.xml`
//! (independent of the MJCF reader, which MuJoCo checks in `chunkrt-mujoco`).

use chunkrt_core::{
    CartesianFilter, CartesianLimits, Chain, Constraint, Gate, Iso, JointLimit, JointLimits,
    JointVec, Link, Plane, Setpoint, MAX_DOF,
};
use proptest::prelude::*;

const DOF: usize = 7;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The Panda: (body pos, body quat) per joint, axes z, anchors 0; the flange 0.107 m
/// along link 7's z.
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

/// A pose inside the Panda's joint ranges, away from its limits.
fn pose() -> impl Strategy<Value = [f64; DOF]> {
    [
        -2.5..2.5f64,
        -1.5..1.5,
        -2.5..2.5,
        -2.9..-0.3,
        -2.5..2.5,
        0.2..3.5,
        -2.5..2.5,
    ]
}

fn unit() -> impl Strategy<Value = [f64; 3]> {
    [-1.0..1.0f64, -1.0..1.0, -1.0..1.0]
        .prop_filter("not near zero", |v| {
            v.iter().map(|x| x * x).sum::<f64>() > 0.05
        })
        .prop_map(|v| {
            let n = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            v.map(|x| x / n)
        })
}

fn padded(q: &[f64; DOF]) -> JointVec {
    let mut v = [0.0; MAX_DOF];
    v[..DOF].copy_from_slice(q);
    v
}

fn sub(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

fn dist(n: [f64; 3], x: [f64; 3], p0: [f64; 3]) -> f64 {
    let d = sub(x, p0);
    n[0] * d[0] + n[1] * d[1] + n[2] * d[2]
}

fn norm(v: [f64; 3]) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

/// A plane with normal `n` at distance `z` below the tool at `q`.
fn plane_under(chain: &Chain, q: &[f64; DOF], n: [f64; 3], z: f64) -> Plane {
    let p = chain.tool_point(q);
    Plane::new([p[0] - z * n[0], p[1] - z * n[1], p[2] - z * n[2]], n).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(512)))]

    /// One step, any pose, any plane within 0.3 m, any proposal up to 0.1 rad a joint,
    /// any period from 1 to 20 ms: the step the filter lets through keeps the braking
    /// curve at the pose it reaches and the speed limit.
    #[test]
    fn no_step_outruns_the_envelope_or_the_speed_limit(
        q in pose(),
        dq in prop::array::uniform7(-0.1..0.1f64),
        n in unit(),
        n2 in unit(),
        z in 0.0..0.3f64,
        z2 in 0.0..0.3f64,
        a in 0.5..10.0f64,
        vmax in prop::option::of(0.05..1.0f64),
        period_ms in 1u32..=20,
    ) {
        let chain = panda();
        let t = period_ms as f64 * 1e-3;
        let planes = [plane_under(&chain, &q, n, z), plane_under(&chain, &q, n2, z2)];
        let f = CartesianFilter::new(chain.clone(), CartesianLimits::new(vmax, a, &planes).unwrap());
        let from = padded(&q);
        let mut to = from;
        for j in 0..DOF {
            to[j] += dq[j];
        }
        f.apply(&from, &mut to, t);
        let (p0, p1) = (chain.tool_point(&from), chain.tool_point(&to));
        for pl in &planes {
            let (z0, z1) = (dist(pl.normal, p0, pl.point), dist(pl.normal, p1, pl.point));
            prop_assert!(z1 >= -1e-12, "crossed: z0 {z0} z1 {z1}");
            let v = (z0 - z1) / t;
            prop_assert!(v <= 0.0 || v * v <= 2.0 * a * z1 + 1e-9, "v {v} z1 {z1} a {a}");
        }
        if let Some(vmax) = vmax {
            let speed = norm(sub(p1, p0)) / t;
            prop_assert!(speed <= vmax * (1.0 + 1e-9), "speed {speed} > {vmax}");
        }
    }

    /// A step that already keeps every bound passes bit for bit.
    #[test]
    fn a_step_within_the_bounds_passes_unchanged(
        q in pose(),
        dq in prop::array::uniform7(-0.01..0.01f64),
        n in unit(),
        z in 0.05..0.5f64,
    ) {
        let chain = panda();
        let (t, a) = (0.02, 5.0);
        let planes = [plane_under(&chain, &q, n, z)];
        let f = CartesianFilter::new(chain.clone(), CartesianLimits::new(Some(1.0), a, &planes).unwrap());
        let from = padded(&q);
        let mut to = from;
        for j in 0..DOF {
            to[j] += dq[j];
        }
        let (p0, p1) = (chain.tool_point(&from), chain.tool_point(&to));
        let (z0, z1) = (dist(n, p0, planes[0].point), dist(n, p1, planes[0].point));
        let v = (z0 - z1) / t;
        // Well inside: a margin so that the filter's own rounding cannot decide.
        prop_assume!(v * v < 0.9 * 2.0 * a * z1 && norm(sub(p1, p0)) / t < 0.9);
        let proposed = to;
        let acted = f.apply(&from, &mut to, t);
        prop_assert_eq!(to, proposed);
        prop_assert!(!acted.approach && !acted.speed);
    }
}

/// Near a plane, a step down and sideways loses its motion into the plane, not its
/// motion along it.
#[test]
fn the_envelope_keeps_the_motion_along_the_surface() {
    let chain = panda();
    let q = [0.0, 0.3, 0.0, -2.0, 0.0, 2.3, 0.8];
    let n = [0.0, 0.0, 1.0];
    let plane = plane_under(&chain, &q, n, 0.005);
    let f = CartesianFilter::new(
        chain.clone(),
        CartesianLimits::new(None, 2.0, &[plane]).unwrap(),
    );
    let from = padded(&q);
    // Joint 1 sweeps the tool sideways; joint 4 (elbow) drives it down.
    let mut to = from;
    to[0] += 0.01;
    to[3] -= 0.01;
    let proposed = to;
    let acted = f.apply(&from, &mut to, 0.02);
    assert!(acted.approach && !acted.speed);
    let p0 = chain.tool_point(&from);
    let (want, got) = (
        sub(chain.tool_point(&proposed), p0),
        sub(chain.tool_point(&to), p0),
    );
    assert!(want[2] < -0.002, "the proposal goes down {want:?}");
    let bound = chunkrt_core::cartesian::approach_bound(0.005, 2.0, 0.02, 0.0) * 0.02;
    assert!(-got[2] <= bound + 1e-12, "{got:?} > {bound}");
    let (along_want, along_got) = (norm([want[0], want[1], 0.0]), norm([got[0], got[1], 0.0]));
    assert!(
        along_got > 0.8 * along_want,
        "sideways {along_got} of {along_want}"
    );
}

fn gate_limits() -> JointLimits {
    JointLimits::uniform(
        DOF,
        JointLimit {
            pos_min_rad: -3.0,
            pos_max_rad: 3.8,
            pos_margin_rad: 0.02,
            max_vel_rad_s: 2.0,
            max_acc_rad_s2: 15.0,
            max_jerk_rad_s3: 5000.0,
            brake_acc_rad_s2: 10.0,
        },
    )
}

fn setpoint(q: &[f64; DOF], stop: bool) -> Setpoint {
    Setpoint {
        dof: DOF as u16,
        pos_rad: padded(q),
        stop,
        ..Setpoint::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(64)))]

    /// Closed loop through the gate at 20 ms: the proposal is a pose whose tool point
    /// lies behind a plane. A keep-out plane is never crossed by a commanded tool point;
    /// a plane with a touch speed is crossed no faster than that; every joint keeps its
    /// limits (the gate's own proptests). Then a stop: the filter is bypassed.
    #[test]
    fn through_the_gate_no_command_crosses_a_plane_faster_than_its_touch_speed(
        start in pose(),
        goal_step in prop::array::uniform7(-1.0..1.0f64),
        tilt in unit(),
        frac in 0.1..0.8f64,
        a in 0.5..3.0f64,
        touch in prop_oneof![Just(0.0), 0.005..0.05f64],
    ) {
        let chain = panda();
        let mut goal = start;
        for j in 0..DOF {
            goal[j] = (goal[j] + goal_step[j]).clamp(-2.9, 3.7);
        }
        // A plane between the start's tool point and the goal's, tilted at random.
        let d = sub(chain.tool_point(&start), chain.tool_point(&goal));
        let len = norm(d);
        prop_assume!(len > 0.05);
        let n = [d[0] + 0.5 * len * tilt[0], d[1] + 0.5 * len * tilt[1], d[2] + 0.5 * len * tilt[2]];
        let n = n.map(|v| v / norm(n));
        let depth = n[0] * d[0] + n[1] * d[1] + n[2] * d[2];
        let z = frac * depth;
        prop_assume!((1.0 - frac) * depth > 0.02);
        let plane = plane_under(&chain, &start, n, z).touched_at(touch).unwrap();
        let limits = CartesianLimits::new(None, a, &[plane]).unwrap();
        let mut gate = Gate::new(gate_limits(), 20_000_000, &padded(&start))
            .with_cartesian(Some(CartesianFilter::new(chain.clone(), limits)));
        let mut cmd = chunkrt_core::Command::default();
        let mut prev = chain.tool_point(&padded(&start));
        let mut approached = false;
        let mut worst_over_envelope = f64::MIN;
        for _ in 0..300 {
            let mask = gate.filter(&setpoint(&goal, false), &mut cmd);
            approached |= mask.contains(Constraint::Approach);
            let p = chain.tool_point(&cmd.pos_rad);
            let (z0, z1) = (plane.distance(prev), plane.distance(p));
            let v = (z0 - z1) / 0.02;
            if z1 < 0.0 {
                prop_assert!(touch > 0.0, "a keep-out plane crossed: z {z1}");
                prop_assert!(v <= touch * (1.0 + 1e-9), "crossed at {v} m/s, touch {touch}");
            }
            let env = (touch * touch + 2.0 * a * z1.max(0.0)).sqrt();
            worst_over_envelope = worst_over_envelope.max(v - env);
            prev = p;
        }
        if std::env::var_os("CARTESIAN_WORST").is_some() {
            eprintln!("worst speed over the envelope {worst_over_envelope:e} m/s");
        }
        prop_assert!(approached);
        prop_assert!(gate.counts()[Constraint::Approach as usize] > 0);
        // A stop bypasses the filter: no Cartesian bit while braking.
        for _ in 0..50 {
            let mask = gate.filter(&setpoint(&goal, true), &mut cmd);
            prop_assert!(!mask.contains(Constraint::Approach) && !mask.contains(Constraint::ToolSpeed));
        }
    }
}
