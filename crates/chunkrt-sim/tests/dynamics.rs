//! The plant and drive model: bandwidth, friction, stops, sub-stepping and jitter.
//! All checks are on simulated time; nothing here depends on how fast the host is.

mod common;

use chunkrt_core::{Backend, DriveRequest, DriveState, Feedback, MonoTime};
use chunkrt_sim::SimArmParams;
use common::*;

/// Simulated time for a step response of `bandwidth_hz` to reach 63.2 % of the step,
/// plus its overshoot and its error after ten time constants.
fn step_response(bandwidth_hz: f64) -> (f64, f64, f64) {
    let mut sim = arm(single_joint(bandwidth_hz));
    let mut fb = Feedback::default();
    sim.start(T0, &mut fb).expect("start");
    let step = 0.05;
    sim.apply(T0, &command(1, DriveRequest::Track, &[step], &[0.0]))
        .expect("valid command");
    let substep = sim.params().substep_ns;
    let tau_s = 1.0 / (2.0 * std::f64::consts::PI * bandwidth_hz);
    let (mut t63, mut peak) = (None, 0.0f64);
    let steps = (10.0 * tau_s * 1e9) as u64 / substep;
    for k in 1..=steps {
        sim.advance_to(T0.add_ns(k * substep));
        let pos = sim.joint(0).unwrap().pos_rad;
        if t63.is_none() && pos >= 0.632 * step {
            t63 = Some(k as f64 * substep as f64 * 1e-9);
        }
        peak = peak.max(pos);
    }
    let err = (sim.joint(0).unwrap().pos_rad - step).abs() / step;
    (t63.expect("never reached 63 %"), peak / step - 1.0, err)
}

#[test]
fn step_response_follows_the_position_loop_bandwidth() {
    for bw in [10.0, 20.0, 30.0] {
        let tau = 1.0 / (2.0 * std::f64::consts::PI * bw);
        let (t63, overshoot, err) = step_response(bw);
        // A first-order loop reaches 63 % at one time constant; the velocity loop and
        // its integral shift that a little, not by a factor of two.
        assert!(
            t63 > 0.8 * tau && t63 < 1.25 * tau,
            "{bw} Hz: t63 = {:.2} ms, tau = {:.2} ms",
            t63 * 1e3,
            tau * 1e3
        );
        assert!(
            overshoot < 0.15,
            "{bw} Hz: overshoot {:.1} %",
            overshoot * 100.0
        );
        assert!(err < 0.02, "{bw} Hz: {:.2} % off after 10 tau", err * 100.0);
    }
    let (slow, _, _) = step_response(10.0);
    let (fast, _, _) = step_response(20.0);
    let ratio = slow / fast;
    assert!(
        ratio > 1.6 && ratio < 2.4,
        "t63 ratio 10 Hz / 20 Hz = {ratio}"
    );
}

#[test]
fn coulomb_friction_holds_a_joint_under_a_small_torque() {
    let mut p = single_joint(20.0);
    p.coulomb_nm[0] = 1.0;
    let mut sim = arm(p);
    sim.set_clock(T0);
    // Drive disabled (never started): only the external torque acts.
    sim.set_external_torque(0, 0.9).unwrap();
    sim.advance_to(T0.add_ns(1_000_000_000));
    let held = sim.joint(0).unwrap();
    assert_eq!(
        held.pos_rad, 0.0,
        "crept under 0.9 Nm against 1 Nm of friction"
    );
    assert_eq!(held.vel_rad_s, 0.0);

    // Above the Coulomb level it breaks away: (1.5 - 1.0) Nm / 0.1 kg m^2 = 5 rad/s^2.
    sim.set_external_torque(0, 1.5).unwrap();
    sim.advance_to(T0.add_ns(1_100_000_000));
    let moving = sim.joint(0).unwrap();
    assert!(
        (moving.vel_rad_s - 0.5).abs() < 0.01,
        "v = {}",
        moving.vel_rad_s
    );

    // Torque removed: friction stops it, and it stays stopped (no reversal).
    sim.set_external_torque(0, 0.0).unwrap();
    sim.advance_to(T0.add_ns(1_300_000_000));
    let stopped = sim.joint(0).unwrap();
    assert_eq!(stopped.vel_rad_s, 0.0);
    sim.advance_to(T0.add_ns(1_500_000_000));
    assert_eq!(sim.joint(0).unwrap().pos_rad, stopped.pos_rad);
}

#[test]
fn hard_stops_clamp_position_and_zero_velocity() {
    let mut p = single_joint(20.0);
    p.pos_min_rad[0] = -0.1;
    p.pos_max_rad[0] = 0.2;
    let mut sim = arm(p);
    let mut fb = Feedback::default();
    sim.start(T0, &mut fb).unwrap();
    // A command past the stop (the gate upstream would never send it).
    let cmd = command(1, DriveRequest::Track, &[1.0], &[0.0]);
    let mut t = T0;
    let mut max_pos = f64::MIN;
    for _ in 0..50 {
        t = t.add_ns(20_000_000);
        sim.exchange(t, &cmd, &mut fb).unwrap();
        max_pos = max_pos.max(fb.pos_rad[0]);
    }
    assert_eq!(max_pos, 0.2);
    assert_eq!(fb.pos_rad[0], 0.2);
    assert_eq!(fb.vel_rad_s[0], 0.0);

    // Disabled and pushed into the lower stop by a load.
    sim.exchange(
        t,
        &command(1, DriveRequest::Disable, &[0.0], &[0.0]),
        &mut fb,
    )
    .unwrap();
    sim.set_external_torque(0, -50.0).unwrap();
    sim.advance_to(t.add_ns(1_000_000_000));
    let j = sim.joint(0).unwrap();
    assert_eq!((j.pos_rad, j.vel_rad_s), (-0.1, 0.0));
}

#[test]
fn sub_steps_are_whole_and_the_remainder_is_carried() {
    let mut sim = arm(SimArmParams::default()); // 100 us sub-steps
    sim.set_clock(T0);
    assert_eq!(sim.advance_to(T0.add_ns(150_000)), 1);
    assert_eq!(sim.advance_to(T0.add_ns(300_000)), 2);
    assert_eq!(sim.sim_time(), T0.add_ns(300_000));
    assert_eq!(
        sim.advance_to(T0.add_ns(299_000)),
        0,
        "time going backwards"
    );
    assert_eq!(sim.advance_to(T0.add_ns(20_350_000)), 200);
    assert_eq!(sim.sim_time(), T0.add_ns(20_300_000));
    // A suspended process: an hour's gap is integrated as MAX_CATCH_UP_NS, and the
    // clock still lands on `now` minus the remainder.
    let later = T0.add_ns(3_600_000_000_000 + 20_350_000);
    assert_eq!(
        sim.advance_to(later),
        chunkrt_sim::MAX_CATCH_UP_NS / 100_000
    );
    assert_eq!(sim.sim_time(), T0.add_ns(3_600_000_000_000 + 20_300_000));
}

/// Runs the default arm through the same 50 Hz command stream, exchanging at
/// `offsets_ns[k % len]` after each nominal deadline; returns the joint positions at
/// the end of the same simulated time.
fn run_stream(offsets_ns: &[i64]) -> [f64; chunkrt_core::MAX_DOF] {
    let params = SimArmParams::default();
    let mut sim = arm(params);
    let mut fb = Feedback::default();
    sim.start(T0, &mut fb).unwrap();
    let period = 20_000_000u64;
    let n = params.joints;
    for k in 1..=100u64 {
        let t = T0.add_ns(k * period);
        let mut pos = [0.0; 16];
        let mut vel = [0.0; 16];
        for j in 0..n {
            let ts = k as f64 * 0.02;
            pos[j] = params.initial_pos_rad[j] + 0.3 * (1.0 - (2.0 * ts).cos());
            vel[j] = 0.6 * (2.0 * ts).sin();
        }
        let cmd = command(n, DriveRequest::Track, &pos[..n], &vel[..n]);
        let now = t.add_signed_ns(offsets_ns[k as usize % offsets_ns.len()]);
        sim.exchange(now, &cmd, &mut fb).unwrap();
    }
    sim.advance_to(T0.add_ns(102 * period));
    positions(&sim)
}

#[test]
fn loop_jitter_reaches_the_plant() {
    let on_time = run_stream(&[0]);
    let again = run_stream(&[0]);
    assert_eq!(on_time, again, "the model is deterministic");

    let jittery = run_stream(&[3_000_000, -2_000_000, 700_000, 0]);
    let diff = (0..7)
        .map(|j| (on_time[j] - jittery[j]).abs())
        .fold(0.0, f64::max);
    assert!(
        diff > 1e-5,
        "jitter changed nothing: max difference {diff:e} rad"
    );
}

#[test]
fn a_50_hz_stream_with_feed_forward_is_tracked_closely() {
    let params = SimArmParams::default();
    let mut sim = arm(params);
    let mut fb = Feedback::default();
    sim.start(T0, &mut fb).unwrap();
    let n = params.joints;
    let mut worst = 0.0f64;
    for k in 1..=250u64 {
        let ts = k as f64 * 0.02;
        let mut pos = [0.0; 16];
        let mut vel = [0.0; 16];
        for j in 0..n {
            // 0.5 Hz, 0.3 rad: up to 0.94 rad/s and 3 rad/s^2.
            pos[j] = params.initial_pos_rad[j] + 0.3 * (std::f64::consts::PI * ts).sin();
            vel[j] = 0.3 * std::f64::consts::PI * (std::f64::consts::PI * ts).cos();
        }
        sim.exchange(
            T0.add_ns(k * 20_000_000),
            &command(n, DriveRequest::Track, &pos[..n], &vel[..n]),
            &mut fb,
        )
        .unwrap();
        if k > 25 {
            // The drive extrapolates the command latched at t - 20 ms with its velocity,
            // so the arm should be close to where the sine is now.
            for (measured, commanded) in fb.pos_rad.iter().zip(&pos).take(n) {
                worst = worst.max((measured - commanded).abs());
            }
        }
        assert!(fb.all_enabled());
    }
    assert!(worst < 2e-3, "worst tracking error {worst} rad");
}

#[test]
fn feedback_reports_state_at_now() {
    let mut sim = arm(SimArmParams::default());
    let mut fb = Feedback::default();
    sim.start(MonoTime::from_ms(1), &mut fb).unwrap();
    assert_eq!(fb.dof, 7);
    assert_eq!(fb.t_capture, MonoTime::from_ms(1));
    assert!(fb.all_enabled());
    assert_eq!(
        fb.pos_rad[..7],
        SimArmParams::default().initial_pos_rad[..7]
    );
    assert_eq!(fb.state[7], DriveState::Disabled);
}

#[test]
fn behind_backlash_the_link_the_host_reads_trails_the_motor_by_half_the_play_each_way() {
    let play = 0.004;
    let mut p = single_joint(20.0);
    p.backlash_rad[0] = play;
    let mut sim = arm(p);
    let mut fb = Feedback::default();
    sim.start(T0, &mut fb).expect("start");
    let ms = |k: u64| T0.add_ns(k * 1_000_000);
    // A slow ramp out to 0.05 rad and back, a setpoint every millisecond: the link is
    // carried at the gap's far edge on the way out and at its near edge on the way
    // back, and the host reads the link.
    let (mut k, mut x) = (0, sim.joint(0).unwrap().pos_rad);
    for (v, trail) in [(0.05, -0.5 * play), (-0.05, 0.5 * play)] {
        for _ in 0..1000 {
            x += v * 1e-3;
            sim.apply(ms(k), &command(1, DriveRequest::Track, &[x], &[v]))
                .expect("valid command");
            k += 1;
            sim.advance_to(ms(k));
        }
        let j = sim.joint(0).unwrap();
        assert!(j.vel_rad_s * v > 0.0, "still moving: {j:?}");
        assert!(
            (j.link_pos_rad - (j.pos_rad + trail)).abs() < 1e-12,
            "{j:?}"
        );
        sim.fill_feedback(ms(k), &mut fb);
        assert_eq!(fb.pos_rad[0], j.link_pos_rad, "the host reads the link");
    }
    // Without play the link is the motor.
    let mut sim = arm(single_joint(20.0));
    sim.start(T0, &mut fb).expect("start");
    sim.apply(T0, &command(1, DriveRequest::Track, &[0.05], &[0.0]))
        .unwrap();
    sim.advance_to(ms(1000));
    let j = sim.joint(0).unwrap();
    assert_eq!(j.link_pos_rad, j.pos_rad);
}
