//! A run's joints over time, from its recording: one panel per joint with the
//! chunks the policy proposed (dots, when the window holds few enough), the
//! executor's setpoint, the command the gate let through and the measured
//! position; where the backend measures it, the drive's torque on a second axis on
//! the right; the gate's interventions on that joint as red ticks along the
//! bottom; mode changes as vertical lines. A strip on top shows the executor's mode
//! and the seams (a tick per cycle that began playing a new chunk). Where the
//! recording carries a wrist force/torque reading, a panel at the bottom shows |F|.
//!
//! Long runs are drawn as min/max envelopes (see [`crate::readback`]); the caption
//! says the bucket width.

use super::figure::{err, seconds_label, Figure, COLOURS, FONT};
use super::PlotError;
use crate::names::mode_name;
use crate::readback::{RunData, FORCE_SERIES};
use chunkrt_core::Mode;
use plotters::chart::DualCoordChartContext;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

const WIDTH: u32 = 1400;
const TITLE_H: u32 = 56;
const STRIP_H: u32 = 140;
const JOINT_H: u32 = 210;
/// Vertical lines per mode change are drawn up to this many changes.
const MAX_MODE_LINES: usize = 60;

/// Modes from the bottom of the strip up.
const MODES: [Mode; 4] = [
    Mode::SafeStop,
    Mode::Holding,
    Mode::Decelerating,
    Mode::Playing,
];

/// Colours: setpoint, command, measured; chunk dots; gate; mode; seams (each its
/// own, so a reader of the SVG can count the marks).
const SETPOINT: RGBColor = COLOURS[0];
const COMMAND: RGBColor = COLOURS[1];
const MEASURED: RGBColor = COLOURS[5];
const CHUNK: RGBColor = RGBColor(0x99, 0x99, 0x99);
const GATE: RGBColor = RGBColor(0xD0, 0x00, 0x00);
const MODE_LINE: RGBColor = COLOURS[2];
const SEAM: RGBColor = COLOURS[6];
const TORQUE: RGBColor = COLOURS[3];
const FORCE: RGBColor = COLOURS[4];

/// Series in a bucket: the positions (rad), then the torque (N m).
const POSITIONS: usize = 3;
const TORQUE_SERIES: usize = 3;

/// A joint's chart: time by position (rad), and time by torque (N m) on the right.
type JointChart<'a, DB> = DualCoordChartContext<
    'a,
    DB,
    Cartesian2d<RangedCoordf64, RangedCoordf64>,
    Cartesian2d<RangedCoordf64, RangedCoordf64>,
>;

/// The figure of one run (or a window of it).
pub struct Timeline<'a> {
    data: &'a RunData,
    title: String,
}

impl<'a> Timeline<'a> {
    /// The figure of `data`, titled `title`.
    pub fn new(data: &'a RunData, title: &str) -> Self {
        Timeline {
            data,
            title: title.to_string(),
        }
    }

    fn subtitle(&self) -> String {
        let d = self.data;
        let mut s = format!(
            "{} cycles, {} seams, {} chunks, {} gate interventions, {} mode changes",
            d.cycles,
            d.seams.len(),
            d.chunks_published,
            d.gate_events,
            d.modes.len()
        );
        if d.bucket_s > 0.0 {
            s += &format!(
                "; lines are min/max envelopes over {} buckets",
                seconds_label(d.bucket_s)
            );
        }
        if d.chunks.is_empty() && d.chunks_published > 0 {
            s += "; chunk dots left out (too many: plot a window with --from/--to)";
        }
        if let Some(t) = &d.truncated {
            s += &format!("; recording cut short: {t}");
        }
        s
    }
}

impl Figure for Timeline<'_> {
    fn size(&self) -> (u32, u32) {
        let rows = self.data.dof.max(1) + usize::from(self.data.has_force);
        (WIDTH, TITLE_H + STRIP_H + JOINT_H * rows as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        let (head, body) = root.split_vertically(TITLE_H);
        head.draw_text(&self.title, &(FONT, 18).into_text_style(&head), (12, 6))
            .map_err(err)?;
        head.draw_text(
            &self.subtitle(),
            &(FONT, 13)
                .into_text_style(&head)
                .color(&RGBColor(0x44, 0x44, 0x44)),
            (12, 32),
        )
        .map_err(err)?;
        let (strip, joints) = body.split_vertically(STRIP_H);
        let (t0, t1) = time_range(self.data);
        self.draw_strip(&strip, t0, t1)?;
        let n = self.data.dof.max(1) + usize::from(self.data.has_force);
        let rows = joints.split_evenly((n, 1));
        for (j, area) in rows.iter().enumerate().take(self.data.dof) {
            self.draw_joint(area, j, t0, t1)?;
        }
        if self.data.has_force {
            self.draw_force(&rows[n - 1], t0, t1)?;
        }
        Ok(())
    }
}

/// The time axis: the window asked for, else the recorded span.
fn time_range(d: &RunData) -> (f64, f64) {
    let (a, b) = d.window.unwrap_or(d.span);
    let (a, b) = if d.window.is_some() {
        (a.max(d.span.0.min(a)), b)
    } else {
        (a, b)
    };
    if b > a {
        (a, b)
    } else {
        (a, a + 1.0)
    }
}

fn mode_level(mode: Mode) -> f64 {
    MODES.iter().position(|m| *m == mode).unwrap_or(0) as f64
}

impl Timeline<'_> {
    fn draw_strip<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        t0: f64,
        t1: f64,
    ) -> Result<(), PlotError> {
        let d = self.data;
        let mut chart = ChartBuilder::on(area)
            .margin_left(8)
            .margin_right(16)
            .margin_top(4)
            .x_label_area_size(0)
            .y_label_area_size(110)
            .build_cartesian_2d(t0..t1, -0.3..4.5)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .disable_y_mesh()
            .y_labels(0)
            .y_desc("mode")
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        // The mode names on their levels (drawn here: a label per level, not
        // plotters' choice of round numbers).
        chart
            .draw_series(MODES.iter().enumerate().map(|(i, m)| {
                Text::new(
                    mode_name(*m).to_string(),
                    (t0, i as f64 + 0.6),
                    (FONT, 11).into_font().color(&RGBColor(0x55, 0x55, 0x55)),
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(MODES.iter().enumerate().map(|(i, _)| {
                PathElement::new(
                    vec![(t0, i as f64), (t1, i as f64)],
                    RGBColor(0xDD, 0xDD, 0xDD).stroke_width(1),
                )
            }))
            .map_err(err)?;
        // The mode as a step line.
        let mut level = d.first_mode.map_or(0.0, mode_level);
        let mut pts = vec![(t0, level)];
        for (t, to, _) in &d.modes {
            pts.push((*t, level));
            level = mode_level(*to);
            pts.push((*t, level));
        }
        pts.push((t1, level));
        chart
            .draw_series(LineSeries::new(pts, MODE_LINE.stroke_width(2)))
            .map_err(err)?
            .label("mode")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], MODE_LINE.stroke_width(3))
            });
        // Seams: a tick each at the top of the strip.
        chart
            .draw_series(
                d.seams
                    .iter()
                    .map(|&t| PathElement::new(vec![(t, 3.95), (t, 4.45)], SEAM.stroke_width(1))),
            )
            .map_err(err)?
            .label("seam (new chunk played)")
            .legend(|(x, y)| PathElement::new(vec![(x + 10, y - 6), (x + 10, y + 6)], SEAM));
        super::figure::legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;
        Ok(())
    }

    fn draw_joint<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        j: usize,
        t0: f64,
        t1: f64,
    ) -> Result<(), PlotError> {
        let d = self.data;
        let (lo, hi) = position_range(d, j);
        let mut chart = self.joint_axes(area, j, (t0, t1), (lo, hi))?;
        if d.has_torque {
            self.draw_torque(&mut chart, j)?;
        }
        chart.draw_series(self.mode_lines(lo, hi)).map_err(err)?;
        self.draw_chunk_dots(&mut chart, j, t0, t1)?;
        self.draw_positions(&mut chart, j)?;
        self.draw_gate_ticks(&mut chart, j, lo, hi)?;
        if j > 0 {
            return Ok(());
        }
        super::figure::legend(&mut chart, SeriesLabelPosition::UpperRight, 11)?;
        Ok(())
    }

    /// A vertical line from `lo` to `hi` at every mode change (none where there are
    /// too many to tell apart).
    fn mode_lines(&self, lo: f64, hi: f64) -> impl Iterator<Item = PathElement<(f64, f64)>> + '_ {
        let modes = &self.data.modes;
        let shown = if modes.len() <= MAX_MODE_LINES {
            modes.len()
        } else {
            0
        };
        modes[..shown].iter().map(move |(t, _, _)| {
            PathElement::new(vec![(*t, lo), (*t, hi)], MODE_LINE.mix(0.6).stroke_width(1))
        })
    }

    /// The wrist force's magnitude over time (the bottom panel, with the time axis),
    /// and the mode changes.
    fn draw_force<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        t0: f64,
        t1: f64,
    ) -> Result<(), PlotError> {
        let d = self.data;
        let (_, hi) = series_range(d, FORCE_SERIES, 0, 0.5);
        let mut chart = ChartBuilder::on(area)
            .margin_left(8)
            // The joints' torque axis is as wide: the time axes line up.
            .margin_right(if d.has_torque { 86 } else { 16 })
            .margin_top(6)
            .x_label_area_size(40)
            .y_label_area_size(110)
            .build_cartesian_2d(t0..t1, 0.0..hi)
            .map_err(err)?;
        chart
            .configure_mesh()
            .y_labels(5)
            .y_desc("wrist |F| (N)")
            .x_desc("time since start (s)")
            .x_label_formatter(&|t| format!("{t:.1}"))
            .y_label_formatter(&|y| format!("{y:.1}"))
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        chart.draw_series(self.mode_lines(0.0, hi)).map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                envelope(d, FORCE_SERIES, 0),
                FORCE.stroke_width(2),
            ))
            .map_err(err)?;
        Ok(())
    }

    /// Joint `j`'s chart: time along the bottom (labelled on the last joint only),
    /// position on the left, torque on the right where the backend measures it.
    fn joint_axes<'a, DB: DrawingBackend>(
        &self,
        area: &'a DrawingArea<DB, Shift>,
        j: usize,
        (t0, t1): (f64, f64),
        (lo, hi): (f64, f64),
    ) -> Result<JointChart<'a, DB>, PlotError> {
        let d = self.data;
        let last = j + 1 == d.dof && !d.has_force;
        let (tlo, thi) = series_range(d, TORQUE_SERIES, j, 0.05);
        let mut chart = ChartBuilder::on(area)
            .margin_left(8)
            .margin_right(16)
            .margin_top(6)
            .x_label_area_size(if last { 40 } else { 18 })
            .y_label_area_size(110)
            .right_y_label_area_size(if d.has_torque { 70 } else { 0 })
            .build_cartesian_2d(t0..t1, lo..hi)
            .map_err(err)?
            .set_secondary_coord(t0..t1, tlo..thi);
        chart
            .configure_mesh()
            .y_labels(5)
            .y_desc(match d.gate.get(j).map_or(0, Vec::len) {
                0 => format!("joint {j} (rad)"),
                n => format!("joint {j} (rad), gate {n}x"),
            })
            .x_desc(if last { "time since start (s)" } else { "" })
            .x_label_formatter(&|t| format!("{t:.1}"))
            .y_label_formatter(&|y| format!("{y:.3}"))
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        Ok(chart)
    }

    /// The torque axis and joint `j`'s torque envelope on it.
    fn draw_torque<DB: DrawingBackend>(
        &self,
        chart: &mut JointChart<'_, DB>,
        j: usize,
    ) -> Result<(), PlotError> {
        chart
            .configure_secondary_axes()
            .y_labels(5)
            .y_desc("torque (N m)")
            .y_label_formatter(&|y| format!("{y:.1}"))
            .label_style((FONT, 12))
            .draw()
            .map_err(err)?;
        chart
            .draw_secondary_series(LineSeries::new(
                envelope(self.data, TORQUE_SERIES, j),
                TORQUE.mix(0.8).stroke_width(1),
            ))
            .map_err(err)?
            .label("torque (drive, right axis)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], TORQUE.stroke_width(3)));
        Ok(())
    }

    /// The chunks the policy proposed: every setpoint of joint `j` in the window, as
    /// a dot.
    fn draw_chunk_dots<DB: DrawingBackend>(
        &self,
        chart: &mut JointChart<'_, DB>,
        j: usize,
        t0: f64,
        t1: f64,
    ) -> Result<(), PlotError> {
        let d = self.data;
        let dots = d.chunks.iter().flat_map(|c| {
            c.pos_rad.iter().enumerate().filter_map(move |(i, row)| {
                let t = c.t_start_s + i as f64 * c.dt_ms * 1e-3;
                let y = *row.get(j)?;
                (t >= t0 && t <= t1 && y.is_finite()).then_some((t, y))
            })
        });
        let series = chart
            .draw_series(dots.map(|p| Circle::new(p, 2, CHUNK.filled())))
            .map_err(err)?;
        if !d.chunks.is_empty() {
            series
                .label("chunk setpoints (policy)")
                .legend(|(x, y)| Circle::new((x + 10, y), 3, CHUNK.filled()));
        }
        Ok(())
    }

    /// Joint `j`'s setpoint, command and measured position as envelopes.
    fn draw_positions<DB: DrawingBackend>(
        &self,
        chart: &mut JointChart<'_, DB>,
        j: usize,
    ) -> Result<(), PlotError> {
        for (s, (name, colour, width)) in [
            ("setpoint (executor)", SETPOINT, 2),
            ("command (after gate)", COMMAND, 2),
            ("measured", MEASURED, 1),
        ]
        .into_iter()
        .enumerate()
        {
            chart
                .draw_series(LineSeries::new(
                    envelope(self.data, s, j),
                    colour.stroke_width(width),
                ))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
                });
        }
        Ok(())
    }

    /// The gate's interventions on joint `j`: a tick each along the bottom of its
    /// position range `lo..hi`.
    fn draw_gate_ticks<DB: DrawingBackend>(
        &self,
        chart: &mut JointChart<'_, DB>,
        j: usize,
        lo: f64,
        hi: f64,
    ) -> Result<(), PlotError> {
        let d = self.data;
        let marks = d.gate.get(j).map(Vec::as_slice).unwrap_or(&[]);
        let tick = (hi - lo) * 0.06;
        let series =
            chart
                .draw_series(marks.iter().map(|&t| {
                    PathElement::new(vec![(t, lo), (t, lo + tick)], GATE.stroke_width(2))
                }))
                .map_err(err)?;
        if d.gate.iter().any(|g| !g.is_empty()) {
            series.label("gate acted").legend(|(x, y)| {
                PathElement::new(vec![(x + 10, y - 6), (x + 10, y + 6)], GATE.stroke_width(2))
            });
        }
        Ok(())
    }
}

/// The position axis of joint `j`: the range of its setpoint, command and measured
/// position, padded (a unit range where none was recorded).
fn position_range(d: &RunData, j: usize) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for b in &d.buckets {
        for s in &b.range[..POSITIONS] {
            if let Some(&(a, z)) = s.get(j) {
                if a.is_finite() && z.is_finite() {
                    lo = lo.min(a);
                    hi = hi.max(z);
                }
            }
        }
    }
    if lo > hi {
        (lo, hi) = (-1.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(1e-3);
    (lo - pad, hi + pad)
}

/// The axis of series `s`, entry `j` (a joint's torque, the force): the recorded
/// range, padded by at least `min_pad` (a unit range where none was recorded).
fn series_range(d: &RunData, s: usize, j: usize, min_pad: f64) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, f64::MIN);
    for b in &d.buckets {
        if let Some(&(a, z)) = b.range[s].get(j) {
            if a.is_finite() && z.is_finite() {
                lo = lo.min(a);
                hi = hi.max(z);
            }
        }
    }
    if lo > hi {
        return (-1.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(min_pad);
    (lo - pad, hi + pad)
}

/// Series `s` of joint `j` as a polyline: per bucket its min then its max (one
/// point per sample when the buckets hold one each).
fn envelope(d: &RunData, s: usize, j: usize) -> Vec<(f64, f64)> {
    let mut pts = Vec::with_capacity(d.buckets.len() * 2);
    for b in &d.buckets {
        let Some(&(lo, hi)) = b.range[s].get(j) else {
            continue;
        };
        if !(lo.is_finite() && hi.is_finite()) {
            continue;
        }
        if b.t.0 == b.t.1 && lo == hi {
            pts.push((b.t.0, lo));
        } else {
            pts.push((b.t.0, lo));
            pts.push((b.t.1, hi));
        }
    }
    pts
}
