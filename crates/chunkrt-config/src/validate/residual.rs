//! `[policy.residual]`: the correction's bounds, rates and smoothness within the
//! joints' limits, and its activity region.

use super::{fail, Check};
use crate::schema::{Config, PolicyKind, ResidualConfig};

impl Config {
    /// `[policy.residual]`: an ONNX base (the residual is bound to its model's digest),
    /// bounds that are non-negative, rates below the speed limit, a region whose box
    /// holds its fade band from both faces.
    pub(super) fn check_residual(&self) -> Check {
        let Some(r) = &self.policy.residual else {
            return Ok(());
        };
        if !matches!(self.policy.kind, PolicyKind::Onnx | PolicyKind::Remote) {
            return fail(
                "policy.residual",
                "a residual is bound to its base model's SHA-256: policy.kind must be \
                 \"onnx\" or \"remote\"",
            );
        }
        let n = self.control.joints;
        r.bound_rad.check(
            "policy.residual.bound_rad",
            n,
            |v| v >= 0.0,
            "a bound >= 0 rad",
        )?;
        r.rate_rad_s.check(
            "policy.residual.rate_rad_s",
            n,
            |v| v > 0.0,
            "a positive rate",
        )?;
        for j in 0..n {
            let (rate, vmax) = (r.rate_rad_s.get(j), self.limits.max_vel_rad_s.get(j));
            if rate >= vmax {
                return fail(
                    "policy.residual.rate_rad_s",
                    format!("joint {j}: {rate} rad/s must be below limits.max_vel_rad_s = {vmax}"),
                );
            }
        }
        self.check_residual_smoothness(r)?;
        let Some(g) = &r.region else {
            return Ok(());
        };
        g.lo_rad.check(
            "policy.residual.region.lo_rad",
            n,
            |_| true,
            "a finite number",
        )?;
        g.hi_rad.check(
            "policy.residual.region.hi_rad",
            n,
            |_| true,
            "a finite number",
        )?;
        if !(g.fade_rad.is_finite() && g.fade_rad > 0.0) {
            return fail(
                "policy.residual.region.fade_rad",
                format!("expected a positive depth, got {}", g.fade_rad),
            );
        }
        for j in 0..n {
            let (lo, hi) = (g.lo_rad.get(j), g.hi_rad.get(j));
            if hi - lo < 2.0 * g.fade_rad {
                return fail(
                    "policy.residual.region.hi_rad",
                    format!(
                        "joint {j}: the box [{lo}, {hi}] is narrower than twice fade_rad = {}",
                        g.fade_rad
                    ),
                );
            }
        }
        Ok(())
    }

    /// `[policy.residual] acc_rad_s2` and `jerk_rad_s3`: positive and at most the
    /// joint's own limits (the correction rides on the base inside them).
    fn check_residual_smoothness(&self, r: &ResidualConfig) -> Check {
        let n = self.control.joints;
        let keys = [
            (
                "acc_rad_s2",
                &r.acc_rad_s2,
                &self.limits.max_acc_rad_s2,
                "max_acc_rad_s2",
            ),
            (
                "jerk_rad_s3",
                &r.jerk_rad_s3,
                &self.limits.max_jerk_rad_s3,
                "max_jerk_rad_s3",
            ),
        ];
        for (key, value, limit, limit_key) in keys {
            let Some(v) = value else {
                continue;
            };
            let path = format!("policy.residual.{key}");
            v.check(&path, n, |x| x > 0.0 && x.is_normal(), "a positive number")?;
            for j in 0..n {
                let (x, max) = (v.get(j), limit.get(j));
                if x > max {
                    return fail(
                        &path,
                        format!("joint {j}: {x} must be at most limits.{limit_key} = {max}"),
                    );
                }
            }
        }
        Ok(())
    }
}
