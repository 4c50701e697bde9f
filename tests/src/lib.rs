//! Shared helpers of chunkrt's cross-crate integration tests (`tests/tests/*.rs`).

pub mod faulty;

use chunkrt_config::Config;
use chunkrt_core::{Backend, BackendError, Command, Feedback, MonoTime};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// A backend wrapper that records every command and feedback (tests only: it
/// locks and allocates, which the real backends never do).
pub struct Recording<B: Backend> {
    inner: B,
    log: Arc<Mutex<Vec<Seen>>>,
}

impl<B: Backend> Recording<B> {
    /// Wraps `inner`; the returned log fills as the loop runs.
    pub fn new(inner: B) -> (Self, Arc<Mutex<Vec<Seen>>>) {
        let log = Arc::new(Mutex::new(Vec::with_capacity(1 << 16)));
        (
            Recording {
                inner,
                log: log.clone(),
            },
            log,
        )
    }
}

impl<B: Backend> Backend for Recording<B> {
    fn dof(&self) -> usize {
        self.inner.dof()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.inner.start(now, fb)
    }
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        let r = self.inner.exchange(now, cmd, fb);
        self.log.lock().unwrap().push(Seen {
            t: now,
            cmd: *cmd,
            fb: *fb,
        });
        r
    }
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.inner.shutdown(now)
    }
}
