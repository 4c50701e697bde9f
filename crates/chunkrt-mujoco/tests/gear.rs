//! The gear between each drive's motor and its link: a compliant joint's link hangs
//! from its motor by the load over the stiffness, while the drive's encoder reads the
//! motor; backlash shows as a hysteresis as wide as the play when the motion reverses;
//! a gear too stiff for the physics step is refused with the stiffness it would take.

mod common;

use chunkrt_core::{Backend, Feedback};
use chunkrt_mujoco::{GearParams, MujocoArm, MujocoParams};
use common::{cycle, panda_at, started, track};

const START: [f64; 7] = [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8];

fn gear(stiffness_nm_rad: f64, backlash_rad: f64) -> GearParams {
    GearParams {
        stiffness_nm_rad,
        damping_nm_s_rad: 5.0,
        backlash_rad,
        motor_inertia_kg_m2: 0.5,
    }
}

/// Holds `pose` for `cycles` 1 ms cycles from cycle `k`.
fn hold(arm: &mut MujocoArm, fb: &mut Feedback, pose: &[f64; 7], k: &mut u64, cycles: u64) {
    for _ in 0..cycles {
        *k += 1;
        arm.exchange(cycle(*k), &track(pose), fb).expect("exchange");
    }
}

#[test]
fn a_compliant_joint_hangs_from_its_motor_by_the_load_over_the_stiffness() {
    let k_nm_rad = 5000.0;
    let mut p = panda_at(&START);
    for j in [1, 3] {
        p.gears[j] = gear(k_nm_rad, 0.0);
    }
    let (mut arm, mut fb) = started(p);
    // The drives hold what their encoders read: the motor side.
    let held: [f64; 7] = std::array::from_fn(|j| fb.pos_rad[j]);
    let mut k = 0;
    hold(&mut arm, &mut fb, &held, &mut k, 2000);
    for j in [1usize, 3] {
        let t = arm.joint(j).unwrap();
        let twist = t.motor_pos_rad - t.pos_rad;
        // At rest the gear carries the whole static load (MuJoCo's qfrc_bias).
        let expected = t.bias_torque_nm / k_nm_rad;
        eprintln!(
            "joint {j}: load {:.3} N m, twist {:.6} rad, load / k {:.6} rad, encoder {:.6}, motor {:.6}, link {:.6}",
            t.bias_torque_nm, twist, expected, fb.pos_rad[j], t.motor_pos_rad, t.pos_rad
        );
        assert!(
            expected.abs() > 1e-3,
            "joint {j} is loaded at this pose: {expected} rad"
        );
        assert!(
            (twist - expected).abs() < 1e-3 * expected.abs(),
            "joint {j}: twist {twist} rad, load / stiffness {expected} rad"
        );
        // The encoder reads the motor, not the link.
        assert!(
            (fb.pos_rad[j] - t.motor_pos_rad).abs() < 1e-6,
            "joint {j}: encoder {} rad, motor {} rad",
            fb.pos_rad[j],
            t.motor_pos_rad
        );
    }
    // A rigid joint's encoder reads the link.
    let t0 = arm.joint(2).unwrap();
    assert_eq!(t0.motor_pos_rad, t0.pos_rad);
}

/// Joint 1 (about the vertical: gravity does not load it) swung slowly back and forth:
/// the twist `motor - link` sits on one side while the motion pushes the link one way
/// and on the other side after it reverses. The distance between the two sides (the
/// medians of the positive and of the negative twists, which the short impacts at each
/// reversal do not move) is what moving the link takes, twice, plus the play.
fn twist_sides(backlash_rad: f64) -> (f64, f64) {
    let mut p = panda_at(&START);
    p.gears[0] = gear(5000.0, backlash_rad);
    let (mut arm, mut fb) = started(p);
    let base: [f64; 7] = std::array::from_fn(|j| fb.pos_rad[j]);
    let (amp, hz) = (0.2, 0.25);
    let mut twists = Vec::new();
    for k in 1..=12_000u64 {
        let s = k as f64 * 1e-3;
        let mut pose = base;
        pose[0] = base[0] + amp * (2.0 * std::f64::consts::PI * hz * s).sin();
        arm.exchange(cycle(k), &track(&pose), &mut fb)
            .expect("exchange");
        if k > 8000 {
            let t = arm.joint(0).unwrap();
            twists.push(t.motor_pos_rad - t.pos_rad);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let pos: Vec<f64> = twists.iter().copied().filter(|x| *x > 0.0).collect();
    let neg: Vec<f64> = twists.iter().copied().filter(|x| *x < 0.0).collect();
    assert!(
        pos.len() > 500 && neg.len() > 500,
        "{} / {}",
        pos.len(),
        neg.len()
    );
    let (lo, hi) = twists
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        });
    (median(pos) - median(neg), hi - lo)
}

#[test]
fn backlash_shows_as_a_hysteresis_as_wide_as_the_play() {
    let play = 0.004;
    let (without, span0) = twist_sides(0.0);
    let (with, span) = twist_sides(play);
    eprintln!(
        "twist, between the two sides: {without:.6} rad rigid teeth, {with:.6} rad with \
         {play} rad of play (whole span {span0:.6} / {span:.6} rad)"
    );
    assert!(
        without < 0.25 * play,
        "without play the sides are the spring's: {without}"
    );
    assert!(
        (with - without - play).abs() < 0.05 * play,
        "with {play} rad of play the sides part by {} rad more",
        with - without
    );
}

#[test]
fn a_gear_too_stiff_for_the_physics_step_is_refused_with_the_stiffness_it_takes() {
    let mut p: MujocoParams = panda_at(&START);
    p.gears[6] = gear(5e7, 0.0);
    let msg = MujocoArm::new(p).err().expect("refused").to_string();
    assert!(
        msg.contains("joint_stiffness_nm_rad of joint 6") && msg.contains("too fast"),
        "{msg}"
    );
    assert!(msg.contains("at most"), "{msg}");
    let mut p = panda_at(&START);
    p.gears[2] = GearParams {
        backlash_rad: 0.001,
        ..GearParams::default()
    };
    let msg = MujocoArm::new(p).err().expect("refused").to_string();
    assert!(
        msg.contains("backlash_rad of joint 2") && msg.contains("rigid"),
        "{msg}"
    );
}
