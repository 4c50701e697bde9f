//! The measurement from the recorded cycles: `L = -U / C` at every probe frequency
//! over the DFT window, the verdict on the free response after the probe, the
//! crossover and margins, and what a user sees.

use super::row::{Consequences, LivePoint, LiveRow, LiveStatus};
use super::setup::LiveSetup;
use crate::complex::{lag_deg, unwrap_deg, Complex};
use crate::error::MarginError;
use crate::verdict::{envelope_verdict, Stability, Verdict};
use std::path::PathBuf;

/// One probed cycle read back from the recording.
pub(super) struct Sample {
    /// The control cycle's number.
    pub(super) cycle: u64,
    /// Recording time (s).
    pub(super) t: f64,
    /// The executor's setpoint on the probed joint: the loop's own output `U` (rad).
    pub(super) u: f64,
    /// The command that left the gate, `C = U + d` (rad).
    pub(super) c: f64,
    /// The measured position (rad).
    pub(super) y: f64,
    /// The policy had authority (`Playing`).
    pub(super) playing: bool,
}

/// The measurement from the recorded cycles (see the `live` module's docs).
///
/// With `reference` (the same run without the probe, for a policy that moves on its
/// own) the loop is measured on the probed run less the reference, cycle by cycle:
/// the hold error is then the deviation from the unprobed run, and the approach to
/// a goal is not judged (there is no single goal).
pub(super) fn analyse(
    setup: &LiveSetup,
    s: &[Sample],
    reference: Option<&[Sample]>,
    gate_times: &[f64],
    goal: Option<f64>,
) -> Result<LiveRow, MarginError> {
    let first = s
        .first()
        .ok_or_else(|| MarginError::Run("the recording holds no cycles".into()))?;
    let tl = Timeline::new(setup, first.t);
    let relative = reference.map(|r| relative_to(s, r)).transpose()?;
    let looped: &[Sample] = relative.as_deref().unwrap_or(s);
    let in_win = window_samples(setup, looped, &tl)?;
    // L at each probe frequency from detrended U and C over the window.
    let (u, c) = (detrend(&in_win, |x| x.u), detrend(&in_win, |x| x.c));
    let (points, coeffs) = loop_points(&setup.freqs_hz, &in_win, &u, &c, tl.win.0);
    // The noise floor is what the probe frequencies do not explain of U in the
    // window: the residual after the fitted sines.
    let noise = residual_rms(&in_win, &u, &coeffs, tl.win.0);
    let free = free_response(looped, &tl);
    let peak = setup.amplitude_rad * setup.freqs_hz.len() as f64;
    // The envelope is judged down to a small share of the probe (the residual
    // above is mostly the probe's own intermodulation through the chunked loop,
    // gone with the probe); a free oscillation sustained past ten probe
    // amplitudes is hunting. Paired, the difference of two runs holds what they do
    // not repeat (the twin before the probe: 2-50 urad on sim.toml) and what the
    // probe changed for good (a different candidate chunk chosen: up to 26 urad
    // after the probe, with |L| under 0.01): judged down to 5 % of the probe, and not
    // below twice the twin's mismatch.
    let twin_mismatch = relative.as_ref().map(|r| {
        r.iter()
            .filter(|x| x.t < tl.on)
            .fold(0.0f64, |m, x| m.max(x.u.abs()))
    });
    let floor = match twin_mismatch {
        Some(m) => (PAIRED_FLOOR * setup.amplitude_rad).max(2.0 * m),
        None => 1e-3 * setup.amplitude_rad,
    };
    let sustained = 10.0 * setup.amplitude_rad;
    let diverged = free.xs.iter().any(|v| v.abs() > 25.0 * peak);
    let dt = setup.cfg.period_ns() as f64 * 1e-9;
    let verdict = envelope_verdict(&free.xs, dt, floor, sustained, diverged);
    // The controlled stop at the end of the run is not a loss of authority.
    let lost = s
        .iter()
        .filter(|x| x.t >= tl.on && x.t < tl.end && !x.playing)
        .count() as u64;
    // Paired, the hold error is the deviation from the unprobed run, and there is
    // no approach to one goal to judge.
    let (goal, approach) = match relative {
        Some(_) => (0.0, None),
        None => (goal.unwrap_or(free.rest), Some(s)),
    };
    let consequences = consequences(setup, approach, &tl, &free, gate_times, goal, floor);
    let status = match (departed(setup, twin_mismatch), masked(setup, noise, lost)) {
        (Some(d), _) | (None, Some(d)) => d,
        // Paired, what follows a loss of authority is the twin's motion beside an
        // arm brought to rest, not a free response.
        (None, None) if lost > 0 && relative.is_some() => {
            LiveStatus::LostAuthority { cycles: lost }
        }
        (None, None) => status(setup, &verdict, &consequences, lost, &points),
    };
    Ok(LiveRow {
        action_filter: None,
        twin_mismatch_rad: twin_mismatch,
        attempts: 1,
        departed_rad: Vec::new(),
        replay_late: 0,
        gain_margin: gain_margin(&points),
        points,
        verdict,
        residual_rms_rad: noise,
        status,
        consequences,
        run_dir: PathBuf::new(),
        backend: String::new(),
    })
}

/// The instants of one measured run (s, on the recording's clock).
struct Timeline {
    /// The first recorded cycle.
    t0: f64,
    /// The probe starts fading in.
    on: f64,
    /// The DFT window: the probe at full amplitude.
    win: (f64, f64),
    /// The probe has faded out.
    free_from: f64,
    /// The controlled stop at the end of the run is near: cycles from here on are
    /// not judged.
    end: f64,
}

impl Timeline {
    fn new(setup: &LiveSetup, t0: f64) -> Timeline {
        let on = t0 + setup.settle_s;
        Timeline {
            t0,
            on,
            win: (on + setup.ramp_s, on + setup.ramp_s + setup.window_s),
            free_from: on + setup.window_s + 2.0 * setup.ramp_s,
            end: t0 + setup.run_s() - 0.1,
        }
    }
}

/// The probed run `s` less its unprobed twin `reference`, cycle by cycle (matched
/// by number: the runs' recording clocks start at different phases of their
/// grids, under load by over half a period); a cycle plays when it played in both. Refused when under nine in ten of the probed cycles have
/// a twin (the reference run ended early).
fn relative_to(s: &[Sample], reference: &[Sample]) -> Result<Vec<Sample>, MarginError> {
    let twins: std::collections::HashMap<u64, &Sample> =
        reference.iter().map(|r| (r.cycle, r)).collect();
    let out: Vec<Sample> = s
        .iter()
        .filter_map(|x| {
            twins.get(&x.cycle).map(|r| Sample {
                cycle: x.cycle,
                t: x.t,
                u: x.u - r.u,
                c: x.c - r.c,
                y: x.y - r.y,
                playing: x.playing && r.playing,
            })
        })
        .collect();
    if (out.len() as f64) < 0.9 * s.len() as f64 {
        return Err(MarginError::Run(format!(
            "the unprobed reference run matches {} of the probed run's {} cycles: it \
             ended early",
            out.len(),
            s.len()
        )));
    }
    Ok(out)
}

/// The cycles in the DFT window; a recording with too few there (under half the
/// window's cycles) or after the probe (under 32) ended early and is refused.
fn window_samples<'a>(
    setup: &LiveSetup,
    s: &'a [Sample],
    tl: &Timeline,
) -> Result<Vec<&'a Sample>, MarginError> {
    let in_win: Vec<&Sample> = s
        .iter()
        .filter(|x| x.t >= tl.win.0 && x.t < tl.win.1)
        .collect();
    let after = s
        .iter()
        .filter(|x| x.t >= tl.free_from && x.t < tl.end)
        .count();
    let expected = setup.window_s / (setup.cfg.period_ns() as f64 * 1e-9);
    if (in_win.len() as f64) < 0.5 * expected || after < 32 {
        return Err(MarginError::Run(format!(
            "the recording holds {} cycles in the DFT window (expected about {expected:.0}) and \
             {} after the probe: the run ended early",
            in_win.len(),
            after
        )));
    }
    Ok(in_win)
}

/// `f` of each cycle in the window, less its mean and its least-squares trend.
fn detrend(in_win: &[&Sample], f: impl Fn(&Sample) -> f64) -> Vec<f64> {
    let n = in_win.len() as f64;
    let mt = in_win.iter().map(|x| x.t).sum::<f64>() / n;
    let mv = in_win.iter().map(|x| f(x)).sum::<f64>() / n;
    let stt: f64 = in_win.iter().map(|x| (x.t - mt).powi(2)).sum();
    let stv: f64 = in_win.iter().map(|x| (x.t - mt) * (f(x) - mv)).sum();
    let slope = if stt > 0.0 { stv / stt } else { 0.0 };
    in_win
        .iter()
        .map(|x| f(x) - mv - slope * (x.t - mt))
        .collect()
}

/// `L = -U / C` at each probe frequency (ascending), from single-frequency DFTs of
/// the detrended `u` and `c` over the window that starts at `w0`; with the sines
/// fitted to `u` (rad/s and complex amplitude) whose residual is the noise figure.
fn loop_points(
    freqs_hz: &[f64],
    in_win: &[&Sample],
    u: &[f64],
    c: &[f64],
    w0: f64,
) -> (Vec<LivePoint>, Vec<(f64, Complex)>) {
    let mut freqs = freqs_hz.to_vec();
    freqs.sort_by(f64::total_cmp);
    let n = in_win.len() as f64;
    let mut ls: Vec<Complex> = Vec::with_capacity(freqs.len());
    let mut coeffs: Vec<(f64, Complex)> = Vec::with_capacity(freqs.len());
    for &f in &freqs {
        let w = 2.0 * core::f64::consts::PI * f;
        let (mut su, mut sc) = (Complex::ZERO, Complex::ZERO);
        for (k, x) in in_win.iter().enumerate() {
            let ph = Complex::from_polar(1.0, -w * (x.t - w0));
            su = su + ph.scale(u[k]);
            sc = sc + ph.scale(c[k]);
        }
        ls.push(if sc.abs() > 0.0 {
            -(su / sc)
        } else {
            Complex::ZERO
        });
        coeffs.push((w, su.scale(2.0 / n)));
    }
    let phases = unwrap_deg(ls.iter().map(|&l| lag_deg(l)));
    let points = freqs
        .iter()
        .zip(ls.iter().zip(phases))
        .map(|(&freq_hz, (&l, phase_deg))| LivePoint {
            freq_hz,
            l,
            phase_deg,
        })
        .collect();
    (points, coeffs)
}

/// RMS of what the fitted sines `coeffs` do not explain of `u` over the window that
/// starts at `w0`.
fn residual_rms(in_win: &[&Sample], u: &[f64], coeffs: &[(f64, Complex)], w0: f64) -> f64 {
    let resid2: f64 = in_win
        .iter()
        .enumerate()
        .map(|(k, x)| {
            let fit: f64 = coeffs
                .iter()
                .map(|(w, a)| {
                    let ph = w * (x.t - w0);
                    a.re * ph.cos() - a.im * ph.sin()
                })
                .sum();
            (u[k] - fit).powi(2)
        })
        .sum();
    (resid2 / in_win.len() as f64).sqrt()
}

/// The free response of the loop's own output.
struct Free<'a> {
    /// The cycles from the start of the probe's fade-out (the first verdict block
    /// holds the last of the forced response, so a loop that goes quiet at once is
    /// seen decaying) until the end of the run.
    samples: Vec<&'a Sample>,
    /// `u` less `rest` at each.
    xs: Vec<f64>,
    /// Where the loop's output comes to rest: its mean over the last quarter.
    rest: f64,
}

/// The free response of the run (see [`Free`]).
fn free_response<'a>(s: &'a [Sample], tl: &Timeline) -> Free<'a> {
    let samples: Vec<&Sample> = s
        .iter()
        .filter(|x| x.t >= tl.win.1 && x.t < tl.end)
        .collect();
    let tail = &samples[samples.len() * 3 / 4..];
    let rest = tail.iter().map(|x| x.u).sum::<f64>() / tail.len() as f64;
    let xs = samples.iter().map(|x| x.u - rest).collect();
    Free { samples, xs, rest }
}

/// Gain margin (frequency, dB) where the unwrapped phase first falls through -180
/// degrees between neighbouring probe frequencies, interpolated in log frequency
/// and log magnitude.
fn gain_margin(points: &[LivePoint]) -> Option<(f64, f64)> {
    (1..points.len()).find_map(|k| {
        let (a, b) = (&points[k - 1], &points[k]);
        let ok = a.l.abs() > 0.0 && b.l.abs() > 0.0;
        (ok && a.phase_deg > -180.0 && b.phase_deg <= -180.0).then(|| {
            let r = (-180.0 - a.phase_deg) / (b.phase_deg - a.phase_deg);
            let f = (a.freq_hz.ln() + r * (b.freq_hz / a.freq_hz).ln()).exp();
            let mag = (a.l.abs().ln() + r * (b.l.abs() / a.l.abs()).ln()).exp();
            (f, -20.0 * mag.log10())
        })
    })
}

/// What a user sees of the loop, but the report's counters: the gate's cycles in
/// the window, the hold error after the probe has faded out, the approach's
/// overshoot and time to the goal, the strongest free oscillation.
fn consequences(
    setup: &LiveSetup,
    approach: Option<&[Sample]>,
    tl: &Timeline,
    free: &Free,
    gate_times: &[f64],
    goal: f64,
    floor: f64,
) -> Consequences {
    let mut cons = Consequences {
        gate_cycles: gate_times
            .iter()
            .filter(|&&t| t >= tl.win.0 && t < tl.win.1)
            .count() as u64,
        ..Consequences::default()
    };
    // What a user sees after the probe has faded out.
    let k0 = free
        .samples
        .iter()
        .position(|x| x.t >= tl.free_from)
        .unwrap_or(free.samples.len());
    let errs: Vec<f64> = free.samples[k0..].iter().map(|x| goal - x.y).collect();
    cons.hold_err_rms_rad =
        (errs.iter().map(|e| e * e).sum::<f64>() / errs.len().max(1) as f64).sqrt();
    cons.hold_err_max_rad = errs.iter().fold(0.0f64, |m, e| m.max(e.abs()));
    let approach: Vec<&Sample> = approach
        .unwrap_or_default()
        .iter()
        .filter(|x| x.t < tl.on)
        .collect();
    if let Some(a0) = approach.first() {
        let dir = (goal - a0.y).signum();
        cons.overshoot_rad = Some(
            approach
                .iter()
                .map(|x| (x.y - goal) * dir)
                .fold(0.0f64, f64::max),
        );
        let last_out = approach.iter().rposition(|x| (x.y - goal).abs() > 5e-3);
        cons.time_to_goal_s = match last_out {
            None => Some(0.0),
            Some(i) if i + 1 < approach.len() => Some(approach[i + 1].t - tl.t0),
            Some(_) => None,
        };
    }
    let (osc, limit) = oscillation(
        &free.samples[k0..],
        &free.xs[k0..],
        floor,
        setup.cfg.inference.chunk_period_ms,
    );
    cons.oscillation = osc;
    cons.limit_cycle = limit;
    cons
}

/// The share of the probe's amplitude below which a paired point's free response is
/// not judged (see `analyse`).
const PAIRED_FLOOR: f64 = 0.05;

/// How far the residual of `U` may exceed the probe's amplitude before a moving
/// policy's own motion is taken to mask the loop's answer (measured against a 2 mrad
/// probe: 0.56-0.66 mrad with the policy held; the bundled flow policy moving
/// between its goals, 60-105 mrad on its own, under 1 mrad less its unprobed twin).
const MASKED_FACTOR: f64 = 5.0;

/// A policy that moves on its own ([`LiveSetup::paired`]) whose motion, what the
/// probe frequencies do not explain of `U` less the unprobed twin run, is still more
/// than [`MASKED_FACTOR`] times the probe (the twin did not repeat the motion: a
/// policy or plant that is not deterministic): the recording holds the plan, not
/// the loop's response, and neither a margin nor a verdict on the free response
/// (the motion itself) can be read from it.
/// The share of the probe's amplitude past which the probed run, before its probe
/// started, is taken to have departed from its twin. With the twin's timing
/// replayed and the sim sampling on the control grid the two runs are one (0.0 rad
/// apart before the probe, quiet and beside `stress-ng --cpu 2`); a run that cannot
/// keep its twin's timing (`replay_late`) parts by 0.1 mrad and more, and at a
/// bifurcation of the bundled flow policy's path by 3-18 mrad.
pub(super) const DEPARTED_SHARE: f64 = 0.25;

/// The probed run departed from its twin before the probe started (see
/// [`DEPARTED_SHARE`]): the difference is not the loop's answer to the probe.
pub(super) fn departed(setup: &LiveSetup, twin_mismatch: Option<f64>) -> Option<LiveStatus> {
    twin_mismatch
        .filter(|&m| m > DEPARTED_SHARE * setup.amplitude_rad)
        .map(|m| LiveStatus::Masked {
            motion_rms_rad: m,
            probe_rad: setup.amplitude_rad,
        })
}

fn masked(setup: &LiveSetup, residual_rad: f64, lost: u64) -> Option<LiveStatus> {
    (setup.paired() && lost == 0 && residual_rad > MASKED_FACTOR * setup.amplitude_rad).then_some(
        LiveStatus::Masked {
            motion_rms_rad: residual_rad,
            probe_rad: setup.amplitude_rad,
        },
    )
}

/// The margin, or why there is none: from the verdict on the free response, a
/// hunting oscillation (a limit cycle larger than the probe), the cycles without
/// authority after the probe started (`lost`) and the measured points.
fn status(
    setup: &LiveSetup,
    verdict: &Verdict,
    cons: &Consequences,
    lost: u64,
    points: &[LivePoint],
) -> LiveStatus {
    let (osc, limit) = (cons.oscillation, cons.limit_cycle);
    let hunting = osc.filter(|o| limit && o.1 > setup.amplitude_rad);
    // |L| far below 1 at every probed frequency: the loop's output barely answers
    // the probe (a policy that follows its own plan, not the arm); stable by the
    // small-gain theorem within the band, and nothing to cross.
    let max_mag = points.iter().map(|p| p.l.abs()).fold(0.0, f64::max);
    let small_gain = max_mag < 0.5;
    match (verdict.stability, hunting) {
        (Stability::Unstable, _) => LiveStatus::Unstable,
        (Stability::Undetermined { .. }, None) if small_gain && lost == 0 => crossover(points),
        (_, Some((freq_hz, amplitude_rad))) => LiveStatus::LimitCycle {
            freq_hz,
            amplitude_rad,
        },
        _ if lost > 0 => LiveStatus::LostAuthority { cycles: lost },
        (Stability::Undetermined { run_longer_s }, _) => LiveStatus::Undetermined { run_longer_s },
        (Stability::Stable, _) => match crossover(points) {
            // A measured crossover with the phase past -180: the linear loop is
            // unstable; what keeps it bounded (the gate, the sampler) makes it ring.
            LiveStatus::Margin { pm_deg, .. } if pm_deg < 0.0 => match osc {
                Some((freq_hz, amplitude_rad)) if limit => LiveStatus::LimitCycle {
                    freq_hz,
                    amplitude_rad,
                },
                _ => LiveStatus::Unstable,
            },
            other => other,
        },
    }
}

/// Gain crossover: every crossing of `|L|` through 1 between neighbouring probe
/// frequencies, interpolated in log frequency, with the phase there interpolated
/// the same way; the one with the least phase margin counts (near instability
/// `|L|` can cross 1 more than once).
fn crossover(points: &[LivePoint]) -> LiveStatus {
    let mut worst: Option<LiveStatus> = None;
    for k in 1..points.len() {
        let (a, b) = (&points[k - 1], &points[k]);
        let (ma, mb) = (a.l.abs(), b.l.abs());
        if (ma >= 1.0) != (mb >= 1.0) && ma > 0.0 && mb > 0.0 {
            let r = ma.ln() / (ma.ln() - mb.ln());
            let f = (a.freq_hz.ln() + r * (b.freq_hz / a.freq_hz).ln()).exp();
            let phase = a.phase_deg + r * (b.phase_deg - a.phase_deg);
            // The margin to the nearest -180 (+ k 360) below the phase.
            let pm = (180.0 + phase).rem_euclid(360.0);
            let pm = if pm > 180.0 { pm - 360.0 } else { pm };
            if worst
                .as_ref()
                .and_then(LiveStatus::pm_deg)
                .is_none_or(|w| pm < w)
            {
                worst = Some(LiveStatus::Margin {
                    crossover_hz: f,
                    pm_deg: pm,
                    delay_margin_ms: pm / (0.36 * f),
                });
            }
        }
    }
    worst.unwrap_or_else(|| {
        let mags = points.iter().map(|p| p.l.abs());
        LiveStatus::NoCrossover {
            max_mag: mags.clone().fold(0.0, f64::max),
            min_mag: mags.fold(f64::INFINITY, f64::min),
        }
    })
}

/// The strongest spectral peak of the free response between 0.1 Hz and the chunk
/// rate's Nyquist frequency, and whether it is a limit cycle (it holds at least
/// half its amplitude from the first half of the free response to the second, above
/// five noise floors).
fn oscillation(
    free: &[&Sample],
    xs: &[f64],
    floor: f64,
    chunk_period_ms: f64,
) -> (Option<(f64, f64)>, bool) {
    let n = xs.len();
    if n < 64 {
        return (None, false);
    }
    let span = free[n - 1].t - free[0].t;
    if span <= 0.0 {
        return (None, false);
    }
    let top = 500.0 / chunk_period_ms;
    let amp = |lo: usize, hi: usize, f: f64| -> f64 {
        let w = 2.0 * core::f64::consts::PI * f;
        let mut acc = Complex::ZERO;
        for k in lo..hi {
            acc = acc + Complex::from_polar(xs[k], -w * free[k].t);
        }
        2.0 * acc.abs() / (hi - lo) as f64
    };
    let mut best = (0.0, 0.0);
    let mut f = 1.0 / span;
    while f <= top {
        let a = amp(0, n, f);
        if a > best.1 {
            best = (f, a);
        }
        f += 0.5 / span;
    }
    if best.1 <= floor {
        return (None, false);
    }
    let (first, second) = (amp(0, n / 2, best.0), amp(n / 2, n, best.0));
    let limit = second >= 0.5 * first && second > 5.0 * floor;
    (Some(best), limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chunkrt_config::Config;
    use core::f64::consts::PI;

    /// 1 ms cycles over `secs`, `u` and `c` as functions of time.
    fn samples(secs: f64, u: impl Fn(f64) -> f64, c: impl Fn(f64) -> f64) -> Vec<Sample> {
        (0..(secs * 1e3).round() as usize)
            .map(|k| {
                let t = k as f64 * 1e-3;
                Sample {
                    cycle: k as u64,
                    t,
                    u: u(t),
                    c: c(t),
                    y: 0.0,
                    playing: true,
                }
            })
            .collect()
    }

    /// The bundled config (the flow policy moving between its goals), and the same
    /// held at one goal.
    fn sim_setups() -> (LiveSetup, LiveSetup) {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rt-config/sim.toml");
        let cfg = Config::load(&path).expect("rt-config/sim.toml loads");
        assert!(
            cfg.policy.goals_rad.is_empty(),
            "sim.toml takes the manifest's goals"
        );
        let mut held = cfg.clone();
        held.policy.goals_rad = vec![vec![0.0; cfg.control.joints]];
        (
            LiveSetup::new(cfg, "sim".into()),
            LiveSetup::new(held, "held".into()),
        )
    }

    #[test]
    fn a_moving_policy_whose_motion_dwarfs_the_probe_masks_the_measurement() {
        let (moving, held) = sim_setups();
        let a = moving.amplitude_rad;
        // 60 mrad left of the motion beside a 2 mrad probe (what sim.toml's policy
        // moving with no twin leaves): masked, with the figures it was judged on.
        assert_eq!(
            masked(&moving, 30.0 * a, 0),
            Some(LiveStatus::Masked {
                motion_rms_rad: 30.0 * a,
                probe_rad: a
            })
        );
        // A residual at the probe's own level (0.6 mrad measured held): measured.
        assert_eq!(masked(&moving, 0.3 * a, 0), None);
        // Held at one goal the residual is the loop's own (a runaway, intermodulation):
        // never called the policy's motion.
        assert_eq!(masked(&held, 30.0 * a, 0), None);
        // Authority lost: that is the verdict, not a masking.
        assert_eq!(masked(&moving, 30.0 * a, 12), None);
    }

    /// A policy swinging 0.5 rad at 0.37 Hz (between the probe's frequencies) whose
    /// loop answers its input `C = U + d` with `U = -0.5 C` (so `U = -d / 3`; `L` =
    /// 0.5 at every frequency):
    /// measured against its unprobed twin, `|L|` is 0.5 and there is no crossover;
    /// without the twin the swing masks it.
    #[test]
    fn the_unprobed_twin_takes_the_policys_motion_out_of_the_measurement() {
        let (moving, _) = sim_setups();
        let dt = moving.cfg.period_ns() as f64 * 1e-9;
        let n = (moving.run_s() / dt).round() as usize;
        let on = moving.settle_s;
        let motion = |t: f64| 0.5 * (2.0 * PI * 0.37 * t).sin();
        let probe = |t: f64| {
            let fade = ((t - on) / moving.ramp_s).clamp(0.0, 1.0)
                * ((on + moving.window_s + 2.0 * moving.ramp_s - t) / moving.ramp_s)
                    .clamp(0.0, 1.0);
            let sum: f64 = moving
                .freqs_hz
                .iter()
                .enumerate()
                .map(|(k, f)| (2.0 * PI * f * t + k as f64).sin())
                .sum();
            fade * moving.amplitude_rad * sum
        };
        let sample = |k: usize, u: f64, c: f64| Sample {
            cycle: k as u64,
            t: k as f64 * dt,
            u,
            c,
            y: c,
            playing: true,
        };
        let twin: Vec<Sample> = (0..n)
            .map(|k| {
                let m = motion(k as f64 * dt);
                sample(k, m, m)
            })
            .collect();
        let probed: Vec<Sample> = (0..n)
            .map(|k| {
                let t = k as f64 * dt;
                let u = motion(t) - probe(t) / 3.0;
                sample(k, u, u + probe(t))
            })
            .collect();
        let row = analyse(&moving, &probed, Some(&twin), &[], None).unwrap();
        assert_eq!(row.twin_mismatch_rad, Some(0.0), "the twin repeats exactly");
        for p in &row.points {
            assert!((p.l.abs() - 0.5).abs() < 0.02, "{p:?}");
            assert!(p.phase_deg.abs() < 2.0, "{p:?}");
        }
        assert!(
            matches!(row.status, LiveStatus::NoCrossover { .. }),
            "{:?}",
            row.status
        );
        assert_eq!(row.consequences.overshoot_rad, None, "no single goal");
        let alone = analyse(&moving, &probed, None, &[], None).unwrap();
        assert!(
            matches!(alone.status, LiveStatus::Masked { .. }),
            "{:?}",
            alone.status
        );
        // A twin that ended early is refused, not measured on what is left.
        let short = &twin[..n / 2];
        let e = analyse(&moving, &probed, Some(short), &[], None).unwrap_err();
        assert!(e.to_string().contains("ended early"), "{e}");
    }

    #[test]
    fn detrend_removes_an_offset_and_a_ramp_and_nothing_else() {
        let s = samples(2.0, |t| 3.0 + 2.0 * t, |t| (2.0 * PI * t).sin());
        let win: Vec<&Sample> = s.iter().collect();
        assert!(detrend(&win, |x| x.u).iter().all(|v| v.abs() < 1e-9));
        // A sine over whole periods has no mean; its trend over the window is small
        // but not zero, so only its shape is checked: still a unit sine.
        let c = detrend(&win, |x| x.c);
        let peak = c.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        assert!((peak - 1.0).abs() < 0.2, "{peak}");
    }

    /// A loop of known gain and phase at two frequencies: `c` the probe, `u` its
    /// answer `-A cos(w t + theta)`, so `L = -U / C = A e^(j theta)`.
    #[test]
    fn loop_points_read_a_known_gain_and_phase_and_the_residual_is_the_rest() {
        let (f1, f2) = (1.0, 3.0);
        let (a1, th1) = (2.0, -100f64.to_radians());
        let (a2, th2) = (0.5, -200f64.to_radians());
        let w = |f: f64| 2.0 * PI * f;
        // An extra sine at 7 Hz in u, not probed: the residual, RMS 0.01 / sqrt 2.
        let s = samples(
            10.0,
            |t| {
                -a1 * (w(f1) * t + th1).cos() - a2 * (w(f2) * t + th2).cos()
                    + 0.01 * (w(7.0) * t).sin()
            },
            |t| (w(f1) * t).cos() + (w(f2) * t).cos(),
        );
        let win: Vec<&Sample> = s.iter().collect();
        let u: Vec<f64> = win.iter().map(|x| x.u).collect();
        let c: Vec<f64> = win.iter().map(|x| x.c).collect();
        let (points, coeffs) = loop_points(&[f2, f1], &win, &u, &c, 0.0);
        assert_eq!(points.len(), 2);
        assert_eq!((points[0].freq_hz, points[1].freq_hz), (f1, f2));
        assert!((points[0].l.abs() - a1).abs() < 1e-3, "{:?}", points[0]);
        assert!((points[1].l.abs() - a2).abs() < 1e-3, "{:?}", points[1]);
        assert!((points[0].phase_deg + 100.0).abs() < 0.1, "{:?}", points[0]);
        assert!((points[1].phase_deg + 200.0).abs() < 0.1, "{:?}", points[1]);
        let rms = residual_rms(&win, &u, &coeffs, 0.0);
        assert!((rms - 0.01 / 2f64.sqrt()).abs() < 1e-4, "{rms}");
    }

    #[test]
    fn gain_margin_is_read_where_the_phase_falls_through_minus_180() {
        let point = |freq_hz: f64, mag: f64, phase_deg: f64| LivePoint {
            freq_hz,
            l: Complex::from_polar(mag, phase_deg.to_radians()),
            phase_deg,
        };
        // Halfway in log frequency and log magnitude: sqrt 2 Hz, |L| = 1, 0 dB.
        let pts = [point(1.0, 2.0, -170.0), point(2.0, 0.5, -190.0)];
        let (f, db) = gain_margin(&pts).expect("the phase crosses -180");
        assert!(
            (f - 2f64.sqrt()).abs() < 1e-9 && db.abs() < 1e-9,
            "{f} {db}"
        );
        // |L| = 0.25 where it crosses: 12 dB of gain margin.
        let pts = [point(1.0, 0.25, -170.0), point(4.0, 0.25, -190.0)];
        let (f, db) = gain_margin(&pts).unwrap();
        assert!(
            (f - 2.0).abs() < 1e-9 && (db - 12.04).abs() < 0.01,
            "{f} {db}"
        );
        assert_eq!(
            gain_margin(&[point(1.0, 2.0, -90.0), point(2.0, 1.0, -170.0)]),
            None
        );
    }
}
