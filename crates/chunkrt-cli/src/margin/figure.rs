//! `margin.svg` / `margin.png`: the phase margin against delay beside the Bode plot
//! of one measurement, for both loops.

use chunkrt_telemetry::plot;
use plotters::coord::Shift;
use plotters::prelude::*;

/// A straight predicted line on the margin panel: label, from, to (delay ms, deg).
pub(crate) type Prediction = (String, (f64, f64), (f64, f64));

/// Two panels side by side: phase margin against delay (measured points per
/// series, a dashed prediction line when there is one, the threshold), and the
/// Bode plot of one measurement.
pub(crate) struct MarginFigure {
    pub title: String,
    /// (label, points (delay ms, PM deg)).
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// A predicted line.
    pub prediction: Option<Prediction>,
    /// Largest delay swept (ms).
    pub dmax: f64,
    pub threshold: f64,
    /// Bode points: (frequency Hz, |L|, unwrapped phase deg).
    pub bode: Vec<(f64, f64, f64)>,
    pub bode_caption: String,
    pub fc: Option<f64>,
}

impl plot::Figure for MarginFigure {
    fn size(&self) -> (u32, u32) {
        (1200, 520)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), plot::PlotError> {
        let (left, right) = root.split_horizontally(560);
        self.draw_pm(&left)?;
        let (mag, phase) = right.split_vertically(260);
        self.draw_bode(&mag, &phase)
    }
}

impl MarginFigure {
    fn draw_pm<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), plot::PlotError> {
        let dmax = self.dmax.max(1.0);
        let all_pm = self.series.iter().flat_map(|s| s.1.iter().map(|p| p.1));
        let pm_hi = all_pm.clone().fold(self.threshold, f64::max);
        let pm_lo = all_pm.fold(0.0f64, f64::min);
        let (pm_lo, pm_hi) = match &self.prediction {
            Some((_, a, b)) => (pm_lo.min(a.1).min(b.1), pm_hi.max(a.1).max(b.1)),
            None => (pm_lo, pm_hi),
        };
        let pm_max = (pm_hi / 10.0).ceil() * 10.0 + 10.0;
        let pm_min = pm_lo.floor().min(0.0);
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, (plot::FONT, 16))
            .margin(12)
            .x_label_area_size(42)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..dmax, pm_min..pm_max)
            .map_err(plot::err)?;
        chart
            .configure_mesh()
            .x_desc("injected delay (ms)")
            .y_desc("phase margin (deg)")
            .label_style((plot::FONT, 12))
            .draw()
            .map_err(plot::err)?;
        if let Some((label, a, b)) = &self.prediction {
            let c = plot::COLOURS[5];
            chart
                .draw_series(DashedLineSeries::new([*a, *b], 6, 4, c.stroke_width(1)))
                .map_err(plot::err)?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        let grey = RGBColor(0x99, 0x99, 0x99);
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, self.threshold), (dmax, self.threshold)],
                5,
                4,
                grey.into(),
            ))
            .map_err(plot::err)?
            .label(format!("threshold {} deg", self.threshold))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey));
        for (i, (label, pts)) in self.series.iter().enumerate() {
            let c = plot::COLOURS[i % 5];
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(plot::err)?;
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))
                .map_err(plot::err)?
                .label(label.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
        }
        plot::legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;
        Ok(())
    }

    fn draw_bode<DB: DrawingBackend>(
        &self,
        mag: &DrawingArea<DB, Shift>,
        phase: &DrawingArea<DB, Shift>,
    ) -> Result<(), plot::PlotError> {
        // Points with no response (|L| = 0: a loop that does not answer the probe)
        // have no place on a log scale.
        let bode: Vec<(f64, f64, f64)> = self
            .bode
            .iter()
            .copied()
            .filter(|p| {
                p.0 > 0.0 && p.1 > 0.0 && p.0.is_finite() && p.1.is_finite() && p.2.is_finite()
            })
            .collect();
        let f_lo = 10f64.powf(bode.first().map_or(0.1, |p| p.0).log10().floor());
        let f_hi = 10f64.powf(bode.last().map_or(100.0, |p| p.0).log10().ceil());
        let db: Vec<f64> = bode.iter().map(|p| 20.0 * p.1.log10()).collect();
        let phases: Vec<f64> = bode.iter().map(|p| p.2).collect();
        let db_range = (
            (db.iter().cloned().fold(0.0, f64::min) / 10.0).floor() * 10.0,
            (db.iter().cloned().fold(0.0, f64::max) / 10.0).ceil() * 10.0 + 1.0,
        );
        let ph_range = (
            (phases.iter().cloned().fold(-180.0, f64::min) / 45.0).floor() * 45.0,
            (phases.iter().cloned().fold(0.0, f64::max) / 45.0).ceil() * 45.0,
        );
        let fc_caption = self.fc.map_or("no gain crossover".to_string(), |f| {
            format!("f_c = {f:.2} Hz (vertical line)")
        });
        let mag_panel = BodePanel {
            range: db_range,
            vals: &db,
            label: "|L| (dB)",
            reference: 0.0,
            caption: self.bode_caption.clone(),
        };
        self.draw_bode_panel(mag, &bode, (f_lo, f_hi), mag_panel)?;
        let phase_panel = BodePanel {
            range: ph_range,
            vals: &phases,
            label: "phase L (deg)",
            reference: -180.0,
            caption: fc_caption,
        };
        self.draw_bode_panel(phase, &bode, (f_lo, f_hi), phase_panel)?;
        Ok(())
    }

    /// One panel of the Bode plot on a log frequency axis: the values, the dashed
    /// reference level and the gain crossover's vertical line.
    fn draw_bode_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        bode: &[(f64, f64, f64)],
        (f_lo, f_hi): (f64, f64),
        panel: BodePanel<'_>,
    ) -> Result<(), plot::PlotError> {
        let [blue, vermillion, ..] = plot::COLOURS;
        let (lo, hi) = panel.range;
        let mut chart = ChartBuilder::on(area)
            .caption(panel.caption, (plot::FONT, 14))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(55)
            .build_cartesian_2d((f_lo..f_hi).log_scale(), lo..hi)
            .map_err(plot::err)?;
        chart
            .configure_mesh()
            .x_desc("frequency (Hz, log)")
            .y_desc(panel.label)
            .label_style((plot::FONT, 12))
            .draw()
            .map_err(plot::err)?;
        chart
            .draw_series(LineSeries::new(
                bode.iter().zip(panel.vals.iter()).map(|(p, v)| (p.0, *v)),
                blue.stroke_width(2),
            ))
            .map_err(plot::err)?;
        chart
            .draw_series(DashedLineSeries::new(
                [(f_lo, panel.reference), (f_hi, panel.reference)],
                5,
                4,
                RGBColor(0x99, 0x99, 0x99).into(),
            ))
            .map_err(plot::err)?;
        if let Some(fc) = self.fc {
            chart
                .draw_series(LineSeries::new(
                    [(fc, lo), (fc, hi)],
                    vermillion.stroke_width(1),
                ))
                .map_err(plot::err)?;
        }
        Ok(())
    }
}

/// One of the Bode plot's two panels: its y range and values, axis label, dashed
/// reference level and caption.
struct BodePanel<'a> {
    range: (f64, f64),
    vals: &'a [f64],
    label: &'a str,
    reference: f64,
    caption: String,
}
