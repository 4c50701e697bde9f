//! One plant measured: each excitation run by the real runtime, its recording read
//! back into the channels' figures.

use crate::error::GapError;
use crate::setup::GapSetup;
use crate::signal::{abs, bin, div, lag_deg, mean};
use chunkrt_config::Config;
use chunkrt_rt::{RunOptions, Runtime};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// One plant's figures, from one excitation run per joint.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PlantMeasurement {
    /// The plant's name (its config file).
    pub name: String,
    /// Its backend (`sim`, `mujoco`, `ethercat`).
    pub backend: String,
    /// Its bus period (ms).
    pub period_ms: f64,
    /// The answer to each excited joint's probe.
    pub responses: Vec<JointResponse>,
    /// Every joint at rest (from the first run's hold).
    pub hold: Vec<HoldStats>,
    /// The policy path's timing (over every run).
    pub timing: Timing,
    /// The runs, one per excited joint.
    pub run_dirs: Vec<PathBuf>,
}

/// A joint's answer to its probe.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct JointResponse {
    /// The excited joint.
    pub joint: usize,
    /// The probe's amplitude per component (rad).
    pub amplitude_rad: f64,
    /// `Y / C` at each probe frequency.
    pub points: Vec<ResponsePoint>,
    /// Every joint's largest `|Y_k / C_j|` over the probe frequencies (the excited
    /// joint's own entry is 0): how much the probe moved the others.
    pub coupling: Vec<f64>,
    /// The play of the joint (rad), from the reversal run: the width of the
    /// hysteresis of measured minus commanded position between the two directions.
    pub backlash_rad: f64,
    /// Its answer to a stepped command, from the step run.
    pub step: StepResponse,
}

/// A joint's answer to a step of its command (the gate shapes the step within the
/// joint's limits; both plants get the same command), over the step up and the step
/// down.
#[derive(Clone, Copy, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct StepResponse {
    /// The command's step (rad).
    pub step_rad: f64,
    /// From the command leaving its level to the measured position staying within 2 %
    /// of the step of the command's new level (ms; the mean of both steps).
    pub settling_ms: f64,
    /// The measured position's largest excursion past the new level, in % of the step
    /// (the larger of both steps; 0: none).
    pub overshoot_pct: f64,
}

/// The measured position over the command that left the gate at one frequency.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct ResponsePoint {
    /// The frequency (Hz).
    pub freq_hz: f64,
    /// `20 log10 |Y / C|`.
    pub gain_db: f64,
    /// `-arg(Y / C)` (degrees, in (-180, 180]).
    pub phase_lag_deg: f64,
}

/// One joint held at rest.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct HoldStats {
    /// The joint.
    pub joint: usize,
    /// The mean of measured minus commanded position (rad): an encoder's offset, or
    /// what the drive cannot pull in against a load.
    pub bias_rad: f64,
    /// The RMS of the rest of measured minus commanded (rad).
    pub noise_rms_rad: f64,
    /// The mean measured torque (N m): what holding the arm there takes.
    pub torque_nm: f64,
    /// Measured minus commanded, less its mean, per cycle.
    #[serde(skip)]
    pub residual_rad: Vec<f64>,
}

/// The policy path's timing.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Timing {
    /// End-to-end latency (observation to first command on the bus) P99 - P50 (ms).
    pub e2e_jitter_ms: f64,
    /// The oldest observation an inference started from (ms).
    pub obs_age_max_ms: f64,
    /// Deadlines the control loop missed.
    pub overruns: u64,
}

/// One recorded cycle, every joint.
struct Cycle {
    t: f64,
    playing: bool,
    c: Vec<f64>,
    y: Vec<f64>,
    torque: Vec<f64>,
}

/// Measures the plant `cfg` names: one excitation run per joint of `setup`, each in
/// `dir/joint-N`. `name` names the plant in figures and errors.
pub fn measure_plant(
    cfg: &Config,
    name: &str,
    setup: &GapSetup,
    dir: &Path,
    stop: Arc<AtomicBool>,
) -> Result<PlantMeasurement, GapError> {
    setup.check(cfg)?;
    let mut m = PlantMeasurement {
        name: name.to_string(),
        backend: format!("{:?}", cfg.backend.kind).to_lowercase(),
        period_ms: cfg.control.period_ms,
        responses: Vec::new(),
        hold: Vec::new(),
        timing: Timing::default(),
        run_dirs: Vec::new(),
    };
    for &j in &setup.joints {
        let run_cfg = setup.excitation(cfg, j)?;
        let run_dir = dir.join(format!("joint-{j}"));
        let (cycles, timing) = run_once(&run_cfg, name, setup.run_s(), &run_dir, stop.clone())?;
        let amplitude = run_cfg
            .inject
            .probe
            .as_ref()
            .map_or(0.0, |p| p.amplitude_rad);
        let mut r = response(setup, &cycles, j, amplitude, name)?;
        if m.hold.is_empty() {
            m.hold = hold(setup, &cycles, name)?;
        }
        m.timing.e2e_jitter_ms = m.timing.e2e_jitter_ms.max(timing.e2e_jitter_ms);
        m.timing.obs_age_max_ms = m.timing.obs_age_max_ms.max(timing.obs_age_max_ms);
        m.timing.overruns += timing.overruns;
        m.run_dirs.push(run_dir);
        let rev_cfg = setup.reversal(cfg, j)?;
        let rev_dir = dir.join(format!("joint-{j}-reversal"));
        let (rev, _) = run_once(
            &rev_cfg,
            name,
            setup.reversal_run_s(),
            &rev_dir,
            stop.clone(),
        )?;
        r.backlash_rad = backlash(setup, &rev, j, name)?;
        m.responses.push(r);
        m.run_dirs.push(rev_dir);
        let step_cfg = setup.step(cfg, j)?;
        let step_dir = dir.join(format!("joint-{j}-step"));
        let (cycles, _) = run_once(&step_cfg, name, setup.step_run_s(), &step_dir, stop.clone())?;
        if let Some(r) = m.responses.last_mut() {
            r.step = step_response(setup, &cycles, j, name)?;
        }
        m.run_dirs.push(step_dir);
    }
    Ok(m)
}

/// Runs one excitation and reads its recording back.
fn run_once(
    cfg: &Config,
    plant: &str,
    run_s: f64,
    run_dir: &Path,
    stop: Arc<AtomicBool>,
) -> Result<(Vec<Cycle>, Timing), GapError> {
    let failed = |message: String| GapError::Run {
        plant: plant.to_string(),
        message,
    };
    let opts = RunOptions {
        duration: Some(Duration::from_secs_f64(run_s)),
        out_dir: Some(run_dir.to_path_buf()),
        live_status: false,
        stop,
        config_name: plant.to_string(),
    };
    let outcome = Runtime::from_config(cfg)
        .map_err(|e| failed(e.to_string()))?
        .run(&opts)
        .map_err(|e| failed(e.to_string()))?;
    if outcome.ending() != chunkrt_rt::Ending::Normal {
        return Err(GapError::Ended {
            plant: plant.to_string(),
            ending: outcome.ending(),
            message: outcome.describe_ending(),
        });
    }
    let report = &outcome.report;
    let ms = |metric: &str, f: fn(&chunkrt_telemetry::MetricSummary) -> f64| {
        report.metrics.get(metric).map_or(0.0, |s| f(s) * 1e-6)
    };
    let timing = Timing {
        e2e_jitter_ms: ms("e2e_latency", |s| s.p99 as f64 - s.p50 as f64),
        obs_age_max_ms: ms("obs_age", |s| s.max as f64),
        overruns: report
            .counters
            .get("deadline_overruns")
            .copied()
            .unwrap_or(0),
    };
    let unreadable = |message: String| GapError::Recording {
        plant: plant.to_string(),
        message,
    };
    let files =
        chunkrt_telemetry::readback::segments(run_dir).map_err(|e| unreadable(e.to_string()))?;
    let mut cycles = Vec::new();
    chunkrt_telemetry::readback::read_with(&files, None, |c| {
        cycles.push(Cycle {
            t: c.t_s,
            playing: c.mode == chunkrt_core::Mode::Playing,
            c: c.command_rad.to_vec(),
            y: c.feedback_rad.to_vec(),
            torque: c.feedback_torque_nm.to_vec(),
        })
    })
    .map_err(|e| unreadable(e.to_string()))?;
    Ok((cycles, timing))
}

/// The cycles in `[from, from + len)` s after the first one, each playing; an error
/// names the first that was not (the policy lost authority while measured).
fn window<'a>(
    cycles: &'a [Cycle],
    from: f64,
    len: f64,
    what: &str,
    plant: &str,
) -> Result<Vec<&'a Cycle>, GapError> {
    let t0 = cycles.first().map_or(0.0, |c| c.t);
    let w: Vec<&Cycle> = cycles
        .iter()
        .filter(|c| c.t - t0 >= from - 1e-9 && c.t - t0 < from + len - 1e-9)
        .collect();
    let err = |message: String| {
        Err(GapError::Recording {
            plant: plant.to_string(),
            message,
        })
    };
    if w.len() < 8 {
        return err(format!(
            "the {what} window ({from} s to {} s) holds {} recorded cycles",
            from + len,
            w.len()
        ));
    }
    if let Some(c) = w.iter().find(|c| !c.playing) {
        return err(format!(
            "the policy lost authority during the {what} (at {:.3} s): the run's \
             events.jsonl says why",
            c.t - t0
        ));
    }
    Ok(w)
}

/// Joint `j`'s answer to its probe, and every other joint's.
fn response(
    setup: &GapSetup,
    cycles: &[Cycle],
    j: usize,
    amplitude_rad: f64,
    plant: &str,
) -> Result<JointResponse, GapError> {
    let from = setup.settle_s + setup.ramp_s;
    let w = window(cycles, from, setup.window_s, "probe", plant)?;
    let t: Vec<f64> = w.iter().map(|c| c.t).collect();
    let col = |f: &dyn Fn(&Cycle) -> f64| -> Vec<f64> { w.iter().map(|c| f(c)).collect() };
    let c_j = col(&|c| c.c.get(j).copied().unwrap_or(f64::NAN));
    let joints = w[0].y.len();
    let mut coupling = vec![0.0f64; joints];
    let mut points = Vec::new();
    for &f in &setup.freqs_hz {
        let cb = bin(&t, &c_j, f);
        for (k, cpl) in coupling.iter_mut().enumerate() {
            let y_k = col(&|c| c.y[k]);
            let h = div(bin(&t, &y_k, f), cb);
            if k == j {
                points.push(ResponsePoint {
                    freq_hz: f,
                    gain_db: 20.0 * abs(h).log10(),
                    phase_lag_deg: lag_deg(h),
                });
            } else {
                *cpl = f64::max(*cpl, abs(h));
            }
        }
    }
    Ok(JointResponse {
        joint: j,
        amplitude_rad,
        points,
        coupling,
        backlash_rad: 0.0,
        step: StepResponse::default(),
    })
}

/// Joint `j`'s play from its reversal run. Over the middle of each stroke (the
/// command within half the amplitude of its centre, where the motion since the last
/// reversal has crossed any play up to that), measured minus commanded position is
/// fitted as `b0 + b1 v - (w / 2) sign(v)` (`v` the commanded velocity: the drive's
/// following error grows with it; a link behind play trails the motor by half of it
/// either way); the play is `w`.
fn backlash(setup: &GapSetup, cycles: &[Cycle], j: usize, plant: &str) -> Result<f64, GapError> {
    let from = crate::setup::REVERSAL_SETTLE_S + setup.ramp_s;
    let w = window(cycles, from, setup.reversal_window_s(), "reversal", plant)?;
    let c: Vec<f64> = w.iter().map(|x| x.c[j]).collect();
    let (lo, hi) = c
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| {
            (l.min(x), h.max(x))
        });
    let (mid, half) = (0.5 * (lo + hi), 0.25 * (hi - lo));
    let mut normal = [[0.0; 3]; 3];
    let mut rhs = [0.0; 3];
    for n in 1..w.len().saturating_sub(1) {
        if (c[n] - mid).abs() >= half {
            continue;
        }
        let v = (c[n + 1] - c[n - 1]) / (w[n + 1].t - w[n - 1].t);
        let x = [1.0, v, 0.5 * v.signum()];
        let e = w[n].y[j] - c[n];
        for a in 0..3 {
            rhs[a] += x[a] * e;
            for b in 0..3 {
                normal[a][b] += x[a] * x[b];
            }
        }
    }
    crate::signal::solve3(normal, rhs)
        .map(|b| -b[2])
        .ok_or_else(|| GapError::Recording {
            plant: plant.to_string(),
            message: format!(
                "joint {j}'s reversal run did not move it both ways (command from {lo} to {hi} rad)"
            ),
        })
}

/// Every joint during the hold before the probe.
fn hold(setup: &GapSetup, cycles: &[Cycle], plant: &str) -> Result<Vec<HoldStats>, GapError> {
    let from = setup.settle_s - setup.hold_s;
    let w = window(cycles, from, setup.hold_s, "hold", plant)?;
    let joints = w[0].y.len();
    Ok((0..joints)
        .map(|k| {
            let e: Vec<f64> = w.iter().map(|c| c.y[k] - c.c[k]).collect();
            let bias = mean(&e);
            let residual: Vec<f64> = e.iter().map(|x| x - bias).collect();
            let torque: Vec<f64> = w.iter().filter_map(|c| c.torque.get(k).copied()).collect();
            HoldStats {
                joint: k,
                bias_rad: bias,
                noise_rms_rad: mean(&residual.iter().map(|x| x * x).collect::<Vec<_>>()).sqrt(),
                torque_nm: mean(&torque),
                residual_rad: residual,
            }
        })
        .collect())
}

/// Joint `j`'s answer to its step run: the step up and the step down, each judged
/// from 0.2 s before the command steps to the end of its hold.
fn step_response(
    setup: &GapSetup,
    cycles: &[Cycle],
    j: usize,
    plant: &str,
) -> Result<StepResponse, GapError> {
    let on = crate::setup::STEP_SETTLE_S;
    let hold = setup.step_hold_s;
    let up = window(cycles, on - 0.2, hold + 0.2, "step up", plant)?;
    // The run's controlled stop at its end is left out of the step down.
    let down = window(cycles, on + hold - 0.2, hold + 0.1, "step down", plant)?;
    let (a, b) = (one_step(&up, j, plant)?, one_step(&down, j, plant)?);
    Ok(StepResponse {
        step_rad: 0.5 * (a.step_rad.abs() + b.step_rad.abs()),
        settling_ms: 0.5 * (a.settling_ms + b.settling_ms),
        overshoot_pct: a.overshoot_pct.max(b.overshoot_pct),
    })
}

/// One step of the command within `w` (its level before it at the start of `w`): when
/// the command left that level, when the measured position last entered the band of
/// 2 % of the command's step around where it came to rest (its mean over the last
/// 0.1 s; linear between cycles), and how far past that it went.
fn one_step(w: &[&Cycle], j: usize, plant: &str) -> Result<StepResponse, GapError> {
    let t0 = w[0].t;
    let c: Vec<f64> = w.iter().map(|x| x.c[j]).collect();
    let y: Vec<f64> = w.iter().map(|x| x.y[j]).collect();
    let t: Vec<f64> = w.iter().map(|x| x.t - t0).collect();
    let end = t[t.len() - 1];
    let tail: Vec<f64> = (0..y.len())
        .filter(|&k| t[k] >= end - 0.1)
        .map(|k| y[k])
        .collect();
    let rest = mean(&tail);
    let step = c[c.len() - 1] - c[0];
    let bad = |message: String| GapError::Recording {
        plant: plant.to_string(),
        message,
    };
    let Some(k0) = c.iter().position(|v| (v - c[0]).abs() > 1e-3 * step.abs()) else {
        return Err(bad(format!(
            "joint {j}'s step run: the command did not step"
        )));
    };
    let band = 0.02 * step.abs();
    let outside: Vec<usize> = (0..y.len())
        .filter(|&k| (y[k] - rest).abs() > band)
        .collect();
    let last = outside.last().copied().unwrap_or(k0);
    if last + 1 >= y.len() {
        return Err(bad(format!(
            "joint {j}'s step run: the position had not settled within 2 % of the step \
             by the end of the hold ({:.3} s)",
            end
        )));
    }
    // Where |y - rest| falls through the band between `last` and the next cycle.
    let (e0, e1) = ((y[last] - rest).abs(), (y[last + 1] - rest).abs());
    let frac = if e0 > e1 {
        (e0 - band) / (e0 - e1)
    } else {
        1.0
    };
    let t_settle = t[last] + frac.clamp(0.0, 1.0) * (t[last + 1] - t[last]);
    let past = (k0..y.len())
        .map(|k| (y[k] - rest) * step.signum())
        .fold(0.0f64, f64::max);
    Ok(StepResponse {
        step_rad: step,
        settling_ms: (t_settle - t[k0]).max(0.0) * 1e3,
        overshoot_pct: 100.0 * past / step.abs(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cycles at `dt` s of a command that steps by `step` at `t_step` (an ideal step)
    /// and a measured position `y(t since the step)`, joint 0 only.
    fn stepped(dt: f64, secs: f64, t_step: f64, step: f64, y: impl Fn(f64) -> f64) -> Vec<Cycle> {
        (0..(secs / dt).round() as usize)
            .map(|k| {
                let t = k as f64 * dt;
                let after = t >= t_step - 1e-12;
                Cycle {
                    t,
                    playing: true,
                    c: vec![if after { step } else { 0.0 }],
                    y: vec![if after { y(t - t_step) } else { 0.0 }],
                    torque: vec![0.0],
                }
            })
            .collect()
    }

    #[test]
    fn a_delayed_first_order_response_settles_in_its_delay_plus_ln50_time_constants() {
        // 2 % of the step is left after ln(50) time constants: 5 ms + 3.912 x 10 ms.
        let (d, tau, s) = (0.005, 0.010, 2e-3);
        let y = |t: f64| {
            if t < d {
                0.0
            } else {
                s * (1.0 - (-(t - d) / tau).exp())
            }
        };
        let cycles = stepped(0.001, 0.8, 0.2, s, y);
        let w: Vec<&Cycle> = cycles.iter().collect();
        let r = one_step(&w, 0, "test").unwrap();
        let expected = 1e3 * (d + tau * 50f64.ln());
        assert!(
            (r.settling_ms - expected).abs() < 0.5,
            "{} vs {expected}",
            r.settling_ms
        );
        assert!(r.overshoot_pct < 1e-9, "{}", r.overshoot_pct);
        assert!((r.step_rad - s).abs() < 1e-15);
    }

    #[test]
    fn an_underdamped_response_overshoots_by_the_damping_ratios_share() {
        // Second order, zeta 0.5: the first peak is exp(-pi zeta / sqrt(1 - zeta^2)) =
        // 16.3 % past the final value; a step down mirrors it.
        let (zeta, wn, s) = (0.5f64, 2.0 * std::f64::consts::PI * 10.0, -3e-3);
        let wd = wn * (1.0 - zeta * zeta).sqrt();
        let y = |t: f64| {
            let e = (-zeta * wn * t).exp();
            s * (1.0 - e * ((wd * t).cos() + zeta / (1.0 - zeta * zeta).sqrt() * (wd * t).sin()))
        };
        let cycles = stepped(0.0005, 0.8, 0.2, s, y);
        let w: Vec<&Cycle> = cycles.iter().collect();
        let r = one_step(&w, 0, "test").unwrap();
        let expected = 100.0 * (-std::f64::consts::PI * zeta / (1.0 - zeta * zeta).sqrt()).exp();
        assert!(
            (r.overshoot_pct - expected).abs() < 0.1,
            "{} vs {expected}",
            r.overshoot_pct
        );
    }

    #[test]
    fn a_response_that_has_not_settled_by_the_end_is_refused() {
        let cycles = stepped(0.001, 0.5, 0.2, 1e-3, |t| {
            1e-3 * t / 0.3 + 1e-4 * (t * 300.0).sin()
        });
        let w: Vec<&Cycle> = cycles.iter().collect();
        let e = one_step(&w, 0, "test").unwrap_err().to_string();
        assert!(e.contains("had not settled"), "{e}");
    }
}
