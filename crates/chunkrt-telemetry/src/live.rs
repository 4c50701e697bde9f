//! The run seen live, off the real-time threads: the telemetry thread publishes a
//! [`Snapshot`] of what it has drained (counters, gate interventions per constraint,
//! every stage's latency percentiles from its HDR histogram, the mode, the wear so far)
//! into a [`LiveSlot`]; at the end the runtime publishes the report's own values there
//! (`final`). Readers take the newest snapshot without ever waiting on the control
//! thread: `serve` (the OpenMetrics/Prometheus endpoint, `[metrics]`) renders it with
//! `encode`.

pub mod encode;
pub mod serve;

use crate::report::{MetricSummary, Report};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// What a live reader sees of the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Seconds since the loop's start.
    pub t_s: f64,
    /// The executor's mode (`Playing`, `Decelerating`, `Holding`, `SafeStop`), once a
    /// cycle was drained.
    pub mode: Option<&'static str>,
    /// The run has ended: these are the report's values.
    pub ended: bool,
    /// Every stage's latency summary (ns), as the report's `metrics`.
    pub metrics: BTreeMap<String, MetricSummary>,
    /// Counters, as the report's `counters`.
    pub counters: BTreeMap<String, u64>,
    /// Gate interventions per constraint (joint-cycles), as the report's `gate`.
    pub gate: BTreeMap<String, u64>,
    /// Wear so far, as the report's `wear` (numbers and arrays of numbers per joint).
    pub wear: serde_json::Value,
    /// Each joint's drive state, as the last cycle's feedback said.
    pub drive_states: Vec<&'static str>,
    /// The thermal monitor's I²t load per joint (1: the rating); empty without one.
    pub thermal_load: Vec<f64>,
}

impl Snapshot {
    /// The report's values, at the run's end; the drive states and thermal loads (which
    /// the report does not hold) carried over from `last`, the run's last snapshot.
    pub fn from_report(report: &Report, last: Option<&Snapshot>) -> Snapshot {
        let mode = report
            .events
            .iter()
            .rev()
            .find_map(|e| e.get("to").and_then(|m| m.as_str()))
            .and_then(|m| {
                crate::names::MODES
                    .iter()
                    .map(|&x| crate::names::mode_name(x))
                    .find(|&n| n == m)
            });
        Snapshot {
            t_s: report.duration_s,
            mode,
            ended: true,
            metrics: report.metrics.clone(),
            counters: report.counters.clone(),
            gate: report.gate.clone(),
            wear: report
                .extra
                .get("wear")
                .cloned()
                .unwrap_or(serde_json::Value::Null),
            drive_states: last.map(|l| l.drive_states.clone()).unwrap_or_default(),
            thermal_load: last.map(|l| l.thermal_load.clone()).unwrap_or_default(),
        }
    }
}

/// The newest snapshot, shared between the telemetry thread and the readers.
#[derive(Default, Debug)]
pub struct LiveSlot {
    latest: Mutex<Option<Arc<Snapshot>>>,
}

impl LiveSlot {
    /// Replaces the snapshot.
    pub fn publish(&self, s: Snapshot) {
        if let Ok(mut l) = self.latest.lock() {
            *l = Some(Arc::new(s));
        }
    }

    /// The newest snapshot (none before the first drain).
    pub fn latest(&self) -> Option<Arc<Snapshot>> {
        self.latest.lock().ok().and_then(|l| l.clone())
    }
}
