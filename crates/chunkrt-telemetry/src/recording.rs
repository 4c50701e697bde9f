//! The full-rate recording: every control cycle and every event in an MCAP file.
//!
//! Written by the telemetry thread from the same records the collector drains, so
//! the control thread never waits on it. Messages are JSON with a JSON schema per
//! channel, which Foxglove and PlotJuggler open without plug-ins; log and publish
//! times are the monotonic clock in nanoseconds (the deadline of a cycle, the time
//! of an event), and the metadata record `clock` holds the wall-clock offset
//! (`realtime_minus_monotonic_ns`) to place them in calendar time.
//!
//! Channels:
//! * `/chunkrt/cycle`: per cycle the mode, gate mask, chunk, and per joint the
//!   executor's proposal (`setpoint_rad`), the command after the gate as the backend
//!   received it (`command_rad`) and the measured positions (`feedback_rad`);
//! * `/chunkrt/event`: mode changes, rejected chunks, backend errors, gate
//!   saturation (the lines of `events.jsonl`).
//!
//! Bounded: past `max_bytes` nothing more is written and the messages not written
//! are counted (`recording_dropped` in the report).

use crate::records::CycleRecord;
use mcap::records::{MessageHeader, Metadata};
use mcap::Writer;
use serde_json::json;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

/// JSON schema of a cycle message.
const CYCLE_SCHEMA: &str = r#"{
  "type": "object",
  "title": "chunkrt.Cycle",
  "properties": {
    "cycle": {"type": "integer"},
    "t_deadline_ns": {"type": "integer"},
    "t_wake_ns": {"type": "integer"},
    "missed": {"type": "integer"},
    "mode": {"type": "string"},
    "gate_mask": {"type": "integer"},
    "chunk_seq": {"type": "integer"},
    "backend_error": {"type": "boolean"},
    "setpoint_rad": {"type": "array", "items": {"type": "number"}},
    "command_rad": {"type": "array", "items": {"type": "number"}},
    "feedback_rad": {"type": "array", "items": {"type": "number"}}
  }
}"#;

/// JSON schema of an event message.
const EVENT_SCHEMA: &str = r#"{
  "type": "object",
  "title": "chunkrt.Event",
  "properties": {
    "t_s": {"type": "number"},
    "event": {"type": "string"}
  }
}"#;

/// Topic of the per-cycle channel.
pub const CYCLE_TOPIC: &str = "/chunkrt/cycle";
/// Topic of the event channel.
pub const EVENT_TOPIC: &str = "/chunkrt/event";

/// An open MCAP recording.
pub struct Recording {
    writer: Writer<BufWriter<File>>,
    cycle_channel: u16,
    event_channel: u16,
    seq: u32,
    max_bytes: u64,
    written_bytes: u64,
    dropped: u64,
    error: Option<String>,
}

/// Monotonic and real-time clocks read back to back: their difference places
/// monotonic timestamps in calendar time.
fn realtime_minus_monotonic_ns() -> i128 {
    let read = |clock| {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
        unsafe { libc::clock_gettime(clock, &mut ts) };
        ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
    };
    let mono = read(libc::CLOCK_MONOTONIC);
    read(libc::CLOCK_REALTIME) - mono
}

impl Recording {
    /// Creates `path` with both channels; `max_bytes` bounds the messages written.
    pub fn create(path: &Path, max_bytes: u64) -> Result<Self, String> {
        let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mcap_err = |e: mcap::McapError| format!("{}: {e}", path.display());
        let mut writer = Writer::new(BufWriter::new(file)).map_err(mcap_err)?;
        let cycle_schema = writer
            .add_schema("chunkrt.Cycle", "jsonschema", CYCLE_SCHEMA.as_bytes())
            .map_err(mcap_err)?;
        let event_schema = writer
            .add_schema("chunkrt.Event", "jsonschema", EVENT_SCHEMA.as_bytes())
            .map_err(mcap_err)?;
        let none = BTreeMap::new();
        let cycle_channel = writer
            .add_channel(cycle_schema, CYCLE_TOPIC, "json", &none)
            .map_err(mcap_err)?;
        let event_channel = writer
            .add_channel(event_schema, EVENT_TOPIC, "json", &none)
            .map_err(mcap_err)?;
        let mut clock = BTreeMap::new();
        clock.insert("log_time".into(), "CLOCK_MONOTONIC, ns".into());
        clock.insert(
            "realtime_minus_monotonic_ns".into(),
            realtime_minus_monotonic_ns().to_string(),
        );
        writer
            .write_metadata(&Metadata {
                name: "clock".into(),
                metadata: clock,
            })
            .map_err(mcap_err)?;
        Ok(Recording {
            writer,
            cycle_channel,
            event_channel,
            seq: 0,
            max_bytes,
            written_bytes: 0,
            dropped: 0,
            error: None,
        })
    }

    fn write(&mut self, channel_id: u16, t_ns: u64, data: &[u8]) {
        if self.error.is_some() || self.written_bytes + data.len() as u64 > self.max_bytes {
            self.dropped += 1;
            return;
        }
        self.seq = self.seq.wrapping_add(1);
        let header = MessageHeader {
            channel_id,
            sequence: self.seq,
            log_time: t_ns,
            publish_time: t_ns,
        };
        match self.writer.write_to_known_channel(&header, data) {
            Ok(()) => self.written_bytes += data.len() as u64,
            Err(e) => {
                self.dropped += 1;
                self.error = Some(e.to_string());
            }
        }
    }

    /// Records one cycle.
    pub fn cycle(&mut self, r: &CycleRecord, mode: &str) {
        let n = (r.dof as usize).min(r.cmd_pos_rad.len());
        let v = json!({
            "cycle": r.cycle,
            "t_deadline_ns": r.t_deadline.as_ns(),
            "t_wake_ns": r.t_wake.as_ns(),
            "missed": r.missed,
            "mode": mode,
            "gate_mask": r.gate_mask,
            "chunk_seq": r.chunk_seq,
            "backend_error": r.backend_error,
            "setpoint_rad": &r.setpoint_pos_rad[..n],
            "command_rad": &r.cmd_pos_rad[..n],
            "feedback_rad": &r.fb_pos_rad[..n],
        });
        let data = v.to_string();
        let channel = self.cycle_channel;
        self.write(channel, r.t_deadline.as_ns(), data.as_bytes());
    }

    /// Records one event (a line of `events.jsonl`) at monotonic time `t_ns`.
    pub fn event(&mut self, t_ns: u64, v: &serde_json::Value) {
        let data = v.to_string();
        let channel = self.event_channel;
        self.write(channel, t_ns, data.as_bytes());
    }

    /// Messages not written (size bound reached or a write error).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Writes the summary and closes the file; returns the first error, if any.
    pub fn finish(mut self) -> Option<String> {
        if let Err(e) = self.writer.finish() {
            self.error.get_or_insert_with(|| e.to_string());
        }
        self.error
    }
}
