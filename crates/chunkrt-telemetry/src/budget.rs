//! Timing-gap budgets: limits on any metric statistic or counter, judged against a
//! [`Report`].
//!
//! A budget file (`rt-config/budget.toml`) is TOML; every key carries its unit and
//! unknown keys are refused, so a misspelled limit is an error, not a limit that
//! silently never applies:
//!
//! ```toml
//! description = "PREEMPT_RT arm controller at 50 Hz"
//!
//! [metrics.e2e_latency]
//! p99_minus_p50_ms = 2.0   # jitter of the end-to-end command latency
//!
//! [metrics.obs_age]
//! max_ms = 25.0
//!
//! [metrics.bus_rtt]
//! required = false         # skipped when the run had no bus (simulated arm)
//! p99_us = 500
//!
//! [counters]
//! deadline_overruns = 0    # largest value allowed
//!
//! [baseline]               # with `--baseline cyclictest`: chunkrt / cyclictest
//! p99_ratio = 1.5          # wake latency, same run
//! ```
//!
//! Each limit is an upper bound: the run passes it when `value <= limit`.

use crate::metrics::METRICS;
use crate::report::{MetricSummary, Report};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// A budget file could not be used: the same errors (file, line, key path) as a
/// runtime configuration.
pub use chunkrt_config::ConfigError as BudgetError;

/// Limits on one metric, as written in the file. Every statistic can be given in
/// microseconds or milliseconds (not both).
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct MetricLimitsFile {
    /// When false, a metric without samples (no bus on the simulated arm) is skipped
    /// instead of failing.
    #[serde(default = "yes")]
    required: bool,
    min_us: Option<f64>,
    min_ms: Option<f64>,
    p50_us: Option<f64>,
    p50_ms: Option<f64>,
    p75_us: Option<f64>,
    p75_ms: Option<f64>,
    p90_us: Option<f64>,
    p90_ms: Option<f64>,
    p99_us: Option<f64>,
    p99_ms: Option<f64>,
    p999_us: Option<f64>,
    p999_ms: Option<f64>,
    max_us: Option<f64>,
    max_ms: Option<f64>,
    mean_us: Option<f64>,
    mean_ms: Option<f64>,
    p99_minus_p50_us: Option<f64>,
    p99_minus_p50_ms: Option<f64>,
}

/// The JSON Schema (2020-12) of a budget file (`rt-config/budget*.toml`, as JSON): its
/// keys and their types, no unknown key (docs/reference/budget.schema.json, by
/// `chunkrt reference schema budget`). Metric names and units are the parser's to check.
pub fn schema() -> serde_json::Value {
    schemars::schema_for!(BudgetFile).to_value()
}

fn yes() -> bool {
    true
}

/// Limits on the ratio chunkrt / cyclictest of the wake latency.
#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct BaselineLimitsFile {
    /// When true, a run without a baseline fails these limits instead of skipping them.
    #[serde(default)]
    required: bool,
    p50_ratio: Option<f64>,
    p99_ratio: Option<f64>,
    max_ratio: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct BudgetFile {
    description: Option<String>,
    #[serde(default)]
    metrics: BTreeMap<String, MetricLimitsFile>,
    #[serde(default)]
    counters: BTreeMap<String, i64>,
    baseline: Option<BaselineLimitsFile>,
}

/// A budget's text and where it came from, to place an error at its key.
struct Source<'a> {
    origin: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    /// The error at key `path` (dotted) saying `message`.
    fn invalid(&self, path: String, message: String) -> BudgetError {
        BudgetError::invalid(self.origin, self.text, &path, &message)
    }
}

impl MetricLimitsFile {
    /// The limits on metric `name`, in statistic order: its name must be a metric's,
    /// each statistic given in one unit only, as a usable number, and at least one.
    fn limits(&self, name: &str, src: &Source) -> Result<Vec<Limit>, BudgetError> {
        if !METRICS.iter().any(|(_, n, _)| *n == name) {
            let known: Vec<&str> = METRICS.iter().map(|(_, n, _)| *n).collect();
            return Err(src.invalid(
                format!("metrics.{name}"),
                format!("unknown metric; expected one of {}", known.join(", ")),
            ));
        }
        let pairs = [
            (Stat::Min, self.min_us, self.min_ms),
            (Stat::P50, self.p50_us, self.p50_ms),
            (Stat::P75, self.p75_us, self.p75_ms),
            (Stat::P90, self.p90_us, self.p90_ms),
            (Stat::P99, self.p99_us, self.p99_ms),
            (Stat::P999, self.p999_us, self.p999_ms),
            (Stat::Max, self.max_us, self.max_ms),
            (Stat::Mean, self.mean_us, self.mean_ms),
            (
                Stat::P99MinusP50,
                self.p99_minus_p50_us,
                self.p99_minus_p50_ms,
            ),
        ];
        let mut limits = Vec::new();
        for (stat, us, ms) in pairs {
            let (key, value, scale) = match (us, ms) {
                (None, None) => continue,
                (Some(_), Some(_)) => {
                    return Err(src.invalid(
                        format!("metrics.{name}.{}_us", stat.name()),
                        format!(
                            "both `{0}_us` and `{0}_ms` are given; keep one",
                            stat.name()
                        ),
                    ))
                }
                (Some(v), None) => (format!("{}_us", stat.name()), v, 1e3),
                (None, Some(v)) => (format!("{}_ms", stat.name()), v, 1e6),
            };
            if !value.is_finite() || value < 0.0 || value * scale > u64::MAX as f64 / 2.0 {
                return Err(src.invalid(
                    format!("metrics.{name}.{key}"),
                    format!("{value} is not a usable limit; expected a finite number >= 0"),
                ));
            }
            limits.push(Limit::Metric {
                metric: name.to_string(),
                stat,
                max_ns: (value * scale).round() as u64,
                required: self.required,
            });
        }
        if limits.is_empty() {
            return Err(src.invalid(
                format!("metrics.{name}"),
                "no limit given; expected at least one of min, p50, p75, p90, p99, p999, max, \
                 mean, p99_minus_p50 with a unit suffix (`_us` or `_ms`)"
                    .into(),
            ));
        }
        Ok(limits)
    }
}

impl BaselineLimitsFile {
    /// The limits on the ratios to cyclictest: each a usable ratio, and at least one.
    fn limits(&self, src: &Source) -> Result<Vec<Limit>, BudgetError> {
        let mut limits = Vec::new();
        for (stat, v) in [
            ("p50", self.p50_ratio),
            ("p99", self.p99_ratio),
            ("max", self.max_ratio),
        ] {
            let Some(v) = v else { continue };
            if !v.is_finite() || v <= 0.0 {
                return Err(src.invalid(
                    format!("baseline.{stat}_ratio"),
                    format!("{v} is not a usable ratio; expected a finite number > 0"),
                ));
            }
            limits.push(Limit::BaselineRatio {
                stat,
                max: v,
                required: self.required,
            });
        }
        if limits.is_empty() {
            return Err(src.invalid(
                "baseline".into(),
                "no limit given; expected p50_ratio, p99_ratio or max_ratio".into(),
            ));
        }
        Ok(limits)
    }
}

/// A statistic of a metric's distribution that can be budgeted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stat {
    /// Smallest sample: what the stage costs with nothing in its way, the figure a
    /// loaded host disturbs least (a slower stage shows here first).
    Min,
    /// Median.
    P50,
    /// 75th percentile: inside the upper mode of a two-mode distribution (the cycle
    /// time: cycles that splice a chunk cost more), where the median sits on the
    /// boundary between the modes and jumps from one to the other between runs.
    P75,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
    /// 99.9th percentile.
    P999,
    /// Largest sample.
    Max,
    /// Mean.
    Mean,
    /// 99th percentile minus the median: the jitter of the metric.
    P99MinusP50,
}

impl Stat {
    /// The statistic's name in budget files and reports.
    pub fn name(self) -> &'static str {
        match self {
            Stat::Min => "min",
            Stat::P50 => "p50",
            Stat::P75 => "p75",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
            Stat::P999 => "p999",
            Stat::Max => "max",
            Stat::Mean => "mean",
            Stat::P99MinusP50 => "p99_minus_p50",
        }
    }

    /// The statistic's value in a summary, in nanoseconds.
    pub fn of(self, s: &MetricSummary) -> u64 {
        match self {
            Stat::Min => s.min,
            Stat::P50 => s.p50,
            Stat::P75 => s.p75,
            Stat::P90 => s.p90,
            Stat::P99 => s.p99,
            Stat::P999 => s.p999,
            Stat::Max => s.max,
            Stat::Mean => s.mean.round().max(0.0) as u64,
            Stat::P99MinusP50 => s.p99.saturating_sub(s.p50),
        }
    }
}

/// One limit of a budget.
#[derive(Clone, Debug, PartialEq)]
pub enum Limit {
    /// A statistic of a metric's distribution, at most `max_ns`.
    Metric {
        /// Metric name (`wake_latency`, ...).
        metric: String,
        /// Which statistic.
        stat: Stat,
        /// Upper bound in nanoseconds.
        max_ns: u64,
        /// Whether a metric without samples fails (true) or is skipped (false).
        required: bool,
    },
    /// A counter of the report, at most `max`.
    Counter {
        /// Counter name (`deadline_overruns`, ...).
        counter: String,
        /// Largest value allowed.
        max: u64,
    },
    /// chunkrt's wake latency over cyclictest's (report block `baseline.ratio`).
    BaselineRatio {
        /// `p50`, `p99` or `max`.
        stat: &'static str,
        /// Largest ratio allowed.
        max: f64,
        /// Whether a run without a baseline fails (true) or skips it (false).
        required: bool,
    },
}

/// Name of the baseline-ratio rows in verdicts.
pub const BASELINE_RATIO_METRIC: &str = "wake_latency/cyclictest";

/// A parsed, validated budget.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Where it came from (for errors and the report).
    pub file: PathBuf,
    /// The file's `description`.
    pub description: Option<String>,
    /// The limits, metrics first (in report order), then counters.
    pub limits: Vec<Limit>,
}

/// The judgement of one limit; the report's `budget` array holds these.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Metric or counter name.
    pub metric: String,
    /// Statistic (`p99`, `max`, `p99_minus_p50`, ...); `max` for a counter.
    pub stat: String,
    /// `ns` for metric statistics, `count` for counters, `ratio` for the baseline.
    pub unit: &'static str,
    /// The limit (the value must be at most this).
    pub limit: f64,
    /// The measured value; absent when the metric had no samples (or no baseline ran).
    pub value: Option<f64>,
    /// Whether the limit holds (a skipped limit counts as holding).
    pub pass: bool,
    /// Why the limit could not be judged and was skipped (it is not `required`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl Budget {
    /// Reads and validates a budget file.
    pub fn load(path: &Path) -> Result<Budget, BudgetError> {
        let text = chunkrt_config::read_text(path, "budget")?;
        Budget::parse_str(&text, path)
    }

    /// Parses and validates budget TOML; `origin` names the source in errors.
    pub fn parse_str(text: &str, origin: &Path) -> Result<Budget, BudgetError> {
        let file: BudgetFile = chunkrt_config::parse_toml(text, origin)?;
        let src = Source { origin, text };
        let mut limits = Vec::new();
        for (name, m) in &file.metrics {
            limits.extend(m.limits(name, &src)?);
        }
        // Metrics in report order, so the verdict table reads like the latency table.
        limits.sort_by_key(|l| match l {
            Limit::Metric { metric, stat, .. } => (
                METRICS
                    .iter()
                    .position(|(_, n, _)| n == metric)
                    .unwrap_or(usize::MAX),
                *stat,
            ),
            Limit::Counter { .. } | Limit::BaselineRatio { .. } => (usize::MAX, Stat::P50),
        });
        for (name, max) in &file.counters {
            let max = u64::try_from(*max).map_err(|_| {
                src.invalid(
                    format!("counters.{name}"),
                    format!("{max} is negative; expected the largest count allowed (>= 0)"),
                )
            })?;
            limits.push(Limit::Counter {
                counter: name.clone(),
                max,
            });
        }
        if let Some(b) = &file.baseline {
            limits.extend(b.limits(&src)?);
        }
        if limits.is_empty() {
            return Err(src.invalid(
                "(top level)".into(),
                "the budget has no limits; expected [metrics.NAME] tables or a [counters] table"
                    .into(),
            ));
        }
        Ok(Budget {
            file: origin.to_path_buf(),
            description: file.description,
            limits,
        })
    }

    /// Judges a report. A counter the report does not have is an error (a misspelled
    /// counter name), not a pass.
    pub fn evaluate(&self, report: &Report) -> Result<Vec<Verdict>, BudgetError> {
        let mut out = Vec::with_capacity(self.limits.len());
        for limit in &self.limits {
            match limit {
                Limit::Metric {
                    metric,
                    stat,
                    max_ns,
                    required,
                } => {
                    let value = report.metrics.get(metric).map(|s| stat.of(s));
                    let skipped = (value.is_none() && !required)
                        .then(|| format!("no {metric} samples in this run; required = false"));
                    out.push(Verdict {
                        metric: metric.clone(),
                        stat: stat.name().into(),
                        unit: "ns",
                        limit: *max_ns as f64,
                        value: value.map(|v| v as f64),
                        pass: skipped.is_some() || value.is_some_and(|v| v <= *max_ns),
                        skipped,
                    });
                }
                Limit::Counter { counter, max } => {
                    let value = *report.counters.get(counter).ok_or_else(|| {
                        let known: Vec<&str> = report.counters.keys().map(String::as_str).collect();
                        BudgetError::Invalid {
                            file: self.file.clone(),
                            line: 0,
                            path: format!("counters.{counter}"),
                            message: format!(
                                "the report has no such counter; it has {}",
                                known.join(", ")
                            ),
                        }
                    })?;
                    out.push(Verdict {
                        metric: counter.clone(),
                        stat: "max".into(),
                        unit: "count",
                        limit: *max as f64,
                        value: Some(value as f64),
                        pass: value <= *max,
                        skipped: None,
                    });
                }
                Limit::BaselineRatio {
                    stat,
                    max,
                    required,
                } => {
                    let value = report
                        .extra
                        .get("baseline")
                        .and_then(|b| b.get("ratio")?.get(*stat)?.as_f64());
                    let skipped = (value.is_none() && !required).then(|| {
                        "no baseline ratio in this run: run with --baseline cyclictest; \
                         required = false"
                            .to_string()
                    });
                    out.push(Verdict {
                        metric: BASELINE_RATIO_METRIC.into(),
                        stat: format!("{stat}_ratio"),
                        unit: "ratio",
                        limit: *max,
                        value,
                        pass: skipped.is_some() || value.is_some_and(|v| v <= *max),
                        skipped,
                    });
                }
            }
        }
        Ok(out)
    }
}

/// Whether every verdict passed.
pub fn all_pass(verdicts: &[Verdict]) -> bool {
    verdicts.iter().all(|v| v.pass)
}

/// Adds the `budget` array (and the budget file's name) to the report.
pub fn add_to_report(report: &mut Report, budget: &Budget, verdicts: &[Verdict]) {
    report.extra.insert(
        "budget".into(),
        serde_json::to_value(verdicts).unwrap_or(serde_json::Value::Null),
    );
    report.extra.insert(
        "budget_file".into(),
        serde_json::Value::String(budget.file.display().to_string()),
    );
    report.extra.insert(
        "budget_pass".into(),
        serde_json::Value::Bool(all_pass(verdicts)),
    );
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1000.0)
}

/// The verdict table: metric, P50, P99, P99.9, max (microseconds), the limit, the
/// judged value and PASS/FAIL; a last line with the overall verdict.
pub fn verdict_table(report: &Report, verdicts: &[Verdict]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<24} {:>9} {:>9} {:>9} {:>9}  {:<24} {:>10}  verdict",
        "budget (us)", "P50", "P99", "P99.9", "max", "limit", "value"
    );
    for v in verdicts {
        let (p50, p99, p999, max) = match report.metrics.get(&v.metric) {
            Some(m) if v.unit == "ns" => (
                us(m.p50 as f64),
                us(m.p99 as f64),
                us(m.p999 as f64),
                us(m.max as f64),
            ),
            _ => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let (limit, value) = match v.unit {
            "ns" => (
                format!("{} <= {}", v.stat, us(v.limit)),
                v.value.map(us).unwrap_or_else(|| "no data".into()),
            ),
            "ratio" => (
                format!("{} <= {:.2}", v.stat, v.limit),
                v.value
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_else(|| "no data".into()),
            ),
            _ => (
                format!("count <= {}", v.limit),
                v.value.map(|x| x.to_string()).unwrap_or_default(),
            ),
        };
        let _ = writeln!(
            s,
            "{:<24} {:>9} {:>9} {:>9} {:>9}  {:<24} {:>10}  {}",
            v.metric,
            p50,
            p99,
            p999,
            max,
            limit,
            value,
            match (&v.skipped, v.pass) {
                (Some(why), _) => format!("SKIP ({why})"),
                (None, true) => "PASS".to_string(),
                (None, false) => "FAIL".to_string(),
            }
        );
    }
    let failed = verdicts.iter().filter(|v| !v.pass).count();
    let skipped = verdicts.iter().filter(|v| v.skipped.is_some()).count();
    let judged = verdicts.len() - skipped;
    let skips = if skipped > 0 {
        format!(", {skipped} skipped")
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "budget: {}",
        if failed == 0 {
            format!("PASS ({judged} limits{skips})")
        } else {
            format!("FAIL ({failed} of {judged} limits broken{skips})")
        }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Budget, BudgetError> {
        Budget::parse_str(text, Path::new("budget-test.toml"))
    }

    fn summary(p50: u64, p99: u64, max: u64) -> MetricSummary {
        MetricSummary {
            unit: "ns",
            count: 100,
            min: p50 / 2,
            p50,
            p75: p50,
            p90: (p50 + p99) / 2,
            p99,
            p999: max,
            max,
            mean: p50 as f64,
        }
    }

    fn report() -> Report {
        let mut r = Report::default();
        r.metrics.insert(
            "e2e_latency".into(),
            summary(10_000_000, 11_500_000, 12_000_000),
        );
        r.metrics
            .insert("obs_age".into(), summary(1_000_000, 2_000_000, 30_000_000));
        r.counters.insert("deadline_overruns".into(), 0);
        r.counters.insert("chunks_expired".into(), 3);
        r
    }

    #[test]
    fn limits_convert_units_and_judge_each_statistic() {
        let b = parse(
            r#"
            description = "test"
            [metrics.e2e_latency]
            p99_minus_p50_ms = 2.0
            p50_us = 9000
            [metrics.obs_age]
            max_ms = 25
            min_us = 400
            [metrics.bus_rtt]
            required = false
            p99_us = 500
            [counters]
            deadline_overruns = 0
            chunks_expired = 2
            "#,
        )
        .unwrap();
        assert_eq!(b.description.as_deref(), Some("test"));
        let v = b.evaluate(&report()).unwrap();
        let find = |m: &str, s: &str| v.iter().find(|x| x.metric == m && x.stat == s).unwrap();
        // p99 - p50 = 1.5 ms <= 2 ms.
        let jitter = find("e2e_latency", "p99_minus_p50");
        assert_eq!(
            (jitter.limit, jitter.value, jitter.pass),
            (2_000_000.0, Some(1_500_000.0), true)
        );
        // p50 = 10 ms > 9 ms.
        assert!(!find("e2e_latency", "p50").pass);
        // obs_age max 30 ms > 25 ms; its min 0.5 ms > 0.4 ms.
        assert!(!find("obs_age", "max").pass);
        let min = find("obs_age", "min");
        assert_eq!((min.value, min.pass), (Some(500_000.0), false));
        assert!(find("deadline_overruns", "max").pass);
        assert!(!find("chunks_expired", "max").pass);
        // bus_rtt has no samples and is optional: skipped, and said so.
        let bus = find("bus_rtt", "p99");
        assert!(
            bus.pass
                && bus
                    .skipped
                    .as_deref()
                    .unwrap()
                    .contains("no bus_rtt samples")
        );
        assert!(!all_pass(&v));
        let table = verdict_table(&report(), &v);
        assert!(table.contains("obs_age"), "{table}");
        assert!(table
            .lines()
            .any(|l| l.starts_with("obs_age") && l.ends_with("FAIL")));
        assert!(table
            .lines()
            .any(|l| l.starts_with("deadline_overruns") && l.ends_with("PASS")));
        assert!(
            table.contains("FAIL (4 of 6 limits broken, 1 skipped)"),
            "{table}"
        );
        assert!(table
            .lines()
            .any(|l| l.starts_with("bus_rtt") && l.contains("SKIP (no bus_rtt samples")));
    }

    #[test]
    fn a_required_metric_without_samples_fails() {
        let b = parse("[metrics.bus_rtt]\np99_us = 500\n").unwrap();
        let v = b.evaluate(&report()).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].value, None);
        assert!(!v[0].pass);
        assert!(verdict_table(&report(), &v).contains("no data"));
    }

    #[test]
    fn verdicts_go_into_the_report_as_a_budget_array() {
        let b = parse("[counters]\ndeadline_overruns = 0\n").unwrap();
        let mut r = report();
        let v = b.evaluate(&r).unwrap();
        add_to_report(&mut r, &b, &v);
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        let row = &json["budget"][0];
        assert_eq!(row["metric"], "deadline_overruns");
        assert_eq!(row["stat"], "max");
        assert_eq!(row["limit"], 0.0);
        assert_eq!(row["value"], 0.0);
        assert_eq!(row["pass"], true);
        assert_eq!(json["budget_pass"], true);
    }

    #[test]
    fn errors_name_the_file_and_the_key() {
        let e = parse("[metrics.obs_age]\nmax_msec = 25\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("budget-test.toml:2: key `metrics.obs_age.max_msec`"),
            "{e}"
        );
        assert!(e.contains("unknown field"), "{e}");

        let e = parse("[metrics.obs_agee]\nmax_ms = 25\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `metrics.obs_agee`: unknown metric"), "{e}");
        assert!(e.contains("e2e_latency"), "{e}");

        let e = parse("[metrics.obs_age]\nmax_ms = -1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `metrics.obs_age.max_ms`"), "{e}");

        let e = parse("[metrics.obs_age]\nmax_ms = 1\nmax_us = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("keep one"), "{e}");

        let e = parse("[metrics.obs_age]\nrequired = true\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `metrics.obs_age`: no limit"), "{e}");

        let e = parse("[counters]\ndeadline_overruns = -1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `counters.deadline_overruns`"), "{e}");

        let e = parse("[counters]\ndeadline_overruns = \"zero\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("budget-test.toml:2: key `counters.deadline_overruns`"),
            "{e}"
        );

        let e = parse("limits = 3\n").unwrap_err().to_string();
        assert!(e.contains("unknown field `limits`"), "{e}");

        assert!(parse("").unwrap_err().to_string().contains("no limits"));

        let e = Budget::load(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/dev/zero: is a character device, not a regular file"),
            "{e}"
        );
        let e = Budget::load(Path::new("/nonexistent/budget.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/nonexistent/budget.toml: cannot open the budget"),
            "{e}"
        );
    }

    #[test]
    fn baseline_ratios_are_judged_when_a_baseline_ran() {
        let b = parse("[baseline]\np99_ratio = 1.5\nmax_ratio = 10\n").unwrap();
        let mut r = report();
        // No baseline block: each limit is skipped, with the reason.
        let v = b.evaluate(&r).unwrap();
        assert_eq!(v.len(), 2);
        assert!(v.iter().all(|x| x.pass && x.skipped.is_some()));
        let table = verdict_table(&r, &v);
        assert!(
            table.contains("SKIP (no baseline ratio in this run"),
            "{table}"
        );
        assert!(
            table.contains("budget: PASS (0 limits, 2 skipped)"),
            "{table}"
        );
        r.extra.insert(
            "baseline".into(),
            serde_json::json!({ "ratio": { "p50": 1.0, "p99": 2.0, "max": null } }),
        );
        let v = b.evaluate(&r).unwrap();
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(v[1].skipped.is_some(), "max ratio null: skipped");
        assert_eq!(v[0].metric, BASELINE_RATIO_METRIC);
        assert_eq!(
            (v[0].stat.as_str(), v[0].value, v[0].pass),
            ("p99_ratio", Some(2.0), false)
        );
        assert!(verdict_table(&r, &v).contains("p99_ratio <= 1.50"));
        let required = parse("[baseline]\nrequired = true\np50_ratio = 1.2\n").unwrap();
        let v = required.evaluate(&report()).unwrap();
        assert_eq!((v[0].value, v[0].pass), (None, false));

        let e = parse("[baseline]\np99_ratio = 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key `baseline.p99_ratio`"), "{e}");
        let e = parse("[baseline]\np99 = 2\n").unwrap_err().to_string();
        assert!(
            e.contains("key `baseline.p99`") && e.contains("unknown field"),
            "{e}"
        );
    }

    #[test]
    fn a_misspelled_counter_is_an_error_at_evaluation() {
        let b = parse("[counters]\ndeadline_overrun = 0\n").unwrap();
        let e = b.evaluate(&report()).unwrap_err().to_string();
        assert!(e.contains("key `counters.deadline_overrun`"), "{e}");
        assert!(e.contains("deadline_overruns"), "{e}");
    }
}
