//! `[limits]` and `[domain]`: the joints' ranges and the gate's speed, acceleration,
//! jerk and braking limits (reachable together), following error, thermal monitor,
//! action filter and torque slew; the support box.

use super::{fail, range, Check, MIN_ACTION_FILTER_HZ, MIN_RATED_TORQUE_NM};
use crate::schema::Config;
use chunkrt_core::MAX_DOF;

/// The largest `limits.thermal.initial_load`: twice the rating, past any drive's own
/// I²t trip.
const MAX_INITIAL_LOAD: f64 = 2.0;

impl Config {
    /// `[limits]`: each key's values, the thermal monitor, the filters, the residual
    /// (bounded by these limits), then the limits' consistency joint by joint.
    pub(super) fn validate_limits(&self, n: usize) -> Check {
        self.check_limit_values(n)?;
        self.check_thermal()?;
        self.check_action_filter()?;
        self.check_torque_slew()?;
        self.check_residual()?;
        self.check_limits_together(n)
    }

    /// Each per-joint limit: one value per joint, of the right sign.
    fn check_limit_values(&self, n: usize) -> Check {
        let l = &self.limits;
        let pos = |v: f64| v > 0.0;
        l.pos_min_rad
            .check("limits.pos_min_rad", n, |_| true, "a finite number")?;
        l.pos_max_rad
            .check("limits.pos_max_rad", n, |_| true, "a finite number")?;
        l.pos_margin_rad
            .check("limits.pos_margin_rad", n, |v| v >= 0.0, "a margin >= 0")?;
        l.max_vel_rad_s
            .check("limits.max_vel_rad_s", n, pos, "a positive number")?;
        l.max_acc_rad_s2
            .check("limits.max_acc_rad_s2", n, pos, "a positive number")?;
        l.max_jerk_rad_s3
            .check("limits.max_jerk_rad_s3", n, pos, "a positive number")?;
        l.brake_acc_rad_s2
            .check("limits.brake_acc_rad_s2", n, pos, "a positive number")?;
        if let Some(f) = &l.max_following_error_rad {
            f.check(
                "limits.max_following_error_rad",
                n,
                pos,
                "a positive number",
            )?;
        }
        Ok(())
    }

    /// `[limits.thermal]`: a rating, a time constant, derate below withdraw.
    fn check_thermal(&self) -> Check {
        let Some(t) = &self.limits.thermal else {
            return Ok(());
        };
        let n = self.control.joints;
        let pos = |v: f64| v > 0.0;
        t.continuous_torque_nm.check(
            "limits.thermal.continuous_torque_nm",
            n,
            |v| v >= MIN_RATED_TORQUE_NM,
            &format!("a drive's rated torque, at least {MIN_RATED_TORQUE_NM} N m"),
        )?;
        t.time_constant_s
            .check("limits.thermal.time_constant_s", n, pos, "a positive time")?;
        range("limits.thermal.derate_at", t.derate_at, 0.05, 0.99)?;
        range("limits.thermal.withdraw_at", t.withdraw_at, 0.05, 0.99)?;
        range("limits.thermal.min_derate", t.min_derate, 0.05, 1.0)?;
        self.check_initial_load(&t.initial_load)?;
        if t.withdraw_at <= t.derate_at {
            return fail(
                "limits.thermal.withdraw_at",
                format!(
                    "{} must be above derate_at = {} (derate first, then take authority)",
                    t.withdraw_at, t.derate_at
                ),
            );
        }
        Ok(())
    }

    /// The limits met together: the gate's braking bounds assume a joint can reach its
    /// acceleration limit before its speed limit and brakes no harder than it may
    /// accelerate, and a range wider than its two margins.
    fn check_limits_together(&self, n: usize) -> Check {
        let l = &self.limits;
        for j in 0..n {
            // The gate's braking bounds assume the limits can be met together: a
            // joint must be able to reach its acceleration limit before its speed
            // limit (v >= a^2 / j), and brake no harder than it may accelerate.
            let (v, a, jk) = (
                l.max_vel_rad_s.get(j),
                l.max_acc_rad_s2.get(j),
                l.max_jerk_rad_s3.get(j),
            );
            if v < a * a / jk {
                return fail(
                    "limits.max_jerk_rad_s3",
                    format!(
                        "joint {j}: max_vel_rad_s {v} is below max_acc^2 / max_jerk = {:.4}: \
                         raise max_jerk_rad_s3 to at least {:.1} or lower max_acc_rad_s2",
                        a * a / jk,
                        a * a / v
                    ),
                );
            }
            if l.brake_acc_rad_s2.get(j) > a {
                return fail(
                    "limits.brake_acc_rad_s2",
                    format!(
                        "joint {j}: {} exceeds max_acc_rad_s2 {a}: the braking envelope must \
                         be reachable within the acceleration limit",
                        l.brake_acc_rad_s2.get(j)
                    ),
                );
            }
            let span = l.pos_max_rad.get(j) - l.pos_min_rad.get(j);
            if span <= 2.0 * l.pos_margin_rad.get(j) {
                return fail(
                    "limits.pos_max_rad",
                    format!(
                        "joint {j}: the range [{}, {}] leaves no room inside a margin of {}",
                        l.pos_min_rad.get(j),
                        l.pos_max_rad.get(j),
                        l.pos_margin_rad.get(j)
                    ),
                );
            }
        }
        Ok(())
    }

    /// `limits.thermal.initial_load`: a load per joint from 0 to [`MAX_INITIAL_LOAD`],
    /// not a denormal (5e-324 is a typo, not a load; shown as written, not in 300 digits).
    fn check_initial_load(&self, v: &crate::PerJoint) -> Check {
        let key = "limits.thermal.initial_load";
        v.check(key, self.control.joints, |_| true, "a load")?;
        for j in 0..self.control.joints {
            let x = v.get(j);
            if !((x == 0.0 || x.is_normal()) && (0.0..=MAX_INITIAL_LOAD).contains(&x)) {
                return fail(
                    key,
                    format!(
                        "joint {j}: expected a load from 0 (cold) to {MAX_INITIAL_LOAD} (twice \
                         the rating), got {x:e}"
                    ),
                );
            }
        }
        Ok(())
    }

    /// `limits.action_filter_hz`: within the design table's 20 Hz (below the Nyquist
    /// frequency of every control period, 25 Hz at the longest, 20 ms), and at least
    /// [`MIN_ACTION_FILTER_HZ`].
    fn check_action_filter(&self) -> Check {
        let Some(fc) = self.limits.action_filter_hz else {
            return Ok(());
        };
        let max = chunkrt_core::MAX_CUTOFF_HZ;
        if !(fc.is_finite() && (MIN_ACTION_FILTER_HZ..=max).contains(&fc)) {
            return fail(
                "limits.action_filter_hz",
                format!(
                    "expected a cutoff in [{MIN_ACTION_FILTER_HZ}, {max}] Hz, got {fc} (below \
                     {MIN_ACTION_FILTER_HZ} Hz the filter's time constant, 1 / (2 pi fc), \
                     is over 1.6 s: the arm trails every proposal by seconds, or never moves)"
                ),
            );
        }
        Ok(())
    }

    /// `[limits.torque_slew]`: positive values, and a jerk it implies that still meets
    /// the speed and acceleration limits together (the gate's braking bounds).
    fn check_torque_slew(&self) -> Check {
        let Some(s) = &self.limits.torque_slew else {
            return Ok(());
        };
        let n = self.control.joints;
        let pos = |v: f64| v.is_finite() && v > 0.0;
        s.max_torque_nm.check(
            "limits.torque_slew.max_torque_nm",
            n,
            pos,
            "a positive torque",
        )?;
        s.inertia_kg_m2.check(
            "limits.torque_slew.inertia_kg_m2",
            n,
            pos,
            "a positive inertia",
        )?;
        if !pos(s.rise_time_ms) {
            return fail(
                "limits.torque_slew.rise_time_ms",
                format!("expected a positive time, got {}", s.rise_time_ms),
            );
        }
        let jerk = self.torque_slew_jerk().unwrap_or([f64::INFINITY; MAX_DOF]);
        let l = &self.limits;
        for (j, jk) in jerk.iter().enumerate().take(n.min(MAX_DOF)) {
            let (v, a) = (l.max_vel_rad_s.get(j), l.max_acc_rad_s2.get(j));
            if *jk < a * a / v {
                return fail(
                    "limits.torque_slew",
                    format!(
                        "joint {j}: the slew limit allows a jerk of {jk:.1} rad/s^3 \
                         (max_torque_nm / (rise_time * inertia)), below max_acc^2 / max_vel = \
                         {:.1}: the joint could not reach its acceleration limit before its \
                         speed limit; shorten rise_time_ms or lower max_acc_rad_s2",
                        a * a / v
                    ),
                );
            }
        }
        Ok(())
    }

    /// `[domain]`: a box on the observed positions, upper above lower per joint.
    pub(super) fn validate_domain(&self, n: usize) -> Check {
        if let Some(d) = &self.domain {
            d.pos_min_rad
                .check("domain.pos_min_rad", n, |_| true, "a finite number")?;
            d.pos_max_rad
                .check("domain.pos_max_rad", n, |_| true, "a finite number")?;
            for j in 0..n {
                if d.pos_min_rad.get(j) >= d.pos_max_rad.get(j) {
                    return fail(
                        "domain.pos_max_rad",
                        format!("joint {j}: upper bound must exceed the lower bound"),
                    );
                }
            }
        }
        Ok(())
    }
}
