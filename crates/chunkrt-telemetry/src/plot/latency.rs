//! Latency figure: per panel, the percentile curves of its histograms and beside
//! them the histograms themselves (share of samples per tenth of a decade).
//!
//! The percentile curve's x axis is the percentile on HdrHistogram's log scale, `log10(1 / (1 - q))`,
//! so that 90 %, 99 %, 99.9 % and 99.99 % are evenly spaced and the tail, where
//! real-time problems live, gets most of the width. The y axis is the value on a
//! log scale, because the metrics span microseconds (wake latency) to tens of
//! milliseconds (chunk age).

use super::figure::{err, Figure, COLOURS, FONT};
use super::PlotError;
use crate::metrics::{Metric, MetricSet};
use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Rightmost percentile shown: 99.999 %. The last point (the maximum) is drawn there.
const X_DECADES: f64 = 5.0;

const WIDTH: u32 = 1200;
/// Height of the document title band.
const TITLE_H: u32 = 40;
/// Height of one panel row.
const PANEL_H: u32 = 380;
/// Histogram buckets per decade of the value.
const BUCKETS_PER_DECADE: f64 = 10.0;

/// The (log-percentile, value in microseconds) points of one histogram.
pub fn percentile_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    h.iter_quantiles(5)
        .map(|v| {
            let q = v.quantile_iterated_to();
            let x = if q >= 1.0 {
                X_DECADES
            } else {
                (1.0 / (1.0 - q)).log10().min(X_DECADES)
            };
            let value_us = h.highest_equivalent(v.value_iterated_to()) as f64 / 1000.0;
            (x, value_us)
        })
        .collect()
}

/// Label of a value on the y axis (microseconds in, a readable unit out).
fn value_label(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{} ms", us / 1e3)
    } else {
        format!("{us} us")
    }
}

/// The histograms of `metrics` from a set, named, for [`percentile_plot`].
pub fn metric_series<'a>(
    set: &'a MetricSet,
    metrics: &[Metric],
) -> Vec<(String, &'a Histogram<u64>)> {
    metrics
        .iter()
        .map(|m| (m.name().to_string(), set.get(*m)))
        .collect()
}

/// One named line of a panel: percentile points and histogram points (value in
/// us, share of samples).
struct Line {
    name: String,
    percentiles: Vec<(f64, f64)>,
    shares: Vec<(f64, f64)>,
}

/// One plot panel: a title and the named histograms (values in ns) drawn in it.
pub struct Panel<'a> {
    /// Shown above the panel.
    pub title: String,
    /// The lines.
    pub series: Vec<(String, &'a Histogram<u64>)>,
}

/// The histogram as (bucket's upper edge in us, share of all samples) on buckets a
/// tenth of a decade wide (bucket k holds `10^(k/10) <= us < 10^((k+1)/10)`; values
/// under 1 us count in the first), from the lowest recorded value's bucket to the
/// highest's.
pub fn share_points(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let total = h.len() as f64;
    let mut bins = std::collections::BTreeMap::<i64, u64>::new();
    for v in h.iter_recorded() {
        let us = h.median_equivalent(v.value_iterated_to()) as f64 / 1000.0;
        let k = (us.max(1.0).log10() * BUCKETS_PER_DECADE).floor() as i64;
        *bins.entry(k).or_insert(0) += v.count_at_value();
    }
    let (Some(&lo), Some(&hi)) = (bins.keys().next(), bins.keys().next_back()) else {
        return Vec::new();
    };
    (lo..=hi)
        .map(|k| {
            let upper = 10f64.powf((k + 1) as f64 / BUCKETS_PER_DECADE);
            (upper, bins.get(&k).copied().unwrap_or(0) as f64 / total)
        })
        .collect()
}

/// The usual two panels: the control loop's own timing (wake latency, period
/// jitter, cycle time, bus round trip, plus `loop_extra` such as cyclictest's wake
/// latency) and the chunk pipeline (inference, handoff, ages, end to end), whose
/// values are milliseconds rather than microseconds.
pub fn standard_panels<'a>(
    set: &'a MetricSet,
    loop_extra: Vec<(String, &'a Histogram<u64>)>,
) -> Vec<Panel<'a>> {
    let mut control = metric_series(
        set,
        &[
            Metric::WakeLatency,
            Metric::PeriodJitter,
            Metric::CycleTime,
            Metric::Exchange,
            Metric::BusRtt,
        ],
    );
    control.extend(loop_extra);
    let pipeline = metric_series(
        set,
        &[
            Metric::InferenceLatency,
            Metric::InferenceStep,
            Metric::HandoffLatency,
            Metric::ChunkAge,
            Metric::ObsAge,
            Metric::E2eLatency,
            Metric::NetworkRtt,
            Metric::ServerTime,
        ],
    );
    vec![
        Panel {
            title: "control loop".into(),
            series: control,
        },
        Panel {
            title: "chunk pipeline".into(),
            series: pipeline,
        },
    ]
}

/// The latency figure: one row per panel that has samples.
pub struct LatencyFigure {
    title: String,
    panels: Vec<(String, Vec<Line>)>,
}

/// The figure of `panels`, or `None` when no histogram has any sample.
pub fn percentile_plot(panels: &[Panel], title: &str) -> Option<LatencyFigure> {
    let panels: Vec<(String, Vec<Line>)> = panels
        .iter()
        .map(|p| {
            let lines: Vec<Line> = p
                .series
                .iter()
                .filter(|(_, h)| !h.is_empty())
                .map(|(name, h)| Line {
                    name: name.clone(),
                    percentiles: percentile_points(h),
                    shares: share_points(h),
                })
                .collect();
            (p.title.clone(), lines)
        })
        .filter(|(_, lines)| !lines.is_empty())
        .collect();
    if panels.is_empty() {
        return None;
    }
    Some(LatencyFigure {
        title: title.to_string(),
        panels,
    })
}

impl LatencyFigure {
    /// The panels' titles and, per panel, the names of its lines.
    pub fn contents(&self) -> Vec<(&str, Vec<&str>)> {
        self.panels
            .iter()
            .map(|(t, lines)| (t.as_str(), lines.iter().map(|l| l.name.as_str()).collect()))
            .collect()
    }
}

impl Figure for LatencyFigure {
    fn size(&self) -> (u32, u32) {
        (WIDTH, TITLE_H + PANEL_H * self.panels.len() as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let (title, body) = root.split_vertically(TITLE_H);
        title.titled(&self.title, (FONT, 18)).map_err(err)?;
        let rows = body.split_evenly((self.panels.len(), 1));
        for ((panel_title, lines), area) in self.panels.iter().zip(rows.iter()) {
            let (left, right) = area.split_horizontally(WIDTH * 62 / 100);
            draw_percentiles(&left, panel_title, lines)?;
            draw_shares(&right, panel_title, lines)?;
        }
        Ok(())
    }
}

/// Whole decades (in us) around `values`, at least one, nothing below 1 us.
fn decades(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let lo = lo.max(1.0).log10().floor();
    let hi = hi.max(1.0).log10().ceil().max(lo + 1.0);
    (10f64.powf(lo), 10f64.powf(hi))
}

fn draw_percentiles<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    lines: &[Line],
) -> Result<(), PlotError> {
    let (lo, hi) = decades(lines.iter().flat_map(|l| l.percentiles.iter().map(|p| p.1)));
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{title}: percentiles"), (FONT, 15))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..X_DECADES, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(X_DECADES as usize + 1)
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|us| value_label(*us))
        .x_desc("percentile")
        .y_desc("latency (log scale)")
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for (i, line) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                line.percentiles.iter().map(|&(x, v)| (x, v.max(lo))),
                colour.stroke_width(2),
            ))
            .map_err(err)?
            .label(line.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
            });
    }
    super::figure::legend(&mut chart, SeriesLabelPosition::UpperLeft, 12)?;
    Ok(())
}

fn draw_shares<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    lines: &[Line],
) -> Result<(), PlotError> {
    let (lo, hi) = decades(lines.iter().flat_map(|l| l.shares.iter().map(|p| p.0)));
    let top = lines
        .iter()
        .flat_map(|l| l.shares.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.05;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{title}: histogram"), (FONT, 15))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|us| value_label(*us))
        .y_label_formatter(&|s| format!("{:.0}%", s * 100.0))
        .x_desc("latency (log scale)")
        .y_desc("share of samples")
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    for (i, line) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        // Steps: each bucket's share is flat across its width.
        let step = 10f64.powf(1.0 / BUCKETS_PER_DECADE);
        let mut pts = Vec::with_capacity(line.shares.len() * 2);
        for &(upper, share) in &line.shares {
            pts.push(((upper / step).max(lo), share));
            pts.push((upper.min(hi), share));
        }
        chart
            .draw_series(LineSeries::new(pts, colour.stroke_width(2)))
            .map_err(err)?;
    }
    Ok(())
}

/// `x` decades of `1 / (1 - q)` as a percentile label (`99.9%`).
fn percentile_label(x: f64) -> String {
    let q = 100.0 - 100.0 / 10f64.powf(x);
    let text = format!("{q:.4}");
    format!("{}%", text.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_run_from_the_median_region_to_the_max_at_the_right_edge() {
        let mut set = MetricSet::new();
        for v in 1..=10_000u64 {
            set.record(Metric::WakeLatency, v * 100); // 0.1 us .. 1 ms
        }
        let p = percentile_points(set.get(Metric::WakeLatency));
        assert!(p.len() > 10);
        assert!(p.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        let last = p.last().unwrap();
        assert_eq!(last.0, X_DECADES);
        assert!((last.1 - 1000.0).abs() < 1.0, "{last:?}");
        // Around two decades in (99 %) the value is near 990 us.
        let p99 = p.iter().find(|(x, _)| *x >= 2.0).unwrap();
        assert!(p99.0 < 2.1 && (p99.1 - 990.0).abs() < 10.0, "{p99:?}");
    }

    #[test]
    fn the_figure_has_one_line_per_metric_with_samples() {
        let mut set = MetricSet::new();
        assert!(percentile_plot(&standard_panels(&set, vec![]), "empty").is_none());
        for v in 1..=1000u64 {
            set.record(Metric::WakeLatency, 20_000 + v * 10);
            set.record(Metric::ChunkAge, 10_000_000 + v * 1000);
        }
        let mut other = MetricSet::new();
        other.record(Metric::WakeLatency, 30_000);
        let extra = vec![("cyclictest".to_string(), other.get(Metric::WakeLatency))];
        let fig = percentile_plot(&standard_panels(&set, extra), "run <sim.toml>").unwrap();
        // Two panels: the loop (wake + cyclictest) and the pipeline (chunk age).
        assert_eq!(
            fig.contents(),
            vec![
                ("control loop", vec!["wake_latency", "cyclictest"]),
                ("chunk pipeline", vec!["chunk_age"])
            ]
        );
        let svg = crate::plot::svg_string(&fig).unwrap();
        assert!(svg.contains("run &lt;sim.toml&gt;"), "escaped title");
        let texts = crate::plot::svg_texts(&svg);
        let has = |t: &str| texts.iter().any(|x| x == t);
        assert!(has("99.99%") && has("0%"), "percentile labels: {texts:?}");
        // The loop's values span 10..100 us, the pipeline's 10..100 ms.
        assert!(has("10 us") && has("100 us") && has("100 ms"), "{texts:?}");
        assert!(!has("1 us"), "{texts:?}");
        assert!(has("wake_latency") && has("cyclictest") && has("chunk_age"));
        assert!(!svg.contains("bus_rtt"));
    }

    #[test]
    fn shares_sum_to_one_and_sit_where_the_samples_are() {
        let mut set = MetricSet::new();
        for _ in 0..900 {
            set.record(Metric::WakeLatency, 50_000); // 50 us
        }
        for _ in 0..100 {
            set.record(Metric::WakeLatency, 5_000_000); // 5 ms
        }
        let pts = share_points(set.get(Metric::WakeLatency));
        let total: f64 = pts.iter().map(|p| p.1).sum();
        assert!((total - 1.0).abs() < 1e-12, "{total}");
        let step = 10f64.powf(0.1);
        let at = |us: f64| {
            pts.iter()
                .filter(|(upper, _)| *upper >= us && upper / step < us)
                .map(|p| p.1)
                .sum::<f64>()
        };
        assert!((at(50.0) - 0.9).abs() < 1e-12, "{pts:?}");
        assert!((at(5000.0) - 0.1).abs() < 1e-12, "{pts:?}");
    }

    #[test]
    fn percentile_labels() {
        assert_eq!(percentile_label(0.0), "0%");
        assert_eq!(percentile_label(1.0), "90%");
        assert_eq!(percentile_label(3.0), "99.9%");
        assert_eq!(percentile_label(5.0), "99.999%");
    }
}
