//! The commands and the flags they set, which the control loop polls (lock-free, no
//! allocation): what a line means, whatever channel it came on.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

static HOLD: AtomicBool = AtomicBool::new(false);
/// A `stop` the control loop has not seen yet: it holds at least one cycle, even when a
/// `rearm` lifted `HOLD` before that cycle came.
static STOP_PENDING: AtomicBool = AtomicBool::new(false);
static MARKS: AtomicU32 = AtomicU32::new(0);
/// A run is in progress: commands act on it.
static RUN_ACTIVE: AtomicBool = AtomicBool::new(false);
/// An episode is running (published by the control thread every cycle).
static EPISODE_RUNNING: AtomicBool = AtomicBool::new(false);

/// The answer to a line longer than [`super::LINE_MAX`].
pub const TOO_LONG: &str = "error: a line longer than 1024 bytes: refused whole";
/// The answer to a peer that may not use the socket.
pub const NOT_PERMITTED: &str =
    "error: not permitted: only chunkrt's user, root and its [operator] group may command it";

/// Whether an operator's `stop` holds the policy off this cycle (the control thread
/// asks once a cycle): from the first cycle after the stop until `rearm`, and at least
/// that first cycle.
pub fn held() -> bool {
    let pending =
        STOP_PENDING.load(Ordering::Relaxed) && STOP_PENDING.swap(false, Ordering::AcqRel);
    HOLD.load(Ordering::Relaxed) || pending
}

/// Takes the `intervene` marks given since the last call.
pub fn take_marks() -> u32 {
    if MARKS.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    MARKS.swap(0, Ordering::AcqRel)
}

/// Says whether an episode is running now (the control thread, every cycle: one
/// relaxed store), so that `intervene` without one is refused rather than lost.
#[inline]
pub fn publish_episode(running: bool) {
    EPISODE_RUNNING.store(running, Ordering::Relaxed);
}

/// Carries out one command line; the answer.
pub fn command(line: &str) -> &'static str {
    let word = line.trim();
    if !matches!(word, "stop" | "s" | "intervene" | "i" | "rearm" | "r") {
        return "error: unknown command (stop, intervene, rearm; or s, i, r)";
    }
    if !RUN_ACTIVE.load(Ordering::SeqCst) {
        return "error: no run in progress: nothing was done";
    }
    match word {
        "stop" | "s" => {
            HOLD.store(true, Ordering::SeqCst);
            STOP_PENDING.store(true, Ordering::SeqCst);
            "ok: the policy holds off until rearm"
        }
        "intervene" | "i" => {
            // A mark given as the episode ends is dropped by the control thread, never
            // recorded without its episode.
            if !EPISODE_RUNNING.load(Ordering::SeqCst) {
                return "error: no episode is running: nothing was marked";
            }
            MARKS.fetch_add(1, Ordering::SeqCst);
            "ok: the running episode is marked intervened"
        }
        _ => {
            HOLD.store(false, Ordering::SeqCst);
            crate::signals::request_rearm();
            "ok: re-armed"
        }
    }
}

/// A run begins: no hold, no mark, no episode from an earlier run; commands act on it.
pub(super) fn begin_run() {
    HOLD.store(false, Ordering::SeqCst);
    STOP_PENDING.store(false, Ordering::SeqCst);
    MARKS.store(0, Ordering::SeqCst);
    EPISODE_RUNNING.store(false, Ordering::SeqCst);
    RUN_ACTIVE.store(true, Ordering::SeqCst);
}

/// The run has ended: commands are refused until the next.
pub(super) fn end_run() {
    RUN_ACTIVE.store(false, Ordering::SeqCst);
    EPISODE_RUNNING.store(false, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `rearm` right after a `stop`, before the control loop's next cycle, does not
    /// cancel the stop: that cycle is held.
    #[test]
    fn a_stop_holds_its_first_cycle_even_when_a_rearm_follows_within_it() {
        RUN_ACTIVE.store(true, Ordering::SeqCst);
        assert!(!held());
        assert!(command("stop").starts_with("ok"));
        assert!(command("rearm").starts_with("ok"));
        assert!(held(), "the stop's first cycle");
        assert!(!held(), "lifted by the rearm");
        assert!(command("s").starts_with("ok"));
        assert!(held() && held(), "held until rearm");
        RUN_ACTIVE.store(false, Ordering::SeqCst);
        assert!(command("r").starts_with("error: no run in progress"));
        assert!(held(), "a command between runs does nothing");
    }
}
