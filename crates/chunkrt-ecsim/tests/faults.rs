//! One test per injected fault, each checking what a real drive (and the master) shows.

mod common;

use chunkrt_ecsim::config::{DriveFault, LinkCut, RefuseTransition, TargetState};
use chunkrt_ecsim::SimConfig;
use common::master::{enable_and_track, op_enabled};
use ethercrab::std::ethercat_now;
use ethercrab::Command;
use futures_lite::future::block_on;
use std::time::Duration;

/// PDU timeout: short so lost frames cost little test time, long enough that a loaded 2-core
/// machine does not add spurious timeouts.
fn short() -> ethercrab::Timeouts {
    common::timeouts(Duration::from_secs(5), Duration::from_millis(20))
}

/// Bring a chain to OP with mode CSP on every drive.
macro_rules! to_op {
    ($md:expr) => {{
        let group = $md
            .init_single_group::<8, 256>(ethercat_now)
            .await
            .expect("init");
        for sd in group.iter(&$md) {
            sd.sdo_write(0x6060, 0, 8u8).await.expect("mode CSP");
        }
        group.into_op(&$md).await.expect("to OP")
    }};
}

#[test]
fn dropped_frames_time_out_and_the_run_continues() {
    static STORAGE: common::Storage = common::Storage::new();
    let mut cfg = SimConfig::virtual_chain(3);
    cfg.frames.drop = 0.02;
    cfg.frames.start_s = 0.01;
    let (md, sim) = common::start(&STORAGE, cfg, short());
    let report = block_on(async {
        let group = to_op!(md);
        enable_and_track(&md, &group, 2000, None, 50_000.0, 1.0).await
    });
    let stats = sim.network().stats();
    assert!(stats.dropped >= 10 && stats.dropped <= 100, "{stats:?}");
    // Every lost frame is a timeout at the master; nothing it did receive was wrong.
    assert!(
        report.exchange_errors >= stats.dropped,
        "{report:?} {stats:?}"
    );
    assert_eq!(report.wkc_errors, 0, "{report:?}");
    assert!(
        report.last_inputs.iter().all(|i| op_enabled(i.statusword)),
        "{report:?}"
    );
}

#[test]
fn late_frames_time_out_at_the_master_and_the_run_continues() {
    static STORAGE: common::Storage = common::Storage::new();
    let mut cfg = SimConfig::virtual_chain(3);
    cfg.frames.delay = 0.02;
    cfg.frames.start_s = 0.01;
    cfg.frames.delay_us = 60_000; // longer than the 20 ms PDU timeout
    let (md, sim) = common::start(&STORAGE, cfg, short());
    let report = block_on(async {
        let group = to_op!(md);
        enable_and_track(&md, &group, 1000, None, 50_000.0, 1.0).await
    });
    let stats = sim.network().stats();
    assert!(stats.delayed >= 5, "{stats:?}");
    // Each late reply is a timeout for the frame it belonged to. (Now and then a late reply
    // arrives while a newer frame with the same PDU index waits, and is taken as that frame's
    // answer - the stale-frame hazard of a real wire - so the count may fall short by a few.)
    assert!(
        report.exchange_errors * 2 >= stats.delayed,
        "{report:?} {stats:?}"
    );
    assert_eq!(report.wkc_errors, 0, "{report:?}");
    assert!(
        report.last_inputs.iter().all(|i| op_enabled(i.statusword)),
        "{report:?}"
    );
}

#[test]
fn corrupted_frames_count_crc_errors_in_every_drive() {
    static STORAGE: common::Storage = common::Storage::new();
    let mut cfg = SimConfig::virtual_chain(3);
    cfg.frames.corrupt = 0.02;
    cfg.frames.start_s = 0.01;
    let (md, sim) = common::start(&STORAGE, cfg, short());
    let (report, counters) = block_on(async {
        let group = to_op!(md);
        let report = enable_and_track(&md, &group, 2000, None, 50_000.0, 1.0).await;
        let mut counters = Vec::new();
        for sd in group.iter(&md) {
            // Retry: this read may itself be corrupted (counting one more error).
            let mut value = None;
            for _ in 0..10 {
                if let Ok(v) = Command::fprd(sd.configured_address(), 0x0300)
                    .receive::<[u8; 4]>(&md)
                    .await
                {
                    value = Some(v);
                    break;
                }
            }
            counters.push(value.expect("read RX error counters"));
        }
        (report, counters)
    });
    let stats = sim.network().stats();
    assert!(stats.corrupted >= 10, "{stats:?}");
    assert!(report.exchange_errors >= 10, "{report:?}");
    // Each corrupted frame is seen as a CRC error by every drive: on port 0 behind the bad link,
    // on port 1 (on its way back) in front of it.
    let total: u64 = counters
        .iter()
        .map(|c| u64::from(c[0]) + u64::from(c[2]))
        .sum();
    let corrupted_before_read = stats.corrupted;
    assert!(
        total <= 3 * corrupted_before_read && total + 3 * 10 >= 3 * corrupted_before_read,
        "counters {counters:?} vs {stats:?}"
    );
    assert!(
        counters.iter().any(|c| c[0] > 0),
        "port 0 CRC errors counted: {counters:?}"
    );
}

#[test]
fn drive_fault_at_time_shows_error_code_and_resets() {
    static STORAGE: common::Storage = common::Storage::new();
    let mut cfg = SimConfig::virtual_chain(4);
    cfg.drive_fault.push(DriveFault {
        drive: 2,
        at_s: 0.5,
        code: 0x2310,
    });
    let (md, sim) = common::start(&STORAGE, cfg, short());
    let (report, code_after) = block_on(async {
        let group = to_op!(md);
        let report = enable_and_track(&md, &group, 1500, None, 50_000.0, 1.0).await;
        let sd = group.subdevice(&md, 2).unwrap();
        let code: u16 = sd.sdo_read(0x603F, 0).await.expect("0x603F");
        (report, code)
    });
    assert_eq!(report.faults_seen, vec![(2, 0x2310)], "{report:?}");
    let at = report.fault_cycles[0];
    assert!(
        (495..=515).contains(&at),
        "fault seen at cycle {at}, configured 500 ms at 1 ms/cycle"
    );
    assert_eq!(report.wkc_errors, 0);
    // The helper answered with a fault reset and the enable sequence: everyone runs again.
    assert!(report
        .last_inputs
        .iter()
        .all(|i| op_enabled(i.statusword) && i.error_code == 0));
    assert_eq!(code_after, 0);
    assert_eq!(
        sim.network().device(2).unwrap().al_state(),
        8,
        "EtherCAT stays in OP"
    );
}

#[test]
fn refused_transition_sets_error_flag_and_al_status_code() {
    static STORAGE: common::Storage = common::Storage::new();
    let mut cfg = SimConfig::virtual_chain(3);
    cfg.refuse_transition.push(RefuseTransition {
        drive: 1,
        to: TargetState::SafeOp,
        code: 0x001D,
        count: None,
    });
    let timeouts = common::timeouts(Duration::from_millis(300), Duration::from_millis(50));
    let (md, _sim) = common::start(&STORAGE, cfg, timeouts);
    block_on(async {
        let group = md
            .init_single_group::<8, 256>(ethercat_now)
            .await
            .expect("init");
        let Err(err) = group.into_safe_op(&md).await else {
            panic!("drive 1 must refuse SAFE-OP")
        };
        assert!(
            matches!(err, ethercrab::error::Error::Timeout(_)),
            "{err:?}"
        );
        let md = &md;
        let read = |addr: u16, reg: u16| async move {
            Command::fprd(addr, reg)
                .receive::<u16>(md)
                .await
                .expect("register read")
        };
        assert_eq!(read(0x1001, 0x0130).await, 0x0012, "PRE-OP with error flag");
        assert_eq!(
            read(0x1001, 0x0134).await,
            0x001D,
            "invalid output configuration"
        );
        assert_eq!(
            read(0x1000, 0x0130).await,
            0x0004,
            "the others went to SAFE-OP"
        );
        assert_eq!(read(0x1002, 0x0130).await, 0x0004);
        // Without acknowledging, a new request is ignored; with the ack bit it is taken (and
        // refused again, as configured).
        Command::fpwr(0x1001, 0x0120)
            .send(md, 0x0002u16)
            .await
            .unwrap();
        assert_eq!(read(0x1001, 0x0130).await, 0x0012);
        Command::fpwr(0x1001, 0x0120)
            .send(md, 0x0014u16)
            .await
            .unwrap();
        assert_eq!(read(0x1001, 0x0130).await, 0x0012);
        // An invalid jump (PRE-OP -> OP) is refused with 0x0011.
        Command::fpwr(0x1000, 0x0120)
            .send(md, 0x0012u16)
            .await
            .unwrap(); // ack, back to PRE-OP
        assert_eq!(read(0x1000, 0x0130).await, 0x0002);
        Command::fpwr(0x1000, 0x0120)
            .send(md, 0x0008u16)
            .await
            .unwrap();
        assert_eq!(read(0x1000, 0x0130).await, 0x0012);
        assert_eq!(read(0x1000, 0x0134).await, 0x0011);
    });
}

#[test]
fn cut_link_drops_drives_behind_it() {
    static STORAGE: common::Storage = common::Storage::new();
    let mut cfg = SimConfig::virtual_chain(7);
    cfg.link_cut.push(LinkCut {
        before_drive: 5,
        at_s: 0.3,
        restore_s: None,
    });
    let (md, sim) = common::start(&STORAGE, cfg, short());
    let (report, dl4, dl3) = block_on(async {
        let group = to_op!(md);
        let report = enable_and_track(&md, &group, 800, None, 50_000.0, 1.0).await;
        let dl4 = Command::fprd(0x1004, 0x0110)
            .receive::<u16>(&md)
            .await
            .unwrap();
        let dl3 = Command::fprd(0x1003, 0x0110)
            .receive::<u16>(&md)
            .await
            .unwrap();
        let gone = Command::fprd(0x1005, 0x0130).receive::<u16>(&md).await;
        assert!(gone.is_err(), "drive 5 does not answer: {gone:?}");
        (report, dl4, dl3)
    });
    // 5 drives x 3 instead of 7 x 3.
    assert_eq!(report.last_wkc, 15, "{report:?}");
    assert!(report.wkc_errors >= 400, "{report:?}");
    assert_eq!(
        dl4 & 0x0020,
        0,
        "drive 4 lost the link on port 1: {dl4:#06x}"
    );
    assert_ne!(dl4 & 0x0400, 0, "and closed the port (loop back)");
    assert_ne!(dl3 & 0x0020, 0, "drive 3 still has it: {dl3:#06x}");
    let net = sim.network();
    assert_eq!(net.reachable(), 5);
    for i in [5, 6] {
        let d = net.device(i).unwrap();
        // Their SM watchdog expired: SAFE-OP + error 0x001B, and the drive faulted.
        assert_eq!(
            (d.al_state(), d.al_error(), d.al_status_code()),
            (4, true, 0x001B)
        );
        assert_eq!(d.drive().error_code(), chunkrt_ecsim::cia402::ERR_COMM);
    }
}

#[test]
fn restored_link_brings_drives_back_in_safe_op_with_error() {
    static STORAGE: common::Storage = common::Storage::new();
    let mut cfg = SimConfig::virtual_chain(3);
    cfg.link_cut.push(LinkCut {
        before_drive: 2,
        at_s: 0.2,
        restore_s: Some(0.5),
    });
    let (md, _sim) = common::start(&STORAGE, cfg, short());
    block_on(async {
        let group = to_op!(md);
        let report = enable_and_track(&md, &group, 700, None, 50_000.0, 1.0).await;
        // Back on the wire: the returning drive answers again (its outputs SM still counts in
        // SAFE-OP), but it reports the watchdog error and its drive faulted.
        assert_eq!(report.last_wkc, 9, "{report:?}");
        let st = Command::fprd(0x1002, 0x0130)
            .receive::<u16>(&md)
            .await
            .unwrap();
        let code = Command::fprd(0x1002, 0x0134)
            .receive::<u16>(&md)
            .await
            .unwrap();
        assert_eq!((st, code), (0x0014, 0x001B), "SAFE-OP + error, SM watchdog");
        assert!(
            report
                .faults_seen
                .contains(&(2, chunkrt_ecsim::cia402::ERR_COMM)),
            "{report:?}"
        );
        // Acknowledge and request OP again: accepted.
        Command::fpwr(0x1002, 0x0120)
            .send(&md, 0x0018u16)
            .await
            .unwrap();
        let st = Command::fprd(0x1002, 0x0130)
            .receive::<u16>(&md)
            .await
            .unwrap();
        assert_eq!(st, 0x0008);
    });
}
