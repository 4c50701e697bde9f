//! SIGINT / SIGTERM / SIGHUP -> stop requests that escalate, SIGUSR1 -> a re-arm request;
//! the loops poll them (lock-free, no allocation).
//!
//! Repeated stop requests make the stop firmer, never abandon it:
//! - while the process is still loading (config, policy, before `loaded`), nothing is
//!   powered: a stop request ends the process at once (exit status 130, a line on
//!   stderr), so a slow load never ignores Ctrl-C;
//! - the first request starts the controlled stop (the policy loses authority, the
//!   gate brakes the arm to rest);
//! - a second one switches to the drives' own quick stop, waits a bounded time
//!   (`control.quick_stop_timeout_ms`) for standstill, disables the drives and the run
//!   ends with its own exit status (8);
//! - a third one ends the wait at once: the drives are disabled (the backend's shutdown
//!   still runs) and the process exits.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

static STOPS: AtomicU32 = AtomicU32::new(0);
static STOP: AtomicBool = AtomicBool::new(false);
static LOADING: AtomicBool = AtomicBool::new(false);
static REARM: AtomicBool = AtomicBool::new(false);

/// What a stop request during loading writes before the process ends.
const LOADING_MESSAGE: &[u8] =
    b"chunkrt: stopped while loading (a signal before anything was brought up); nothing was moved\n";

/// The exit status of a process stopped while loading (128 + SIGINT, the shell's
/// convention; SIGTERM and SIGHUP end it the same way).
pub const EXIT_STOPPED_WHILE_LOADING: i32 = 130;

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only atomics, write(2) and _exit(2): async-signal-safe.
    STOPS.fetch_add(1, Ordering::SeqCst);
    STOP.store(true, Ordering::SeqCst);
    if LOADING.load(Ordering::SeqCst) {
        // SAFETY: write and _exit are async-signal-safe; the buffer is static.
        unsafe {
            libc::write(2, LOADING_MESSAGE.as_ptr().cast(), LOADING_MESSAGE.len());
            libc::_exit(EXIT_STOPPED_WHILE_LOADING);
        }
    }
}

extern "C" fn on_rearm(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    REARM.store(true, Ordering::SeqCst);
}

/// A signal handler the OS refused to install.
#[derive(Debug, thiserror::Error)]
#[error("cannot install the handler for signal {signal}: {source}")]
pub struct SignalError {
    /// The signal's number.
    pub signal: libc::c_int,
    /// `sigaction`'s error.
    pub source: std::io::Error,
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP (what a dropped SSH session
/// sends) that count stop requests (the handlers stay installed: a repeated signal
/// escalates the stop instead of killing the process mid-motion) and for SIGUSR1 that
/// requests an operator re-arm (`ControlLoop::rearm`). Until [`loaded`] is called a stop
/// request ends the process at once: nothing has been brought up yet.
pub fn install() -> Result<(), SignalError> {
    LOADING.store(true, Ordering::SeqCst);
    install_handler(libc::SIGUSR1, on_rearm, libc::SA_RESTART)?;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        install_handler(sig, on_signal, libc::SA_RESTART)?;
    }
    Ok(())
}

/// Loading is over: from now on a stop request starts the controlled stop instead of
/// ending the process. A request that came in meanwhile is kept.
pub fn loaded() {
    LOADING.store(false, Ordering::SeqCst);
}

fn install_handler(
    sig: libc::c_int,
    handler: extern "C" fn(libc::c_int),
    flags: libc::c_int,
) -> Result<(), SignalError> {
    // SAFETY: a zeroed sigaction is a valid starting point; the handlers only perform
    // atomic operations, write(2) and _exit(2), which are async-signal-safe.
    let rc = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = flags;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(SignalError {
            signal: sig,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Asks the control loop for an operator re-arm, as SIGUSR1 does.
pub fn request_rearm() {
    REARM.store(true, Ordering::SeqCst);
}

/// Takes a pending re-arm request (SIGUSR1 or `request_rearm`).
///
/// Polled by the control thread every cycle: a plain load first, so the cache line is
/// only written when a request is pending.
pub fn take_rearm() -> bool {
    REARM.load(Ordering::Relaxed) && REARM.swap(false, Ordering::AcqRel)
}

/// Whether SIGINT, SIGTERM or SIGHUP arrived.
pub fn requested() -> bool {
    stop_requests() > 0
}

/// How many stop requests (SIGINT, SIGTERM, SIGHUP) arrived: 1 the controlled stop,
/// 2 the quick stop, 3 or more disable at once.
pub fn stop_requests() -> u32 {
    STOPS.load(Ordering::Relaxed)
}

/// The process-wide stop flag (for loops that take `&AtomicBool`).
pub fn flag() -> &'static AtomicBool {
    &STOP
}
