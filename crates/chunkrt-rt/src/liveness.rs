//! What a service manager may be told of a run, read off the real-time threads: the
//! run's phase (loading, bringing up, running, stopping, ended), the control thread's
//! heartbeat (one beat per control cycle, a relaxed atomic add: no allocation, no
//! lock) and the telemetry thread's status line. Process-global, as the signal
//! counters are (one run per process in the binary); the CLI's notifier thread
//! (`chunkrt-cli` `service.rs`) turns them into systemd's `READY=1`, `STATUS=`,
//! `WATCHDOG=1` and `STOPPING=1`, so a loop that stops cycling stops the watchdog's
//! pings while a non-real-time thread does the talking.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;

/// Where a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Phase {
    /// Config and policy being loaded; nothing brought up.
    Loading = 0,
    /// The control thread brings the backend up and enables the drives.
    BringingUp = 1,
    /// Drives enabled and the loop cycling: the policy may take authority.
    Running = 2,
    /// The stop has begun (a stop request, the duration over, a failure).
    Stopping = 3,
    /// The loop has ended and the backend is shut down (or never came up).
    Ended = 4,
}

static PHASE: AtomicU8 = AtomicU8::new(Phase::Loading as u8);
static BEATS: AtomicU64 = AtomicU64::new(0);
static WANTED: AtomicBool = AtomicBool::new(false);
static STATUS: Mutex<String> = Mutex::new(String::new());

/// Asks the telemetry thread to keep [`status`] current (a service manager listens).
pub fn want_status() {
    WANTED.store(true, Ordering::Relaxed);
}

/// Whether [`want_status`] was called.
pub fn status_wanted() -> bool {
    WANTED.load(Ordering::Relaxed)
}

/// Moves the run to `phase`; never back (a late `Running` after a stop stays
/// `Stopping`).
pub fn enter(phase: Phase) {
    PHASE.fetch_max(phase as u8, Ordering::AcqRel);
}

/// Starts a new run's phases (one process running runs one after the other).
pub fn reset() {
    PHASE.store(Phase::Loading as u8, Ordering::Release);
}

/// The run's phase.
pub fn phase() -> Phase {
    match PHASE.load(Ordering::Acquire) {
        0 => Phase::Loading,
        1 => Phase::BringingUp,
        2 => Phase::Running,
        3 => Phase::Stopping,
        _ => Phase::Ended,
    }
}

/// One control cycle done (the control thread, every step).
#[inline]
pub fn beat() {
    BEATS.fetch_add(1, Ordering::Relaxed);
}

/// The control cycles done so far in this process.
pub fn beats() -> u64 {
    BEATS.load(Ordering::Relaxed)
}

/// The telemetry thread's newest status line.
pub fn set_status(line: String) {
    if let Ok(mut s) = STATUS.lock() {
        *s = line;
    }
}

/// The newest status line (empty before the first).
pub fn status() -> String {
    STATUS.lock().map(|s| s.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_only_move_forward() {
        reset();
        enter(Phase::BringingUp);
        enter(Phase::Stopping);
        enter(Phase::Running);
        assert_eq!(phase(), Phase::Stopping);
        enter(Phase::Ended);
        assert_eq!(phase(), Phase::Ended);
        reset();
        assert_eq!(phase(), Phase::Loading);
    }
}
