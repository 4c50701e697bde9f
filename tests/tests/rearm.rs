//! Operator re-arm (SIGUSR1 in `chunkrt run`) with `resume = manual`: a faulted drive
//! stays stopped until the operator re-arms; then it is reset, the executor re-seeded
//! at the measured position, and the policy plays again. Real threads, real simulated
//! arm. (Its own test binary: the re-arm request is process-wide.)

use chunkrt_config::ResumeMode;
use chunkrt_core::{DriveRequest, DriveState};
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_tests::faulty::{assert_recovers, FaultyArm};
use chunkrt_tests::sim_config;
use std::time::Duration;

#[test]
fn with_manual_resume_an_operator_rearm_resets_the_drive_and_playback_resumes() {
    let cfg = sim_config(|c| c.executor.resume = ResumeMode::Manual);
    let (backend, log) = FaultyArm::drive_fault_at_75(&cfg);
    // The operator: waits until the drive has been faulted for 25 exchanges (held
    // stopped, as manual resume must), then re-arms.
    let watched = log.clone();
    let operator = std::thread::spawn(move || {
        for _ in 0..2_000 {
            std::thread::sleep(Duration::from_millis(5));
            let ex = watched.lock().unwrap();
            if let Some(f) = ex
                .iter()
                .position(|e| e.seen.fb.state[2] == DriveState::Fault)
            {
                if ex.len() > f + 25 {
                    chunkrt_rt::signals::request_rearm();
                    return Some(ex.len());
                }
            }
        }
        None
    });
    let policy = chunkrt_rt::build::policy(&cfg).unwrap();
    let opts = RunOptions {
        duration: Some(Duration::from_secs(5)),
        ..RunOptions::default()
    };
    let report = Runtime::with_parts(&cfg, Box::new(backend), policy)
        .run(&opts)
        .unwrap()
        .report;
    let rearmed_at = operator
        .join()
        .unwrap()
        .expect("the fault was seen and the operator re-armed");
    let ex = log.lock().unwrap().clone();
    let first_fault = ex
        .iter()
        .position(|e| e.seen.fb.state[2] == DriveState::Fault)
        .unwrap();
    // Before the re-arm: stopped, never reset.
    assert!(ex[first_fault + 1..rearmed_at]
        .iter()
        .all(|e| e.seen.cmd.request == DriveRequest::QuickStop));
    // After it: reset, back enabled without a jump, and playing again.
    assert_recovers(&ex, &report, rearmed_at, Some("Rearmed"));
}
