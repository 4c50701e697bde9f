//! The sim as a `Backend`: command validation, CiA 402-like requests, fault injection,
//! shutdown, and no allocation in `exchange`.

mod common;

use chunkrt_alloc_count::{count_allocations, CountingAllocator};

use chunkrt_core::{Backend, BackendError, DriveRequest, DriveState, Feedback, MonoTime};
use chunkrt_sim::{SimArm, SimArmParams, REST_VEL_RAD_S};
use common::*;

const PERIOD_NS: u64 = 20_000_000;

fn started() -> (SimArm, Feedback) {
    let mut sim = arm(SimArmParams::default());
    let mut fb = Feedback::default();
    sim.start(T0, &mut fb).expect("start");
    (sim, fb)
}

fn hold(fb: &Feedback) -> chunkrt_core::Command {
    command(7, DriveRequest::Track, &fb.pos_rad[..7], &[0.0; 7])
}

fn at(k: u64) -> MonoTime {
    T0.add_ns(k * PERIOD_NS)
}

#[test]
fn a_non_finite_command_is_refused_and_not_applied() {
    let (mut sim, mut fb) = started();
    let (mut reference, mut fb_ref) = started();
    let good = hold(&fb);
    sim.exchange(at(1), &good, &mut fb).unwrap();
    reference.exchange(at(1), &good, &mut fb_ref).unwrap();

    let mut bad = good;
    bad.pos_rad[3] = f64::NAN;
    bad.pos_rad[0] += 0.5; // would move joint 0 if any of it were applied
    assert_eq!(
        sim.exchange(at(2), &bad, &mut fb),
        Err(BackendError::InvalidCommand { joint: 3 })
    );
    let mut bad_vel = good;
    bad_vel.vel_rad_s[5] = f64::INFINITY;
    assert_eq!(
        sim.exchange(at(3), &bad_vel, &mut fb),
        Err(BackendError::InvalidCommand { joint: 5 })
    );
    // The reference arm kept the good command all along: identical trajectories.
    reference.exchange(at(2), &good, &mut fb_ref).unwrap();
    reference.exchange(at(3), &good, &mut fb_ref).unwrap();
    assert_eq!(fb.pos_rad, fb_ref.pos_rad);
    assert_eq!(fb.t_capture, at(3), "feedback is still measured");
}

#[test]
fn a_stop_request_is_honoured_whatever_its_setpoints_hold() {
    let (mut sim, mut fb) = started();
    let mut stop = hold(&fb);
    stop.request = DriveRequest::QuickStop;
    stop.pos_rad[0] = f64::NAN;
    sim.exchange(at(1), &stop, &mut fb).unwrap();
    assert!(fb.state[..7].iter().all(|s| *s == DriveState::QuickStop));
    stop.request = DriveRequest::Disable;
    sim.exchange(at(2), &stop, &mut fb).unwrap();
    assert!(fb.state[..7].iter().all(|s| *s == DriveState::Disabled));
    // A NaN in a fault reset is refused like one in a tracking command.
    stop.request = DriveRequest::FaultReset;
    assert_eq!(
        sim.exchange(at(3), &stop, &mut fb),
        Err(BackendError::InvalidCommand { joint: 0 })
    );
    assert!(fb.state[..7].iter().all(|s| *s == DriveState::Disabled));
}

#[test]
fn a_command_with_the_wrong_joint_count_is_refused() {
    let (mut sim, mut fb) = started();
    let mut cmd = hold(&fb);
    cmd.dof = 6;
    assert_eq!(
        sim.exchange(at(1), &cmd, &mut fb),
        Err(BackendError::InvalidCommand { joint: 6 })
    );
    cmd.dof = 9;
    assert_eq!(
        sim.exchange(at(2), &cmd, &mut fb),
        Err(BackendError::InvalidCommand { joint: 7 })
    );
}

#[test]
fn quick_stop_ramps_to_rest_and_holds() {
    let mut params = single_joint(20.0);
    params.quick_stop_decel_rad_s2[0] = 5.0;
    let mut sim = arm(params);
    let mut fb = Feedback::default();
    sim.start(T0, &mut fb).unwrap();
    // Cruise at 1 rad/s.
    let mut k = 0;
    while k < 50 {
        k += 1;
        let pos = k as f64 * 0.02;
        sim.exchange(
            at(k),
            &command(1, DriveRequest::Track, &[pos], &[1.0]),
            &mut fb,
        )
        .unwrap();
    }
    assert!(
        (fb.vel_rad_s[0] - 1.0).abs() < 0.01,
        "v = {}",
        fb.vel_rad_s[0]
    );

    // Quick stop while the runtime keeps sending the moving setpoint: it is ignored.
    // The ramp starts from the state measured at the exchange that requested it.
    let (mut p0, mut v0) = (0.0, 0.0);
    for i in 1..=40 {
        let pos = (k + i) as f64 * 0.02;
        sim.exchange(
            at(k + i),
            &command(1, DriveRequest::QuickStop, &[pos], &[1.0]),
            &mut fb,
        )
        .unwrap();
        assert_eq!(fb.state[0], DriveState::QuickStop);
        if i == 1 {
            (p0, v0) = (fb.pos_rad[0], fb.vel_rad_s[0]);
        }
        // The velocity follows the drive's ramp (within the loop's small lag and the
        // ringing where the ramp ends).
        let ramp = (v0 - 5.0 * (i - 1) as f64 * 0.02).max(0.0);
        let off = (fb.vel_rad_s[0] - ramp).abs();
        assert!(
            off < 0.01,
            "exchange {i}: {} rad/s, ramp at {ramp}",
            fb.vel_rad_s[0]
        );
    }
    // 1 rad/s at 5 rad/s^2: 0.2 s and 0.1 rad.
    assert!(
        fb.vel_rad_s[0].abs() < 1e-6,
        "still moving at {}",
        fb.vel_rad_s[0]
    );
    let travel = fb.pos_rad[0] - p0;
    let expected = v0 * v0 / (2.0 * 5.0);
    assert!(
        (travel - expected).abs() < 1e-3,
        "stopped after {travel} rad, expected {expected}"
    );
    assert!(sim.at_rest());

    // Tracking again: enabled, holding where it stopped (no jump toward the old stream).
    let here = fb.pos_rad[0];
    sim.exchange(
        at(k + 41),
        &command(1, DriveRequest::Track, &[5.0], &[0.0]),
        &mut fb,
    )
    .unwrap();
    assert_eq!(fb.state[0], DriveState::Enabled);
    sim.advance_to(at(k + 45));
    assert!((sim.joint(0).unwrap().pos_rad - here).abs() < 1e-4);
}

#[test]
fn disable_removes_torque_and_friction_stops_the_arm() {
    let (mut sim, mut fb) = started();
    let n = 7;
    let start = fb.pos_rad;
    for k in 1..=25u64 {
        let mut pos = start;
        for p in pos.iter_mut().take(n) {
            *p += 0.8 * k as f64 * 0.02;
        }
        sim.exchange(
            at(k),
            &command(n, DriveRequest::Track, &pos[..n], &[0.8; 7]),
            &mut fb,
        )
        .unwrap();
    }
    assert!(fb.vel_rad_s[..n].iter().all(|v| *v > 0.5));
    for k in 26..=200u64 {
        sim.exchange(
            at(k),
            &command(n, DriveRequest::Disable, &start[..n], &[0.0; 7]),
            &mut fb,
        )
        .unwrap();
        assert!(fb.state[..n].iter().all(|s| *s == DriveState::Disabled));
        assert!(fb.torque_nm[..n].iter().all(|t| *t == 0.0));
    }
    assert!(
        fb.vel_rad_s[..n].iter().all(|v| *v == 0.0),
        "{:?}",
        &fb.vel_rad_s[..n]
    );
    // Coming back: Track enables holding the current position.
    let here = fb.pos_rad;
    sim.exchange(
        at(201),
        &command(n, DriveRequest::Track, &start[..n], &[0.0; 7]),
        &mut fb,
    )
    .unwrap();
    assert!(fb.all_enabled());
    sim.exchange(at(202), &hold(&fb), &mut fb).unwrap();
    for (j, (now, before)) in fb.pos_rad.iter().zip(&here).take(n).enumerate() {
        assert!((now - before).abs() < 1e-3, "joint {j} jumped");
    }
}

#[test]
fn injected_errors_last_the_given_cycles_and_the_plant_keeps_running() {
    let (mut sim, mut fb) = started();
    let target = {
        let mut c = hold(&fb);
        c.pos_rad[0] += 0.05;
        c
    };
    sim.exchange(at(1), &target, &mut fb).unwrap();
    let before = fb.pos_rad[0];
    sim.inject_error_for(3, BackendError::FrameLost);
    let mut untouched = Feedback::default();
    for k in 2..=4 {
        assert_eq!(
            sim.exchange(at(k), &hold(&fb), &mut untouched),
            Err(BackendError::FrameLost)
        );
    }
    assert_eq!(untouched, Feedback::default(), "no frame, no feedback");
    // The plant went on tracking the last command that got through.
    assert!(sim.joint(0).unwrap().pos_rad > before + 0.01);
    sim.exchange(at(5), &target, &mut fb).unwrap();
    assert!(fb.all_enabled());
}

#[test]
fn a_drive_fault_stays_until_reset() {
    let (mut sim, mut fb) = started();
    sim.inject_drive_fault(2, 0x2310).unwrap();
    let cmd = hold(&fb);
    for k in 1..=3 {
        assert_eq!(
            sim.exchange(at(k), &cmd, &mut fb),
            Err(BackendError::DriveFault {
                joint: 2,
                code: 0x2310
            })
        );
        assert_eq!(fb.state[2], DriveState::Fault);
        assert_eq!(fb.error_code[2], 0x2310);
        assert_eq!(fb.torque_nm[2], 0.0);
        assert_eq!(
            fb.state[1],
            DriveState::Enabled,
            "other drives keep running"
        );
    }
    let mut reset = cmd;
    reset.request = DriveRequest::FaultReset;
    sim.exchange(at(4), &reset, &mut fb).unwrap();
    assert!(fb.all_enabled());
    assert_eq!(fb.error_code[2], 0);
    assert!(
        sim.inject_drive_fault(7, 1).is_err(),
        "joint 7 does not exist"
    );
}

#[test]
fn shutdown_brings_the_arm_to_rest_and_disables_it() {
    let (mut sim, mut fb) = started();
    let start = fb.pos_rad;
    for k in 1..=25u64 {
        let mut pos = start;
        for p in pos.iter_mut().take(7) {
            *p -= 0.5 * k as f64 * 0.02;
        }
        sim.exchange(
            at(k),
            &command(7, DriveRequest::Track, &pos[..7], &[-0.5; 7]),
            &mut fb,
        )
        .unwrap();
    }
    sim.shutdown(at(26)).unwrap();
    assert!(sim.at_rest());
    for j in 0..7 {
        let s = sim.joint(j).unwrap();
        assert_eq!(s.state, DriveState::Disabled);
        assert!(
            s.vel_rad_s.abs() < REST_VEL_RAD_S,
            "joint {j} at {}",
            s.vel_rad_s
        );
    }
}

// --- No allocation in exchange --------------------------------------------------

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

#[test]
fn exchange_does_not_allocate() {
    let (mut sim, mut fb) = started();
    let mut cmd = hold(&fb);
    let mut bad = cmd;
    bad.pos_rad[1] = f64::NAN;
    let ((), allocations) = count_allocations(|| {
        for k in 1..=2_000u64 {
            cmd.pos_rad[0] += 1e-4;
            cmd.request = match k % 500 {
                100 => DriveRequest::QuickStop,
                200 => DriveRequest::Disable,
                _ => DriveRequest::Track,
            };
            let _ = sim.exchange(at(k), &cmd, &mut fb);
            if k % 300 == 0 {
                let _ = sim.exchange(at(k), &bad, &mut fb);
            }
            if k == 1_000 {
                sim.inject_error_for(5, BackendError::FrameLost);
            }
        }
    });
    assert_eq!(allocations, 0);
}

/// Issue 37: two arms started at different instants between two deadlines, then
/// given the same commands at the same deadlines, measure the same to the bit (the
/// drives' sub-step clock starts in phase with the first exchange, as a drive
/// synchronized to SYNC0 does). Before, the sub-step grid kept the phase of
/// `start`, and the measurements parted by about 2e-8 rad within five cycles: a run
/// of a policy that observes the arm did not repeat.
#[test]
fn arms_started_at_different_instants_measure_the_same_on_the_same_deadlines() {
    let mut fbs = Vec::new();
    for start_ns in [0, 37_000, 12_345_678] {
        let mut sim = arm(SimArmParams::default());
        let mut fb = Feedback::default();
        sim.start(T0.add_ns(start_ns), &mut fb).expect("start");
        let mut trace = Vec::new();
        for k in 1..=40u64 {
            let target: Vec<f64> = (0..7)
                .map(|j| 0.02 * (k as f64) * (j as f64 + 1.0) / 7.0)
                .collect();
            let cmd = command(7, DriveRequest::Track, &target, &[1.0; 7]);
            sim.exchange(at(k), &cmd, &mut fb).unwrap();
            trace.push(fb.pos_rad);
        }
        fbs.push(trace);
    }
    let (first, last) = (fbs[0][0], fbs[0][39]);
    let moved = (last[0] - first[0]).abs();
    assert!(moved > 0.1, "joint 0 moved only {moved} rad");
    for (i, later) in ["37 us", "12.3 ms"].iter().enumerate() {
        let apart = fbs[0]
            .iter()
            .zip(&fbs[i + 1])
            .flat_map(|(a, b)| a.iter().zip(b).map(|(x, y)| (x - y).abs()))
            .fold(0.0f64, f64::max);
        assert_eq!(
            apart, 0.0,
            "started {later} later: apart by up to {apart:e} rad"
        );
    }
}
