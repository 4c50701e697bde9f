//! `chunkrt margin`: how much delay can this loop take?
//!
//! Closes a host-side servo on the simulated arm, measures `L(jw)` with a sine probe
//! at the controller output, finds the gain crossover and the phase margin (and the
//! gain margin where the phase reaches -180 degrees), then sweeps injected transport
//! delay and prints the margin against the delay, beside `PM0 - 360 f_c tau` and the
//! hand model of docs/margin.md. Writes `margin.json` and `margin.svg`.

use anyhow::{bail, Context};
use chunkrt_config::Config;
use chunkrt_rt::margin::{
    self, bode, delay_at_threshold_ms, gain_crossover, model_loop, model_margins, phase_crossover,
    phase_margin_deg, pm_slope_deg_per_ms, sweep, unwrapped_phase_deg, DelayRow, LoopPoint,
    MarginSetup, PointStatus, ServoGains,
};
use clap::Parser;
use serde_json::json;
use std::fmt::Write as _;
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
    /// Output directory for margin.json and margin.svg.
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
    let svg_path = args.out.join("margin.svg");
    std::fs::write(
        &svg_path,
        svg(&setup, &points, &rows, pm0, fc, args.threshold_deg),
    )
    .with_context(|| format!("writing {}", svg_path.display()))?;
    println!("wrote {} and {}", json_path.display(), svg_path.display());
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
fn svg(
    setup: &MarginSetup,
    points: &[LoopPoint],
    rows: &[DelayRow],
    pm0: f64,
    fc: f64,
    threshold: f64,
) -> String {
    const W: f64 = 1100.0;
    const H: f64 = 480.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);

    // Panel 1: PM vs delay.
    let (x0, y0, pw, ph) = (70.0, 50.0, 420.0, 360.0);
    let dmax = rows
        .iter()
        .map(|r| r.effective_delay_ns as f64 * 1e-6)
        .fold(1.0, f64::max);
    let pm_max = (pm0 / 10.0).ceil() * 10.0 + 10.0;
    let pm_min = rows
        .iter()
        .filter_map(|r| r.pm_deg)
        .fold(0.0f64, f64::min)
        .min(pm0 - 0.36 * fc * dmax)
        .floor()
        .min(0.0);
    let sx = |d: f64| x0 + d / dmax * pw;
    let sy = |v: f64| y0 + (pm_max - v) / (pm_max - pm_min) * ph;
    axes(
        &mut s,
        x0,
        y0,
        pw,
        ph,
        "injected delay (ms)",
        "phase margin (deg)",
    );
    for k in 0..=5 {
        let d = dmax * k as f64 / 5.0;
        let v = pm_min + (pm_max - pm_min) * k as f64 / 5.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{d:.0}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{v:.0}</text>"#,
            sx(d),
            y0 + ph + 16.0,
            x0 - 6.0,
            sy(v) + 4.0
        );
    }
    let _ = writeln!(
        s,
        r##"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#D55E00" stroke-width="2"/>"##,
        sx(0.0),
        sy(pm0),
        sx(dmax),
        sy(pm0 - 0.36 * fc * dmax)
    );
    let _ = writeln!(
        s,
        r##"<line x1="{x0}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="5,4"/>"##,
        sy(threshold),
        x0 + pw,
        sy(threshold)
    );
    for r in rows {
        if let Some(pm) = r.pm_deg {
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="4" fill="#0072B2"/>"##,
                sx(r.effective_delay_ns as f64 * 1e-6),
                sy(pm)
            );
        }
    }
    let _ = writeln!(
        s,
        r##"<text x="{x0}" y="22" font-size="14">Phase margin vs injected delay</text><text x="{x0}" y="40" fill="#555">dots: measured; line: PM0 - 360 f_c tau; dashed: {threshold} deg</text>"##
    );

    // Panel 2: Bode magnitude (dB) and phase (deg) against log frequency.
    let (bx, by, bw, bh) = (620.0, 50.0, 420.0, 160.0);
    let phases = unwrapped_phase_deg(points);
    let f_lo = points.first().map_or(0.1, |p| p.freq_hz).log10().floor();
    let f_hi = points.last().map_or(100.0, |p| p.freq_hz).log10().ceil();
    let lx = |f: f64| bx + (f.log10() - f_lo) / (f_hi - f_lo) * bw;
    let db: Vec<f64> = points.iter().map(|p| 20.0 * p.mag().log10()).collect();
    let (db_lo, db_hi) = (
        (db.iter().cloned().fold(0.0, f64::min) / 10.0).floor() * 10.0,
        (db.iter().cloned().fold(0.0, f64::max) / 10.0).ceil() * 10.0,
    );
    let (ph_lo, ph_hi) = (
        (phases.iter().cloned().fold(-180.0, f64::min) / 45.0).floor() * 45.0,
        0.0,
    );
    for (panel_y, lo, hi, vals, label) in [
        (by, db_lo, db_hi, &db, "|L| (dB)"),
        (by + bh + 40.0, ph_lo, ph_hi, &phases, "phase L (deg)"),
    ] {
        let ly = |v: f64| panel_y + (hi - v) / (hi - lo).max(1e-9) * bh;
        let xlabel = if panel_y > by {
            "frequency (Hz, log)"
        } else {
            ""
        };
        axes(&mut s, bx, panel_y, bw, bh, xlabel, label);
        let mut d = String::new();
        for (p, v) in points.iter().zip(vals.iter()) {
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if d.is_empty() { "M" } else { "L" },
                lx(p.freq_hz),
                ly(*v)
            );
        }
        let _ = writeln!(
            s,
            r##"<path d="{d}" fill="none" stroke="#0072B2" stroke-width="2"/>"##
        );
        let zero = if label.starts_with('|') { 0.0 } else { -180.0 };
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#555">{zero:.0}</text>"##,
            bx + bw + 4.0,
            ly(zero) + 4.0
        );
        let _ = writeln!(
            s,
            r##"<line x1="{bx}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="5,4"/>"##,
            ly(zero),
            bx + bw,
            ly(zero)
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{hi:.0}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{lo:.0}</text>"#,
            bx - 6.0,
            panel_y + 4.0,
            bx - 6.0,
            panel_y + bh + 4.0
        );
    }
    for e in (f_lo as i32)..=(f_hi as i32) {
        let f = 10f64.powi(e);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{f}</text>"#,
            lx(f),
            by + 2.0 * bh + 56.0
        );
    }
    let _ = writeln!(
        s,
        r##"<line x1="{:.1}" y1="{by}" x2="{:.1}" y2="{:.1}" stroke="#D55E00"/>"##,
        lx(fc),
        lx(fc),
        by + 2.0 * bh + 40.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{bx}" y="22" font-size="14">Bode plot of L at zero delay</text><text x="{bx}" y="40" fill="#555">f_c = {fc:.2} Hz (vertical line), {} ms bus period</text>"##,
        setup.period_ns as f64 * 1e-6
    );
    s.push_str("</svg>\n");
    s
}

fn axes(s: &mut String, x: f64, y: f64, w: f64, h: f64, xlabel: &str, ylabel: &str) {
    let _ = writeln!(
        s,
        r##"<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{xlabel}</text>"#,
        x + w / 2.0,
        y + h + 32.0
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle">{ylabel}</text>"#,
        x - 48.0,
        y + h / 2.0
    );
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
