//! A drive fault mid-run: fallback, fault reset (resume = auto), re-seed at the
//! measured position, and playback again; with resume = manual the drives stay
//! stopped. Real threads, real simulated arm.

use chunkrt_config::ResumeMode;
use chunkrt_core::{DriveRequest, DriveState};
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_tests::faulty::{assert_recovers, mode_events, FaultyArm};
use chunkrt_tests::sim_config;
use std::time::Duration;

fn run(
    resume: ResumeMode,
) -> (
    Vec<chunkrt_tests::faulty::Exchange>,
    chunkrt_telemetry::Report,
) {
    let cfg = sim_config(|c| c.executor.resume = resume);
    let (backend, log) = FaultyArm::drive_fault_at_75(&cfg);
    let policy = chunkrt_rt::build::policy(&cfg).unwrap();
    let opts = RunOptions {
        duration: Some(Duration::from_secs(4)),
        ..RunOptions::default()
    };
    let outcome = Runtime::with_parts(&cfg, Box::new(backend), policy)
        .run(&opts)
        .unwrap();
    let seen = log.lock().unwrap().clone();
    (seen, outcome.report)
}

#[test]
fn with_auto_resume_a_faulted_drive_is_reset_reenabled_without_a_jump_and_playback_resumes() {
    let (ex, report) = run(ResumeMode::Auto);
    let first_fault = ex
        .iter()
        .position(|e| e.seen.fb.state[2] == DriveState::Fault)
        .expect("the fault was injected");
    assert_recovers(&ex, &report, first_fault, None);
}

#[test]
fn with_manual_resume_a_faulted_drive_is_not_reset_and_the_others_quick_stop() {
    let (ex, report) = run(ResumeMode::Manual);
    let first_fault = ex
        .iter()
        .position(|e| e.seen.fb.state[2] == DriveState::Fault)
        .expect("the fault was injected");
    assert!(ex[first_fault..]
        .iter()
        .all(|e| e.seen.cmd.request != DriveRequest::FaultReset));
    assert!(ex[first_fault + 1..]
        .iter()
        .all(|e| e.seen.cmd.request == DriveRequest::QuickStop));
    assert!(ex[first_fault + 1..]
        .iter()
        .all(|e| e.seen.cmd.chunk_seq == 0));
    let modes = mode_events(&report);
    assert!(!modes.iter().any(|m| m.1 == "DrivesRecovered"), "{modes:?}");
}

#[test]
fn a_drive_the_backend_cannot_bring_back_ends_the_run_with_a_controlled_stop() {
    use chunkrt_core::BackendError;
    use chunkrt_tests::faulty::{check_commands, ArmFault};
    let cfg = sim_config(|_| {});
    let arm = chunkrt_sim::SimArm::new(chunkrt_rt::build::sim_params(&cfg)).unwrap();
    // At exchange 100 (2 s in, the arm moving), the backend gives up on joint 4's drive
    // and says so every cycle from then on.
    let lost = ArmFault::Errors {
        cycles: u32::MAX,
        error: BackendError::DriveLost { joint: 4 },
    };
    let (backend, log) = FaultyArm::new(arm, vec![(100, lost)]);
    let policy = chunkrt_rt::build::policy(&cfg).unwrap();
    let opts = RunOptions {
        duration: Some(Duration::from_secs(30)),
        ..RunOptions::default()
    };
    let outcome = Runtime::with_parts(&cfg, Box::new(backend), policy)
        .run(&opts)
        .unwrap();
    let ex = log.lock().unwrap().clone();
    let msg = outcome
        .drive_lost
        .as_deref()
        .expect("the outcome names the lost drive");
    assert!(msg.contains("joint 4"), "{msg}");
    assert_eq!(
        outcome
            .report
            .extra
            .get("drive_lost")
            .and_then(|v| v.as_str()),
        Some(msg)
    );
    // The run ended within the controlled stop's time, not at its 30 s duration.
    assert!(
        ex.len() < 100 + 4 * 50,
        "{} exchanges: the run went on after the drive was lost",
        ex.len()
    );
    let lost_events = chunkrt_tests::faulty::events_named(&outcome.report, "backend_error")
        .into_iter()
        .filter(|e| e["kind"] == "drive_lost")
        .count();
    assert!(lost_events > 0, "no drive_lost event in the report");
    // No chunk took authority after the loss, and the stop stayed within the limits.
    assert!(ex[101..].iter().all(|e| e.seen.cmd.chunk_seq == 0));
    let cmds: Vec<_> = ex.iter().map(|e| &e.seen.cmd).collect();
    check_commands(cmds.iter().copied(), &cfg.joint_limits(), cfg.period_ns())
        .unwrap_or_else(|e| panic!("a command outside the limits: {e}"));
}
