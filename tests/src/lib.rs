//! Shared helpers of chunkrt's cross-crate integration tests (`tests/tests/*.rs`).

pub mod braking;
pub mod faulty;
pub mod kinematics;
pub mod playback;
pub mod recording;
pub mod schema;

use chunkrt_config::Config;
use chunkrt_core::{Command, Feedback, MonoTime};
use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `rt-config/sim.toml` with the scripted policy, optionally edited by `edit`.
pub fn sim_config(edit: impl FnOnce(&mut Config)) -> Config {
    let path = repo_root().join("rt-config/sim.toml");
    let mut cfg = Config::load(&path).expect("rt-config/sim.toml loads");
    cfg.policy.kind = chunkrt_config::PolicyKind::Scripted;
    if cfg.policy.goals_rad.is_empty() {
        cfg.policy.goals_rad = vec![
            vec![0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785],
            vec![0.6, -0.3, 0.4, -1.9, 0.3, 1.9, 0.3],
        ];
    }
    // Tests run unprivileged too and must not compete with each other for a CPU.
    cfg.control.cpu = -1;
    cfg.inference.cpu = -1;
    cfg.telemetry.status_interval_ms = 0.0;
    edit(&mut cfg);
    cfg
}

/// `rt-config/arm-ethercat-veth.toml` made fit for a test process (no memory lock,
/// no pinning, no status line).
pub fn veth_config() -> Config {
    let path = repo_root().join("rt-config/arm-ethercat-veth.toml");
    let mut cfg = Config::load(&path).expect("rt-config/arm-ethercat-veth.toml loads");
    cfg.control.lock_memory = false;
    cfg.control.cpu = -1;
    cfg.inference.cpu = -1;
    cfg.telemetry.status_interval_ms = 0.0;
    cfg
}

/// One cycle as a test saw it: the command handed to the backend and the feedback.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// When the command was handed over.
    pub t: MonoTime,
    /// The command.
    pub cmd: Command,
    /// The feedback after the exchange.
    pub fb: Feedback,
}
