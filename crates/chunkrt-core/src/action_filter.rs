//! The low-pass action filter on the permission path (issue 41): a first-order low-pass
//! per joint on the executor's setpoint (position, and its velocity and acceleration
//! feed-forward through the same filter) before the gate, with a cutoff of at most
//! 20 Hz. It takes out what a policy's chunks carry above the cutoff (sampling noise,
//! a seam's kink) at a phase cost the margin tool adds to the loop's:
//! [`ActionFilter::phase_lag_deg`].
//!
//! The discrete filter `y[k] = y[k-1] + a (x[k] - y[k-1])`, `a = 1 - exp(-2 pi fc T)`:
//! each output is a convex combination of the inputs so far (and the state it started
//! from), so it never leaves their range; its DC gain is 1. No allocation.

use crate::chunk::{JointVec, MAX_DOF};
use crate::executor::Setpoint;
use crate::spline::Pva;

/// Highest cutoff the filter accepts (Hz): the design table's.
pub const MAX_CUTOFF_HZ: f64 = 20.0;

/// The filter is counted as acting on a joint (gate constraint `action_filter`) when
/// it moved the position by more than this beside its own lag at the proposal's
/// velocity: the proposal had content above the cutoff (a seam's kink, a step,
/// noise) larger than a milliradian. A smooth proposal below the cutoff is only
/// delayed, which the margin tool accounts for as phase.
pub const ACTS_ABOVE_RAD: f64 = 1e-3;

/// A first-order low-pass per joint.
#[derive(Clone, Copy, Debug)]
pub struct ActionFilter {
    a: f64,
    cutoff_hz: f64,
    period_s: f64,
    pos: JointVec,
    vel: JointVec,
    acc: JointVec,
}

impl ActionFilter {
    /// A filter at `cutoff_hz` (clamped to `(0, MAX_CUTOFF_HZ]`) for the control period,
    /// at rest at `pos`.
    pub fn new(cutoff_hz: f64, period_s: f64, pos: &JointVec) -> Self {
        let fc = if cutoff_hz > 0.0 {
            cutoff_hz.min(MAX_CUTOFF_HZ)
        } else {
            MAX_CUTOFF_HZ
        };
        let mut f = ActionFilter {
            a: 1.0 - (-2.0 * std::f64::consts::PI * fc * period_s).exp(),
            cutoff_hz: fc,
            period_s,
            pos: [0.0; MAX_DOF],
            vel: [0.0; MAX_DOF],
            acc: [0.0; MAX_DOF],
        };
        f.reset(pos);
        f
    }

    /// The cutoff (Hz).
    pub fn cutoff_hz(&self) -> f64 {
        self.cutoff_hz
    }

    /// Restarts at rest at `pos` (the arm re-seeded after a fault, a resync).
    pub fn reset(&mut self, pos: &JointVec) {
        for (y, p) in self.pos.iter_mut().zip(pos) {
            *y = if p.is_finite() { *p } else { 0.0 };
        }
        self.vel = [0.0; MAX_DOF];
        self.acc = [0.0; MAX_DOF];
    }

    /// Restarts at the commanded state `at` (positions, velocities and accelerations):
    /// after a stop, the policy's next proposal is filtered from where the arm was
    /// commanded to be, with no step.
    pub fn reset_to(&mut self, at: &Pva) {
        for j in 0..MAX_DOF {
            let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
            self.pos[j] = finite(at.pos_rad[j]);
            self.vel[j] = finite(at.vel_rad_s[j]);
            self.acc[j] = finite(at.acc_rad_s2[j]);
        }
    }

    /// The filter's steady lag behind a ramp, s: `T (1 - a) / a`.
    pub fn lag_s(&self) -> f64 {
        self.period_s * (1.0 - self.a) / self.a
    }

    /// Whether the filter acted on joint `j` (see [`ACTS_ABOVE_RAD`]): `raw` is the
    /// proposal, `filtered` what [`Self::apply`] made of it. A smooth proposal `x` comes
    /// out as `x - tau x' + tau^2 x'' - ...` (`tau` the lag): what the filter took
    /// beyond those two terms is what the proposal had above the cutoff.
    #[inline]
    pub fn acted(&self, raw: &Setpoint, filtered: &Setpoint, j: usize) -> bool {
        let tau = self.lag_s();
        let removed = raw.pos_rad[j] - filtered.pos_rad[j] - tau * raw.vel_rad_s[j]
            + tau * tau * raw.acc_rad_s2[j];
        removed.abs() > ACTS_ABOVE_RAD
    }

    /// Filters `sp` in place (joints `0..sp.dof`). A value that is not a number is
    /// passed through for the gate to refuse, and leaves the filter's state as it was.
    pub fn apply(&mut self, sp: &mut Setpoint) {
        let a = self.a;
        for j in 0..(sp.dof as usize).min(MAX_DOF) {
            for (x, y) in [
                (&mut sp.pos_rad[j], &mut self.pos[j]),
                (&mut sp.vel_rad_s[j], &mut self.vel[j]),
                (&mut sp.acc_rad_s2[j], &mut self.acc[j]),
            ] {
                if x.is_finite() {
                    *y += a * (*x - *y);
                    *x = *y;
                }
            }
        }
    }

    /// The filter's phase lag at `freq_hz` (degrees, positive: the output lags), the
    /// discrete filter's own: `arg(a / (1 - (1 - a) e^{-j w T}))`.
    pub fn phase_lag_deg(&self, freq_hz: f64) -> f64 {
        let w = 2.0 * std::f64::consts::PI * freq_hz * self.period_s;
        let b = 1.0 - self.a;
        // Denominator 1 - b cos(wT) + j b sin(wT); H = a / den, arg H = -arg den.
        (b * w.sin()).atan2(1.0 - b * w.cos()).to_degrees()
    }

    /// Its gain at `freq_hz` (a ratio, 1 at DC).
    pub fn gain(&self, freq_hz: f64) -> f64 {
        let w = 2.0 * std::f64::consts::PI * freq_hz * self.period_s;
        let b = 1.0 - self.a;
        self.a / ((1.0 - b * w.cos()).powi(2) + (b * w.sin()).powi(2)).sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn setpoint(p: f64) -> Setpoint {
        let mut s = Setpoint {
            dof: 1,
            ..Setpoint::default()
        };
        s.pos_rad[0] = p;
        s
    }

    proptest! {
        /// Whatever the proposals, the filtered positions stay within the range of
        /// the proposals and the starting state (the gate's limits then hold as for
        /// any proposal), and a constant input is reached.
        #[test]
        fn the_output_never_leaves_the_inputs_range(
            xs in prop::collection::vec(-10.0f64..10.0, 1..200),
            fc in 0.5f64..40.0,
            start in -10.0f64..10.0,
        ) {
            let mut f = ActionFilter::new(fc, 0.001, &[start; MAX_DOF]);
            prop_assert!(f.cutoff_hz() <= MAX_CUTOFF_HZ);
            let (mut lo, mut hi) = (start, start);
            for x in &xs {
                lo = lo.min(*x);
                hi = hi.max(*x);
                let mut s = setpoint(*x);
                f.apply(&mut s);
                prop_assert!(s.pos_rad[0] >= lo - 1e-12 && s.pos_rad[0] <= hi + 1e-12);
            }
            for _ in 0..20_000 {
                let mut s = setpoint(3.0);
                f.apply(&mut s);
            }
            let mut s = setpoint(3.0);
            f.apply(&mut s);
            prop_assert!((s.pos_rad[0] - 3.0).abs() < 1e-6);
        }
    }

    #[test]
    fn its_measured_phase_and_gain_are_the_ones_it_reports() {
        // A 5 Hz sine through a 15 Hz filter at 1 kHz, read by one DFT bin over whole
        // periods once the start has died out.
        let (fc, t, f0) = (15.0, 0.001, 5.0);
        let mut f = ActionFilter::new(fc, t, &[0.0; MAX_DOF]);
        let w = 2.0 * std::f64::consts::PI * f0;
        let (mut re_in, mut im_in, mut re_out, mut im_out) = (0.0, 0.0, 0.0, 0.0);
        for k in 0..4000 {
            let x = (w * k as f64 * t).sin();
            let mut s = setpoint(x);
            f.apply(&mut s);
            if k >= 2000 {
                let (c, sn) = ((w * k as f64 * t).cos(), (w * k as f64 * t).sin());
                re_in += x * c;
                im_in += x * sn;
                re_out += s.pos_rad[0] * c;
                im_out += s.pos_rad[0] * sn;
            }
        }
        // x = sin(wt) reads at 90 deg; sin(wt - lag) at 90 deg + lag.
        let lag = (im_out.atan2(re_out) - im_in.atan2(re_in)).to_degrees();
        let lag = (lag + 540.0) % 360.0 - 180.0;
        let gain = re_out.hypot(im_out) / re_in.hypot(im_in);
        assert!(
            (lag - f.phase_lag_deg(f0)).abs() < 0.05,
            "{lag} vs {}",
            f.phase_lag_deg(f0)
        );
        assert!((gain - f.gain(f0)).abs() < 1e-3, "{gain} vs {}", f.gain(f0));
        // Close to the continuous first order's atan(f / fc) at this rate.
        assert!((f.phase_lag_deg(f0) - (f0 / fc).atan().to_degrees()).abs() < 1.0);
        assert!(f.phase_lag_deg(0.0).abs() < 1e-12);
    }
}
