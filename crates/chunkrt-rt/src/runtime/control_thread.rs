//! The control thread's life: real-time setup, the backend brought up and the drives
//! enabled, the loop, its controlled stop and the backend's shutdown.

use crate::control::{ControlLoop, ControlParts};
use crate::error::RunError;
use crate::inference::ControlGrid;
use crate::liveness::{self, Phase};
use crate::os;
use crate::schedule::{Schedule, StopRequests};
use crate::supervise::{self, Failures};
use chunkrt_config::Config;
use chunkrt_core::Gate;
use chunkrt_core::{Backend, Chunk, Executor, Feedback, MonoTime, Observation};
use chunkrt_telemetry::HostInfo;

/// The channel ends the control loop is built with, on the control thread, once the
/// backend is up.
pub(super) struct LoopParts {
    /// The wear ledger's totals (none: no `[wear]`): the thermal monitor's start.
    pub(super) ledger: Option<chunkrt_telemetry::ledger::LedgerTotals>,
    pub(super) chunks: chunkrt_buffer::Subscriber<Chunk>,
    /// The residual policy's correction chunks (none: the base alone).
    pub(super) residual: Option<chunkrt_buffer::Subscriber<Chunk>>,
    pub(super) observations: chunkrt_buffer::Publisher<Observation>,
    pub(super) cycles_out: chunkrt_telemetry::CycleProducer,
    pub(super) events_out: chunkrt_telemetry::EventProducer,
    /// The arm's measurement for the synthetic camera.
    pub(super) world: Option<chunkrt_buffer::Publisher<Observation>>,
    /// The regions the policy's manifest excludes from its domain.
    pub(super) exclusions: chunkrt_core::Exclusions,
    /// The gate's Cartesian stage (`[cartesian]`), its model read at assembly.
    pub(super) cartesian: Option<chunkrt_core::CartesianFilter>,
}

/// On the control thread: brings the backend up, enables its drives (process data
/// flowing), then builds the loop at rest at the measured position. The first deadline
/// follows within a period.
///
/// A panic in the backend's start or enable is caught: the backend is shut down (its
/// own quick stop, disable, INIT) and the bring-up fails.
pub(super) fn bring_up(
    cfg: &Config,
    mut backend: Box<dyn Backend>,
    parts: LoopParts,
    failures: &Failures,
) -> Result<ControlLoop, RunError> {
    let mut first = Feedback::default();
    let started = supervise::guarded(failures, "chunkrt-control", || {
        backend
            .start(os::now(), &mut first)
            .map_err(|e| RunError::Backend(e.to_string()))?;
        backend
            .enable(os::now(), &mut first)
            .map_err(|e| RunError::Backend(e.to_string()))
    });
    match started {
        Some(r) => r?,
        None => {
            let message = failures
                .panics()
                .last()
                .map_or_else(String::new, |p| p.message.clone());
            let teardown =
                supervise::guarded(failures, "chunkrt-control", || backend.shutdown(os::now()));
            let teardown = match teardown {
                Some(Ok(())) => "drives disabled".to_string(),
                Some(Err(e)) => format!("its shutdown failed too: {e}"),
                None => "its shutdown panicked too".to_string(),
            };
            return Err(RunError::Backend(format!(
                "the backend panicked during bring-up ({message}); {teardown}"
            )));
        }
    }
    // Once the backend has named its hardware (EtherCAT: read from the drives).
    let thermal_seed = crate::wear::thermal_seed_now(cfg, backend.as_ref(), parts.ledger.as_ref());
    let t_start = os::now();
    let period_ns = cfg.period_ns();
    let limits = cfg.joint_limits();
    let executor = Executor::new(cfg.executor_config(), limits, &first.pos_rad, t_start);
    let gate = gate(cfg, &first).with_cartesian(parts.cartesian);
    let control = ControlLoop::new(ControlParts {
        backend,
        executor,
        gate,
        chunks: parts.chunks,
        observations: parts.observations,
        cycles_out: parts.cycles_out,
        events_out: parts.events_out,
        domain: cfg.domain_box(),
        period_ns,
        first_feedback: first,
        clock: os::now,
    });
    let (sat_event, sat_fallback) = cfg.gate_saturation_cycles();
    let control = control
        .with_gate_saturation(sat_event, sat_fallback)
        .with_following_error(cfg.following_error_limits())
        .with_exclusions(parts.exclusions)
        .with_thermal(cfg.thermal_limits())
        .with_thermal_seed(thermal_seed)
        .with_residual(parts.residual, cfg.residual_limits())
        .with_enable_input(cfg.enable_input())
        .with_force_tripwire(cfg.force.as_ref().map(|f| f.tripwire_n))
        .with_episodes(cfg.episode_plan(), cfg.residual_budget());
    // Delay lines of `[inject]` (issue 8); none when nothing is injected.
    let control = control.attach_injection(&cfg.inject, &first);
    Ok(match parts.world {
        Some(world) => control.with_world(world),
        None => control,
    })
}

/// One line on stderr that may fail: a closed pipe (`| head`) or a closed stderr
/// must not stop the telemetry thread, so the line is dropped instead.
pub(super) fn console_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Real-time set-up of the control thread.
pub(super) struct RtSetup {
    pub(super) priority: u8,
    pub(super) cpu: i32,
    pub(super) lock_memory: bool,
    pub(super) hold_cpu_dma_latency: bool,
}

impl RtSetup {
    /// Applies what it can and says in the host block what took effect; the
    /// `/dev/cpu_dma_latency` hold, when taken, lasts until it is dropped.
    pub(super) fn apply(&self) -> (HostInfo, Option<os::DmaLatencyHold>) {
        let (kernel, preempt, realtime_kernel) = os::kernel_info();
        let mut host = HostInfo {
            kernel,
            preempt,
            realtime_kernel,
            priority: self.priority,
            cpus: os::cpu_count(),
            ..HostInfo::default()
        };
        if self.cpu >= 0 {
            match os::pin_to(self.cpu as usize) {
                Ok(()) => host.control_cpu = Some(self.cpu as usize),
                Err(e) => tracing::warn!("control thread not pinned: {e}"),
            }
        }
        if self.lock_memory {
            match os::lock_memory() {
                Ok(()) => host.mlockall = true,
                Err(e) => {
                    tracing::warn!("REAL-TIME DEGRADED: {e}");
                    host.mlockall_error = Some(e.to_string());
                }
            }
        }
        os::prefault_stack(512 * 1024);
        match os::set_fifo(self.priority) {
            Ok(()) => host.sched_fifo = true,
            Err(e) => {
                tracing::warn!("REAL-TIME DEGRADED: {e}; running with normal scheduling");
                host.sched_fifo_error = Some(e.to_string());
            }
        }
        let hold = if self.hold_cpu_dma_latency {
            match os::hold_cpu_dma_latency() {
                Ok(h) => {
                    host.cpu_dma_latency_held = true;
                    Some(h)
                }
                Err(e) => {
                    tracing::warn!("REAL-TIME DEGRADED: {e}; deep C-states stay allowed");
                    host.cpu_dma_latency_error = Some(e.to_string());
                    None
                }
            }
        } else {
            host.cpu_dma_latency_error =
                Some("off in the configuration (control.hold_cpu_dma_latency = false)".into());
            None
        };
        (host, hold)
    }
}

/// How the control thread's loop ended.
pub(super) struct Ended {
    pub(super) t0: MonoTime,
    pub(super) t1: MonoTime,
    /// From the quick stop's start to the loop's end (ns), if the stop became one.
    pub(super) quick: Option<u64>,
    /// The drives reported standstill at the end.
    pub(super) standstill: bool,
}

/// The control thread's loop (`Schedule::step` until the controlled stop is over).
///
/// Each step runs under `catch_unwind`: a panic (in the cycle, the executor, the gate
/// or the backend's exchange) is recorded in `failures`, whose flag makes the next
/// step start the quick stop with the same loop (the gate brakes its own commanded
/// state; the drives are asked for their quick stop). A second panic ends the loop at
/// once: the backend's shutdown follows, its own frames, independent of the loop.
pub(super) fn control_thread(
    control: &mut ControlLoop,
    duration_ns: Option<u64>,
    requests: &StopRequests,
    grid: &ControlGrid,
    quick_stop_timeout_ns: u64,
    failures: &Failures,
) -> Ended {
    let mut schedule = Schedule::start(control, grid, duration_ns, os::sleep_until)
        .with_quick_stop_timeout(quick_stop_timeout_ns);
    let mut panics = 0;
    let t1 = loop {
        let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            schedule.step(control, requests, grid)
        }));
        // The heartbeat a service manager's watchdog is fed from (`liveness`): a
        // relaxed atomic add, nothing else.
        liveness::beat();
        if schedule.stopping() {
            liveness::enter(Phase::Stopping);
        }
        match stepped {
            Ok(Some(end)) => break end,
            Ok(None) => {}
            Err(p) => {
                failures.record("chunkrt-control", &*p);
                panics += 1;
                if panics > 1 {
                    break os::now();
                }
                control.after_panic();
            }
        }
    };
    Ended {
        t0: schedule.t0(),
        t1,
        quick: schedule.quick_stop_since().map(|q| t1.saturating_since(q)),
        standstill: control.drives_at_standstill(),
    }
}

/// The backend's shutdown (quick stop, disable, INIT), a panic in it caught: why it
/// failed, if it did.
pub(super) fn shut_down(control: &mut ControlLoop, failures: &Failures) -> Option<String> {
    let backend = &mut control.backend;
    // A third stop request: the drives are disabled without another wait for rest.
    let at_once = crate::signals::stop_requests() >= 3;
    let shut = supervise::guarded(failures, "chunkrt-control", || {
        if at_once {
            backend.disable_now(os::now())
        } else {
            backend.shutdown(os::now())
        }
    });
    match shut {
        Some(Ok(())) => None,
        Some(Err(e)) => Some(e.to_string()),
        None => Some(format!(
            "the backend's shutdown panicked ({}); drives may still be enabled",
            failures
                .panics()
                .last()
                .map_or_else(String::new, |p| p.message.clone())
        )),
    }
}

/// The gate at rest at the first measurement, with the config's action filter and
/// torque slew limit (the Cartesian stage is added from the loop's parts).
pub(super) fn gate(cfg: &Config, first: &Feedback) -> Gate {
    Gate::new(cfg.joint_limits(), cfg.period_ns(), &first.pos_rad)
        .with_action_filter(cfg.action_filter_hz())
        .with_torque_slew(cfg.torque_slew_jerk())
}
