//! A [`Snapshot`] in the OpenMetrics text format, through `prometheus-client` (the
//! Prometheus project's own Rust client: its encoder escapes, types and orders what it
//! writes as the format demands). Names, all prefixed `chunkrt_`:
//!
//! | series | what |
//! |---|---|
//! | `<counter>_total` | every counter of the report (`cycles`, `deadline_overruns`, `chunks_expired`, `backend_errors`, ...) |
//! | `gate_interventions_by_constraint_total{constraint}` | gate interventions per constraint (joint-cycles) |
//! | `stage_latency_seconds{stage,quantile}` | every stage's P50, P90, P99, P99.9 (`quantile` 0.5 ... 0.999) |
//! | `stage_latency_max_seconds{stage}`, `stage_samples_total{stage}` | its largest sample, its sample count |
//! | `mode{mode}` | 1 for the executor's mode now, 0 for the others |
//! | `drive_state{joint,state}` | 1 for each joint's drive state now (`enabled`, `fault`, ...) |
//! | `thermal_load{joint}` | the thermal monitor's I²t load (1: the rating), with `[limits.thermal]` |
//! | `run_seconds`, `run_ended` | time since the loop's start; 1 once the values are the report's |
//! | `wear_<key>{joint}`, `wear_shocks_<kind>{joint}` | the wear so far (torque RMS and peak, shocks per joint) |
//!
//! At the run's end the values are the report's own (counters exactly, percentiles
//! from the same histograms).

use super::Snapshot;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(String, String)>;
type GaugeF = Gauge<f64, AtomicU64>;

type Quantile = fn(&crate::report::MetricSummary) -> u64;

/// The quantiles exported of each stage, with the report's field each comes from.
const QUANTILES: [(&str, Quantile); 4] = [
    ("0.5", |m| m.p50),
    ("0.9", |m| m.p90),
    ("0.99", |m| m.p99),
    ("0.999", |m| m.p999),
];

/// A metric name made of `[a-zA-Z0-9_]` only.
fn name(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn label(k: &str, v: impl ToString) -> Labels {
    vec![(k.to_string(), v.to_string())]
}

/// The snapshot as OpenMetrics text (ends with `# EOF`).
pub fn openmetrics(s: &Snapshot) -> String {
    let mut reg = Registry::with_prefix("chunkrt");
    for (k, v) in &s.counters {
        let c = Counter::<u64>::default();
        c.inc_by(*v);
        reg.register(name(k), format!("the report's counter `{k}`"), c);
    }
    let gate = Family::<Labels, Counter<u64>>::default();
    for (k, v) in &s.gate {
        gate.get_or_create(&label("constraint", k)).inc_by(*v);
    }
    reg.register(
        "gate_interventions_by_constraint",
        "permission-gate interventions per constraint (joint-cycles)",
        gate,
    );
    stages(&mut reg, s);
    let mode = Family::<Labels, GaugeF>::default();
    for m in crate::names::MODES {
        let n = crate::names::mode_name(m);
        let on = s.mode == Some(n);
        mode.get_or_create(&label("mode", n))
            .set(if on { 1.0 } else { 0.0 });
    }
    reg.register("mode", "the executor's mode (1: now)", mode);
    let drives = Family::<Labels, GaugeF>::default();
    for (j, now) in s.drive_states.iter().enumerate() {
        for st in crate::names::DRIVE_STATES {
            let n = crate::names::drive_state_name(st);
            let l = vec![
                ("joint".to_string(), j.to_string()),
                ("state".to_string(), n.to_string()),
            ];
            drives
                .get_or_create(&l)
                .set(if n == *now { 1.0 } else { 0.0 });
        }
    }
    reg.register("drive_state", "each joint's drive state (1: now)", drives);
    let thermal = Family::<Labels, GaugeF>::default();
    for (j, load) in s.thermal_load.iter().enumerate() {
        thermal.get_or_create(&label("joint", j)).set(*load);
    }
    reg.register(
        "thermal_load",
        "the thermal monitor's I2t load per joint (1: the drive's rating)",
        thermal,
    );
    let t = GaugeF::default();
    t.set(s.t_s);
    reg.register("run_seconds", "time since the control loop's start", t);
    let ended = GaugeF::default();
    ended.set(if s.ended { 1.0 } else { 0.0 });
    reg.register(
        "run_ended",
        "1 once the run has ended (the report's values)",
        ended,
    );
    wear(&mut reg, &s.wear);
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
    out
}

/// Every stage's latency summary.
fn stages(reg: &mut Registry, s: &Snapshot) {
    let q = Family::<Labels, GaugeF>::default();
    let max = Family::<Labels, GaugeF>::default();
    let count = Family::<Labels, Counter<u64>>::default();
    for (stage, m) in &s.metrics {
        for (quantile, of) in QUANTILES {
            let l = vec![
                ("stage".to_string(), stage.clone()),
                ("quantile".to_string(), quantile.to_string()),
            ];
            q.get_or_create(&l).set(of(m) as f64 / 1e9);
        }
        max.get_or_create(&label("stage", stage))
            .set(m.max as f64 / 1e9);
        count.get_or_create(&label("stage", stage)).inc_by(m.count);
    }
    reg.register(
        "stage_latency_seconds",
        "a stage's latency percentile (HDR histogram)",
        q,
    );
    reg.register("stage_latency_max_seconds", "a stage's largest sample", max);
    reg.register("stage_samples", "a stage's samples", count);
}

/// The wear: each entry's arrays per joint (its `joints`), its `shocks` per kind.
fn wear(reg: &mut Registry, wear: &serde_json::Value) {
    let entries: Vec<&serde_json::Value> = match wear {
        serde_json::Value::Array(a) => a.iter().collect(),
        serde_json::Value::Object(_) => vec![wear],
        _ => return,
    };
    let mut families: std::collections::BTreeMap<String, Family<Labels, GaugeF>> =
        Default::default();
    for e in entries {
        let joints: Vec<u64> = e["joints"]
            .as_array()
            .map(|a| a.iter().filter_map(|j| j.as_u64()).collect())
            .unwrap_or_default();
        let mut per_joint = |key: String, values: &serde_json::Value| {
            let Some(values) = values.as_array() else {
                return;
            };
            let f = families.entry(key).or_default();
            for (j, v) in joints.iter().zip(values) {
                if let Some(v) = v.as_f64() {
                    f.get_or_create(&label("joint", j)).set(v);
                }
            }
        };
        for key in ["torque_rms_nm", "torque_peak_nm", "i2t_end"] {
            per_joint(format!("wear_{key}"), &e[key]);
        }
        if let Some(shocks) = e["shocks"].as_object() {
            for (kind, v) in shocks {
                per_joint(format!("wear_shocks_{}", name(kind)), v);
            }
        }
    }
    for (key, f) in families {
        reg.register(
            key.clone(),
            format!("the wear so far: `{key}` per joint"),
            f,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::MetricSummary;

    #[test]
    fn counters_gate_stages_and_mode_are_written_as_openmetrics() {
        let mut s = Snapshot {
            t_s: 2.5,
            mode: Some("Holding"),
            ..Snapshot::default()
        };
        s.counters.insert("cycles".into(), 125);
        // The collector's own counter of cycles with any intervention: beside the
        // per-constraint family, never under its name (Prometheus refuses a scrape
        // that declares a name twice).
        s.counters.insert("gate_interventions".into(), 5);
        s.gate.insert("velocity".into(), 7);
        s.metrics.insert(
            "wake_latency".into(),
            MetricSummary {
                count: 125,
                p50: 40_000,
                p99: 120_000,
                max: 900_000,
                ..MetricSummary::default()
            },
        );
        s.wear = serde_json::json!({"joints": [0, 1], "torque_rms_nm": [1.5, 2.0],
            "shocks": {"reversal": [3, 4]}});
        s.drive_states = vec!["enabled", "fault"];
        s.thermal_load = vec![0.25, 0.5];
        let text = openmetrics(&s);
        for line in [
            "chunkrt_cycles_total 125",
            "chunkrt_gate_interventions_by_constraint_total{constraint=\"velocity\"} 7",
            "chunkrt_stage_latency_seconds{stage=\"wake_latency\",quantile=\"0.99\"} 0.00012",
            "chunkrt_stage_latency_max_seconds{stage=\"wake_latency\"} 0.0009",
            "chunkrt_stage_samples_total{stage=\"wake_latency\"} 125",
            "chunkrt_mode{mode=\"Holding\"} 1.0",
            "chunkrt_mode{mode=\"Playing\"} 0.0",
            "chunkrt_run_ended 0.0",
            "chunkrt_wear_torque_rms_nm{joint=\"1\"} 2.0",
            "chunkrt_wear_shocks_reversal{joint=\"0\"} 3.0",
            "chunkrt_drive_state{joint=\"1\",state=\"fault\"} 1.0",
            "chunkrt_drive_state{joint=\"1\",state=\"enabled\"} 0.0",
            "chunkrt_thermal_load{joint=\"0\"} 0.25",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
        let mut declared: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        let n = declared.len();
        declared.sort();
        declared.dedup();
        assert_eq!(declared.len(), n, "a name declared twice:\n{text}");
    }
}
