//! SIGINT / SIGTERM / SIGHUP -> a stop flag, SIGUSR1 -> a re-arm request; the loops poll them
//! (lock-free, no allocation).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static REARM: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_rearm(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    REARM.store(true, Ordering::SeqCst);
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP (what a dropped SSH session
/// sends) that set the stop flag (a second signal restores the default action, so a
/// user can still kill a wedged process) and for
/// SIGUSR1 that requests an operator re-arm (`ControlLoop::rearm`).
pub fn install() -> Result<(), String> {
    install_handler(libc::SIGUSR1, on_rearm, libc::SA_RESTART)?;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        install_handler(sig, on_signal, libc::SA_RESETHAND)?;
    }
    Ok(())
}

fn install_handler(
    sig: libc::c_int,
    handler: extern "C" fn(libc::c_int),
    flags: libc::c_int,
) -> Result<(), String> {
    // SAFETY: a zeroed sigaction is a valid starting point; the handlers only perform
    // an atomic store, which is async-signal-safe.
    let rc = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = flags;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(format!(
            "cannot install the handler for signal {sig}: {}",
            std::io::Error::last_os_error()
        ));
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
    STOP.load(Ordering::Relaxed)
}

/// The process-wide flag itself (for loops that take `&AtomicBool`).
pub fn flag() -> &'static AtomicBool {
    &STOP
}
