//! Reading a run's `recording.mcap` back (an independent reader of what the
//! backend was sent: the `mcap` crate's own parser and the JSON messages).

use std::path::Path;

/// One `/chunkrt/cycle` message.
#[derive(Clone, Debug, Default)]
pub struct RecordedCycle {
    /// Cycle number.
    pub cycle: u64,
    /// Its wake, s since the run's start (the clock of `events.jsonl`'s `t_s`).
    pub t_s: f64,
    /// Deadline, monotonic ns.
    pub t_deadline_ns: u64,
    /// Executor mode name.
    pub mode: String,
    /// Gate mask.
    pub gate_mask: u32,
    /// Sequence number of the chunk played (0 when none).
    pub chunk_seq: u64,
    /// Deadlines skipped before this cycle (the loop woke too late for them).
    pub missed: u32,
    /// Executor proposal per joint.
    pub setpoint_rad: Vec<f64>,
    /// Command per joint, as the backend received it.
    pub command_rad: Vec<f64>,
    /// Measured position per joint.
    pub feedback_rad: Vec<f64>,
    /// Measured torque per joint (empty where the message has none).
    pub feedback_torque_nm: Vec<f64>,
    /// Per joint, the constraints that acted on it (all 0 where `gate_mask` is 0).
    pub gate_mask_joints: Vec<u32>,
    /// With `[episodes]`: the episode and phase the command was made in.
    pub episode: Option<(u64, String)>,
    /// With a residual policy: the base's own setpoint per joint (empty without one).
    pub base_rad: Vec<f64>,
    /// With a residual policy: the correction let through per joint (empty without one).
    pub residual_rad: Vec<f64>,
    /// With a wrist force/torque sensor: the force on the tool, N, base frame (empty
    /// without one).
    pub force_n: Vec<f64>,
}

/// Every cycle and every event (as JSON) in `path` (the first segment, which holds a
/// run of the tests' length), in file order. A cycle message that lacks a field, or
/// holds a number that is not finite (JSON writes NaN as `null`), is an error naming
/// the field and the cycle: a default of 0 would let a judge pass on nothing.
pub fn read(path: &Path) -> Result<(Vec<RecordedCycle>, Vec<serde_json::Value>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let stream = mcap::MessageStream::new(&bytes).map_err(|e| e.to_string())?;
    let (mut cycles, mut events) = (Vec::new(), Vec::new());
    for m in stream {
        let m = m.map_err(|e| e.to_string())?;
        let v: serde_json::Value =
            serde_json::from_slice(&m.data).map_err(|e| format!("message: {e}"))?;
        match m.channel.topic.as_str() {
            "/chunkrt/cycle" => cycles.push(cycle(&v, cycles.len())?),
            "/chunkrt/events" => events.push(v),
            _ => {}
        }
    }
    Ok((cycles, events))
}

/// One chunk of a recording, from its summary's chunk index.
#[derive(Clone, Debug)]
pub struct ChunkSpan {
    /// Byte offset of the chunk record.
    pub start: u64,
    /// Byte offset just past it.
    pub end: u64,
    /// The numbers of the cycles it holds, in order.
    pub cycles: Vec<u64>,
}

/// The chunks of the (whole) recording `path` in file order, read through its summary's
/// chunk index (the mcap crate's indexed reader: where each chunk lies and what it
/// holds), for tests that cut or damage a recording at a known place.
pub fn chunks(path: &Path) -> Result<Vec<ChunkSpan>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let summary = mcap::Summary::read(&bytes)
        .map_err(|e| e.to_string())?
        .ok_or("no summary")?;
    let mut out = Vec::new();
    for c in &summary.chunk_indexes {
        let mut cycles = Vec::new();
        for m in summary.stream_chunk(&bytes, c).map_err(|e| e.to_string())? {
            let m = m.map_err(|e| e.to_string())?;
            if m.channel.topic == "/chunkrt/cycle" {
                let v: serde_json::Value =
                    serde_json::from_slice(&m.data).map_err(|e| format!("message: {e}"))?;
                cycles.push(v["cycle"].as_u64().ok_or("a cycle without its number")?);
            }
        }
        out.push(ChunkSpan {
            start: c.chunk_start_offset,
            end: c.chunk_start_offset + c.chunk_length,
            cycles,
        });
    }
    Ok(out)
}

/// The messages of `topic` in `path` (the first segment), as JSON, in file order.
fn messages(path: &Path, topic: &str) -> Result<Vec<serde_json::Value>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let stream = mcap::MessageStream::new(&bytes).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for m in stream {
        let m = m.map_err(|e| e.to_string())?;
        if m.channel.topic == topic {
            out.push(serde_json::from_slice(&m.data).map_err(|e| format!("message: {e}"))?);
        }
    }
    Ok(out)
}

/// One `/chunkrt/image` message: a camera image as the policy was given it.
#[derive(Clone, Debug)]
pub struct RecordedImage {
    /// The camera's frame counter.
    pub seq: u64,
    /// Capture time, monotonic ns (the message's `timestamp`).
    pub t_capture_ns: u64,
    /// The image file (its `format` says which).
    pub bytes: Vec<u8>,
    /// `png`.
    pub format: String,
}

/// Every camera image in `path` (the first segment), in file order.
pub fn images(path: &Path) -> Result<Vec<RecordedImage>, String> {
    use base64::Engine;
    let mut out = Vec::new();
    for v in messages(path, "/chunkrt/image")? {
        let (Some(seq), Some(sec), Some(nsec), Some(data), Some(format)) = (
            v["seq"].as_u64(),
            v["timestamp"]["sec"].as_u64(),
            v["timestamp"]["nsec"].as_u64(),
            v["data"].as_str(),
            v["format"].as_str(),
        ) else {
            return Err(format!(
                "image message without seq, timestamp, data or format: {v}"
            ));
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| format!("image {seq}: {e}"))?;
        out.push(RecordedImage {
            seq,
            t_capture_ns: sec * 1_000_000_000 + nsec,
            bytes,
            format: format.to_string(),
        });
    }
    Ok(out)
}

/// A published chunk's decisions, from its `/chunkrt/inference` message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    /// The cycle that captured its observation.
    pub obs_seq: u64,
    /// The goal it was computed toward.
    pub goal: u64,
    /// Candidates drawn.
    pub candidates: u64,
    /// The candidate published.
    pub chosen: u64,
}

/// Every published chunk's decisions in `path` (the first segment), in file order.
/// A published inference message without them is an error.
pub fn published(path: &Path) -> Result<Vec<Published>, String> {
    let mut out = Vec::new();
    for v in messages(path, "/chunkrt/inference")? {
        if v["status"] != "published" {
            continue;
        }
        let field = |k: &str| v[k].as_u64();
        match (
            v["obs"]["seq"].as_u64(),
            field("goal"),
            field("candidates"),
            field("chosen"),
        ) {
            (Some(obs_seq), Some(goal), Some(candidates), Some(chosen)) => out.push(Published {
                obs_seq,
                goal,
                candidates,
                chosen,
            }),
            _ => {
                return Err(format!(
                    "published inference without obs.seq, goal, candidates or chosen: {v}"
                ))
            }
        }
    }
    Ok(out)
}

/// The cycle of message `v`, the `index`-th cycle message of the file.
fn cycle(v: &serde_json::Value, index: usize) -> Result<RecordedCycle, String> {
    let missing = |k: &str, what: &str| {
        format!("cycle message {index}: field {k:?} is missing or not {what}: {v}")
    };
    let int = |k: &str| {
        v[k].as_u64()
            .ok_or_else(|| missing(k, "an unsigned integer"))
    };
    let small = |k: &str| int(k).and_then(|x| u32::try_from(x).map_err(|_| missing(k, "a u32")));
    let arr = |k: &str| -> Result<Vec<f64>, String> {
        let a = v[k].as_array().ok_or_else(|| missing(k, "an array"))?;
        a.iter()
            .map(|x| x.as_f64().filter(|x| x.is_finite()))
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| missing(k, "an array of finite numbers (NaN is written as null)"))
    };
    let c = RecordedCycle {
        cycle: int("cycle")?,
        t_s: v["t_s"]
            .as_f64()
            .ok_or_else(|| missing("t_s", "a number"))?,
        t_deadline_ns: int("t_deadline_ns")?,
        mode: v["mode"]
            .as_str()
            .ok_or_else(|| missing("mode", "a string"))?
            .to_string(),
        gate_mask: small("gate_mask")?,
        chunk_seq: int("chunk_seq")?,
        missed: small("missed")?,
        setpoint_rad: arr("setpoint_rad")?,
        command_rad: arr("command_rad")?,
        feedback_rad: arr("feedback_rad")?,
        feedback_torque_nm: if v.get("feedback_torque_nm").is_some() {
            arr("feedback_torque_nm")?
        } else {
            Vec::new()
        },
        episode: match (v["episode"].as_u64(), v["phase"].as_str()) {
            (Some(e), Some(p)) => Some((e, p.to_string())),
            _ => None,
        },
        gate_mask_joints: match v.get("gate_mask_joints") {
            Some(a) => a
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok()))
                        .collect::<Option<Vec<u32>>>()
                })
                .ok_or_else(|| missing("gate_mask_joints", "an array of u32"))?,
            None => Vec::new(),
        },
        force_n: if v.get("force_n").is_some() {
            arr("force_n")?
        } else {
            Vec::new()
        },
        base_rad: if v.get("base_rad").is_some() {
            arr("base_rad")?
        } else {
            Vec::new()
        },
        residual_rad: if v.get("residual_rad").is_some() {
            arr("residual_rad")?
        } else {
            Vec::new()
        },
    };
    let n = c.command_rad.len();
    if n == 0 || c.setpoint_rad.len() != n || c.feedback_rad.len() != n {
        return Err(format!(
            "cycle message {index}: setpoint_rad, command_rad and feedback_rad hold {}, {n} and {} joints",
            c.setpoint_rad.len(),
            c.feedback_rad.len()
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message() -> serde_json::Value {
        json!({
            "cycle": 7, "t_s": 0.14, "t_deadline_ns": 7_000_000, "mode": "Playing", "gate_mask": 0,
            "chunk_seq": 2, "missed": 0, "setpoint_rad": [0.1, 0.2],
            "command_rad": [0.1, 0.2], "feedback_rad": [0.1, 0.2]
        })
    }

    /// `messages` written as `/chunkrt/cycle` messages into a recording of its own,
    /// read back by [`read`].
    fn read_back(name: &str, messages: &[serde_json::Value]) -> Result<Vec<RecordedCycle>, String> {
        let path = std::env::temp_dir().join(format!(
            "chunkrt-tests-recording-{name}-{}.mcap",
            std::process::id()
        ));
        let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut w = mcap::Writer::new(file).unwrap();
        let schema = w.add_schema("chunkrt.Cycle", "jsonschema", b"{}").unwrap();
        let channel = w
            .add_channel(schema, "/chunkrt/cycle", "json", &Default::default())
            .unwrap();
        for (k, m) in messages.iter().enumerate() {
            let header = mcap::records::MessageHeader {
                channel_id: channel,
                sequence: k as u32,
                log_time: k as u64,
                publish_time: k as u64,
            };
            w.write_to_known_channel(&header, m.to_string().as_bytes())
                .unwrap();
        }
        w.finish().unwrap();
        drop(w);
        let out = read(&path).map(|(c, _)| c);
        let _ = std::fs::remove_file(&path);
        out
    }

    #[test]
    fn a_whole_message_reads() {
        let c = read_back("whole", &[message()]).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].cycle, c[0].chunk_seq, c[0].mode.as_str()),
            (7, 2, "Playing")
        );
        assert_eq!(c[0].command_rad, vec![0.1, 0.2]);
    }

    #[test]
    fn a_missing_field_is_refused_by_name() {
        for k in [
            "cycle",
            "t_s",
            "t_deadline_ns",
            "mode",
            "missed",
            "command_rad",
        ] {
            let mut v = message();
            v.as_object_mut().unwrap().remove(k);
            let e = read_back(k, &[message(), v]).unwrap_err();
            assert!(
                e.contains(&format!("{k:?}")) && e.contains("cycle message 1"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_nan_is_refused() {
        // serde_json writes a NaN as null.
        let mut v = message();
        v["command_rad"] = json!([0.1, f64::NAN]);
        assert_eq!(v["command_rad"][1], serde_json::Value::Null);
        let e = read_back("nan", &[v]).unwrap_err();
        assert!(e.contains("\"command_rad\""), "{e}");
    }

    #[test]
    fn joints_that_disagree_are_refused() {
        let mut v = message();
        v["feedback_rad"] = json!([0.1]);
        assert!(read_back("joints", &[v]).is_err());
    }
}
