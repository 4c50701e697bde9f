//! An SVG percentile plot of the latency histograms, drawn by hand (no plotting
//! dependency).
//!
//! The x axis is the percentile on HdrHistogram's log scale, `log10(1 / (1 - q))`,
//! so that 90 %, 99 %, 99.9 % and 99.99 % are evenly spaced and the tail, where
//! real-time problems live, gets most of the width. The y axis is the value on a
//! log scale, because the metrics span microseconds (wake latency) to tens of
//! milliseconds (chunk age).

use crate::metrics::{Metric, MetricSet};
use hdrhistogram::Histogram;
use std::fmt::Write;

/// Rightmost percentile shown: 99.999 %. The last point (the maximum) is drawn there.
const X_DECADES: f64 = 5.0;

const WIDTH: f64 = 960.0;
/// Height of the document title band.
const TITLE_H: f64 = 40.0;
/// Height of one panel, its title and axis labels included.
const PANEL_H: f64 = 380.0;
/// Space above a panel's plot area (its title).
const PANEL_TOP: f64 = 30.0;
/// Space below a panel's plot area (x labels, axis title).
const PANEL_BOTTOM: f64 = 60.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 210.0;

/// Line colours (colour-blind friendly, Okabe-Ito), per panel.
const COLOURS: [&str; 7] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#000000", "#56B4E9",
];

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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
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

/// A named line: (log-percentile, value in us) points.
type Line<'a> = (&'a str, Vec<(f64, f64)>);

/// One plot panel: a title and the named histograms (values in ns) drawn in it.
pub struct Panel<'a> {
    /// Shown above the panel.
    pub title: String,
    /// The lines.
    pub series: Vec<(String, &'a Histogram<u64>)>,
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

/// An SVG document with one percentile plot per panel that has samples. Returns
/// `None` when no histogram has any.
pub fn percentile_plot(panels: &[Panel], title: &str) -> Option<String> {
    let panels: Vec<(&str, Vec<Line>)> = panels
        .iter()
        .map(|p| {
            let series: Vec<Line> = p
                .series
                .iter()
                .map(|(name, h)| (name.as_str(), percentile_points(h)))
                .filter(|(_, pts)| !pts.is_empty())
                .collect();
            (p.title.as_str(), series)
        })
        .filter(|(_, series)| !series.is_empty())
        .collect();
    if panels.is_empty() {
        return None;
    }
    let height = TITLE_H + panels.len() as f64 * PANEL_H;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="26" font-size="15" text-anchor="middle">{}</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        escape(title)
    );
    for (i, (panel_title, series)) in panels.iter().enumerate() {
        draw_panel(&mut s, TITLE_H + i as f64 * PANEL_H, panel_title, series);
    }
    let _ = writeln!(s, "</svg>");
    Some(s)
}

/// Draws one panel whose top edge is at `y0`.
fn draw_panel(s: &mut String, y0: f64, title: &str, series: &[Line]) {
    let (lo, hi) = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, v)| *v))
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // Whole decades, at least one; nothing below 1 us (sub-microsecond values, such
    // as a period jitter of 0, sit on the bottom edge).
    let y_lo = lo.max(1.0).log10().floor();
    let y_hi = (hi.max(1.0).log10().ceil()).max(y_lo + 1.0);
    let top = y0 + PANEL_TOP;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = PANEL_H - PANEL_TOP - PANEL_BOTTOM;
    let px = |x: f64| LEFT + x / X_DECADES * plot_w;
    let py = |us: f64| {
        let d = us.max(10f64.powf(y_lo)).log10();
        top + plot_h - (d - y_lo) / (y_hi - y_lo) * plot_h
    };
    let _ = writeln!(
        s,
        r#"<text x="{LEFT}" y="{:.1}" font-size="13" font-weight="bold">{}</text>"#,
        top - 8.0,
        escape(title)
    );
    // Grid and x labels: one line per decade of 1/(1-q).
    for d in 0..=X_DECADES as u32 {
        let x = px(d as f64);
        let label = match d {
            0 => "0%".to_string(),
            _ => format!("{}%", 100.0 - 100.0 / 10f64.powi(d as i32)),
        };
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            top + plot_h,
            top + plot_h + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        LEFT + plot_w / 2.0,
        top + plot_h + 38.0
    );
    // Grid and y labels: one line per decade of the value.
    for d in y_lo as i32..=y_hi as i32 {
        let us = 10f64.powi(d);
        let y = py(us);
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            value_label(us)
        );
    }
    let _ = writeln!(
        s,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">latency (log scale)</text>"#,
        top + plot_h / 2.0
    );
    let _ = writeln!(
        s,
        r#"<rect x="{LEFT}" y="{top:.1}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
    );
    for (i, (name, points)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let path: Vec<String> = points
            .iter()
            .map(|(x, v)| format!("{:.1},{:.1}", px(*x), py(*v)))
            .collect();
        let name = escape(name);
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.8" points="{}"><title>{name}</title></polyline>"#,
            path.join(" ")
        );
        let ly = top + 10.0 + i as f64 * 20.0;
        let lx = LEFT + plot_w + 14.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
            lx + 22.0,
            lx + 28.0,
            ly + 4.0
        );
    }
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
    fn the_svg_has_one_line_per_metric_with_samples() {
        let mut set = MetricSet::new();
        assert!(percentile_plot(&standard_panels(&set, vec![]), "empty").is_none());
        for v in 1..=1000u64 {
            set.record(Metric::WakeLatency, 20_000 + v * 10);
            set.record(Metric::ChunkAge, 10_000_000 + v * 1000);
        }
        let mut other = MetricSet::new();
        other.record(Metric::WakeLatency, 30_000);
        let extra = vec![("cyclictest".to_string(), other.get(Metric::WakeLatency))];
        let svg = percentile_plot(&standard_panels(&set, extra), "run <sim.toml>").unwrap();
        // Two panels: the loop (wake + cyclictest) and the pipeline (chunk age).
        assert!(svg.contains(">control loop<") && svg.contains(">chunk pipeline<"));
        assert!(svg.contains(r#"height="800""#), "{svg}");
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains("<title>cyclictest</title>"));
        assert!(svg.contains("<title>wake_latency</title>"));
        assert!(svg.contains("<title>chunk_age</title>"));
        assert!(!svg.contains("bus_rtt"));
        assert!(svg.contains("run &lt;sim.toml&gt;"));
        assert!(svg.contains("99.99%"));
        // Each panel has its own decades: 10 us..100 us for the loop, 10..100 ms
        // for the pipeline.
        assert!(svg.contains(">10 us<") && svg.contains(">100 ms<"), "{svg}");
        assert!(!svg.contains(">1 us<"), "{svg}");
        // Every coordinate is a finite number inside the canvas.
        for pts in svg.split("points=\"").skip(1) {
            for xy in pts.split('"').next().unwrap().split_whitespace() {
                let (x, y) = xy.split_once(',').unwrap();
                let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                assert!(
                    (0.0..=WIDTH).contains(&x) && (0.0..=800.0).contains(&y),
                    "{xy}"
                );
            }
        }
    }
}
