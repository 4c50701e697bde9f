//! The fault matrix on the simulated arm: each fault is injected into a real run
//! (real threads, real clock) or into the control loop driven by a fake clock, and
//! every case checks that
//!
//! * the arm ends at rest (or plays on correctly, where that is the documented outcome),
//! * no command outside the limits reaches the backend (`check_commands`),
//! * the event is in `events.jsonl` and in the report,
//! * the records reconcile (`reconcile`),
//! * the run ends the documented way (`RunOutcome`; the CLI's exit statuses are
//!   checked in `crates/chunkrt-cli/tests/signals.rs`).
//!
//! Fault times are counted in exchanges and policy calls, not in seconds, so a fault
//! lands at the same point of the run however loaded the machine is.

use chunkrt_config::Config;
use chunkrt_core::{BackendError, Chunk, Executor, Feedback, Gate, MonoTime, Observation};
use chunkrt_rt::{ControlLoop, ControlParts, RunOptions, RunOutcome, Runtime};
use chunkrt_sim::SimArm;
use chunkrt_telemetry::{EventRecord, Report};
use chunkrt_tests::faulty::{
    check_commands, counter, event_log, events_named, mode_events, out_dir, reconcile, ArmFault,
    Exchange, FaultyArm, FaultyPolicy, PolicyFault,
};
use chunkrt_tests::sim_config;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a faulty run left behind.
struct Faulty {
    outcome: RunOutcome,
    exchanges: Vec<Exchange>,
    dir: std::path::PathBuf,
    injected: Arc<[AtomicU64; 4]>,
    cfg: Config,
}

impl Faulty {
    fn report(&self) -> &Report {
        &self.outcome.report
    }

    /// The checks every case shares: limits, reconciliation, the arm at rest at the end.
    fn assert_safe_and_complete(&self) {
        let limits = self.cfg.joint_limits();
        let cmds: Vec<_> = self.exchanges.iter().map(|e| &e.seen.cmd).collect();
        assert!(cmds.len() > 50, "the loop ran ({} exchanges)", cmds.len());
        if let Err(e) = check_commands(cmds.iter().copied(), &limits, self.cfg.period_ns()) {
            panic!("a command outside the limits reached the backend: {e}");
        }
        if let Err(e) = reconcile(self.report()) {
            panic!(
                "records do not reconcile: {e}\n{:#?}",
                self.report().counters
            );
        }
        // At rest: the run ends only in Holding or SafeStop, with the commanded
        // position no longer moving (the last two commands are equal) and a zero
        // velocity feed-forward.
        let modes = mode_events(self.report());
        let last = modes.last().map(|m| m.0.as_str());
        assert!(
            matches!(last, Some("Holding") | Some("SafeStop")),
            "last mode {last:?}: {modes:?}"
        );
        let end = cmds[cmds.len() - 1];
        for j in 0..self.cfg.control.joints {
            let v = end.vel_rad_s[j];
            assert!(
                v.abs() < 1e-9,
                "joint {j} still commanded to move at {v} rad/s"
            );
        }
        // Everything in the report's event list is in events.jsonl too.
        let log = event_log(&self.dir);
        assert_eq!(
            log.len(),
            self.report().events.len(),
            "events.jsonl and the report agree"
        );
    }
}

fn run_faulty(
    name: &str,
    cfg: Config,
    arm_faults: Vec<(u64, ArmFault)>,
    policy_faults: Vec<(std::ops::Range<u64>, PolicyFault)>,
    duration: Duration,
) -> Faulty {
    let arm = SimArm::new(chunkrt_rt::build::sim_params(&cfg)).unwrap();
    let (backend, log) = FaultyArm::new(arm, arm_faults);
    let policy = FaultyPolicy::new(chunkrt_rt::build::policy(&cfg).unwrap(), policy_faults);
    let injected = policy.injected.clone();
    let dir = out_dir(name);
    let opts = RunOptions {
        duration: Some(duration),
        out_dir: Some(dir.clone()),
        ..RunOptions::default()
    };
    let outcome = Runtime::with_parts(&cfg, Box::new(backend), Box::new(policy))
        .run(&opts)
        .expect("the run completes");
    let exchanges = log.lock().unwrap().clone();
    Faulty {
        outcome,
        exchanges,
        dir,
        injected,
        cfg,
    }
}

fn reasons(modes: &[(String, String, f64)], to: &str) -> Vec<String> {
    modes
        .iter()
        .filter(|m| m.0 == to)
        .map(|m| m.1.clone())
        .collect()
}

#[test]
fn an_inference_panic_stops_the_run_safely_and_says_why() {
    // Call 40 is about 2 s in; the run would otherwise last 30 s.
    let f = run_faulty(
        "panic",
        sim_config(|_| {}),
        vec![],
        vec![(40..41, PolicyFault::Panic)],
        Duration::from_secs(30),
    );
    let msg = f
        .outcome
        .inference_panicked
        .as_deref()
        .expect("the panic is reported");
    assert!(msg.contains("injected policy panic"), "{msg}");
    assert!(f.report().extra["inference_panic"]
        .as_str()
        .unwrap()
        .contains("injected policy panic"));
    // The run stopped on the panic, not at the end of its duration.
    assert!(f.report().duration_s < 20.0, "{}", f.report().duration_s);
    // The loop stops playing at once (Shutdown), unless the ladder already took over:
    // the panic hook runs before the panic reaches the inference thread's handler,
    // and with RUST_BACKTRACE set it can take longer than max_chunk_age.
    let modes = mode_events(f.report());
    let last_play = modes
        .iter()
        .rposition(|m| m.0 == "Playing")
        .expect("played");
    let stop = &modes[last_play + 1..];
    assert!(
        stop.first().is_some_and(|m| m.0 == "Decelerating"
            && ["Shutdown", "ChunkExpired", "HorizonEnd"].contains(&m.1.as_str())),
        "the stop after the panic is logged: {modes:?}"
    );
    f.assert_safe_and_complete();
}

#[test]
fn an_inference_stall_walks_the_ladder_and_playback_resumes() {
    // One call blocks for 2.5 s: longer than max_chunk_age and safe_stop_after.
    let f = run_faulty(
        "stall",
        sim_config(|c| c.executor.safe_stop_after_ms = 1000.0),
        vec![],
        vec![(30..31, PolicyFault::Stall(Duration::from_millis(2500)))],
        Duration::from_secs(6),
    );
    assert!(f.outcome.inference_panicked.is_none());
    let modes = mode_events(f.report());
    let order: Vec<&str> = modes.iter().map(|m| m.0.as_str()).collect();
    let pos = |name: &str, from: usize| {
        order[from..]
            .iter()
            .position(|m| *m == name)
            .map(|p| p + from)
    };
    let play = pos("Playing", 0).expect("played");
    let decel = pos("Decelerating", play).expect("decelerated");
    let hold = pos("Holding", decel).expect("held");
    let safe = pos("SafeStop", hold).expect("safe stop");
    pos("Playing", safe).expect("resumed when chunks returned");
    assert!(
        modes[decel].1 == "ChunkExpired" || modes[decel].1 == "HorizonEnd",
        "{:?}",
        modes[decel]
    );
    // SafeStop asked the drives for a quick stop.
    assert!(f
        .exchanges
        .iter()
        .any(|e| e.seen.cmd.request == chunkrt_core::DriveRequest::QuickStop));
    assert!(
        counter(f.report(), "chunks_expired") + counter(f.report(), "chunks_horizon_ended") >= 1
    );
    f.assert_safe_and_complete();
}

#[test]
fn nan_chunks_are_rejected_whole_and_never_reach_the_drives() {
    // Ten chunks in a row carry a NaN: 500 ms, longer than max_chunk_age (200 ms).
    let f = run_faulty(
        "nan",
        sim_config(|_| {}),
        vec![],
        vec![(30..40, PolicyFault::Nan)],
        Duration::from_secs(5),
    );
    let nan_made = FaultyPolicy::count(&f.injected, PolicyFault::Nan);
    assert_eq!(nan_made, 10);
    let rejected = counter(f.report(), "chunks_rejected");
    // Each NaN chunk is rejected unless a newer chunk overwrote it in the handoff
    // before the loop read it (counted there).
    assert!(
        rejected >= 1 && rejected <= nan_made,
        "rejected {rejected} of {nan_made}"
    );
    assert!(rejected + counter(f.report(), "chunks_overwritten_in_handoff") >= nan_made);
    let events = events_named(f.report(), "chunk_rejected");
    assert_eq!(
        events.len() as u64,
        rejected,
        "every rejection is in the report"
    );
    let bad_seqs: Vec<u64> = events
        .iter()
        .map(|e| {
            assert!(
                e["reason"].as_str().unwrap().starts_with("NonFinite"),
                "{e}"
            );
            e["seq"].as_u64().unwrap()
        })
        .collect();
    let logged = event_log(&f.dir)
        .into_iter()
        .filter(|e| e["event"] == "chunk_rejected")
        .count() as u64;
    assert_eq!(logged, rejected, "every rejection is in events.jsonl");
    // No command was ever derived from a rejected chunk; NaN never reached the drives
    // (check_commands checks finiteness).
    for e in &f.exchanges {
        assert!(
            !bad_seqs.contains(&e.seen.cmd.chunk_seq),
            "played rejected chunk {}",
            e.seen.cmd.chunk_seq
        );
    }
    // Without fresh chunks the ladder took over, and good chunks brought playback back.
    let modes = mode_events(f.report());
    let t_first_reject = events[0]["t_s"].as_f64().unwrap();
    assert!(
        modes
            .iter()
            .any(|m| m.0 == "Decelerating" && m.2 > t_first_reject),
        "{modes:?}"
    );
    assert!(
        modes
            .iter()
            .any(|m| m.0 == "Playing" && m.2 > t_first_reject + 0.3),
        "{modes:?}"
    );
    f.assert_safe_and_complete();
}

#[test]
fn a_backend_error_for_one_cycle_falls_back_and_playback_resumes() {
    let f = run_faulty(
        "backend-one",
        sim_config(|_| {}),
        vec![(
            100,
            ArmFault::Errors {
                cycles: 1,
                error: BackendError::Injected,
            },
        )],
        vec![],
        Duration::from_secs(5),
    );
    let failed: Vec<_> = f.exchanges.iter().filter(|e| e.error.is_some()).collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(counter(f.report(), "backend_errors"), 1);
    let ev = events_named(f.report(), "backend_error");
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["kind"], "injected");
    assert!(event_log(&f.dir)
        .iter()
        .any(|e| e["event"] == "backend_error"));
    let modes = mode_events(f.report());
    let t_err = ev[0]["t_s"].as_f64().unwrap();
    assert!(
        reasons(&modes, "Decelerating")
            .iter()
            .any(|r| r == "BackendError"),
        "{modes:?}"
    );
    assert!(
        modes.iter().any(|m| m.0 == "Playing" && m.2 > t_err),
        "resumed: {modes:?}"
    );
    f.assert_safe_and_complete();
}

#[test]
fn backend_errors_for_many_cycles_hold_off_the_policy_until_the_bus_is_back() {
    // 50 lost frames in a row: a second at 20 ms.
    let f = run_faulty(
        "backend-many",
        sim_config(|_| {}),
        vec![(
            100,
            ArmFault::Errors {
                cycles: 50,
                error: BackendError::FrameLost,
            },
        )],
        vec![],
        Duration::from_secs(6),
    );
    let failed: Vec<usize> = f
        .exchanges
        .iter()
        .enumerate()
        .filter(|(_, e)| e.error.is_some())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(failed.len(), 50);
    assert_eq!(counter(f.report(), "backend_errors"), 50);
    let ev = events_named(f.report(), "backend_error");
    assert_eq!(ev.len(), 50, "each failed exchange is logged");
    assert!(ev.iter().all(|e| e["kind"] == "frame_lost"));
    // While the frames are lost, no chunk takes authority back: the commands come
    // from the fallback (chunk_seq 0), so the drives do not find the trajectory
    // far ahead of where they were left when the bus returns.
    for &i in &failed[1..] {
        assert_eq!(
            f.exchanges[i].seen.cmd.chunk_seq, 0,
            "exchange {i}: a chunk was played while the bus was down"
        );
    }
    let modes = mode_events(f.report());
    let t_back = ev.last().unwrap()["t_s"].as_f64().unwrap();
    assert!(
        modes.iter().any(|m| m.0 == "Playing" && m.2 > t_back),
        "resumed: {modes:?}"
    );
    f.assert_safe_and_complete();
}

#[test]
fn a_drive_fault_takes_authority_away_and_the_arm_ends_at_rest() {
    let f = run_faulty(
        "drive-fault",
        sim_config(|_| {}),
        vec![(
            100,
            ArmFault::DriveFault {
                joint: 3,
                code: 0x2310,
            },
        )],
        vec![],
        Duration::from_secs(5),
    );
    let ev = events_named(f.report(), "backend_error");
    assert!(!ev.is_empty());
    assert_eq!(ev[0]["kind"], "drive_fault");
    assert!(
        ev[0]["detail"].as_str().unwrap().contains("joint 3"),
        "{}",
        ev[0]
    );
    assert!(
        ev[0]["detail"].as_str().unwrap().contains("0x2310"),
        "{}",
        ev[0]
    );
    let modes = mode_events(f.report());
    assert!(
        reasons(&modes, "Decelerating")
            .iter()
            .any(|r| r == "BackendError"),
        "{modes:?}"
    );
    // No chunk is played while the drive reports the fault.
    for (i, e) in f.exchanges.iter().enumerate().skip(101) {
        if e.error.is_some() && f.exchanges[i - 1].error.is_some() {
            assert_eq!(
                e.seen.cmd.chunk_seq, 0,
                "exchange {i}: played into a faulted drive"
            );
        }
    }
    f.assert_safe_and_complete();
}

#[test]
fn a_full_telemetry_ring_counts_its_drops_and_the_records_still_reconcile() {
    // 64-record rings drained once a second at a 2 ms period: most records overflow.
    let f = run_faulty(
        "ring",
        sim_config(|c| {
            c.control.period_ms = 2.0;
            c.telemetry.ring_capacity = 64;
            c.telemetry.drain_interval_ms = 1000.0;
        }),
        vec![],
        vec![],
        Duration::from_secs(3),
    );
    let r = f.report();
    assert!(counter(r, "ring_drops_cycle") > 0, "{:#?}", r.counters);
    assert!(counter(r, "ring_drops") >= counter(r, "ring_drops_cycle"));
    assert_eq!(
        counter(r, "cycles_run"),
        counter(r, "cycles") + counter(r, "ring_drops_cycle")
    );
    assert_eq!(
        f.exchanges.len() as u64,
        counter(r, "cycles_run"),
        "one exchange a cycle"
    );
    // The run itself is unaffected: same checks as every case (the event log may
    // have lost events to the full ring, and then it says so in ring_drops_event).
    let cmds: Vec<_> = f.exchanges.iter().map(|e| &e.seen.cmd).collect();
    check_commands(
        cmds.iter().copied(),
        &f.cfg.joint_limits(),
        f.cfg.period_ns(),
    )
    .unwrap();
    reconcile(r).unwrap();
}

#[test]
fn records_reconcile_after_a_run_with_every_fault_at_once() {
    let f = run_faulty(
        "everything",
        sim_config(|c| {
            c.control.period_ms = 5.0;
            c.telemetry.ring_capacity = 256;
            c.telemetry.drain_interval_ms = 1000.0;
        }),
        vec![
            (
                200,
                ArmFault::Errors {
                    cycles: 1,
                    error: BackendError::Injected,
                },
            ),
            (
                500,
                ArmFault::Errors {
                    cycles: 30,
                    error: BackendError::FrameLost,
                },
            ),
        ],
        vec![
            (20..24, PolicyFault::Nan),
            (30..32, PolicyFault::Error),
            (40..41, PolicyFault::Stall(Duration::from_millis(700))),
        ],
        Duration::from_secs(6),
    );
    let r = f.report();
    assert!(counter(r, "chunks_rejected") >= 1);
    assert!(counter(r, "inference_errors") + counter(r, "ring_drops_infer") >= 2);
    assert!(counter(r, "backend_errors") + counter(r, "ring_drops_cycle") >= 31);
    f.assert_safe_and_complete_allowing_event_drops();
}

impl Faulty {
    /// Like `assert_safe_and_complete`, for runs whose event ring may overflow.
    fn assert_safe_and_complete_allowing_event_drops(&self) {
        if counter(self.report(), "ring_drops_event") == 0 {
            return self.assert_safe_and_complete();
        }
        let cmds: Vec<_> = self.exchanges.iter().map(|e| &e.seen.cmd).collect();
        check_commands(
            cmds.iter().copied(),
            &self.cfg.joint_limits(),
            self.cfg.period_ns(),
        )
        .unwrap();
        reconcile(self.report()).unwrap();
    }
}

// --- Chunks out of order and duplicated: the control loop driven directly. ---

static FAKE_NS: AtomicU64 = AtomicU64::new(0);

fn fake_now() -> MonoTime {
    MonoTime(FAKE_NS.load(Ordering::Relaxed))
}

#[test]
fn chunks_out_of_order_or_duplicated_are_rejected_and_the_newest_plays() {
    let cfg = sim_config(|_| {});
    let period_ns = cfg.period_ns();
    let t0 = MonoTime::from_ms(1_000);
    FAKE_NS.store(t0.0, Ordering::Relaxed);
    let arm = SimArm::new(chunkrt_rt::build::sim_params(&cfg)).unwrap();
    let (mut backend, log) = FaultyArm::new(arm, vec![]);
    let mut first = Feedback::default();
    chunkrt_core::Backend::start(&mut backend, t0, &mut first).unwrap();
    let limits = cfg.joint_limits();
    let (mut chunk_pub, chunk_sub) = chunkrt_buffer::channel(Chunk::default());
    let (obs_pub, _obs_sub) = chunkrt_buffer::channel(Observation::default());
    let (cycle_p, event_p, _infer_p, mut consumers) = chunkrt_telemetry::rings(4096);
    let mut control = ControlLoop::new(ControlParts {
        executor: Executor::new(cfg.executor_config(), limits, &first.pos_rad, t0),
        gate: Gate::new(limits, period_ns, &first.pos_rad),
        backend: Box::new(backend),
        chunks: chunk_sub,
        observations: obs_pub,
        cycles_out: cycle_p,
        events_out: event_p,
        domain: None,
        period_ns,
        first_feedback: first,
        clock: fake_now,
    });

    // Each chunk moves joint 0 a little further from the start pose, so the one
    // being played can be told apart by its seq in the commands.
    let dof = cfg.control.joints;
    let make = |seq: u64, now: MonoTime| {
        let mut c = Chunk {
            seq,
            t_obs: now,
            t_start: now,
            t_publish: now,
            dt_ns: 20_000_000,
            len: 25,
            dof: dof as u16,
            ..Chunk::default()
        };
        for row in c.pos_rad.iter_mut().take(25) {
            row[..dof].copy_from_slice(&first.pos_rad[..dof]);
            row[0] += 0.01 * seq as f64;
        }
        c
    };
    // 2 and 1 arrive again after newer ones; 3 arrives after 4.
    let arrivals = [1u64, 2, 2, 1, 4, 3, 5];
    let mut now = t0;
    let mut cycle = 0u64;
    for seq in arrivals {
        let _ = chunk_pub.publish(&make(seq, now));
        for _ in 0..5 {
            cycle += 1;
            now = t0.add_ns(cycle * period_ns);
            FAKE_NS.store(now.0, Ordering::Relaxed);
            control.cycle(now, now, 0);
        }
    }

    let counts = control.chunk_counts();
    assert_eq!(counts.offered, 7);
    assert_eq!(counts.rejected, 3, "{counts:?}");
    assert_eq!(counts.accepted, 4);
    assert!(counts.reconciles(), "{counts:?}");
    let mut stale = Vec::new();
    while let Some(ev) = consumers.pop_event() {
        if let EventRecord::Reject { seq, reason, .. } = ev {
            match reason {
                chunkrt_core::RejectReason::StaleSeq { seq: s, last } => {
                    assert_eq!(s, seq);
                    assert!(s <= last, "{s} > {last}");
                    stale.push(seq);
                }
                other => panic!("seq {seq} rejected for {other:?}"),
            }
        }
    }
    assert_eq!(
        stale,
        vec![2, 1, 3],
        "every stale chunk is logged with its seq"
    );
    let seen = log.lock().unwrap();
    let played: std::collections::BTreeSet<u64> = seen
        .iter()
        .map(|e| e.seen.cmd.chunk_seq)
        .filter(|s| *s != 0)
        .collect();
    assert_eq!(
        played,
        [1, 2, 4, 5].into_iter().collect(),
        "only accepted chunks played"
    );
    // The newest chunk plays at the end.
    assert_eq!(seen.last().unwrap().seen.cmd.chunk_seq, 5);
    let cmds: Vec<_> = seen.iter().map(|e| &e.seen.cmd).collect();
    check_commands(cmds.iter().copied(), &limits, period_ns).unwrap();
}
