//! Shared set-up: the arm config of rt-config/arm-ethercat-veth.toml, run on the
//! in-process simulated chain (virtual clock: one bus period per process-data frame).

#![allow(dead_code)]

use chunkrt_config::Config;
use chunkrt_core::{Backend, Command, DriveRequest, DriveState, Feedback, MonoTime, MAX_DOF};
use chunkrt_ecsim::{SimConfig, SimNetwork};
use chunkrt_ethercat::{EthercatBackend, EthercatParams, SimControl};
use std::path::Path;

/// The veth config, made fit for a test process: no mlockall, no pinning.
pub fn config() -> Config {
    // The repository root above the crate that includes this file (chunkrt-ethercat's
    // tests, or the cross-crate tests of `tests/`).
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|d| d.join("rt-config").is_dir())
        .expect("rt-config above the crate");
    let path = root.join("rt-config/arm-ethercat-veth.toml");
    let mut cfg = Config::load(&path).expect("rt-config/arm-ethercat-veth.toml loads");
    cfg.control.lock_memory = false;
    cfg.control.cpu = -1;
    cfg.inference.cpu = -1;
    cfg.telemetry.status_interval_ms = 0.0;
    cfg
}

/// Backend parameters of `cfg`, with a short DC static sync (the default 1000 is for
/// real clocks).
pub fn params(cfg: &Config) -> EthercatParams {
    let mut p = EthercatParams::from_config(cfg).expect("ethercat section");
    p.dc_static_sync_iterations = 20;
    // The test machine is shared and noisy; these tests are about behaviour, not timing
    // (a lost frame still costs the whole timeout, so not longer than this).
    p.frame_timeout = std::time::Duration::from_millis(20);
    p.frame_late = std::time::Duration::from_millis(10);
    p
}

/// A simulated chain of `drives` ecsim default drives on the virtual clock at the config's
/// bus period.
pub fn sim_config(cfg: &Config, drives: usize) -> SimConfig {
    let mut s = SimConfig::virtual_chain(drives);
    s.cycle_us = (cfg.control.period_ms * 1000.0).round() as u64;
    s
}

/// The backend on a simulated chain.
pub fn backend(cfg: &Config, sim: SimConfig) -> (EthercatBackend, SimControl) {
    let net = SimNetwork::new(sim).expect("valid simulator config");
    EthercatBackend::simulated(params(cfg), net)
}

/// A command holding `fb`'s positions.
pub fn hold(fb: &Feedback, request: DriveRequest) -> Command {
    Command {
        dof: fb.dof,
        pos_rad: fb.pos_rad,
        request,
        ..Command::default()
    }
}

/// Virtual time of cycle `k` at period `period_ms`.
pub fn t(k: u64, period_ms: f64) -> MonoTime {
    MonoTime::from_ns(1_000_000_000 + (k as f64 * period_ms * 1e6) as u64)
}

/// Whether any simulated drive is in Operation Enabled.
pub fn any_sim_drive_enabled(ctl: &SimControl) -> bool {
    let net = ctl.network();
    (0..net.len()).any(|i| net.device(i).unwrap().drive().statusword() & 0x6F == 0x27)
}

/// Whether every joint of `fb` is enabled.
pub fn all_enabled(fb: &Feedback) -> bool {
    fb.state[..fb.dof as usize]
        .iter()
        .all(|s| *s == DriveState::Enabled)
}

/// Brings `b` up and enables its drives, as the runtime does; returns the feedback.
pub fn start(b: &mut EthercatBackend) -> Feedback {
    let mut fb = Feedback::default();
    b.start(t(0, 1.0), &mut fb)
        .unwrap_or_else(|e| panic!("bring-up: {e}"));
    assert_eq!(fb.dof as usize, b.dof());
    assert!(fb.dof as usize <= MAX_DOF);
    b.enable(t(1, 1.0), &mut fb)
        .unwrap_or_else(|e| panic!("enable: {e}"));
    fb
}

/// Brings the drives up, then moves every joint at 1 rad/s for `cycles` 1 ms cycles;
/// returns the next cycle's index.
pub fn moving(b: &mut EthercatBackend, cycles: u64) -> u64 {
    let fb0 = start(b);
    let mut fb = fb0;
    for k in 1..=cycles {
        let mut cmd = hold(&fb0, DriveRequest::Track);
        for j in 0..b.dof() {
            cmd.pos_rad[j] = fb0.pos_rad[j] + 1e-3 * k as f64;
            cmd.vel_rad_s[j] = 1.0;
        }
        b.exchange(t(k, 1.0), &cmd, &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
    }
    assert!(fb.vel_rad_s[0] > 0.5, "moving: {} rad/s", fb.vel_rad_s[0]);
    cycles + 1
}
