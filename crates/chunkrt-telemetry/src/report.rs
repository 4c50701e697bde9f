//! The run report: the text table and `report.json` (fields documented in docs/records.md;
//! its JSON Schema, generated from [`Report`], is docs/reference/report.schema.json).

use crate::metrics::{MetricSet, METRICS};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Report schema version; bumped only on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// What the host gave the run.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct HostInfo {
    /// `uname -r`.
    pub kernel: String,
    /// `PREEMPT_RT`, `PREEMPT_DYNAMIC (full)`, `PREEMPT`, `VOLUNTARY`, ...
    pub preempt: String,
    /// Whether the kernel is a PREEMPT_RT kernel.
    pub realtime_kernel: bool,
    /// Whether SCHED_FIFO took effect on the control thread.
    pub sched_fifo: bool,
    /// Why SCHED_FIFO did not take effect (absent when it did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sched_fifo_error: Option<String>,
    /// SCHED_FIFO priority requested.
    pub priority: u8,
    /// Whether mlockall took effect.
    pub mlockall: bool,
    /// Why mlockall did not take effect.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mlockall_error: Option<String>,
    /// Whether `/dev/cpu_dma_latency` was held at 0 while the control loop ran
    /// (no deep C-states; `control.hold_cpu_dma_latency`).
    pub cpu_dma_latency_held: bool,
    /// Why it was not held: turned off in the configuration, no device, no permission.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_dma_latency_error: Option<String>,
    /// CPU the control thread was pinned to (absent: not pinned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_cpu: Option<usize>,
    /// Online CPUs.
    pub cpus: usize,
}

/// Percentiles of one metric, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, schemars::JsonSchema)]
pub struct MetricSummary {
    /// Always `ns`.
    pub unit: &'static str,
    /// Samples.
    pub count: u64,
    /// Smallest.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 75th percentile.
    pub p75: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

/// The run report (`report.json`; `docs/reference/report.schema.json` is its schema,
/// generated from this type by `chunkrt reference schema report`).
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
#[schemars(title = "report.json")]
pub struct Report {
    /// The report's schema version ([`SCHEMA_VERSION`]): bumped only on incompatible changes.
    pub schema: u32,
    /// chunkrt's version.
    pub chunkrt_version: String,
    /// What the host gave the run.
    pub host: HostInfo,
    /// Short description of the configuration (file, backend, policy, periods).
    pub config: BTreeMap<String, serde_json::Value>,
    /// Wall-clock duration of the control loop.
    pub duration_s: f64,
    /// One entry per metric with samples.
    pub metrics: BTreeMap<String, MetricSummary>,
    /// Counters (cycles, deadline_overruns, chunks_*, fallback_entries, ring_drops, ...).
    pub counters: BTreeMap<String, u64>,
    /// Largest steps at seams and the number of seams.
    pub seam: BTreeMap<String, f64>,
    /// Gate interventions per constraint.
    pub gate: BTreeMap<String, u64>,
    /// Mode changes, rejections and backend errors (first 10 000).
    pub events: Vec<serde_json::Value>,
    /// Blocks added by other commands (`budget`, `baseline`, `injected`, ...).
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Percentiles of every metric that has samples.
pub fn summarize(set: &MetricSet) -> BTreeMap<String, MetricSummary> {
    let mut out = BTreeMap::new();
    for (m, name, _) in METRICS.iter() {
        let h = set.get(*m);
        if h.is_empty() {
            continue;
        }
        out.insert(
            name.to_string(),
            MetricSummary {
                unit: "ns",
                count: h.len(),
                min: h.min(),
                p50: h.value_at_quantile(0.50),
                p75: h.value_at_quantile(0.75),
                p90: h.value_at_quantile(0.90),
                p99: h.value_at_quantile(0.99),
                p999: h.value_at_quantile(0.999),
                max: h.max(),
                mean: h.mean(),
            },
        );
    }
    out
}

/// The table's line of the `command_stream` block `c` (the command oracle's figures).
fn command_stream_line(s: &mut String, c: &serde_json::Value) {
    // A figure with no samples (nothing played, no seam) is `-`, never NaN.
    let f = |v: &serde_json::Value, digits: usize| {
        v.as_f64()
            .map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
    };
    if c["cycles"].as_u64() == Some(0) {
        let _ = writeln!(
            s,
            "command stream (while playing): nothing played ({} cycles, none with the \
             policy playing): no figures",
            c["other_cycles"].as_u64().unwrap_or(0)
        );
    } else {
        let _ = writeln!(
            s,
            "command stream (while playing): gate clamped {}% of cycles; |proposed-executed| P99 {} max \
             {} rad; of the limit: acceleration P99.9 {} (seams {}), jerk P99.9 {} \
             (seams {})",
            f(&c["gate_clamped_pct"], 1),
            f(&c["proposal_gap_rad"]["p99"], 4),
            f(&c["proposal_gap_rad"]["max"], 4),
            f(&c["acc_ratio"]["all"]["p999"], 2),
            f(&c["acc_ratio"]["seam"]["p999"], 2),
            f(&c["jerk_ratio"]["all"]["p999"], 2),
            f(&c["jerk_ratio"]["seam"]["p999"], 2),
        );
    }
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

impl Report {
    /// The latency table (metric, count, P50, P99, P99.9, max in microseconds) and
    /// the counters, as printed at the end of a run.
    pub fn table(&self) -> String {
        let mut s = String::new();
        self.latency_rows(&mut s);
        let counters: Vec<String> = self
            .counters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = writeln!(s, "counters: {}", counters.join(" "));
        if !self.seam.is_empty() {
            let seam: Vec<String> = self
                .seam
                .iter()
                .map(|(k, v)| format!("{k}={v:.4}"))
                .collect();
            let _ = writeln!(s, "seams: {}", seam.join(" "));
        }
        if let Some(c) = self.extra.get("command_stream") {
            command_stream_line(&mut s, c);
        }
        let gate: Vec<String> = self
            .gate
            .iter()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if !gate.is_empty() {
            let _ = writeln!(s, "gate interventions: {}", gate.join(" "));
        }
        self.host_line(&mut s);
        s
    }

    /// The table's head and a row per metric with samples, in report order.
    fn latency_rows(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "{:<18} {:>9} {:>10} {:>10} {:>10} {:>10}",
            "metric (us)", "count", "P50", "P99", "P99.9", "max"
        );
        for (_, name, _) in METRICS.iter() {
            if let Some(m) = self.metrics.get(*name) {
                let _ = writeln!(
                    s,
                    "{:<18} {:>9} {:>10} {:>10} {:>10} {:>10}",
                    name,
                    m.count,
                    us(m.p50),
                    us(m.p99),
                    us(m.p999),
                    us(m.max)
                );
            }
        }
    }

    /// What the host gave the run: kernel, SCHED_FIFO, mlockall, cpu_dma_latency.
    fn host_line(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "host: kernel {} ({}), SCHED_FIFO {}, mlockall {}, cpu_dma_latency held at 0 {}",
            self.host.kernel,
            self.host.preempt,
            if self.host.sched_fifo { "yes" } else { "NO" },
            if self.host.mlockall { "yes" } else { "NO" },
            if self.host.cpu_dma_latency_held {
                "yes"
            } else {
                "NO"
            },
        );
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}
