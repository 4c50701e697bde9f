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
//! A motor does not start a run cold because the process did: the monitor starts from
//! an initial load per joint ([`ThermalMonitor::with_initial_load`]): the runtime gives
//! it the load the wear ledger recorded at the same hardware's last run's end, cooled
//! for the time since by this model's free decay ([`cooled`]), or a declared worst case
//! where the ledger has none. Pure: the elapsed time is the caller's.
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

/// The highest initial load taken ([`ThermalMonitor::with_initial_load`]): far above any
/// a winding survives; a larger value is taken as this.
pub const MAX_INITIAL_LOAD: f64 = 100.0;

/// The load of a winding at `load` after `dt_s` seconds without current (the drive
/// off between two runs): the first-order model's free decay, `load exp(-dt / T)`.
/// A negative or non-finite `dt_s` (a clock that went back) cools nothing: only time
/// known to have passed is credited.
pub fn cooled(load: f64, dt_s: f64, time_constant_s: f64) -> f64 {
    let credited = dt_s > 0.0 && dt_s.is_finite() && time_constant_s > 0.0;
    if credited {
        load * (-dt_s / time_constant_s).exp()
    } else {
        load
    }
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

    /// The monitor with joint `j` starting at `load[j]` (fraction of the rating's I²t:
    /// the state of the winding when the run starts) instead of cold; the high-water
    /// mark starts there too. A load that is not a number is taken as 1 (the rating:
    /// the hottest a winding can be that its drive has not stopped), one outside
    /// `[0, MAX_INITIAL_LOAD]` as the nearest end.
    pub fn with_initial_load(mut self, load: &JointVec) -> Self {
        let dof = self.limits.dof.min(MAX_DOF);
        for (j, &l) in load.iter().enumerate().take(dof) {
            let c = self.limits.continuous_nm[j];
            if !(c.is_finite() && c > 0.0) {
                continue;
            }
            let r = if l.is_nan() {
                1.0
            } else {
                l.clamp(0.0, MAX_INITIAL_LOAD)
            };
            self.filtered[j] = r * c * c;
            self.peak[j] = r;
        }
        self
    }

    /// Each joint's load now (0 for a joint not watched): what the wear ledger records
    /// at a run's end, for the next run to start from.
    pub fn loads(&self) -> JointVec {
        let mut out = [0.0; MAX_DOF];
        for (j, o) in out.iter_mut().enumerate() {
            *o = self.load(j);
        }
        out
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

    /// The seed is the closed form of the model: a winding at load `r0` that cooled
    /// `dt` without current is at `r0 exp(-dt / T)`; heating from there follows the
    /// step response from that start, `r_inf + (r(0) - r_inf) exp(-t / T)`, and a warm
    /// start crosses `withdraw_at` earlier than a cold one by the closed form's times.
    #[test]
    fn a_warm_start_is_the_cooled_load_and_heats_on_from_there() {
        assert!((cooled(1.5, 2.0, 4.0) - 1.5 * (-0.5f64).exp()).abs() < 1e-15);
        assert_eq!(
            cooled(1.5, -3.0, 4.0),
            1.5,
            "a clock that went back cools nothing"
        );
        assert_eq!(cooled(1.5, f64::NAN, 4.0), 1.5);
        assert_eq!(cooled(1.5, f64::INFINITY, 4.0), 1.5);
        assert_eq!(cooled(0.0, 10.0, 4.0), 0.0);

        let dt = 0.001;
        let r0 = cooled(1.2, 0.5, 1.0);
        let mut start = [0.0; MAX_DOF];
        start[0] = r0;
        start[1] = 7.0; // joint 1 is not watched: stays 0
        let warm = ThermalMonitor::new(limits(), dt).with_initial_load(&start);
        assert!((warm.load(0) - r0).abs() < 1e-12);
        assert_eq!(warm.load(1), 0.0);
        assert!((warm.peaks()[0] - r0).abs() < 1e-12);
        let cold = ThermalMonitor::new(limits(), dt);
        let mut tau = [0.0; MAX_DOF];
        tau[0] = 11.0; // r_inf = 1.21
        let crossing = |mut m: ThermalMonitor| {
            for k in 1..=5000 {
                if m.update(&tau, 1).withdraw.is_some() {
                    return k as f64 * dt;
                }
            }
            f64::INFINITY
        };
        let (t_warm, t_cold) = (crossing(warm), crossing(cold));
        // r(t) = 1.21 + (r0 - 1.21) e^{-t} crosses 0.95 at t = ln((1.21 - r0) / 0.26).
        let closed = |r_start: f64| ((1.21 - r_start) / (1.21 - 0.95)).ln();
        assert!(
            (t_warm - closed(r0)).abs() < 2e-3,
            "{t_warm} vs {}",
            closed(r0)
        );
        assert!(
            (t_cold - closed(0.0)).abs() < 2e-3,
            "{t_cold} vs {}",
            closed(0.0)
        );
        assert!(t_warm < t_cold);
        // Hotter than withdraw_at: authority is taken in the first cycle.
        start[0] = 0.96;
        let mut hot = ThermalMonitor::new(limits(), dt).with_initial_load(&start);
        assert_eq!(hot.update(&[0.0; MAX_DOF], 1).withdraw, Some(0));
        // Not a number: the rating; past the cap: the cap.
        start[0] = f64::NAN;
        let m = ThermalMonitor::new(limits(), dt).with_initial_load(&start);
        assert!((m.load(0) - 1.0).abs() < 1e-12);
        start[0] = 1e300;
        let m = ThermalMonitor::new(limits(), dt).with_initial_load(&start);
        assert!((m.load(0) - MAX_INITIAL_LOAD).abs() < 1e-9);
        assert!((m.loads()[0] - m.load(0)).abs() < 1e-15);
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
