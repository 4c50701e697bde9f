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

/// A residual that corrects every joint by `CORRECTION_RAD` (the residual stage's
/// bound and rate shape it).
struct ConstantCorrection;

const CORRECTION_RAD: f64 = 0.04;

impl chunkrt_core::Policy for ConstantCorrection {
    fn spec(&self) -> chunkrt_core::PolicySpec {
        chunkrt_core::PolicySpec {
            dof: 7,
            horizon: 16,
            dt_ns: 20_000_000,
        }
    }
    fn infer(
        &mut self,
        _obs: &chunkrt_core::Observation,
        out: &mut chunkrt_core::Chunk,
    ) -> Result<chunkrt_core::InferInfo, chunkrt_core::PolicyError> {
        out.len = 16;
        out.dof = 7;
        out.dt_ns = 20_000_000;
        for row in out.pos_rad.iter_mut().take(16) {
            row[..7].fill(CORRECTION_RAD);
        }
        Ok(chunkrt_core::InferInfo::default())
    }
}

/// What one run with the switch released saw.
struct Released {
    cfg: chunkrt_config::Config,
    seen: Vec<chunkrt_tests::faulty::Exchange>,
    cycles: Vec<recording::RecordedCycle>,
    /// The exchange whose frame carried the release.
    k: usize,
    outcome: chunkrt_rt::RunOutcome,
    out_dir: std::path::PathBuf,
}

/// The scripted policy on 7 simulated drives (with `residual`, a constant correction
/// under `[policy.residual]`), the switch released after 2500 exchanges and, with
/// `press_again`, pressed again after 4500; a run of `seconds`.
fn release_run(name: &str, residual: bool, press_again: bool, seconds: u64) -> Released {
    let mut cfg = config();
    {
        let ec = cfg.ethercat.as_mut().unwrap();
        ec.pdo.tx.push(PdoEntry::DigitalInputs);
        ec.enable_input = Some(EnableInputConfig { joint: 0, bit: BIT });
    }
    cfg.telemetry.record = true;
    if residual {
        cfg.policy.residual = Some(chunkrt_config::ResidualConfig {
            manifest: "unused: the residual policy is given in-process".into(),
            bound_rad: chunkrt_config::PerJoint::All(0.05),
            rate_rad_s: chunkrt_config::PerJoint::All(0.05),
            acc_rad_s2: None,
            jerk_rad_s3: None,
            region: None,
            budget: None,
        });
    }
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
    let out_dir = std::env::temp_dir().join(format!(
        "chunkrt-enable-input-{name}-{}",
        std::process::id()
    ));
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
        if press_again {
            wait_for(4500);
            assert!(ctl.network().set_digital_inputs(drive0, 1 << BIT));
        }
        ctl
    });
    let policy = chunkrt_rt::build::policy(&cfg).expect("scripted policy");
    let opts = RunOptions {
        duration: Some(Duration::from_secs(seconds)),
        out_dir: Some(out_dir.clone()),
        ..RunOptions::default()
    };
    let outcome = Runtime::with_parts(&cfg, Box::new(rec), policy)
        .with_residual(
            residual.then(|| Box::new(ConstantCorrection) as Box<dyn chunkrt_core::Policy>),
        )
        .run(&opts)
        .expect("run");
    let _ctl = operator.join().unwrap();
    let seen = log.lock().unwrap().clone();
    // The frame that carried the release, and the recorded cycles (cycle k is the k-th
    // exchange: the same commands).
    let k = seen
        .iter()
        .position(|s| !held_bit(s) && !s.seen.fb.held)
        .expect("a release was read");
    let (cycles, _) = recording::read(&out_dir.join("recording.mcap")).unwrap();
    Released {
        cfg,
        seen,
        cycles,
        k,
        outcome,
        out_dir,
    }
}

fn held_bit(e: &chunkrt_tests::faulty::Exchange) -> bool {
    e.seen.fb.digital_inputs[0] & (1 << BIT) != 0
}

impl Released {
    fn mode_at(&self, n: usize) -> String {
        self.cycles
            .iter()
            .find(|c| c.cycle == n as u64)
            .unwrap()
            .mode
            .clone()
    }

    /// The recording is the bus's, the policy played when the release arrived and not
    /// in the next command, and from the command of the release's cycle on the commands
    /// are the stop, within each joint's braking envelope (and the hold after it);
    /// the joints that were moving.
    fn judge_stop(&self) -> usize {
        let k = self.k;
        for c in self.cycles.iter().take(k + 50) {
            let s = &self.seen[c.cycle as usize];
            for (a, b) in c.command_rad.iter().zip(&s.seen.cmd.pos_rad) {
                assert!(
                    (a - b).abs() < 1e-12,
                    "cycle {}: the recording is the bus's",
                    c.cycle
                );
            }
        }
        assert_eq!(
            self.mode_at(k),
            "Playing",
            "the policy played when the release arrived"
        );
        assert_ne!(
            self.mode_at(k + 1),
            "Playing",
            "authority withdrawn by the next command"
        );
        let t = self.cfg.control.period_ms * 1e-3;
        let limits = self.cfg.joint_limits();
        let mut moving = 0;
        for j in 0..7 {
            let q: Vec<f64> = self.seen[..(k + 1500).min(self.seen.len())]
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
        moving
    }
}

#[test]
fn releasing_the_enable_switch_stops_the_arm_within_one_bus_period_and_its_braking_envelope() {
    let r = release_run("plain", false, true, 7);
    let moving = r.judge_stop();
    assert!(
        moving > 0,
        "no joint was moving at the release: the stop shows nothing"
    );

    // Held again: the policy plays again.
    let k2 = r.k
        + r.seen[r.k..]
            .iter()
            .position(held_bit)
            .expect("pressed again");
    assert!(
        r.cycles
            .iter()
            .any(|c| c.cycle as usize > k2 && c.mode == "Playing"),
        "authority back once the switch is held"
    );
    // The intervention record of the release.
    let records = r.outcome.report.extra["interventions"]
        .as_array()
        .expect("records");
    let release = records
        .iter()
        .find(|r| r["kind"] == "withdrawal" && r["detail"] == "EnableReleased")
        .unwrap_or_else(|| panic!("no record of the release: {records:?}"));
    let file = r.out_dir.join(release["file"].as_str().unwrap());
    assert!(file.is_file(), "{}", file.display());
    let _ = std::fs::remove_dir_all(&r.out_dir);
}

/// Issue 56: with a residual's correction in the commands, the stop and the hold after it
/// are the same: the correction is in the commanded state the stop brakes, and is never
/// added again (it was, and the hold moved by what was left of it). Held released for
/// 1.5 s, longer than the stop.
#[test]
fn with_a_residual_in_authority_releasing_the_switch_stops_the_arm_where_the_commands_were() {
    let r = release_run("residual", true, false, 4);
    // The correction was in the commands when the switch was released ...
    let at_release = r
        .cycles
        .iter()
        .find(|c| c.cycle == r.k as u64)
        .unwrap()
        .residual_rad
        .clone();
    assert!(
        at_release.iter().all(|c| *c > 0.5 * CORRECTION_RAD),
        "the correction had set in: {at_release:?}"
    );
    r.judge_stop();
    // ... and none is added from the next command on.
    for c in r.cycles.iter().filter(|c| c.cycle as usize > r.k) {
        assert!(
            c.residual_rad.iter().all(|x| *x == 0.0),
            "cycle {}: a correction added while withdrawn: {:?}",
            c.cycle,
            c.residual_rad
        );
    }
    let _ = std::fs::remove_dir_all(&r.out_dir);
}
