//! Range and consistency checks, and conversion into the core's typed settings.
//!
//! One validator per section, each in its own file (`control`, `policy`, `limits`,
//! `cartesian`, `residual`, `episodes`, `services`, `backend`, `force`, `camera`), run in
//! the order below; then the cross-field pass (`cross`): settings each in range that together leave no
//! chunk able to play, a probe the gate would clamp, a disturbance of a camera the
//! config does not have. `derived` turns the checked sections into the core's types.
//! Every check returns `(key path, message)` of the first thing wrong.

mod backend;
mod camera;
mod cartesian;
mod control;
mod cross;
mod derived;
mod episodes;
mod force;
mod limits;
mod policy;
mod residual;
mod services;

use crate::schema::Config;

pub(crate) type Check = Result<(), (String, String)>;

/// Lowest cutoff of the action filter (`limits.action_filter_hz`): a time constant of
/// 1.6 s, longer than any chunk's horizon; below it the filter holds the arm back for
/// seconds (at `5e-324` its coefficient is 0 and the arm never moved).
pub const MIN_ACTION_FILTER_HZ: f64 = 0.1;
/// Smallest continuous torque rating (`limits.thermal.continuous_torque_nm`): no drive
/// is rated below a milli-newton-metre, and the load is the measured torque squared
/// over the rating squared.
pub const MIN_RATED_TORQUE_NM: f64 = 1e-3;

/// Shortest bus period (`control.period_ms`) a run accepts.
pub const MIN_PERIOD_MS: f64 = 1.0;
/// Longest bus period a run accepts.
pub const MAX_PERIOD_MS: f64 = 20.0;

/// `ms` rounded up to whole control periods of `period_ms` (`ms` itself for a
/// non-positive period).
pub fn ticks_ms(period_ms: f64, ms: f64) -> f64 {
    if period_ms > 0.0 && ms.is_finite() {
        (ms / period_ms - 1e-9).ceil().max(0.0) * period_ms
    } else {
        ms
    }
}

/// The smallest sound `max_chunk_age_ms`: the inference thread observes on the first
/// control tick at or after each chunk period's slot (`next_slot`), so successive
/// chunks' observations lie up to `chunk_period_ms` rounded up to control periods
/// apart; the successor arrives `inference_ms` later (at least one control period is
/// assumed when none is known) and is spliced on the first control tick after that.
/// The playing chunk must not have expired until then.
pub fn min_chunk_age_ms(period_ms: f64, chunk_period_ms: f64, inference_ms: f64) -> f64 {
    ticks_ms(period_ms, chunk_period_ms) + ticks_ms(period_ms, inference_ms).max(period_ms.max(0.0))
}

pub(crate) fn fail(path: &str, message: impl Into<String>) -> Check {
    Err((path.to_string(), message.into()))
}

/// `digest` is a SHA-256 in hex, else the message says where it comes from (`hint`).
pub(crate) fn sha256_hex(path: &str, digest: &str, hint: &str) -> Check {
    if digest.len() == 64 && digest.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(())
    } else {
        fail(
            path,
            format!("{digest:?} is not a SHA-256 (64 hex digits); {hint}"),
        )
    }
}

pub(crate) fn range(path: &str, v: f64, lo: f64, hi: f64) -> Check {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        fail(path, format!("expected a value in [{lo}, {hi}], got {v}"))
    }
}

impl Config {
    /// Checks ranges and cross-field consistency; returns `(key path, message)` of the
    /// first failure, the sections in this order.
    pub(crate) fn validate(&self) -> Check {
        // Every number first, by one rule (`numbers`): finite, 0 or of a physical
        // magnitude, a duration not negative; then each key's own range.
        crate::numbers::check_all(self)?;
        let n = self.control.joints;
        self.validate_control()?;
        self.validate_policy(n)?;
        self.validate_executor()?;
        self.validate_limits(n)?;
        self.validate_cartesian()?;
        self.check_episodes()?;
        self.validate_services()?;
        self.validate_domain(n)?;
        self.validate_backend(n)?;
        self.validate_force()?;
        self.validate_telemetry()?;
        self.validate_inject()?;
        self.validate_probe()?;
        self.validate_playable()
    }
}
