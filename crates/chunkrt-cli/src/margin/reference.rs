//! `chunkrt margin --loop reference`: a host-side servo closed on one simulated
//! joint, its Bode plot, gain crossover and margins at zero delay, then the margin
//! against injected transport delay beside `PM0 - 360 f_c tau` and the hand model
//! of docs/margin.md.

use super::args::{parse_delays, MarginArgs};
use super::figure::MarginFigure;
use super::json::{
    GainMargin, MarginJson, ModelJson, ReferenceBodePoint, ReferenceLoop, ReferenceMargin, SweepRow,
};
use anyhow::{bail, Context};
use chunkrt_margin::{
    bode, delay_at_threshold_ms, gain_crossover, model_loop, model_margins, phase_crossover,
    phase_margin_deg, pm_slope_deg_per_ms, sweep, unwrapped_phase_deg, DelayRow, LoopPoint,
    MarginSetup, ModelMargins, PointStatus, ServoGains, Stability,
};
use chunkrt_telemetry::plot;

fn setup(args: &MarginArgs) -> anyhow::Result<(MarginSetup, String)> {
    let mut setup = MarginSetup::reference();
    let name = match &args.config {
        Some(path) => {
            let cfg = crate::setup::load_config(path)?;
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

/// Runs `chunkrt margin --loop reference`.
pub fn margin_reference(args: &MarginArgs) -> anyhow::Result<u8> {
    let (setup, name) = setup(args)?;
    let delays = parse_delays(&args.delays).map_err(anyhow::Error::msg)?;
    let freqs = bode_freqs(args, &setup)?;
    errln!(
        "chunkrt margin: {name}, joint {}, {} ms bus period, kp {} ki {} 1/s, probe {} rad",
        setup.joint,
        setup.period_ns as f64 * 1e-6,
        setup.gains.kp,
        setup.gains.ki_per_s,
        setup.amplitude_rad
    );
    let m = measure(&setup, &freqs, &delays, args.threshold_deg)?;
    print_table(&setup, &m, args.threshold_deg);
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let json = report_json(&setup, &name, &m, args);
    let json_path = args.out.join("margin.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let fig = figure(&setup, &m, args.threshold_deg);
    let written = plot::save(&fig, &args.out.join("margin")).map_err(anyhow::Error::msg)?;
    outln!(
        "wrote {}, {} and {}",
        json_path.display(),
        written[0].display(),
        written[1].display()
    );
    Ok(0)
}

/// The Bode frequencies: `--freqs`, or a default list up to 0.4 x Nyquist; each
/// must lie in (0, Nyquist). Ascending.
fn bode_freqs(args: &MarginArgs, setup: &MarginSetup) -> anyhow::Result<Vec<f64>> {
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
    Ok(freqs)
}

/// What the reference loop measured.
struct Measured {
    /// `L` at each Bode frequency, at zero delay.
    points: Vec<LoopPoint>,
    /// The margin at each delay.
    rows: Vec<DelayRow>,
    /// Phase margin at zero delay (deg).
    pm0: f64,
    /// Gain crossover at zero delay (Hz).
    fc: f64,
    /// Gain margin: phase crossover (Hz) and dB, where the phase reaches -180.
    gm: Option<(f64, f64)>,
    /// Least-squares margin against delay (deg/ms).
    slope: Option<f64>,
    /// Delay (ms) at which the margin falls below the threshold.
    at: Option<f64>,
    /// The hand model at zero delay.
    model0: Option<ModelMargins>,
}

/// The Bode plot at zero delay, the gain crossover bracketed by it, the phase
/// crossover, then the sweep over `delays`.
fn measure(
    setup: &MarginSetup,
    freqs: &[f64],
    delays: &[u64],
    threshold_deg: f64,
) -> anyhow::Result<Measured> {
    let points = bode(setup, 0, freqs)?;
    let i = (0..points.len().saturating_sub(1))
        .find(|&i| points[i].mag() > 1.0 && points[i + 1].mag() < 1.0)
        .context("|L| does not fall through 1 between the --freqs; widen them")?;
    let (lo, hi) = (points[i].freq_hz, points[i + 1].freq_hz);
    let c0 = gain_crossover(setup, 0, lo, hi)?;
    let pm0 = phase_margin_deg(&c0).context("the loop is not stable at zero delay")?;
    let fc = c0.freq_hz;
    let phases = unwrapped_phase_deg(&points);
    let gm = match (1..phases.len()).find(|&k| phases[k - 1] > -180.0 && phases[k] <= -180.0) {
        Some(k) => {
            let p = phase_crossover(setup, 0, points[k - 1].freq_hz, points[k].freq_hz)?;
            Some((p.freq_hz, -20.0 * p.mag().log10()))
        }
        None => None,
    };
    let rows = sweep(setup, delays, lo, hi)?;
    Ok(Measured {
        slope: pm_slope_deg_per_ms(&rows),
        at: delay_at_threshold_ms(&rows, threshold_deg),
        model0: model_margins(setup, 0.0),
        points,
        rows,
        pm0,
        fc,
        gm,
    })
}

/// The margin against delay beside `PM0 - 360 f_c tau`, and the Bode plot at zero
/// delay.
fn figure(setup: &MarginSetup, m: &Measured, threshold: f64) -> MarginFigure {
    let (rows, pm0, fc) = (&m.rows, m.pm0, m.fc);
    let dmax = rows
        .iter()
        .map(|r| r.effective_delay_ns as f64 * 1e-6)
        .fold(1.0, f64::max);
    MarginFigure {
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
        threshold,
        bode: m
            .points
            .iter()
            .zip(unwrapped_phase_deg(&m.points))
            .map(|(p, ph)| (p.freq_hz, p.mag(), ph))
            .collect(),
        bode_caption: format!(
            "Bode plot of L at zero delay ({} ms bus period)",
            setup.period_ns as f64 * 1e-6
        ),
        fc: Some(fc),
    }
}

/// The crossover, the margins at zero delay, and the margin at each delay beside
/// `PM0 - 360 f_c tau` and the hand model.
fn print_table(setup: &MarginSetup, m: &Measured, threshold: f64) {
    let Measured {
        rows,
        pm0,
        fc,
        gm,
        slope,
        at,
        model0,
        ..
    } = m;
    let (pm0, fc) = (*pm0, *fc);
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

/// `margin.json`: the loop, the margins at zero delay, the hand model, the Bode
/// points and the sweep.
fn report_json(setup: &MarginSetup, name: &str, m: &Measured, args: &MarginArgs) -> MarginJson {
    let j = setup.joint;
    let model = model_margins(setup, 0.0);
    MarginJson::Reference(ReferenceMargin {
        loop_: ReferenceLoop {
            config: name.to_string(),
            joint: j,
            period_ms: setup.period_ns as f64 * 1e-6,
            kp: setup.gains.kp,
            ki_per_s: setup.gains.ki_per_s,
            probe_amplitude_rad: setup.amplitude_rad,
            drive_bandwidth_hz: setup.arm.bandwidth_hz,
            inertia_kg_m2: setup.arm.inertia_kg_m2[j],
            viscous_nm_s_rad: setup.arm.viscous_nm_s_rad[j],
            coulomb_nm: setup.arm.coulomb_nm[j],
        },
        crossover_hz: m.fc,
        pm0_deg: m.pm0,
        gain_margin: GainMargin::of(m.gm),
        loss_deg_per_ms: m.slope.map(|s| -s),
        expected_loss_deg_per_ms: 0.36 * m.fc,
        threshold_deg: args.threshold_deg,
        delay_at_threshold_ms: m.at,
        model: model.map(|m| ModelJson {
            crossover_hz: m.crossover_hz,
            pm0_deg: m.pm_deg,
            gain_margin: GainMargin::of(m.gain_margin),
        }),
        bode: bode_json(setup, &m.points),
        sweep: sweep_json(setup, &m.rows, m.pm0, m.fc),
    })
}

/// The Bode points of `margin.json`, each beside the hand model's `|L|`.
fn bode_json(setup: &MarginSetup, points: &[LoopPoint]) -> Vec<ReferenceBodePoint> {
    let phases = unwrapped_phase_deg(points);
    points
        .iter()
        .zip(&phases)
        .map(|(p, ph)| ReferenceBodePoint {
            freq_hz: p.freq_hz,
            mag: p.mag(),
            mag_db: 20.0 * p.mag().log10(),
            phase_deg: *ph,
            model_mag: model_loop(setup, 0.0, p.freq_hz).abs(),
            status: format!("{:?}", p.status).to_lowercase(),
        })
        .collect()
}

/// The sweep of `margin.json`: each delay's margin and verdict beside
/// `PM0 - 360 f_c tau` and the hand model.
fn sweep_json(setup: &MarginSetup, rows: &[DelayRow], pm0: f64, fc: f64) -> Vec<SweepRow> {
    rows.iter()
        .map(|r| {
            let tau = r.effective_delay_ns as f64 * 1e-9;
            SweepRow {
                delay_ms: r.delay_ns as f64 * 1e-6,
                effective_delay_ms: tau * 1e3,
                crossover_hz: r.crossover.freq_hz,
                pm_deg: r.pm_deg,
                status: format!("{:?}", r.crossover.status).to_lowercase(),
                stability: r.verdict.stability.word().to_string(),
                stability_detail: r.verdict.stability.explain(),
                growth_per_s: r
                    .verdict
                    .growth_per_s
                    .is_finite()
                    .then_some(r.verdict.growth_per_s),
                pm_expected_deg: pm0 - 360.0 * fc * tau,
                pm_model_deg: model_margins(setup, tau).map(|m| m.pm_deg),
            }
        })
        .collect()
}
