//! Issue 39: the MuJoCo arm holds still against gravity, and the torque its drives report
//! is the static torque the model's masses give in closed form.
//!
//! The oracle does not use MuJoCo: it reads the model file itself (each body's position,
//! orientation, mass and centre of mass) and sums, for each joint, the moment of the
//! weights of every link beyond it about the joint's axis. The measured figure is what a
//! user sees: the torque in the feedback (0x6077), averaged over the last half second of
//! holding a constant setpoint on a 1 kHz bus (for the second pose, after moving there
//! from the first, so that the drives' loops found the load themselves).

mod common;

use chunkrt_core::Backend;
use common::{cycle, panda_at, panda_xml, started, track};

/// Standard gravity, MuJoCo's default `gravity="0 0 -9.81"`.
const G: f64 = 9.81;

type V3 = [f64; 3];
type M3 = [[f64; 3]; 3];

fn mul(a: &M3, b: &M3) -> M3 {
    let mut m = [[0.0; 3]; 3];
    for (i, row) in m.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x = (0..3).map(|k| a[i][k] * b[k][j]).sum();
        }
    }
    m
}

fn apply(a: &M3, v: &V3) -> V3 {
    [0, 1, 2].map(|i| (0..3).map(|k| a[i][k] * v[k]).sum())
}

fn add(a: &V3, b: &V3) -> V3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

fn cross(a: &V3, b: &V3) -> V3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// Rotation matrix of a quaternion `w x y z` (normalized first, as MuJoCo does).
fn quat(q: [f64; 4]) -> M3 {
    let n = q.iter().map(|x| x * x).sum::<f64>().sqrt();
    let [w, x, y, z] = q.map(|v| v / n);
    [
        [
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y - w * z),
            2.0 * (x * z + w * y),
        ],
        [
            2.0 * (x * y + w * z),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z - w * x),
        ],
        [
            2.0 * (x * z - w * y),
            2.0 * (y * z + w * x),
            1.0 - 2.0 * (x * x + y * y),
        ],
    ]
}

/// Rotation by `a` about z (every joint of the model turns about its body's z axis).
fn rot_z(a: f64) -> M3 {
    let (s, c) = a.sin_cos();
    [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
}

fn floats<const N: usize>(node: roxmltree::Node, attr: &str, default: [f64; N]) -> [f64; N] {
    match node.attribute(attr) {
        None => default,
        Some(s) => {
            let v: Vec<f64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
            v.try_into().unwrap()
        }
    }
}

/// One link: its centre of mass in the world and its mass; the joint it hangs on.
struct Link {
    com: V3,
    mass: f64,
    /// Indices of the joints between the base and this link (this link's own included).
    joints_above: Vec<usize>,
}

/// The static holding torque of every joint at `pose`, from the model file alone.
fn holding_torque(pose: &[f64; 7]) -> [f64; 7] {
    let xml = std::fs::read_to_string(panda_xml()).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let world = doc
        .descendants()
        .find(|n| n.has_tag_name("worldbody"))
        .unwrap();
    let mut links = Vec::new();
    // Each joint's anchor and axis in the world.
    let mut anchors: Vec<(V3, V3)> = Vec::new();
    let identity = rot_z(0.0);
    let mut stack = vec![(world, [0.0; 3], identity, Vec::<usize>::new())];
    while let Some((node, p, r, above)) = stack.pop() {
        for body in node.children().filter(|n| n.has_tag_name("body")) {
            let pos = add(&p, &apply(&r, &floats(body, "pos", [0.0; 3])));
            let mut rot = mul(&r, &quat(floats(body, "quat", [1.0, 0.0, 0.0, 0.0])));
            let mut joints = above.clone();
            if body.children().any(|n| n.has_tag_name("joint")) {
                let j = anchors.len();
                anchors.push((pos, apply(&rot, &[0.0, 0.0, 1.0])));
                rot = mul(&rot, &rot_z(pose[j]));
                joints.push(j);
            }
            let inertial = body
                .children()
                .find(|n| n.has_tag_name("inertial"))
                .unwrap();
            links.push(Link {
                com: add(&pos, &apply(&rot, &floats(inertial, "pos", [0.0; 3]))),
                mass: floats::<1>(inertial, "mass", [0.0])[0],
                joints_above: joints.clone(),
            });
            stack.push((body, pos, rot, joints));
        }
    }
    assert_eq!(anchors.len(), 7, "the model has 7 joints in a chain");
    let mut tau = [0.0; 7];
    for link in &links {
        let weight = [0.0, 0.0, -G * link.mass];
        for &j in &link.joints_above {
            let (o, axis) = anchors[j];
            let r = [link.com[0] - o[0], link.com[1] - o[1], link.com[2] - o[2]];
            // Gravity's generalized force on joint j is axis . (r x W); holding it takes
            // the opposite.
            let moment = cross(&r, &weight);
            tau[j] -= (0..3).map(|k| axis[k] * moment[k]).sum::<f64>();
        }
    }
    tau
}

/// Starts at `from`, moves to `pose` over 1.5 s (a smoothstep) and holds it for 1.5 s on
/// a 1 kHz bus; returns the torque the drives reported, averaged over the last 0.5 s,
/// and the largest distance from the pose then. Started elsewhere, the drives find the
/// load at `pose` themselves (their integral), not from the load they started under.
fn hold(from: &[f64; 7], pose: &[f64; 7]) -> ([f64; 7], f64) {
    let (mut arm, mut fb) = started(panda_at(from));
    let mut sum = [0.0; 7];
    let mut samples = 0.0;
    let mut drift: f64 = 0.0;
    for k in 1..=3_000 {
        let s = (k as f64 / 1_500.0).min(1.0);
        let w = s * s * (3.0 - 2.0 * s);
        let target: [f64; 7] = std::array::from_fn(|j| from[j] + w * (pose[j] - from[j]));
        arm.exchange(cycle(k), &track(&target), &mut fb)
            .expect("exchange");
        if k > 2_500 {
            for j in 0..7 {
                sum[j] += fb.torque_nm[j];
                drift = drift.max((fb.pos_rad[j] - pose[j]).abs());
            }
            samples += 1.0;
        }
    }
    (sum.map(|s| s / samples), drift)
}

fn check_pose(name: &str, from: [f64; 7], pose: [f64; 7]) {
    let want = holding_torque(&pose);
    let (got, drift) = hold(&from, &pose);
    println!("{name}: analytic {want:.4?}\n{name}: measured {got:.4?}, drift {drift:.2e} rad");
    assert!(
        drift < 1e-4,
        "{name}: the arm moved {drift} rad off the held pose"
    );
    let loaded: Vec<usize> = (0..7).filter(|&j| want[j].abs() > 1.0).collect();
    assert!(
        loaded.len() >= 2,
        "{name}: the pose loads at least two joints: {want:?}"
    );
    // The issue asks for 2 %; measured, the worst joint is within 0.025 % (joint 6 at the
    // start pose) and 0.0023 N m (joint 1, reaching out): gated at 0.1 % and 0.01 N m.
    for j in 0..7 {
        if want[j].abs() > 1.0 {
            let rel = (got[j] - want[j]).abs() / want[j].abs();
            assert!(
                rel <= 0.001,
                "{name}: joint {}: measured {:.4} N m, analytic {:.4} N m ({:.2} %)",
                j + 1,
                got[j],
                want[j],
                rel * 100.0
            );
        } else {
            // Lightly loaded joints: within 0.01 N m.
            assert!(
                (got[j] - want[j]).abs() <= 0.01,
                "{name}: joint {}: measured {:.4} N m, analytic {:.4} N m",
                j + 1,
                got[j],
                want[j]
            );
        }
    }
}

#[test]
fn the_arm_holds_the_policys_start_pose_with_the_torque_its_masses_give() {
    let start = [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8];
    check_pose("start pose", start, start);
}

/// The upper arm leaning 1 rad forward and the forearm near straight: the shoulder
/// carries the whole arm far out, the wrist its own links.
#[test]
fn the_arm_holds_a_pose_reaching_out_with_the_torque_its_masses_give() {
    check_pose(
        "reaching out",
        [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8],
        [0.3, 1.0, -0.2, -0.4, 0.5, 1.6, 0.0],
    );
}

/// The oracle itself, on what can be told without it: joint 1 turns about the vertical,
/// so gravity never loads it, whatever the pose; the shoulder (joint 2) always carries
/// the arm.
#[test]
fn the_oracle_finds_no_torque_on_the_vertical_axis() {
    for pose in [
        [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8],
        [0.3, 1.0, -0.2, -0.4, 0.5, 1.6, 0.0],
    ] {
        let tau = holding_torque(&pose);
        assert!(tau[0].abs() < 1e-9, "{tau:?}");
        assert!(tau[1].abs() > 1.0, "{tau:?}");
    }
}
