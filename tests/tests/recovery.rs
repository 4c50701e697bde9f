//! A drive fault mid-run: fallback, fault reset (resume = auto), re-seed at the
//! measured position, and playback again; with resume = manual the drives stay
//! stopped. Real threads, real simulated arm.

use chunkrt_config::ResumeMode;
use chunkrt_core::{DriveRequest, DriveState};
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_sim::SimArm;
use chunkrt_tests::faulty::{mode_events, ArmFault, FaultyArm};
use chunkrt_tests::sim_config;
use std::time::Duration;

fn run(
    resume: ResumeMode,
) -> (
    Vec<chunkrt_tests::faulty::Exchange>,
    chunkrt_telemetry::Report,
) {
    let cfg = sim_config(|c| c.executor.resume = resume);
    let arm = SimArm::new(chunkrt_rt::build::sim_params(&cfg)).unwrap();
    let (backend, log) = FaultyArm::new(
        arm,
        vec![(
            75,
            ArmFault::DriveFault {
                joint: 2,
                code: 0x7500,
            },
        )],
    );
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
    let reset = ex[first_fault..]
        .iter()
        .position(|e| e.seen.cmd.request == DriveRequest::FaultReset)
        .map(|i| i + first_fault)
        .expect("a fault reset was requested");
    let enabled = ex[reset..]
        .iter()
        .position(|e| e.seen.fb.all_enabled())
        .map(|i| i + reset)
        .expect("the drives came back");
    // The first command after recovery is where the arm is: nothing jumps.
    let after = &ex[enabled + 1].seen;
    for j in 0..7 {
        let d = (after.cmd.pos_rad[j] - ex[enabled].seen.fb.pos_rad[j]).abs();
        assert!(
            d < 0.01,
            "joint {j}: command {d} rad from the measured position"
        );
    }
    let modes = mode_events(&report);
    let recovered = modes
        .iter()
        .position(|m| m.1 == "DrivesRecovered")
        .unwrap_or_else(|| panic!("no recovery event: {modes:?}"));
    assert!(
        modes[recovered..].iter().any(|m| m.0 == "Playing"),
        "playback resumed: {modes:?}"
    );
    // And it played again with healthy drives.
    assert!(ex[enabled..].iter().any(|e| e.seen.cmd.chunk_seq != 0));
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
