//! The thermal monitor on the permission path: a per-joint I²t estimate (the motor's
//! current RMS, from the drive's measured torque) that derates the joint's speed limit
//! and then takes the policy's authority before the drive's own I²t limit trips.
//!
//! Per joint, a first-order thermal model of the winding: the load
//! `r = LP_T(tau^2) / tau_cont^2`, `LP_T` a first-order low-pass of time constant `T`
//! (`time_constant_s`) updated every control period with the exact discretisation
//! `x += (1 - exp(-dt / T)) (tau^2 - x)`. At a constant torque `r` tends to
//! `(tau / tau_cont)^2`: 1 is the rating the drive's own I²t protection trips at.
//! - `r >= derate_at`: the joint's speed limit is scaled by a factor falling linearly
//!   from 1 to `min_derate` at `withdraw_at` (the gate's `Thermal` constraint);
//! - `r >= withdraw_at`: the policy loses authority every cycle while it lasts
//!   (`Thermal` mode change, the fallback), before the drive's limit at 1.
//!
//! No allocation: fixed arrays, updated on the control thread.

use crate::chunk::{JointVec, MAX_DOF};

/// The thermal limits of the joints (from `[limits.thermal]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThermalLimits {
    /// Joints watched.
    pub dof: usize,
    /// Continuous (rated) torque per joint, N m (infinite: not watched).
    pub continuous_nm: JointVec,
    /// Winding thermal time constant per joint, s.
    pub time_constant_s: JointVec,
    /// Load where derating starts (fraction of the rating's I²t, below 1).
    pub derate_at: f64,
    /// Load where the policy loses authority (below 1, above `derate_at`).
    pub withdraw_at: f64,
    /// Speed-limit factor at `withdraw_at`.
    pub min_derate: f64,
}

/// What the monitor asks for this cycle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThermalVerdict {
    /// Speed-limit factor per joint (1: not derated).
    pub derate: JointVec,
    /// The first joint at or past `withdraw_at`.
    pub withdraw: Option<u16>,
}

/// Per-joint I²t estimator.
#[derive(Clone, Copy, Debug)]
pub struct ThermalMonitor {
    limits: ThermalLimits,
    /// `1 - exp(-dt / T)` per joint.
    alpha: JointVec,
    /// Low-passed squared torque per joint (N² m²).
    filtered: JointVec,
    /// Highest load seen per joint.
    peak: JointVec,
}

impl ThermalMonitor {
    /// A monitor at the given control period, every joint cold.
    pub fn new(limits: ThermalLimits, period_s: f64) -> Self {
        let mut alpha = [0.0; MAX_DOF];
        for (a, t) in alpha.iter_mut().zip(limits.time_constant_s.iter()) {
            *a = if *t > 0.0 {
                1.0 - (-period_s / t).exp()
            } else {
                1.0
            };
        }
        ThermalMonitor {
            limits,
            alpha,
            filtered: [0.0; MAX_DOF],
            peak: [0.0; MAX_DOF],
        }
    }

    /// The load of joint `j`: `LP(tau^2) / tau_cont^2` (0 for a joint not watched).
    pub fn load(&self, j: usize) -> f64 {
        let c = self.limits.continuous_nm[j];
        if j < self.limits.dof && c.is_finite() && c > 0.0 {
            self.filtered[j] / (c * c)
        } else {
            0.0
        }
    }

    /// The highest load seen per joint (the I²t high-water mark).
    pub fn peaks(&self) -> &JointVec {
        &self.peak
    }

    /// The speed-limit factor at load `r`.
    fn factor(&self, r: f64) -> f64 {
        let l = &self.limits;
        if r <= l.derate_at {
            1.0
        } else if r >= l.withdraw_at {
            l.min_derate
        } else {
            1.0 - (1.0 - l.min_derate) * (r - l.derate_at) / (l.withdraw_at - l.derate_at)
        }
    }

    /// `periods` control periods (1, more after skipped deadlines) at the measured
    /// torques (a torque that is not a number leaves the estimate as it was: a drive
    /// that does not report torque is not judged on it).
    pub fn update(&mut self, torque_nm: &JointVec, periods: u32) -> ThermalVerdict {
        let mut v = ThermalVerdict {
            derate: [1.0; MAX_DOF],
            withdraw: None,
        };
        for (j, &tau) in torque_nm
            .iter()
            .enumerate()
            .take(self.limits.dof.min(MAX_DOF))
        {
            if tau.is_finite() {
                // n periods at one torque: the step response's 1 - (1 - alpha)^n.
                let alpha = if periods == 1 {
                    self.alpha[j]
                } else {
                    1.0 - (1.0 - self.alpha[j]).powi(periods.min(i32::MAX as u32) as i32)
                };
                self.filtered[j] += alpha * (tau * tau - self.filtered[j]);
            }
            let r = self.load(j);
            self.peak[j] = self.peak[j].max(r);
            v.derate[j] = self.factor(r);
            if r >= self.limits.withdraw_at && v.withdraw.is_none() {
                v.withdraw = Some(j as u16);
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ThermalLimits {
        let mut l = ThermalLimits {
            dof: 2,
            continuous_nm: [f64::INFINITY; MAX_DOF],
            time_constant_s: [1.0; MAX_DOF],
            derate_at: 0.8,
            withdraw_at: 0.95,
            min_derate: 0.25,
        };
        l.continuous_nm[0] = 10.0;
        l
    }

    #[test]
    fn the_load_follows_the_first_order_step_response_then_derates_and_withdraws() {
        let dt = 0.001;
        let mut m = ThermalMonitor::new(limits(), dt);
        let mut tau = [0.0; MAX_DOF];
        // 12 N m on a 10 N m rating: r(t) = 1.44 (1 - exp(-t / 1 s)).
        tau[0] = 12.0;
        tau[1] = 50.0;
        let (mut derated_at, mut withdrawn_at) = (None, None);
        for k in 1..=3000 {
            let v = m.update(&tau, 1);
            let t = k as f64 * dt;
            let want = 1.44 * (1.0 - (-t).exp());
            assert!(
                (m.load(0) - want).abs() < 1e-9,
                "t {t}: {} vs {want}",
                m.load(0)
            );
            assert_eq!(v.derate[1], 1.0, "joint 1 is not watched");
            if v.derate[0] < 1.0 && derated_at.is_none() {
                derated_at = Some(t);
            }
            if v.withdraw.is_some() && withdrawn_at.is_none() {
                withdrawn_at = Some(t);
                assert_eq!(v.derate[0], 0.25);
            }
        }
        // r = 0.8 at t = -ln(1 - 0.8 / 1.44), 0.95 at -ln(1 - 0.95 / 1.44).
        let d = derated_at.unwrap();
        let w = withdrawn_at.unwrap();
        assert!((d - 0.8109).abs() < 2e-3, "{d}");
        assert!((w - 1.0780).abs() < 2e-3, "{w}");
        assert!((m.peaks()[0] - m.load(0)).abs() < 1e-12);
        // Cooling: the load decays, authority and speed come back.
        tau[0] = 0.0;
        for _ in 0..5000 {
            m.update(&tau, 1);
        }
        let v = m.update(&tau, 1);
        assert_eq!((v.derate[0], v.withdraw), (1.0, None));
        assert!(m.peaks()[0] > 1.3, "the high-water mark stays");
    }

    #[test]
    fn periods_skipped_heat_as_the_periods_they_were() {
        let mut one = ThermalMonitor::new(limits(), 0.001);
        let mut ten = one;
        let mut tau = [0.0; MAX_DOF];
        tau[0] = 11.0;
        for _ in 0..10 {
            one.update(&tau, 1);
        }
        ten.update(&tau, 10);
        assert!((one.load(0) - ten.load(0)).abs() < 1e-12);
    }

    #[test]
    fn the_derating_falls_linearly_between_its_thresholds_and_ignores_nan() {
        let m = ThermalMonitor::new(limits(), 0.001);
        assert_eq!(m.factor(0.5), 1.0);
        assert!((m.factor(0.875) - 0.625).abs() < 1e-12);
        assert_eq!(m.factor(2.0), 0.25);
        let mut m = m;
        let mut tau = [0.0; MAX_DOF];
        tau[0] = 10.0;
        m.update(&tau, 1);
        let before = m.load(0);
        tau[0] = f64::NAN;
        m.update(&tau, 1);
        assert_eq!(m.load(0), before);
    }
}
