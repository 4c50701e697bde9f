//! The episodes of one or more runs (`chunkrt episodes --plot`): per episode, in the
//! order the runs are given, the goal error it ended with (and the success tolerance),
//! its tracking error P99 and the cycles the permission gate acted. Frozen and residual
//! episodes in two colours; a filled marker is a success, a hollow one any other end; a
//! held-out start is a triangle, a seen one a circle; a dashed line between runs.

use super::figure::{err, legend, Figure, COLOURS, FONT};
use super::PlotError;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

/// One episode as the figure shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodePoint {
    /// The residual had authority (else the base ran frozen).
    pub residual: bool,
    /// Its start pose was held out.
    pub held_out: bool,
    /// It ended as a success.
    pub success: bool,
    /// Goal error at its end (rad).
    pub goal_err_rad: f64,
    /// Tracking error P99 (rad).
    pub tracking_p99_rad: f64,
    /// Cycles the permission gate acted.
    pub gate_interventions: f64,
}

/// The figure: episodes in order, the index where each run after the first begins, and
/// the success tolerance when the runs share one.
#[derive(Clone, Debug)]
pub struct EpisodesFigure {
    /// The episodes.
    pub points: Vec<EpisodePoint>,
    /// Where each run after the first begins (an index into `points`).
    pub run_starts: Vec<usize>,
    /// The success tolerance (rad).
    pub tolerance_rad: Option<f64>,
}

const PANELS: [(&str, &str); 3] = [
    ("goal error at the end", "rad"),
    ("tracking error P99", "rad"),
    ("permission gate", "cycles"),
];

impl EpisodePoint {
    fn value(&self, panel: usize) -> f64 {
        match panel {
            0 => self.goal_err_rad,
            1 => self.tracking_p99_rad,
            _ => self.gate_interventions,
        }
    }
}

/// A panel's chart: episode index by the panel's value.
type PanelChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

impl EpisodesFigure {
    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        panel: usize,
    ) -> Result<(), PlotError> {
        let n = self.points.len();
        let top = self.panel_top(panel);
        let mut chart = panel_axes(area, panel, n, top)?;
        for &k in &self.run_starts {
            let x = k as f64 - 0.5;
            chart
                .draw_series(DashedLineSeries::new(
                    [(x, 0.0), (x, top)],
                    4,
                    4,
                    BLACK.mix(0.5).into(),
                ))
                .map_err(err)?;
        }
        if let (0, Some(tol)) = (panel, self.tolerance_rad) {
            chart
                .draw_series(LineSeries::new(
                    [(-0.5, tol), (n as f64 - 0.5, tol)],
                    &BLACK,
                ))
                .map_err(err)?
                .label(format!("success tolerance {tol} rad"))
                .legend(|(x, y)| PathElement::new([(x, y), (x + 16, y)], BLACK));
        }
        for (residual, name) in [(false, "frozen"), (true, "residual")] {
            self.draw_markers(&mut chart, panel, residual, name)?;
        }
        if panel == 0 {
            legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;
        }
        Ok(())
    }

    /// The top of `panel`'s value axis: its largest value (the goal error's panel:
    /// at least the tolerance) with room above it; 1 where every value is 0.
    fn panel_top(&self, panel: usize) -> f64 {
        let mut top = self
            .points
            .iter()
            .map(|p| p.value(panel))
            .filter(|v| v.is_finite())
            .fold(0.0_f64, f64::max);
        if panel == 0 {
            top = top.max(self.tolerance_rad.unwrap_or(0.0));
        }
        if top > 0.0 {
            top * 1.15
        } else {
            1.0
        }
    }

    /// The markers of the frozen (`residual` false) or residual episodes in `panel`:
    /// circles for seen starts, triangles for held-out ones, filled for a success.
    fn draw_markers<DB: DrawingBackend>(
        &self,
        chart: &mut PanelChart<'_, DB>,
        panel: usize,
        residual: bool,
        name: &str,
    ) -> Result<(), PlotError> {
        let colour = COLOURS[usize::from(residual)];
        let style = |p: &EpisodePoint| {
            if p.success {
                colour.filled()
            } else {
                colour.stroke_width(2)
            }
        };
        let mine = || {
            self.points
                .iter()
                .enumerate()
                .filter(move |(_, p)| p.residual == residual && p.value(panel).is_finite())
        };
        let at = |k: usize, p: &EpisodePoint| (k as f64, p.value(panel));
        let circles = chart
            .draw_series(
                mine()
                    .filter(|(_, p)| !p.held_out)
                    .map(|(k, p)| Circle::new(at(k, p), 5, style(p))),
            )
            .map_err(err)?;
        if panel == 0 {
            circles
                .label(name)
                .legend(move |(x, y)| Circle::new((x + 8, y), 5, colour.filled()));
        }
        chart
            .draw_series(
                mine()
                    .filter(|(_, p)| p.held_out && p.success)
                    .map(|(k, p)| TriangleMarker::new(at(k, p), 6, style(p))),
            )
            .map_err(err)?;
        // plotters fills its triangle marker whatever the style: a hollow one is
        // its outline.
        chart
            .draw_series(
                mine()
                    .filter(|(_, p)| p.held_out && !p.success)
                    .map(|(k, p)| {
                        EmptyElement::at(at(k, p))
                            + PathElement::new([(0, -6), (5, 3), (-5, 3), (0, -6)], style(p))
                    }),
            )
            .map_err(err)?;
        Ok(())
    }
}

/// `panel`'s chart over `n` episodes, its values from 0 to `top`, titled and labelled.
fn panel_axes<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: usize,
    n: usize,
    top: f64,
) -> Result<PanelChart<'_, DB>, PlotError> {
    let (title, unit) = PANELS[panel];
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 16))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5..(n as f64 - 0.5), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("episode")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_desc(unit)
        .label_style((FONT, 12))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

impl Figure for EpisodesFigure {
    fn size(&self) -> (u32, u32) {
        let w = (200 + 28 * self.points.len() as u32).clamp(640, 1600);
        (w, 720)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let root = root
            .titled(
                "episodes: frozen and residual (filled: success; triangle: held-out start)",
                (FONT, 18),
            )
            .map_err(err)?;
        for (panel, area) in root.split_evenly((3, 1)).iter().enumerate() {
            self.draw_panel(area, panel)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(residual: bool, held_out: bool, success: bool) -> EpisodePoint {
        EpisodePoint {
            residual,
            held_out,
            success,
            goal_err_rad: if success { 0.01 } else { 0.03 },
            tracking_p99_rad: 0.03,
            gate_interventions: 2.0,
        }
    }

    #[test]
    fn every_episode_is_a_marker_in_each_panel_by_its_kind() {
        let fig = EpisodesFigure {
            points: vec![
                point(false, false, false),
                point(false, true, false),
                point(true, false, true),
                point(true, true, true),
                point(true, true, false),
            ],
            run_starts: vec![2],
            tolerance_rad: Some(0.02),
        };
        let svg = crate::plot::svg_string(&fig).unwrap();
        // Seen starts are circles (2 per panel, 3 panels) plus the legend's two.
        assert_eq!(svg.matches("<circle").count(), 2 * 3 + 2, "{svg}");
        // Held-out starts are triangles: the one success filled in each panel.
        assert_eq!(svg.matches("<polygon").count(), 3, "{svg}");
        // Filled: the successes (one circle, one triangle per panel) and the legend's.
        let filled_circles = svg
            .match_indices("<circle")
            .filter(|(i, _)| {
                !svg[*i..]
                    .split('>')
                    .next()
                    .unwrap()
                    .contains("fill=\"none\"")
            })
            .count();
        assert_eq!(filled_circles, 3 + 2, "{svg}");
        let texts = crate::plot::svg_texts(&svg);
        for t in [
            "goal error at the end",
            "tracking error P99",
            "permission gate",
        ] {
            assert!(texts.iter().any(|s| s == t), "{t}: {texts:?}");
        }
        assert!(
            texts.iter().any(|s| s == "success tolerance 0.02 rad"),
            "{texts:?}"
        );
    }
}
