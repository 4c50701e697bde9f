//! `chunkrt margin`: how much delay can this loop take?
//!
//! Closes a host-side servo on the simulated arm, measures `L(jw)` with a sine probe
//! at the controller output, finds the gain crossover and the phase margin (and the
//! gain margin where the phase reaches -180 degrees), then sweeps injected transport
//! delay and prints the margin against the delay, beside `PM0 - 360 f_c tau` and the
//! hand model of docs/margin.md. Writes `margin.json` and `margin.svg` / `margin.png`.

use anyhow::{bail, Context};
use chunkrt_config::Config;
use chunkrt_rt::margin::{
    self, bode, delay_at_threshold_ms, gain_crossover, model_loop, model_margins, phase_crossover,
    phase_margin_deg, pm_slope_deg_per_ms, sweep, unwrapped_phase_deg, DelayRow, LoopPoint,
    MarginSetup, PointStatus, ServoGains,
};
use chunkrt_telemetry::plot;
use clap::Parser;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::json;
use std::path::PathBuf;

/// `chunkrt margin`.
#[derive(Parser, Debug, Clone)]
pub struct MarginArgs {
    /// Runtime config whose `[control]` period and `[sim]` arm are used (default: the
    /// reference loop of docs/margin.md: one frictionless joint, 1 ms bus period).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Injected delays: `START:END:STEPms` (e.g. `0:60:5ms`) or a list `0,10,20ms`.
    #[arg(long, default_value = "0:60:5ms")]
    pub delays: String,
    /// Bode frequencies in Hz, comma-separated (default: 0.5 Hz to 0.4 x Nyquist).
    #[arg(long, value_delimiter = ',')]
    pub freqs: Option<Vec<f64>>,
    /// Report the delay at which the phase margin falls below this.
    #[arg(long, default_value_t = 30.0)]
    pub threshold_deg: f64,
    /// Joint the loop is closed on.
    #[arg(long, default_value_t = 0)]
    pub joint: usize,
    /// Host servo proportional gain (rad/rad).
    #[arg(long, default_value_t = 0.0)]
    pub kp: f64,
    /// Host servo integral gain (1/s); default 2 pi 3.
    #[arg(long, default_value_t = 2.0 * std::f64::consts::PI * 3.0)]
    pub ki: f64,
    /// Probe amplitude in rad.
    #[arg(long, default_value_t = 1e-3)]
    pub amplitude_rad: f64,
    /// Output directory for margin.json and margin.svg/.png.
    #[arg(long, default_value = "runs/margin")]
    pub out: PathBuf,
}

/// Parses `0:60:5ms`, `0,10,20ms`, `0:0.06:0.005s` into nanoseconds.
pub fn parse_delays(s: &str) -> Result<Vec<u64>, String> {
    let s = s.trim();
    let (body, scale) = if let Some(b) = s.strip_suffix("ms") {
        (b, 1e6)
    } else if let Some(b) = s.strip_suffix("us") {
        (b, 1e3)
    } else if let Some(b) = s.strip_suffix('s') {
        (b, 1e9)
    } else {
        return Err(format!(
            "`{s}`: expected a unit (ms, us or s), e.g. `0:60:5ms`"
        ));
    };
    let num = |t: &str| -> Result<f64, String> {
        let v: f64 = t
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: `{t}` is not a number"))?;
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!("`{s}`: `{t}` must be a delay >= 0"))
        }
    };
    let values: Vec<f64> = if body.contains(':') {
        let parts: Vec<&str> = body.split(':').collect();
        if parts.len() != 3 {
            return Err(format!("`{s}`: expected START:END:STEP"));
        }
        let (a, b, step) = (num(parts[0])?, num(parts[1])?, num(parts[2])?);
        if step <= 0.0 || b < a {
            return Err(format!("`{s}`: expected END >= START and STEP > 0"));
        }
        let n = ((b - a) / step + 1e-9).floor() as usize;
        if n > 1000 {
            return Err(format!("`{s}`: more than 1000 delays"));
        }
        (0..=n).map(|i| a + i as f64 * step).collect()
    } else {
        body.split(',').map(num).collect::<Result<_, _>>()?
    };
    if values.is_empty() {
        return Err(format!("`{s}`: no delay given"));
    }
    Ok(values.iter().map(|v| (v * scale).round() as u64).collect())
}

fn setup(args: &MarginArgs) -> anyhow::Result<(MarginSetup, String)> {
    let mut setup = MarginSetup::reference();
    let name = match &args.config {
        Some(path) => {
            let cfg = Config::load(path)?;
            setup.arm = chunkrt_rt::build::sim_params(&cfg);
            setup.period_ns = cfg.period_ns();
            path.display().to_string()
        }
        None => "reference loop (docs/margin.md)".to_string(),
    };
    setup.joint = args.joint;
    setup.gains = ServoGains {
        kp: args.kp,
        ki_per_s: args.ki,
    };
    setup.amplitude_rad = args.amplitude_rad;
    setup.check()?;
    Ok((setup, name))
}

/// Runs `chunkrt margin`.
pub fn margin(args: &MarginArgs) -> anyhow::Result<u8> {
    let (setup, name) = setup(args)?;
    let delays = parse_delays(&args.delays).map_err(anyhow::Error::msg)?;
    if !(args.threshold_deg.is_finite() && (0.0..180.0).contains(&args.threshold_deg)) {
        bail!("--threshold-deg {}: expected 0 to 180", args.threshold_deg);
    }
    let nyquist = 0.5e9 / setup.period_ns as f64;
    let mut freqs = args.freqs.clone().unwrap_or_else(|| {
        [
            0.5, 1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 50.0, 70.0, 100.0, 150.0, 200.0,
        ]
        .into_iter()
        .filter(|&f| f <= 0.4 * nyquist)
        .collect()
    });
    if let Some(f) = freqs
        .iter()
        .find(|f| !(f.is_finite() && **f > 0.0 && **f < nyquist))
    {
        bail!("--freqs: {f} Hz is not in (0, Nyquist = {nyquist} Hz)");
    }
    freqs.sort_by(f64::total_cmp);
    eprintln!(
        "chunkrt margin: {name}, joint {}, {} ms bus period, kp {} ki {} 1/s, probe {} rad",
        setup.joint,
        setup.period_ns as f64 * 1e-6,
        setup.gains.kp,
        setup.gains.ki_per_s,
        setup.amplitude_rad
    );

    let points = bode(&setup, 0, &freqs)?;
    let i = (0..points.len().saturating_sub(1))
        .find(|&i| points[i].mag() > 1.0 && points[i + 1].mag() < 1.0)
        .context("|L| does not fall through 1 between the --freqs; widen them")?;
    let (lo, hi) = (points[i].freq_hz, points[i + 1].freq_hz);
    let c0 = gain_crossover(&setup, 0, lo, hi)?;
    let pm0 = phase_margin_deg(&c0).context("the loop is not stable at zero delay")?;
    let fc = c0.freq_hz;
    let phases = unwrapped_phase_deg(&points);
    let gm = match (1..phases.len()).find(|&k| phases[k - 1] > -180.0 && phases[k] <= -180.0) {
        Some(k) => {
            let p = phase_crossover(&setup, 0, points[k - 1].freq_hz, points[k].freq_hz)?;
            Some((p.freq_hz, -20.0 * p.mag().log10()))
        }
        None => None,
    };
    let rows = sweep(&setup, &delays, lo, hi)?;
    let slope = pm_slope_deg_per_ms(&rows);
    let at = delay_at_threshold_ms(&rows, args.threshold_deg);
    let model0 = model_margins(&setup, 0.0);

    print_table(
        &setup,
        &rows,
        pm0,
        fc,
        gm,
        slope,
        at,
        args.threshold_deg,
        model0,
    );
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let json = report_json(
        &setup,
        &name,
        &points,
        &rows,
        (pm0, fc),
        gm,
        slope,
        at,
        args,
    );
    let json_path = args.out.join("margin.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let fig = MarginFigure {
        period_ms: setup.period_ns as f64 * 1e-6,
        points: &points,
        rows: &rows,
        pm0,
        fc,
        threshold: args.threshold_deg,
    };
    let written = plot::save(&fig, &args.out.join("margin")).map_err(anyhow::Error::msg)?;
    println!(
        "wrote {}, {} and {}",
        json_path.display(),
        written[0].display(),
        written[1].display()
    );
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
fn print_table(
    setup: &MarginSetup,
    rows: &[DelayRow],
    pm0: f64,
    fc: f64,
    gm: Option<(f64, f64)>,
    slope: Option<f64>,
    at: Option<f64>,
    threshold: f64,
    model0: Option<margin::ModelMargins>,
) {
    println!("gain crossover f_c = {fc:.3} Hz, phase margin PM0 = {pm0:.2} deg (measured)");
    if let Some(m) = model0 {
        println!(
            "hand model:      f_c = {:.3} Hz, PM0 = {:.2} deg (exact only without Coulomb friction)",
            m.crossover_hz, m.pm_deg
        );
    }
    match gm {
        Some((f, db)) => println!("gain margin {db:.2} dB at {f:.2} Hz (phase -180 deg)"),
        None => println!("gain margin: the phase does not reach -180 deg in --freqs"),
    }
    println!();
    println!(
        "{:>9} {:>9} {:>9} {:>12} {:>16} {:>10}",
        "delay_ms", "eff_ms", "f_c_Hz", "PM_meas_deg", "PM0-360fc*tau", "model_deg"
    );
    for r in rows {
        let tau = r.effective_delay_ns as f64 * 1e-9;
        let meas = match (r.pm_deg, r.crossover.status) {
            (Some(pm), _) => format!("{pm:.2}"),
            (None, PointStatus::Unstable) => "unstable".into(),
            (None, _) => "saturated".into(),
        };
        let model = model_margins(setup, tau).map_or("-".into(), |m| format!("{:.2}", m.pm_deg));
        println!(
            "{:>9.2} {:>9.2} {:>9.3} {:>12} {:>16.2} {:>10}",
            r.delay_ns as f64 * 1e-6,
            tau * 1e3,
            r.crossover.freq_hz,
            meas,
            pm0 - 360.0 * fc * tau,
            model
        );
    }
    println!();
    if let Some(s) = slope {
        println!(
            "margin lost per ms of delay: {:.4} deg/ms measured, 360 f_c = {:.4} deg/ms",
            -s,
            0.36 * fc
        );
    }
    match at {
        Some(d) => {
            println!("phase margin falls below {threshold} deg at {d:.1} ms of injected delay")
        }
        None => println!("phase margin stays above {threshold} deg over the swept delays"),
    }
}

#[allow(clippy::too_many_arguments)]
fn report_json(
    setup: &MarginSetup,
    name: &str,
    points: &[LoopPoint],
    rows: &[DelayRow],
    (pm0, fc): (f64, f64),
    gm: Option<(f64, f64)>,
    slope: Option<f64>,
    at: Option<f64>,
    args: &MarginArgs,
) -> serde_json::Value {
    let phases = unwrapped_phase_deg(points);
    let bode: Vec<_> = points
        .iter()
        .zip(&phases)
        .map(|(p, ph)| {
            let m = model_loop(setup, 0.0, p.freq_hz);
            json!({
                "freq_hz": p.freq_hz,
                "mag": p.mag(),
                "mag_db": 20.0 * p.mag().log10(),
                "phase_deg": ph,
                "model_mag": m.abs(),
                "status": format!("{:?}", p.status).to_lowercase(),
            })
        })
        .collect();
    let sweep: Vec<_> = rows
        .iter()
        .map(|r| {
            let tau = r.effective_delay_ns as f64 * 1e-9;
            json!({
                "delay_ms": r.delay_ns as f64 * 1e-6,
                "effective_delay_ms": tau * 1e3,
                "crossover_hz": r.crossover.freq_hz,
                "pm_deg": r.pm_deg,
                "status": format!("{:?}", r.crossover.status).to_lowercase(),
                "pm_expected_deg": pm0 - 360.0 * fc * tau,
                "pm_model_deg": model_margins(setup, tau).map(|m| m.pm_deg),
            })
        })
        .collect();
    let model = model_margins(setup, 0.0);
    json!({
        "loop": {
            "config": name,
            "joint": setup.joint,
            "period_ms": setup.period_ns as f64 * 1e-6,
            "kp": setup.gains.kp,
            "ki_per_s": setup.gains.ki_per_s,
            "probe_amplitude_rad": setup.amplitude_rad,
            "drive_bandwidth_hz": setup.arm.bandwidth_hz,
            "inertia_kg_m2": setup.arm.inertia_kg_m2[setup.joint],
            "viscous_nm_s_rad": setup.arm.viscous_nm_s_rad[setup.joint],
            "coulomb_nm": setup.arm.coulomb_nm[setup.joint],
        },
        "crossover_hz": fc,
        "pm0_deg": pm0,
        "gain_margin": gm.map(|(f, db)| json!({"freq_hz": f, "db": db})),
        "loss_deg_per_ms": slope.map(|s| -s),
        "expected_loss_deg_per_ms": 0.36 * fc,
        "threshold_deg": args.threshold_deg,
        "delay_at_threshold_ms": at,
        "model": model.map(|m| json!({
            "crossover_hz": m.crossover_hz,
            "pm0_deg": m.pm_deg,
            "gain_margin": m.gain_margin.map(|(f, db)| json!({"freq_hz": f, "db": db})),
        })),
        "bode": bode,
        "sweep": sweep,
    })
}

/// Two panels side by side: phase margin against delay (measured points, the line
/// `PM0 - 360 f_c tau`, the threshold), and the Bode plot at zero delay.
struct MarginFigure<'a> {
    period_ms: f64,
    points: &'a [LoopPoint],
    rows: &'a [DelayRow],
    pm0: f64,
    fc: f64,
    threshold: f64,
}

impl plot::Figure for MarginFigure<'_> {
    fn size(&self) -> (u32, u32) {
        (1200, 520)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (left, right) = root.split_horizontally(560);
        self.draw_pm(&left)?;
        let (mag, phase) = right.split_vertically(260);
        self.draw_bode(&mag, &phase)
    }
}

impl MarginFigure<'_> {
    fn draw_pm<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let (pm0, fc, threshold) = (self.pm0, self.fc, self.threshold);
        let delay_ms = |r: &DelayRow| r.effective_delay_ns as f64 * 1e-6;
        let dmax = self.rows.iter().map(delay_ms).fold(1.0, f64::max);
        let pm_max = (pm0 / 10.0).ceil() * 10.0 + 10.0;
        let pm_min = self
            .rows
            .iter()
            .filter_map(|r| r.pm_deg)
            .fold(0.0f64, f64::min)
            .min(pm0 - 0.36 * fc * dmax)
            .floor()
            .min(0.0);
        let mut chart = ChartBuilder::on(area)
            .caption("Phase margin vs injected delay", (plot::FONT, 16))
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
        let [blue, vermillion, ..] = plot::COLOURS;
        chart
            .draw_series(LineSeries::new(
                [(0.0, pm0), (dmax, pm0 - 0.36 * fc * dmax)],
                vermillion.stroke_width(2),
            ))
            .map_err(plot::err)?
            .label("PM0 - 360 f_c tau")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], vermillion.stroke_width(2))
            });
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, threshold), (dmax, threshold)],
                5,
                4,
                RGBColor(0x99, 0x99, 0x99).into(),
            ))
            .map_err(plot::err)?
            .label(format!("threshold {threshold} deg"))
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(0x99, 0x99, 0x99))
            });
        chart
            .draw_series(
                self.rows
                    .iter()
                    .filter_map(|r| Some((delay_ms(r), r.pm_deg?)))
                    .map(|p| Circle::new(p, 4, blue.filled())),
            )
            .map_err(plot::err)?
            .label("measured")
            .legend(move |(x, y)| Circle::new((x + 10, y), 4, blue.filled()));
        plot::legend(&mut chart, SeriesLabelPosition::UpperRight, 12)?;
        Ok(())
    }

    fn draw_bode<DB: DrawingBackend>(
        &self,
        mag: &DrawingArea<DB, Shift>,
        phase: &DrawingArea<DB, Shift>,
    ) -> Result<(), String> {
        let phases = unwrapped_phase_deg(self.points);
        let f_lo = 10f64.powf(
            self.points
                .first()
                .map_or(0.1, |p| p.freq_hz)
                .log10()
                .floor(),
        );
        let f_hi = 10f64.powf(
            self.points
                .last()
                .map_or(100.0, |p| p.freq_hz)
                .log10()
                .ceil(),
        );
        let db: Vec<f64> = self.points.iter().map(|p| 20.0 * p.mag().log10()).collect();
        let db_range = (
            (db.iter().cloned().fold(0.0, f64::min) / 10.0).floor() * 10.0,
            (db.iter().cloned().fold(0.0, f64::max) / 10.0).ceil() * 10.0 + 1.0,
        );
        let ph_range = (
            (phases.iter().cloned().fold(-180.0, f64::min) / 45.0).floor() * 45.0,
            0.0,
        );
        let [blue, vermillion, ..] = plot::COLOURS;
        for (area, (lo, hi), vals, label, reference, caption) in [
            (
                mag,
                db_range,
                &db,
                "|L| (dB)",
                0.0,
                format!(
                    "Bode plot of L at zero delay ({} ms bus period)",
                    self.period_ms
                ),
            ),
            (
                phase,
                ph_range,
                &phases,
                "phase L (deg)",
                -180.0,
                format!("f_c = {:.2} Hz (vertical line)", self.fc),
            ),
        ] {
            let mut chart = ChartBuilder::on(area)
                .caption(caption, (plot::FONT, 14))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(55)
                .build_cartesian_2d((f_lo..f_hi).log_scale(), lo..hi)
                .map_err(plot::err)?;
            chart
                .configure_mesh()
                .x_desc("frequency (Hz, log)")
                .y_desc(label)
                .label_style((plot::FONT, 12))
                .draw()
                .map_err(plot::err)?;
            chart
                .draw_series(LineSeries::new(
                    self.points
                        .iter()
                        .zip(vals.iter())
                        .map(|(p, v)| (p.freq_hz, *v)),
                    blue.stroke_width(2),
                ))
                .map_err(plot::err)?;
            chart
                .draw_series(DashedLineSeries::new(
                    [(f_lo, reference), (f_hi, reference)],
                    5,
                    4,
                    RGBColor(0x99, 0x99, 0x99).into(),
                ))
                .map_err(plot::err)?;
            chart
                .draw_series(LineSeries::new(
                    [(self.fc, lo), (self.fc, hi)],
                    vermillion.stroke_width(1),
                ))
                .map_err(plot::err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_lists_parse_and_refuse_garbage() {
        assert_eq!(
            parse_delays("0:20:5ms").unwrap(),
            vec![0, 5_000_000, 10_000_000, 15_000_000, 20_000_000]
        );
        assert_eq!(parse_delays("0,2.5ms").unwrap(), vec![0, 2_500_000]);
        assert_eq!(
            parse_delays("0:0.01:0.005s").unwrap(),
            vec![0, 5_000_000, 10_000_000]
        );
        assert!(parse_delays("0:60:5").unwrap_err().contains("unit"));
        assert!(parse_delays("0:60ms").is_err());
        assert!(parse_delays("10:0:5ms").is_err());
        assert!(parse_delays("0:60:0ms").is_err());
        assert!(parse_delays("-5ms").is_err());
        assert!(parse_delays("a,b ms").is_err());
    }
}
