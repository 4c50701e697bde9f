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
