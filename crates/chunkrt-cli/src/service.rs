//! `chunkrt run` under systemd (`Type=notify`): the notification protocol of
//! sd_notify(3) through the `sd-notify` crate (the datagram protocol, no libsystemd;
//! a small, maintained crate made for exactly this), spoken by a thread of its own at
//! normal priority. The real-time threads only advance `chunkrt_rt::liveness` (the
//! phase, a heartbeat per control cycle); this thread reads them:
//!
//! - `READY=1` once the control thread has brought the backend up and enabled the
//!   drives (on EtherCAT: every drive in Operation Enabled) and the loop runs, so the
//!   policy may take authority; `STATUS=` with it;
//! - `STATUS=` every second: the telemetry thread's status line (mode, chunks,
//!   latency, overruns);
//! - `WATCHDOG=1` every half `WATCHDOG_USEC`, sent only when the control loop's
//!   heartbeat advanced since the previous check: a loop that stops cycling (wedged
//!   in an exchange, a stall) stops the pings and systemd acts on `WatchdogSec=`
//!   while the drives' own watchdog takes them down;
//! - `STOPPING=1` when the stop begins (a stop request, the duration over, a failure)
//!   or the loop has ended.
//!
//! Nothing waits on this thread: a service manager that does not read its socket
//! blocks only it, never the run or its stop (the end of the run waits at most
//! [`FINISH_WAIT`] for the last messages).

use chunkrt_rt::liveness::{self, Phase};
use sd_notify::NotifyState;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How often the thread looks at the run (and the cap on the watchdog's check period).
const TICK: Duration = Duration::from_millis(100);
/// How often `STATUS=` is renewed while the loop runs.
const STATUS_EVERY: Duration = Duration::from_secs(1);
/// How long the end of the run waits for the last messages.
const FINISH_WAIT: Duration = Duration::from_secs(1);

/// The notifier thread; `None` when no service manager listens (`NOTIFY_SOCKET`).
pub struct Notifier {
    finish: mpsc::Sender<String>,
    done: mpsc::Receiver<()>,
}

/// Starts the notifier when `NOTIFY_SOCKET` is set.
pub fn start() -> Option<Notifier> {
    std::env::var_os("NOTIFY_SOCKET")?;
    liveness::reset();
    liveness::want_status();
    let watchdog = sd_notify::watchdog_enabled();
    let (finish, finish_rx) = mpsc::channel();
    let (done_tx, done) = mpsc::channel();
    let spawned = thread::Builder::new()
        .name("chunkrt-notify".into())
        .spawn(move || {
            Talk::new(watchdog).run(&finish_rx);
            let _ = done_tx.send(());
        });
    if let Err(e) = spawned {
        errln!("chunkrt: warning: NOTIFY_SOCKET is set but the notifier thread could not start: {e}; systemd will not be told the run is ready");
        return None;
    }
    Some(Notifier { finish, done })
}

impl Notifier {
    /// The run has ended with `status`: the last `STATUS=` (and `STOPPING=1` if not
    /// yet sent); waits at most [`FINISH_WAIT`] for them to be sent.
    pub fn finish(self, status: String) {
        let _ = self.finish.send(status);
        let _ = self.done.recv_timeout(FINISH_WAIT);
    }
}

/// The notifier's state.
struct Talk {
    /// Half the watchdog's interval, when systemd asked for pings.
    ping_every: Option<Duration>,
    ready: bool,
    stopping: bool,
    last_beats: u64,
    last_ping: Instant,
    last_status: Instant,
    warned: bool,
}

impl Talk {
    fn new(watchdog: Option<Duration>) -> Talk {
        let now = Instant::now();
        Talk {
            ping_every: watchdog.map(|w| (w / 2).max(Duration::from_millis(1))),
            ready: false,
            stopping: false,
            last_beats: liveness::beats(),
            last_ping: now,
            last_status: now,
            warned: false,
        }
    }

    fn send(&mut self, states: &[NotifyState]) {
        if let Err(e) = sd_notify::notify(states) {
            if !self.warned {
                self.warned = true;
                errln!("chunkrt: warning: cannot notify the service manager (NOTIFY_SOCKET): {e}");
            }
        }
    }

    fn run(mut self, finish: &mpsc::Receiver<String>) {
        self.send(&[NotifyState::Status(
            "loading the configuration and the policy",
        )]);
        // Checked at least twice per ping: a ping goes out only if the loop cycled
        // since the previous check.
        let tick = self.ping_every.map_or(TICK, |p| (p / 2).min(TICK));
        loop {
            match finish.recv_timeout(tick) {
                Ok(status) => {
                    self.stop("the run has ended");
                    self.send(&[NotifyState::Status(&status)]);
                    return;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => self.step(),
            }
        }
    }

    /// One look at the run.
    fn step(&mut self) {
        let phase = liveness::phase();
        let stop_asked = chunkrt_rt::signals::stop_requests() > 0;
        if phase >= Phase::Stopping || stop_asked {
            self.stop(if stop_asked {
                "stopping: a stop was requested, bringing the arm to rest"
            } else {
                "stopping: bringing the arm to rest"
            });
            return;
        }
        let now = Instant::now();
        if phase == Phase::BringingUp && now.duration_since(self.last_status) >= STATUS_EVERY {
            self.last_status = now;
            self.send(&[NotifyState::Status(
                "bringing the backend up and enabling the drives",
            )]);
        }
        if phase != Phase::Running {
            return;
        }
        let beats = liveness::beats();
        let advanced = beats != self.last_beats;
        self.last_beats = beats;
        if !self.ready {
            self.ready = true;
            self.last_ping = now;
            self.send(&[
                NotifyState::Ready,
                NotifyState::Status("running: drives enabled, the control loop cycling"),
            ]);
        }
        if let Some(every) = self.ping_every {
            if advanced && now.duration_since(self.last_ping) >= every {
                self.last_ping = now;
                self.send(&[NotifyState::Watchdog]);
            }
        }
        if now.duration_since(self.last_status) >= STATUS_EVERY {
            self.last_status = now;
            let line = liveness::status();
            if !line.is_empty() {
                self.send(&[NotifyState::Status(&line)]);
            }
        }
    }

    fn stop(&mut self, why: &str) {
        if !self.stopping {
            self.stopping = true;
            self.send(&[NotifyState::Stopping, NotifyState::Status(why)]);
        }
    }
}
