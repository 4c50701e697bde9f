//! Reads a run's recording back for the plots: every segment in order, reduced to
//! what a figure can show.
//!
//! The joints' positions are kept as min/max envelopes over at most
//! [`MAX_BUCKETS`] time buckets (the bucket width doubles as the run grows), so a
//! run of any length is read in constant memory and a short one keeps every
//! sample. Mode changes, seams (the cycles that began playing a new chunk) and the
//! gate's interventions per joint are kept as times; the chunks the policy
//! published are kept while they fit ([`MAX_CHUNKS`]); the latency metrics are
//! rebuilt into HDR histograms from the per-cycle and per-inference records.

use crate::metrics::{Metric, MetricSet};
use crate::names::{mode_from_name, UnknownName};
use chunkrt_core::Mode;
use serde::{Deserialize, Deserializer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Most time buckets kept per series.
pub const MAX_BUCKETS: usize = 2048;
/// Most chunks kept (past it, chunks are counted but not kept).
pub const MAX_CHUNKS: usize = 400;
/// Most seams and gate marks kept per joint (past it, counted only).
pub const MAX_MARKS: usize = 200_000;

/// Series per joint: the executor's setpoint, the command after the gate, the
/// measurement.
pub const SERIES: [&str; 3] = ["setpoint", "command", "measured"];

/// The min and max of each series over one time bucket.
#[derive(Clone, Debug)]
pub struct Bucket {
    /// Earliest and latest sample time in the bucket (s since the run's start).
    pub t: (f64, f64),
    /// `[series][joint]` = (min, max): setpoint, command and measured position (rad),
    /// then the measured torque (N m; NaN where the recording has none); series
    /// [`FORCE_SERIES`] holds one entry, the wrist force's magnitude (N; NaN where the
    /// recording has none).
    pub range: [Vec<(f64, f64)>; 5],
}

/// The series of a [`Bucket`] that holds the wrist force's magnitude |F| (N).
pub const FORCE_SERIES: usize = 4;

impl Bucket {
    fn merge(&mut self, o: &Bucket) {
        self.t = (self.t.0.min(o.t.0), self.t.1.max(o.t.1));
        for (mine, theirs) in self.range.iter_mut().zip(o.range.iter()) {
            for (a, b) in mine.iter_mut().zip(theirs.iter()) {
                *a = (a.0.min(b.0), a.1.max(b.1));
            }
        }
    }
}

/// One chunk the policy published.
#[derive(Clone, Debug, Deserialize)]
pub struct RecChunk {
    /// Sequence number.
    pub seq: u64,
    /// Time of setpoint 0 (s since the run's start).
    pub t_start_s: f64,
    /// Setpoint spacing (ms).
    pub dt_ms: f64,
    /// `len` rows of `dof` positions.
    pub pos_rad: Vec<Vec<f64>>,
}

/// What the plots need of a run.
#[derive(Debug)]
pub struct RunData {
    /// Segments read, in order.
    pub files: Vec<PathBuf>,
    /// Joints.
    pub dof: usize,
    /// The window read (s since the run's start), when one was asked for.
    pub window: Option<(f64, f64)>,
    /// Cycles in the window.
    pub cycles: u64,
    /// First and last deadline in the window (s since the run's start).
    pub span: (f64, f64),
    /// Position (and torque) envelopes in time order.
    pub buckets: Vec<Bucket>,
    /// Whether some cycle recorded a non-zero drive torque (a backend that measures it).
    pub has_torque: bool,
    /// Whether the recording carries a wrist force/torque reading (`force_n`).
    pub has_force: bool,
    /// Width of one bucket (s): 0 until buckets had to be merged.
    pub bucket_s: f64,
    /// Mode changes: (time, new mode, reason).
    pub modes: Vec<(f64, Mode, String)>,
    /// The mode before the first change in the window.
    pub first_mode: Option<Mode>,
    /// Seams: times of the cycles that began playing a new chunk.
    pub seams: Vec<f64>,
    /// Per joint, the times of the gate's interventions.
    pub gate: Vec<Vec<f64>>,
    /// Gate interventions in the window, all joints.
    pub gate_events: u64,
    /// Published chunks starting in the window (empty when more than
    /// [`MAX_CHUNKS`]).
    pub chunks: Vec<RecChunk>,
    /// Chunks published in the window.
    pub chunks_published: u64,
    /// The policy's goal changes among the published chunks in the window: the
    /// observation (its cycle) from which a chunk was computed toward a new goal, and
    /// that goal's index (the first published chunk's goal is the first entry).
    pub goal_changes: Vec<(u64, u16)>,
    /// The published chunks in the window and how they were drawn: the
    /// observation's cycle, candidates drawn, the one published, and the cycle
    /// the control loop took it up in (0: never).
    pub draws: Vec<(u64, u16, u16, u64)>,
    /// Latency histograms rebuilt from the records (no coordinated-omission
    /// correction: the report's figures have it).
    pub metrics: MetricSet,
    /// The run's start: `CLOCK_MONOTONIC` ns and the wall clock's offset from it (ns),
    /// from the recording's `chunkrt.clock` record: two recordings with the same are
    /// one run.
    pub start: Option<(u64, i64)>,
    /// A segment that is not whole (a run that was killed, a copy cut short, a chunk
    /// whose CRC fails): where it was cut and why. What came before the cut was read.
    pub truncated: Option<Cut>,
}

/// Where a recording stops being whole. Every record before [`Cut::offset`] was read
/// and passed its checks (chunk CRCs included); nothing at or after it was used.
#[derive(Clone, Debug, PartialEq)]
pub struct Cut {
    /// The segment.
    pub file: PathBuf,
    /// Byte offset of the first record that is missing, incomplete or unsound.
    pub offset: u64,
    /// The segment's length in bytes.
    pub file_bytes: u64,
    /// What is wrong there.
    pub why: String,
    /// Every message of the segment was read and sound: the cut lies after its data
    /// section (in the summary or the footer).
    pub messages_whole: bool,
    /// The last cycle read before the cut whose record is sound, when there is one.
    pub last_cycle: Option<CycleMark>,
}

/// A recorded cycle's place in the run: its number, its time and its episode.
#[derive(Clone, Debug, PartialEq)]
pub struct CycleMark {
    /// The cycle's number.
    pub cycle: u64,
    /// Its deadline (s since the run's start).
    pub t_s: f64,
    /// With `[episodes]`: the episode and its phase (`running`, `reset`).
    pub episode: Option<(u64, String)>,
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: cut at byte {} of {} ({})",
            self.file.display(),
            self.offset,
            self.file_bytes,
            self.why
        )?;
        match &self.last_cycle {
            Some(c) => {
                write!(f, "; the last whole cycle is {} at {:.3} s", c.cycle, c.t_s)?;
                if let Some((e, phase)) = &c.episode {
                    write!(f, " (episode {e}, {phase})")?;
                }
                Ok(())
            }
            None => write!(f, "; no whole cycle before it"),
        }
    }
}

/// One cycle as recorded, handed to the visitor of [`read_with`].
#[derive(Debug)]
pub struct CycleSample<'a> {
    /// The cycle's number (0 when the record has none).
    pub cycle: u64,
    /// The cycle's deadline (s since the run's start).
    pub t_s: f64,
    /// The executor's mode (parsed from its recorded name: an unknown name stops the read).
    pub mode: Mode,
    /// Bit i: gate constraint i acted in this cycle (any joint).
    pub gate_mask: u64,
    /// The executor's setpoint per joint.
    pub setpoint_rad: &'a [f64],
    /// The command after the gate per joint.
    pub command_rad: &'a [f64],
    /// The measurement per joint.
    pub feedback_rad: &'a [f64],
    /// The drives' measured torque per joint (empty in recordings made before it was
    /// recorded).
    pub feedback_torque_nm: &'a [f64],
    /// Per joint, the constraints that acted on it (empty where the gate did not act).
    pub gate_mask_joints: &'a [u32],
    /// With a residual policy: the base's setpoint per joint (empty without one).
    pub base_rad: &'a [f64],
    /// With a residual policy: the correction let through per joint (empty without).
    pub residual_rad: &'a [f64],
    /// With `[episodes]`: the episode whose running phase the command was made in (none
    /// in a reset, or without episodes).
    pub running_episode: Option<u64>,
    /// With a wrist force/torque sensor: force (N) then torque (N m), base frame (NaN
    /// where the recording wrote null).
    pub wrench: Option<[f64; 6]>,
}

#[derive(Deserialize)]
struct CycleMsg {
    t_s: f64,
    #[serde(default)]
    cycle: u64,
    t_deadline_ns: u64,
    #[serde(deserialize_with = "mode_by_name")]
    mode: Mode,
    #[serde(default)]
    gate_mask: u64,
    chunk_seq: u64,
    #[serde(default)]
    chunk_age_ms: f64,
    #[serde(default)]
    wake_latency_us: f64,
    #[serde(default)]
    cycle_time_us: f64,
    /// Absent in recordings made before it was recorded.
    #[serde(default)]
    exchange_us: f64,
    #[serde(default)]
    bus_rtt_us: f64,
    setpoint_rad: Vec<f64>,
    command_rad: Vec<f64>,
    feedback_rad: Vec<f64>,
    /// Absent in recordings made before it was recorded.
    #[serde(default)]
    feedback_torque_nm: Vec<f64>,
    /// Present where the backend measures force (null: not finite).
    #[serde(default)]
    force_n: Option<Vec<Option<f64>>>,
    #[serde(default)]
    wrist_torque_nm: Option<Vec<Option<f64>>>,
    /// Present where the gate acted.
    #[serde(default)]
    gate_mask_joints: Vec<u32>,
    /// Present with a residual policy.
    #[serde(default)]
    base_rad: Vec<f64>,
    #[serde(default)]
    residual_rad: Vec<f64>,
    #[serde(default)]
    episode: Option<u64>,
    #[serde(default)]
    phase: Option<String>,
}

impl CycleMsg {
    /// The cycle as a visitor sees it, at `t_s` on the run's clock.
    fn sample(&self, t_s: f64) -> CycleSample<'_> {
        CycleSample {
            cycle: self.cycle,
            t_s,
            mode: self.mode,
            gate_mask: self.gate_mask,
            setpoint_rad: &self.setpoint_rad,
            command_rad: &self.command_rad,
            feedback_rad: &self.feedback_rad,
            feedback_torque_nm: &self.feedback_torque_nm,
            gate_mask_joints: &self.gate_mask_joints,
            base_rad: &self.base_rad,
            residual_rad: &self.residual_rad,
            running_episode: self
                .episode
                .filter(|_| self.phase.as_deref() == Some("running")),
            wrench: self.wrench(),
        }
    }

    /// Records the cycle's latencies into `metrics` (ns); a figure the recording
    /// lacks (0) is left out where 0 cannot be a measurement.
    fn record_latencies(&self, metrics: &mut MetricSet) {
        let us = |v: f64| (v.max(0.0) * 1e3) as u64;
        metrics.record(Metric::WakeLatency, us(self.wake_latency_us));
        metrics.record(Metric::CycleTime, us(self.cycle_time_us));
        if self.exchange_us > 0.0 {
            metrics.record(Metric::Exchange, us(self.exchange_us));
        }
        if self.bus_rtt_us > 0.0 {
            metrics.record(Metric::BusRtt, us(self.bus_rtt_us));
        }
        if self.chunk_age_ms > 0.0 {
            metrics.record(Metric::ChunkAge, (self.chunk_age_ms * 1e6) as u64);
        }
    }

    /// The cycle's wrench, force then torque (none without a sensor).
    fn wrench(&self) -> Option<[f64; 6]> {
        let (f, t) = (self.force_n.as_ref()?, self.wrist_torque_nm.as_ref()?);
        let mut w = [f64::NAN; 6];
        for (o, v) in w.iter_mut().zip(f.iter().take(3).chain(t.iter().take(3))) {
            *o = v.unwrap_or(f64::NAN);
        }
        Some(w)
    }

    /// |F| of the cycle's wrist force (NaN without one, or with a component not
    /// finite).
    fn force_norm(&self) -> f64 {
        self.force_n.as_ref().map_or(f64::NAN, |f| {
            f.iter()
                .map(|x| x.unwrap_or(f64::NAN).powi(2))
                .sum::<f64>()
                .sqrt()
        })
    }

    /// The cycle as a bucket of its own at `t` over `dof` joints (NaN where a series
    /// has fewer).
    fn bucket(&self, t: f64, dof: usize) -> Bucket {
        let point = |v: &Vec<f64>| -> Vec<(f64, f64)> {
            (0..dof)
                .map(|j| {
                    let x = v.get(j).copied().unwrap_or(f64::NAN);
                    (x, x)
                })
                .collect()
        };
        Bucket {
            t: (t, t),
            range: [
                point(&self.setpoint_rad),
                point(&self.command_rad),
                point(&self.feedback_rad),
                point(&self.feedback_torque_nm),
                vec![(self.force_norm(), self.force_norm())],
            ],
        }
    }
}

#[derive(Deserialize)]
struct InferMsg {
    t_s: f64,
    /// The chunk's sequence number.
    #[serde(default)]
    seq: u64,
    latency_ms: f64,
    #[serde(default)]
    status: String,
    #[serde(default)]
    goal: Option<u16>,
    #[serde(default)]
    candidates: u16,
    #[serde(default)]
    chosen: u16,
    #[serde(default)]
    obs: Option<ObsSeq>,
    /// A policy server's chunk (recordings before them have none).
    #[serde(default)]
    network_rtt_ms: Option<f64>,
    #[serde(default)]
    server_ms: Option<f64>,
}

/// The cycle that captured an inference call's observation.
#[derive(Deserialize)]
struct ObsSeq {
    seq: u64,
}

#[derive(Deserialize)]
struct EventMsg {
    t_s: f64,
    event: String,
    #[serde(default)]
    to: Option<String>,
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    joint: Option<usize>,
}

/// A mode from its recorded name; a name chunkrt does not write fails the record.
fn mode_by_name<'de, D: Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
    let name = <&str>::deserialize(d)?;
    mode_from_name(name).map_err(serde::de::Error::custom)
}

/// Why a run's recording could not be read back (a recording cut short or corrupt is
/// not an error here: it is read to its last sound record and [`RunData::truncated`]
/// says where and why; a caller that needs the whole run refuses it).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The run directory holds no recording and no report naming one.
    #[error("{}: no recording (recording.mcap) and no report naming one", .0.display())]
    NoRecording(PathBuf),
    /// A segment could not be opened, or is not a regular file (the message names it).
    #[error("{0}")]
    Open(String),
    /// A segment could not be read (the OS error).
    #[error("{}: cannot read the recording: {error}", .file.display())]
    Read {
        /// The segment.
        file: PathBuf,
        /// What the read said.
        error: String,
    },
}

/// Largest record (a chunk, compressed or not) a recording is read with: chunkrt writes
/// chunks of about 1 MiB; a length field beyond this is damage, refused before anything
/// is allocated for it.
pub const MAX_RECORD_BYTES: u64 = 256 << 20;

/// Cap of a run's `report.json` when it is read back for the recording's file names.
const REPORT_LIMIT_BYTES: u64 = 64 << 20;

/// The segments of the recording in `run_dir`: `recording.mcap`,
/// `recording.1.mcap`, ... in order (or the files the report lists, for a run
/// recorded with `--record`).
pub fn segments(run_dir: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let report = run_dir.join("report.json");
    // Read with a bound (a report is a few KiB): a `report.json` that is a FIFO or a
    // device is passed over like a missing one.
    if let Ok(Ok(text)) =
        chunkrt_files::read_text_bounded(&report, REPORT_LIMIT_BYTES, "run report")
    {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            if let Some(files) = v["recording"]["files"].as_array() {
                let files: Vec<PathBuf> = files
                    .iter()
                    .filter_map(|f| f.as_str())
                    .map(|f| run_dir.join(f))
                    .collect();
                if !files.is_empty() {
                    return Ok(files);
                }
            }
        }
    }
    let mut files = Vec::new();
    let first = run_dir.join("recording.mcap");
    if first.exists() {
        files.push(first);
        for n in 1.. {
            let f = run_dir.join(format!("recording.{n}.mcap"));
            if !f.exists() {
                break;
            }
            files.push(f);
        }
    }
    if files.is_empty() {
        return Err(ReadError::NoRecording(run_dir.to_path_buf()));
    }
    Ok(files)
}

/// Reads `files` (segments in order), keeping `window` (s since the run's start)
/// or everything. Each file is streamed through a small buffer (the MCAP chunk being
/// read), never loaded whole: a 512 MB segment costs no more memory than a small one.
pub fn read(files: &[PathBuf], window: Option<(f64, f64)>) -> Result<RunData, ReadError> {
    read_with(files, window, |_| {})
}

/// [`read`], handing every cycle in the window to `visit` as well (in time order,
/// one at a time: the caller keeps what it needs).
pub fn read_with(
    files: &[PathBuf],
    window: Option<(f64, f64)>,
    mut visit: impl FnMut(&CycleSample),
) -> Result<RunData, ReadError> {
    let mut r = Reader::new(window);
    r.visit = Some(&mut visit);
    r.files(files)?;
    Ok(r.finish())
}

/// A camera image of the recording (`/chunkrt/image`): as the policy was given it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedImage {
    /// The camera's frame counter.
    pub seq: u64,
    /// Capture time, s since the run's start.
    pub t_s: f64,
    /// The PNG file's bytes.
    pub png: Vec<u8>,
}

/// The camera images recorded in `files`, in order (none for a run without a camera).
pub fn images(files: &[PathBuf]) -> Result<Vec<RecordedImage>, ReadError> {
    let mut out = Vec::new();
    let mut r = Reader::new(None);
    r.images = Some(&mut out);
    r.files(files)?;
    drop(r);
    Ok(out)
}

/// An image message as the recorder writes it.
#[derive(Deserialize)]
struct ImageMsg {
    seq: u64,
    t_s: f64,
    format: String,
    data: String,
}

impl Reader<'_> {
    fn image(&mut self, data: &[u8]) -> Result<(), String> {
        use base64::Engine;
        let Some(out) = self.images.as_mut() else {
            return Ok(());
        };
        let m: ImageMsg = serde_json::from_slice(data).map_err(err)?;
        if m.format != "png" {
            return Err(format!(
                "image {} is \"{}\", chunkrt records PNG",
                m.seq, m.format
            ));
        }
        let png = base64::engine::general_purpose::STANDARD
            .decode(m.data.as_bytes())
            .map_err(|e| format!("image {}: {e}", m.seq))?;
        out.push(RecordedImage {
            seq: m.seq,
            t_s: m.t_s,
            png,
        });
        Ok(())
    }

    /// Reads the segments in order.
    fn files(&mut self, files: &[PathBuf]) -> Result<(), ReadError> {
        let r = self;
        for f in files {
            // A segment that cannot be opened, or is not a regular file (a FIFO would block
            // the reader for good), is an error, not a recording cut short.
            let opened = chunkrt_files::open_regular(f, "recording")
                .map_err(|e| ReadError::Open(e.to_string()))?;
            let file_bytes = opened.file.metadata().map_or(0, |m| m.len());
            match r.segment(opened.file, file_bytes) {
                Ok(()) => {}
                // The file could not be read (an I/O error): that is the error, not a
                // recording cut short.
                Err(Stop::Read(error)) => {
                    return Err(ReadError::Read {
                        file: f.clone(),
                        error,
                    })
                }
                // A killed run's last segment has no summary and may end inside a
                // record; a damaged copy fails a CRC: what was read before stays, and
                // the cut says where.
                Err(Stop::Cut {
                    at,
                    why,
                    messages_whole,
                    sound,
                }) => {
                    r.data.truncated = Some(Cut {
                        file: f.clone(),
                        offset: at,
                        file_bytes,
                        why,
                        messages_whole,
                        last_cycle: if sound { r.last_cycle.take() } else { None },
                    });
                    break;
                }
            }
        }
        r.data.files = files.to_vec();
        Ok(())
    }
}

struct Reader<'v> {
    data: RunData,
    t0_ns: Option<u64>,
    last_seq: u64,
    /// Chunks drawn and not yet seen played: chunk seq -> index in `draws`.
    awaiting_play: std::collections::HashMap<u64, usize>,
    visit: Option<&'v mut dyn FnMut(&CycleSample)>,
    /// Camera images, when they are asked for ([`images`]).
    images: Option<&'v mut Vec<RecordedImage>>,
    /// The last cycle read (for a cut's [`Cut::last_cycle`]).
    last_cycle: Option<CycleMark>,
}

impl Reader<'_> {
    fn new(window: Option<(f64, f64)>) -> Self {
        Reader {
            data: RunData {
                files: Vec::new(),
                dof: 0,
                window,
                cycles: 0,
                span: (f64::MAX, f64::MIN),
                buckets: Vec::new(),
                has_torque: false,
                has_force: false,
                bucket_s: 0.0,
                modes: Vec::new(),
                first_mode: None,
                seams: Vec::new(),
                gate: Vec::new(),
                gate_events: 0,
                chunks: Vec::new(),
                chunks_published: 0,
                goal_changes: Vec::new(),
                draws: Vec::new(),
                metrics: MetricSet::new(),
                start: None,
                truncated: None,
            },
            t0_ns: None,
            last_seq: 0,
            awaiting_play: std::collections::HashMap::new(),
            visit: None,
            images: None,
            last_cycle: None,
        }
    }

    fn inside(&self, t: f64) -> bool {
        self.data.window.is_none_or(|(a, b)| t >= a && t <= b)
    }

    /// Reads one segment record by record, checking every CRC the file carries (each
    /// chunk's before its messages are used, the data section's, the summary's) and
    /// that it ends with its footer and magic. `at` is the offset of the record being
    /// read, so a cut or a failed check is placed at its record.
    fn segment(&mut self, mut file: std::fs::File, file_bytes: u64) -> Result<(), Stop> {
        use mcap::sans_io::{LinearReadEvent, LinearReader, LinearReaderOptions};
        use std::io::Read;
        let mut reader = LinearReader::new_with_options(
            LinearReaderOptions::default()
                .with_emit_chunks(true)
                .with_validate_data_section_crc(true)
                .with_validate_summary_section_crc(true)
                .with_check_finishes_after_end_magic(true)
                .with_record_length_limit(MAX_RECORD_BYTES as usize),
        );
        let mut topics: HashMap<u16, String> = HashMap::new();
        // After the leading magic.
        let mut at = mcap::MAGIC.len() as u64;
        let mut data_end = false;
        let cut = |at: u64, why: String, data_end: bool| Stop::Cut {
            at,
            why,
            messages_whole: data_end,
            sound: true,
        };
        while let Some(event) = reader.next_event() {
            let event = match event {
                Ok(e) => e,
                Err(e) => return Err(self.failed(e, at, file_bytes, data_end)),
            };
            match event {
                LinearReadEvent::ReadRequest(need) => {
                    let got = file
                        .read(reader.insert(need))
                        .map_err(|e| Stop::Read(e.to_string()))?;
                    reader.notify_read(got);
                }
                LinearReadEvent::Record { data, opcode } => {
                    let start = at;
                    at += 9 + data.len() as u64;
                    data_end |= opcode == mcap::records::op::DATA_END;
                    self.top_record(opcode, data, &mut topics)
                        .map_err(|why| cut(start, why, data_end))?;
                }
            }
        }
        Ok(())
    }

    /// The cut for the reader's error `e` at the record starting at `at`.
    fn failed(&self, e: mcap::McapError, at: u64, file_bytes: u64, data_end: bool) -> Stop {
        use mcap::McapError;
        let (why, sound) = match e {
            McapError::UnexpectedEof if at > file_bytes => {
                return Stop::Cut {
                    at: 0,
                    why: "the file ends inside its leading magic (cut short)".into(),
                    messages_whole: false,
                    sound: true,
                }
            }
            McapError::UnexpectedEof if at == file_bytes => (
                "the file ends after a whole record, without the rest of the recording and \
                 its footer (cut short)"
                    .to_string(),
                true,
            ),
            McapError::UnexpectedEof => (
                format!(
                    "the file ends {} bytes into this record{} (cut short)",
                    file_bytes - at,
                    if data_end {
                        ", after the last message"
                    } else {
                        ""
                    }
                ),
                true,
            ),
            // The data section's CRC covers records outside the chunks (the clock, the
            // channels): where it fails, nothing read from the data section is sound.
            e @ McapError::BadDataCrc { .. } => (
                format!(
                    "corrupt: {e}: the damage lies before this record, outside the chunks \
                     (whose own CRCs hold)"
                ),
                false,
            ),
            e => (format!("corrupt: {e}"), true),
        };
        Stop::Cut {
            at,
            why,
            messages_whole: data_end,
            sound,
        }
    }

    /// One top-level record: a chunk's records once its CRC holds, the rest as they come.
    fn top_record(
        &mut self,
        opcode: u8,
        data: &[u8],
        topics: &mut HashMap<u16, String>,
    ) -> Result<(), String> {
        use mcap::records::Record;
        match mcap::parse_record(opcode, data).map_err(|e| format!("corrupt: {e}"))? {
            Record::Chunk { header, data } => {
                // The header's size is not covered by the CRC: bound it before
                // anything is allocated for it.
                if header.uncompressed_size > MAX_RECORD_BYTES {
                    return Err(format!(
                        "corrupt: a chunk of {} bytes uncompressed (at most {MAX_RECORD_BYTES})",
                        header.uncompressed_size
                    ));
                }
                // Every record of the chunk is read, and its CRC checked, before any is
                // used: a damaged chunk gives nothing.
                let records = mcap::read::ChunkReader::new(header, &data)
                    .and_then(|r| r.collect::<Result<Vec<_>, _>>())
                    .map_err(|e| format!("corrupt chunk: {e}"))?;
                for r in records {
                    self.record(r, topics)?;
                }
                Ok(())
            }
            r => self.record(r, topics),
        }
    }

    fn record(
        &mut self,
        record: mcap::records::Record<'_>,
        topics: &mut HashMap<u16, String>,
    ) -> Result<(), String> {
        use mcap::records::Record;
        match record {
            Record::Channel(c) => {
                topics.insert(c.id, c.topic);
            }
            Record::Metadata(m) if m.name == "chunkrt.clock" && self.t0_ns.is_none() => {
                self.t0_ns = m.metadata.get("t0_mono_ns").and_then(|v| v.parse().ok());
                let wall = m.metadata.get("wall_minus_mono_ns");
                self.data.start = self.t0_ns.zip(wall.and_then(|v| v.parse().ok()));
            }
            Record::Message { header, data } => {
                if let Some(topic) = topics.get(&header.channel_id) {
                    self.message(topic, &data)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn message(&mut self, topic: &str, data: &[u8]) -> Result<(), String> {
        match topic {
            "/chunkrt/cycle" => {
                let c: CycleMsg = serde_json::from_slice(data).map_err(err)?;
                self.cycle(c);
            }
            "/chunkrt/inference" => {
                let i: InferMsg = serde_json::from_slice(data).map_err(err)?;
                if self.inside(i.t_s) && i.latency_ms.is_finite() && i.latency_ms >= 0.0 {
                    self.data
                        .metrics
                        .record(Metric::InferenceLatency, (i.latency_ms * 1e6) as u64);
                }
                for (metric, ms) in [
                    (Metric::NetworkRtt, i.network_rtt_ms),
                    (Metric::ServerTime, i.server_ms),
                ] {
                    if let Some(ms) = ms.filter(|v| self.inside(i.t_s) && v.is_finite() && *v > 0.0)
                    {
                        self.data.metrics.record(metric, (ms * 1e6) as u64);
                    }
                }
                if let (true, "published", Some(obs)) =
                    (self.inside(i.t_s), i.status.as_str(), &i.obs)
                {
                    let changes = &mut self.data.goal_changes;
                    if let Some(goal) = i.goal.filter(|&g| changes.last().is_none_or(|c| c.1 != g))
                    {
                        changes.push((obs.seq, goal));
                    }
                    if i.candidates >= 1 {
                        self.awaiting_play.insert(i.seq, self.data.draws.len());
                        self.data.draws.push((obs.seq, i.candidates, i.chosen, 0));
                    }
                }
            }
            "/chunkrt/events" => {
                let e: EventMsg = serde_json::from_slice(data).map_err(err)?;
                self.event(e)?;
            }
            "/chunkrt/image" => self.image(data)?,
            "/chunkrt/chunk" => {
                let c: RecChunk = serde_json::from_slice(data).map_err(err)?;
                if self.inside(c.t_start_s) {
                    self.data.chunks_published += 1;
                    if self.data.chunks.len() < MAX_CHUNKS {
                        self.data.chunks.push(c);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn cycle(&mut self, c: CycleMsg) {
        // The deadline on the run's clock; the wake time when the clock record is
        // missing.
        let t = match self.t0_ns {
            Some(t0) => c.t_deadline_ns.saturating_sub(t0) as f64 * 1e-9,
            None => c.t_s,
        };
        self.last_cycle = Some(CycleMark {
            cycle: c.cycle,
            t_s: t,
            episode: c.episode.zip(c.phase.clone()),
        });
        let seq = if c.mode == Mode::Playing {
            c.chunk_seq
        } else {
            0
        };
        let seam = seq != 0 && seq != self.last_seq;
        self.last_seq = seq;
        if let Some(k) = self.awaiting_play.remove(&c.chunk_seq) {
            self.data.draws[k].3 = c.cycle;
        }
        if !self.inside(t) {
            if self.data.window.is_some_and(|(a, _)| t < a) {
                self.data.first_mode = Some(c.mode);
            }
            return;
        }
        if let Some(visit) = self.visit.as_mut() {
            visit(&c.sample(t));
        }
        let d = &mut self.data;
        if d.first_mode.is_none() {
            d.first_mode = Some(c.mode);
        }
        d.cycles += 1;
        d.span = (d.span.0.min(t), d.span.1.max(t));
        if seam && d.seams.len() < MAX_MARKS {
            d.seams.push(t);
        }
        let dof = c.setpoint_rad.len();
        d.dof = d.dof.max(dof);
        c.record_latencies(&mut d.metrics);
        d.has_torque |= c
            .feedback_torque_nm
            .iter()
            .any(|t| *t != 0.0 && t.is_finite());
        d.has_force |= c.force_n.is_some();
        let b = c.bucket(t, dof);
        self.push_bucket(b);
    }

    /// Adds one sample: into the last bucket when it falls in its width, else as a
    /// new bucket; past [`MAX_BUCKETS`] neighbours merge and the width doubles.
    fn push_bucket(&mut self, b: Bucket) {
        let d = &mut self.data;
        let origin = d.buckets.first().map_or(b.t.0, |f| f.t.0);
        if let Some(last) = d.buckets.last_mut() {
            if d.bucket_s > 0.0
                && ((b.t.0 - origin) / d.bucket_s).floor()
                    == ((last.t.0 - origin) / d.bucket_s).floor()
            {
                last.merge(&b);
                return;
            }
        }
        d.buckets.push(b);
        if d.buckets.len() > MAX_BUCKETS {
            let span = d.buckets.last().map_or(0.0, |l| l.t.1) - origin;
            d.bucket_s = if d.bucket_s == 0.0 {
                2.0 * span / MAX_BUCKETS as f64
            } else {
                2.0 * d.bucket_s
            };
            let w = d.bucket_s;
            let mut merged: Vec<Bucket> = Vec::with_capacity(MAX_BUCKETS / 2 + 1);
            for b in d.buckets.drain(..) {
                match merged.last_mut() {
                    Some(m) if ((b.t.0 - origin) / w).floor() == ((m.t.0 - origin) / w).floor() => {
                        m.merge(&b)
                    }
                    _ => merged.push(b),
                }
            }
            d.buckets = merged;
        }
    }

    fn event(&mut self, e: EventMsg) -> Result<(), ModeEventError> {
        if !self.inside(e.t_s) {
            return Ok(());
        }
        let d = &mut self.data;
        match e.event.as_str() {
            "mode" => {
                let to = mode_of(e.to.as_deref(), "to")?;
                if d.modes.is_empty() && d.first_mode.is_none() {
                    d.first_mode = match e.from.as_deref() {
                        Some(from) => Some(mode_of(Some(from), "from")?),
                        None => None,
                    };
                }
                if d.modes.len() < MAX_MARKS {
                    d.modes.push((e.t_s, to, e.reason.unwrap_or_default()));
                }
            }
            "gate" => {
                d.gate_events += 1;
                if let Some(j) = e.joint {
                    if j < chunkrt_core::MAX_DOF {
                        if d.gate.len() <= j {
                            d.gate.resize(j + 1, Vec::new());
                        }
                        if d.gate[j].len() < MAX_MARKS {
                            d.gate[j].push(e.t_s);
                        }
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(mut self) -> RunData {
        if self.data.chunks_published as usize > MAX_CHUNKS {
            self.data.chunks.clear();
        }
        if self.data.cycles == 0 {
            self.data.span = (0.0, 0.0);
        }
        self.data
    }
}

/// Why a segment's reading stopped early.
enum Stop {
    /// The file ends early or holds a record that is not sound: a recording cut
    /// short or damaged, cut at the record starting at byte `at`.
    Cut {
        at: u64,
        why: String,
        /// The cut lies after the segment's data section.
        messages_whole: bool,
        /// What was read before the cut is sound (false where a check that covers it
        /// failed: the data section's CRC).
        sound: bool,
    },
    /// The file could not be read (the OS error).
    Read(String),
}

/// A mode event that names no mode chunkrt records.
#[derive(Debug, thiserror::Error)]
enum ModeEventError {
    /// The field (`from`, `to`) is missing.
    #[error("a mode event without `{0}`")]
    Missing(&'static str),
    /// The field names no mode.
    #[error("a mode event's `{field}`: {name}")]
    Unknown {
        /// `from` or `to`.
        field: &'static str,
        /// The name and the modes there are.
        name: UnknownName,
    },
}

impl From<ModeEventError> for String {
    fn from(e: ModeEventError) -> Self {
        e.to_string()
    }
}

/// The mode a mode event's `field` (`from`, `to`) names: a missing or unknown name
/// fails the record, as a record that does not parse does.
fn mode_of(name: Option<&str>, field: &'static str) -> Result<Mode, ModeEventError> {
    let name = name.ok_or(ModeEventError::Missing(field))?;
    mode_from_name(name).map_err(|name| ModeEventError::Unknown { field, name })
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::mode_name;
    use crate::recording::{ClockInfo, Recorder, RecordingLimits};
    use crate::records::CycleRecord;
    use chunkrt_core::{Chunk, MonoTime};
    use serde_json::json;

    const T0: MonoTime = MonoTime(5_000_000_000);
    const CYCLES: u64 = 20_000;
    const SPIKE_AT: u64 = 12_345;
    const GATE_AT: [u64; 7] = [10, 11, 4000, 9000, 9001, 15_000, 19_999];

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("chunkrt-readback-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Joint 0's setpoint at cycle `k`: a slow sine with one spike.
    fn joint0(k: u64) -> f64 {
        let s = (k as f64 * 1e-3 * std::f64::consts::PI).sin();
        if k == SPIKE_AT {
            s + 3.0
        } else {
            s
        }
    }

    /// 20 s at 1 ms through the real recorder, in segments of 1 MB: joint 0 a sine
    /// with a spike, joint 1 the cycle number (so a bucket's range is its cycles'),
    /// a new chunk every 40 cycles, gate events on joint 1, two mode changes.
    fn record(d: &Path) {
        let limits = RecordingLimits {
            segment_bytes: 1_000_000,
            segment_ns: u64::MAX,
            total_bytes: u64::MAX,
        };
        let clock = ClockInfo {
            t0: T0,
            wall_minus_mono_ns: 0,
        };
        let mut r = Recorder::create(&d.join("recording.mcap"), limits, clock).unwrap();
        for k in 0..CYCLES {
            let t = T0.add_ns(k * 1_000_000);
            let mut c = CycleRecord {
                cycle: k,
                t_deadline: t,
                t_wake: t.add_ns(20_000),
                t_cmd: t.add_ns(30_000),
                chunk_seq: 1 + k / 40,
                dof: 2,
                ..CycleRecord::default()
            };
            c.setpoint_pos_rad[0] = joint0(k);
            c.setpoint_pos_rad[1] = k as f64;
            c.cmd_pos_rad[0] = joint0(k) * 0.5;
            c.fb_pos_rad[0] = -joint0(k);
            r.cycle(&c);
            if k % 40 == 0 {
                let mut chunk = Chunk {
                    seq: 1 + k / 40,
                    t_start: t,
                    t_publish: t,
                    dt_ns: 20_000_000,
                    len: 3,
                    dof: 2,
                    ..Chunk::default()
                };
                chunk.pos_rad[2][0] = 1.0;
                r.chunk(&chunk);
            }
            if GATE_AT.contains(&k) {
                r.event(&json!({"t_s": k as f64 * 1e-3, "event": "gate", "joint": 1, "constraint": "velocity"}));
            }
        }
        r.event(&json!({"t_s": 19.5, "event": "mode", "from": "Playing", "to": "Decelerating", "reason": "Shutdown"}));
        r.event(&json!({"t_s": 19.9, "event": "mode", "from": "Decelerating", "to": "Holding", "reason": "AtRest"}));
        let s = r.finish();
        assert!(s.files.len() >= 3, "rotated: {:?}", s.files);
    }

    #[test]
    fn a_long_run_is_read_as_envelopes_that_keep_every_extreme() {
        let d = dir("long");
        record(&d);
        let files = segments(&d).unwrap();
        assert!(files.len() >= 3);
        let data = read(&files, None).unwrap();
        assert_eq!(data.truncated, None);
        assert_eq!(data.cycles, CYCLES);
        assert_eq!(data.dof, 2);
        assert!(data.buckets.len() <= MAX_BUCKETS && data.buckets.len() > MAX_BUCKETS / 4);
        assert!(data.bucket_s > 0.0);
        // The spike is kept, as are the sine's extremes, in every series.
        let max0 = data
            .buckets
            .iter()
            .map(|b| b.range[0][0].1)
            .fold(f64::MIN, f64::max);
        assert_eq!(max0, joint0(SPIKE_AT));
        let min0 = data
            .buckets
            .iter()
            .map(|b| b.range[0][0].0)
            .fold(f64::MAX, f64::min);
        let true_min = (0..CYCLES).map(joint0).fold(f64::MAX, f64::min);
        assert_eq!(min0, true_min);
        let min_fb = data
            .buckets
            .iter()
            .map(|b| b.range[2][0].0)
            .fold(f64::MAX, f64::min);
        assert_eq!(min_fb, -joint0(SPIKE_AT));
        // Joint 1 is the cycle number: each bucket's range is exactly its first and
        // last cycle, so the buckets partition the run in order, none lost.
        let mut next = 0.0;
        for b in &data.buckets {
            let (lo, hi) = b.range[0][1];
            assert_eq!(lo, next, "bucket starts where the last ended");
            assert!((b.t.0 - lo * 1e-3).abs() < 1e-9 && (b.t.1 - hi * 1e-3).abs() < 1e-9);
            next = hi + 1.0;
        }
        assert_eq!(next, CYCLES as f64);
        assert_eq!(data.seams.len() as u64, CYCLES / 40);
        assert_eq!(data.chunks_published, CYCLES / 40);
        assert!(data.chunks.is_empty(), "more than MAX_CHUNKS: left out");
        assert_eq!(data.gate.get(1).map(Vec::len), Some(GATE_AT.len()));
        assert_eq!(data.gate_events, GATE_AT.len() as u64);
        let modes: Vec<&str> = data.modes.iter().map(|m| mode_name(m.1)).collect();
        assert_eq!(modes, ["Decelerating", "Holding"]);
        assert_eq!(data.metrics.get(crate::Metric::WakeLatency).len(), CYCLES);
        let wake = data.metrics.get(crate::Metric::WakeLatency);
        assert!(wake.equivalent(wake.max(), 20_000), "{}", wake.max());
    }

    #[test]
    fn a_window_keeps_every_sample_and_chunk_in_it() {
        let d = dir("window");
        record(&d);
        let data = read(&segments(&d).unwrap(), Some((5.0, 6.0))).unwrap();
        assert!((1000..=1001).contains(&data.cycles), "{}", data.cycles);
        assert_eq!(data.bucket_s, 0.0);
        assert_eq!(data.buckets.len() as u64, data.cycles);
        assert!(data
            .buckets
            .iter()
            .all(|b| b.t.0 >= 5.0 - 1e-9 && b.t.1 <= 6.0 + 1e-9));
        assert!(
            (25..=26).contains(&data.chunks.len()),
            "{}",
            data.chunks.len()
        );
        assert_eq!(data.chunks[0].pos_rad[2], vec![1.0, 0.0]);
        assert_eq!(data.gate_events, 0);
        assert_eq!(data.first_mode.map(mode_name), Some("Playing"));
    }

    /// A recording that is a FIFO (nothing writes to it: a plain open would block the
    /// reader for good) or a device is refused at once, naming the file and what it is;
    /// it is not shown as a recording cut short.
    #[test]
    fn a_recording_that_is_not_a_regular_file_is_refused_without_blocking() {
        let d = dir("fifo");
        let fifo = d.join("recording.mcap");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let files = segments(&d).unwrap();
        let e = read(&files, None).err().unwrap().to_string();
        assert!(
            e.contains("recording.mcap: is a FIFO (named pipe), not a regular file"),
            "{e}"
        );
        let e = read(&[PathBuf::from("/dev/zero")], None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("/dev/zero: is a character device"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_recording_cut_short_is_read_up_to_the_cut_and_says_so() {
        let d = dir("cut");
        record(&d);
        let mut files = segments(&d).unwrap();
        let last = files.pop().unwrap();
        let first = files.remove(0);
        let bytes = std::fs::read(&first).unwrap();
        std::fs::write(&first, &bytes[..bytes.len() * 6 / 10]).unwrap();
        std::fs::remove_file(last).unwrap();
        let data = read(&[first], None).unwrap();
        let why = data
            .truncated
            .as_ref()
            .map(Cut::to_string)
            .unwrap_or_default();
        assert!(why.contains("recording.mcap"), "{why}");
        assert!(
            data.cycles > 1000 && data.cycles < CYCLES,
            "{}",
            data.cycles
        );
    }

    /// 3.5 s at 1 ms in one segment through the real recorder: a chunk per flush
    /// (every second), the clock metadata outside them. Returns the file's bytes.
    fn record_one_segment(d: &Path) -> Vec<u8> {
        let limits = RecordingLimits {
            segment_bytes: u64::MAX,
            segment_ns: u64::MAX,
            total_bytes: u64::MAX,
        };
        let clock = ClockInfo {
            t0: T0,
            wall_minus_mono_ns: 0,
        };
        let mut r = Recorder::create(&d.join("recording.mcap"), limits, clock).unwrap();
        for k in 0..3500 {
            let t = T0.add_ns(k * 1_000_000);
            r.cycle(&CycleRecord {
                cycle: k,
                t_deadline: t,
                t_wake: t,
                t_cmd: t,
                dof: 2,
                ..CycleRecord::default()
            });
        }
        r.finish();
        std::fs::read(d.join("recording.mcap")).unwrap()
    }

    /// The file's chunks by the mcap crate's indexed reader (the summary's chunk index,
    /// not the linear read under test): (start offset, end offset, cycle numbers in it).
    fn chunks_of(bytes: &[u8]) -> Vec<(u64, u64, Vec<u64>)> {
        let summary = mcap::Summary::read(bytes).unwrap().unwrap();
        summary
            .chunk_indexes
            .iter()
            .map(|c| {
                let cycles = summary
                    .stream_chunk(bytes, c)
                    .unwrap()
                    .map(|m| {
                        let m = m.unwrap();
                        let v: serde_json::Value = serde_json::from_slice(&m.data).unwrap();
                        v["cycle"].as_u64().unwrap()
                    })
                    .collect();
                (
                    c.chunk_start_offset,
                    c.chunk_start_offset + c.chunk_length,
                    cycles,
                )
            })
            .collect()
    }

    /// A recording cut inside a chunk, at a chunk's start, inside its footer, or with
    /// one flipped bit in a chunk or in the clock record outside the chunks: the read
    /// stops at the first record that is missing or unsound, says its byte offset and
    /// why, and hands on exactly the cycles of the chunks before it (placed by the
    /// file's own chunk index).
    #[test]
    fn a_cut_or_damaged_recording_stops_at_its_first_unsound_record_and_places_it() {
        let d = dir("damaged");
        let whole = record_one_segment(&d);
        let f = d.join("recording.mcap");
        assert_eq!(
            read(std::slice::from_ref(&f), None).unwrap().truncated,
            None
        );
        let chunks = chunks_of(&whole);
        assert!(chunks.len() >= 4, "{} chunks", chunks.len());
        assert!(chunks[1].2.len() > 100 && chunks[2].2.len() > 100);
        let last_before = |k: usize| chunks[..k].iter().flat_map(|c| c.2.last()).last().copied();
        let before = |k: usize| chunks[..k].iter().map(|c| c.2.len() as u64).sum::<u64>();
        let read_damaged = |bytes: &[u8]| {
            std::fs::write(&f, bytes).unwrap();
            let data = read(std::slice::from_ref(&f), None).unwrap();
            let cut = data.truncated.clone().expect("the damage is seen");
            assert_eq!(cut.file_bytes, bytes.len() as u64);
            (data, cut)
        };
        // Cut inside chunk 2.
        let (c2, e2) = (chunks[2].0, chunks[2].1);
        let (data, cut) = read_damaged(&whole[..(c2 + (e2 - c2) / 2) as usize]);
        assert_eq!(cut.offset, c2, "{cut}");
        assert!(
            cut.why.contains("bytes into this record (cut short)"),
            "{cut}"
        );
        assert!(!cut.messages_whole);
        assert_eq!(data.cycles, before(2));
        assert_eq!(cut.last_cycle.as_ref().map(|c| c.cycle), last_before(2));
        // Cut where chunk 2 starts: chunks 0 and 1 and their indexes are whole.
        let (data, cut) = read_damaged(&whole[..c2 as usize]);
        assert_eq!(cut.offset, c2, "{cut}");
        assert!(cut.why.contains("ends after a whole record"), "{cut}");
        assert_eq!(data.cycles, before(2));
        // Cut inside the footer: every message was read.
        let (data, cut) = read_damaged(&whole[..whole.len() - 10]);
        assert!(cut.messages_whole, "{cut}");
        assert!(cut.offset > chunks.last().unwrap().1, "{cut}");
        assert_eq!(data.cycles, 3500);
        // One bit flipped in chunk 2's data: nothing of chunk 2 is used.
        let mut flipped = whole.clone();
        flipped[(c2 + (e2 - c2) / 2) as usize] ^= 0x10;
        let (data, cut) = read_damaged(&flipped);
        assert_eq!(cut.offset, c2, "{cut}");
        assert!(cut.why.starts_with("corrupt"), "{cut}");
        assert_eq!(data.cycles, before(2));
        assert_eq!(cut.last_cycle.as_ref().map(|c| c.cycle), last_before(2));
        // One bit flipped in the clock record (outside the chunks, under the data
        // section's CRC only): the times read may be wrong, so no cycle is sound.
        let t0 = T0.0.to_string();
        let at = whole
            .windows(t0.len())
            .position(|w| w == t0.as_bytes())
            .expect("the clock record");
        let mut flipped = whole.clone();
        flipped[at] ^= 0x01;
        let (_, cut) = read_damaged(&flipped);
        assert!(cut.why.contains("Data section CRC failed"), "{cut}");
        assert_eq!(cut.last_cycle, None, "{cut}");
        assert!(!cut.messages_whole);
        let shown = cut.to_string();
        assert!(shown.contains("recording.mcap: cut at byte"), "{shown}");
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A mode event naming a mode chunkrt does not write is refused by name, as a
    /// record that does not parse: what came before it stays, the reason says which
    /// name and which modes there are.
    #[test]
    fn a_mode_event_with_an_unknown_mode_stops_the_read_and_says_which() {
        let d = dir("unknown-mode");
        let limits = RecordingLimits {
            segment_bytes: u64::MAX,
            segment_ns: u64::MAX,
            total_bytes: u64::MAX,
        };
        let clock = ClockInfo {
            t0: T0,
            wall_minus_mono_ns: 0,
        };
        let mut r = Recorder::create(&d.join("recording.mcap"), limits, clock).unwrap();
        r.event(&json!({"t_s": 0.1, "event": "mode", "from": "Playing", "to": "Holding"}));
        r.event(&json!({"t_s": 0.2, "event": "mode", "from": "Holding", "to": "Parked"}));
        r.finish();
        let data = read(&segments(&d).unwrap(), None).unwrap();
        assert_eq!(data.modes.len(), 1);
        assert_eq!(data.modes[0].1, Mode::Holding);
        let why = data
            .truncated
            .as_ref()
            .map(Cut::to_string)
            .unwrap_or_default();
        assert!(
            why.contains("`to`") && why.contains("`Parked` is not a mode chunkrt records"),
            "{why}"
        );
    }

    #[test]
    fn a_directory_without_a_recording_is_named_in_the_error() {
        let d = dir("empty");
        let e = segments(&d).unwrap_err();
        assert!(matches!(e, ReadError::NoRecording(_)), "{e}");
        let e = e.to_string();
        assert!(
            e.contains("no recording") && e.contains("chunkrt-readback-empty"),
            "{e}"
        );
    }

    /// Issue 37: a read error was stored as a recording cut short, and `chunkrt plot`
    /// then said "the recording holds no cycle". `/proc/self/mem` opens as a regular
    /// file and its first read fails with EIO (address 0 is not mapped): the kernel is
    /// the oracle.
    #[test]
    fn a_read_error_is_reported_as_itself_naming_file_and_os_error() {
        let f = PathBuf::from("/proc/self/mem");
        match read(std::slice::from_ref(&f), None) {
            Err(e) => {
                assert!(matches!(e, ReadError::Read { .. }), "{e}");
                let e = e.to_string();
                assert!(e.contains("/proc/self/mem"), "{e}");
                assert!(e.contains("os error 5"), "{e}");
            }
            Ok(d) => panic!("read as a recording cut short: {:?}", d.truncated),
        }
    }
}
