//! An SVG percentile plot of the latency histograms, drawn by hand (no plotting
//! dependency).
//!
//! The x axis is the percentile on HdrHistogram's log scale, `log10(1 / (1 - q))`,
//! so that 90 %, 99 %, 99.9 % and 99.99 % are evenly spaced and the tail, where
//! real-time problems live, gets most of the width. The y axis is the value on a
//! log scale, because the metrics span microseconds (wake latency) to tens of
//! milliseconds (chunk age).

use crate::metrics::{Metric, MetricSet, METRICS};
use hdrhistogram::Histogram;
use std::fmt::Write;

/// Rightmost percentile shown: 99.999 %. The last point (the maximum) is drawn there.
const X_DECADES: f64 = 5.0;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 210.0;
const TOP: f64 = 48.0;
const BOTTOM: f64 = 64.0;

/// Line colours (colour-blind friendly, Okabe-Ito plus three).
const COLOURS: [&str; 10] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
    "#8C564B", "#7F7F7F",
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

/// An SVG document plotting the percentile distribution of each named histogram
/// (values in ns) that has samples. Returns `None` when none has.
pub fn percentile_plot(histograms: &[(String, &Histogram<u64>)], title: &str) -> Option<String> {
    let series: Vec<(&str, Vec<(f64, f64)>)> = histograms
        .iter()
        .map(|(name, h)| (name.as_str(), percentile_points(h)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if series.is_empty() {
        return None;
    }
    let (lo, hi) = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, v)| *v))
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    // Whole decades, at least one.
    let y_lo = lo.max(1e-3).log10().floor();
    let y_hi = (hi.max(1e-3).log10().ceil()).max(y_lo + 1.0);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let px = |x: f64| LEFT + x / X_DECADES * plot_w;
    let py = |us: f64| TOP + plot_h - (us.max(1e-3).log10() - y_lo) / (y_hi - y_lo) * plot_h;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="15" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
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
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            TOP + plot_h,
            TOP + plot_h + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">percentile</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 18.0
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
        TOP + plot_h / 2.0
    );
    let _ = writeln!(
        s,
        r#"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>"#
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
        let ly = TOP + 10.0 + i as f64 * 20.0;
        let lx = LEFT + plot_w + 14.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="3"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
            lx + 22.0,
            lx + 28.0,
            ly + 4.0
        );
    }
    let _ = writeln!(s, "</svg>");
    Some(s)
}

/// Every metric, for plotting all that have samples.
pub fn all_metrics() -> Vec<Metric> {
    METRICS.iter().map(|(m, _, _)| *m).collect()
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
        assert!(percentile_plot(&metric_series(&set, &all_metrics()), "empty").is_none());
        for v in 1..=1000u64 {
            set.record(Metric::WakeLatency, 20_000 + v * 10);
            set.record(Metric::ChunkAge, 10_000_000 + v * 1000);
        }
        let mut series = metric_series(&set, &all_metrics());
        let mut other = MetricSet::new();
        other.record(Metric::WakeLatency, 30_000);
        series.push(("cyclictest".into(), other.get(Metric::WakeLatency)));
        let svg = percentile_plot(&series, "run <sim.toml>").unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert!(svg.contains("<title>cyclictest</title>"));
        assert!(svg.contains("<title>wake_latency</title>"));
        assert!(svg.contains("<title>chunk_age</title>"));
        assert!(!svg.contains("bus_rtt"));
        assert!(svg.contains("run &lt;sim.toml&gt;"));
        assert!(svg.contains("99.99%"));
        // Decades from 10 us to 100 ms cover both metrics.
        assert!(svg.contains(">10 us<") && svg.contains(">100 ms<"), "{svg}");
        // Every coordinate is a finite number inside the canvas.
        for pts in svg.split("points=\"").skip(1) {
            for xy in pts.split('"').next().unwrap().split_whitespace() {
                let (x, y) = xy.split_once(',').unwrap();
                let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                assert!(
                    (0.0..=WIDTH).contains(&x) && (0.0..=HEIGHT).contains(&y),
                    "{xy}"
                );
            }
        }
    }
}
