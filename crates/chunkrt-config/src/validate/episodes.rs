//! `[episodes]` and the residual's budget judged over them.

use super::{fail, range, Check};
use crate::schema::{BudgetConfig, Config, EpisodesConfig};

impl Config {
    /// `[episodes]`: poses of the arm's joints inside its position limits, at most
    /// `chunkrt_core::episodes::MAX_POSES` of each, positive times and tolerances; a
    /// residual budget needs episodes.
    pub(super) fn check_episodes(&self) -> Check {
        let budget = self
            .policy
            .residual
            .as_ref()
            .and_then(|r| r.budget.as_ref());
        let Some(e) = &self.episodes else {
            if budget.is_some() {
                return fail(
                    "policy.residual.budget",
                    "the budget is judged per episode: the config needs [episodes]",
                );
            }
            return Ok(());
        };
        self.check_episode_poses(e)?;
        if !e.held_out.is_empty() && e.held_out.len() != e.starts_rad.len() {
            return fail(
                "episodes.held_out",
                format!(
                    "expected one flag per start pose ({}), got {}",
                    e.starts_rad.len(),
                    e.held_out.len()
                ),
            );
        }
        if e.count == Some(0) {
            return fail("episodes.count", "expected at least 1 episode");
        }
        range("episodes.time_limit_s", e.time_limit_s, 0.1, 3600.0)?;
        range("episodes.reset_limit_s", e.reset_limit_s, 0.1, 3600.0)?;
        range("episodes.tolerance_rad", e.tolerance_rad, 1e-4, 1.0)?;
        if let Some(t) = e.reset_tolerance_rad {
            range("episodes.reset_tolerance_rad", t, 1e-4, 1.0)?;
        }
        range("episodes.settle_vel_rad_s", e.settle_vel_rad_s, 1e-4, 10.0)?;
        range("episodes.settle_ms", e.settle_ms, 0.0, 60_000.0)?;
        range("episodes.reset_vel_rad_s", e.reset_vel_rad_s, 0.01, 10.0)?;
        match budget {
            Some(b) => Self::check_residual_budget(b),
            None => Ok(()),
        }
    }

    /// `episodes.starts_rad` and `goals_rad`: 1 to `MAX_POSES` poses of the arm's
    /// joints, each strictly inside the position limits.
    fn check_episode_poses(&self, e: &EpisodesConfig) -> Check {
        let n = self.control.joints;
        let max = chunkrt_core::episodes::MAX_POSES;
        for (key, poses) in [
            ("episodes.starts_rad", &e.starts_rad),
            ("episodes.goals_rad", &e.goals_rad),
        ] {
            if poses.is_empty() || poses.len() > max {
                return fail(
                    key,
                    format!("expected 1 to {max} poses, got {}", poses.len()),
                );
            }
            for (i, p) in poses.iter().enumerate() {
                if p.len() != n {
                    return fail(
                        key,
                        format!("pose {i}: expected {n} joint positions, got {}", p.len()),
                    );
                }
                for (j, q) in p.iter().enumerate() {
                    let (lo, hi) = (
                        self.limits.pos_min_rad.get(j),
                        self.limits.pos_max_rad.get(j),
                    );
                    if !(q.is_finite() && *q > lo && *q < hi) {
                        return fail(key, format!("pose {i} joint {j}: {q} is outside the position limits [{lo}, {hi}]"));
                    }
                }
            }
        }
        Ok(())
    }

    /// `[policy.residual.budget]`: at least one figure, a window of 1 to 64 episodes.
    fn check_residual_budget(b: &BudgetConfig) -> Check {
        if b.max_gate_interventions.is_none()
            && b.max_operator_stops.is_none()
            && b.max_tracking_error_p99_rad.is_none()
        {
            return fail("policy.residual.budget", "sets no figure: expected max_gate_interventions, max_operator_stops or max_tracking_error_p99_rad");
        }
        if !(1..=64).contains(&b.window_episodes) {
            return fail(
                "policy.residual.budget.window_episodes",
                format!("expected 1 to 64 episodes, got {}", b.window_episodes),
            );
        }
        if let Some(t) = b.max_tracking_error_p99_rad {
            range(
                "policy.residual.budget.max_tracking_error_p99_rad",
                t,
                0.0,
                10.0,
            )?;
        }
        Ok(())
    }
}
