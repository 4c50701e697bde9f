//! The frame-loss policy: which lost frames are ridden through and which are reported to
//! the control loop (and so take the policy's authority away).
//!
//! A drive in CSP holds its last target when a frame does not reach it, and gives up on
//! its own only when its SM watchdog expires (typically 100 ms). An isolated lost frame
//! therefore costs nothing but one cycle of stale feedback, while reporting it costs the
//! policy at least a chunk period of fallback. So a lost frame is ridden through unless it
//! is the `max_consecutive + 1`-th in a row, or the answered share of the last `window`
//! frames has fallen below `min_success_rate` (a bus that keeps losing frames is reported
//! even when no run is long). A late frame (back after the late threshold, within the
//! timeout) is answered: its command reached the drives in time and its inputs are used,
//! so the backend counts it and records it here as answered. Fixed-size state: no
//! allocation per frame.

/// Most frames the success rate can be measured over.
pub const MAX_WINDOW: usize = 1024;

/// What to do with one frame's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The frame came back within the timeout.
    Answered,
    /// A lost frame that is counted and not reported.
    RideThrough,
    /// A lost frame that is reported.
    Report,
}

/// Counters the policy keeps (they go into the run report).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossCounts {
    /// Lost frames ridden through.
    pub ridden_through: u64,
    /// Lost frames reported.
    pub reported: u64,
    /// Longest run of lost frames in a row.
    pub longest_run: u32,
}

/// The policy's state.
#[derive(Clone, Debug)]
pub struct LossPolicy {
    max_consecutive: u32,
    /// Most failures the window may hold before failures are reported.
    max_failures: u32,
    window: usize,
    /// One bit per frame of the window (1: lost), a ring.
    bits: [u64; MAX_WINDOW / 64],
    next: usize,
    failures: u32,
    run: u32,
    counts: LossCounts,
}

impl LossPolicy {
    /// `window` in 1..=[`MAX_WINDOW`] frames and `min_success_rate` in 0..=1 (checked by
    /// the config).
    pub fn new(max_consecutive: u32, min_success_rate: f64, window: u32) -> LossPolicy {
        let window = (window as usize).clamp(1, MAX_WINDOW);
        assert!((0.0..=1.0).contains(&min_success_rate), "a share in 0..=1");
        // Failures allowed in a full window; rounding keeps 0.9 of 100 at exactly 10.
        let max_failures = ((1.0 - min_success_rate) * window as f64 + 1e-9).floor() as u32;
        LossPolicy {
            max_consecutive,
            max_failures,
            window,
            bits: [0; MAX_WINDOW / 64],
            next: 0,
            failures: 0,
            run: 0,
            counts: LossCounts::default(),
        }
    }

    /// Records one frame (`answered`: back within the frame timeout) and says what to do.
    pub fn record(&mut self, answered: bool) -> Verdict {
        let (w, b) = (self.next / 64, 1u64 << (self.next % 64));
        if self.bits[w] & b != 0 {
            self.failures -= 1;
        }
        if answered {
            self.bits[w] &= !b;
        } else {
            self.bits[w] |= b;
            self.failures += 1;
        }
        self.next = (self.next + 1) % self.window;
        if answered {
            self.run = 0;
            return Verdict::Answered;
        }
        self.run += 1;
        self.counts.longest_run = self.counts.longest_run.max(self.run);
        if self.run > self.max_consecutive || self.failures > self.max_failures {
            self.counts.reported += 1;
            Verdict::Report
        } else {
            self.counts.ridden_through += 1;
            Verdict::RideThrough
        }
    }

    /// The counters so far.
    pub fn counts(&self) -> LossCounts {
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isolated_losses_are_ridden_through_and_a_long_run_is_reported() {
        let mut p = LossPolicy::new(3, 0.5, 100);
        for k in 0..1000 {
            let v = p.record(k % 10 != 0);
            assert_ne!(v, Verdict::Report, "frame {k}");
        }
        let verdicts: Vec<_> = (0..5).map(|_| p.record(false)).collect();
        assert_eq!(
            verdicts,
            [
                Verdict::RideThrough,
                Verdict::RideThrough,
                Verdict::RideThrough,
                Verdict::Report,
                Verdict::Report
            ]
        );
        assert_eq!(p.record(true), Verdict::Answered);
        assert_eq!(p.record(false), Verdict::RideThrough, "the run starts over");
        let c = p.counts();
        assert_eq!((c.ridden_through, c.reported, c.longest_run), (104, 2, 5));
    }

    #[test]
    fn a_window_below_the_success_rate_reports_every_failure_until_it_recovers() {
        // 90 % over 20 frames: at most 2 failures in the window.
        let mut p = LossPolicy::new(100, 0.9, 20);
        assert_eq!(p.record(false), Verdict::RideThrough);
        assert_eq!(p.record(true), Verdict::Answered);
        assert_eq!(p.record(false), Verdict::RideThrough);
        assert_eq!(p.record(true), Verdict::Answered);
        assert_eq!(p.record(false), Verdict::Report, "3 failures in 20 frames");
        // The failures leave the window after 20 frames: the next one is ridden through.
        for _ in 0..20 {
            assert_eq!(p.record(true), Verdict::Answered);
        }
        assert_eq!(p.record(false), Verdict::RideThrough);
    }

    #[test]
    fn zero_tolerance_reports_every_failure() {
        let mut p = LossPolicy::new(0, 1.0, 100);
        assert_eq!(p.record(true), Verdict::Answered);
        assert_eq!(p.record(false), Verdict::Report);
        assert_eq!(p.counts().ridden_through, 0);
    }
}
