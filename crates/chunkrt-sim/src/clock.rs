//! The clock of a plant integrated in whole steps over the real time between
//! exchanges: the simulated arm's sub-steps, the MuJoCo arm's physics steps.

use chunkrt_core::MonoTime;

/// Longest gap between two calls that is integrated in full. A longer gap (a stopped
/// or suspended process) is integrated as this long, so one call can never spend
/// unbounded time catching up; the clock then jumps to `now`.
pub const MAX_CATCH_UP_NS: u64 = 10_000_000_000;

/// A plant's clock: a whole number of steps after the time it was set; it lags `now`
/// by less than one step (the remainder is carried into the next call).
#[derive(Clone, Copy, Debug)]
pub struct StepClock {
    t: MonoTime,
    set: bool,
    step_ns: u64,
}

impl StepClock {
    /// A clock of steps of `step_ns` (> 0), not set yet.
    pub fn new(step_ns: u64) -> StepClock {
        StepClock {
            t: MonoTime::ZERO,
            set: false,
            step_ns: step_ns.max(1),
        }
    }

    /// The time it has reached.
    pub fn time(&self) -> MonoTime {
        self.t
    }

    /// Its step.
    pub fn step_ns(&self) -> u64 {
        self.step_ns
    }

    /// Sets it to `now` without stepping.
    pub fn set(&mut self, now: MonoTime) {
        self.t = now;
        self.set = true;
    }

    /// The steps from the clock up to `now`, taken: returns the time the first starts
    /// at (ns) and how many, and moves the clock past them. The first call on a clock
    /// not set sets it to `now` and takes none; times before the clock take none; of a
    /// gap over [`MAX_CATCH_UP_NS`] only that much is stepped, the rest skipped.
    pub fn advance(&mut self, now: MonoTime) -> (u64, u64) {
        if !self.set {
            self.set(now);
            return (now.as_ns(), 0);
        }
        let gap_ns = now.saturating_since(self.t);
        let steps = gap_ns.min(MAX_CATCH_UP_NS) / self.step_ns;
        if gap_ns > MAX_CATCH_UP_NS {
            // Skip the part of the gap that is not integrated.
            let skipped = gap_ns - steps * self.step_ns - gap_ns % self.step_ns;
            self.t = self.t.add_ns(skipped);
        }
        let t0 = self.t.as_ns();
        self.t = self.t.add_ns(steps * self.step_ns);
        (t0, steps)
    }

    /// Puts the step grid in phase with `now` (the clock moves on by less than a step,
    /// without stepping), so that `now` ends a whole step.
    pub fn align(&mut self, now: MonoTime) {
        let rem = now.saturating_since(self.t) % self.step_ns;
        self.t = self.t.add_ns(rem);
    }
}
