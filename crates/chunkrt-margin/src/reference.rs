//! Phase margin of a loop closed on the simulated arm, measured the way one measures
//! it on a bench: break the loop at the controller output, inject a small sine there,
//! and compare what goes into the plant with what comes back around the loop.
//!
//! With the probe `d` added to the controller output `u`, the plant gets `c = u + d`
//! and the controller answers `u = -L c` (the setpoint is constant), so
//! `L(jw) = -U(w) / C(w)`, whatever controller and plant sit inside. `U` and `C` are
//! single-frequency DFTs over a whole number of probe periods after the loop has
//! settled. The gain crossover is found by bisection on measured `|L| = 1`, the phase
//! crossover (gain margin) on the measured phase.
//!
//! The plant is the real [`SimArm`] driven through [`Backend::exchange`], in
//! simulated time (the arm integrates exactly over the `now` it is given, so no
//! sleeping and a bit-for-bit repeatable result); injected delay goes through the same
//! [`Delayed`] command line (a core [`DelayLine`](chunkrt_core::DelayLine)) that
//! `[inject] transport_delay_ms` puts between the gate and the backend at run time.
//!
//! The controller is a host-side position servo at the bus period on one joint:
//! `u = r + kp e + ki * sum(e T)` with `e = r - y` from the last measurement (the
//! runtime computes a command before the exchange that measures). [`model_loop`] is
//! the same loop written down by hand (docs/margin.md), for comparison.

use crate::complex::{lag_deg, unwrap_deg, Complex};
use crate::error::MarginError;
use crate::setup::MarginSetup;
use crate::verdict::{envelope_verdict, Stability, Verdict};
use chunkrt_core::{Backend, Command, DriveRequest, Feedback, MonoTime, NS_PER_S};
use chunkrt_rt::inject::Delayed;
use chunkrt_sim::SimArm;

/// How a measurement point turned out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointStatus {
    /// A linear, settled measurement.
    Ok,
    /// The closed loop diverged (no margin left): the probe response grew without bound.
    Unstable,
    /// The drive hit its torque limit: the loop was not linear, the point is invalid.
    Saturated,
}

/// One measured point of `L(jw)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoopPoint {
    /// The probe frequency actually used (a whole number of periods fits the window).
    pub freq_hz: f64,
    /// `L(jw)`.
    pub l: Complex,
    /// Whether the point can be trusted.
    pub status: PointStatus,
}

impl LoopPoint {
    /// `|L|`.
    pub fn mag(&self) -> f64 {
        self.l.abs()
    }

    /// Phase of `L` in degrees, in (-360, 0] (loops here lag).
    pub fn phase_deg(&self) -> f64 {
        lag_deg(self.l)
    }
}

/// Measures `L(jw)` at (about) `freq_hz` with `delay_ns` of transport delay.
pub fn measure_point(
    setup: &MarginSetup,
    delay_ns: u64,
    freq_hz: f64,
) -> Result<LoopPoint, MarginError> {
    run_loop(setup, delay_ns, freq_hz, 0).map(|(p, _)| p)
}

/// Whether the loop with `delay_ns` of transport delay is stable: the probe at
/// `freq_hz` (the crossover: it excites the loop where it rings) runs as for
/// [`measure_point`], then stops, and the free response over `verdict_s` is judged
/// by its envelope ([`envelope_verdict`]).
pub fn verdict(
    setup: &MarginSetup,
    delay_ns: u64,
    freq_hz: f64,
) -> Result<(LoopPoint, Verdict), MarginError> {
    let free = (setup.verdict_s / setup.period_s()).ceil() as u64;
    let (p, x) = run_loop(setup, delay_ns, freq_hz, free)?;
    // The arm is simulated exactly: the floor is rounding, far below the probe.
    let floor = 1e-9 * setup.amplitude_rad;
    let diverged = p.status == PointStatus::Unstable;
    // A sustained ring past ten probe amplitudes is hunting, not a slow decay.
    let sustained = 10.0 * setup.amplitude_rad;
    Ok((
        p,
        envelope_verdict(&x, setup.period_s(), floor, sustained, diverged),
    ))
}

/// The probe fitted to the measurement: a whole number of probe periods in the DFT
/// window, so DC and the transient's slow part cancel in the DFT (the frequency
/// moves slightly to fit).
struct Probe {
    /// The frequency used (Hz).
    freq_hz: f64,
    /// The same in rad/s.
    w: f64,
    /// Cycles before the window.
    settle: u64,
    /// Cycles in the window.
    window: u64,
}

impl Probe {
    /// The probe nearest `freq_hz` that fits `setup`'s window; refuses a frequency
    /// outside (0, Nyquist).
    fn fit(setup: &MarginSetup, freq_hz: f64) -> Result<Probe, MarginError> {
        if !(freq_hz.is_finite() && freq_hz > 0.0 && freq_hz < 0.5 / setup.period_s()) {
            return Err(MarginError::Setup(format!(
                "probe frequency {freq_hz} Hz must lie in (0, Nyquist = {} Hz)",
                0.5 / setup.period_s()
            )));
        }
        let t_s = setup.period_s();
        let periods = (setup.window_s * freq_hz).ceil().max(4.0);
        let window = (periods / (freq_hz * t_s)).round() as u64;
        let f = periods / (window as f64 * t_s);
        let settle = ((setup.settle_s.max(5.0 / f)) / t_s).ceil() as u64;
        Ok(Probe {
            freq_hz: f,
            w: 2.0 * core::f64::consts::PI * f,
            settle,
            window,
        })
    }
}

/// The simulated arm started at `t0`, its first feedback, and the command that
/// holds it where it started.
fn start_arm(
    setup: &MarginSetup,
    t0: MonoTime,
) -> Result<(SimArm, Feedback, Command), MarginError> {
    let mut arm = SimArm::new(setup.arm)?;
    let mut fb = Feedback::default();
    arm.start(t0, &mut fb)
        .map_err(|e| MarginError::Start(e.to_string()))?;
    let cmd = Command {
        t_cmd: t0,
        dof: setup.arm.joints as u16,
        pos_rad: fb.pos_rad,
        request: DriveRequest::Track,
        ..Command::default()
    };
    Ok((arm, fb, cmd))
}

/// The loop with the probe for settle + window, then `free` cycles without it;
/// returns the point and the free response `u - r`.
fn run_loop(
    setup: &MarginSetup,
    delay_ns: u64,
    freq_hz: f64,
    free: u64,
) -> Result<(LoopPoint, Vec<f64>), MarginError> {
    setup.check()?;
    let Probe {
        freq_hz: f,
        w,
        settle,
        window,
    } = Probe::fit(setup, freq_hz)?;
    let t_s = setup.period_s();
    let j = setup.joint;
    let t0 = MonoTime::from_ns(NS_PER_S);
    let (mut arm, mut fb, mut cmd) = start_arm(setup, t0)?;
    let r = fb.pos_rad[j];
    let mut transport = Delayed::new(delay_ns, cmd);
    let max_torque = setup.arm.max_torque_nm[j];
    let blow_up = 1000.0 * setup.amplitude_rad;

    let (mut integral, mut su, mut sc) = (0.0, Complex::ZERO, Complex::ZERO);
    let mut status = PointStatus::Ok;
    let mut free_x = Vec::with_capacity(free as usize);
    for k in 1..=settle + window + free {
        let t = t0.add_ns(k * setup.period_ns);
        // The controller uses the last measurement, as the control loop does.
        let e = r - fb.pos_rad[j];
        integral += setup.gains.ki_per_s * e * t_s;
        let u = r + setup.gains.kp * e + integral;
        let probing = k <= settle + window;
        let d = if probing {
            setup.amplitude_rad * (w * k as f64 * t_s).sin()
        } else {
            free_x.push(u - r);
            0.0
        };
        let c = u + d;
        cmd.t_cmd = t;
        cmd.pos_rad[j] = c;
        let wire = transport.pass(t, &cmd);
        arm.exchange(t, wire, &mut fb)?;
        if (c - r).abs() > blow_up || !c.is_finite() {
            status = PointStatus::Unstable;
            break;
        }
        if probing && fb.torque_nm[j].abs() >= 0.99 * max_torque {
            status = PointStatus::Saturated;
        }
        if k > settle && probing {
            let ph = Complex::from_polar(1.0, -w * k as f64 * t_s);
            su = su + ph.scale(u - r);
            sc = sc + ph.scale(c - r);
        }
    }
    let l = if status == PointStatus::Unstable || sc.abs() == 0.0 {
        Complex::ZERO
    } else {
        -(su / sc)
    };
    Ok((
        LoopPoint {
            freq_hz: f,
            l,
            status,
        },
        free_x,
    ))
}

/// Measures `L` at each frequency (a Bode plot).
pub fn bode(
    setup: &MarginSetup,
    delay_ns: u64,
    freqs_hz: &[f64],
) -> Result<Vec<LoopPoint>, MarginError> {
    freqs_hz
        .iter()
        .map(|&f| measure_point(setup, delay_ns, f))
        .collect()
}

/// Bisection steps of the crossover searches (0.05 % in frequency over a decade).
const BISECT_STEPS: usize = 14;

/// Finds the gain crossover (`|L| = 1`) between `lo_hz` and `hi_hz` by bisection in
/// log frequency on measured points; returns the measured point there.
pub fn gain_crossover(
    setup: &MarginSetup,
    delay_ns: u64,
    lo_hz: f64,
    hi_hz: f64,
) -> Result<LoopPoint, MarginError> {
    let p_lo = measure_point(setup, delay_ns, lo_hz)?;
    let p_hi = measure_point(setup, delay_ns, hi_hz)?;
    for p in [p_lo, p_hi] {
        if p.status == PointStatus::Unstable {
            return Ok(p);
        }
    }
    if !(p_lo.mag() > 1.0 && p_hi.mag() < 1.0) {
        return Err(MarginError::NoCrossover {
            lo_hz,
            hi_hz,
            mag_lo: p_lo.mag(),
            mag_hi: p_hi.mag(),
        });
    }
    let (mut lo, mut hi) = (lo_hz, hi_hz);
    let mut best = p_lo;
    for _ in 0..BISECT_STEPS {
        let mid = (lo * hi).sqrt();
        let p = measure_point(setup, delay_ns, mid)?;
        if p.status == PointStatus::Unstable {
            return Ok(p);
        }
        best = p;
        if p.mag() > 1.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(best)
}

/// [`gain_crossover`], widening the bracket (by 1.5x each side, up to 4 times, below
/// 0.45 x Nyquist) when `|L|` does not cross 1 inside it: with friction the loop is
/// amplitude-dependent, so delay can move the crossover a little.
pub fn gain_crossover_widening(
    setup: &MarginSetup,
    delay_ns: u64,
    lo_hz: f64,
    hi_hz: f64,
) -> Result<LoopPoint, MarginError> {
    let top = 0.45 / setup.period_s();
    let (mut lo, mut hi) = (lo_hz, hi_hz.min(top));
    let mut tries = 0;
    loop {
        match gain_crossover(setup, delay_ns, lo, hi) {
            Err(MarginError::NoCrossover { .. }) if tries < 4 => {
                tries += 1;
                lo /= 1.5;
                hi = (hi * 1.5).min(top);
            }
            other => return other,
        }
    }
}

/// Finds where the measured phase crosses -180 degrees between `lo_hz` (phase above)
/// and `hi_hz` (phase below); returns the measured point there.
pub fn phase_crossover(
    setup: &MarginSetup,
    delay_ns: u64,
    lo_hz: f64,
    hi_hz: f64,
) -> Result<LoopPoint, MarginError> {
    let (mut lo, mut hi) = (lo_hz, hi_hz);
    let mut best = measure_point(setup, delay_ns, lo)?;
    for _ in 0..BISECT_STEPS {
        let mid = (lo * hi).sqrt();
        let p = measure_point(setup, delay_ns, mid)?;
        best = p;
        if p.phase_deg() > -180.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(best)
}

/// Unwrapped phases (degrees) of a Bode list ordered by frequency.
pub fn unwrapped_phase_deg(points: &[LoopPoint]) -> Vec<f64> {
    unwrap_deg(points.iter().map(LoopPoint::phase_deg))
}

/// The margins at one injected delay.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayRow {
    /// Injected transport delay asked for.
    pub delay_ns: u64,
    /// Delay the line actually adds: the next whole number of bus periods.
    pub effective_delay_ns: u64,
    /// The measured point at the gain crossover.
    pub crossover: LoopPoint,
    /// Whether the loop is stable at this delay (its free response after the probe).
    pub verdict: Verdict,
    /// Measured phase margin: `None` unless the loop is judged stable and the point
    /// was linear (not saturated).
    pub pm_deg: Option<f64>,
}

/// Delay that the command line really adds for `delay_ns` at this period.
pub fn effective_delay_ns(delay_ns: u64, period_ns: u64) -> u64 {
    delay_ns.div_ceil(period_ns) * period_ns
}

/// Phase margin from a crossover point.
pub fn phase_margin_deg(p: &LoopPoint) -> Option<f64> {
    (p.status == PointStatus::Ok).then(|| 180.0 + p.phase_deg())
}

/// Measures the phase margin at each delay, searching the crossover in
/// `[lo_hz, hi_hz]` (a bracket found at zero delay: delay does not change `|L|`).
/// A margin is reported only where the free response says the loop is stable
/// ([`verdict`]); near and past the delay margin the DFT alone would read a
/// growing transient as a small positive margin.
pub fn sweep(
    setup: &MarginSetup,
    delays_ns: &[u64],
    lo_hz: f64,
    hi_hz: f64,
) -> Result<Vec<DelayRow>, MarginError> {
    delays_ns
        .iter()
        .map(|&d| {
            let crossover = gain_crossover_widening(setup, d, lo_hz, hi_hz)?;
            let freq = if crossover.status == PointStatus::Unstable {
                (lo_hz * hi_hz).sqrt()
            } else {
                crossover.freq_hz
            };
            let (_, verdict) = verdict(setup, d, freq)?;
            let pm_deg = match verdict.stability {
                Stability::Stable => phase_margin_deg(&crossover),
                _ => None,
            };
            Ok(DelayRow {
                delay_ns: d,
                effective_delay_ns: effective_delay_ns(d, setup.period_ns),
                crossover,
                verdict,
                pm_deg,
            })
        })
        .collect()
}

/// Least-squares slope of phase margin against effective delay (degrees per ms),
/// over the rows with a margin.
pub fn pm_slope_deg_per_ms(rows: &[DelayRow]) -> Option<f64> {
    let pts: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|r| r.pm_deg.map(|pm| (r.effective_delay_ns as f64 * 1e-6, pm)))
        .collect();
    if pts.len() < 2 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The first delay (ms, linearly interpolated between rows) at which the margin falls
/// below `threshold_deg`; a row without margin counts as below, unless its
/// stability is undetermined (it is then skipped: neither above nor below).
pub fn delay_at_threshold_ms(rows: &[DelayRow], threshold_deg: f64) -> Option<f64> {
    let mut prev: Option<(f64, f64)> = None;
    for r in rows {
        let d = r.effective_delay_ns as f64 * 1e-6;
        if r.pm_deg.is_none() && matches!(r.verdict.stability, Stability::Undetermined { .. }) {
            continue;
        }
        match r.pm_deg {
            Some(pm) if pm >= threshold_deg => prev = Some((d, pm)),
            Some(pm) => {
                return Some(match prev {
                    Some((d0, pm0)) => d0 + (pm0 - threshold_deg) / (pm0 - pm) * (d - d0),
                    None => d,
                })
            }
            None => return Some(prev.map_or(d, |(d0, _)| d0)),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_fits_a_whole_number_of_periods_in_the_window() {
        let setup = MarginSetup::reference();
        let t_s = setup.period_s();
        for f in [0.7, 2.97, 13.0, 45.0, 333.3] {
            let p = Probe::fit(&setup, f).unwrap();
            let periods = p.freq_hz * p.window as f64 * t_s;
            assert!(
                (periods - periods.round()).abs() < 1e-6,
                "{f} Hz: {periods}"
            );
            assert!(periods.round() >= 4.0, "{f} Hz: {periods}");
            assert!(
                (p.freq_hz / f - 1.0).abs() < 0.01,
                "{f} Hz moved to {}",
                p.freq_hz
            );
            assert!((p.w - 2.0 * core::f64::consts::PI * p.freq_hz).abs() < 1e-9);
            let settle_s = p.settle as f64 * t_s;
            assert!(settle_s >= setup.settle_s && settle_s >= 5.0 / p.freq_hz - t_s);
        }
        // Nyquist at a 1 ms period is 500 Hz.
        assert!(matches!(
            Probe::fit(&setup, 500.0),
            Err(MarginError::Setup(m)) if m.contains("Nyquist")
        ));
    }
}
