//! Reading a run's `recording.mcap` back (an independent reader of what the
//! backend was sent: the `mcap` crate's own parser and the JSON messages).

use std::path::Path;

/// One `/chunkrt/cycle` message.
#[derive(Clone, Debug, Default)]
pub struct RecordedCycle {
    /// Cycle number.
    pub cycle: u64,
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
}

/// Every cycle and every event (as JSON) in `path` (the first segment, which holds a
/// run of the tests' length), in file order.
pub fn read(path: &Path) -> Result<(Vec<RecordedCycle>, Vec<serde_json::Value>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let stream = mcap::MessageStream::new(&bytes).map_err(|e| e.to_string())?;
    let (mut cycles, mut events) = (Vec::new(), Vec::new());
    for m in stream {
        let m = m.map_err(|e| e.to_string())?;
        let v: serde_json::Value =
            serde_json::from_slice(&m.data).map_err(|e| format!("message: {e}"))?;
        match m.channel.topic.as_str() {
            "/chunkrt/cycle" => {
                let arr = |k: &str| -> Vec<f64> {
                    v[k].as_array()
                        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
                        .unwrap_or_default()
                };
                cycles.push(RecordedCycle {
                    cycle: v["cycle"].as_u64().unwrap_or(0),
                    t_deadline_ns: v["t_deadline_ns"].as_u64().unwrap_or(0),
                    mode: v["mode"].as_str().unwrap_or("").to_string(),
                    gate_mask: v["gate_mask"].as_u64().unwrap_or(0) as u32,
                    chunk_seq: v["chunk_seq"].as_u64().unwrap_or(0),
                    missed: v["missed"].as_u64().unwrap_or(0) as u32,
                    setpoint_rad: arr("setpoint_rad"),
                    command_rad: arr("command_rad"),
                    feedback_rad: arr("feedback_rad"),
                });
            }
            "/chunkrt/events" => events.push(v),
            _ => {}
        }
    }
    Ok((cycles, events))
}
