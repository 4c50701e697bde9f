//! A drive that leaves OP or the bus is brought back while the other drives keep running:
//! power cycles (the last drive, a middle one and the drives cut off behind it), an SM
//! watchdog, and the give-up (a drive that never returns, another drive in its place, a
//! mapping that cannot be fixed). Judged from ecsim's own drive state, not only from the
//! backend's view.

mod common;

use chunkrt_core::{Backend, BackendError, Command, DriveRequest, DriveState, Feedback};
use chunkrt_ecsim::{DriveParams, SimNetwork};
use chunkrt_ethercat::{EthercatBackend, RejoinFailure, SimControl};
use common::*;
use std::time::Duration;

/// What ecsim itself says about drive `i`.
#[derive(Debug, PartialEq)]
struct SimDrive {
    al_state: u8,
    al_error: bool,
    station_address: u16,
    statusword: u16,
    position: i32,
    mode: u32,
    rx: Vec<u32>,
    tx: Vec<u32>,
}

fn sim_drive(ctl: &SimControl, i: usize) -> SimDrive {
    let net = ctl.network();
    let d = net.device(i).unwrap();
    let num = |index: u16, sub: u8| {
        let v = d.objs.read(index, sub).expect("object exists");
        let mut b = [0u8; 4];
        b[..v.bytes().len()].copy_from_slice(v.bytes());
        u32::from_le_bytes(b)
    };
    let map = |pdo: u16| (1..=num(pdo, 0) as u8).map(|s| num(pdo, s)).collect();
    SimDrive {
        al_state: d.al_state(),
        al_error: d.al_error(),
        station_address: d.esc.station_address(),
        statusword: d.drive().statusword(),
        position: d.drive().position(),
        mode: num(0x6060, 0),
        rx: map(0x1600),
        tx: map(0x1A00),
    }
}

fn enabled(sw: u16) -> bool {
    sw & 0x6F == 0x27
}

/// Joints 0..6 on a slow sine around `fb0`'s pose, joint 6 held.
fn moving(fb0: &Feedback, k: u64) -> Command {
    let mut c = hold(fb0, DriveRequest::Track);
    for j in 0..6 {
        c.pos_rad[j] += 0.05 * (k as f64 * 2e-3).sin();
        c.vel_rad_s[j] = 0.1 * (k as f64 * 2e-3).cos();
    }
    c
}

/// FaultReset (as the runtime asks while a drive is missing or faulted) until every drive
/// is enabled and the exchange is clean; returns the cycles it took.
fn reset_until_enabled(b: &mut EthercatBackend, fb: &mut Feedback, k: &mut u64) -> u64 {
    let mut n = 0;
    loop {
        *k += 1;
        n += 1;
        assert!(n < 2000, "not all enabled: {:?}", &fb.state[..7]);
        let r = b.exchange(t(*k, 1.0), &hold(fb, DriveRequest::FaultReset), fb);
        if r.is_ok() && all_enabled(fb) {
            return n;
        }
    }
}

fn track_clean(b: &mut EthercatBackend, fb: &mut Feedback, k: &mut u64) {
    let cmd = hold(fb, DriveRequest::Track);
    for _ in 0..20 {
        *k += 1;
        b.exchange(t(*k, 1.0), &cmd, fb).expect("tracking again");
    }
}

#[test]
fn the_last_drive_power_cycled_mid_run_is_brought_back_while_the_others_follow() {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let fb0 = start(&mut b);
    let mut fb = fb0;
    let before = sim_drive(&ctl, 6);
    let mut k = 0;
    for _ in 0..20 {
        k += 1;
        b.exchange(t(k, 1.0), &moving(&fb0, k), &mut fb)
            .expect("nominal");
    }
    assert!(ctl.network().power_cycle(6, 30_000_000));
    let t0 = k;
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    loop {
        k += 1;
        assert!(k - t0 < 1000, "never back");
        let cmd = moving(&fb0, k);
        let r = b.exchange(t(k, 1.0), &cmd, &mut fb);
        if r != Err(BackendError::DriveMissing { joint: 6 }) {
            r.expect("back in OP: a clean exchange");
            break;
        }
        assert_eq!(fb.state[6], DriveState::Missing);
        let net = ctl.network();
        for j in 0..6 {
            let d = net.device(j).unwrap();
            assert_eq!(d.al_state(), 8, "drive {j} stays in OP");
            assert!(enabled(d.drive().statusword()), "drive {j} stays enabled");
            assert_eq!(fb.state[j], DriveState::Enabled);
            assert!(
                (fb.pos_rad[j] - cmd.pos_rad[j]).abs() < 0.01,
                "joint {j} follows: {} vs {}",
                fb.pos_rad[j],
                cmd.pos_rad[j]
            );
        }
        lo = lo.min(cmd.pos_rad[0]);
        hi = hi.max(cmd.pos_rad[0]);
    }
    let rejoin_cycles = k - t0;
    assert!(
        hi - lo > 0.005,
        "the command moved during the rejoin: {}",
        hi - lo
    );
    let s = b.stats();
    assert_eq!(s.wkc_errors, 0, "{s:?}");
    assert_eq!(
        (s.rejoins_started, s.rejoins_completed, s.rejoins_failed),
        (1, 1, 0)
    );
    let back = sim_drive(&ctl, 6);
    assert_eq!((back.al_state, back.al_error), (8, false));
    assert_eq!(back.station_address, 0x1006);
    assert_eq!(back.mode, 8, "0x6060 = CSP again");
    let words = |v: &[chunkrt_config::PdoEntry]| -> Vec<u32> {
        v.iter().map(|e| e.mapping_word()).collect()
    };
    let ec = cfg.ethercat.as_ref().unwrap();
    assert_eq!(back.rx, words(&ec.pdo.rx));
    assert_eq!(back.tx, words(&ec.pdo.tx));
    assert_eq!(
        back.statusword & 0x4F,
        0x40,
        "switch on disabled after power-up"
    );

    let enable_cycles = reset_until_enabled(&mut b, &mut fb, &mut k);
    track_clean(&mut b, &mut fb, &mut k);
    let now = sim_drive(&ctl, 6);
    assert!(enabled(now.statusword), "{now:?}");
    assert!(
        (now.position - before.position).abs() < 5,
        "enabled where it stood: {} vs {}",
        now.position,
        before.position
    );
    assert_eq!(b.stats().wkc_errors, 0);
    eprintln!(
        "last drive: {rejoin_cycles} cycles from power loss (30 ms off) to OP, longest rejoin \
         {} ms, then {enable_cycles} cycles to enabled",
        b.stats().longest_rejoin_ns as f64 * 1e-6
    );
}

#[test]
fn a_middle_drive_power_cycled_comes_back_with_the_drives_behind_it() {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let mut fb = start(&mut b);
    let mut k = 0;
    track_clean(&mut b, &mut fb, &mut k);
    // Longer than the 100 ms SM watchdog of the drives cut off behind it.
    assert!(ctl.network().power_cycle(3, 150_000_000));
    let t0 = k;
    let mut seen_watchdog = false;
    loop {
        k += 1;
        assert!(k - t0 < 3000, "not back: {:?}", &fb.state[..7]);
        let r = b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::FaultReset), &mut fb);
        {
            let net = ctl.network();
            seen_watchdog |= (4..7).any(|i| net.device(i).unwrap().al_status_code() == 0x001B);
            for j in 0..3 {
                assert_eq!(
                    net.device(j).unwrap().al_state(),
                    8,
                    "drive {j} stays in OP"
                );
            }
        }
        if r.is_ok() && all_enabled(&fb) {
            break;
        }
        assert!(
            !matches!(r, Err(BackendError::DriveLost { .. })),
            "{r:?} at cycle {}",
            k - t0
        );
    }
    assert!(
        seen_watchdog,
        "the drives behind it dropped out on their watchdog"
    );
    track_clean(&mut b, &mut fb, &mut k);
    for i in 0..7 {
        let d = sim_drive(&ctl, i);
        assert_eq!((d.al_state, d.al_error), (8, false), "drive {i}");
        assert!(enabled(d.statusword), "drive {i}: {d:?}");
        assert_eq!(d.station_address, 0x1000 + i as u16);
    }
    let s = b.stats();
    assert_eq!(s.wkc_errors, 0, "{s:?}");
    assert_eq!((s.rejoins_completed, s.rejoins_failed), (4, 0), "{s:?}");
    eprintln!(
        "middle drive + 3 behind: {} cycles from power loss (150 ms off) to all enabled, \
         longest rejoin {} ms",
        k - t0 - 20,
        s.longest_rejoin_ns as f64 * 1e-6
    );
}

#[test]
fn drives_out_of_op_on_their_sm_watchdog_are_acknowledged_and_back() {
    let cfg = config();
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let mut fb = start(&mut b);
    let mut k = 0;
    track_clean(&mut b, &mut fb, &mut k);
    // The cable in front of drive 4 pulled for 150 ms (the watchdog is 100 ms), then back.
    ctl.network().cut_link(4);
    for _ in 0..150 {
        k += 1;
        let r = b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::FaultReset), &mut fb);
        assert_eq!(r, Err(BackendError::DriveMissing { joint: 4 }));
    }
    ctl.network().cut_link(7);
    k += 1;
    let _ = b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::FaultReset), &mut fb);
    for i in 4..7 {
        let net = ctl.network();
        let d = net.device(i).unwrap();
        assert_eq!(
            (d.al_state(), d.al_error(), d.al_status_code()),
            (4, true, 0x001B)
        );
    }
    let t0 = k;
    reset_until_enabled(&mut b, &mut fb, &mut k);
    track_clean(&mut b, &mut fb, &mut k);
    for i in 0..7 {
        let d = sim_drive(&ctl, i);
        assert_eq!((d.al_state, d.al_error), (8, false), "drive {i}");
        assert!(enabled(d.statusword), "drive {i}: {d:?}");
    }
    let s = b.stats();
    assert_eq!(s.wkc_errors, 0, "{s:?}");
    assert_eq!((s.rejoins_completed, s.rejoins_failed), (3, 0), "{s:?}");
    eprintln!(
        "SM watchdog, 3 drives: {} cycles from the cable back to all enabled",
        k - t0 - 20
    );
}

fn short_timeout_backend(ms: u64) -> (EthercatBackend, SimControl, Feedback) {
    let cfg = config();
    let mut p = params(&cfg);
    p.rejoin_timeout = Duration::from_millis(ms);
    let net = SimNetwork::new(sim_config(&cfg, 7)).unwrap();
    let (mut b, ctl) = EthercatBackend::simulated(p, net);
    let fb = start(&mut b);
    (b, ctl, fb)
}

/// Runs until `DriveLost { joint: 6 }`, checking the others stay in OP and enabled and the
/// lost drive stays lost; returns the cycles to the first `DriveLost`.
fn until_lost(b: &mut EthercatBackend, ctl: &SimControl, fb: &mut Feedback) -> u64 {
    let fb0 = *fb;
    let mut k = 0;
    let mut lost_at = None;
    for n in 0..2000u64 {
        k += 1;
        let cmd = moving(&fb0, k);
        let r = b.exchange(t(k, 1.0), &cmd, fb);
        {
            let net = ctl.network();
            for j in 0..6 {
                let d = net.device(j).unwrap();
                assert_eq!(d.al_state(), 8, "drive {j} stays in OP");
                assert!(enabled(d.drive().statusword()), "drive {j} stays enabled");
                assert!(
                    (fb.pos_rad[j] - cmd.pos_rad[j]).abs() < 0.01,
                    "joint {j} follows"
                );
            }
        }
        assert_eq!(fb.state[6], DriveState::Missing);
        match (lost_at, r) {
            (None, Err(BackendError::DriveMissing { joint: 6 })) => {}
            (None, Err(BackendError::DriveLost { joint: 6 })) => lost_at = Some(n),
            (Some(_), Err(BackendError::DriveLost { joint: 6 })) => {}
            other => panic!("cycle {n}: {other:?}"),
        }
        if lost_at.is_some_and(|l| n > l + 50) {
            break;
        }
    }
    let s = b.stats();
    assert_eq!(s.wkc_errors, 0, "{s:?}");
    assert_eq!((s.rejoins_started, s.rejoins_failed), (1, 1), "{s:?}");
    lost_at.expect("DriveLost")
}

#[test]
fn a_drive_that_never_comes_back_is_lost_after_the_timeout() {
    let (mut b, ctl, mut fb) = short_timeout_backend(200);
    assert!(ctl.network().power_cycle(6, 3_600_000_000_000));
    let n = until_lost(&mut b, &ctl, &mut fb);
    assert!((195..=210).contains(&n), "lost after {n} cycles of 1 ms");
    assert_eq!(b.rejoin_failure(6), Some(RejoinFailure::Timeout));
}

#[test]
fn another_drive_in_its_place_is_lost_and_nothing_is_written_to_it() {
    let (mut b, ctl, mut fb) = short_timeout_backend(10_000);
    let other = DriveParams {
        product_code: 0x0BAD_0001,
        ..DriveParams::default()
    };
    assert!(ctl.network().swap_drive(6, other));
    assert!(ctl.network().power_cycle(6, 30_000_000));
    let n = until_lost(&mut b, &ctl, &mut fb);
    assert!(
        n < 100,
        "lost as soon as its SII is read, not at the timeout: {n}"
    );
    assert_eq!(
        b.rejoin_failure(6),
        Some(RejoinFailure::Identity {
            vendor: DriveParams::default().vendor_id,
            product: 0x0BAD_0001
        })
    );
    let d = sim_drive(&ctl, 6);
    assert_eq!(
        (d.al_state, d.station_address),
        (1, 0),
        "left in INIT at address 0"
    );
}

#[test]
fn a_drive_back_with_a_mapping_it_will_not_change_is_lost() {
    let (mut b, ctl, mut fb) = short_timeout_backend(10_000);
    // Same identity, but a fixed mapping in another order that refuses SDO writes.
    let fixed = DriveParams {
        tx_pdo: vec![
            0x6064_0020,
            0x6041_0010,
            0x606C_0020,
            0x6077_0010,
            0x603F_0010,
        ],
        pdo_writable: false,
        ..DriveParams::default()
    };
    assert!(ctl.network().swap_drive(6, fixed));
    assert!(ctl.network().power_cycle(6, 30_000_000));
    until_lost(&mut b, &ctl, &mut fb);
    assert!(
        matches!(b.rejoin_failure(6), Some(RejoinFailure::Mapping { .. })),
        "{:?}",
        b.rejoin_failure(6)
    );
    let d = sim_drive(&ctl, 6);
    assert!(d.al_state < 4, "never in SAFE-OP: {d:?}");
}

/// With DC on: every drive's SYNC0 phase at this simulated instant, by its own clock.
fn sync0_phases(ctl: &SimControl) -> Vec<Option<u64>> {
    let net = ctl.network();
    let now = net.now_ns();
    (0..net.len())
        .map(|i| net.device(i).unwrap().esc.sync0_phase_ns(now))
        .collect()
}

/// Power-cycles `drives` (150 ms) on a DC bus and brings them back: each drive's SYNC0
/// must stand against the reference's (drive 0) where ethercrab's bring-up had put it.
/// (ecsim has no drift controller, so the propagation delay stays in the clocks as a static
/// 1 µs per hop that a real ESC's time control would absorb; what is compared is the
/// relation, not zero.)
fn dc_power_cycle_keeps_one_sync0(drives: &[usize], name: &str) {
    let mut cfg = config();
    cfg.ethercat.as_mut().unwrap().dc_sync0 = true;
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let mut fb = start(&mut b);
    let mut k = 0;
    // Past the first SYNC0 pulse (ethercrab starts SYNC0 a little after bring-up).
    for _ in 0..10 {
        track_clean(&mut b, &mut fb, &mut k);
    }
    // Each drive's SYNC0 phase against the reference's, wrapped into ±half the period.
    let relative = |phases: &[Option<u64>]| -> Vec<i64> {
        let p0 = phases[0].expect("SYNC0 runs on the reference") as i64;
        phases
            .iter()
            .map(|p| {
                let d = (p.expect("SYNC0 runs on every drive") as i64 - p0).rem_euclid(1_000_000);
                if d >= 500_000 {
                    d - 1_000_000
                } else {
                    d
                }
            })
            .collect()
    };
    let before = sync0_phases(&ctl);
    let rel_before = relative(&before);
    for &i in drives {
        assert!(ctl.network().power_cycle(i, 150_000_000));
    }
    let t0 = k;
    // While it is off nothing answers (lost frames, then `FrameLost`); once it is back,
    // every drive is out of OP (`DriveMissing`) until the rejoins are done.
    let mut missing = 0;
    loop {
        k += 1;
        assert!(k - t0 < 5000, "not back: {:?}", &fb.state[..7]);
        let r = b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::FaultReset), &mut fb);
        missing += u32::from(matches!(r, Err(BackendError::DriveMissing { .. })));
        if r.is_ok() && !fb.held && all_enabled(&fb) {
            break;
        }
        assert!(
            !matches!(r, Err(BackendError::DriveLost { .. })),
            "{r:?} at cycle {}",
            k - t0
        );
    }
    let back_at = k - t0;
    // Past the SYNC0 start the rejoin set (100 ms after it programmed each drive).
    assert!(missing > 0, "the drives were seen out of OP");
    for _ in 0..150 {
        k += 1;
        b.exchange(t(k, 1.0), &hold(&fb, DriveRequest::Track), &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
        assert!(!fb.held, "cycle {k}");
    }
    let after = sync0_phases(&ctl);
    for i in 0..7 {
        let d = sim_drive(&ctl, i);
        assert_eq!((d.al_state, d.al_error), (8, false), "drive {i}");
        assert!(enabled(d.statusword), "drive {i}: {d:?}");
        let net = ctl.network();
        assert_eq!(net.device(i).unwrap().esc.sync0_cycle_ns(), Some(1_000_000));
    }
    let rel_after = relative(&after);
    let worst = rel_before
        .iter()
        .zip(&rel_after)
        .map(|(a, b)| a.abs_diff(*b))
        .max()
        .unwrap();
    assert!(
        worst < 500,
        "SYNC0 against the reference's, ns: before {rel_before:?}, after {rel_after:?}"
    );
    let s = b.stats();
    assert_eq!(s.wkc_errors, 0, "{s:?}");
    assert_eq!((s.rejoins_completed, s.rejoins_failed), (7, 0), "{s:?}");
    eprintln!(
        "{name}, DC on: {back_at} cycles from power loss (150 ms off) \
         to all enabled; SYNC0 against the reference's (ns) before {rel_before:?}, after \
         {rel_after:?}"
    );
}

#[test]
fn the_dc_reference_drive_power_cycled_takes_the_bus_time_back_from_a_drive_that_kept_it() {
    // Drive 0 is the reference clock and the first on the line: its power cycle takes all
    // seven off the bus, and its system time starts again from its power-up. Drives 1-6
    // kept power and the bus's time: drive 0 must take it back from them, or every SYNC0
    // behind it stands at a random phase against its own.
    dc_power_cycle_keeps_one_sync0(&[0], "reference drive");
}

#[test]
fn the_whole_chain_power_cycled_comes_back_on_one_sync0() {
    // No drive kept the time: the reference starts a new one and the others take it.
    dc_power_cycle_keeps_one_sync0(&[0, 1, 2, 3, 4, 5, 6], "whole chain");
}
