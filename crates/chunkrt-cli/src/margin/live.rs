//! `chunkrt margin --loop runtime`: the phase and delay margin of the runtime's own
//! loop (policy, executor, gate, backend) against injected delay, with the
//! compensations measured beside it and what a user sees of each point.

use super::args::{parse_delays, Compensation, InjectAt, MarginArgs};
use super::figure::MarginFigure;
use super::json::{
    finite, ActionFilter, FilterLag, GainMargin, MarginJson, Oscillation, RuntimeBodePoint,
    RuntimeLoop, RuntimeMargin, RuntimeRow,
};
use anyhow::{bail, Context};
use chunkrt_config::{Config, InferenceDelayConfig, InjectConfig};
use chunkrt_margin::live::{default_freqs, measure, LiveRow, LiveSetup, LiveStatus};
use chunkrt_telemetry::plot;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The injection of one point: the config's own `[inject]` plus `delay_ms` at
/// the chosen point.
fn inject_for(base: &InjectConfig, at: InjectAt, delay_ms: f64, jitter_ms: f64) -> InjectConfig {
    let mut inj = base.clone();
    match at {
        InjectAt::Transport => inj.transport_delay_ms += delay_ms,
        InjectAt::Observation => inj.observation_delay_ms += delay_ms,
        InjectAt::Feedback => inj.feedback_delay_ms += delay_ms,
        InjectAt::Inference => {
            inj.inference_delay = if jitter_ms > 0.0 {
                InferenceDelayConfig::Normal {
                    mean_ms: delay_ms,
                    std_ms: jitter_ms,
                }
            } else {
                InferenceDelayConfig::Fixed { ms: delay_ms }
            }
        }
    }
    inj
}

/// The config of one compensation at one delay.
fn compensated(cfg: &Config, comp: Compensation, delay_ms: f64) -> Config {
    let mut c = cfg.clone();
    match comp {
        Compensation::None => {}
        Compensation::Lookahead => c.executor.lookahead_ms += delay_ms,
        Compensation::Extrapolate => c.inference.extrapolate_observation = true,
    }
    c
}

fn comp_name(c: Compensation) -> &'static str {
    match c {
        Compensation::None => "none",
        Compensation::Lookahead => "lookahead",
        Compensation::Extrapolate => "extrapolate",
    }
}

/// A one-line description of the loop measured.
fn describe(cfg: &Config, joint: usize) -> String {
    let policy = match cfg.policy.kind {
        chunkrt_config::PolicyKind::Servo => {
            format!("servo policy (k = {} 1/s)", cfg.policy.gain_per_s)
        }
        chunkrt_config::PolicyKind::Scripted => "scripted policy".into(),
        chunkrt_config::PolicyKind::Onnx => format!(
            "ONNX policy {} (state source {})",
            cfg.policy
                .manifest
                .as_ref()
                .map_or("?".into(), |m| m.display().to_string()),
            cfg.policy.state_source
        ),
        chunkrt_config::PolicyKind::Remote => format!(
            "remote policy {} at {} (state source {})",
            cfg.policy
                .manifest
                .as_ref()
                .map_or("?".into(), |m| m.display().to_string()),
            cfg.policy.remote.as_ref().map_or("?", |r| r.url.as_str()),
            cfg.policy.state_source
        ),
    };
    let backend = match cfg.backend.kind {
        chunkrt_config::BackendKind::Sim => "simulated arm".to_string(),
        chunkrt_config::BackendKind::Mujoco => {
            let model = cfg
                .mujoco
                .as_ref()
                .map_or("?".to_string(), |m| m.model.display().to_string());
            format!("MuJoCo arm ({model})")
        }
        chunkrt_config::BackendKind::Ethercat => {
            let iface = cfg
                .ethercat
                .as_ref()
                .map_or("?".to_string(), |e| e.interface.clone());
            format!("EtherCAT on {iface}")
        }
    };
    format!(
        "runtime loop: {policy} -> chunk buffer -> executor -> gate -> {backend} -> \
         observation; probe on joint {joint}'s setpoint; {} ms bus, {} ms chunk period",
        cfg.control.period_ms, cfg.inference.chunk_period_ms
    )
}

/// Runs `chunkrt margin --loop runtime`.
pub fn margin_live(args: &MarginArgs) -> anyhow::Result<u8> {
    let (cfg, path) = runtime_config(args)?;
    let delays = parse_delays(&args.delays).map_err(anyhow::Error::msg)?;
    check_run_args(args, &cfg)?;
    let setup = live_setup(args, &cfg, path)?;
    let mut comps = args.compensate.clone();
    comps.dedup();
    let desc = describe(&cfg, args.joint);
    announce(args, &setup, &desc, delays.len(), comps.len());
    chunkrt_rt::signals::install().map_err(anyhow::Error::msg)?;
    chunkrt_rt::signals::loaded();
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    print_header();
    let (rows, stopped) = match sweep(args, &cfg, &setup, &delays, &comps)? {
        Swept::Done { rows, stopped } => (rows, stopped),
        Swept::Ended(status) => return Ok(status),
    };
    let json = report_json(args, &setup, &desc, &rows);
    let json_path = args.out.join("margin.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let fig = figure(args, &setup, &rows);
    let written = plot::save(&fig, &args.out.join("margin")).map_err(anyhow::Error::msg)?;
    outln!(
        "wrote {}, {} and {} (each point's run: {}/<comp>/delay-<ms>ms)",
        json_path.display(),
        written[0].display(),
        written[1].display(),
        args.out.display()
    );
    for why in &stopped {
        errln!("chunkrt: error: {why}");
    }
    Ok(if stopped.is_empty() {
        0
    } else {
        crate::EXIT_USAGE
    })
}

/// The config `--config` names, with the policy, goal, state source and bus period
/// the arguments override.
fn runtime_config(args: &MarginArgs) -> anyhow::Result<(Config, &Path)> {
    let path = args
        .config
        .as_ref()
        .context("--loop runtime needs --config (the loop it measures)")?;
    let mut cfg = crate::setup::load_config(path)?;
    if let Some(k) = args.servo_gain {
        if !(k.is_finite() && k > 0.0 && k <= 1000.0) {
            bail!("--servo-gain {k}: expected a gain in (0, 1000] 1/s");
        }
        cfg.policy.kind = chunkrt_config::PolicyKind::Servo;
        cfg.policy.gain_per_s = k;
        cfg.policy.goals_rad.clear();
        cfg.policy.candidates = 1;
    }
    if args.hold {
        let start = cfg
            .sim
            .as_ref()
            .and_then(|s| s.initial_pos_rad.clone())
            .context("--hold takes the goal from [sim] initial_pos_rad, which this config lacks")?;
        cfg.policy.goals_rad = vec![(0..cfg.control.joints).map(|j| start.get(j)).collect()];
    }
    if let Some(src) = &args.state_source {
        if !matches!(
            src.as_str(),
            "manifest" | "measured" | "commanded" | "planned"
        ) {
            bail!("--state-source {src}: expected manifest, measured, commanded or planned");
        }
        cfg.policy.state_source = src.clone();
    }
    if let Some(p) = args.bus_period_ms {
        if !(1.0..=20.0).contains(&p) {
            bail!("--bus-period-ms {p}: expected 1 to 20");
        }
        cfg.control.period_ms = p;
    }
    Ok((cfg, path))
}

/// The run's times, the jitter and the joint, checked against `cfg`.
fn check_run_args(args: &MarginArgs, cfg: &Config) -> anyhow::Result<()> {
    for (name, v, lo) in [
        ("--window-s", args.window_s, 2.0),
        ("--settle-s", args.settle_s, 0.5),
        ("--free-s", args.free_s, 1.0),
    ] {
        if !(v.is_finite() && v >= lo && v <= 600.0) {
            bail!("{name} {v}: expected {lo} to 600 s");
        }
    }
    if !(args.jitter_ms.is_finite() && args.jitter_ms >= 0.0) {
        bail!("--jitter-ms {}: expected >= 0", args.jitter_ms);
    }
    if args.jitter_ms > 0.0 && args.inject_at != InjectAt::Inference {
        bail!(
            "--jitter-ms goes with --inject-at inference (the other points are fixed delay lines)"
        );
    }
    if args.joint >= cfg.control.joints {
        bail!(
            "--joint {}: the arm has {} joints",
            args.joint,
            cfg.control.joints
        );
    }
    Ok(())
}

/// What to measure: the probe (joint, amplitude, frequencies, each a whole number of
/// periods in the window) and the run's times; checked with the probe against the
/// gate's limits (and every other check) before anything moves.
fn live_setup(args: &MarginArgs, cfg: &Config, path: &Path) -> anyhow::Result<LiveSetup> {
    let mut setup = LiveSetup::new(cfg.clone(), path.display().to_string());
    setup.joint = args.joint;
    setup.window_s = args.window_s;
    setup.settle_s = args.settle_s;
    setup.free_s = args.free_s;
    setup.max_excursion_rad = args.max_excursion_rad;
    if let Some(a) = args.amplitude_rad {
        setup.amplitude_rad = a;
    }
    let top = (0.4 * 500.0 / cfg.inference.chunk_period_ms).min(4.0);
    setup.freqs_hz = match &args.freqs {
        Some(f) => {
            let base = 1.0 / setup.window_s;
            let mut v: Vec<f64> = f
                .iter()
                .map(|x| (x / base).round().max(1.0) * base)
                .collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v
        }
        None => default_freqs(setup.window_s, (2.0 / setup.window_s).max(0.1), top, 11),
    };
    setup
        .config_for(&cfg.inject)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(setup)
}

/// What is about to be measured, on stderr.
fn announce(args: &MarginArgs, setup: &LiveSetup, desc: &str, delays: usize, comps: usize) {
    errln!("chunkrt margin: {desc}");
    errln!(
        "chunkrt margin: {} delays x {} compensation(s) at `{}`, {:.0} s each{}; probe {} x {} mrad at {} Hz",
        delays,
        comps,
        format!("{:?}", args.inject_at).to_lowercase(),
        setup.run_s() * if setup.paired() { 2.0 } else { 1.0 },
        if setup.paired() {
            " (the policy moves on its own: an unprobed twin run, then the probed run)"
        } else {
            ""
        },
        setup.freqs_hz.len(),
        setup.amplitude_rad * 1e3,
        setup
            .freqs_hz
            .iter()
            .map(|f| format!("{f:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// The table's header ([`print_row`] prints its rows).
fn print_header() {
    outln!(
        "{:>11} {:>8} {:>7} {:>28} {:>8} {:>7} {:>9} {:>9} {:>16} {:>5} {:>5}",
        "comp",
        "delay_ms",
        "f_c_Hz",
        "PM_deg",
        "DM_ms",
        "GM_dB",
        "hold_mrad",
        "ovsh_mrad",
        "oscillation",
        "fallb",
        "expir"
    );
}

/// How a sweep ended.
enum Swept {
    /// Every point measured, or a compensation's sweep stopped early (`stopped`
    /// says why, one line each).
    Done {
        rows: Vec<(Compensation, u64, LiveRow)>,
        stopped: Vec<String>,
    },
    /// A point's run ended as a run must not: `chunkrt run`'s status for it.
    Ended(u8),
}

/// Each compensation at each delay, a row printed as it is measured; a
/// compensation's sweep stops when its smallest of several delays lost authority.
fn sweep(
    args: &MarginArgs,
    cfg: &Config,
    setup: &LiveSetup,
    delays: &[u64],
    comps: &[Compensation],
) -> anyhow::Result<Swept> {
    let mut rows: Vec<(Compensation, u64, LiveRow)> = Vec::new();
    let mut stopped = Vec::new();
    for &comp in comps {
        for &d in delays {
            if chunkrt_rt::signals::requested() {
                bail!("stopped");
            }
            let delay_ms = d as f64 * 1e-6;
            let row = match measure_point(args, cfg, setup, comp, delay_ms)? {
                Ok(row) => row,
                Err(status) => return Ok(Swept::Ended(status)),
            };
            print_row(comp, delay_ms, &row);
            let first = rows.iter().all(|(c, _, _)| *c != comp);
            let why = match row.status {
                LiveStatus::LostAuthority { cycles } => {
                    Some(lost_at_first(args, comp, delay_ms, cycles))
                }
                LiveStatus::Masked {
                    motion_rms_rad,
                    probe_rad,
                } => Some(masked_at_first(comp, delay_ms, motion_rms_rad, probe_rad)),
                _ => None,
            };
            rows.push((comp, d, row));
            // The smallest of several delays lost authority, or the policy's motion
            // masked it: the larger ones would only repeat it, for minutes, and measure
            // nothing. (A single delay is that point's verdict.)
            if let (true, true, Some(why)) = (first, delays.len() > 1, why) {
                stopped.push(why);
                break;
            }
        }
    }
    Ok(Swept::Done { rows, stopped })
}

/// One point: `comp` at `delay_ms`, run into its own directory. `Ok(Err(status))`:
/// the run ended as a run must not, and the sweep ends with `chunkrt run`'s status
/// for it.
fn measure_point(
    args: &MarginArgs,
    cfg: &Config,
    setup: &LiveSetup,
    comp: Compensation,
    delay_ms: f64,
) -> anyhow::Result<Result<LiveRow, u8>> {
    let mut s = setup.clone();
    s.cfg = compensated(cfg, comp, delay_ms);
    let inj = inject_for(&cfg.inject, args.inject_at, delay_ms, args.jitter_ms);
    let dir = args
        .out
        .join(comp_name(comp))
        .join(format!("delay-{delay_ms}ms"));
    clear_point_dir(&dir)?;
    match measure(&s, &inj, &dir, Arc::new(AtomicBool::new(false))) {
        Ok(row) => Ok(Ok(row)),
        Err(chunkrt_margin::MarginError::Ended { ending, message }) => {
            errln!(
                "chunkrt: error: {} at {delay_ms} ms: {message} (run: {})",
                comp_name(comp),
                dir.display()
            );
            Ok(Err(crate::exit_status(ending)))
        }
        Err(e) => Err(e).with_context(|| format!("{} at {delay_ms} ms", comp_name(comp))),
    }
}

/// Why a sweep stops when its first (smallest) delay lost authority, and what to do:
/// the loop ran away there, or the arm lags its moving setpoint by more than the
/// guard's bound.
fn lost_at_first(args: &MarginArgs, comp: Compensation, delay_ms: f64, cycles: u64) -> String {
    format!(
        "{}: the sweep stops: the policy lost authority at its smallest delay ({delay_ms} \
         ms, {cycles} cycles in fallback), so every larger delay would too and no margin \
         can be measured there. The probe's excursion guard takes authority once joint \
         {} is measured more than --max-excursion-rad {} rad from the setpoint the policy \
         commands (before the probe) while it plays: the loop ran away at that delay, or \
         the arm lags its moving setpoint by more than that. Fix: smaller --delays, a \
         larger --max-excursion-rad, or --hold (the policy holds [sim] initial_pos_rad \
         while it is measured)",
        comp_name(comp),
        args.joint,
        args.max_excursion_rad
    )
}

/// Why a sweep stops when the policy's own motion masked its first (smallest) delay:
/// it masks every delay, and only a held policy can be measured.
fn masked_at_first(comp: Compensation, delay_ms: f64, motion_rad: f64, probe_rad: f64) -> String {
    format!(
        "{}: the sweep stops: at its smallest delay ({delay_ms} ms) the policy's own \
         motion between its goals departed from its unprobed twin run by {:.0} mrad RMS \
         in the window, beside a {:.1} mrad probe (the probe moved the policy onto \
         another path, or the run does not repeat), which masks the loop's answer to \
         the probe, so no margin or stability can be read, and every larger delay would \
         read the same. Fix: pass --hold (the policy holds [sim] initial_pos_rad while \
         it is measured)",
        comp_name(comp),
        motion_rad * 1e3,
        probe_rad * 1e3
    )
}

/// A point's directory from an earlier `chunkrt margin` is replaced; anything else
/// there is refused (it is not ours to delete).
fn clear_point_dir(dir: &Path) -> anyhow::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if dir.join("report.json").exists() || dir.join("recording.mcap").exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        return Ok(());
    }
    if std::fs::read_dir(dir)?.next().is_some() {
        bail!(
            "{} exists and does not hold an earlier margin run: choose another --out",
            dir.display()
        );
    }
    Ok(())
}

fn print_row(comp: Compensation, delay_ms: f64, r: &LiveRow) {
    let (fc, dm) = match &r.status {
        LiveStatus::Margin {
            crossover_hz,
            delay_margin_ms,
            ..
        } => (
            format!("{crossover_hz:.3}"),
            format!("{delay_margin_ms:.1}"),
        ),
        _ => ("-".into(), "-".into()),
    };
    let c = &r.consequences;
    let osc = match c.oscillation {
        Some((f, a)) => format!(
            "{:.2}Hz {:.2}mrad{}",
            f,
            a * 1e3,
            if c.limit_cycle { " LC" } else { "" }
        ),
        None => "-".into(),
    };
    outln!(
        "{:>11} {:>8.1} {:>7} {:>28} {:>8} {:>7} {:>9.3} {:>9} {:>16} {:>5} {:>5}",
        comp_name(comp),
        delay_ms,
        fc,
        r.status.explain(),
        dm,
        r.gain_margin.map_or("-".into(), |g| format!("{:.1}", g.1)),
        c.hold_err_rms_rad * 1e3,
        c.overshoot_rad
            .map_or("-".into(), |o| format!("{:.3}", o * 1e3)),
        osc,
        c.fallbacks,
        c.chunks_expired
    );
    if let Some(f) = &r.action_filter {
        match f.lag_at_crossover_deg {
            Some(lag) => outln!(
                "{:>11} the {:.1} Hz action filter (inside the measured loop) costs {lag:.1} \
                 deg of phase at the crossover",
                "",
                f.cutoff_hz
            ),
            None => outln!(
                "{:>11} the {:.1} Hz action filter is inside the measured loop",
                "",
                f.cutoff_hz
            ),
        }
    }
}

/// The action filter's phase lag at `freq_hz` (degrees) for `setup`'s control period.
fn setup_filter_lag(setup: &LiveSetup, cutoff_hz: f64, freq_hz: f64) -> f64 {
    let period_s = setup.cfg.period_ns() as f64 * 1e-9;
    chunkrt_core::ActionFilter::new(cutoff_hz, period_s, &[0.0; chunkrt_core::MAX_DOF])
        .phase_lag_deg(freq_hz)
}

/// `margin.json`: the loop and one row per compensation and delay.
fn report_json(
    args: &MarginArgs,
    setup: &LiveSetup,
    desc: &str,
    rows: &[(Compensation, u64, LiveRow)],
) -> MarginJson {
    MarginJson::Runtime(RuntimeMargin {
        loop_: RuntimeLoop {
            kind: "runtime",
            description: desc.to_string(),
            config: setup.config_name.clone(),
            joint: setup.joint,
            probe_amplitude_rad: setup.amplitude_rad,
            probe_freqs_hz: setup.freqs_hz.clone(),
            window_s: setup.window_s,
            settle_s: setup.settle_s,
            free_s: setup.free_s,
            inject_at: format!("{:?}", args.inject_at).to_lowercase(),
            jitter_ms: args.jitter_ms,
        },
        threshold_deg: args.threshold_deg,
        rows: rows
            .iter()
            .map(|(comp, d, r)| row_json(setup, *comp, *d, r))
            .collect(),
    })
}

/// One row of `margin.json`: the point measured at `delay_ns` with `comp`.
fn row_json(setup: &LiveSetup, comp: Compensation, delay_ns: u64, r: &LiveRow) -> RuntimeRow {
    let c = &r.consequences;
    let (fc, pm, dm) = match r.status {
        LiveStatus::Margin {
            crossover_hz,
            pm_deg,
            delay_margin_ms,
        } => (Some(crossover_hz), Some(pm_deg), Some(delay_margin_ms)),
        _ => (None, None, None),
    };
    RuntimeRow {
        compensation: comp_name(comp),
        delay_ms: delay_ns as f64 * 1e-6,
        status: r.status.explain(),
        stability: r.verdict.stability.word(),
        growth_per_s: finite(r.verdict.growth_per_s),
        envelope_first_rad: finite(r.verdict.first_peak),
        envelope_last_rad: finite(r.verdict.last_peak),
        residual_rms_rad: r.residual_rms_rad,
        crossover_hz: fc,
        pm_deg: pm,
        delay_margin_ms: dm,
        gain_margin: GainMargin::of(r.gain_margin),
        hold_err_rms_rad: c.hold_err_rms_rad,
        hold_err_max_rad: c.hold_err_max_rad,
        overshoot_rad: c.overshoot_rad,
        time_to_goal_s: c.time_to_goal_s,
        oscillation: c.oscillation.map(|(freq_hz, amplitude_rad)| Oscillation {
            freq_hz,
            amplitude_rad,
            limit_cycle: c.limit_cycle,
        }),
        gate_cycles_in_window: c.gate_cycles,
        fallbacks: c.fallbacks,
        chunks_expired: c.chunks_expired,
        backend: r.backend.clone(),
        run_dir: r.run_dir.display().to_string(),
        reference_run_dir: r.twin_mismatch_rad.map(|_| {
            let twin = r.run_dir.join(chunkrt_margin::live::REFERENCE_DIR);
            twin.display().to_string()
        }),
        twin_mismatch_rad: r.twin_mismatch_rad,
        attempts: r.attempts,
        departed_rad: r.departed_rad.clone(),
        replay_late: r.replay_late,
        action_filter: r.action_filter.map(|f| ActionFilter {
            cutoff_hz: f.cutoff_hz,
            phase_lag_deg_at_crossover: f.lag_at_crossover_deg,
            phase_lag_deg_at_probe_freqs: r
                .points
                .iter()
                .map(|p| FilterLag {
                    freq_hz: p.freq_hz,
                    lag_deg: setup_filter_lag(setup, f.cutoff_hz, p.freq_hz),
                })
                .collect(),
        }),
        bode: r
            .points
            .iter()
            .map(|p| RuntimeBodePoint {
                freq_hz: p.freq_hz,
                mag: p.l.abs(),
                phase_deg: p.phase_deg,
            })
            .collect(),
    }
}

fn figure(
    args: &MarginArgs,
    setup: &LiveSetup,
    rows: &[(Compensation, u64, LiveRow)],
) -> MarginFigure {
    let mut comps: Vec<Compensation> = rows.iter().map(|r| r.0).collect();
    comps.dedup();
    let series = comps
        .iter()
        .map(|&c| {
            (
                format!("PM, compensation: {}", comp_name(c)),
                rows.iter()
                    .filter(|r| r.0 == c)
                    .filter_map(|r| Some((r.1 as f64 * 1e-6, r.2.status.pm_deg()?)))
                    .collect(),
            )
        })
        .collect();
    let first = rows.first().map(|r| &r.2);
    let fc = first.and_then(|r| match r.status {
        LiveStatus::Margin { crossover_hz, .. } => Some(crossover_hz),
        _ => None,
    });
    let dmax = rows.iter().map(|r| r.1 as f64 * 1e-6).fold(1.0, f64::max);
    let prediction = first.and_then(|r| match r.status {
        LiveStatus::Margin {
            crossover_hz,
            pm_deg,
            ..
        } if rows[0].1 == 0 => Some((
            "first point - 360 f_c tau".to_string(),
            (0.0, pm_deg),
            (dmax, pm_deg - 0.36 * crossover_hz * dmax),
        )),
        _ => None,
    });
    MarginFigure {
        title: format!(
            "Phase margin vs {} delay (runtime loop)",
            format!("{:?}", args.inject_at).to_lowercase()
        ),
        series,
        prediction,
        dmax,
        threshold: args.threshold_deg,
        bode: first.map_or(Vec::new(), |r| {
            r.points
                .iter()
                .map(|p| (p.freq_hz, p.l.abs(), p.phase_deg))
                .collect()
        }),
        bode_caption: format!(
            "L of the first point ({}, joint {}, {} ms bus)",
            Path::new(&setup.config_name)
                .file_name()
                .map_or(String::new(), |f| f.to_string_lossy().into_owned()),
            setup.joint,
            setup.cfg.control.period_ms
        ),
        fc,
    }
}
