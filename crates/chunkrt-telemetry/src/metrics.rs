//! The timed stages, each an HDR histogram with fixed bounds (never resized).

use hdrhistogram::Histogram;

/// A timed stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(usize)]
pub enum Metric {
    /// Actual wake minus the absolute deadline (as cyclictest measures it).
    WakeLatency,
    /// |actual period - nominal period| between consecutive wakes.
    PeriodJitter,
    /// Wake to command handed to the backend.
    CycleTime,
    /// Command handed to the backend to its feedback back: the bus's process-data
    /// exchange, or the simulated plant's steps up to the deadline.
    Exchange,
    /// Bus round trip of the process-data exchange.
    BusRtt,
    /// Observation taken to chunk published, per chunk.
    InferenceLatency,
    /// One sampler step.
    InferenceStep,
    /// Chunk published to its first use by the control loop.
    HandoffLatency,
    /// Age of the chunk in use at each cycle (now - t_obs).
    ChunkAge,
    /// Observation age when inference starts.
    ObsAge,
    /// Observation capture to the first command derived from it leaving for the drives.
    E2eLatency,
    /// Camera: capture (start of exposure) to the frame ready for inference.
    CameraLatency,
    /// Camera: time between the capture of consecutive delivered frames.
    FrameInterval,
    /// With DC: |arrival of the cycle's frame at the reference clock - (SYNC0 + shift)|.
    SyncPhase,
    /// A policy server's chunk: request sent to reply read (network and server).
    NetworkRtt,
    /// A policy server's own time for a chunk, as it said (openpi's `server_timing`).
    ServerTime,
}

/// Every metric, in report order, with its name and description.
pub const METRICS: [(Metric, &str, &str); 16] = [
    (
        Metric::WakeLatency,
        "wake_latency",
        "actual wake - deadline",
    ),
    (
        Metric::PeriodJitter,
        "period_jitter",
        "|actual period - nominal|",
    ),
    (
        Metric::CycleTime,
        "cycle_time",
        "wake -> command to backend",
    ),
    (
        Metric::Exchange,
        "exchange",
        "command to backend -> feedback back (bus exchange, or the plant's steps)",
    ),
    (Metric::BusRtt, "bus_rtt", "bus round trip"),
    (
        Metric::InferenceLatency,
        "inference_latency",
        "observation -> chunk published",
    ),
    (Metric::InferenceStep, "inference_step", "one sampler step"),
    (
        Metric::HandoffLatency,
        "handoff_latency",
        "publish -> first use",
    ),
    (Metric::ChunkAge, "chunk_age", "age of the chunk in use"),
    (
        Metric::ObsAge,
        "obs_age",
        "observation age at inference start",
    ),
    (
        Metric::E2eLatency,
        "e2e_latency",
        "observation -> first command on the bus",
    ),
    (
        Metric::CameraLatency,
        "camera_latency",
        "image capture -> frame ready",
    ),
    (
        Metric::FrameInterval,
        "frame_interval",
        "capture to capture of delivered frames",
    ),
    (
        Metric::SyncPhase,
        "sync0_phase",
        "|frame at reference clock - SYNC0 - shift|",
    ),
    (
        Metric::NetworkRtt,
        "network_rtt",
        "policy server: request -> reply (network + server)",
    ),
    (
        Metric::ServerTime,
        "server_time",
        "policy server: its own time per chunk",
    ),
];

impl Metric {
    /// The metric's report name.
    pub fn name(self) -> &'static str {
        METRICS[self as usize].1
    }

    /// The metric with this report name.
    pub fn from_name(name: &str) -> Option<Metric> {
        METRICS.iter().find(|m| m.1 == name).map(|m| m.0)
    }
}

/// Largest recordable value: 60 s in ns. Larger values saturate at it.
pub const MAX_VALUE_NS: u64 = 60_000_000_000;

/// One histogram per metric, allocated once.
#[derive(Clone, Debug)]
pub struct MetricSet {
    hist: Vec<Histogram<u64>>,
}

impl Default for MetricSet {
    fn default() -> Self {
        Self::new()
    }
}

impl MetricSet {
    /// Allocates every histogram with fixed bounds (1 ns .. 60 s, 3 significant digits).
    pub fn new() -> Self {
        let hist = METRICS
            .iter()
            .map(|_| {
                let mut h = Histogram::new_with_bounds(1, MAX_VALUE_NS, 3)
                    .expect("constant bounds are valid");
                h.auto(false);
                h
            })
            .collect();
        MetricSet { hist }
    }

    /// Records one value (saturating at the bounds).
    pub fn record(&mut self, m: Metric, value_ns: u64) {
        self.hist[m as usize].saturating_record(value_ns.clamp(1, MAX_VALUE_NS));
    }

    /// The histogram of a metric.
    pub fn get(&self, m: Metric) -> &Histogram<u64> {
        &self.hist[m as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_saturate_at_the_bounds_and_names_round_trip() {
        let mut s = MetricSet::new();
        s.record(Metric::ChunkAge, u64::MAX);
        assert!(s.get(Metric::ChunkAge).max() >= MAX_VALUE_NS);
        assert_eq!(Metric::from_name("e2e_latency"), Some(Metric::E2eLatency));
        for (i, (m, _, _)) in METRICS.iter().enumerate() {
            assert_eq!(*m as usize, i);
        }
    }
}
