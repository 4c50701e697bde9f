//! The runtime: builds the backend, policy, executor, gate and rings from a config,
//! starts the control, inference and telemetry threads, and returns the report.
//!
//! `Runtime::run` in five steps, each in its own file: `assemble` (everything built
//! before anything moves), `threads` (started, the control thread supervised, the
//! others stopped), `control_thread` (the loop's life on its thread), `report` (the
//! report collected at the end); `outcome` holds what a run is asked and returns.

mod assemble;
mod control_thread;
mod outcome;
mod report;
mod threads;

pub use crate::error::RunError;
pub use outcome::{Ending, QuickStopOutcome, RunOptions, RunOutcome};

use assemble::{start_live_view, start_metrics, Built};
use chunkrt_config::Config;
use chunkrt_core::{Backend, Policy};
use report::collect;
use std::time::Duration;
use threads::Threads;

/// Everything a run needs, built from a config; tests may swap the backend or policy.
pub struct Runtime {
    cfg: Config,
    backend: Box<dyn Backend>,
    policy: Box<dyn Policy>,
    /// The residual policy of `[policy.residual]` (none: the base alone).
    residual: Option<Box<dyn Policy>>,
}

impl Runtime {
    /// Builds the backend and policy that the config names.
    pub fn from_config(cfg: &Config) -> Result<Runtime, RunError> {
        let backend = crate::build::backend(cfg)?;
        let policy = crate::build::policy(cfg)?;
        let residual = crate::build::residual(cfg)?;
        Ok(Runtime::with_parts(cfg, backend, policy).with_residual(residual))
    }

    /// With a residual policy on top of the base (its gate's limits from the config's
    /// `[policy.residual]`, which it needs).
    pub fn with_residual(mut self, residual: Option<Box<dyn Policy>>) -> Self {
        self.residual = residual;
        self
    }

    /// Uses the given backend and policy.
    pub fn with_parts(cfg: &Config, backend: Box<dyn Backend>, policy: Box<dyn Policy>) -> Self {
        Runtime {
            cfg: cfg.clone(),
            backend,
            policy,
            residual: None,
        }
    }

    /// Runs until the duration ends or a stop is requested; then brings the arm to
    /// rest, shuts the backend down and returns the report.
    ///
    /// Five steps: build what the threads need (before anything moves), start the
    /// threads, supervise the control thread (the loop, its controlled stop and the
    /// backend's shutdown run there), stop the other threads, collect the report.
    pub fn run(self, opts: &RunOptions) -> Result<RunOutcome, RunError> {
        let Runtime {
            cfg,
            backend,
            policy,
            residual,
        } = self;
        if residual.is_some() && cfg.residual_limits().is_none() {
            return Err(RunError::Policy(
                "a residual policy needs the config's [policy.residual] (its gate's bounds)".into(),
            ));
        }
        // Before anything moves; commands act on this run until its end.
        let _operator = crate::operator::open(&cfg).map_err(RunError::Operator)?;
        let (live, metrics) = start_metrics(&cfg)?;
        let view = start_live_view(&cfg)?;
        let mut built = Built::new(&cfg, policy, residual, opts)?;
        built.shared.live = live;
        if let Some(v) = &view {
            if !built.telemetry.collector.set_live_sink(Box::new(v.sink())) {
                return Err(RunError::Config(
                    "[live_view] shows the recording's channels, and this run records none".into(),
                ));
            }
        }
        let threads = Threads::start(&cfg, backend, built, opts)?;
        let (controlled, others) = threads.supervise();
        let stopped = others.stop(controlled)?;
        let outcome = collect(&cfg, opts, stopped);
        if let (Some(m), Some(server)) = (&cfg.metrics, metrics) {
            // The report's values, served a while for a scraper to see (the run is
            // over: the arm is at rest and the backend shut down).
            std::thread::sleep(Duration::from_nanos(chunkrt_core::ms_to_ns(m.linger_ms)));
            drop(server);
        }
        drop(view);
        outcome
    }
}
