//! `[control]`, `[inference]` and `[wear]`: the joints, the bus period, the stop's
//! timeout and the loop's priority; the chunk period and offset; the wear ledger.

use super::{fail, range, Check, MAX_PERIOD_MS, MIN_PERIOD_MS};
use crate::schema::Config;
use chunkrt_core::MAX_DOF;

impl Config {
    /// `[control]` and `[inference]` (with `[wear]` between them).
    pub(super) fn validate_control(&self) -> Check {
        let n = self.control.joints;
        if n == 0 || n > MAX_DOF {
            return fail(
                "control.joints",
                format!("expected 1 to {MAX_DOF} joints, got {n}"),
            );
        }
        // The documented bus period range: below 1 ms the loop cannot keep its
        // deadlines on the hosts chunkrt targets (0.05 ms ran at 20 kHz with
        // thousands of overruns and exit 0).
        let period_ms = self.control.period_ms;
        if !(period_ms.is_finite() && (MIN_PERIOD_MS..=MAX_PERIOD_MS).contains(&period_ms)) {
            return fail(
                "control.period_ms",
                format!(
                    "expected a bus period of {MIN_PERIOD_MS} to {MAX_PERIOD_MS} ms, got {period_ms}"
                ),
            );
        }
        self.check_wear()?;
        let q = self.control.quick_stop_timeout_ms;
        if !(q.is_finite() && (10.0..=10_000.0).contains(&q)) {
            return fail(
                "control.quick_stop_timeout_ms",
                format!("expected 10 to 10000 ms, got {q}"),
            );
        }
        if !(1..=99).contains(&self.control.priority) {
            return fail(
                "control.priority",
                format!(
                    "expected a SCHED_FIFO priority 1-99, got {}",
                    self.control.priority
                ),
            );
        }
        range(
            "inference.chunk_period_ms",
            self.inference.chunk_period_ms,
            1.0,
            10_000.0,
        )?;
        range(
            "inference.start_offset_ms",
            self.inference.start_offset_ms,
            -1000.0,
            1000.0,
        )?;
        Ok(())
    }

    /// `[wear]`: a ledger path, and a hardware id a ledger line can carry.
    fn check_wear(&self) -> Check {
        let Some(w) = &self.wear else {
            return Ok(());
        };
        if w.ledger.as_os_str().is_empty() {
            return fail("wear.ledger", "expected the ledger file's path, got \"\"");
        }
        if let Some(id) = &w.hardware_id {
            if id.trim().is_empty() || id.chars().any(char::is_control) {
                return fail(
                    "wear.hardware_id",
                    format!("expected a non-empty id without control characters, got {id:?}"),
                );
            }
        }
        Ok(())
    }
}
