//! Bring-up against simulated drives: the happy path, and each way it must refuse with a
//! message that says what to fix while leaving no drive enabled.

mod common;

use chunkrt_core::{Backend, DriveRequest, DriveState, Feedback};
use common::*;

/// Drives whose power stage is on (switched on, operation enabled, quick stop active),
/// by the simulated drives' own statuswords.
fn powered(ctl: &chunkrt_ethercat::SimControl) -> usize {
    let net = ctl.network();
    (0..net.len())
        .filter(|&i| {
            matches!(
                net.device(i).unwrap().drive().statusword() & 0x6F,
                0x23 | 0x27 | 0x07
            )
        })
        .count()
}

#[test]
fn bring_up_ends_in_op_with_every_power_stage_off_and_enable_needs_process_data() {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let mut fb = Feedback::default();
    b.start(t(0, 1.0), &mut fb).expect("bring-up");
    {
        let net = ctl.network();
        for i in 0..7 {
            assert_eq!(net.device(i).unwrap().al_state(), 8, "drive {i} in OP");
        }
    }
    assert_eq!(powered(&ctl), 0, "bring-up left a power stage on");
    assert!(fb.state[..7].iter().all(|s| *s != DriveState::Enabled));
    let frames_before = ctl.network().stats().frames;
    b.enable(t(1, 1.0), &mut fb).expect("enable");
    let frames = ctl.network().stats().frames - frames_before;
    assert_eq!(powered(&ctl), 7, "enable left a drive off");
    assert!(fb.state[..7].iter().all(|s| *s == DriveState::Enabled));
    // Shutdown, switch on, enable operation: at least one process-data frame each.
    assert!(frames >= 3, "enabled with {frames} frames");
    b.shutdown(t(2, 1.0)).expect("clean shutdown");
    assert_eq!(powered(&ctl), 0);
}

#[test]
fn seven_drives_come_up_enabled_at_their_measured_pose_and_follow_commands() {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let fb0 = start(&mut b);
    let goal0 = &cfg.policy.goals_rad[0];
    for (j, goal) in goal0.iter().enumerate() {
        assert_eq!(fb0.state[j], DriveState::Enabled, "joint {j}");
        // The config's offsets put ecsim's start positions at the first goal pose.
        assert!(
            (fb0.pos_rad[j] - goal).abs() < 1e-4,
            "joint {j}: {}",
            fb0.pos_rad[j]
        );
    }
    {
        let net = ctl.network();
        for i in 0..7 {
            let d = net.device(i).unwrap();
            assert_eq!(d.al_state(), 8, "drive {i} in OP");
            assert_eq!(d.drive().mode_display(), 8, "drive {i} in CSP");
        }
    }

    // A 0.2 rad, 0.5 Hz sine on every joint at 1 ms for 4 s.
    let mut fb = fb0;
    let mut max_err: f64 = 0.0;
    let mut prev = hold(&fb0, DriveRequest::Track);
    for k in 1..=4000u64 {
        let s = (k as f64 * 1e-3 * std::f64::consts::PI).sin();
        let c = (k as f64 * 1e-3 * std::f64::consts::PI).cos();
        let mut cmd = hold(&fb0, DriveRequest::Track);
        for j in 0..7 {
            let dir = if j % 2 == 0 { 1.0 } else { -1.0 };
            cmd.pos_rad[j] = fb0.pos_rad[j] + dir * 0.2 * s;
            cmd.vel_rad_s[j] = dir * 0.2 * std::f64::consts::PI * c;
        }
        b.exchange(t(k, 1.0), &cmd, &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
        // The drives answer with the position after applying the previous cycle's target.
        if k > 50 {
            for j in 0..7 {
                max_err = max_err.max((prev.pos_rad[j] - fb.pos_rad[j]).abs());
            }
        }
        prev = cmd;
        assert!(fb.bus_rtt_ns > 0);
    }
    eprintln!(
        "max tracking error {max_err:.5} rad over 4000 cycles; {:?}",
        b.stats()
    );
    // 0.63 rad/s peak through a 40 Hz CSP loop with the virtual clock: ~0.2 mrad.
    assert!(max_err < 0.002, "tracking error {max_err} rad");
    assert!(max_err > 0.0);
    let st = b.stats();
    assert_eq!((st.frames_lost, st.wkc_errors, st.drive_missing), (0, 0, 0));

    b.shutdown(t(4001, 1.0)).expect("clean shutdown");
    assert!(
        !any_sim_drive_enabled(&ctl),
        "no drive enabled after shutdown"
    );
    let net = ctl.network();
    for i in 0..7 {
        assert_eq!(
            net.device(i).unwrap().al_state(),
            1,
            "drive {i} back in INIT"
        );
    }
}

fn refused(
    cfg: &chunkrt_config::Config,
    sim: chunkrt_ecsim::SimConfig,
) -> (String, chunkrt_ethercat::SimControl) {
    let (mut b, ctl) = backend(cfg, sim);
    let mut fb = Feedback::default();
    let err = b
        .start(t(0, 1.0), &mut fb)
        .expect_err("bring-up must be refused")
        .to_string();
    assert!(
        !any_sim_drive_enabled(&ctl),
        "a drive was left enabled: {err}"
    );
    (err, ctl)
}

#[test]
fn identity_mismatch_names_the_drive_expected_and_found() {
    let mut cfg = config();
    cfg.ethercat.as_mut().unwrap().drive[3].product_code = 0x0402_0099;
    let (err, ctl) = refused(&cfg, sim_config(&cfg, 7));
    for part in [
        "bus position 3",
        "joint 3",
        "expected vendor 0x00000ce5 product 0x04020099",
        "found vendor 0x00000ce5 product 0x04020001",
        "ethercat.drive[3].vendor_id / product_code",
    ] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
    let net = ctl.network();
    for i in 0..7 {
        assert!(
            net.device(i).unwrap().al_state() <= 2,
            "drive {i} never left PRE-OP"
        );
    }
}

#[test]
fn a_missing_drive_is_named_with_what_to_check() {
    let cfg = config();
    let (err, _ctl) = refused(&cfg, sim_config(&cfg, 6));
    for part in [
        "6 drive(s) answered",
        "lists 7",
        "bus position 6",
        "joint 6",
        "cable",
    ] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
}

#[test]
fn an_extra_drive_is_refused() {
    let cfg = config();
    let (err, _ctl) = refused(&cfg, sim_config(&cfg, 8));
    assert!(
        err.contains("8 drive(s) answered") && err.contains("list every drive"),
        "{err}"
    );
}

#[test]
fn a_refused_state_transition_names_the_drive_and_its_al_code() {
    let cfg = config();
    let mut sim = sim_config(&cfg, 7);
    sim.refuse_transition
        .push(chunkrt_ecsim::config::RefuseTransition {
            drive: 4,
            to: chunkrt_ecsim::config::TargetState::SafeOp,
            code: 0x001D,
            count: None,
        });
    let mut cfg = cfg;
    cfg.ethercat.as_mut().unwrap().state_timeout_ms = 300.0;
    let (err, _ctl) = refused(&cfg, sim);
    assert!(err.contains("PRE-OP -> SAFE-OP"), "{err}");
    assert!(
        err.contains("bus position 4") && err.contains("0x001d"),
        "{err}"
    );
}

#[test]
fn with_dc_sync0_the_drives_run_on_distributed_clocks() {
    let mut cfg = config();
    cfg.ethercat.as_mut().unwrap().dc_sync0 = true;
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let fb0 = start(&mut b);
    let mut fb = fb0;
    for k in 1..=200 {
        b.exchange(t(k, 1.0), &hold(&fb0, DriveRequest::Track), &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
    }
    {
        let net = ctl.network();
        let d = net.device(0).unwrap();
        assert_eq!(
            d.esc.sync0_cycle_ns(),
            Some(1_000_000),
            "SYNC0 at the bus period"
        );
    }
    b.shutdown(t(201, 1.0)).expect("clean shutdown");
    assert!(!any_sim_drive_enabled(&ctl));
}

#[test]
fn a_different_pdo_mapping_is_written_over_coe_and_decoded() {
    use chunkrt_config::PdoEntry::*;
    let mut cfg = config();
    {
        let pdo = &mut cfg.ethercat.as_mut().unwrap().pdo;
        pdo.rx = vec![TargetPosition, Controlword];
        pdo.tx = vec![PositionActual, ErrorCode, Statusword, ModeDisplay];
    }
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let fb0 = start(&mut b);
    let goal0 = &cfg.policy.goals_rad[0];
    for (j, goal) in goal0.iter().enumerate() {
        assert!(
            (fb0.pos_rad[j] - goal).abs() < 1e-4,
            "joint {j} decoded from the new layout"
        );
        assert_eq!(fb0.state[j], DriveState::Enabled);
        assert_eq!(fb0.vel_rad_s[j], 0.0, "velocity not mapped");
    }
    let mut fb = fb0;
    let mut cmd = hold(&fb0, DriveRequest::Track);
    for k in 1..=500u64 {
        cmd.pos_rad[2] = fb0.pos_rad[2] + 0.1 * (k as f64 / 500.0);
        b.exchange(t(k, 1.0), &cmd, &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
    }
    assert!(
        (fb.pos_rad[2] - cmd.pos_rad[2]).abs() < 0.002,
        "{}",
        fb.pos_rad[2]
    );
    // Shutdown judges rest from the position alone here.
    b.shutdown(t(501, 1.0)).expect("clean shutdown");
    assert!(!any_sim_drive_enabled(&ctl));
}
