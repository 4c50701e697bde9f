//! SIGINT / SIGTERM -> a stop flag that the loops poll (lock-free, no allocation).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
}

/// Installs handlers for SIGINT and SIGTERM that set the stop flag; a second signal
/// restores the default action, so a user can still kill a wedged process.
pub fn install() -> Result<(), String> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid starting point; the handler only
        // performs an atomic store, which is async-signal-safe. SA_RESETHAND makes the
        // second signal take the default action.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(format!(
                "cannot install the handler for signal {sig}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived.
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The process-wide flag itself (for loops that take `&AtomicBool`).
pub fn flag() -> &'static AtomicBool {
    &STOP
}
