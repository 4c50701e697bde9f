//! The bus rows of the fault matrix: the whole runtime (control loop, executor,
//! gate, scripted policy) on the EtherCAT backend, over the in-process simulated
//! chain of 7 CiA 402 drives (`chunkrt-ecsim`, virtual clock: one bus period per
//! process-data frame, so fault times are counted in frames).
//!
//! Each case checks what `faults.rs` checks on the simulated arm: no command outside
//! the limits reaches the bus, no chunk takes authority while the bus is failing,
//! the errors are in the report and in `events.jsonl`, the records reconcile, and
//! the run ends at rest, returning its report (the CLI then exits 0).

use chunkrt_config::Config;
use chunkrt_ecsim::config::{DriveFault, LinkCut, PowerCycle};
use chunkrt_ecsim::{SimConfig, SimNetwork};
use chunkrt_ethercat::{EthercatBackend, EthercatParams};
use chunkrt_rt::{RunOptions, RunOutcome, Runtime};
use chunkrt_tests::faulty::{
    check_commands, counter, event_log, events_named, mode_events, out_dir, reconcile, Exchange,
    Logged,
};
use std::path::Path;
use std::time::Duration;

/// `rt-config/arm-ethercat-veth.toml` made fit for a test process.
fn config() -> Config {
    chunkrt_tests::veth_config()
}

fn run(
    name: &str,
    edit: impl FnOnce(&mut SimConfig),
    secs: u64,
) -> (RunOutcome, Vec<Exchange>, Config, std::path::PathBuf) {
    let cfg = config();
    let mut sim = SimConfig::virtual_chain(7);
    sim.cycle_us = (cfg.control.period_ms * 1000.0).round() as u64;
    edit(&mut sim);
    let mut params = EthercatParams::from_config(&cfg).expect("ethercat section");
    // Behaviour, not timing: a short DC sync, generous frame timeouts (a lost frame
    // still costs the whole timeout on this shared machine).
    params.dc_static_sync_iterations = 20;
    params.frame_timeout = Duration::from_millis(20);
    params.frame_late = Duration::from_millis(10);
    // A lost frame costs 20 ms here, not 1: ride through 3 (60 ms, well within the
    // chunk age) instead of the 10 ms worth of 1 ms frames a real bus gets.
    params.max_consecutive_lost = 3;
    let net = SimNetwork::new(sim).expect("valid simulator config");
    let (backend, _ctl) = EthercatBackend::simulated(params, net);
    let (logged, log) = Logged::new(backend);
    let policy = chunkrt_rt::build::policy(&cfg).expect("scripted policy");
    let dir = out_dir(name);
    let opts = RunOptions {
        duration: Some(Duration::from_secs(secs)),
        out_dir: Some(dir.clone()),
        ..RunOptions::default()
    };
    let out = Runtime::with_parts(&cfg, Box::new(logged), policy)
        .run(&opts)
        .expect("the run completes and returns its report");
    let seen = log.lock().unwrap().clone();
    (out, seen, cfg, dir)
}

/// No chunk is played while the errors last. The command of the cycle whose exchange
/// first fails was made before anything could know (the exchange before had none), so
/// the check starts at the second failing cycle in a row.
fn assert_no_chunk_while_failing(seen: &[Exchange]) {
    for (i, w) in seen.windows(2).enumerate() {
        if w[0].error.is_some() && w[1].error.is_some() {
            assert_eq!(
                w[1].seen.cmd.chunk_seq,
                0,
                "exchange {}: a chunk was played while the bus was failing",
                i + 1
            );
        }
    }
}

/// The checks every bus case shares.
fn assert_safe_and_complete(
    out: &RunOutcome,
    seen: &[Exchange],
    cfg: &Config,
    dir: &Path,
    kind: &[&str],
) {
    let r = &out.report;
    let cmds: Vec<_> = seen.iter().map(|e| &e.seen.cmd).collect();
    if let Err(e) = check_commands(cmds.iter().copied(), &cfg.joint_limits(), cfg.period_ns()) {
        panic!("a command outside the limits reached the bus: {e}");
    }
    if let Err(e) = reconcile(r) {
        panic!("records do not reconcile: {e}\n{:#?}", r.counters);
    }
    // The failures are counted, and each kind is in the report and the log.
    let failed = seen.iter().filter(|e| e.error.is_some()).count() as u64;
    assert!(failed > 0, "the fault reached the backend");
    // Counted from the cycle records: exact unless records were dropped.
    if counter(r, "ring_drops_cycle") == 0 {
        assert_eq!(counter(r, "backend_errors"), failed);
    } else {
        assert!(counter(r, "backend_errors") <= failed);
    }
    let logged: Vec<String> = events_named(r, "backend_error")
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(
        logged.iter().any(|k| kind.contains(&k.as_str())),
        "{kind:?} not in {logged:?}"
    );
    assert!(event_log(dir).iter().any(|e| e["event"] == "backend_error"));
    let modes = mode_events(r);
    assert!(
        modes
            .iter()
            .any(|m| m.0 == "Decelerating" && m.1 == "BackendError"),
        "the fault took authority away: {modes:?}"
    );
    assert_no_chunk_while_failing(seen);
    // At rest at the end.
    let last = modes.last().map(|m| m.0.as_str());
    assert!(
        matches!(last, Some("Holding") | Some("SafeStop")),
        "{modes:?}"
    );
    assert!(out.inference_panicked.is_none());
}

#[test]
fn a_burst_of_lost_frames_on_the_bus() {
    // The master's own link is cut for 30 frames: every frame of the burst is lost
    // (each costs the 20 ms frame timeout, so the burst lasts about 0.6 s). The first
    // `max_consecutive_lost` (3 here) are ridden through, the rest reported.
    let (out, seen, cfg, dir) = run(
        "ec-burst",
        |s| {
            s.link_cut.push(LinkCut {
                before_drive: 0,
                at_s: 2.0,
                restore_s: Some(2.03),
            })
        },
        6,
    );
    let failed: Vec<usize> = (0..seen.len())
        .filter(|&i| seen[i].error.is_some())
        .collect();
    assert!(
        failed.len() >= 22,
        "the burst: {} failed exchanges",
        failed.len()
    );
    let c = &out.report.counters;
    assert_eq!(c["bus_frames_ridden_through"], 3, "{c:?}");
    assert_eq!(c["bus_longest_loss_run"], 3 + failed.len() as u64, "{c:?}");
    assert_eq!(c["bus_frames_reported"], failed.len() as u64, "{c:?}");
    assert_safe_and_complete(
        &out,
        &seen,
        &cfg,
        &dir,
        &["frame_lost", "working_counter", "drive_missing"],
    );
    // With the link back, the bus runs clean again and playback resumes.
    let last_failed = *failed.last().unwrap();
    assert!(
        seen.len() - last_failed > 500,
        "the run went on after the burst"
    );
    assert!(seen[last_failed + 1..].iter().all(|e| e.error.is_none()));
    assert!(
        seen[last_failed + 1..]
            .iter()
            .any(|e| e.seen.cmd.chunk_seq != 0),
        "playback resumed after the burst: {:?}",
        mode_events(&out.report)
    );
}

#[test]
fn a_drive_faults_on_the_bus() {
    let (out, seen, cfg, dir) = run(
        "ec-drive-fault",
        |s| {
            s.drive_fault.push(DriveFault {
                drive: 3,
                at_s: 2.0,
                code: 0x7121,
            })
        },
        5,
    );
    let ev = events_named(&out.report, "backend_error");
    assert!(
        ev.iter().any(|e| e["kind"] == "drive_fault"
            && e["detail"].as_str().unwrap().contains("0x7121")),
        "the fault is logged with its code: {ev:?}"
    );
    assert_safe_and_complete(&out, &seen, &cfg, &dir, &["drive_fault"]);
}

#[test]
fn malformed_replies_on_the_bus_are_reported_at_once_not_ridden_through() {
    // From 2 s on, one process-data reply in 50 comes back with a datagram longer than
    // its frame (ecsim `frames.garble`). Lost frames that sparse would all be ridden
    // through; a reply the master cannot read is a bus error of its kind: every one is
    // reported, takes the policy's authority, and its cycle's feedback is held.
    let (out, seen, cfg, dir) = run(
        "ec-garbled",
        |s| {
            s.frames.garble = 0.02;
            s.frames.start_s = 2.0;
        },
        5,
    );
    assert_safe_and_complete(&out, &seen, &cfg, &dir, &["bus"]);
    let r = &out.report;
    let failed: Vec<_> = seen.iter().filter(|e| e.error.is_some()).collect();
    for e in &failed {
        assert!(
            matches!(e.error, Some(chunkrt_core::BackendError::Bus { .. })),
            "{:?}",
            e.error
        );
        assert!(e.seen.fb.held, "an error cycle's feedback marked fresh");
    }
    assert_eq!(counter(r, "bus_errors"), failed.len() as u64);
    assert_eq!(counter(r, "bus_frames_lost"), 0);
    assert_eq!(counter(r, "bus_frames_ridden_through"), 0);
}

#[test]
fn a_drive_disappears_from_the_bus() {
    // The cable in front of the last drive is pulled and never plugged back.
    let (out, seen, cfg, dir) = run(
        "ec-drive-missing",
        |s| {
            s.link_cut.push(LinkCut {
                before_drive: 6,
                at_s: 2.0,
                restore_s: None,
            })
        },
        5,
    );
    assert_safe_and_complete(
        &out,
        &seen,
        &cfg,
        &dir,
        &["drive_missing", "working_counter"],
    );
    // The loss lasts to the end: the last exchanges still fail.
    assert!(seen.last().unwrap().error.is_some());
    // The missing drive cannot be disabled: the shutdown failed, and says so in the
    // outcome (the CLI prints it and exits 4) as well as in the report.
    let e = out.shutdown_error.as_deref().expect("a failed shutdown");
    assert!(e.contains("not all drives disabled"), "{e}");
    assert_eq!(out.report.extra["shutdown_error"], e);
}

#[test]
fn a_drive_power_cycled_mid_run_is_brought_back_and_playback_resumes() {
    // Drive 3 loses power 2 s in for 200 ms: it and the three behind it (their line
    // broken, their watchdogs expired) leave OP; the backend brings all four back, the
    // runtime re-enables them at their measured pose and the policy plays again.
    let (out, seen, cfg, dir) = run(
        "ec-power-cycle",
        |s| {
            s.power_cycle.push(PowerCycle {
                drive: 3,
                at_s: 2.0,
                off_ms: 200,
            })
        },
        8,
    );
    let r = &out.report;
    assert_eq!(out.shutdown_error, None);
    assert_eq!(out.drive_lost, None);
    let c = |k| counter(r, k);
    assert!(c("bus_rejoins_started") >= 1, "{:#?}", r.counters);
    assert_eq!(c("bus_rejoins_completed"), c("bus_rejoins_started"));
    assert_eq!(c("bus_rejoins_failed"), 0);
    // Missing while gone; the others were judged on their own (no working-counter error).
    let logged: Vec<String> = events_named(r, "backend_error")
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_string())
        .collect();
    assert!(logged.iter().any(|k| k == "drive_missing"), "{logged:?}");
    assert!(!logged.iter().any(|k| k == "working_counter"), "{logged:?}");
    // No command outside the limits, none played while the drives were gone.
    let cmds: Vec<_> = seen.iter().map(|e| &e.seen.cmd).collect();
    if let Err(e) = check_commands(cmds.iter().copied(), &cfg.joint_limits(), cfg.period_ns()) {
        panic!("a command outside the limits reached the bus: {e}");
    }
    assert_no_chunk_while_failing(&seen);
    // Back: every drive enabled again, re-seeded where it stands, then playing.
    let modes = mode_events(r);
    let rec = modes
        .iter()
        .rposition(|m| m.1 == "DrivesRecovered")
        .unwrap_or_else(|| panic!("no DrivesRecovered: {modes:?}"));
    assert!(
        modes[rec..].iter().any(|m| m.0 == "Playing"),
        "playback did not resume: {modes:?}"
    );
    let last = seen.last().unwrap();
    assert!(last.error.is_none() && last.seen.fb.all_enabled());
    if let Err(e) = reconcile(r) {
        panic!("records do not reconcile: {e}");
    }
    assert!(event_log(&dir)
        .iter()
        .any(|e| e["event"] == "backend_error"));
}
