//! The telemetry thread's state: drains the rings into histograms, counters and logs.

use crate::logfile::JsonlLog;
use crate::metrics::{Metric, MetricSet};
use crate::recording::Recorder;
use crate::records::{CycleRecord, EventRecord, InferRecord, InferStatus};
use crate::report::{summarize, HostInfo, Report, SCHEMA_VERSION};
use crate::rings::RingConsumers;
use chunkrt_core::gate::CONSTRAINT_COUNT;
use chunkrt_core::{Constraint, Intervention, Mode, MonoTime, MAX_DOF};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

/// Most skipped deadlines filled into the wake-latency histogram per cycle (a
/// 100 s stall at 1 ms); beyond, the oldest one (the maximum) still enters, and
/// `missed_cycles` counts them all.
const MAX_FILLED_IN: u64 = 100_000;
/// Most events kept in the report (all of them go to `events.jsonl`).
const MAX_REPORT_EVENTS: usize = 10_000;

pub use crate::names::{constraint_name, constraint_name_index, mode_from_u8, mode_name};

/// A run of identical gate interventions (same joint, same constraint, consecutive).
struct GateRun {
    constraint: Constraint,
    first: Intervention,
    last: Intervention,
    t_first: MonoTime,
    t_last: MonoTime,
    repeats: u64,
}

/// Drains the rings; owned by the telemetry thread.
pub struct Collector {
    metrics: MetricSet,
    period_ns: u64,
    t0: MonoTime,
    last_wake: Option<MonoTime>,
    counters: BTreeMap<&'static str, u64>,
    events: Vec<EventRecord>,
    /// Every ended episode (`[episodes]`), as the report's `episodes` lists them.
    episodes: Vec<serde_json::Value>,
    gate_log: Option<JsonlLog>,
    event_log: Option<JsonlLog>,
    /// Gate interventions (`repeats`) in the gate runs that the cap cut.
    gate_repeats_cut: u64,
    recorder: Option<Recorder>,
    gate_runs: [[Option<GateRun>; CONSTRAINT_COUNT]; MAX_DOF],
    last_event_t: Option<MonoTime>,
    last_mode: u8,
    last_chunk_seq: u64,
    /// The capture time of the last delivered camera frame.
    last_frame: Option<MonoTime>,
    /// The frame counter of the last frame the camera gave (delivered or withheld).
    last_camera_seq: Option<u64>,
    /// The synthetic scene's last target index seen.
    last_target: Option<u64>,
    max_track_err_rad: f64,
    /// Every record file that lost data: what, how much, and why.
    losses: Vec<RecordLoss>,
    /// The recording's write error was said (by [`Collector::new_log_error`]).
    recording_error_said: bool,
    oracle: Option<crate::oracle::CommandOracle>,
    /// The chunk age judged at the measured inference time (see [`crate::age_check`]).
    age_check: Option<crate::age_check::ChunkAgeCheck>,
    /// What the run should say on the console, not yet taken.
    warnings: Vec<String>,
    /// The run directory: the report names the recording's files relative to it.
    out_dir: Option<std::path::PathBuf>,
    /// Intervention records (`interventions/`), cut from a ring of recent cycles.
    interventions: Option<crate::interventions::InterventionLog>,
    /// The wear this run put on the arm (the report's `wear`, the wear ledger).
    wear: crate::wear::WearTally,
    /// Gate interventions per constraint (joint-cycles) from the cycle records: the
    /// live view's (the report's come from the gate itself).
    gate_counts: [u64; CONSTRAINT_COUNT],
    /// The last cycle's joints, drive states and thermal loads (the live view's).
    last_drives: (
        u16,
        [chunkrt_core::DriveState; MAX_DOF],
        chunkrt_core::JointVec,
    ),
}

/// `f` relative to `run_dir` when it lies inside it, else absolute.
fn record_path(f: &Path, run_dir: Option<&Path>) -> String {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    if let Some(dir) = run_dir {
        if let Ok(rel) = absolute(f).strip_prefix(absolute(dir)) {
            return rel.display().to_string();
        }
    }
    absolute(f).display().to_string()
}

impl Collector {
    /// A collector for a loop of period `period_ns` started at `t0`; with `out_dir`
    /// it writes `gate.jsonl` and `events.jsonl` there (see [`JsonlLog`]).
    pub fn new(period_ns: u64, t0: MonoTime, out_dir: Option<&Path>) -> std::io::Result<Self> {
        let open = |name: &str| -> std::io::Result<Option<JsonlLog>> {
            match out_dir {
                Some(d) => Ok(Some(JsonlLog::create(&d.join(name), u64::MAX)?)),
                None => Ok(None),
            }
        };
        let mut counters = BTreeMap::new();
        for k in [
            "cycles",
            "deadline_overruns",
            "missed_cycles",
            "chunks_published",
            "chunks_used",
            "inference_errors",
            "chunks_dropped_injected",
            "anytime_reduced",
            "out_of_domain",
            "fallback_entries",
            "ring_drops",
            "ring_drops_cycle",
            "ring_drops_infer",
            "ring_drops_event",
            "backend_errors",
            "gate_interventions",
            "chunks_rejected_logged",
            "gate_saturated",
            "feedback_held_cycles",
        ] {
            counters.insert(k, 0);
        }
        Ok(Collector {
            metrics: MetricSet::new(),
            period_ns,
            t0,
            last_wake: None,
            counters,
            events: Vec::with_capacity(MAX_REPORT_EVENTS),
            episodes: Vec::new(),
            gate_log: open("gate.jsonl")?,
            event_log: open("events.jsonl")?,
            gate_repeats_cut: 0,
            recorder: None,
            gate_runs: Default::default(),
            last_event_t: None,
            last_mode: u8::MAX,
            last_chunk_seq: 0,
            last_frame: None,
            last_camera_seq: None,
            last_target: None,
            max_track_err_rad: 0.0,
            losses: Vec::new(),
            recording_error_said: false,
            oracle: None,
            age_check: None,
            warnings: Vec::new(),
            out_dir: out_dir.map(Path::to_path_buf),
            interventions: None,
            wear: crate::wear::WearTally::default(),
            gate_counts: [0; CONSTRAINT_COUNT],
            last_drives: (
                0,
                [chunkrt_core::DriveState::default(); MAX_DOF],
                [f64::NAN; MAX_DOF],
            ),
        })
    }

    /// Writes intervention records into the run directory (see
    /// [`crate::interventions`]); without one, nothing.
    pub fn with_interventions(mut self, before_s: f64, after_s: f64, ring_cycles: usize) -> Self {
        self.interventions = self.out_dir.as_deref().map(|d| {
            crate::interventions::InterventionLog::new(d, self.t0, before_s, after_s, ring_cycles)
        });
        self
    }

    /// Judges the chunk age at the inference time the run measures (see
    /// [`crate::age_check`]); a shortfall becomes a warning ([`Self::take_warning`])
    /// and a `config_warning` event.
    pub fn set_chunk_age_check(&mut self, check: crate::age_check::ChunkAgeCheck) {
        self.age_check = Some(check);
    }

    /// A warning for the console, once each.
    pub fn take_warning(&mut self) -> Option<String> {
        (!self.warnings.is_empty()).then(|| self.warnings.remove(0))
    }

    /// Judges the command stream (see [`crate::oracle`]); its figures go into the
    /// report's `command_stream` block.
    pub fn set_command_oracle(&mut self, oracle: crate::oracle::CommandOracle) {
        self.oracle = Some(oracle);
    }

    /// Caps `gate.jsonl` at `bytes` (`telemetry.gate_log_max_mb`).
    pub fn with_gate_log_cap(mut self, bytes: u64) -> Self {
        if let Some(log) = &mut self.gate_log {
            log.set_cap(bytes);
        }
        self
    }

    /// Sends every recorded message to `sink` too (`[live_view]`); false when there is
    /// no recording to take them from.
    pub fn set_live_sink(&mut self, sink: Box<dyn crate::recording::LiveSink>) -> bool {
        match self.recorder.as_mut() {
            Some(r) => {
                r.set_live(sink);
                true
            }
            None => false,
        }
    }

    /// Records every cycle, inference call and event in `recorder` (MCAP).
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Drains the published chunks into the recording; returns how many it took.
    pub fn drain_chunks(&mut self, cons: &mut crate::rings::ChunkConsumer) -> usize {
        let mut n = 0;
        while let Some(c) = cons.pop() {
            if let Some(rec) = self.recorder.as_mut() {
                rec.chunk(&c);
            }
            n += 1;
        }
        self.counters.insert("ring_drops_chunk", cons.drops());
        n
    }

    /// Drains the camera ring: the camera's latency and frame interval, its counters,
    /// and an `events.jsonl` line each time the synthetic scene shows a new target.
    pub fn drain_camera(&mut self, cons: &mut crate::rings::CameraConsumer) -> usize {
        if let Some(images) = cons.images.as_mut() {
            while let Some(r) = images.pop() {
                if let Some(rec) = self.recorder.as_mut() {
                    rec.image(&r);
                }
            }
            self.counters.insert("ring_drops_image", images.drops());
        }
        // A run with a camera reports its counters even when they stay 0 (a budget
        // may hold them to 0).
        for k in [
            "camera_frames",
            "camera_errors",
            "camera_frames_withheld_injected",
            "camera_seq_gaps",
            "observations_stale_image",
        ] {
            self.counters.entry(k).or_insert(0);
        }
        let mut n = 0;
        while let Some(r) = cons.pop() {
            n += 1;
            match r.status {
                crate::records::CameraStatus::Error => {
                    self.bump("camera_errors", 1);
                    continue;
                }
                crate::records::CameraStatus::Withheld => {
                    self.bump("camera_frames_withheld_injected", 1);
                    self.camera_seq_gap(r.seq);
                    continue;
                }
                crate::records::CameraStatus::Published => {}
            }
            self.camera_seq_gap(r.seq);
            self.bump("camera_frames", 1);
            self.metrics.record(
                Metric::CameraLatency,
                r.t_ready.saturating_since(r.t_capture),
            );
            if let Some(t) = self.last_frame {
                self.metrics
                    .record(Metric::FrameInterval, r.t_capture.saturating_since(t));
            }
            self.last_frame = Some(r.t_capture);
            if r.target_uv[0].is_finite() && self.last_target != Some(r.target_index) {
                self.last_target = Some(r.target_index);
                self.counters
                    .insert("camera_targets_reached", r.target_index);
                let line = serde_json::json!({
                    "t_s": self.t_rel(r.t_capture),
                    "event": "camera_target",
                    "index": r.target_index,
                    "u": r.target_uv[0],
                    "v": r.target_uv[1],
                    "frame": r.seq,
                    "t_capture_ns": r.t_capture.as_ns(),
                });
                if let Some(rec) = self.recorder.as_mut() {
                    rec.event(&line);
                }
                self.write_line(LogFile::Event, &line);
            }
        }
        self.counters.insert("ring_drops_camera", cons.drops());
        n
    }

    /// Counts the frames the camera itself lost before frame `seq` (a gap in its frame
    /// counter; frames withheld by an injected stall carry their numbers and are no gap).
    fn camera_seq_gap(&mut self, seq: u64) {
        if let Some(prev) = self.last_camera_seq {
            self.bump("camera_seq_gaps", seq.saturating_sub(prev + 1));
        }
        self.last_camera_seq = Some(seq);
    }

    /// Writes the log lines queued so far; the telemetry thread calls it after each
    /// drain, so a killed run loses at most one drain interval of lines.
    pub fn flush_logs(&mut self) {
        for log in [self.gate_log.as_mut(), self.event_log.as_mut()]
            .into_iter()
            .flatten()
        {
            log.flush();
        }
    }

    /// A write error that has not been reported yet, one file's at a time (say it on
    /// stderr: the run goes on, the file's later lines or messages are counted as
    /// lost).
    pub fn new_log_error(&mut self) -> Option<String> {
        let log = [self.gate_log.as_mut(), self.event_log.as_mut()]
            .into_iter()
            .flatten()
            .find_map(|log| log.take_new_error().map(str::to_string));
        if log.is_some() || self.recording_error_said {
            return log;
        }
        let e = self.recorder.as_ref()?.error()?.to_string();
        self.recording_error_said = true;
        Some(e)
    }

    fn bump(&mut self, k: &'static str, by: u64) {
        *self.counters.entry(k).or_insert(0) += by;
    }

    fn t_rel(&self, t: MonoTime) -> f64 {
        t.diff_ns(self.t0) as f64 * 1e-9
    }

    /// Drains every ring; returns the number of records taken.
    pub fn drain(&mut self, cons: &mut RingConsumers) -> usize {
        let mut n = 0;
        while let Some(r) = cons.pop_infer() {
            self.on_infer(&r);
            n += 1;
        }
        while let Some(r) = cons.pop_cycle() {
            self.on_cycle(&r);
            n += 1;
        }
        while let Some(e) = cons.pop_event() {
            self.on_event(&e);
            n += 1;
        }
        let latest = self.last_event_t;
        self.flush_gate_runs_before(latest);
        self.counters.insert("ring_drops", cons.drops());
        // Per ring, so that each ring's records reconcile on their own
        // (e.g. `cycles_run = cycles + ring_drops_cycle`).
        self.counters.insert("ring_drops_cycle", cons.cycle_drops());
        self.counters.insert("ring_drops_infer", cons.infer_drops());
        self.counters.insert("ring_drops_event", cons.event_drops());
        n
    }

    fn on_cycle(&mut self, r: &CycleRecord) {
        self.bump("cycles", 1);
        self.wear.cycle(r);
        if let Some(log) = &mut self.interventions {
            log.cycle(r);
        }
        if let Some(o) = &mut self.oracle {
            o.cycle(r);
        }
        self.record_wake(r);
        self.metrics
            .record(Metric::CycleTime, r.t_cmd.saturating_since(r.t_wake));
        if r.t_fb > r.t_cmd {
            self.metrics
                .record(Metric::Exchange, r.t_fb.saturating_since(r.t_cmd));
        }
        if r.bus_rtt_ns > 0 {
            self.metrics.record(Metric::BusRtt, r.bus_rtt_ns);
        }
        if let Some(e) = r.sync_phase_ns {
            self.metrics
                .record(Metric::SyncPhase, u64::from(e.unsigned_abs()));
        }
        if r.chunk_seq != 0 {
            self.metrics.record(Metric::ChunkAge, r.chunk_age_ns);
            if r.chunk_seq != self.last_chunk_seq {
                self.bump("chunks_used", 1);
                self.last_chunk_seq = r.chunk_seq;
                self.metrics.record(Metric::HandoffLatency, r.handoff_ns);
            }
        }
        if r.e2e_ns > 0 {
            self.metrics.record(Metric::E2eLatency, r.e2e_ns);
        }
        if r.backend_error {
            self.bump("backend_errors", 1);
        }
        if r.fb_held {
            self.bump("feedback_held_cycles", 1);
        }
        if r.gate_mask != 0 {
            self.count_gate(r);
        }
        if r.track_err_rad.is_finite() && r.track_err_rad > self.max_track_err_rad {
            self.max_track_err_rad = r.track_err_rad;
        }
        self.last_mode = r.mode;
        self.last_drives = (r.dof, r.drive_state, r.thermal_load);
        if let Some(rec) = self.recorder.as_mut() {
            rec.cycle(r);
        }
    }

    /// The cycle's wake latency (and that of the deadlines it skipped), whether it
    /// overran, and the jitter of its period since the last wake.
    fn record_wake(&mut self, r: &CycleRecord) {
        let wake = r.t_wake.saturating_since(r.t_deadline);
        // Cycles that never ran count too (no coordinated omission): the `missed`
        // deadlines skipped before this cycle were first served by this wake, so each
        // enters at its true latency, this wake minus its own deadline.
        self.metrics.record(Metric::WakeLatency, wake);
        let missed = r.missed as u64;
        for j in 1..=missed.min(MAX_FILLED_IN) {
            self.metrics
                .record(Metric::WakeLatency, wake + j * self.period_ns);
        }
        if missed > MAX_FILLED_IN {
            self.metrics
                .record(Metric::WakeLatency, wake + missed * self.period_ns);
        }
        // An overrun: the cycle's work ended after the next deadline, or deadlines
        // were skipped before it.
        let next_deadline = r.t_deadline.add_ns(self.period_ns);
        if r.missed > 0 || r.t_done > next_deadline {
            self.bump("deadline_overruns", 1);
        }
        self.bump("missed_cycles", r.missed as u64);
        if let Some(prev) = self.last_wake {
            let actual = r.t_wake.saturating_since(prev);
            let nominal = self.period_ns * (1 + r.missed as u64);
            self.metrics
                .record(Metric::PeriodJitter, actual.abs_diff(nominal));
        }
        self.last_wake = Some(r.t_wake);
    }

    /// A cycle the gate acted in: counted, and per constraint on each joint it acted on.
    fn count_gate(&mut self, r: &CycleRecord) {
        self.bump("gate_interventions", 1);
        for bits in &r.gate_joint_mask[..(r.dof as usize).min(chunkrt_core::MAX_DOF)] {
            for (i, n) in self.gate_counts.iter_mut().enumerate() {
                *n += u64::from(bits >> i & 1);
            }
        }
    }

    /// A chunk refused at ingestion for a setpoint outside its joint's bounds: counted
    /// (the runtime replaces the count with the inference thread's own, which a full
    /// ring cannot lose) and said in the event log.
    fn out_of_bounds(&mut self, r: &InferRecord) {
        self.bump("chunks_out_of_bounds", 1);
        let o = r.out_of_bounds.unwrap_or_default();
        let t_s = self.t_rel(r.t_end);
        self.note(&serde_json::json!({
            "t_s": t_s,
            "event": "chunk_out_of_bounds",
            "row": o.row,
            "joint": o.joint,
            "value_rad": o.value_rad,
            "lo_rad": o.lo_rad,
            "hi_rad": o.hi_rad,
        }));
    }

    fn on_infer(&mut self, r: &InferRecord) {
        if r.status == InferStatus::Published {
            if let Some(o) = &mut self.oracle {
                o.chunk(r.candidates, r.seam_cost, r.seam_cost_first);
            }
            let latency_ms = r.t_end.saturating_since(r.t_obs) as f64 * 1e-6;
            if let Some(msg) = self
                .age_check
                .as_mut()
                .and_then(|c| c.published(latency_ms))
            {
                let t_s = self.t_rel(r.t_end);
                self.note(&serde_json::json!({
                    "t_s": t_s,
                    "event": "config_warning",
                    "key": "executor.max_chunk_age_ms",
                    "message": msg,
                }));
                self.warnings.push(msg);
            }
        }
        if let Some(rec) = self.recorder.as_mut() {
            rec.inference(r);
        }
        match r.status {
            InferStatus::Published => self.bump("chunks_published", 1),
            InferStatus::Failed => self.bump("inference_errors", 1),
            InferStatus::Dropped => self.bump("chunks_dropped_injected", 1),
            InferStatus::StaleImage => self.bump("observations_stale_image", 1),
            InferStatus::OutOfBounds => self.out_of_bounds(r),
        }
        if !matches!(
            r.status,
            InferStatus::Failed | InferStatus::StaleImage | InferStatus::OutOfBounds
        ) {
            self.metrics
                .record(Metric::InferenceLatency, r.t_end.saturating_since(r.t_obs));
        }
        // The age of observations inference ran on: a stale image (or none yet) gave no
        // chunk and is counted above instead.
        if r.status != InferStatus::StaleImage {
            self.metrics
                .record(Metric::ObsAge, r.t_begin.saturating_since(r.t_obs));
        }
        if r.step_ns > 0 {
            self.metrics.record(Metric::InferenceStep, r.step_ns);
        }
        // A chunk a policy server sampled: its round trip, and the server's own share.
        if r.remote_rtt_ns > 0 {
            self.metrics.record(Metric::NetworkRtt, r.remote_rtt_ns);
        }
        if r.server_ns > 0 {
            self.metrics.record(Metric::ServerTime, r.server_ns);
        }
        if r.reconnects > 0 {
            self.bump("policy_reconnects", u64::from(r.reconnects));
        }
        if r.steps < r.steps_nominal {
            self.bump("anytime_reduced", 1);
        }
        if r.out_of_domain {
            self.bump("out_of_domain", 1);
        }
    }

    /// An event the rings cannot carry (it holds text: a thread's panic, how a stop
    /// ended), written to `events.jsonl` and the recording's events, after the drains.
    pub fn note(&mut self, v: &serde_json::Value) {
        if let Some(rec) = self.recorder.as_mut() {
            rec.event(v);
        }
        self.write_line(LogFile::Event, v);
    }

    fn on_event(&mut self, e: &EventRecord) {
        if let Some(log) = &mut self.interventions {
            log.event(e);
        }
        self.wear.event(e);
        if self.recorder.is_some() {
            let v = self.event_json(e);
            if let Some(rec) = self.recorder.as_mut() {
                rec.event(&v);
            }
        }
        match e {
            EventRecord::Gate { t, intervention } => {
                self.last_event_t = Some(*t);
                self.on_gate(*t, *intervention);
                return;
            }
            EventRecord::Mode(m) if m.from == Mode::Playing => self.bump("fallback_entries", 1),
            EventRecord::Reject { .. } => self.bump("chunks_rejected_logged", 1),
            EventRecord::GateSaturated { .. } => self.bump("gate_saturated", 1),
            EventRecord::FollowingError { .. } => self.bump("following_errors", 1),
            EventRecord::OperatorStop { .. } => self.bump("operator_stops", 1),
            EventRecord::Episode(s) => {
                self.bump("episodes", 1);
                if s.breach.is_some() {
                    self.bump("residual_rollbacks", 1);
                }
                let line = crate::episodes::episode_json(s, |t| self.t_rel(t));
                self.episodes.push(line);
            }
            _ => {}
        }
        let value = self.event_json(e);
        self.write_line(LogFile::Event, &value);
        // The record, not its JSON, is kept for the report: the list is preallocated,
        // so a long run with many faults does not grow the process's memory.
        if self.events.len() < MAX_REPORT_EVENTS {
            self.events.push(*e);
        }
    }

    /// An event as a line of `events.jsonl` and an entry of the report.
    fn event_json(&self, e: &EventRecord) -> serde_json::Value {
        match e {
            EventRecord::Mode(m) => json!({
                "t_s": self.t_rel(m.t),
                "event": "mode",
                "from": mode_name(m.from),
                "to": mode_name(m.to),
                "reason": format!("{:?}", m.reason),
            }),
            EventRecord::Reject { t, seq, reason } => json!({
                "t_s": self.t_rel(*t),
                "event": "chunk_rejected",
                "seq": seq,
                "reason": format!("{reason:?}"),
            }),
            EventRecord::OperatorStop { t, signals } => json!({
                "t_s": self.t_rel(*t),
                "event": "operator_stop",
                "signals": signals,
            }),
            EventRecord::Episode(s) => crate::episodes::episode_json(s, |t| self.t_rel(t)),
            EventRecord::ForceTripwire {
                t,
                t_capture,
                force_n,
                limit_n,
            } => json!({
                "t_s": self.t_rel(*t),
                "event": "force_tripwire",
                "t_capture_s": self.t_rel(*t_capture),
                "force_n": force_n.is_finite().then_some(*force_n),
                "limit_n": limit_n,
            }),
            EventRecord::OperatorMark { t, count, episode } => json!({
                "t_s": self.t_rel(*t),
                "event": "operator_intervention",
                "marks": count,
                "episode": episode,
            }),
            EventRecord::Backend { t, error } => json!({
                "t_s": self.t_rel(*t),
                "event": "backend_error",
                "kind": error.name(),
                "detail": error.to_string(),
            }),
            EventRecord::Gate { t, intervention } => json!({
                "t_s": self.t_rel(*t),
                "event": "gate",
                "joint": intervention.joint,
                "constraint": constraint_name(intervention.constraint),
            }),
            EventRecord::FollowingError {
                t,
                joint,
                error_rad,
                limit_rad,
            } => json!({
                "t_s": self.t_rel(*t),
                "event": "following_error",
                "joint": joint,
                "error_rad": error_rad,
                "limit_rad": limit_rad,
            }),
            EventRecord::GateSaturated {
                t,
                joint,
                constraint,
                cycles,
            } => json!({
                "t_s": self.t_rel(*t),
                "event": "gate_saturated",
                "joint": joint,
                "constraint": constraint_name(*constraint),
                "cycles": cycles,
            }),
        }
    }

    /// One open run per joint and constraint: a run goes on while the same joint
    /// meets the same constraint on consecutive cycles, whatever the other joints do,
    /// so a gate that acts on several joints at once still writes one line per run.
    /// Every constraint in the intervention's mask counts: a joint rate-limited by
    /// acceleration and jerk in one cycle extends (or opens) a run of each, so the sum
    /// of `repeats` per constraint equals the report's per-constraint count.
    fn on_gate(&mut self, t: MonoTime, iv: Intervention) {
        let mask = if iv.mask.is_empty() {
            iv.constraint.bit()
        } else {
            iv.mask.0
        };
        for c in Constraint::ALL {
            if mask & c.bit() != 0 {
                self.on_gate_constraint(t, iv, c);
            }
        }
    }

    fn on_gate_constraint(&mut self, t: MonoTime, iv: Intervention, constraint: Constraint) {
        let j = (iv.joint as usize).min(MAX_DOF - 1);
        let c = (constraint as usize).min(CONSTRAINT_COUNT - 1);
        let gap_ns = self.period_ns + self.period_ns / 2;
        if let Some(run) = &mut self.gate_runs[j][c] {
            if t.saturating_since(run.t_last) <= gap_ns {
                run.last = iv;
                run.t_last = t;
                run.repeats += 1;
                return;
            }
        }
        self.flush_gate_run(j, c);
        self.gate_runs[j][c] = Some(GateRun {
            constraint,
            first: iv,
            last: iv,
            t_first: t,
            t_last: t,
            repeats: 1,
        });
    }

    /// Writes the runs that did not go on in the cycle before `t` (all with `None`).
    fn flush_gate_runs_before(&mut self, t: Option<MonoTime>) {
        let gap_ns = self.period_ns + self.period_ns / 2;
        for j in 0..MAX_DOF {
            for c in 0..CONSTRAINT_COUNT {
                let stale = match (&self.gate_runs[j][c], t) {
                    (Some(run), Some(t)) => t.saturating_since(run.t_last) > gap_ns,
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if stale {
                    self.flush_gate_run(j, c);
                }
            }
        }
    }

    fn flush_gate_run(&mut self, j: usize, c: usize) {
        if let Some(run) = self.gate_runs[j][c].take() {
            let v = json!({
                "t_s": self.t_rel(run.t_first),
                "t_last_s": self.t_rel(run.t_last),
                "joint": run.first.joint,
                "constraint": constraint_name(run.constraint),
                "binding": constraint_name(run.first.constraint),
                "proposed_rad": run.first.proposed_rad,
                "executed_rad": run.first.executed_rad,
                "last_proposed_rad": run.last.proposed_rad,
                "last_executed_rad": run.last.executed_rad,
                "repeats": run.repeats,
            });
            self.write_line(LogFile::Gate, &v);
        }
    }

    fn write_line(&mut self, which: LogFile, v: &serde_json::Value) {
        let w = match which {
            LogFile::Gate => self.gate_log.as_mut(),
            LogFile::Event => self.event_log.as_mut(),
        };
        if let Some(w) = w {
            let cut_before = w.counts().lines_cut;
            w.write_line(v);
            if w.counts().lines_cut > cut_before {
                self.gate_repeats_cut += v.get("repeats").and_then(|r| r.as_u64()).unwrap_or(1);
            }
        }
    }

    /// What the recording wrote and dropped, in the counters and a `recording` block.
    /// The intervention records still open written (the run ended), and the list in
    /// the report (`interventions`, counters `intervention_records` and
    /// `intervention_records_dropped`).
    fn intervention_summary(&mut self, report: &mut Report) {
        let Some(log) = &mut self.interventions else {
            return;
        };
        log.finish();
        let written = log.written().len() as u64;
        report
            .counters
            .insert("intervention_records".into(), written);
        report
            .counters
            .insert("intervention_records_dropped".into(), log.dropped);
        report
            .extra
            .insert("interventions".into(), json!(log.written()));
        if let Some(e) = &log.error {
            self.losses.push(RecordLoss {
                file: "interventions/".into(),
                unit: "records",
                lost: log.failed,
                of: written + log.failed,
                error: e.clone(),
            });
        }
    }

    fn recording_summary(&mut self, report: &mut Report) {
        let Some(rec) = self.recorder.take() else {
            return;
        };
        let s = rec.finish();
        let written: u64 = s.messages.values().sum();
        for (k, v) in [
            ("recording_messages", written),
            ("recording_dropped", s.dropped),
            ("recording_segments", s.files.len() as u64),
        ] {
            report.counters.insert(k.into(), v);
        }
        // Relative to the run directory when inside it, else absolute: the run directory
        // can be moved, archived and plotted from anywhere (a cwd-relative path, as a
        // relative `--out` gave, was joined to the run directory again and not found).
        let files: Vec<String> = s
            .files
            .iter()
            .map(|f| record_path(f, self.out_dir.as_deref()))
            .collect();
        report.extra.insert(
            "recording".into(),
            json!({
                "files": files,
                "messages": s.messages,
                "dropped": s.dropped,
                "bytes": s.bytes,
                "error": s.error,
            }),
        );
        if let Some(e) = s.error {
            let name = s.files.first().map_or_else(
                || "recording".to_string(),
                |f| record_path(f, self.out_dir.as_deref()),
            );
            self.losses.push(RecordLoss {
                file: name,
                unit: "messages",
                lost: s.dropped,
                of: written + s.dropped,
                error: e,
            });
        }
    }

    /// What the logs wrote, cut and lost, in the report's counters and `logs` block.
    fn log_summary(&mut self, report: &mut Report) {
        let mut block = serde_json::Map::new();
        for (name, key, log) in [
            ("gate.jsonl", "gate_log", self.gate_log.as_ref()),
            ("events.jsonl", "events_log", self.event_log.as_ref()),
        ] {
            let Some(log) = log else { continue };
            let c = log.counts();
            report
                .counters
                .insert(format!("{key}_lines_lost"), c.lines_lost);
            if key == "gate_log" {
                report
                    .counters
                    .insert("gate_log_lines_cut".into(), c.lines_cut);
                report
                    .counters
                    .insert("gate_log_repeats_cut".into(), self.gate_repeats_cut);
            }
            block.insert(
                name.into(),
                json!({
                    "lines": c.lines_written,
                    "bytes": c.bytes_written,
                    "lines_cut": c.lines_cut,
                    "lines_lost": c.lines_lost,
                    "error": log.error(),
                }),
            );
            if let Some(e) = log.error() {
                self.losses.push(RecordLoss {
                    file: name.into(),
                    unit: "lines",
                    lost: c.lines_lost,
                    of: c.lines_written + c.lines_lost,
                    error: e.to_string(),
                });
            }
        }
        if !block.is_empty() {
            report.extra.insert("logs".into(), block.into());
        }
    }

    /// A one-line live status.
    pub fn status_line(&self, now: MonoTime) -> String {
        let h = self.metrics.get(Metric::WakeLatency);
        let age = self.metrics.get(Metric::ChunkAge);
        format!(
            "t={:6.1}s cycles={} mode={} wake p99={:.0}us max={:.0}us chunk_age p50={:.1}ms chunks={} overruns={} drops={}",
            self.t_rel(now),
            self.counters["cycles"],
            if self.last_mode == u8::MAX { "-" } else { mode_name(mode_from_u8(self.last_mode)) },
            h.value_at_quantile(0.99) as f64 / 1e3,
            h.max() as f64 / 1e3,
            age.value_at_quantile(0.5) as f64 / 1e6,
            self.counters["chunks_published"],
            self.counters["deadline_overruns"],
            self.counters["ring_drops"],
        )
    }

    /// What a live reader sees now (`live`): counters, gate interventions per
    /// constraint, every stage's latency summary, the mode, the wear so far.
    pub fn live_snapshot(&self, now: MonoTime) -> crate::live::Snapshot {
        let dof = usize::from(self.last_drives.0).min(MAX_DOF);
        crate::live::Snapshot {
            t_s: self.t_rel(now),
            mode: (self.last_mode != u8::MAX).then(|| mode_name(mode_from_u8(self.last_mode))),
            ended: false,
            metrics: summarize(&self.metrics),
            counters: self
                .counters
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            gate: self
                .gate_counts
                .iter()
                .enumerate()
                .map(|(i, n)| (crate::names::constraint_name_index(i).to_string(), *n))
                .collect(),
            wear: self
                .wear
                .summary(0..self.wear.dof(), self.period_ns as f64 * 1e-9),
            drive_states: self.last_drives.1[..dof]
                .iter()
                .map(|s| crate::names::drive_state_name(*s))
                .collect(),
            thermal_load: self.last_drives.2[..dof]
                .iter()
                .copied()
                .filter(|l| l.is_finite())
                .collect(),
        }
    }

    /// The wear tallied so far.
    pub fn wear(&self) -> &crate::wear::WearTally {
        &self.wear
    }

    /// The histograms so far.
    pub fn metrics(&self) -> &MetricSet {
        &self.metrics
    }

    /// A counter's value.
    pub fn counter(&self, k: &str) -> u64 {
        self.counters.get(k).copied().unwrap_or(0)
    }

    /// Closes the logs and builds the report; with every record file that lost data
    /// named, with how much (also the report's `records_lost`), when any did.
    pub fn finish(mut self, host: HostInfo, duration_s: f64) -> (Report, Option<String>) {
        self.flush_gate_runs_before(None);
        self.flush_logs();
        let events = self.events.iter().map(|e| self.event_json(e)).collect();
        let mut report = Report {
            schema: SCHEMA_VERSION,
            chunkrt_version: env!("CARGO_PKG_VERSION").to_string(),
            host,
            duration_s,
            metrics: summarize(&self.metrics),
            counters: self
                .counters
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            events,
            ..Report::default()
        };
        report.extra.insert(
            "tracking".into(),
            json!({ "max_err_rad": self.max_track_err_rad }),
        );
        if let Some(o) = &self.oracle {
            report.extra.insert("command_stream".into(), o.summary());
        }
        if !self.episodes.is_empty() {
            let episodes = std::mem::take(&mut self.episodes);
            report
                .extra
                .insert("episodes".into(), crate::episodes::summary_json(&episodes));
        }
        self.log_summary(&mut report);
        self.recording_summary(&mut report);
        self.intervention_summary(&mut report);
        if self.losses.is_empty() {
            return (report, None);
        }
        report.extra.insert(
            "records_lost".into(),
            json!(self
                .losses
                .iter()
                .map(|l| json!({
                    "file": l.file,
                    "lost": l.lost,
                    "of": l.of,
                    "unit": l.unit,
                    "error": l.error,
                }))
                .collect::<Vec<_>>()),
        );
        let said: Vec<String> = self.losses.iter().map(RecordLoss::to_string).collect();
        (report, Some(said.join("; ")))
    }
}

/// A record file that lost data to a failed write (a full disk): its name, what
/// it lost of what was offered to it, and the first error.
struct RecordLoss {
    file: String,
    /// `lines` or `messages`.
    unit: &'static str,
    lost: u64,
    of: u64,
    error: String,
}

impl std::fmt::Display for RecordLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} of {} {} lost ({})",
            self.file, self.lost, self.of, self.unit, self.error
        )
    }
}

enum LogFile {
    Gate,
    Event,
}

#[cfg(test)]
mod gate_log_tests {
    use super::*;
    use crate::rings::rings;
    use crate::EventRecord;

    #[test]
    fn every_skipped_deadline_enters_the_wake_latency_at_its_true_latency() {
        // A 20 ms loop: cycle 1's work overran by two and a half periods, so the loop
        // skipped the deadlines at 40 and 60 ms and next woke 30 us after 80 ms. The
        // arm got no command between 20 ms and 80.03 ms: the skipped deadlines waited
        // 40.03 and 20.03 ms. Then a wake 45 ms late with nothing skipped before it.
        let p = 20_000_000u64;
        let mut c = Collector::new(p, MonoTime::ZERO, None).unwrap();
        let (mut cp, _ep, _ip, mut cons) = rings(64);
        let rec = |cycle: u64, deadline: u64, late: u64, done: u64, missed: u32| CycleRecord {
            cycle,
            t_deadline: MonoTime(deadline),
            t_wake: MonoTime(deadline + late),
            t_cmd: MonoTime(deadline + late + 5_000),
            t_done: MonoTime(done),
            missed,
            ..CycleRecord::default()
        };
        cp.push(rec(0, p, 30_000, p + 100_000, 0));
        cp.push(rec(1, 2 * p, 30_000, 2 * p + 50_000_000, 0));
        cp.push(rec(2, 5 * p, 30_000, 5 * p + 100_000, 2));
        cp.push(rec(3, 6 * p, 45_000_000, 6 * p + 45_100_000, 0));
        c.drain(&mut cons);
        let h = c.metrics().get(Metric::WakeLatency);
        let mut seen: Vec<u64> = h
            .iter_recorded()
            .flat_map(|v| std::iter::repeat_n(v.value_iterated_to(), v.count_at_value() as usize))
            .collect();
        seen.sort_unstable();
        let expect = [30_000, 30_000, 30_000, 45_000_000, 20_030_000, 40_030_000];
        assert_eq!(seen.len(), expect.len(), "{seen:?}");
        let mut expect = expect.to_vec();
        expect.sort_unstable();
        for (v, e) in seen.iter().zip(&expect) {
            assert!(h.equivalent(*v, *e), "{seen:?} vs {expect:?}");
        }
        assert_eq!(c.counter("missed_cycles"), 2);
    }

    #[test]
    fn interleaved_joints_collapse_into_one_line_per_run() {
        let dir = std::env::temp_dir().join(format!("chunkrt-gate-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let period = 20_000_000;
        let mut c = Collector::new(period, MonoTime::ZERO, Some(&dir)).unwrap();
        let (_cp, mut ep, _ip, mut cons) = rings(4096);
        let iv = |joint, constraint: Constraint| Intervention {
            joint,
            constraint,
            mask: chunkrt_core::GateMask(constraint.bit()),
            proposed_rad: 1.0,
            executed_rad: 0.9,
        };
        // Joints 0 and 3 both rate-limited for 100 cycles, drained now and then;
        // then a pause, then joint 0 again: three runs.
        for k in 0..100u64 {
            let t = MonoTime(1 + k * period);
            ep.push(EventRecord::Gate {
                t,
                intervention: iv(0, Constraint::Acceleration),
            });
            ep.push(EventRecord::Gate {
                t,
                intervention: iv(3, Constraint::Acceleration),
            });
            if k % 7 == 0 {
                c.drain(&mut cons);
            }
        }
        ep.push(EventRecord::Gate {
            t: MonoTime(1 + 300 * period),
            intervention: iv(0, Constraint::Acceleration),
        });
        c.drain(&mut cons);
        let _ = c.finish(HostInfo::default(), 1.0);
        let text = std::fs::read_to_string(dir.join("gate.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        let repeats: Vec<u64> = lines
            .iter()
            .map(|l| l["repeats"].as_u64().unwrap())
            .collect();
        assert_eq!(repeats.iter().sum::<u64>(), 201);
        assert!(repeats.contains(&100) && repeats.contains(&1));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
