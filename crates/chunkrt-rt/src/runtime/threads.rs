//! The run's threads: started in order (camera, inference, telemetry, control),
//! the control thread supervised, the others stopped and joined after it.

use super::assemble::{Built, Shared, TelemetryParts};
use super::control_thread::{
    bring_up, console_line, control_thread, shut_down, Ended, LoopParts, RtSetup,
};
use super::outcome::RunOptions;
use crate::control::ControlLoop;
use crate::error::RunError;
use crate::inference::{self, InferenceExit, InferenceParts};
use crate::liveness::{self, Phase};
use crate::os;
use crate::schedule::StopRequests;
use crate::supervise::{self, Failures};
use chunkrt_config::Config;
use chunkrt_config::PanicThread;
use chunkrt_core::Backend;
use chunkrt_telemetry::live::LiveSlot;
use chunkrt_telemetry::{Collector, HostInfo};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

/// What the control thread hands back: the loop, the host's real-time set-up, how
/// the loop ended and why the backend's shutdown failed, if it did.
pub(super) struct Controlled {
    pub(super) control: ControlLoop,
    pub(super) host: HostInfo,
    pub(super) ended: Ended,
    pub(super) shutdown_error: Option<String>,
}

/// The started threads.
pub(super) struct Threads {
    pub(super) control: thread::JoinHandle<Result<Controlled, RunError>>,
    pub(super) others: Others,
}

/// The threads besides the control thread, and what ends them.
pub(super) struct Others {
    pub(super) inference: thread::JoinHandle<InferenceExit>,
    pub(super) camera: Option<thread::JoinHandle<()>>,
    pub(super) camera_stop: Option<Arc<AtomicBool>>,
    pub(super) telemetry: thread::JoinHandle<TelemetryParts>,
    pub(super) shared: Shared,
}

impl Threads {
    /// Starts the camera, inference, telemetry and control threads, in that order.
    pub(super) fn start(
        cfg: &Config,
        backend: Box<dyn Backend>,
        built: Built,
        opts: &RunOptions,
    ) -> Result<Threads, RunError> {
        let Built {
            loop_parts,
            inference,
            camera,
            telemetry,
            shared,
        } = built;
        let camera_stop = camera.as_ref().map(|(p, _)| p.stop.clone());
        let camera = match camera {
            Some((parts, cpu)) => Some(start_camera(parts, cpu, shared.failures.clone())?),
            None => None,
        };
        let inference = start_inference(inference, cfg.inference.cpu, shared.failures.clone())?;
        let telemetry = start_telemetry(cfg, opts, telemetry, &shared)?;
        let control = start_control(cfg, backend, loop_parts, opts, &shared)?;
        Ok(Threads {
            control,
            others: Others {
                inference,
                camera,
                camera_stop,
                telemetry,
                shared,
            },
        })
    }

    /// Waits for the control thread, which runs the loop and supervises it (stop
    /// requests, panics, the controlled stop, the backend's shutdown). A panic outside
    /// its guarded parts (its real-time set-up, before any bring-up) powered nothing:
    /// recorded, and the run fails.
    pub(super) fn supervise(self) -> (Result<Controlled, RunError>, Others) {
        let Threads { control, others } = self;
        let controlled = control.join().unwrap_or_else(|p| {
            others.shared.failures.record("chunkrt-control", &*p);
            others.shared.control_done.store(true, Ordering::Release);
            Err(RunError::Thread(format!(
                "the control thread panicked before the bring-up: {}",
                supervise::message(&*p)
            )))
        });
        (controlled, others)
    }
}

/// The camera thread (a panic stops the run: the control thread polls the flag).
pub(super) fn start_camera(
    parts: crate::camera::CameraParts,
    cpu: i32,
    failures: Arc<Failures>,
) -> Result<thread::JoinHandle<()>, RunError> {
    thread::Builder::new()
        .name("chunkrt-camera".into())
        .spawn(move || {
            if cpu >= 0 {
                if let Err(e) = os::pin_to(cpu as usize) {
                    tracing::warn!("camera thread: {e}");
                }
            }
            supervise::guarded(&failures, "chunkrt-camera", || crate::camera::run(parts));
        })
        .map_err(|e| RunError::Thread(e.to_string()))
}

/// The inference thread.
pub(super) fn start_inference(
    parts: InferenceParts,
    cpu: i32,
    failures: Arc<Failures>,
) -> Result<thread::JoinHandle<InferenceExit>, RunError> {
    thread::Builder::new()
        .name("chunkrt-infer".into())
        .spawn(move || {
            if cpu >= 0 {
                if let Err(e) = os::pin_to(cpu as usize) {
                    tracing::warn!("inference thread: {e}");
                }
            }
            // The policy's own panics are caught inside (`policy_failed`, exit 3);
            // one elsewhere in the thread is a thread's panic.
            supervise::guarded(&failures, "chunkrt-infer", || inference::run(parts))
                .unwrap_or(InferenceExit::Stopped)
        })
        .map_err(|e| RunError::Thread(e.to_string()))
}

/// The telemetry thread's pace: how often it drains the rings and prints the status.
#[derive(Clone, Copy)]
pub(super) struct DrainPace {
    pub(super) drain_ns: u64,
    pub(super) status_ns: u64,
    /// Print the live status line.
    pub(super) live: bool,
}

/// The telemetry thread: drains the rings until the control thread has ended.
pub(super) fn start_telemetry(
    cfg: &Config,
    opts: &RunOptions,
    parts: TelemetryParts,
    shared: &Shared,
) -> Result<thread::JoinHandle<TelemetryParts>, RunError> {
    let status_ns = chunkrt_core::ms_to_ns(cfg.telemetry.status_interval_ms);
    let pace = DrainPace {
        drain_ns: chunkrt_core::ms_to_ns(cfg.telemetry.drain_interval_ms).max(1_000_000),
        status_ns,
        live: opts.live_status && status_ns > 0,
    };
    let done = shared.control_done.clone();
    let control_cpu = usize::try_from(cfg.control.cpu).ok();
    let failures = shared.failures.clone();
    let inject = cfg.inject.clone();
    let live = shared.live.clone();
    thread::Builder::new()
        .name("chunkrt-telemetry".into())
        .spawn(move || {
            // Off the control thread's CPU: its drains and file writes would
            // otherwise have to be preempted there at every wake (the loop woke
            // 1.1-1.7x later than cyclictest at P50 with it free to run there).
            if let Some(cpu) = control_cpu {
                if let Err(e) = os::keep_off(cpu) {
                    tracing::debug!("telemetry thread may share CPU {cpu}: {e}");
                }
            }
            drain_until_done(parts, pace, &done, &failures, &inject, live.as_deref())
        })
        .map_err(|e| RunError::Thread(e.to_string()))
}

/// How often the status a service manager is shown (`liveness::status`) is renewed.
pub(super) const SERVICE_STATUS_NS: u64 = 1_000_000_000;

/// How often the `[metrics]` endpoint's snapshot is renewed.
pub(super) const LIVE_SNAPSHOT_NS: u64 = 250_000_000;

/// The telemetry thread's loop. After a panic the thread drains on (the rings must
/// not fill while the arm stops, and the stop belongs in the records); a second panic
/// means the collector cannot go on: the thread waits for the end and hands back what
/// it has.
pub(super) fn drain_until_done(
    mut parts: TelemetryParts,
    pace: DrainPace,
    done: &AtomicBool,
    failures: &Failures,
    inject: &chunkrt_config::InjectConfig,
    live: Option<&LiveSlot>,
) -> TelemetryParts {
    let mut next_status = os::now().add_ns(pace.status_ns);
    let mut next_service_status = os::now();
    let mut next_live = os::now();
    let mut panic_point = supervise::PanicPoint::for_thread(inject, PanicThread::Telemetry);
    let mut panics = 0;
    let mut healthy = true;
    loop {
        let finished = done.load(Ordering::Acquire);
        if !healthy {
            if finished {
                break;
            }
            os::sleep_until(os::now().add_ns(pace.drain_ns));
            continue;
        }
        let drained = supervise::guarded(failures, "chunkrt-telemetry", || {
            supervise::check_panic(&mut panic_point, os::now());
            let TelemetryParts {
                collector,
                consumers,
                chunks,
                camera,
            } = &mut parts;
            collector.drain(consumers);
            collector.drain_chunks(chunks);
            if let Some(c) = camera.as_mut() {
                collector.drain_camera(c);
            }
            if finished {
                return;
            }
            collector.flush_logs();
            while let Some(w) = collector.take_warning() {
                console_line(&format!("chunkrt: warning: {w}"));
            }
            if let Some(e) = collector.new_log_error() {
                console_line(&format!(
                    "chunkrt: error: {e}; the run goes on, later records of this file are counted as lost"
                ));
            }
            let now = os::now();
            if pace.live && now >= next_status {
                console_line(&collector.status_line(now));
                next_status = now.add_ns(pace.status_ns);
            }
            if liveness::status_wanted() && now >= next_service_status {
                liveness::set_status(collector.status_line(now));
                next_service_status = now.add_ns(SERVICE_STATUS_NS);
            }
            if let Some(slot) = live.filter(|_| now >= next_live) {
                slot.publish(collector.live_snapshot(now));
                next_live = now.add_ns(LIVE_SNAPSHOT_NS);
            }
        });
        if drained.is_none() {
            panics += 1;
            healthy = panics < 2;
        }
        if finished {
            break;
        }
        os::sleep_until(os::now().add_ns(pace.drain_ns));
    }
    parts
}

/// The control thread: bring-up, enable, loop, controlled stop and shutdown on this
/// one thread, back to back: an enabled drive is never left without process data
/// while another thread starts or finishes.
pub(super) fn start_control(
    cfg: &Config,
    backend: Box<dyn Backend>,
    loop_parts: LoopParts,
    opts: &RunOptions,
    shared: &Shared,
) -> Result<thread::JoinHandle<Result<Controlled, RunError>>, RunError> {
    let rt_opts = RtSetup {
        priority: cfg.control.priority,
        cpu: cfg.control.cpu,
        lock_memory: cfg.control.lock_memory,
        hold_cpu_dma_latency: cfg.control.hold_cpu_dma_latency,
    };
    let duration_ns = opts.duration.map(|d| d.as_nanos() as u64);
    let stop = opts.stop.clone();
    let stop_inference = shared.stop_inference.clone();
    let policy_failed = shared.policy_failed.clone();
    let grid = shared.grid.clone();
    let loop_cfg = cfg.clone();
    let failures = shared.failures.clone();
    let quick_stop_timeout_ns = chunkrt_core::ms_to_ns(cfg.control.quick_stop_timeout_ms);
    let control_done = shared.control_done.clone();
    thread::Builder::new()
        .name("chunkrt-control".into())
        .stack_size(4 << 20)
        .spawn(move || {
            let (host, dma_latency_hold) = rt_opts.apply();
            liveness::enter(Phase::BringingUp);
            let started = bring_up(&loop_cfg, backend, loop_parts, &failures);
            let mut control = match started {
                Ok(control) => control,
                Err(e) => {
                    liveness::enter(Phase::Ended);
                    control_done.store(true, Ordering::Release);
                    return Err(e);
                }
            };
            liveness::enter(Phase::Running);
            let requests = StopRequests {
                stop: &stop,
                policy_failed: &policy_failed,
                stop_inference: &stop_inference,
                thread_failed: &failures.flag,
            };
            let ended = control_thread(
                &mut control,
                duration_ns,
                &requests,
                &grid,
                quick_stop_timeout_ns,
                &failures,
            );
            let shutdown_error = shut_down(&mut control, &failures);
            liveness::enter(Phase::Ended);
            // Held for the whole loop, the controlled stop and shutdown included.
            drop(dma_latency_hold);
            control_done.store(true, Ordering::Release);
            Ok(Controlled {
                control,
                host,
                ended,
                shutdown_error,
            })
        })
        .map_err(|e| RunError::Thread(e.to_string()))
}

/// After the control thread: what the other threads handed back.
pub(super) struct Stopped {
    pub(super) controlled: Controlled,
    pub(super) inference_exit: InferenceExit,
    pub(super) collector: Collector,
    /// A chunk was published and never read by the loop.
    pub(super) unread_at_end: bool,
    pub(super) shared: Shared,
}

impl Others {
    /// Ends the inference, camera and telemetry threads once the control thread has
    /// ended, and drains what they left. When the control thread failed (nothing was
    /// brought up) they end without a report.
    pub(super) fn stop(
        self,
        controlled: Result<Controlled, RunError>,
    ) -> Result<Stopped, RunError> {
        let Others {
            inference,
            camera,
            camera_stop,
            telemetry,
            shared,
        } = self;
        shared.stop_inference.store(true, Ordering::Release);
        let mut controlled = match controlled {
            Ok(controlled) => controlled,
            Err(e) => {
                let _ = inference.join();
                if let Some(stop) = &camera_stop {
                    stop.store(true, Ordering::Release);
                }
                let _ = telemetry.join();
                return Err(e);
            }
        };
        // Each thread catches its own panics (`supervise`): a join error is a panic
        // outside them, recorded the same way.
        let inference_exit = inference.join().unwrap_or_else(|p| {
            shared.failures.record("chunkrt-infer", &*p);
            InferenceExit::Stopped
        });
        if let Some(stop) = camera_stop {
            stop.store(true, Ordering::Release);
        }
        if let Some(h) = camera {
            join_camera(h, &shared.failures);
        }
        let mut telemetry = telemetry.join().map_err(|p| {
            // Only a panic outside the guarded drain gets here; the drives are
            // already shut down.
            RunError::Thread(format!(
                "the telemetry thread panicked: {}; no report",
                supervise::message(&*p)
            ))
        })?;
        // The inference thread has ended: the chunks it published after the
        // telemetry thread's last drain.
        telemetry.collector.drain_chunks(&mut telemetry.chunks);
        if let Some(c) = telemetry.camera.as_mut() {
            telemetry.collector.drain_camera(c);
        }
        // A chunk still in the handoff was published and never read (it belongs in
        // the reconciliation, not in the loop).
        let unread_at_end = controlled.control.take_unread_chunk();
        Ok(Stopped {
            controlled,
            inference_exit,
            collector: telemetry.collector,
            unread_at_end,
            shared,
        })
    }
}

/// A capture blocks for at most a frame period plus its timeout; a camera that hangs
/// longer is left behind rather than holding the report.
pub(super) fn join_camera(h: thread::JoinHandle<()>, failures: &Failures) {
    let give_up = os::now().add_ns(3_000_000_000);
    while !h.is_finished() && os::now() < give_up {
        os::sleep_until(os::now().add_ns(10_000_000));
    }
    if h.is_finished() {
        if let Err(p) = h.join() {
            failures.record("chunkrt-camera", &*p);
        }
    } else {
        tracing::warn!("the camera thread did not end within 3 s; left behind");
    }
}
