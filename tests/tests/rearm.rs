//! Operator re-arm (SIGUSR1 in `chunkrt run`) with `resume = manual`: a faulted drive
//! stays stopped until the operator re-arms; then it is reset, the executor re-seeded
//! at the measured position, and the policy plays again. Real threads, real simulated
//! arm. (Its own test binary: the re-arm request is process-wide.)

use chunkrt_config::ResumeMode;
use chunkrt_core::{DriveRequest, DriveState};
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_sim::SimArm;
use chunkrt_tests::faulty::{mode_events, ArmFault, FaultyArm};
use chunkrt_tests::sim_config;
use std::time::Duration;

#[test]
fn with_manual_resume_an_operator_rearm_resets_the_drive_and_playback_resumes() {
    let cfg = sim_config(|c| c.executor.resume = ResumeMode::Manual);
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
    // After it: reset, back enabled, and the command starts where the arm is.
    let reset = ex[rearmed_at..]
        .iter()
        .position(|e| e.seen.cmd.request == DriveRequest::FaultReset)
        .map(|i| i + rearmed_at)
        .expect("a fault reset after the re-arm");
    let enabled = ex[reset..]
        .iter()
        .position(|e| e.seen.fb.all_enabled())
        .map(|i| i + reset)
        .expect("the drives came back");
    let after = &ex[enabled + 1].seen;
    for j in 0..7 {
        let d = (after.cmd.pos_rad[j] - ex[enabled].seen.fb.pos_rad[j]).abs();
        assert!(
            d < 0.01,
            "joint {j}: command {d} rad from the measured position"
        );
    }
    let modes = mode_events(&report);
    let rearmed = modes
        .iter()
        .position(|m| m.1 == "Rearmed")
        .unwrap_or_else(|| panic!("no Rearmed event: {modes:?}"));
    let recovered = modes[rearmed..]
        .iter()
        .position(|m| m.1 == "DrivesRecovered")
        .map(|i| i + rearmed)
        .unwrap_or_else(|| panic!("no recovery after the re-arm: {modes:?}"));
    assert!(
        modes[recovered..].iter().any(|m| m.0 == "Playing"),
        "playback resumed: {modes:?}"
    );
    assert!(ex[enabled..].iter().any(|e| e.seen.cmd.chunk_seq != 0));
}
