//! `chunkrt margin`: how much delay can this loop take?
//!
//! Closes a host-side servo on the simulated arm, measures `L(jw)` with a sine probe
//! at the controller output, finds the gain crossover and the phase margin (and the
//! gain margin where the phase reaches -180 degrees), then sweeps injected transport
//! delay and prints the margin against the delay, beside `PM0 - 360 f_c tau` and the
//! hand model of docs/margin.md. Writes `margin.json` and `margin.svg` / `margin.png`.

use anyhow::{bail, Context};
use chunkrt_config::Config;
use chunkrt_margin::{
    bode, delay_at_threshold_ms, gain_crossover, model_loop, model_margins, phase_crossover,
    phase_margin_deg, pm_slope_deg_per_ms, sweep, unwrapped_phase_deg, DelayRow, LoopPoint,
    MarginSetup, ModelMargins, PointStatus, ServoGains, Stability,
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
    /// Runtime config. With `--loop runtime` (the default when a config is given)
    /// its whole loop is measured: its policy, executor, gate and backend. With
    /// `--loop reference` only its `[control]` period and `[sim]` arm are used.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Which loop: `runtime` (the runtime's own loop through the policy, on the
    /// config's backend) or `reference` (a host servo closed on one simulated
    /// joint, checked against its analytic model). Default: runtime with
    /// `--config`, reference without.
    #[arg(long = "loop", value_enum)]
    pub loop_kind: Option<LoopKind>,
    /// Runtime loop: where the delay goes in (`transport`: gate -> drives;
    /// `observation`: loop -> policy; `feedback`: drives -> loop; `inference`: the
    /// policy's compute time).
    #[arg(long, value_enum, default_value = "transport")]
    pub inject_at: InjectAt,
    /// Runtime loop, `--inject-at inference`: a normal jitter with this standard
    /// deviation around each delay (ms; e.g. 35 with 6.2: P99 near 49.5).
    #[arg(long, default_value_t = 0.0)]
    pub jitter_ms: f64,
    /// Runtime loop: compensations, each measured at every delay in the same run
    /// (`none`, `lookahead`: the executor plays the chunk ahead by the injected
    /// delay; `extrapolate`: the observation moved on by velocity x its age).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "none")]
    pub compensate: Vec<Compensation>,
    /// Runtime loop: replace the config's policy by the servo policy with this
    /// integral gain (1/s), holding where the arm starts: the margin of the
    /// runtime, bus and drives around a feedback law of known crossover (near
    /// K / 2 pi Hz).
    #[arg(long, value_name = "K")]
    pub servo_gain: Option<f64>,
    /// Runtime loop: override `policy.state_source` (`measured` closes the policy's
    /// loop through the arm; `planned` policies observe their own plan).
    #[arg(long)]
    pub state_source: Option<String>,
    /// Runtime loop: the policy's only goal is the simulated arm's start pose
    /// (`[sim] initial_pos_rad`): it holds there while it is measured.
    #[arg(long)]
    pub hold: bool,
    /// Runtime loop: override `control.period_ms` (1 to 20).
    #[arg(long)]
    pub bus_period_ms: Option<f64>,
    /// Runtime loop: the excursion guard. Once the probed joint's setpoint has moved
    /// this far from where it was when the probe started, the policy loses
    /// authority for the rest of that point's run (an unstable loop is stopped).
    #[arg(long, default_value_t = 0.1)]
    pub max_excursion_rad: f64,
    /// Runtime loop: DFT window per delay (s).
    #[arg(long, default_value_t = 20.0)]
    pub window_s: f64,
    /// Runtime loop: time before the probe (s).
    #[arg(long, default_value_t = 4.0)]
    pub settle_s: f64,
    /// Runtime loop: free response after the probe, judged for stability (s).
    #[arg(long, default_value_t = 8.0)]
    pub free_s: f64,
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
    /// Probe amplitude in rad (each component; default 1 mrad for the reference
    /// loop, 2 mrad for the runtime loop).
    #[arg(long)]
    pub amplitude_rad: Option<f64>,
    /// Output directory for margin.json and margin.svg/.png.
    #[arg(long, default_value = "runs/margin")]
    pub out: PathBuf,
}

/// The loop `chunkrt margin` measures.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    /// The runtime's own loop.
    Runtime,
    /// The host servo on one simulated joint (docs/margin.md).
    Reference,
}

/// Where the runtime loop's delay goes in.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectAt {
    /// `[inject] transport_delay_ms`.
    Transport,
    /// `[inject] observation_delay_ms`.
    Observation,
    /// `[inject] feedback_delay_ms`.
    Feedback,
    /// `[inject] inference_delay`.
    Inference,
}

/// A compensation measured beside the plain loop.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compensation {
    /// Nothing.
    None,
    /// `executor.lookahead_ms` set to the injected delay.
    Lookahead,
    /// `inference.extrapolate_observation`.
    Extrapolate,
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
            if cfg.backend.kind != chunkrt_config::BackendKind::Sim {
                bail!(
                    "--loop reference closes its own servo on a simulated joint, but {} names \
                     the {:?} backend: measure that loop with --loop runtime",
                    path.display(),
                    cfg.backend.kind
                );
            }
            setup.arm = chunkrt_rt::build::sim_params(&cfg);
            setup.period_ns = cfg.period_ns();
            format!(
                "reference servo on the simulated arm of {} (its policy is not in this loop)",
                path.display()
            )
        }
        None => "reference loop (docs/margin.md)".to_string(),
    };
    setup.joint = args.joint;
    setup.gains = ServoGains {
        kp: args.kp,
        ki_per_s: args.ki,
    };
    setup.amplitude_rad = args.amplitude_rad.unwrap_or(1e-3);
    setup.check()?;
    Ok((setup, name))
}

/// Runs `chunkrt margin`.
pub fn margin(args: &MarginArgs) -> anyhow::Result<u8> {
    if !(args.threshold_deg.is_finite() && (0.0..180.0).contains(&args.threshold_deg)) {
        bail!("--threshold-deg {}: expected 0 to 180", args.threshold_deg);
    }
    let kind = args.loop_kind.unwrap_or(match args.config {
        Some(_) => LoopKind::Runtime,
        None => LoopKind::Reference,
    });
    if kind == LoopKind::Runtime {
        return crate::margin_live::margin_live(args);
    }
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
    errln!(
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
    let dmax = rows
        .iter()
        .map(|r| r.effective_delay_ns as f64 * 1e-6)
        .fold(1.0, f64::max);
    let fig = MarginFigure {
        title: "Phase margin vs injected delay (reference loop)".into(),
        series: vec![(
            "measured".into(),
            rows.iter()
                .filter_map(|r| Some((r.effective_delay_ns as f64 * 1e-6, r.pm_deg?)))
                .collect(),
        )],
        prediction: Some((
            "PM0 - 360 f_c tau".into(),
            (0.0, pm0),
            (dmax, pm0 - 0.36 * fc * dmax),
        )),
        dmax,
        threshold: args.threshold_deg,
        bode: points
            .iter()
            .zip(unwrapped_phase_deg(&points))
            .map(|(p, ph)| (p.freq_hz, p.mag(), ph))
            .collect(),
        bode_caption: format!(
            "Bode plot of L at zero delay ({} ms bus period)",
            setup.period_ns as f64 * 1e-6
        ),
        fc: Some(fc),
    };
    let written = plot::save(&fig, &args.out.join("margin")).map_err(anyhow::Error::msg)?;
    outln!(
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
    model0: Option<ModelMargins>,
) {
    outln!(
        "gain crossover f_c = {fc:.3} Hz, phase margin PM0 = {pm0:.2} deg (measured; \
         whether the loop is stable: the table)"
    );
    if let Some(m) = model0 {
        outln!(
            "hand model:      f_c = {:.3} Hz, PM0 = {:.2} deg (exact only without Coulomb friction)",
            m.crossover_hz, m.pm_deg
        );
    }
    match gm {
        Some((f, db)) => outln!("gain margin {db:.2} dB at {f:.2} Hz (phase -180 deg)"),
        None => outln!("gain margin: the phase does not reach -180 deg in --freqs"),
    }
    outln!("");
    outln!(
        "{:>9} {:>9} {:>9} {:>12} {:>16} {:>10}",
        "delay_ms",
        "eff_ms",
        "f_c_Hz",
        "PM_meas_deg",
        "PM0-360fc*tau",
        "model_deg"
    );
    for r in rows {
        let tau = r.effective_delay_ns as f64 * 1e-9;
        let (meas, why) = match (r.pm_deg, r.crossover.status) {
            (Some(pm), _) => (format!("{pm:.2}"), String::new()),
            (None, PointStatus::Saturated) => ("saturated".into(), String::new()),
            (None, _) => match r.verdict.stability {
                Stability::Unstable => ("unstable".into(), String::new()),
                other => ("-".into(), format!("  {}", other.explain())),
            },
        };
        let model = model_margins(setup, tau).map_or("-".into(), |m| format!("{:.2}", m.pm_deg));
        outln!(
            "{:>9.2} {:>9.2} {:>9.3} {:>12} {:>16.2} {:>10}{why}",
            r.delay_ns as f64 * 1e-6,
            tau * 1e3,
            r.crossover.freq_hz,
            meas,
            pm0 - 360.0 * fc * tau,
            model
        );
    }
    outln!("");
    if let Some(s) = slope {
        outln!(
            "margin lost per ms of delay: {:.4} deg/ms measured, 360 f_c = {:.4} deg/ms",
            -s,
            0.36 * fc
        );
    }
    match at {
        Some(d) => {
            outln!("phase margin falls below {threshold} deg at {d:.1} ms of injected delay")
        }
        None => outln!("phase margin stays above {threshold} deg over the swept delays"),
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
                "stability": r.verdict.stability.word(),
                "stability_detail": r.verdict.stability.explain(),
                "growth_per_s": r.verdict.growth_per_s.is_finite().then_some(r.verdict.growth_per_s),
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
        let [blue, vermillion, ..] = plot::COLOURS;
        let fc_caption = self.fc.map_or("no gain crossover".to_string(), |f| {
            format!("f_c = {f:.2} Hz (vertical line)")
        });
        for (area, (lo, hi), vals, label, reference, caption) in [
            (
                mag,
                db_range,
                &db,
                "|L| (dB)",
                0.0,
                self.bode_caption.clone(),
            ),
            (
                phase,
                ph_range,
                &phases,
                "phase L (deg)",
                -180.0,
                fc_caption,
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
                    bode.iter().zip(vals.iter()).map(|(p, v)| (p.0, *v)),
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
            if let Some(fc) = self.fc {
                chart
                    .draw_series(LineSeries::new(
                        [(fc, lo), (fc, hi)],
                        vermillion.stroke_width(1),
                    ))
                    .map_err(plot::err)?;
            }
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
