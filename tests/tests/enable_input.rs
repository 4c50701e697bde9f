//! The enable (deadman) switch over EtherCAT (issue 40): the real runtime (control
//! loop, executor, gate, scripted policy) on 7 simulated drives over the EtherCAT
//! backend in-process, the switch wired to bit 16 of joint 0's drive's digital inputs
//! (0x60FD, mapped in the TxPDO). The test releases it mid-motion through the simulated
//! chain, presses it again later.
//!
//! Judged on what reached the bus and on the run's records: a wrapper between the
//! runtime and the backend logs every command and the digital inputs each frame
//! brought back. The command made after the frame that carried the release is already
//! the stop (the recording's mode at that cycle is no longer `Playing`): authority is
//! withdrawn within one bus period; the commands from there are within the joint's
//! braking envelope (`chunkrt_tests::braking::check_stop`, the jerk-limited reference
//! stop); an intervention record names the release; once the switch is held again the
//! policy plays again.

#[path = "../../crates/chunkrt-ethercat/tests/common/mod.rs"]
mod common;

use chunkrt_config::{EnableInputConfig, PdoEntry};
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_tests::faulty::Logged;
use chunkrt_tests::{braking, recording};
use common::*;
use std::sync::Arc;
use std::time::Duration;

const BIT: u8 = 16;

#[test]
fn releasing_the_enable_switch_stops_the_arm_within_one_bus_period_and_its_braking_envelope() {
    let mut cfg = config();
    {
        let ec = cfg.ethercat.as_mut().unwrap();
        ec.pdo.tx.push(PdoEntry::DigitalInputs);
        ec.enable_input = Some(EnableInputConfig { joint: 0, bit: BIT });
    }
    cfg.telemetry.record = true;
    let drive0 = cfg
        .ethercat
        .as_ref()
        .unwrap()
        .drive
        .iter()
        .position(|d| d.joint == 0)
        .unwrap();
    let mut sim = sim_config(&cfg, 7);
    sim.drive.digital_inputs = 1 << BIT;
    let (b, ctl) = backend(&cfg, sim);
    let (rec, log) = Logged::new(b);
    let out_dir = std::env::temp_dir().join(format!("chunkrt-enable-input-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    // The operator: releases the switch once the arm is moving, presses it again later.
    let watcher_log = Arc::clone(&log);
    let operator = std::thread::spawn(move || {
        let wait_for = |n: usize| {
            while watcher_log.lock().unwrap().len() < n {
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        wait_for(2500);
        assert!(ctl.network().set_digital_inputs(drive0, 0));
        wait_for(4500);
        assert!(ctl.network().set_digital_inputs(drive0, 1 << BIT));
        ctl
    });
    let policy = chunkrt_rt::build::policy(&cfg).expect("scripted policy");
    let opts = RunOptions {
        duration: Some(Duration::from_secs(7)),
        out_dir: Some(out_dir.clone()),
        ..RunOptions::default()
    };
    let outcome = Runtime::with_parts(&cfg, Box::new(rec), policy)
        .run(&opts)
        .expect("run");
    let _ctl = operator.join().unwrap();
    let held_bit =
        |e: &chunkrt_tests::faulty::Exchange| e.seen.fb.digital_inputs[0] & (1 << BIT) != 0;
    let seen = log.lock().unwrap().clone();

    // The frame that carried the release, and the recorded cycles (cycle k is the k-th
    // exchange: the same commands).
    let k = seen
        .iter()
        .position(|s| !held_bit(s) && !s.seen.fb.held)
        .expect("a release was read");
    let (cycles, _) = recording::read(&out_dir.join("recording.mcap")).unwrap();
    for c in cycles.iter().take(k + 50) {
        let s = &seen[c.cycle as usize];
        for (a, b) in c.command_rad.iter().zip(&s.seen.cmd.pos_rad) {
            assert!(
                (a - b).abs() < 1e-12,
                "cycle {}: the recording is the bus's",
                c.cycle
            );
        }
    }
    let mode_at = |n: usize| {
        cycles
            .iter()
            .find(|c| c.cycle == n as u64)
            .unwrap()
            .mode
            .clone()
    };
    assert_eq!(
        mode_at(k),
        "Playing",
        "the policy played when the release arrived"
    );
    assert_ne!(
        mode_at(k + 1),
        "Playing",
        "authority withdrawn by the next command"
    );

    // From the command of cycle k on: the stop, within each joint's braking envelope.
    let t = cfg.control.period_ms * 1e-3;
    let limits = cfg.joint_limits();
    let mut moving = 0;
    for j in 0..7 {
        let q: Vec<f64> = seen[..(k + 1500).min(seen.len())]
            .iter()
            .map(|s| s.seen.cmd.pos_rad[j])
            .collect();
        let v = (q[k] - q[k - 1]) / t;
        if v.abs() > 0.05 {
            moving += 1;
        }
        braking::check_stop(&q[..], k, &limits.joint[j], t)
            .unwrap_or_else(|e| panic!("joint {j}: {e}"));
    }
    assert!(
        moving > 0,
        "no joint was moving at the release: the stop shows nothing"
    );

    // Held again: the policy plays again.
    let k2 = k + seen[k..].iter().position(held_bit).expect("pressed again");
    assert!(
        cycles
            .iter()
            .any(|c| c.cycle as usize > k2 && c.mode == "Playing"),
        "authority back once the switch is held"
    );
    // The intervention record of the release.
    let records = outcome.report.extra["interventions"]
        .as_array()
        .expect("records");
    let release = records
        .iter()
        .find(|r| r["kind"] == "withdrawal" && r["detail"] == "EnableReleased")
        .unwrap_or_else(|| panic!("no record of the release: {records:?}"));
    let file = out_dir.join(release["file"].as_str().unwrap());
    assert!(file.is_file(), "{}", file.display());
    let _ = std::fs::remove_dir_all(&out_dir);
}
