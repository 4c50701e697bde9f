//! The full-rate recording: every cycle, inference call and event of a run in MCAP
//! (`recording.mcap` in the output directory), written by the telemetry thread from
//! what it drains; the control thread never waits on it.
//!
//! Messages are JSON with a JSON-schema per channel (`/chunkrt/cycle`,
//! `/chunkrt/inference`, `/chunkrt/events`), which Foxglove and PlotJuggler open
//! without plug-ins. Log and publish times are `CLOCK_MONOTONIC` nanoseconds; the
//! `chunkrt.clock` metadata record gives the wall-clock offset. The recording is
//! split into segments (`recording.mcap`, `recording.1.mcap`, ...) by size and by
//! duration, and stops at a total size; what it could not write is counted.
//!
//! A message counts as written once the flush that carries it to the file
//! succeeded (at least every [`FLUSH_EVERY_NS`] of log time, and when a segment is
//! closed). A write that fails (a full disk) cuts the segment back to its last
//! successful flush, so the file holds exactly the messages counted as written,
//! every record whole (read as a recording cut short); the messages after it are
//! counted as dropped.

use crate::names::mode_name;
use crate::records::{CycleRecord, InferRecord, InferStatus};
use chunkrt_core::MonoTime;
use mcap::records::{MessageHeader, Metadata};
use serde_json::json;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Topic of the per-cycle messages.
pub const TOPIC_CYCLE: &str = "/chunkrt/cycle";
/// Topic of the per-inference-call messages.
pub const TOPIC_INFERENCE: &str = "/chunkrt/inference";
/// Topic of the events (the lines of `events.jsonl`).
pub const TOPIC_EVENTS: &str = "/chunkrt/events";
/// Topic of the published chunks.
pub const TOPIC_CHUNK: &str = "/chunkrt/chunk";
/// Topic of the camera images the policy is given (`foxglove.CompressedImage`, PNG).
pub const TOPIC_IMAGE: &str = "/chunkrt/image";
const N_TOPICS: usize = 5;
const TOPICS: [&str; N_TOPICS] = [
    TOPIC_CYCLE,
    TOPIC_INFERENCE,
    TOPIC_EVENTS,
    TOPIC_CHUNK,
    TOPIC_IMAGE,
];

/// Bytes an MCAP message record adds to its payload (opcode, length, header).
const MESSAGE_OVERHEAD: u64 = 1 + 8 + 2 + 4 + 8 + 8;

/// The open chunk is written out at least this often (log time): a killed run keeps
/// all but the last second, readable by a streaming reader.
const FLUSH_EVERY_NS: u64 = 1_000_000_000;

/// How big and how long a recording may grow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordingLimits {
    /// A segment is closed and the next one started past this many bytes.
    pub segment_bytes: u64,
    /// ... or past this much monotonic time since the segment's first message.
    pub segment_ns: u64,
    /// Nothing more is written past this many bytes in all (counted as dropped).
    pub total_bytes: u64,
}

/// Where the recording's clock stands against the wall clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockInfo {
    /// The run's start on `CLOCK_MONOTONIC`.
    pub t0: MonoTime,
    /// Wall clock (Unix time, ns) minus `CLOCK_MONOTONIC` (ns), taken at start.
    pub wall_minus_mono_ns: i64,
}

/// JSON has no NaN: a non-finite value (a NaN measurement) is written as null.
fn finite(v: &[f64]) -> Vec<Option<f64>> {
    v.iter().map(|x| x.is_finite().then_some(*x)).collect()
}

/// `e` with its causes: mcap's own text ("I/O error from writing, ...") hides the
/// OS error ("No space left on device") in its source.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// What a recording wrote and dropped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordingSummary {
    /// Segment files, in order.
    pub files: Vec<PathBuf>,
    /// Messages written per topic (on disk: their flush succeeded).
    pub messages: BTreeMap<&'static str, u64>,
    /// Messages not written (total size reached, or a write failed: then also the
    /// messages since the last successful flush, cut from the file).
    pub dropped: u64,
    /// Bytes written (estimated from the payloads), all segments.
    pub bytes: u64,
    /// The first error, if any.
    pub error: Option<String>,
}

impl RecordingSummary {
    /// `messages` (per channel) of `bytes` in all reached the file.
    fn count_written(&mut self, messages: [u64; N_TOPICS], bytes: u64) {
        for (topic, n) in TOPICS.iter().zip(messages) {
            if n > 0 {
                *self.messages.entry(topic).or_insert(0) += n;
            }
        }
        self.bytes += bytes;
    }
}

struct Segment {
    writer: mcap::Writer<BufWriter<File>>,
    /// The same file, to read its length and cut it back after a failed write.
    file: File,
    /// The file's length after the last successful flush: every record before it
    /// is whole.
    flushed_len: u64,
    /// Messages (per topic) and bytes since the last successful flush.
    pending: [u64; N_TOPICS],
    pending_bytes: u64,
    channels: [Option<u16>; N_TOPICS],
    bytes: u64,
    t_first: Option<MonoTime>,
    t_flushed: Option<MonoTime>,
}

impl Segment {
    /// The file's length now that a flush succeeded: the pending messages are on
    /// disk.
    fn flushed(&mut self, summary: &mut RecordingSummary) -> std::io::Result<()> {
        self.flushed_len = self.file.metadata()?.len();
        summary.count_written(self.pending, self.pending_bytes);
        self.pending = [0; N_TOPICS];
        self.pending_bytes = 0;
        Ok(())
    }

    /// Writes the summary and footer and flushes them: the pending messages are on
    /// disk. On failure the segment is abandoned (see [`Segment::abandon`]).
    fn close(mut self, summary: &mut RecordingSummary) -> Result<(), String> {
        if let Err(e) = self.writer.finish() {
            self.abandon(summary);
            return Err(with_causes(&e));
        }
        // finish() leaves its last bytes in the BufWriter.
        let Segment {
            writer,
            file,
            pending,
            pending_bytes,
            flushed_len,
            ..
        } = self;
        let mut buffered = writer.into_inner();
        if let Err(e) = buffered.flush() {
            let (unflushed, _) = buffered.into_parts();
            drop(unflushed);
            let _ = file.set_len(flushed_len);
            summary.dropped += pending.iter().sum::<u64>();
            return Err(with_causes(&e));
        }
        summary.count_written(pending, pending_bytes);
        Ok(())
    }

    /// After a failed write: the writer is taken apart without writing anything
    /// more, the file cut back to its last successful flush (shrinking a file needs
    /// no free space) and the messages since counted as dropped.
    fn abandon(self, summary: &mut RecordingSummary) {
        let (file, _unwritten) = self.writer.into_inner().into_parts();
        drop(file);
        let _ = self.file.set_len(self.flushed_len);
        summary.dropped += self.pending.iter().sum::<u64>();
    }
}

/// Writes the recording; owned by the telemetry thread.
pub struct Recorder {
    /// Where every message also goes as it is written (`[live_view]`), disk or not.
    live: Option<Box<dyn LiveSink>>,
    base: PathBuf,
    limits: RecordingLimits,
    clock: ClockInfo,
    segment: Option<Segment>,
    summary: RecordingSummary,
    /// Bytes accepted so far (written or pending), against `limits.total_bytes`.
    accepted_bytes: u64,
    sequence: u32,
    full: bool,
    /// A camera image's PNG, reused from image to image.
    png: Vec<u8>,
    /// An image was written: every segment from then on has the image channel.
    images: bool,
}

const CYCLE_SCHEMA: &str = r#"{
  "title": "chunkrt.Cycle", "type": "object",
  "properties": {
    "t_s": {"type": "number", "description": "wake time, s since the run's start"},
    "cycle": {"type": "integer"},
    "mode": {"type": "string"},
    "mode_id": {"type": "integer"},
    "gate_mask": {"type": "integer", "description": "bit i: constraint i acted"},
    "episode": {"type": "integer", "description": "with [episodes]: the episode the command was made in"},
    "phase": {"type": "string", "description": "with [episodes]: reset, running or done when the command was made"},
    "gate_mask_joints": {"type": "array", "items": {"type": "integer"}, "description": "per joint, the constraints that acted on it (present where gate_mask is not 0)"},
    "chunk_seq": {"type": "integer"},
    "chunk_age_ms": {"type": "number"},
    "wake_latency_us": {"type": "number"},
    "cycle_time_us": {"type": "number"},
    "exchange_us": {"type": "number", "description": "command handed to the backend -> its feedback back"},
    "missed": {"type": "integer"},
    "bus_rtt_us": {"type": "number"},
    "sync0_phase_us": {"type": "number", "description": "with DC: the frame's arrival at the reference clock - (SYNC0 + shift), us, positive late; absent without DC or without a reply"},
    "backend_error": {"type": "boolean"},
    "feedback_held": {"type": "boolean", "description": "some joint was not measured this cycle (a frame lost and ridden through, a bus error, a drive out of OP): feedback_rad holds its last measurement"},
    "track_err_rad": {"type": "number"},
    "t_deadline_ns": {"type": "integer", "description": "the cycle's deadline, CLOCK_MONOTONIC ns"},
    "setpoint_rad": {"type": "array", "items": {"type": "number"}, "description": "the proposal per joint (the base's plus the residual's correction, after the action filter), what the permission gate was given"},
    "base_rad": {"type": "array", "items": {"type": "number"}, "description": "with a residual policy: the base policy's own setpoint per joint"},
    "residual_rad": {"type": "array", "items": {"type": "number"}, "description": "with a residual policy: the correction the residual gate let through, added to base_rad"},
    "command_rad": {"type": "array", "items": {"type": "number"}, "description": "the command after the gate, as the backend received it"},
    "feedback_rad": {"type": "array", "items": {"type": "number"}, "description": "the measured positions"},
    "feedback_torque_nm": {"type": "array", "items": {"type": "number"}, "description": "the torques the drives report (0x6077; 0 where the backend measures none)"},
    "force_n": {"type": "array", "items": {"type": ["number", "null"]}, "description": "where the backend has a wrist force/torque sensor: the force the world exerts on the tool, N, base frame x y z"},
    "wrist_torque_nm": {"type": "array", "items": {"type": ["number", "null"]}, "description": "with force_n: the torque about the sensor's origin, N m, base frame"},
    "force_age_ms": {"type": "number", "description": "with force_n: the reading's age at the cycle's deadline"}
  }
}"#;

const INFERENCE_SCHEMA: &str = r#"{
  "title": "chunkrt.Inference", "type": "object",
  "properties": {
    "t_s": {"type": "number", "description": "end of the call, s since the run's start"},
    "seq": {"type": "integer"},
    "status": {"type": "string", "description": "published, failed, dropped (injected) or stale_image"},
    "t_obs_s": {"type": "number", "description": "capture of the observation's oldest part (the camera image when there is one)"},
    "t_image_s": {"type": ["number", "null"], "description": "capture of the camera image, null without a camera"},
    "image_seq": {"type": "integer", "description": "the camera's frame counter of that image (0: none)"},
    "t_begin_s": {"type": "number"},
    "latency_ms": {"type": "number", "description": "observation to chunk"},
    "steps": {"type": "integer"},
    "steps_nominal": {"type": "integer"},
    "out_of_domain": {"type": "boolean"},
    "candidates": {"type": "integer", "description": "candidate chunks drawn (0 or 1: no selection)"},
    "chosen": {"type": "integer", "description": "the candidate published, its index among those drawn"},
    "goal": {"type": ["integer", "null"], "description": "the goal (index in the policy's goal list) the chunk was computed toward; null: no goal list"},
    "network_rtt_ms": {"type": ["number", "null"], "description": "a policy server's chunk: request sent to reply read; null: sampled in this process"},
    "server_ms": {"type": ["number", "null"], "description": "the policy server's own time for it, as it said; null: not said or sampled here"},
    "obs": {"type": "object", "description": "the observation the policy was given: seq (its cycle), t_capture_s, t_cycle_s, per joint pos_rad and vel_rad_s (measured), cmd_pos_rad and cmd_vel_rad_s (the gate's commanded state), plan_pos_rad and plan_vel_rad_s (the trajectory being played)"}
  }
}"#;

const EVENT_SCHEMA: &str = r#"{
  "title": "chunkrt.Event", "type": "object",
  "properties": {
    "t_s": {"type": "number"},
    "event": {"type": "string", "description": "mode, chunk_rejected, backend_error, gate, ..."}
  }
}"#;

const CHUNK_SCHEMA: &str = r#"{
  "title": "chunkrt.Chunk", "type": "object",
  "properties": {
    "t_s": {"type": "number", "description": "publish time, s since the run's start"},
    "seq": {"type": "integer"},
    "t_obs_s": {"type": "number"},
    "t_start_s": {"type": "number", "description": "time of setpoint 0"},
    "dt_ms": {"type": "number", "description": "setpoint period"},
    "len": {"type": "integer"},
    "dof": {"type": "integer"},
    "sampler_steps": {"type": "integer"},
    "out_of_domain": {"type": "boolean"},
    "pos_rad": {"type": "array", "description": "len setpoints of dof joint positions",
                "items": {"type": "array", "items": {"type": "number"}}}
  }
}"#;

const IMAGE_SCHEMA: &str = r#"{
  "title": "foxglove.CompressedImage", "type": "object",
  "properties": {
    "timestamp": {"type": "object", "description": "capture time, CLOCK_MONOTONIC",
                  "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
    "frame_id": {"type": "string"},
    "data": {"type": "string", "contentEncoding": "base64", "description": "the image as the policy is given it (the model's size), PNG"},
    "format": {"type": "string"},
    "seq": {"type": "integer", "description": "the camera's frame counter (an inference message's image_seq names it)"},
    "t_s": {"type": "number", "description": "capture time, s since the run's start"}
  }
}"#;

/// A live view of the recording (`[live_view]`): each message as the recording has it
/// (its topic, its log time on `CLOCK_MONOTONIC` in ns, its JSON), on the telemetry
/// thread as it is written; the sink decides what it forwards and must not block.
pub trait LiveSink: Send {
    /// One message.
    fn publish(&mut self, topic: &'static str, log_time_ns: u64, json: &[u8]);
}

/// Every topic of the recording with its schema's name and its JSON Schema (encoding
/// `jsonschema`, messages `json`): what a live view advertises.
pub fn channels() -> impl Iterator<Item = (&'static str, &'static str, &'static str)> {
    TOPICS
        .iter()
        .zip(SCHEMAS)
        .map(|(topic, (name, schema))| (*topic, name, schema))
}

/// The topics' schemas, in [`TOPICS`]' order.
const SCHEMAS: [(&str, &str); N_TOPICS] = [
    ("chunkrt.Cycle", CYCLE_SCHEMA),
    ("chunkrt.Inference", INFERENCE_SCHEMA),
    ("chunkrt.Event", EVENT_SCHEMA),
    ("chunkrt.Chunk", CHUNK_SCHEMA),
    ("foxglove.CompressedImage", IMAGE_SCHEMA),
];

/// Adds topic `i`'s schema and channel to `writer`; its channel id.
fn add_channel(
    writer: &mut mcap::Writer<BufWriter<File>>,
    i: usize,
) -> Result<u16, mcap::McapError> {
    let (name, schema) = SCHEMAS[i];
    let schema_id = writer.add_schema(name, "jsonschema", schema.as_bytes())?;
    writer.add_channel(schema_id, TOPICS[i], "json", &BTreeMap::new())
}

/// A recording segment that could not be started: the file and the cause (with the
/// OS error the mcap writer wraps).
#[derive(Debug, thiserror::Error)]
#[error("recording {}: {cause}", .file.display())]
pub struct RecordingError {
    /// The segment's file.
    pub file: PathBuf,
    /// What failed, with its causes.
    pub cause: String,
}

impl Recorder {
    /// A recording whose first segment is `path` (`recording.mcap`); later segments
    /// insert their number before the extension.
    pub fn create(
        path: &Path,
        limits: RecordingLimits,
        clock: ClockInfo,
    ) -> Result<Self, RecordingError> {
        let mut r = Recorder {
            live: None,
            base: path.to_path_buf(),
            limits,
            clock,
            segment: None,
            summary: RecordingSummary::default(),
            accepted_bytes: 0,
            sequence: 0,
            full: false,
            png: Vec::new(),
            images: false,
        };
        r.open_segment()?;
        Ok(r)
    }

    fn segment_path(&self, n: usize) -> PathBuf {
        if n == 0 {
            return self.base.clone();
        }
        let stem = self
            .base
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.base.with_file_name(format!("{stem}.{n}.mcap"))
    }

    fn open_segment(&mut self) -> Result<(), RecordingError> {
        let path = self.segment_path(self.summary.files.len());
        let opened = self.start_segment(&path);
        if opened.is_err() && std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
            // Nothing of it is readable: no empty or half-written segment is left
            // (a regular file only: `--record` may name a device).
            let _ = std::fs::remove_file(&path);
        }
        let mut seg = opened?;
        seg.flushed(&mut self.summary).map_err(|e| RecordingError {
            file: path.clone(),
            cause: e.to_string(),
        })?;
        self.summary.files.push(path);
        self.segment = Some(seg);
        Ok(())
    }

    /// A new segment at `path`: header, schemas, channels and the clock metadata,
    /// flushed.
    fn start_segment(&self, path: &Path) -> Result<Segment, RecordingError> {
        let err = |e: &dyn std::error::Error| RecordingError {
            file: path.to_path_buf(),
            cause: with_causes(e),
        };
        let file = File::create(path).map_err(|e| err(&e))?;
        let watch = file.try_clone().map_err(|e| err(&e))?;
        let mut writer = mcap::WriteOptions::new()
            .library(format!("chunkrt {}", env!("CARGO_PKG_VERSION")))
            .create(BufWriter::new(file))
            .map_err(|e| err(&e))?;
        let mut channels = [None; N_TOPICS];
        // The image channel only once a run has images (a run without a camera has
        // none, not an empty one).
        let n = if self.images { N_TOPICS } else { N_TOPICS - 1 };
        for (i, slot) in channels.iter_mut().enumerate().take(n) {
            *slot = Some(add_channel(&mut writer, i).map_err(|e| err(&e))?);
        }
        let clock = BTreeMap::from([
            ("clock".to_string(), "CLOCK_MONOTONIC".to_string()),
            ("t0_mono_ns".to_string(), self.clock.t0.0.to_string()),
            (
                "wall_minus_mono_ns".to_string(),
                self.clock.wall_minus_mono_ns.to_string(),
            ),
            ("segment".to_string(), self.summary.files.len().to_string()),
        ]);
        writer
            .write_metadata(&Metadata {
                name: "chunkrt.clock".into(),
                metadata: clock,
            })
            .map_err(|e| err(&e))?;
        writer.flush().map_err(|e| err(&e))?;
        Ok(Segment {
            writer,
            file: watch,
            flushed_len: 0,
            pending: [0; N_TOPICS],
            pending_bytes: 0,
            channels,
            bytes: 0,
            t_first: None,
            t_flushed: None,
        })
    }

    /// Writes the segment's summary and footer; on failure it is cut back to its
    /// last flush.
    fn close_segment(&mut self) {
        let Some(seg) = self.segment.take() else {
            return;
        };
        let path = self.segment_path(self.summary.files.len() - 1);
        if let Err(e) = seg.close(&mut self.summary) {
            self.fail(format!("recording {}: closing it: {e}", path.display()));
        }
    }

    /// A write to the open segment failed: it is cut back to its last flush, and
    /// nothing more is written.
    fn abandon_segment(&mut self, e: String) {
        if let Some(seg) = self.segment.take() {
            seg.abandon(&mut self.summary);
        }
        self.fail(e);
    }

    fn fail(&mut self, e: String) {
        self.summary.error.get_or_insert(e);
        self.full = true;
    }

    fn t_rel(&self, t: MonoTime) -> f64 {
        t.diff_ns(self.clock.t0) as f64 * 1e-9
    }

    /// Writes one message on channel `which` (0 cycle, 1 inference, 2 events).
    fn write(&mut self, which: usize, t: MonoTime, v: &serde_json::Value) {
        if self.full && self.live.is_none() {
            self.summary.dropped += 1;
            return;
        }
        let data = v.to_string().into_bytes();
        if let Some(live) = self.live.as_mut() {
            live.publish(TOPICS[which], t.0, &data);
        }
        if self.full {
            self.summary.dropped += 1;
            return;
        }
        let size = data.len() as u64 + MESSAGE_OVERHEAD;
        if self.accepted_bytes + size > self.limits.total_bytes {
            self.full = true;
            self.summary.dropped += 1;
            return;
        }
        let rotate = self.segment.as_ref().is_some_and(|s| {
            s.bytes > 0
                && (s.bytes + size > self.limits.segment_bytes
                    || s.t_first
                        .is_some_and(|t0| t.saturating_since(t0) >= self.limits.segment_ns))
        });
        if rotate {
            self.close_segment();
            if let Err(e) = self.open_segment() {
                self.fail(e.to_string());
            }
        }
        let Some(seg) = self.segment.as_mut() else {
            self.summary.dropped += 1;
            return;
        };
        let channel = match seg.channels[which] {
            Some(c) => Ok(c),
            None => add_channel(&mut seg.writer, which).inspect(|c| seg.channels[which] = Some(*c)),
        };
        let channel = match channel {
            Ok(c) => c,
            Err(e) => {
                self.summary.dropped += 1;
                let e = format!("recording {}: {}", self.base.display(), with_causes(&e));
                self.abandon_segment(e);
                return;
            }
        };
        self.sequence = self.sequence.wrapping_add(1);
        let header = MessageHeader {
            channel_id: channel,
            sequence: self.sequence,
            log_time: t.0,
            publish_time: t.0,
        };
        if let Err(e) = seg.writer.write_to_known_channel(&header, &data) {
            self.summary.dropped += 1;
            let e = format!("recording {}: {}", self.base.display(), with_causes(&e));
            self.abandon_segment(e);
            return;
        }
        seg.bytes += size;
        seg.pending[which] += 1;
        seg.pending_bytes += size;
        self.accepted_bytes += size;
        seg.t_first.get_or_insert(t);
        let since = t.saturating_since(*seg.t_flushed.get_or_insert(t));
        if since >= FLUSH_EVERY_NS {
            seg.t_flushed = Some(t);
            let flushed = seg.writer.flush().map_err(|e| with_causes(&e));
            if let Err(e) =
                flushed.and_then(|()| seg.flushed(&mut self.summary).map_err(|e| with_causes(&e)))
            {
                let e = format!("recording {}: {e}", self.base.display());
                self.abandon_segment(e);
            }
        }
    }

    /// One control cycle.
    pub fn cycle(&mut self, r: &CycleRecord) {
        let v = cycle_json(r, self.t_rel(r.t_wake));
        self.write(0, r.t_wake, &v);
    }
}

/// A control cycle as the recording's `cycle` channel writes it (and an intervention
/// record's lines); `t_s`: its wake, in seconds from the run's start.
pub(crate) fn cycle_json(r: &CycleRecord, t_s: f64) -> serde_json::Value {
    let mode = crate::collector::mode_from_u8(r.mode);
    let dof = (r.dof as usize).min(r.cmd_pos_rad.len());
    let mut v = json!({
        "t_s": t_s,
        "cycle": r.cycle,
        "mode": mode_name(mode),
        "mode_id": r.mode,
        "gate_mask": r.gate_mask,
        "chunk_seq": r.chunk_seq,
        "chunk_age_ms": r.chunk_age_ns as f64 * 1e-6,
        "wake_latency_us": r.t_wake.saturating_since(r.t_deadline) as f64 * 1e-3,
        "cycle_time_us": r.t_cmd.saturating_since(r.t_wake) as f64 * 1e-3,
        "exchange_us": r.t_fb.saturating_since(r.t_cmd) as f64 * 1e-3,
        "missed": r.missed,
        "bus_rtt_us": r.bus_rtt_ns as f64 * 1e-3,
        "backend_error": r.backend_error,
        "feedback_held": r.fb_held,
        "track_err_rad": if r.track_err_rad.is_finite() { r.track_err_rad } else { -1.0 },
        "t_deadline_ns": r.t_deadline.as_ns(),
        "setpoint_rad": finite(&r.setpoint_pos_rad[..dof]),
        "command_rad": finite(&r.cmd_pos_rad[..dof]),
        "feedback_rad": finite(&r.fb_pos_rad[..dof]),
        "feedback_torque_nm": finite(&r.fb_torque_nm[..dof]),
    });
    if let Some(w) = &r.wrench {
        v["force_n"] = json!(finite(&w.force_n));
        v["wrist_torque_nm"] = json!(finite(&w.torque_nm));
        v["force_age_ms"] = json!(r.t_deadline.saturating_since(w.t_capture) as f64 * 1e-6);
    }
    if let Some(e) = r.sync_phase_ns {
        v["sync0_phase_us"] = json!(f64::from(e) * 1e-3);
    }
    if r.gate_mask != 0 {
        v["gate_mask_joints"] = json!(&r.gate_joint_mask[..dof]);
    }
    if let Some(t) = r.episode {
        v["episode"] = json!(t.index);
        v["phase"] = json!(match t.phase {
            chunkrt_core::Phase::Reset => "reset",
            chunkrt_core::Phase::Running => "running",
            chunkrt_core::Phase::Done => "done",
        });
    }
    if r.residual {
        v["base_rad"] = json!(finite(&r.base_pos_rad[..dof]));
        v["residual_rad"] = json!(finite(&r.residual_rad[..dof]));
    }
    v
}

impl Recorder {
    /// What the policy was given, as JSON.
    fn observation(&self, o: &chunkrt_core::Observation) -> serde_json::Value {
        let dof = (o.dof as usize).min(o.pos_rad.len());
        json!({
            "seq": o.seq,
            "t_capture_s": self.t_rel(o.t_capture),
            "t_cycle_s": self.t_rel(o.t_cycle),
            "pos_rad": finite(&o.pos_rad[..dof]),
            "vel_rad_s": finite(&o.vel_rad_s[..dof]),
            "cmd_pos_rad": finite(&o.cmd_pos_rad[..dof]),
            "cmd_vel_rad_s": finite(&o.cmd_vel_rad_s[..dof]),
            "plan_pos_rad": finite(&o.plan_pos_rad[..dof]),
            "plan_vel_rad_s": finite(&o.plan_vel_rad_s[..dof]),
        })
    }

    /// One inference call.
    pub fn inference(&mut self, r: &InferRecord) {
        let status = match r.status {
            InferStatus::Published => "published",
            InferStatus::Failed => "failed",
            InferStatus::Dropped => "dropped",
            InferStatus::StaleImage => "stale_image",
            InferStatus::OutOfBounds => "out_of_bounds",
        };
        let v = json!({
            "t_s": self.t_rel(r.t_end),
            "seq": r.seq,
            "status": status,
            "t_obs_s": self.t_rel(r.t_obs),
            "t_begin_s": self.t_rel(r.t_begin),
            "latency_ms": r.t_end.saturating_since(r.t_obs) as f64 * 1e-6,
            "steps": r.steps,
            "steps_nominal": r.steps_nominal,
            "out_of_domain": r.out_of_domain,
            "candidates": r.candidates,
            "chosen": r.chosen,
            "goal": r.goal,
            "network_rtt_ms": (r.remote_rtt_ns > 0).then_some(r.remote_rtt_ns as f64 * 1e-6),
            "server_ms": (r.server_ns > 0).then_some(r.server_ns as f64 * 1e-6),
            "obs": self.observation(&r.obs),
            "t_image_s": if r.t_image.is_set() { json!(self.t_rel(r.t_image)) } else { json!(null) },
            "image_seq": r.image_seq,
        });
        self.write(1, r.t_end, &v);
    }

    /// One published chunk, whole.
    pub fn chunk(&mut self, c: &chunkrt_core::Chunk) {
        let len = (c.len as usize).min(c.pos_rad.len());
        let dof = c.dof as usize;
        let pos: Vec<&[f64]> = c.pos_rad[..len]
            .iter()
            .map(|row| &row[..dof.min(row.len())])
            .collect();
        let v = json!({
            "t_s": self.t_rel(c.t_publish),
            "seq": c.seq,
            "t_obs_s": self.t_rel(c.t_obs),
            "t_start_s": self.t_rel(c.t_start),
            "dt_ms": c.dt_ns as f64 * 1e-6,
            "len": c.len,
            "dof": c.dof,
            "sampler_steps": c.sampler_steps,
            "out_of_domain": c.out_of_domain,
            "pos_rad": pos,
        });
        self.write(3, c.t_publish, &v);
    }

    /// One camera image, PNG-encoded; logged at the time it was ready for inference.
    pub fn image(&mut self, r: &crate::records::ImageRecord) {
        use base64::Engine;
        self.png.clear();
        let mut enc = png::Encoder::new(&mut self.png, u32::from(r.width), u32::from(r.height));
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let written = enc
            .write_header()
            .and_then(|mut w| w.write_image_data(r.pixels()));
        if written.is_err() {
            self.summary.dropped += 1;
            return;
        }
        let t = r.t_capture.as_ns();
        let v = json!({
            "timestamp": {"sec": t / 1_000_000_000, "nsec": t % 1_000_000_000},
            "frame_id": "camera",
            "format": "png",
            "data": base64::engine::general_purpose::STANDARD.encode(&self.png),
            "seq": r.seq,
            "t_s": self.t_rel(r.t_capture),
        });
        self.images = true;
        self.write(4, r.t_ready, &v);
    }

    /// One event, as its `events.jsonl` line (its `t_s` gives the log time).
    pub fn event(&mut self, v: &serde_json::Value) {
        let t_s = v.get("t_s").and_then(|t| t.as_f64()).unwrap_or(0.0);
        let t = self.clock.t0.add_ns((t_s.max(0.0) * 1e9).round() as u64);
        self.write(2, t, v);
    }

    /// Sends every message to `sink` too, as it is written.
    pub fn set_live(&mut self, sink: Box<dyn LiveSink>) {
        self.live = Some(sink);
    }

    /// The first error.
    pub fn error(&self) -> Option<&str> {
        self.summary.error.as_deref()
    }

    /// Closes the last segment (writes its summary and index) and says what was
    /// written.
    pub fn finish(mut self) -> RecordingSummary {
        self.close_segment();
        self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-rec-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn read_all(path: &Path) -> Vec<(String, u64, serde_json::Value)> {
        let bytes = std::fs::read(path).unwrap();
        mcap::MessageStream::new(&bytes)
            .unwrap()
            .map(|m| {
                let m = m.unwrap();
                (
                    m.channel.topic.clone(),
                    m.log_time,
                    serde_json::from_slice(&m.data).unwrap(),
                )
            })
            .collect()
    }

    const CLOCK: ClockInfo = ClockInfo {
        t0: MonoTime(1_000_000_000),
        wall_minus_mono_ns: 42,
    };

    #[test]
    fn cycles_and_events_round_trip_with_monotonic_log_times() {
        let d = dir("roundtrip");
        let limits = RecordingLimits {
            segment_bytes: u64::MAX,
            segment_ns: u64::MAX,
            total_bytes: u64::MAX,
        };
        let mut r = Recorder::create(&d.join("recording.mcap"), limits, CLOCK).unwrap();
        for k in 0..100u64 {
            let t = CLOCK.t0.add_ns(k * 20_000_000);
            r.cycle(&CycleRecord {
                cycle: k,
                t_deadline: t,
                t_wake: t,
                t_cmd: t,
                t_done: t,
                ..CycleRecord::default()
            });
        }
        r.event(&json!({"t_s": 0.5, "event": "mode", "to": "Playing"}));
        let s = r.finish();
        assert_eq!(s.messages[TOPIC_CYCLE], 100);
        assert_eq!(s.dropped, 0);
        let msgs = read_all(&d.join("recording.mcap"));
        assert_eq!(msgs.len(), 101);
        let cycles: Vec<_> = msgs.iter().filter(|m| m.0 == TOPIC_CYCLE).collect();
        assert_eq!(cycles[7].1, CLOCK.t0.0 + 7 * 20_000_000);
        assert_eq!(cycles[7].2["cycle"], 7);
        let ev = msgs.iter().find(|m| m.0 == TOPIC_EVENTS).unwrap();
        assert_eq!(ev.1, CLOCK.t0.0 + 500_000_000);
    }

    #[test]
    fn a_recording_never_finished_still_holds_all_but_its_last_second() {
        // What a SIGKILL leaves: no summary, no footer.
        let d = dir("killed");
        let limits = RecordingLimits {
            segment_bytes: u64::MAX,
            segment_ns: u64::MAX,
            total_bytes: u64::MAX,
        };
        let mut r = Recorder::create(&d.join("recording.mcap"), limits, CLOCK).unwrap();
        // 5 s of cycles at 20 ms.
        for k in 0..250u64 {
            let t = CLOCK.t0.add_ns(k * 20_000_000);
            r.cycle(&CycleRecord {
                cycle: k,
                t_wake: t,
                ..CycleRecord::default()
            });
        }
        std::mem::forget(r);
        let bytes = std::fs::read(d.join("recording.mcap")).unwrap();
        let read = mcap::MessageStream::new(&bytes)
            .unwrap()
            .take_while(|m| m.is_ok())
            .count();
        assert!(read >= 250 - 50, "{read} of 250 messages readable");
    }

    #[test]
    fn segments_rotate_by_size_and_the_total_cap_counts_drops() {
        let d = dir("rotate");
        let limits = RecordingLimits {
            segment_bytes: 10_000,
            segment_ns: u64::MAX,
            total_bytes: 50_000,
        };
        let mut r = Recorder::create(&d.join("recording.mcap"), limits, CLOCK).unwrap();
        for k in 0..2000u64 {
            let t = CLOCK.t0.add_ns(k * 1_000_000);
            r.cycle(&CycleRecord {
                cycle: k,
                t_wake: t,
                ..CycleRecord::default()
            });
        }
        let s = r.finish();
        assert!(s.files.len() >= 5, "{:?}", s.files);
        assert!(s.bytes <= 50_000);
        let written: usize = s.files.iter().map(|f| read_all(f).len()).sum();
        assert_eq!(written as u64, s.messages[TOPIC_CYCLE]);
        assert_eq!(s.messages[TOPIC_CYCLE] + s.dropped, 2000);
        assert!(s.dropped > 0);
        assert_eq!(s.files[1], d.join("recording.1.mcap"));
    }
}
