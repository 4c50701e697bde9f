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

/// Where a paired point keeps its unprobed twin run, inside the point's directory.
pub const REFERENCE_DIR: &str = "reference";

/// [`measure`] with the runtime built by `build` from the point's config (a backend
/// the config cannot name, such as EtherCAT on an in-process simulated chain).
///
/// A policy that moves on its own ([`LiveSetup::paired`]) is run twice: first
/// without the probe into `run_dir/reference`, then probed, replaying the
/// reference's discrete decisions: its goals change at the observations where the
/// reference's did (`policy.goal_schedule`: a goal reached a chunk earlier or later
/// would move the rest of the run by a chunk's worth of motion) and it draws and
/// publishes the candidates the reference did, from the observation of the cycle
/// it took, taken up by the control loop in the cycle it was
/// (`policy.draw_schedule`: one more candidate drawn shifts every later noise draw;
/// another one chosen, a seam 0.1-3 mrad away; a chunk taken up a cycle later moves
/// its seam); the loop is measured on the difference of the two, cycle by cycle
/// (on the simulated arm the two runs are one until the probe starts, beside 0.46
/// rad RMS of motion), so what is left is the loop's answer to the probe. A pair
/// that parted before the probe is set aside (`departed-N`) and made again.
pub fn measure_with(
    setup: &LiveSetup,
    inject: &InjectConfig,
    run_dir: &Path,
    stop: Arc<AtomicBool>,
    mut build: impl FnMut(&Config) -> Result<Runtime, MarginError>,
) -> Result<LiveRow, MarginError> {
    let mut cfg = setup.config_for(inject)?;
    cfg.telemetry.record = true;
    let backend = format!("{:?}", cfg.backend.kind).to_lowercase();
    let j = setup.joint;
    let goal = cfg.policy.goals_rad.first().and_then(|g| g.get(j).copied());
    let mut attempts = 0;
    let mut departed_rad = Vec::new();
    let (probed, mut row) = loop {
        attempts += 1;
        if attempts > 1 {
            set_aside(run_dir, attempts - 1)?;
        }
        let reference = match setup.paired() {
            true => Some(twin_run(
                setup,
                &mut cfg,
                run_dir,
                stop.clone(),
                &mut build,
            )?),
            false => None,
        };
        let probed = run_once(setup, &cfg, run_dir, stop.clone(), &mut build)?;
        let row = analyse(
            setup,
            &probed.samples,
            reference.as_ref().map(|r| r.samples.as_slice()),
            &probed.gate_times,
            goal,
        )?;
        let again = super::analyse::departed(setup, row.twin_mismatch_rad).is_some();
        if !again || attempts >= PAIRED_ATTEMPTS {
            break (probed, row);
        }
        departed_rad.extend(row.twin_mismatch_rad);
    };
    row.attempts = attempts;
    row.departed_rad = departed_rad;
    row.replay_late = probed.counter("replay_late");
    row.consequences.chunks_expired = probed.counter("chunks_expired");
    row.consequences.fallbacks = probed.counter("fallback_entries").saturating_sub(1);
    row.run_dir = run_dir.to_path_buf();
    row.backend = backend;
    row.action_filter = super::FilterCost::of(&setup.cfg, row.status.crossover_hz());
    Ok(row)
}

/// Pairs (twin and probed run) made before a departure (see
/// `analyse::DEPARTED_SHARE`) is the point's verdict.
pub const PAIRED_ATTEMPTS: u32 = 3;

/// The unprobed twin of `cfg` run into `run_dir/REFERENCE_DIR`; `cfg` (an `onnx`
/// policy) then replays its goal changes and candidate draws.
fn twin_run(
    setup: &LiveSetup,
    cfg: &mut Config,
    run_dir: &Path,
    stop: Arc<AtomicBool>,
    build: &mut impl FnMut(&Config) -> Result<Runtime, MarginError>,
) -> Result<Recorded, MarginError> {
    let mut twin = cfg.clone();
    twin.inject.probe = None;
    twin.policy.goal_schedule.clear();
    twin.policy.draw_schedule.clear();
    let r = run_once(setup, &twin, &run_dir.join(REFERENCE_DIR), stop, build)?;
    if cfg.policy.kind.is_learned() {
        cfg.policy.goal_schedule = r
            .goal_changes
            .iter()
            .map(|&(seq, goal)| [seq, u64::from(goal)])
            .collect();
        cfg.policy.draw_schedule = r
            .draws
            .iter()
            .map(|&(seq, n, c, played)| [seq, u64::from(n), u64::from(c), played])
            .collect();
    }
    Ok(r)
}

/// Removes a pair's runs from `run_dir` (the probed run and its twin).
/// Moves a departed pair's runs (the probed run and its twin) out of `run_dir`
/// into `run_dir/departed-N`, kept for a look at where they parted.
fn set_aside(run_dir: &Path, n: u32) -> Result<(), MarginError> {
    let err = |p: &Path, e: std::io::Error| MarginError::Run(format!("{}: {e}", p.display()));
    let kept = run_dir.join(format!("{DEPARTED_DIR}-{n}"));
    std::fs::create_dir(&kept).map_err(|e| err(&kept, e))?;
    let entries = std::fs::read_dir(run_dir).map_err(|e| err(run_dir, e))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with(DEPARTED_DIR) {
            continue;
        }
        let to = kept.join(&name);
        std::fs::rename(entry.path(), &to).map_err(|e| err(&to, e))?;
    }
    Ok(())
}

/// Where a departed pair is kept in its point's directory (`departed-N`).
pub const DEPARTED_DIR: &str = "departed";

/// One run's probed joint, read back from its recording.
struct Recorded {
    samples: Vec<Sample>,
    /// When the gate changed the probed joint's command (s).
    gate_times: Vec<f64>,
    /// The policy's goal changes: (observation's cycle, goal).
    goal_changes: Vec<(u64, u16)>,
    /// Published chunks: (observation's cycle, drawn, chosen, cycle first played).
    draws: Vec<(u64, u16, u16, u64)>,
    counters: std::collections::BTreeMap<String, u64>,
}

impl Recorded {
    fn counter(&self, k: &str) -> u64 {
        self.counters.get(k).copied().unwrap_or(0)
    }
}

/// Runs the runtime built from `cfg` once into `run_dir` and reads its recording.
fn run_once(
    setup: &LiveSetup,
    cfg: &Config,
    run_dir: &Path,
    stop: Arc<AtomicBool>,
    build: &mut impl FnMut(&Config) -> Result<Runtime, MarginError>,
) -> Result<Recorded, MarginError> {
    let opts = RunOptions {
        duration: Some(Duration::from_secs_f64(setup.run_s())),
        out_dir: Some(run_dir.to_path_buf()),
        live_status: false,
        stop,
        config_name: setup.config_name.clone(),
    };
    let outcome = build(cfg)?
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
            cycle: c.cycle,
            t: c.t_s,
            u: get(c.setpoint_rad),
            c: get(c.command_rad),
            y: get(c.feedback_rad),
            playing: c.mode == chunkrt_core::Mode::Playing,
        });
    })?;
    Ok(Recorded {
        samples,
        gate_times: data.gate.get(j).cloned().unwrap_or_default(),
        goal_changes: data.goal_changes,
        draws: data.draws,
        counters: outcome.report.counters.clone(),
    })
}
