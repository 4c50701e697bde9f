//! The cross-field pass: `[inject]` against the sections it disturbs, the probe
//! against the gate's limits, and settings each in range that together would leave
//! no chunk able to play.

use super::{fail, min_chunk_age_ms, ticks_ms, Check};
use crate::schema::{Config, PolicyKind};

impl Config {
    /// `[inject]`: its own ranges, a feedback bias per joint, a camera disturbance only
    /// with a camera (whose section is checked here).
    pub(super) fn validate_inject(&self) -> Check {
        self.inject.validate(self.control.period_ms)?;
        if let Some(b) = &self.inject.feedback_bias_rad {
            b.check(
                "inject.feedback_bias_rad",
                self.control.joints,
                |v| v.abs() <= 0.5,
                "an offset within +-0.5 rad",
            )?;
        }
        if let Some(c) = &self.camera {
            c.validate()?;
        } else if self.inject.camera_is_disturbed() {
            return fail(
                "inject.camera_delay",
                "camera delay or stall injected, but the config has no [camera]",
            );
        }
        Ok(())
    }

    /// The probe of `[inject.probe]` against the arm and the gate's limits: a probe
    /// whose own speed, acceleration or jerk would take more than a quarter of the
    /// probed joint's limit is refused before anything moves (the gate would clamp
    /// it, and a clamped probe measures the gate, not the loop).
    pub(crate) fn validate_probe(&self) -> Check {
        let Some(p) = &self.inject.probe else {
            return Ok(());
        };
        p.validate(self.control.period_ms, self.control.joints)?;
        let [_, v, a, jk] = p.peaks();
        let l = &self.limits;
        let j = p.joint;
        let share = crate::inject::PROBE_LIMIT_SHARE;
        for (what, peak, limit, key) in [
            ("speed", v, l.max_vel_rad_s.get(j), "max_vel_rad_s"),
            ("acceleration", a, l.max_acc_rad_s2.get(j), "max_acc_rad_s2"),
            ("jerk", jk, l.max_jerk_rad_s3.get(j), "max_jerk_rad_s3"),
        ] {
            if peak > share * limit {
                return fail(
                    "inject.probe.amplitude_rad",
                    format!(
                        "the probe's peak {what} {peak:.4} (sum over its {} components of \
                         amplitude x (2 pi f)^k) is more than {}% of joint {j}'s \
                         limits.{key} ({limit}): lower the amplitude or the frequencies",
                        p.freqs_hz.len(),
                        share * 100.0
                    ),
                );
            }
        }
        Ok(())
    }

    /// Cross-field checks: settings each in range that together leave no chunk
    /// able to play (every one expired, rejected or run out before its successor).
    pub(super) fn validate_playable(&self) -> Check {
        let e = &self.executor;
        let p = &self.policy;
        let chunk_period = self.inference.chunk_period_ms;
        let min_age = min_chunk_age_ms(self.control.period_ms, chunk_period, p.deadline_ms);
        if e.max_chunk_age_ms < min_age {
            let period = self.control.period_ms;
            let inference = if p.deadline_ms > 0.0 {
                format!("policy.deadline_ms {}", p.deadline_ms)
            } else {
                "one tick of inference (no policy.deadline_ms)".to_string()
            };
            return fail(
                "executor.max_chunk_age_ms",
                format!(
                    "{} ms expires chunks before their successors play; set it to {min_age} \
                     or more: inference.chunk_period_ms {chunk_period} and {inference}, each \
                     rounded up to control.period_ms {period} ticks ({} + {})",
                    e.max_chunk_age_ms,
                    ticks_ms(period, chunk_period),
                    min_age - ticks_ms(period, chunk_period),
                ),
            );
        }
        let offset = self.inference.start_offset_ms;
        if offset.abs() > e.max_time_offset_ms {
            return fail(
                "inference.start_offset_ms",
                format!(
                    "{offset} ms puts every chunk's start further from now than \
                     executor.max_time_offset_ms {}: every chunk would be rejected",
                    e.max_time_offset_ms
                ),
            );
        }
        if matches!(p.kind, PolicyKind::Scripted | PolicyKind::Servo) {
            // ONNX models take horizon and dt from their manifest, checked at bring-up.
            if p.dt_ms < e.dt_min_ms || p.dt_ms > e.dt_max_ms {
                return fail(
                    "policy.dt_ms",
                    format!(
                        "{} ms is outside the executor's accepted chunk dt \
                         [executor.dt_min_ms {}, executor.dt_max_ms {}]: every chunk would be rejected",
                        p.dt_ms, e.dt_min_ms, e.dt_max_ms
                    ),
                );
            }
            if p.horizon < e.min_len {
                return fail(
                    "policy.horizon",
                    format!(
                        "{} setpoints is below executor.min_len {}: every chunk would be rejected",
                        p.horizon, e.min_len
                    ),
                );
            }
            let span = (p.horizon - 1) as f64 * p.dt_ms;
            if span <= chunk_period + e.lookahead_ms {
                return fail(
                    "policy.horizon",
                    format!(
                        "a chunk of {} setpoints {} ms apart spans {span} ms, which runs out \
                         before the next one (inference.chunk_period_ms {chunk_period} + \
                         executor.lookahead_ms {}): expected a span above {} ms",
                        p.horizon,
                        p.dt_ms,
                        e.lookahead_ms,
                        chunk_period + e.lookahead_ms
                    ),
                );
            }
        }
        Ok(())
    }
}
