//! One run of the runtime with the probe, its recording read back and analysed.

use super::analyse::{analyse, Sample};
use super::row::LiveRow;
use super::setup::LiveSetup;
use crate::error::MarginError;
use chunkrt_config::{Config, InjectConfig};
use chunkrt_rt::{RunOptions, Runtime};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Runs the runtime once with `inject` plus the probe, writing into `run_dir`, and
/// measures its loop.
pub fn measure(
    setup: &LiveSetup,
    inject: &InjectConfig,
    run_dir: &Path,
    stop: Arc<AtomicBool>,
) -> Result<LiveRow, MarginError> {
    measure_with(setup, inject, run_dir, stop, |cfg| {
        Runtime::from_config(cfg).map_err(|e| MarginError::Run(e.to_string()))
    })
}

/// [`measure`] with the runtime built by `build` from the point's config (a backend
/// the config cannot name, such as EtherCAT on an in-process simulated chain).
pub fn measure_with(
    setup: &LiveSetup,
    inject: &InjectConfig,
    run_dir: &Path,
    stop: Arc<AtomicBool>,
    build: impl FnOnce(&Config) -> Result<Runtime, MarginError>,
) -> Result<LiveRow, MarginError> {
    let mut cfg = setup.config_for(inject)?;
    cfg.telemetry.record = true;
    let backend = format!("{:?}", cfg.backend.kind).to_lowercase();
    let opts = RunOptions {
        duration: Some(Duration::from_secs_f64(setup.run_s())),
        out_dir: Some(run_dir.to_path_buf()),
        live_status: false,
        stop,
        config_name: setup.config_name.clone(),
    };
    let outcome = build(&cfg)?
        .run(&opts)
        .map_err(|e| MarginError::Run(e.to_string()))?;
    let ending = outcome.ending();
    if ending != chunkrt_rt::Ending::Normal {
        return Err(MarginError::Ended {
            ending,
            message: outcome.describe_ending(),
        });
    }
    let files = chunkrt_telemetry::readback::segments(run_dir)?;
    let j = setup.joint;
    let mut samples: Vec<Sample> = Vec::new();
    let data = chunkrt_telemetry::readback::read_with(&files, None, |c| {
        let get = |v: &[f64]| v.get(j).copied().unwrap_or(f64::NAN);
        samples.push(Sample {
            t: c.t_s,
            u: get(c.setpoint_rad),
            c: get(c.command_rad),
            y: get(c.feedback_rad),
            playing: c.mode == chunkrt_core::Mode::Playing,
        });
    })?;
    let gate_times: &[f64] = data.gate.get(j).map_or(&[], |v| v.as_slice());
    let counter = |k: &str| outcome.report.counters.get(k).copied().unwrap_or(0);
    let goal = cfg.policy.goals_rad.first().and_then(|g| g.get(j).copied());
    let mut row = analyse(setup, &samples, gate_times, goal)?;
    row.consequences.chunks_expired = counter("chunks_expired");
    row.consequences.fallbacks = counter("fallback_entries").saturating_sub(1);
    row.run_dir = run_dir.to_path_buf();
    row.backend = backend;
    Ok(row)
}
