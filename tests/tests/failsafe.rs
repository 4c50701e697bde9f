//! The process fails safe (issue 36): a panic on any runtime thread ends in the stop a
//! fault gets, judged on what the drives received.
//!
//! The panics are raised by `[inject] panic` on the real threads (control cycle,
//! backend exchange, inference, telemetry), in the real `Runtime`. The oracle is
//! outside the runtime: the commands the backend received (`Logged`), judged by the
//! brute-force braking reference (`chunkrt_tests::braking`); on the in-process EtherCAT
//! chain the simulated drives' own CiA 402 and AL states; the process's thread count
//! (`/proc/self/task`) before and after the run.

use chunkrt_config::{Config, PanicInjection, PanicThread};
use chunkrt_core::{DriveRequest, DriveState};
use chunkrt_ecsim::cia402::PowerState;
use chunkrt_ecsim::{SimConfig, SimNetwork};
use chunkrt_ethercat::{EthercatBackend, EthercatParams};
use chunkrt_rt::{Ending, RunOptions, Runtime};
use chunkrt_tests::braking::check_stop;
use chunkrt_tests::faulty::{out_dir, Exchange, Logged};
use std::time::Duration;

/// The process's threads, by name.
fn threads() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|s| s.trim().to_string())
        .collect();
    v.sort();
    v
}

fn with_panic(mut cfg: Config, thread: PanicThread, after_ms: f64) -> Config {
    cfg.inject.panic = Some(PanicInjection { thread, after_ms });
    cfg
}

/// The commands the backend received after the last one that played a chunk stay
/// within the braking envelope of the state they were in (every joint), the drives
/// were asked for their quick stop, and they reached standstill. Returns how many
/// exchanges followed the withdrawal.
fn assert_braked(seen: &[Exchange], cfg: &Config) -> usize {
    let last_playing = seen
        .iter()
        .rposition(|e| e.seen.cmd.chunk_seq != 0)
        .expect("the policy played before the panic");
    assert!(last_playing >= 2, "withdrawn at the start");
    let after = seen.len() - last_playing - 1;
    assert!(after >= 3, "{after} exchanges after the withdrawal");
    let limits = cfg.joint_limits();
    let t = cfg.period_ns() as f64 * 1e-9;
    for (j, lim) in limits.joint[..cfg.control.joints].iter().enumerate() {
        let q: Vec<f64> = seen.iter().map(|e| e.seen.cmd.pos_rad[j]).collect();
        for x in &q {
            assert!(x.is_finite(), "joint {j}: a command that is not a number");
        }
        check_stop(&q, last_playing, lim, t).unwrap_or_else(|e| panic!("joint {j}: {e}"));
    }
    assert!(
        seen[last_playing..]
            .iter()
            .any(|e| e.seen.cmd.request == DriveRequest::QuickStop),
        "the drives were never asked for their quick stop"
    );
    let last = &seen.last().unwrap().seen.fb;
    for j in 0..cfg.control.joints {
        assert!(
            last.vel_rad_s[j].abs() <= 0.005 || last.state[j] == DriveState::Disabled,
            "joint {j} still moving at {} rad/s in the last exchange",
            last.vel_rad_s[j]
        );
    }
    after
}

/// Runs the simulated arm (scripted policy) with a panic in `thread` 1.5 s in.
fn sim_case(thread: PanicThread, name: &str, expect_thread: &str) {
    let cfg = with_panic(
        chunkrt_tests::sim_config(|c| {
            c.control.cpu = -1;
            c.inference.cpu = -1;
            c.control.lock_memory = false;
        }),
        thread,
        1500.0,
    );
    let arm = chunkrt_sim::SimArm::new(chunkrt_rt::build::sim_params(&cfg)).unwrap();
    let (logged, log) = Logged::new(arm);
    let policy = chunkrt_rt::build::policy(&cfg).unwrap();
    let dir = out_dir(name);
    let opts = RunOptions {
        duration: Some(Duration::from_secs(30)),
        out_dir: Some(dir.clone()),
        ..RunOptions::default()
    };
    let before = threads();
    let out = Runtime::with_parts(&cfg, Box::new(logged), policy)
        .run(&opts)
        .expect("the run returns its report");
    assert_eq!(threads(), before, "a runtime thread outlived the run");
    assert_eq!(out.ending(), Ending::ThreadPanicked, "{out:?}");
    assert_eq!(out.thread_panics.len(), 1, "{:?}", out.thread_panics);
    assert_eq!(out.thread_panics[0].thread, expect_thread);
    assert!(out.thread_panics[0].message.contains("injected panic"));
    // The report on disk names it, and says how the quick stop ended.
    let report: serde_json::Value =
        chunkrt_tests::schema::read_json_checked(&dir.join("report.json"));
    assert_eq!(report["thread_panics"][0]["thread"], expect_thread);
    assert_eq!(report["quick_stop"]["standstill"], true, "{report:#}");
    assert_eq!(report["quick_stop"]["disabled"], true);
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(
        events.contains("\"thread_panic\""),
        "events.jsonl: no panic"
    );
    // The run ended with the panic, long before its 30 s.
    let seen = log.lock().unwrap().clone();
    let after = assert_braked(&seen, &cfg);
    let played_s = seen.len() as f64 * cfg.period_ns() as f64 * 1e-9;
    assert!(
        played_s < 10.0,
        "{played_s} s of exchanges: the run went on"
    );
    eprintln!(
        "{name}: {} exchanges, {after} after the withdrawal",
        seen.len()
    );
}

#[test]
fn a_panic_in_the_control_cycle_ends_in_the_quick_stop() {
    sim_case(PanicThread::Control, "panic-control", "chunkrt-control");
}

#[test]
fn a_panic_in_the_backends_exchange_ends_in_the_quick_stop() {
    sim_case(PanicThread::Backend, "panic-backend", "chunkrt-control");
}

#[test]
fn a_panic_in_the_inference_thread_ends_in_the_quick_stop() {
    sim_case(PanicThread::Inference, "panic-inference", "chunkrt-infer");
}

#[test]
fn a_panic_in_the_telemetry_thread_ends_in_the_quick_stop() {
    sim_case(
        PanicThread::Telemetry,
        "panic-telemetry",
        "chunkrt-telemetry",
    );
}

/// On the in-process EtherCAT chain: the backend's exchange panics 2 s in; the
/// simulated drives go through their quick stop, end disabled, and the bus in INIT.
#[test]
fn a_backend_panic_on_the_ethercat_chain_quick_stops_disables_and_leaves_init() {
    let cfg = with_panic(chunkrt_tests::veth_config(), PanicThread::Backend, 2000.0);
    let mut sim = SimConfig::virtual_chain(7);
    sim.cycle_us = (cfg.control.period_ms * 1000.0).round() as u64;
    let mut params = EthercatParams::from_config(&cfg).expect("ethercat section");
    params.dc_static_sync_iterations = 20;
    params.frame_timeout = Duration::from_millis(20);
    params.frame_late = Duration::from_millis(10);
    let net = SimNetwork::new(sim).expect("valid simulator config");
    let (backend, ctl) = EthercatBackend::simulated(params, net);
    let (logged, log) = Logged::new(backend);
    let policy = chunkrt_rt::build::policy(&cfg).expect("scripted policy");
    let dir = out_dir("panic-ethercat");
    let opts = RunOptions {
        duration: Some(Duration::from_secs(30)),
        out_dir: Some(dir),
        ..RunOptions::default()
    };
    let before = threads();
    let out = Runtime::with_parts(&cfg, Box::new(logged), policy)
        .run(&opts)
        .expect("the run returns its report");
    // `async-io` is that crate's process-wide reactor (ethercrab's timers), started once
    // on first use and kept for the process; not a thread of the run.
    let mut after = threads();
    after.retain(|t| t != "async-io");
    assert_eq!(after, before, "a runtime thread outlived the run");
    assert_eq!(out.ending(), Ending::ThreadPanicked, "{out:?}");
    assert_eq!(out.thread_panics[0].thread, "chunkrt-control");
    assert!(out.shutdown_error.is_none(), "{:?}", out.shutdown_error);
    let seen = log.lock().unwrap().clone();
    assert_braked(&seen, &cfg);
    // The drives themselves: in their quick stop after the panic (reported by the
    // feedback the backend decoded from their status words) ...
    let quick = seen
        .iter()
        .filter(|e| {
            e.seen.fb.state[..7]
                .iter()
                .all(|s| *s == DriveState::QuickStop)
        })
        .count();
    assert!(quick > 0, "no exchange saw every drive in its quick stop");
    // ... then disabled, and the bus back in INIT, as the simulated devices hold them.
    let net = ctl.network();
    for i in 0..7 {
        let dev = net.device(i).expect("seven drives");
        assert_eq!(dev.al_state() & 0x0F, 0x01, "drive {i}: AL state not INIT");
        assert!(
            !matches!(
                dev.drive().state(),
                PowerState::OperationEnabled | PowerState::QuickStopActive
            ),
            "drive {i}: {:?}",
            dev.drive().state()
        );
    }
}
