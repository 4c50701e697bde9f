//! Per-cycle faults on the simulated chain: a drive fault with quick stop, fault reset and
//! re-enable (lost frames: frame_loss.rs); a drive that disappears; commands that must not be sent.

mod common;

use chunkrt_core::{Backend, BackendError, Command, DriveRequest, DriveState, Feedback};
use chunkrt_ethercat::{EthercatBackend, SimControl};
use common::*;

/// Each simulated drive's target (0x607A) as it holds it now.
fn sim_targets(ctl: &SimControl) -> Vec<i32> {
    let net = ctl.network();
    (0..net.len())
        .map(|i| net.device(i).unwrap().drive().target)
        .collect()
}

fn sim_positions(ctl: &SimControl) -> Vec<i32> {
    let net = ctl.network();
    (0..net.len())
        .map(|i| net.device(i).unwrap().drive().position())
        .collect()
}

fn setup() -> (
    chunkrt_config::Config,
    EthercatBackend,
    SimControl,
    Feedback,
) {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let fb = start(&mut b);
    (cfg, b, ctl, fb)
}

#[test]
fn drive_fault_then_quick_stop_fault_reset_and_recovery() {
    let (_cfg, mut b, ctl, fb0) = setup();
    let mut fb = fb0;
    let mut k = 1;
    let mut step = |b: &mut EthercatBackend, cmd: &Command, fb: &mut Feedback| {
        k += 1;
        b.exchange(t(k, 1.0), cmd, fb)
    };
    for _ in 0..20 {
        step(&mut b, &hold(&fb0, DriveRequest::Track), &mut fb).expect("nominal");
    }
    assert!(ctl.network().inject_drive_fault(2, 0x2310));

    // The fault is reported with the drive's joint and 0x603F.
    let mut reported = None;
    for _ in 0..5 {
        if let Err(e) = step(&mut b, &hold(&fb0, DriveRequest::Track), &mut fb) {
            reported = Some(e);
            break;
        }
    }
    assert_eq!(
        reported,
        Some(BackendError::DriveFault {
            joint: 2,
            code: 0x2310
        })
    );
    assert_eq!(fb.state[2], DriveState::Fault);
    assert_eq!(fb.error_code[2], 0x2310);

    // The runtime's answer: quick stop. The other drives stop and leave Operation Enabled;
    // the fault keeps being reported.
    for _ in 0..50 {
        let r = step(&mut b, &hold(&fb, DriveRequest::QuickStop), &mut fb);
        assert!(
            matches!(r, Err(BackendError::DriveFault { joint: 2, .. })),
            "{r:?}"
        );
    }
    assert!(!any_sim_drive_enabled(&ctl));
    for j in [0, 1, 3, 4, 5, 6] {
        assert!(
            matches!(fb.state[j], DriveState::QuickStop | DriveState::Disabled),
            "joint {j}: {:?}",
            fb.state[j]
        );
    }

    // Fault reset: bit 7 pulsed, then every drive enabled at its actual position.
    let mut cycles = 0;
    while !all_enabled(&fb) {
        cycles += 1;
        assert!(cycles < 100, "no recovery: {:?}", &fb.state[..7]);
        let _ = step(&mut b, &hold(&fb, DriveRequest::FaultReset), &mut fb);
        let (targets, positions) = (sim_targets(&ctl), sim_positions(&ctl));
        for i in 0..7 {
            assert!(
                (i64::from(targets[i]) - i64::from(positions[i])).abs() < 50,
                "drive {i}: target {} far from actual {} while enabling",
                targets[i],
                positions[i]
            );
        }
    }
    assert_eq!(fb.error_code[2], 0);
    // Re-seeded at the measured position, tracking resumes.
    let resumed = hold(&fb, DriveRequest::Track);
    for _ in 0..20 {
        step(&mut b, &resumed, &mut fb).expect("tracking again");
    }
    assert!(all_enabled(&fb));
}

#[test]
fn a_drive_that_disappears_is_reported_by_joint_and_comes_back() {
    let (_cfg, mut b, ctl, fb0) = setup();
    let mut fb = fb0;
    let cmd = hold(&fb0, DriveRequest::Track);
    b.exchange(t(1, 1.0), &cmd, &mut fb).expect("nominal");
    ctl.network().cut_link(5);
    let r = b.exchange(t(2, 1.0), &cmd, &mut fb);
    assert_eq!(r, Err(BackendError::DriveMissing { joint: 5 }));
    assert_eq!(fb.state[5], DriveState::Missing);
    assert_eq!(fb.state[6], DriveState::Missing);
    assert_eq!(fb.state[4], DriveState::Enabled);
    ctl.network().cut_link(7);
    b.exchange(t(3, 1.0), &cmd, &mut fb).expect("cable back in");
    assert_eq!(b.stats().drive_missing, 1);
}

#[test]
fn commands_that_must_not_reach_the_drives_are_refused_and_the_drives_hold() {
    let (_cfg, mut b, ctl, fb0) = setup();
    let mut fb = fb0;
    let cmd = hold(&fb0, DriveRequest::Track);
    b.exchange(t(1, 1.0), &cmd, &mut fb).expect("nominal");
    let held = sim_targets(&ctl);

    let mut nan = cmd;
    nan.pos_rad[4] = f64::NAN;
    assert_eq!(
        b.exchange(t(2, 1.0), &nan, &mut fb),
        Err(BackendError::InvalidCommand { joint: 4 })
    );
    assert_eq!(sim_targets(&ctl), held, "a NaN command is not sent");
    let mut short = cmd;
    short.dof = 6;
    assert_eq!(
        b.exchange(t(3, 1.0), &short, &mut fb),
        Err(BackendError::InvalidCommand { joint: 6 })
    );
    assert_eq!(sim_targets(&ctl), held);
    assert!(all_enabled(&fb), "refusing a command does not stop the arm");

    // After a quick stop and re-enable, a command far from where the drive was enabled
    // is refused (the drive holds) until the runtime sends one near it.
    for k in 4..40 {
        let _ = b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::QuickStop), &mut fb);
    }
    let mut k = 40;
    while !all_enabled(&fb) {
        k += 1;
        assert!(k < 100);
        let _ = b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::Track), &mut fb);
    }
    let held = sim_targets(&ctl);
    let mut far = hold(&fb, DriveRequest::Track);
    far.pos_rad[1] += 0.3;
    assert_eq!(
        b.exchange(t(k + 1, 1.0), &far, &mut fb),
        Err(BackendError::InvalidCommand { joint: 1 })
    );
    assert_eq!(sim_targets(&ctl)[1], held[1], "joint 1 holds");
    b.exchange(t(k + 2, 1.0), &hold(&fb, DriveRequest::Track), &mut fb)
        .expect("a command at the measured position resumes");
}

#[test]
fn fault_reset_alone_stops_the_group_then_resets_and_reenables_at_the_actual_pose() {
    let (_cfg, mut b, ctl, fb0) = setup();
    let mut fb = fb0;
    // Joint 0 moving when joint 5 faults.
    let mut k = 0;
    for _ in 0..300 {
        k += 1;
        let mut cmd = hold(&fb0, DriveRequest::Track);
        cmd.pos_rad[0] += 0.3 * (k as f64 * 1e-3);
        cmd.vel_rad_s[0] = 0.3;
        b.exchange(t(k, 1.0), &cmd, &mut fb).expect("nominal");
    }
    ctl.network().inject_drive_fault(5, 0x5530);
    let mut stopped_all = false;
    let mut cycles = 0;
    loop {
        k += 1;
        cycles += 1;
        assert!(cycles < 300, "no recovery: {:?}", &fb.state[..7]);
        let _ = b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::FaultReset), &mut fb);
        let others_down = (0..7)
            .filter(|&j| j != 5)
            .all(|j| fb.state[j] != DriveState::Enabled);
        stopped_all |= others_down && fb.state[5] == DriveState::Fault;
        if cycles > 2 && all_enabled(&fb) {
            break;
        }
    }
    assert!(
        stopped_all,
        "the healthy drives quick-stopped while joint 5 was in fault"
    );
    let (targets, positions) = (sim_targets(&ctl), sim_positions(&ctl));
    for i in 0..7 {
        assert!(
            (i64::from(targets[i]) - i64::from(positions[i])).abs() < 50,
            "drive {i} enabled at its actual position"
        );
    }
    k += 1;
    b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::Track), &mut fb)
        .expect("tracking from the measured pose");
}

#[test]
fn a_working_counter_mismatch_is_reported_with_expected_and_received() {
    let (_cfg, mut b, ctl, fb0) = setup();
    let mut fb = fb0;
    let cmd = hold(&fb0, DriveRequest::Track);
    b.exchange(t(1, 1.0), &cmd, &mut fb).expect("nominal");
    // Switch drive 2's FMMUs off (0x060C: activate): it stays in OP but no longer takes
    // part in the process data, as an ESC with a broken mapping would.
    let saved: Vec<u16> = {
        let mut net = ctl.network();
        let esc = &mut net.device_mut(2).unwrap().esc;
        (0..4)
            .map(|k| {
                let at = 0x0600 + 16 * k + 12;
                let v = esc.get16(at);
                esc.put16(at, 0);
                v
            })
            .collect()
    };
    let r = b.exchange(t(2, 1.0), &cmd, &mut fb);
    assert_eq!(
        r,
        Err(BackendError::WorkingCounter {
            expected: 21,
            received: 18
        })
    );
    assert_eq!(
        fb.state[0],
        DriveState::Enabled,
        "the others' feedback is filled"
    );
    {
        let mut net = ctl.network();
        let esc = &mut net.device_mut(2).unwrap().esc;
        for (k, v) in saved.iter().enumerate() {
            esc.put16(0x0600 + 16 * k + 12, *v);
        }
    }
    b.exchange(t(3, 1.0), &cmd, &mut fb).expect("mapping back");
    assert_eq!(b.stats().wkc_errors, 1);
}

#[test]
fn a_master_silent_for_150_ms_finds_every_drive_in_safe_op_with_the_sm_watchdog_code() {
    let (_cfg, mut b, ctl, fb0) = setup();
    let mut fb = fb0;
    let cmd = hold(&fb0, DriveRequest::Track);
    let mut k = 0;
    for _ in 0..50 {
        k += 1;
        b.exchange(t(k, 1.0), &cmd, &mut fb).expect("nominal");
    }
    // Below the drives' 100 ms watchdog: nothing happens.
    ctl.network().silence(50_000_000);
    k += 1;
    b.exchange(t(k, 1.0), &cmd, &mut fb)
        .expect("a 50 ms gap is within the watchdog");
    let before = sim_targets(&ctl);

    // 150 ms: the first frame after the gap finds the watchdog expired. Its outputs are not
    // taken: the drives went to a safe state (fault, no torque) before it arrived.
    ctl.network().silence(150_000_000);
    let mut moved = cmd;
    for j in 0..7 {
        moved.pos_rad[j] += 0.01;
    }
    k += 1;
    let r = b.exchange(t(k, 1.0), &moved, &mut fb);
    assert_eq!(r, Err(BackendError::DriveMissing { joint: 0 }));
    assert!(fb.state[..7].iter().all(|s| *s == DriveState::Missing));
    assert_eq!(
        sim_targets(&ctl),
        before,
        "the frame after the gap was not applied"
    );
    let net = ctl.network();
    for i in 0..7 {
        let d = net.device(i).unwrap();
        assert_eq!(
            (d.al_state(), d.al_error(), d.al_status_code()),
            (4, true, 0x001B),
            "drive {i}: SAFE-OP + error, SM watchdog"
        );
        assert_eq!(d.drive().error_code(), chunkrt_ecsim::cia402::ERR_COMM);
        assert_ne!(d.drive().statusword() & 0x6F, 0x27, "drive {i} not enabled");
    }
}
