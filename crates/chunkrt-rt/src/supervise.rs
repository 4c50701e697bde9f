//! Panics of the runtime's threads, caught where they happen and turned into the stop a
//! fault gets.
//!
//! Every runtime thread (control with its backend, inference, camera, telemetry) runs
//! its work under [`std::panic::catch_unwind`]. A caught panic is recorded here (the
//! thread and the panic's message) and raises [`Failures::flag`], which the control
//! thread polls every cycle as a stop request; a panic on the control thread itself is
//! followed there by the drives' quick stop (`Schedule::begin_stop` with
//! `quick_stop`), then the backend's shutdown (quick stop, disable, INIT). Every
//! thread is then joined and the report names each panic (`thread_panics`); `chunkrt`
//! exits with status 7.
//!
//! Recording a panic takes a lock and allocates; it happens only after a panic, when the
//! control thread's real-time path has already been left.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// One caught panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadPanic {
    /// The thread's name (`chunkrt-control`, `chunkrt-infer`, ...).
    pub thread: String,
    /// The panic's message.
    pub message: String,
}

impl std::fmt::Display for ThreadPanic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "thread {} panicked: {}", self.thread, self.message)
    }
}

/// The panics caught in one run, shared by its threads.
#[derive(Debug, Default)]
pub struct Failures {
    /// Raised by the first panic: the control thread stops the run.
    pub flag: AtomicBool,
    list: Mutex<Vec<ThreadPanic>>,
}

impl Failures {
    /// Records a panic of `thread` and raises the flag.
    pub fn record(&self, thread: &str, payload: &(dyn Any + Send)) {
        let p = ThreadPanic {
            thread: thread.to_string(),
            message: message(payload),
        };
        // A poisoned lock still holds the list: a panic while recording one is not a
        // reason to lose it.
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        list.push(p);
        drop(list);
        self.flag.store(true, Ordering::Release);
    }

    /// Whether any thread panicked.
    pub fn any(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// The panics recorded so far.
    pub fn panics(&self) -> Vec<ThreadPanic> {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A panic payload's message (`&str` and `String` payloads, as `panic!` makes them).
pub fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a payload that is not a message".into()
    }
}

/// Runs `f`; a panic is recorded in `failures` as `thread`'s and `None` returned.
pub fn guarded<T>(failures: &Failures, thread: &str, f: impl FnOnce() -> T) -> Option<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(p) => {
            failures.record(thread, &*p);
            None
        }
    }
}

/// `inject.panic`: a panic raised once in one thread, `after_ns` after that thread
/// first asks (its start). Polled with [`PanicPoint::check`]: a comparison, no
/// allocation until it fires.
#[derive(Clone, Copy, Debug)]
pub struct PanicPoint {
    after_ns: u64,
    origin: Option<chunkrt_core::MonoTime>,
    fired: bool,
    what: &'static str,
}

impl PanicPoint {
    /// The point of `cfg` for `thread`, if `cfg` injects a panic there.
    pub fn for_thread(
        cfg: &chunkrt_config::InjectConfig,
        thread: chunkrt_config::PanicThread,
    ) -> Option<Self> {
        cfg.panic
            .filter(|p| p.thread == thread)
            .map(|p| PanicPoint {
                after_ns: chunkrt_core::ms_to_ns(p.after_ms),
                origin: None,
                fired: false,
                what: match thread {
                    chunkrt_config::PanicThread::Control => "injected panic in the control cycle",
                    chunkrt_config::PanicThread::Backend => {
                        "injected panic in the backend's exchange"
                    }
                    chunkrt_config::PanicThread::Inference => {
                        "injected panic in the inference thread"
                    }
                    chunkrt_config::PanicThread::Camera => "injected panic in the camera thread",
                    chunkrt_config::PanicThread::Telemetry => {
                        "injected panic in the telemetry thread"
                    }
                },
            })
    }

    /// Panics (once) when the time has come.
    pub fn check(&mut self, now: chunkrt_core::MonoTime) {
        let origin = *self.origin.get_or_insert(now);
        if !self.fired && now.saturating_since(origin) >= self.after_ns {
            self.fired = true;
            panic!("{} (inject.panic)", self.what);
        }
    }
}

/// [`PanicPoint::check`] on an optional point.
pub fn check_panic(point: &mut Option<PanicPoint>, now: chunkrt_core::MonoTime) {
    if let Some(p) = point.as_mut() {
        p.check(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_is_recorded_with_its_thread_and_message() {
        let f = Failures::default();
        assert!(!f.any());
        let r: Option<()> = guarded(&f, "chunkrt-x", || panic!("boom {}", 7));
        assert!(r.is_none());
        assert!(f.any());
        assert_eq!(
            f.panics(),
            vec![ThreadPanic {
                thread: "chunkrt-x".into(),
                message: "boom 7".into()
            }]
        );
        assert_eq!(guarded(&f, "chunkrt-y", || 3), Some(3));
        assert_eq!(f.panics().len(), 1);
    }

    #[test]
    fn a_panic_point_fires_once_after_its_time() {
        let cfg = chunkrt_config::InjectConfig {
            panic: Some(chunkrt_config::PanicInjection {
                thread: chunkrt_config::PanicThread::Telemetry,
                after_ms: 10.0,
            }),
            ..Default::default()
        };
        assert!(PanicPoint::for_thread(&cfg, chunkrt_config::PanicThread::Control).is_none());
        let mut p = PanicPoint::for_thread(&cfg, chunkrt_config::PanicThread::Telemetry);
        let t0 = chunkrt_core::MonoTime(1_000_000_000);
        check_panic(&mut p, t0);
        check_panic(&mut p, t0.add_ns(9_999_999));
        let f = Failures::default();
        guarded(&f, "t", || check_panic(&mut p, t0.add_ns(10_000_000)));
        assert_eq!(
            f.panics()[0].message,
            "injected panic in the telemetry thread (inject.panic)"
        );
        // Once only: the stop that follows must not panic again.
        check_panic(&mut p, t0.add_ns(20_000_000));
    }
}
