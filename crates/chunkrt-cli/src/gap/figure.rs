//! `gap.svg` / `gap.png`: both plants' frequency response of each excited joint
//! (gain and phase lag of the measured position over the command).

use chunkrt_gap::PlantMeasurement;
use chunkrt_telemetry::plot;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Gain over phase lag against frequency, a line per plant and joint.
pub(crate) struct GapFigure {
    /// (joint, reference?, points (Hz, dB, lag deg)); the reference's lines solid,
    /// the plant's dashed, one colour per joint.
    series: Vec<(usize, bool, Bode)>,
    /// The two plants' names.
    names: [String; 2],
}

/// One joint's response as the figure draws it: (Hz, dB, lag deg) per frequency.
type Bode = Vec<(f64, f64, f64)>;

/// The measurements as the figure draws them, per excited joint.
fn bode(m: &PlantMeasurement) -> Vec<(usize, Bode)> {
    m.responses
        .iter()
        .map(|r| {
            let pts = r.points.iter();
            (
                r.joint,
                pts.map(|p| (p.freq_hz, p.gain_db, p.phase_lag_deg))
                    .collect(),
            )
        })
        .collect()
}

impl GapFigure {
    pub(crate) fn new(reference: &PlantMeasurement, plant: &PlantMeasurement) -> GapFigure {
        let mut series = Vec::new();
        for (m, solid) in [(reference, true), (plant, false)] {
            for (j, pts) in bode(m) {
                series.push((j, solid, pts));
            }
        }
        GapFigure {
            series,
            names: [reference.name.clone(), plant.name.clone()],
        }
    }
}

impl plot::Figure for GapFigure {
    fn size(&self) -> (u32, u32) {
        (900, 640)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), plot::PlotError> {
        let (top, bottom) = root.split_vertically(320);
        let pts = || self.series.iter().flat_map(|s| s.2.iter());
        let f_lo = pts().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let f_hi = pts().map(|p| p.0).fold(0.0, f64::max);
        let (f_lo, f_hi) = if f_lo.is_finite() && f_hi > f_lo {
            (f_lo * 0.8, f_hi * 1.25)
        } else {
            (0.1, 100.0)
        };
        for (area, pick, label, caption) in [
            (
                &top,
                1usize,
                "gain |Y/C| (dB)",
                "measured position over command, per joint".to_string(),
            ),
            (
                &bottom,
                2,
                "phase lag (deg)",
                format!("solid: {}, dashed: {}", self.names[0], self.names[1]),
            ),
        ] {
            let val = |p: &(f64, f64, f64)| if pick == 1 { p.1 } else { p.2 };
            let lo = pts().map(val).filter(|v| v.is_finite()).fold(0.0, f64::min);
            let hi = pts().map(val).filter(|v| v.is_finite()).fold(0.0, f64::max);
            let pad = ((hi - lo) * 0.1).max(1.0);
            let mut chart = ChartBuilder::on(area)
                .caption(&caption, (plot::FONT, 14))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(55)
                .build_cartesian_2d((f_lo..f_hi).log_scale(), (lo - pad)..(hi + pad))
                .map_err(plot::err)?;
            chart
                .configure_mesh()
                .x_desc("frequency (Hz, log)")
                .y_desc(label)
                .label_style((plot::FONT, 12))
                .draw()
                .map_err(plot::err)?;
            for (j, solid, points) in &self.series {
                let c = plot::COLOURS[j % plot::COLOURS.len()];
                let line: Vec<(f64, f64)> = points.iter().map(|p| (p.0, val(p))).collect();
                let drawn = if *solid {
                    chart.draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))
                } else {
                    chart.draw_series(DashedLineSeries::new(line.clone(), 6, 4, c.stroke_width(2)))
                };
                let drawn = drawn.map_err(plot::err)?;
                if *solid {
                    drawn
                        .label(format!("joint {j}"))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
                }
                chart
                    .draw_series(line.iter().map(|p| Circle::new(*p, 3, c.filled())))
                    .map_err(plot::err)?;
            }
            plot::legend(&mut chart, SeriesLabelPosition::UpperLeft, 11)?;
        }
        Ok(())
    }
}
