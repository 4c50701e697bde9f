//! One clock for the whole runtime: `CLOCK_MONOTONIC`, as nanoseconds.
//!
//! Pure code never reads the clock; it receives `now: MonoTime` as an argument.
//! Only `chunkrt-rt` (and backends that time their own I/O) read the clock.

/// A point on `CLOCK_MONOTONIC`, in nanoseconds since the clock's (boot) epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MonoTime(pub u64);

/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per second.
pub const NS_PER_S: u64 = 1_000_000_000;

impl MonoTime {
    /// The clock's epoch; also used as "never" for optional stamps.
    pub const ZERO: MonoTime = MonoTime(0);

    /// From nanoseconds.
    pub const fn from_ns(ns: u64) -> Self {
        MonoTime(ns)
    }

    /// From milliseconds (test convenience).
    pub const fn from_ms(ms: u64) -> Self {
        MonoTime(ms * NS_PER_MS)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_ns(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch, as f64.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }

    /// Signed difference `self - earlier` in nanoseconds (negative when `earlier` is
    /// later), saturating at the ends of `i64`: times from untrusted input (a chunk's
    /// `t_start`) can be anywhere in `u64`, and the difference must not overflow.
    pub const fn diff_ns(self, earlier: MonoTime) -> i64 {
        let d = self.0 as i128 - earlier.0 as i128;
        if d > i64::MAX as i128 {
            i64::MAX
        } else if d < i64::MIN as i128 {
            i64::MIN
        } else {
            d as i64
        }
    }

    /// `self - earlier` in nanoseconds, 0 when `earlier` is later.
    pub const fn saturating_since(self, earlier: MonoTime) -> u64 {
        self.0.saturating_sub(earlier.0)
    }

    /// Shifted by a signed number of nanoseconds, clamped at the epoch.
    pub const fn add_signed_ns(self, ns: i64) -> MonoTime {
        if ns >= 0 {
            MonoTime(self.0.saturating_add(ns as u64))
        } else {
            MonoTime(self.0.saturating_sub(ns.unsigned_abs()))
        }
    }

    /// Shifted forward by `ns` nanoseconds.
    pub const fn add_ns(self, ns: u64) -> MonoTime {
        MonoTime(self.0.saturating_add(ns))
    }

    /// Whether this stamp is set (not the epoch).
    pub const fn is_set(self) -> bool {
        self.0 != 0
    }

    /// Whole periods of the grid `self + k * period_ns` that have passed at `t`
    /// (0 when `t` is not after `self`): how many deadlines a late loop skips.
    pub const fn periods_until(self, period_ns: u64, t: MonoTime) -> u64 {
        t.saturating_since(self) / if period_ns == 0 { 1 } else { period_ns }
    }

    /// The first instant of the grid `self + k * period_ns` (`k >= 0`) at or after
    /// `t`; `self` when `t` is not after it.
    pub const fn grid_at_or_after(self, period_ns: u64, t: MonoTime) -> MonoTime {
        let k = t
            .saturating_since(self)
            .div_ceil(if period_ns == 0 { 1 } else { period_ns });
        self.add_ns(k.saturating_mul(period_ns))
    }
}

/// Milliseconds (f64) to nanoseconds, rounded; negative and NaN values give 0.
pub fn ms_to_ns(ms: f64) -> u64 {
    if ms.is_finite() && ms > 0.0 {
        (ms * NS_PER_MS as f64).round() as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_of_far_apart_times_saturate() {
        assert_eq!(MonoTime(u64::MAX).diff_ns(MonoTime(0)), i64::MAX);
        assert_eq!(MonoTime(0).diff_ns(MonoTime(u64::MAX)), i64::MIN);
        assert_eq!(MonoTime(1 << 63).diff_ns(MonoTime(1_000)), i64::MAX - 999);
        assert_eq!(MonoTime(5).diff_ns(MonoTime(7)), -2);
    }

    #[test]
    fn differences_are_signed_and_saturating() {
        let a = MonoTime::from_ms(10);
        let b = MonoTime::from_ms(12);
        assert_eq!(b.diff_ns(a), 2_000_000);
        assert_eq!(a.diff_ns(b), -2_000_000);
        assert_eq!(a.saturating_since(b), 0);
        assert_eq!(a.add_signed_ns(-20_000_000), MonoTime::ZERO);
        assert_eq!(ms_to_ns(1.5), 1_500_000);
        assert_eq!(ms_to_ns(f64::NAN), 0);
    }

    #[test]
    fn grid_instants_at_or_after_a_time_and_periods_passed() {
        let origin = MonoTime::from_ms(1000);
        let p = 20_000_000;
        assert_eq!(origin.grid_at_or_after(p, origin), origin);
        let at = |ms| origin.grid_at_or_after(p, MonoTime::from_ms(ms));
        assert_eq!(at(1050), MonoTime::from_ms(1060));
        assert_eq!(at(1100), MonoTime::from_ms(1100));
        assert_eq!(
            origin.grid_at_or_after(p, MonoTime(1_100_000_001)),
            MonoTime::from_ms(1120)
        );
        // Before the origin: the origin.
        assert_eq!(at(5), origin);
        assert_eq!(origin.periods_until(p, MonoTime::from_ms(5)), 0);
        assert_eq!(origin.periods_until(p, MonoTime::from_ms(1019)), 0);
        assert_eq!(origin.periods_until(p, MonoTime::from_ms(1060)), 3);
        assert_eq!(origin.periods_until(0, MonoTime(origin.0 + 7)), 7);
    }
}
