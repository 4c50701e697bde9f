//! The control thread's loop around [`ControlLoop::cycle`]: sleep to the absolute
//! deadline, one cycle, the operator re-arm and the stop requests, the controlled stop
//! until the arm is held at rest, the next deadline (passed ones skipped and counted).
//!
//! The runtime drives [`Schedule::step`] on its SCHED_FIFO thread with `os::sleep_until`
//! and the loop's clock `os::now`; the allocation test drives the same `step` with a
//! clock and a sleep of its own, so the loop body it counts is the one that runs.

use crate::control::ControlLoop;
use crate::inference::ControlGrid;
use chunkrt_core::{Mode, ModeChangeReason, MonoTime};
use std::sync::atomic::{AtomicBool, Ordering};

/// How long the controlled stop may take before the backend is shut down anyway.
pub const STOP_TIMEOUT_NS: u64 = 3_000_000_000;

/// How long the quick stop (a second stop request, a panic) waits for the drives to
/// report standstill before they are disabled anyway (`control.quick_stop_timeout_ms`).
pub const QUICK_STOP_TIMEOUT_NS: u64 = 1_000_000_000;

/// What ends playback besides the duration, and whom to tell.
pub struct StopRequests<'a> {
    /// External stop request (`RunOptions::stop`); SIGINT, SIGTERM and SIGHUP are
    /// read from `crate::signals`.
    pub stop: &'a AtomicBool,
    /// Set by the inference thread when the policy panicked.
    pub policy_failed: &'a AtomicBool,
    /// Set here when the controlled stop begins: the inference thread stops.
    pub stop_inference: &'a AtomicBool,
    /// Raised when a runtime thread panicked (`supervise::Failures::flag`): the run
    /// ends with the quick stop.
    pub thread_failed: &'a AtomicBool,
}

/// The deadline grid and the stop sequence of the control thread.
pub struct Schedule {
    period_ns: u64,
    t0: MonoTime,
    end: Option<MonoTime>,
    deadline: MonoTime,
    missed: u32,
    stopping_since: Option<MonoTime>,
    /// When the stop became a quick stop (a second stop request, a panic).
    quick_since: Option<MonoTime>,
    quick_stop_timeout_ns: u64,
    sleep_until: fn(MonoTime),
    phase: PhaseLock,
}

/// With Distributed Clocks the drives act on SYNC0, which runs on the bus's reference
/// clock, not on this host's: the deadline grid is moved so that each cycle's frame
/// reaches the reference clock at SYNC0 + shift (`Feedback::sync_phase_ns`), by a PI
/// law (proportional 0.2, integral 0.02 per cycle; poles at |z| = 0.89, so the phase
/// settles within about 40 cycles and a constant drift of the clocks leaves no error),
/// at most a twentieth of a period per cycle so that the loop's own period stays close
/// to nominal while it locks.
#[derive(Clone, Copy, Debug)]
struct PhaseLock {
    integral_ns: f64,
    max_step_ns: f64,
}

impl PhaseLock {
    const KP: f64 = 0.2;
    const KI: f64 = 0.02;

    fn new(period_ns: u64) -> Self {
        PhaseLock {
            integral_ns: 0.0,
            max_step_ns: period_ns as f64 / 20.0,
        }
    }

    /// How much earlier the next deadline comes (negative: later) for a frame that
    /// was `err_ns` late.
    fn correction_ns(&mut self, err_ns: i32) -> i64 {
        let e = f64::from(err_ns);
        self.integral_ns =
            (self.integral_ns + Self::KI * e).clamp(-self.max_step_ns, self.max_step_ns);
        (Self::KP * e + self.integral_ns)
            .clamp(-self.max_step_ns, self.max_step_ns)
            .round() as i64
    }
}

impl Schedule {
    /// Starts the grid now (the loop's clock) and tells the inference thread its
    /// origin; the first deadline is one period later. Playback ends `duration_ns`
    /// after now (None: only on a stop request).
    pub fn start(
        control: &ControlLoop,
        grid: &ControlGrid,
        duration_ns: Option<u64>,
        sleep_until: fn(MonoTime),
    ) -> Self {
        let period_ns = control.period_ns();
        let t0 = control.now();
        grid.start(t0);
        Schedule {
            period_ns,
            t0,
            end: duration_ns.map(|d| t0.add_ns(d)),
            deadline: t0.add_ns(period_ns),
            missed: 0,
            stopping_since: None,
            quick_since: None,
            quick_stop_timeout_ns: QUICK_STOP_TIMEOUT_NS,
            sleep_until,
            phase: PhaseLock::new(period_ns),
        }
    }

    /// How long the quick stop waits for standstill (`control.quick_stop_timeout_ms`).
    pub fn with_quick_stop_timeout(mut self, ns: u64) -> Self {
        self.quick_stop_timeout_ns = ns;
        self
    }

    /// When the loop started.
    pub fn t0(&self) -> MonoTime {
        self.t0
    }

    /// Whether the stop has begun.
    pub fn stopping(&self) -> bool {
        self.stopping_since.is_some()
    }

    /// When the stop became a quick stop, if it did.
    pub fn quick_stop_since(&self) -> Option<MonoTime> {
        self.quick_since
    }

    /// Starts the stop now, if it has not begun: the policy loses authority for good
    /// and the inference thread is told to stop. With `quick`, the drives are also
    /// asked for their own quick stop and the stop waits at most the quick-stop
    /// timeout for standstill (a second stop request, a panic).
    pub fn begin_stop(
        &mut self,
        control: &mut ControlLoop,
        now: MonoTime,
        reason: ModeChangeReason,
        quick: bool,
        requests: &StopRequests,
    ) {
        if self.stopping_since.is_none() {
            control.stop_playing(now, reason);
            // Chunks are ignored from here on: the policy has nothing to do.
            requests.stop_inference.store(true, Ordering::Release);
            self.stopping_since = Some(now);
        }
        if quick && self.quick_since.is_none() {
            control.quick_stop();
            self.quick_since = Some(now);
        }
    }

    /// The run's time is up: its duration, or the last episode (`[episodes]`).
    fn expired(&self, control: &ControlLoop, now: MonoTime) -> bool {
        self.end.is_some_and(|e| now >= e) || control.episodes_done()
    }

    /// One pass of the loop: sleeps until the deadline, runs the cycle, takes a
    /// pending re-arm, starts the controlled stop when asked to, and moves to the
    /// next deadline. Returns the end time once the controlled stop is over (the
    /// arm held at rest, or `STOP_TIMEOUT_NS` after it began). No allocation.
    pub fn step(
        &mut self,
        control: &mut ControlLoop,
        requests: &StopRequests,
        grid: &ControlGrid,
    ) -> Option<MonoTime> {
        (self.sleep_until)(self.deadline);
        let wake = control.now();
        control.cycle(self.deadline, wake, self.missed);

        let now = control.now();
        if crate::signals::take_rearm() {
            control.rearm(now);
        }
        let stops = crate::signals::stop_requests();
        let failed = requests.thread_failed.load(Ordering::Relaxed);
        // A second stop request, or a thread's panic, makes the stop a quick stop.
        let quick = stops >= 2 || failed;
        match self.stopping_since {
            None => {
                let expired = self.expired(control, now);
                let policy_failed = requests.policy_failed.load(Ordering::Relaxed);
                let lost = control.drive_lost().is_some();
                if expired
                    || policy_failed
                    || lost
                    || failed
                    || stops > 0
                    || requests.stop.load(Ordering::Relaxed)
                {
                    let reason = if lost {
                        ModeChangeReason::DriveLost
                    } else {
                        ModeChangeReason::Shutdown
                    };
                    let asked = stops > 0 || requests.stop.load(Ordering::Relaxed);
                    if asked && !(expired || policy_failed || lost || failed) {
                        control.note_operator_stop(now, stops);
                    }
                    self.begin_stop(control, now, reason, quick, requests);
                }
            }
            Some(since) => {
                if quick {
                    self.begin_stop(control, now, ModeChangeReason::Shutdown, true, requests);
                }
                let at_rest = matches!(control.mode(), Mode::Holding | Mode::SafeStop)
                    && control.command_at_rest();
                let over = match self.quick_since {
                    // A third stop request: the drives are disabled at once.
                    Some(_) if stops >= 3 => true,
                    Some(q) => {
                        (at_rest && control.drives_at_standstill())
                            || now.saturating_since(q) > self.quick_stop_timeout_ns
                    }
                    None => at_rest || now.saturating_since(since) > STOP_TIMEOUT_NS,
                };
                if over {
                    return Some(now);
                }
            }
        }

        // Next deadline, phase-locked to SYNC0 where the bus has one (the inference
        // thread's grid moves with it); deadlines that have already passed are skipped
        // (counted), so a stall never turns into a burst of catch-up cycles.
        self.deadline = self.deadline.add_ns(self.period_ns);
        if let Some(err) = control.last_feedback().sync_phase_ns {
            let earlier = self.phase.correction_ns(err);
            self.deadline = self.deadline.add_signed_ns(-earlier);
            grid.shift(-earlier);
        }
        self.missed = 0;
        let behind = self.deadline.periods_until(self.period_ns, control.now());
        if behind > 0 {
            self.missed = behind.min(u32::MAX as u64) as u32;
            self.deadline = self.deadline.add_ns(behind * self.period_ns);
        }
        None
    }
}
