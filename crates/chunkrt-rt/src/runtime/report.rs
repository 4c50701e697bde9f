//! The report at the end: the threads' results, the stop's causes, the loop's and
//! the policy's figures, the configuration as run, written beside the records.

use super::assemble::Shared;
use super::outcome::{QuickStopOutcome, RunOptions, RunOutcome};
use super::threads::{Controlled, Stopped};
use crate::control::ControlLoop;
use crate::error::RunError;
use crate::inference::{HandoffCounts, InferenceExit};
use crate::supervise;
use chunkrt_config::Config;

use chunkrt_telemetry::{Collector, Report};
use serde_json::json;
use std::sync::atomic::Ordering;

/// The report from what the threads handed back, written to the output directory.
pub(super) fn collect(
    cfg: &Config,
    opts: &RunOptions,
    stopped: Stopped,
) -> Result<RunOutcome, RunError> {
    let Stopped {
        controlled,
        inference_exit,
        mut collector,
        unread_at_end,
        shared,
    } = stopped;
    let Controlled {
        control,
        host,
        ended,
        shutdown_error,
    } = controlled;
    // What the rings cannot carry: the panics and how a quick stop ended, in
    // `events.jsonl` and the recording before they are closed.
    let thread_panics = shared.failures.panics();
    let stops = crate::signals::stop_requests();
    let quick_stop = ended.quick.map(|q| QuickStopOutcome {
        by_signal: stops >= 2,
        third_signal: stops >= 3,
        standstill: ended.standstill,
        after_ms: q as f64 * 1e-6,
        disabled: shutdown_error.is_none(),
    });
    note_stop(&mut collector, &thread_panics, quick_stop.as_ref());
    let metrics = collector.metrics().clone();
    let wear = collector.wear().clone();
    let (mut report, log_error) = collector.finish(host, ended.t1.diff_ns(ended.t0) as f64 * 1e-9);
    report_stop(&mut report, &thread_panics, quick_stop.as_ref());
    report_loop(&mut report, cfg, &control, opts, &shared, unread_at_end);
    let drive_lost = report_drives(&mut report, &control, shutdown_error.as_deref());
    let mut records_error = None;
    if let Some(e) = log_error {
        report.extra.insert("log_error".into(), json!(e));
        records_error = Some(e);
    }
    let (inference_panicked, policy_unusable) =
        policy_outcome(&mut report, inference_exit, &shared.handoff);
    crate::wear::record(
        &mut report,
        cfg,
        &control,
        &wear,
        &opts.config_name,
        &mut records_error,
    );
    write_report(&report, opts, &mut records_error);
    if let Some(slot) = &shared.live {
        let last = slot.latest();
        slot.publish(chunkrt_telemetry::live::Snapshot::from_report(
            &report,
            last.as_deref(),
        ));
    }
    Ok(RunOutcome {
        report,
        inference_panicked,
        shutdown_error,
        drive_lost,
        metrics,
        records_error,
        thread_panics,
        quick_stop,
        policy_unusable,
    })
}

/// How the backend ended, in the report: its shutdown's error (`shutdown_error`) and a
/// drive lost for good (`drive_lost`, returned).
fn report_drives(
    report: &mut Report,
    control: &ControlLoop,
    shutdown_error: Option<&str>,
) -> Option<String> {
    if let Some(e) = shutdown_error {
        report.extra.insert("shutdown_error".into(), json!(e));
    }
    let drive_lost = control.drive_lost().map(|joint| {
        format!(
            "the drive of joint {joint} left the bus or OP and could not be brought back; \
             the arm was brought to a controlled stop and the run ended"
        )
    });
    if let Some(e) = &drive_lost {
        report.extra.insert("drive_lost".into(), json!(e));
    }
    drive_lost
}

/// How the policy fared, in the report: whether it panicked (`inference_panic`), and
/// whether it produced no usable chunk in the whole run (`policy_unusable`).
pub(super) fn policy_outcome(
    report: &mut Report,
    inference_exit: InferenceExit,
    handoff: &HandoffCounts,
) -> (Option<String>, Option<String>) {
    let panicked = match inference_exit {
        InferenceExit::Panicked(msg) => Some(msg),
        InferenceExit::Stopped => None,
    };
    let unusable = handoff.no_usable_chunk();
    for (key, msg) in [
        ("inference_panic", &panicked),
        ("policy_unusable", &unusable),
    ] {
        if let Some(m) = msg {
            report.extra.insert(key.into(), json!(m));
        }
    }
    (panicked, unusable)
}

/// The panics and how a quick stop ended, as notes in the records.
pub(super) fn note_stop(
    collector: &mut Collector,
    thread_panics: &[supervise::ThreadPanic],
    quick_stop: Option<&QuickStopOutcome>,
) {
    for p in thread_panics {
        collector.note(&json!({"event": "thread_panic", "thread": p.thread, "message": p.message}));
    }
    if let Some(q) = quick_stop {
        collector.note(&json!({"event": "quick_stop", "detail": q.to_string()}));
    }
}

/// The panics and how a quick stop ended, in the report.
pub(super) fn report_stop(
    report: &mut Report,
    thread_panics: &[supervise::ThreadPanic],
    quick_stop: Option<&QuickStopOutcome>,
) {
    if !thread_panics.is_empty() {
        report.extra.insert(
            "thread_panics".into(),
            json!(thread_panics
                .iter()
                .map(|p| json!({"thread": p.thread, "message": p.message}))
                .collect::<Vec<_>>()),
        );
    }
    if let Some(q) = quick_stop {
        report.extra.insert(
            "quick_stop".into(),
            json!({
                "by_signal": q.by_signal,
                "third_signal": q.third_signal,
                "standstill": q.standstill,
                "after_ms": q.after_ms,
                "disabled": q.disabled,
                "detail": q.to_string(),
            }),
        );
    }
}

/// What the loop counted, in the report: its own counters, the injection, the chunk
/// handoff and the backend's counters.
pub(super) fn report_loop(
    report: &mut Report,
    cfg: &Config,
    control: &ControlLoop,
    opts: &RunOptions,
    shared: &Shared,
    unread_at_end: bool,
) {
    finish_report(report, cfg, control, opts);
    report.extra.insert(
        "injected".into(),
        crate::inject::describe(
            &cfg.inject,
            control.period_ns(),
            control.injection(),
            &shared.inject_counts,
        ),
    );
    record_handoff(report, control, &shared.handoff, unread_at_end);
    if !shared.policy_goals.is_empty() {
        // The goals a recorded chunk's `goal` index names (the learner's record of a
        // run without [episodes] takes each cycle's goal from them).
        report
            .config
            .insert("policy_goals_rad".into(), json!(shared.policy_goals));
    }
    control.backend.counters(&mut |name, value| {
        report.counters.insert(name.into(), value);
    });
}

/// `report.json` in the output directory; a failure is added to `records_error`.
pub(super) fn write_report(report: &Report, opts: &RunOptions, records_error: &mut Option<String>) {
    if let Some(dir) = &opts.out_dir {
        if let Err(e) = chunkrt_telemetry::outdir::write_report(dir, &report.to_json()) {
            let e = format!("writing {}: {e}", dir.join("report.json").display());
            *records_error = Some(match records_error.take() {
                Some(first) => format!("{first}; {e}"),
                None => e,
            });
        }
    }
}

/// The counts that close the books on cycles and chunks (see `ChunkCounts`):
///
/// `cycles_run = cycles + ring_drops_cycle`;
/// `chunks_published = chunks_offered + chunks_overwritten_in_handoff +
/// chunks_ignored_stopping + chunks_unread_at_end`.
///
/// `chunks_published` is the inference thread's own count, which a full inference
/// ring cannot lose (the collector's count of inference records can).
pub(super) fn record_handoff(
    report: &mut Report,
    control: &ControlLoop,
    handoff: &HandoffCounts,
    unread_at_end: bool,
) {
    for (k, v) in [
        ("cycles_run", control.cycles_run()),
        (
            "chunks_published",
            handoff.published.load(Ordering::Relaxed),
        ),
        (
            "chunks_overwritten_in_handoff",
            handoff.overwritten.load(Ordering::Relaxed) + control.chunks_overwritten_waiting(),
        ),
        (
            "replay_late",
            handoff.replay_late.load(Ordering::Relaxed) + control.chunks_played_late(),
        ),
        ("chunks_unread_at_end", u64::from(unread_at_end)),
        (
            "residual_failed",
            handoff.residual_failed.load(Ordering::Relaxed),
        ),
        (
            "residual_out_of_domain",
            handoff.residual_out_of_domain.load(Ordering::Relaxed),
        ),
        (
            "residual_non_finite",
            handoff.residual_non_finite.load(Ordering::Relaxed),
        ),
        (
            "residual_refused",
            control.residual().map_or(0, |r| r.refused()),
        ),
        (
            "chunks_out_of_bounds",
            handoff.out_of_bounds.load(Ordering::Relaxed),
        ),
    ] {
        report.counters.insert(k.into(), v);
    }
}

pub(super) fn finish_report(
    report: &mut Report,
    cfg: &Config,
    control: &ControlLoop,
    opts: &RunOptions,
) {
    let ex = &control.executor;
    let seam = ex.seam_stats();
    report.seam.insert("seam_count".into(), seam.seams as f64);
    report
        .seam
        .insert("seam_max_pos_step_rad".into(), seam.max_pos_step_rad);
    report
        .seam
        .insert("seam_max_vel_step_rad_s".into(), seam.max_vel_step_rad_s);
    report
        .seam
        .insert("seam_max_acc_step_rad_s2".into(), seam.max_acc_step_rad_s2);
    report
        .seam
        .insert("seam_blend_restarts".into(), seam.blend_restarts as f64);
    // The executor is the authority on the chunk life cycle (see ChunkCounts).
    let c = ex.counts();
    for (k, v) in [
        ("chunks_offered", c.offered),
        ("chunks_accepted", c.accepted),
        ("chunks_rejected", c.rejected),
        ("chunks_used", c.used),
        ("chunks_superseded", c.superseded),
        ("chunks_discarded", c.discarded),
        ("chunks_expired", c.expired),
        ("chunks_horizon_ended", c.horizon_ended),
        ("chunks_pending", c.pending),
        ("fallback_entries", c.fallback_entries),
        ("mode_events_dropped", ex.events_dropped()),
        ("chunks_ignored_stopping", control.chunks_ignored_stopping()),
    ] {
        report.counters.insert(k.into(), v);
    }
    if let Some(peaks) = control.thermal_peaks() {
        // The I²t high-water mark per joint (load 1: the drive's own limit).
        let dof = cfg.control.joints.min(peaks.len());
        report
            .extra
            .insert("thermal_peak_load".into(), json!(peaks[..dof].to_vec()));
    }
    if let Some(seed) = control.thermal_seed() {
        // Where the monitor started: the ledger's last load, cooled, or the worst case.
        let dof = cfg.control.joints.min(seed.load.len());
        report.extra.insert(
            "thermal_initial_load".into(),
            json!(seed.load[..dof].to_vec()),
        );
        report
            .extra
            .insert("thermal_initial_from".into(), json!(seed.from));
    }
    for (i, n) in control.gate_counts().iter().enumerate() {
        report.gate.insert(
            chunkrt_telemetry::collector::constraint_name_index(i).into(),
            *n,
        );
    }
    report.config = report_config(cfg, opts, control.backend.name());
}

/// The report's `config`: what the run was, in a few keys (the file, the backend and its
/// model, the policy and the checkpoints its commands came from, the timing, the
/// episodes' plan).
pub(super) fn report_config(
    cfg: &Config,
    opts: &RunOptions,
    backend: &str,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut conf = std::collections::BTreeMap::new();
    conf.insert("file".into(), json!(opts.config_name));
    conf.insert("backend".into(), json!(backend));
    if let (chunkrt_config::BackendKind::Mujoco, Some(m)) = (cfg.backend.kind, &cfg.mujoco) {
        // The arm model the run was on: the file, and the digest it was checked against.
        conf.insert(
            "backend_model".into(),
            json!(cfg.resolve(&m.model).display().to_string()),
        );
        conf.insert("backend_model_sha256".into(), json!(m.model_sha256));
        if let Some(files) = &m.model_files_sha256 {
            // The files it names (includes, meshes), loaded with it.
            conf.insert("backend_model_files_sha256".into(), json!(files));
        }
    }
    if let Some(c) = &cfg.cartesian {
        // The kinematics of the gate's Cartesian stage: the model checked against this
        // digest at start, and the tool.
        conf.insert(
            "cartesian_model".into(),
            json!(cfg.resolve(&c.model).display().to_string()),
        );
        conf.insert("cartesian_model_sha256".into(), json!(c.model_sha256));
        conf.insert("cartesian_tool".into(), json!(c.tool));
    }
    conf.insert(
        "policy".into(),
        json!(format!("{:?}", cfg.policy.kind).to_lowercase()),
    );
    // The checkpoints the run's commands came from (the learner's record cites them):
    // the base's model digest and, with a residual in authority, the residual's.
    if let Some(m) = &cfg.policy.manifest {
        let path = cfg.resolve(m);
        if let Ok(sha) = crate::build::model_sha256(&path) {
            conf.insert("policy_manifest".into(), json!(path.display().to_string()));
            conf.insert("policy_model_sha256".into(), json!(sha));
            // In process the model file's digest is checked at load; a policy server
            // proved it unless `verify_model = false` let one through that could not.
            let verified = cfg.policy.remote.as_ref().is_none_or(|r| r.verify_model);
            conf.insert("policy_model_verified".into(), json!(verified));
        }
    }
    if let Some(r) = &cfg.policy.residual {
        let path = cfg.resolve(&r.manifest);
        if let Ok(sha) = crate::build::model_sha256(&path) {
            conf.insert(
                "residual_manifest".into(),
                json!(path.display().to_string()),
            );
            conf.insert("residual_model_sha256".into(), json!(sha));
        }
    }
    conf.insert("period_ms".into(), json!(cfg.control.period_ms));
    conf.insert(
        "chunk_period_ms".into(),
        json!(cfg.inference.chunk_period_ms),
    );
    conf.insert(
        "max_chunk_age_ms".into(),
        json!(cfg.executor.max_chunk_age_ms),
    );
    conf.insert("blend_ms".into(), json!(cfg.executor.blend_ms));
    conf.insert("joints".into(), json!(cfg.control.joints));
    if let Some(e) = &cfg.episodes {
        // The episodes' poses: the learner's record names each episode's goal by them.
        conf.insert("episodes".into(), json!(e));
    }
    conf
}
