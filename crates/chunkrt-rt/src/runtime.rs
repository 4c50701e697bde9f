//! The runtime: builds the backend, policy, executor, gate and rings from a config,
//! starts the control, inference and telemetry threads, and returns the report.

use crate::control::{ControlLoop, ControlParts};
use crate::inference::{self, ControlGrid, HandoffCounts, InferenceExit, InferenceParts};
use crate::liveness::{self, Phase};
use crate::os;
use crate::schedule::{Schedule, StopRequests};
use crate::supervise::{self, Failures};
use chunkrt_config::Config;
use chunkrt_config::PanicThread;
use chunkrt_core::{Backend, Chunk, Executor, Feedback, Gate, MonoTime, Observation, Policy};
use chunkrt_telemetry::live::serve::MetricsServer;
use chunkrt_telemetry::live::LiveSlot;
use chunkrt_telemetry::{
    rings, CameraConsumer, ChunkConsumer, Collector, HostInfo, MetricSet, Report, RingConsumers,
};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

pub use crate::error::RunError;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Stop after this long (None: until stopped).
    pub duration: Option<Duration>,
    /// Where to write `report.json`, `gate.jsonl`, `events.jsonl`.
    pub out_dir: Option<PathBuf>,
    /// Print the live status line.
    pub live_status: bool,
    /// External stop request (signals, tests).
    pub stop: Arc<AtomicBool>,
    /// Name of the config file, for the report.
    pub config_name: String,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: Some(Duration::from_secs(10)),
            out_dir: None,
            live_status: false,
            stop: Arc::new(AtomicBool::new(false)),
            config_name: String::new(),
        }
    }
}

/// The result of a run.
#[derive(Debug)]
pub struct RunOutcome {
    /// The report (also written as `report.json` when an output directory is set).
    pub report: Report,
    /// Whether the inference thread panicked.
    pub inference_panicked: Option<String>,
    /// Why the backend's shutdown failed (drives not disabled, bus not back in INIT):
    /// the arm may still be powered; also in the report as `shutdown_error`.
    pub shutdown_error: Option<String>,
    /// A drive left the bus mid-run and the backend could not bring it back: the arm
    /// was brought to a controlled stop and the run ended early; also in the report as
    /// `drive_lost`.
    pub drive_lost: Option<String>,
    /// The histograms behind the report's percentiles (for `.hgrm` files and plots).
    pub metrics: MetricSet,
    /// Why the records in the output directory are incomplete (a log or the report
    /// could not be written, e.g. the disk filled); the run itself went on.
    pub records_error: Option<String>,
    /// The runtime threads that panicked (control with its backend, inference outside
    /// the policy, camera, telemetry): the run ended with the quick stop; also in the
    /// report as `thread_panics`.
    pub thread_panics: Vec<crate::supervise::ThreadPanic>,
    /// The stop became a quick stop (a second stop request, or a panic): how it ended;
    /// also in the report as `quick_stop`.
    pub quick_stop: Option<QuickStopOutcome>,
    /// The policy was asked for chunks and produced none that could be published (every
    /// call failed, or every chunk was refused at ingestion): why; also in the report as
    /// `policy_unusable`.
    pub policy_unusable: Option<String>,
}

/// How a quick stop ended.
#[derive(Clone, Debug, PartialEq)]
pub struct QuickStopOutcome {
    /// A second stop request (SIGINT, SIGTERM, SIGHUP) asked for it.
    pub by_signal: bool,
    /// A third one ended the wait for standstill at once.
    pub third_signal: bool,
    /// The drives reported standstill before they were disabled.
    pub standstill: bool,
    /// From the quick stop's start to the disable (ms).
    pub after_ms: f64,
    /// The backend's shutdown (disable, INIT) succeeded.
    pub disabled: bool,
}

impl std::fmt::Display for QuickStopOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = if self.by_signal {
            "a second stop request"
        } else {
            "a thread's panic"
        };
        write!(f, "{why} switched to the drives' quick stop; ")?;
        if self.third_signal {
            write!(
                f,
                "a third one ended the wait after {:.0} ms; ",
                self.after_ms
            )?;
        } else if self.standstill {
            write!(f, "standstill after {:.0} ms; ", self.after_ms)?;
        } else {
            write!(f, "no standstill within {:.0} ms; ", self.after_ms)?;
        }
        f.write_str(if self.disabled {
            "drives disabled"
        } else {
            "the shutdown failed (see shutdown_error)"
        })
    }
}

/// How a run ended, most serious first: what `chunkrt` turns into its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ending {
    /// The backend's shutdown failed: drives may still be enabled.
    ShutdownFailed,
    /// A runtime thread panicked; the arm was brought to a quick stop.
    ThreadPanicked,
    /// A drive left the bus and could not be brought back.
    DriveLost,
    /// The policy failed (panicked); the arm was brought to rest.
    PolicyFailed,
    /// The policy produced no usable chunk in the whole run (every call failed or every
    /// chunk was refused at ingestion); the arm never left its hold.
    PolicyUnusable,
    /// A second stop request made the stop a quick stop.
    QuickStopped,
    /// The run ended normally but its records are incomplete.
    RecordsIncomplete,
    /// The run ended normally.
    Normal,
}

impl RunOutcome {
    /// What went wrong, one clause per item, most serious first (empty when the run
    /// ended normally).
    pub fn describe_ending(&self) -> String {
        let mut parts = Vec::new();
        if let Some(e) = &self.shutdown_error {
            parts.push(format!(
                "the shutdown failed: {e}; drives may still be enabled or the bus not in \
                 INIT: check the drives before going near the arm"
            ));
        }
        for p in &self.thread_panics {
            parts.push(p.to_string());
        }
        if let Some(msg) = &self.drive_lost {
            parts.push(msg.clone());
        }
        if let Some(msg) = &self.inference_panicked {
            parts.push(format!(
                "the policy failed during the run ({msg}); the arm was brought to rest"
            ));
        }
        if let Some(msg) = &self.policy_unusable {
            parts.push(msg.clone());
        }
        if let Some(q) = &self.quick_stop {
            parts.push(q.to_string());
        }
        if let Some(e) = &self.records_error {
            parts.push(format!("the records are incomplete: {e}"));
        }
        parts.join("; ")
    }

    /// How the run ended (the most serious of what happened).
    pub fn ending(&self) -> Ending {
        if self.shutdown_error.is_some() {
            Ending::ShutdownFailed
        } else if !self.thread_panics.is_empty() {
            Ending::ThreadPanicked
        } else if self.drive_lost.is_some() {
            Ending::DriveLost
        } else if self.inference_panicked.is_some() {
            Ending::PolicyFailed
        } else if self.policy_unusable.is_some() {
            Ending::PolicyUnusable
        } else if self.quick_stop.as_ref().is_some_and(|q| q.by_signal) {
            Ending::QuickStopped
        } else if self.records_error.is_some() {
            Ending::RecordsIncomplete
        } else {
            Ending::Normal
        }
    }
}

/// Everything a run needs, built from a config; tests may swap the backend or policy.
pub struct Runtime {
    cfg: Config,
    backend: Box<dyn Backend>,
    policy: Box<dyn Policy>,
    /// The residual policy of `[policy.residual]` (none: the base alone).
    residual: Option<Box<dyn Policy>>,
}

impl Runtime {
    /// Builds the backend and policy that the config names.
    pub fn from_config(cfg: &Config) -> Result<Runtime, RunError> {
        let backend = crate::build::backend(cfg)?;
        let policy = crate::build::policy(cfg)?;
        let residual = crate::build::residual(cfg)?;
        Ok(Runtime::with_parts(cfg, backend, policy).with_residual(residual))
    }

    /// With a residual policy on top of the base (its gate's limits from the config's
    /// `[policy.residual]`, which it needs).
    pub fn with_residual(mut self, residual: Option<Box<dyn Policy>>) -> Self {
        self.residual = residual;
        self
    }

    /// Uses the given backend and policy.
    pub fn with_parts(cfg: &Config, backend: Box<dyn Backend>, policy: Box<dyn Policy>) -> Self {
        Runtime {
            cfg: cfg.clone(),
            backend,
            policy,
            residual: None,
        }
    }

    /// Runs until the duration ends or a stop is requested; then brings the arm to
    /// rest, shuts the backend down and returns the report.
    ///
    /// Five steps: build what the threads need (before anything moves), start the
    /// threads, supervise the control thread (the loop, its controlled stop and the
    /// backend's shutdown run there), stop the other threads, collect the report.
    pub fn run(self, opts: &RunOptions) -> Result<RunOutcome, RunError> {
        let Runtime {
            cfg,
            backend,
            policy,
            residual,
        } = self;
        if residual.is_some() && cfg.residual_limits().is_none() {
            return Err(RunError::Policy(
                "a residual policy needs the config's [policy.residual] (its gate's bounds)".into(),
            ));
        }
        // Before anything moves; commands act on this run until its end.
        let _operator = crate::operator::open(&cfg).map_err(RunError::Operator)?;
        let (live, metrics) = start_metrics(&cfg)?;
        let view = start_live_view(&cfg)?;
        let mut built = Built::new(&cfg, policy, residual, opts)?;
        built.shared.live = live;
        if let Some(v) = &view {
            if !built.telemetry.collector.set_live_sink(Box::new(v.sink())) {
                return Err(RunError::Config(
                    "[live_view] shows the recording's channels, and this run records none".into(),
                ));
            }
        }
        let threads = Threads::start(&cfg, backend, built, opts)?;
        let (controlled, others) = threads.supervise();
        let stopped = others.stop(controlled)?;
        let outcome = collect(&cfg, opts, stopped);
        if let (Some(m), Some(server)) = (&cfg.metrics, metrics) {
            // The report's values, served a while for a scraper to see (the run is
            // over: the arm is at rest and the backend shut down).
            std::thread::sleep(Duration::from_nanos(chunkrt_core::ms_to_ns(m.linger_ms)));
            drop(server);
        }
        drop(view);
        outcome
    }
}

/// The `[live_view]` server, bound before anything moves (an address that cannot be
/// bound is a configuration error, exit 2).
fn start_live_view(cfg: &Config) -> Result<Option<crate::live_view::LiveView>, RunError> {
    let Some(v) = &cfg.live_view else {
        return Ok(None);
    };
    let view = crate::live_view::LiveView::start(
        v,
        cfg.camera.is_some(),
        usize::try_from(cfg.control.cpu).ok(),
    )
    .map_err(|e| RunError::Config(format!("live_view.listen `{}`: {e}", v.listen)))?;
    tracing::info!(
        "live view: ws://{} (Foxglove: open a live connection)",
        view.addr()
    );
    Ok(Some(view))
}

/// The `[metrics]` endpoint, bound before anything moves (an address that cannot be
/// bound is a configuration error, exit 2), and the slot it serves.
fn start_metrics(cfg: &Config) -> Result<(Option<Arc<LiveSlot>>, Option<MetricsServer>), RunError> {
    let Some(m) = &cfg.metrics else {
        return Ok((None, None));
    };
    let addr = m
        .listen
        .parse()
        .map_err(|_| RunError::Config(format!("metrics.listen `{}`: not an address", m.listen)))?;
    let slot = Arc::new(LiveSlot::default());
    let control_cpu = usize::try_from(cfg.control.cpu).ok();
    let keep_off = move || {
        if let Some(cpu) = control_cpu {
            let _ = os::keep_off(cpu);
        }
    };
    let server = MetricsServer::start(addr, slot.clone(), keep_off).map_err(|e| {
        RunError::Config(format!(
            "metrics.listen `{}`: cannot listen there: {e}",
            m.listen
        ))
    })?;
    tracing::info!("metrics: http://{}/metrics", server.addr());
    Ok((Some(slot), Some(server)))
}

/// The policy's goals as loaded, each of the arm's joints (the report's
/// `config.policy_goals_rad`).
fn policy_goals(cfg: &Config, policy: &dyn Policy) -> Vec<Vec<f64>> {
    let dof = cfg.control.joints.min(chunkrt_core::MAX_DOF);
    policy.goals().iter().map(|g| g[..dof].to_vec()).collect()
}

/// The output directory, made before anything moves.
fn make_out_dir(opts: &RunOptions) -> Result<(), RunError> {
    if let Some(dir) = &opts.out_dir {
        std::fs::create_dir_all(dir).map_err(|e| RunError::Output {
            dir: dir.clone(),
            message: e.to_string(),
        })?;
    }
    Ok(())
}

/// A policy that takes an image needs a camera, and a camera needs such a policy:
/// said before anything moves.
fn check_camera(cfg: &Config, image_size: Option<(usize, usize)>) -> Result<(), RunError> {
    match (&cfg.camera, image_size) {
        (None, Some((h, w))) => Err(RunError::Camera(format!(
            "the policy takes a {h} x {w} camera image and the config has no [camera]"
        ))),
        (Some(_), None) => Err(RunError::Camera(
            "the config has a [camera] and the policy takes no image".into(),
        )),
        _ => Ok(()),
    }
}

/// The flags and counters the threads share.
struct Shared {
    /// Ends the inference thread (set by the control thread's stop, and after it).
    stop_inference: Arc<AtomicBool>,
    /// The policy failed (the inference thread caught its panic).
    policy_failed: Arc<AtomicBool>,
    /// The control thread has ended: the telemetry thread drains once more and ends.
    control_done: Arc<AtomicBool>,
    handoff: Arc<HandoffCounts>,
    grid: Arc<ControlGrid>,
    failures: Arc<Failures>,
    inject_counts: Arc<crate::inject::InjectCounts>,
    /// What the `[metrics]` endpoint serves (none without it).
    live: Option<Arc<LiveSlot>>,
    /// The policy's goals as loaded (the report's `config.policy_goals_rad`).
    policy_goals: Vec<Vec<f64>>,
}

impl Shared {
    fn new(cfg: &Config) -> Shared {
        Shared {
            stop_inference: Arc::new(AtomicBool::new(false)),
            policy_failed: Arc::new(AtomicBool::new(false)),
            control_done: Arc::new(AtomicBool::new(false)),
            handoff: Arc::new(HandoffCounts::default()),
            grid: Arc::new(ControlGrid::new(cfg.period_ns())),
            failures: Arc::new(Failures::default()),
            inject_counts: Arc::new(crate::inject::InjectCounts::default()),
            live: None,
            policy_goals: Vec::new(),
        }
    }
}

/// What the telemetry thread drains and writes (handed back when it ends).
struct TelemetryParts {
    collector: Collector,
    consumers: RingConsumers,
    chunks: ChunkConsumer,
    camera: Option<CameraConsumer>,
}

/// Everything the threads need, built before any starts: nothing is brought up yet
/// (a camera that cannot be opened fails the run here, before a drive is touched).
struct Built {
    loop_parts: LoopParts,
    inference: InferenceParts,
    camera: Option<(crate::camera::CameraParts, i32)>,
    telemetry: TelemetryParts,
    shared: Shared,
}

impl Built {
    fn new(
        cfg: &Config,
        policy: Box<dyn Policy>,
        residual: Option<Box<dyn Policy>>,
        opts: &RunOptions,
    ) -> Result<Built, RunError> {
        make_out_dir(opts)?;
        let image_size = policy.image_size();
        check_camera(cfg, image_size)?;
        let t_start = os::now();
        let (chunk_pub, chunk_sub) = chunkrt_buffer::channel(Chunk::default());
        let (residual, residual_sub) = residual_stage(residual);
        let (obs_pub, obs_sub) = chunkrt_buffer::channel(Observation::default());
        let (cycle_p, event_p, infer_p, consumers) = rings(cfg.telemetry.ring_capacity);
        // Published chunks for the recording: 64 chunks (about 3 s at 50 ms) between
        // two drains before one is dropped.
        let (chunk_p, chunk_c) = chunkrt_telemetry::chunk_ring(64);
        let recording = opts.out_dir.is_some() && cfg.telemetry.record;
        let (mut camera, mut camera_feed, mut camera_c, mut world) = (None, None, None, None);
        if let (Some(cam_cfg), Some(size)) = (&cfg.camera, image_size) {
            let (world_pub, world_sub) = chunkrt_buffer::channel(Observation::default());
            world = Some(world_pub);
            let (parts, feed, consumer) =
                camera_parts(cfg.inject.clone(), cam_cfg, size, world_sub, recording)?;
            camera = Some((parts, cam_cfg.cpu));
            camera_feed = Some(feed);
            camera_c = Some(consumer);
        }
        let loop_parts = LoopParts {
            // Read (or refused: a FIFO, a device, a line no run writes) before anything moves.
            ledger: crate::wear::load_ledger(cfg, true).map_err(RunError::Config)?,
            chunks: chunk_sub,
            residual: residual_sub,
            observations: obs_pub,
            cycles_out: cycle_p,
            events_out: event_p,
            world,
            exclusions: policy.exclusions(),
        };
        let collector = collector(cfg, opts, t_start)?;
        let mut shared = Shared::new(cfg);
        shared.policy_goals = policy_goals(cfg, policy.as_ref());
        let inference = InferenceParts {
            policy,
            observations: obs_sub,
            chunks: chunk_pub,
            records: infer_p,
            period_ns: chunkrt_core::ms_to_ns(cfg.inference.chunk_period_ms),
            grid: shared.grid.clone(),
            start_offset_ns: (cfg.inference.start_offset_ms * 1e6) as i64,
            extrapolate: cfg.inference.extrapolate_observation,
            stop: shared.stop_inference.clone(),
            failed: shared.policy_failed.clone(),
            inject: crate::inject::InferenceInjection::new(
                &cfg.inject,
                shared.inject_counts.clone(),
            ),
            handoff: shared.handoff.clone(),
            selection: selection_config(cfg),
            draw_schedule: crate::inference::Replayed::schedule(&cfg.policy),
            chunk_records: recording.then_some(chunk_p),
            camera: camera_feed,
            residual,
            episodes: episode_driver(cfg),
            bounds: crate::ingest::SetpointBounds::of(cfg),
        };
        let telemetry = TelemetryParts {
            collector,
            consumers,
            chunks: chunk_c,
            camera: camera_c,
        };
        Ok(Built {
            loop_parts,
            inference,
            camera,
            telemetry,
            shared,
        })
    }
}

/// The inference thread's side of `[episodes]` (none without): the reset planner at
/// the configured speed and at most half the arm's smallest acceleration limit.
fn episode_driver(cfg: &Config) -> Option<crate::inference::EpisodeDriver> {
    let plan = cfg.episode_plan()?;
    let e = cfg.episodes.as_ref()?;
    let limits = cfg.joint_limits();
    let acc = (0..plan.dof)
        .map(|j| limits.joint[j].max_acc_rad_s2)
        .fold(f64::INFINITY, f64::min);
    Some(crate::inference::EpisodeDriver::new(
        plan,
        e.reset_vel_rad_s,
        (0.5 * acc).min(4.0),
    ))
}

/// The residual policy on the inference thread and its corrections' handoff to the
/// control loop (none without a residual).
fn residual_stage(
    residual: Option<Box<dyn Policy>>,
) -> (
    Option<crate::inference::ResidualStage>,
    Option<chunkrt_buffer::Subscriber<Chunk>>,
) {
    match residual {
        Some(policy) => {
            let (p, s) = chunkrt_buffer::channel(Chunk::default());
            (
                Some(crate::inference::ResidualStage::new(policy, p)),
                Some(s),
            )
        }
        None => (None, None),
    }
}

/// The telemetry collector: logs (and the recording) in the output directory, and
/// the command oracle that checks the command stream it drains.
fn collector(cfg: &Config, opts: &RunOptions, t_start: MonoTime) -> Result<Collector, RunError> {
    let period_ns = cfg.period_ns();
    let gate_log_cap = (cfg.telemetry.gate_log_max_mb * (1u64 << 20) as f64) as u64;
    let collector = Collector::new(period_ns, t_start, opts.out_dir.as_deref())
        .map_err(|e| RunError::Output {
            dir: opts.out_dir.clone().unwrap_or_default(),
            message: e.to_string(),
        })?
        .with_gate_log_cap(gate_log_cap);
    let mut collector = match (&opts.out_dir, cfg.telemetry.record) {
        (Some(dir), true) => collector.with_recorder(recorder(cfg, dir, t_start)?),
        _ => collector,
    };
    if cfg.telemetry.intervention_records {
        let t = &cfg.telemetry;
        // The windows before and after, plus two drains: a trigger drained late still
        // finds its past when its window after closes.
        let span_ms =
            (t.intervention_before_s + t.intervention_after_s) * 1e3 + 2.0 * t.drain_interval_ms;
        let ring_cycles = (span_ms / cfg.control.period_ms).ceil() as usize + 1;
        collector = collector.with_interventions(
            t.intervention_before_s,
            t.intervention_after_s,
            ring_cycles,
        );
    }
    collector.set_chunk_age_check(chunkrt_telemetry::age_check::ChunkAgeCheck::new(
        cfg.control.period_ms,
        cfg.inference.chunk_period_ms,
        cfg.executor.max_chunk_age_ms,
    ));
    collector.set_command_oracle(chunkrt_telemetry::oracle::CommandOracle::new(
        &cfg.joint_limits(),
        cfg.executor_config().blend_ns,
        period_ns,
    ));
    Ok(collector)
}

/// How the inference thread chooses among candidate chunks.
fn selection_config(cfg: &Config) -> crate::select::SelectionConfig {
    let lim = cfg.joint_limits();
    let mut acc_max = [0.0; chunkrt_core::MAX_DOF];
    for (a, l) in acc_max.iter_mut().zip(lim.joint.iter()) {
        *a = l.max_acc_rad_s2;
    }
    let exec = cfg.executor_config();
    crate::select::SelectionConfig {
        // The scripted policy is deterministic: its candidates would be equal.
        candidates: match cfg.policy.kind {
            chunkrt_config::PolicyKind::Scripted | chunkrt_config::PolicyKind::Servo => 1,
            _ => cfg.policy.candidates,
        },
        dof: cfg.control.joints,
        acc_max,
        blend_ns: exec.blend_ns,
        transition: exec.seam == chunkrt_core::SeamMode::Transition,
        lookahead_ns: exec.lookahead_ns,
        budget_ns: chunkrt_core::ms_to_ns(cfg.inference.chunk_period_ms) / 4,
    }
}

/// What the control thread hands back: the loop, the host's real-time set-up, how
/// the loop ended and why the backend's shutdown failed, if it did.
struct Controlled {
    control: ControlLoop,
    host: HostInfo,
    ended: Ended,
    shutdown_error: Option<String>,
}

/// The started threads.
struct Threads {
    control: thread::JoinHandle<Result<Controlled, RunError>>,
    others: Others,
}

/// The threads besides the control thread, and what ends them.
struct Others {
    inference: thread::JoinHandle<InferenceExit>,
    camera: Option<thread::JoinHandle<()>>,
    camera_stop: Option<Arc<AtomicBool>>,
    telemetry: thread::JoinHandle<TelemetryParts>,
    shared: Shared,
}

impl Threads {
    /// Starts the camera, inference, telemetry and control threads, in that order.
    fn start(
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
    fn supervise(self) -> (Result<Controlled, RunError>, Others) {
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
fn start_camera(
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
fn start_inference(
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
struct DrainPace {
    drain_ns: u64,
    status_ns: u64,
    /// Print the live status line.
    live: bool,
}

/// The telemetry thread: drains the rings until the control thread has ended.
fn start_telemetry(
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
const SERVICE_STATUS_NS: u64 = 1_000_000_000;

/// How often the `[metrics]` endpoint's snapshot is renewed.
const LIVE_SNAPSHOT_NS: u64 = 250_000_000;

/// The telemetry thread's loop. After a panic the thread drains on (the rings must
/// not fill while the arm stops, and the stop belongs in the records); a second panic
/// means the collector cannot go on: the thread waits for the end and hands back what
/// it has.
fn drain_until_done(
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
fn start_control(
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
struct Stopped {
    controlled: Controlled,
    inference_exit: InferenceExit,
    collector: Collector,
    /// A chunk was published and never read by the loop.
    unread_at_end: bool,
    shared: Shared,
}

impl Others {
    /// Ends the inference, camera and telemetry threads once the control thread has
    /// ended, and drains what they left. When the control thread failed (nothing was
    /// brought up) they end without a report.
    fn stop(self, controlled: Result<Controlled, RunError>) -> Result<Stopped, RunError> {
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
fn join_camera(h: thread::JoinHandle<()>, failures: &Failures) {
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

/// The report from what the threads handed back, written to the output directory.
fn collect(cfg: &Config, opts: &RunOptions, stopped: Stopped) -> Result<RunOutcome, RunError> {
    let Stopped {
        controlled,
        inference_exit,
        mut collector,
        unread_at_end,
        shared,
    } = stopped;
    let Controlled {
        control,
        host,
        ended,
        shutdown_error,
    } = controlled;
    // What the rings cannot carry: the panics and how a quick stop ended, in
    // `events.jsonl` and the recording before they are closed.
    let thread_panics = shared.failures.panics();
    let stops = crate::signals::stop_requests();
    let quick_stop = ended.quick.map(|q| QuickStopOutcome {
        by_signal: stops >= 2,
        third_signal: stops >= 3,
        standstill: ended.standstill,
        after_ms: q as f64 * 1e-6,
        disabled: shutdown_error.is_none(),
    });
    note_stop(&mut collector, &thread_panics, quick_stop.as_ref());
    let metrics = collector.metrics().clone();
    let wear = collector.wear().clone();
    let (mut report, log_error) = collector.finish(host, ended.t1.diff_ns(ended.t0) as f64 * 1e-9);
    report_stop(&mut report, &thread_panics, quick_stop.as_ref());
    report_loop(&mut report, cfg, &control, opts, &shared, unread_at_end);
    if let Some(e) = &shutdown_error {
        report.extra.insert("shutdown_error".into(), json!(e));
    }
    let drive_lost = control.drive_lost().map(|joint| {
        format!(
            "the drive of joint {joint} left the bus or OP and could not be brought back; \
             the arm was brought to a controlled stop and the run ended"
        )
    });
    if let Some(e) = &drive_lost {
        report.extra.insert("drive_lost".into(), json!(e));
    }
    let mut records_error = None;
    if let Some(e) = log_error {
        report.extra.insert("log_error".into(), json!(e));
        records_error = Some(e);
    }
    let (inference_panicked, policy_unusable) =
        policy_outcome(&mut report, inference_exit, &shared.handoff);
    crate::wear::record(
        &mut report,
        cfg,
        &control,
        &wear,
        &opts.config_name,
        &mut records_error,
    );
    write_report(&report, opts, &mut records_error);
    if let Some(slot) = &shared.live {
        let last = slot.latest();
        slot.publish(chunkrt_telemetry::live::Snapshot::from_report(
            &report,
            last.as_deref(),
        ));
    }
    Ok(RunOutcome {
        report,
        inference_panicked,
        shutdown_error,
        drive_lost,
        metrics,
        records_error,
        thread_panics,
        quick_stop,
        policy_unusable,
    })
}

/// How the policy fared, in the report: whether it panicked (`inference_panic`), and
/// whether it produced no usable chunk in the whole run (`policy_unusable`).
fn policy_outcome(
    report: &mut Report,
    inference_exit: InferenceExit,
    handoff: &HandoffCounts,
) -> (Option<String>, Option<String>) {
    let panicked = match inference_exit {
        InferenceExit::Panicked(msg) => Some(msg),
        InferenceExit::Stopped => None,
    };
    let unusable = handoff.no_usable_chunk();
    for (key, msg) in [
        ("inference_panic", &panicked),
        ("policy_unusable", &unusable),
    ] {
        if let Some(m) = msg {
            report.extra.insert(key.into(), json!(m));
        }
    }
    (panicked, unusable)
}

/// The panics and how a quick stop ended, as notes in the records.
fn note_stop(
    collector: &mut Collector,
    thread_panics: &[supervise::ThreadPanic],
    quick_stop: Option<&QuickStopOutcome>,
) {
    for p in thread_panics {
        collector.note(&json!({"event": "thread_panic", "thread": p.thread, "message": p.message}));
    }
    if let Some(q) = quick_stop {
        collector.note(&json!({"event": "quick_stop", "detail": q.to_string()}));
    }
}

/// The panics and how a quick stop ended, in the report.
fn report_stop(
    report: &mut Report,
    thread_panics: &[supervise::ThreadPanic],
    quick_stop: Option<&QuickStopOutcome>,
) {
    if !thread_panics.is_empty() {
        report.extra.insert(
            "thread_panics".into(),
            json!(thread_panics
                .iter()
                .map(|p| json!({"thread": p.thread, "message": p.message}))
                .collect::<Vec<_>>()),
        );
    }
    if let Some(q) = quick_stop {
        report.extra.insert(
            "quick_stop".into(),
            json!({
                "by_signal": q.by_signal,
                "third_signal": q.third_signal,
                "standstill": q.standstill,
                "after_ms": q.after_ms,
                "disabled": q.disabled,
                "detail": q.to_string(),
            }),
        );
    }
}

/// What the loop counted, in the report: its own counters, the injection, the chunk
/// handoff and the backend's counters.
fn report_loop(
    report: &mut Report,
    cfg: &Config,
    control: &ControlLoop,
    opts: &RunOptions,
    shared: &Shared,
    unread_at_end: bool,
) {
    finish_report(report, cfg, control, opts);
    report.extra.insert(
        "injected".into(),
        crate::inject::describe(
            &cfg.inject,
            control.period_ns(),
            control.injection(),
            &shared.inject_counts,
        ),
    );
    record_handoff(report, control, &shared.handoff, unread_at_end);
    if !shared.policy_goals.is_empty() {
        // The goals a recorded chunk's `goal` index names (the learner's record of a
        // run without [episodes] takes each cycle's goal from them).
        report
            .config
            .insert("policy_goals_rad".into(), json!(shared.policy_goals));
    }
    control.backend.counters(&mut |name, value| {
        report.counters.insert(name.into(), value);
    });
}

/// `report.json` in the output directory; a failure is added to `records_error`.
fn write_report(report: &Report, opts: &RunOptions, records_error: &mut Option<String>) {
    if let Some(dir) = &opts.out_dir {
        if let Err(e) = chunkrt_telemetry::outdir::write_report(dir, &report.to_json()) {
            let e = format!("writing {}: {e}", dir.join("report.json").display());
            *records_error = Some(match records_error.take() {
                Some(first) => format!("{first}; {e}"),
                None => e,
            });
        }
    }
}

/// The channel ends the control loop is built with, on the control thread, once the
/// backend is up.
struct LoopParts {
    /// The wear ledger's totals (none: no `[wear]`): the thermal monitor's start.
    ledger: Option<chunkrt_telemetry::ledger::LedgerTotals>,
    chunks: chunkrt_buffer::Subscriber<Chunk>,
    /// The residual policy's correction chunks (none: the base alone).
    residual: Option<chunkrt_buffer::Subscriber<Chunk>>,
    observations: chunkrt_buffer::Publisher<Observation>,
    cycles_out: chunkrt_telemetry::CycleProducer,
    events_out: chunkrt_telemetry::EventProducer,
    /// The arm's measurement for the synthetic camera.
    world: Option<chunkrt_buffer::Publisher<Observation>>,
    /// The regions the policy's manifest excludes from its domain.
    exclusions: chunkrt_core::Exclusions,
}

/// On the control thread: brings the backend up, enables its drives (process data
/// flowing), then builds the loop at rest at the measured position. The first deadline
/// follows within a period.
///
/// A panic in the backend's start or enable is caught: the backend is shut down (its
/// own quick stop, disable, INIT) and the bring-up fails.
fn bring_up(
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
    let gate = gate(cfg, &first);
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
        .with_episodes(cfg.episode_plan(), cfg.residual_budget());
    // Delay lines of `[inject]` (issue 8); none when nothing is injected.
    let control = control.attach_injection(&cfg.inject, &first);
    Ok(match parts.world {
        Some(world) => control.with_world(world),
        None => control,
    })
}

/// The gate at rest at the first measurement, with the config's action filter and
/// torque slew limit.
fn gate(cfg: &Config, first: &Feedback) -> Gate {
    Gate::new(cfg.joint_limits(), cfg.period_ns(), &first.pos_rad)
        .with_action_filter(cfg.action_filter_hz())
        .with_torque_slew(cfg.torque_slew_jerk())
}

/// The full-rate recording in `dir` (`recording.mcap`), limits from `[telemetry]`.
fn recorder(
    cfg: &Config,
    dir: &std::path::Path,
    t_start: MonoTime,
) -> Result<chunkrt_telemetry::recording::Recorder, RunError> {
    use chunkrt_telemetry::recording::{ClockInfo, Recorder, RecordingLimits};
    let mib = |v: f64| (v * (1u64 << 20) as f64) as u64;
    let t = &cfg.telemetry;
    let limits = RecordingLimits {
        segment_bytes: mib(t.record_segment_mb),
        segment_ns: (t.record_segment_s * 1e9) as u64,
        total_bytes: mib(t.record_max_mb),
    };
    let wall_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    let clock = ClockInfo {
        t0: t_start,
        wall_minus_mono_ns: wall_ns - os::now().0 as i64,
    };
    let file = t
        .record_file
        .clone()
        .unwrap_or_else(|| dir.join("recording.mcap"));
    Recorder::create(&file, limits, clock).map_err(|e| RunError::Output {
        dir: dir.to_path_buf(),
        message: e.to_string(),
    })
}

/// One line on stderr that may fail: a closed pipe (`| head`) or a closed stderr
/// must not stop the telemetry thread, so the line is dropped instead.
fn console_line(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Real-time set-up of the control thread.
struct RtSetup {
    priority: u8,
    cpu: i32,
    lock_memory: bool,
    hold_cpu_dma_latency: bool,
}

impl RtSetup {
    /// Applies what it can and says in the host block what took effect; the
    /// `/dev/cpu_dma_latency` hold, when taken, lasts until it is dropped.
    fn apply(&self) -> (HostInfo, Option<os::DmaLatencyHold>) {
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
struct Ended {
    t0: MonoTime,
    t1: MonoTime,
    /// From the quick stop's start to the loop's end (ns), if the stop became one.
    quick: Option<u64>,
    /// The drives reported standstill at the end.
    standstill: bool,
}

/// The control thread's loop (`Schedule::step` until the controlled stop is over).
///
/// Each step runs under `catch_unwind`: a panic (in the cycle, the executor, the gate
/// or the backend's exchange) is recorded in `failures`, whose flag makes the next
/// step start the quick stop with the same loop (the gate brakes its own commanded
/// state; the drives are asked for their quick stop). A second panic ends the loop at
/// once: the backend's shutdown follows, its own frames, independent of the loop.
fn control_thread(
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
fn shut_down(control: &mut ControlLoop, failures: &Failures) -> Option<String> {
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

/// The counts that close the books on cycles and chunks (see `ChunkCounts`):
///
/// `cycles_run = cycles + ring_drops_cycle`;
/// `chunks_published = chunks_offered + chunks_overwritten_in_handoff +
/// chunks_ignored_stopping + chunks_unread_at_end`.
///
/// `chunks_published` is the inference thread's own count, which a full inference
/// ring cannot lose (the collector's count of inference records can).
fn record_handoff(
    report: &mut Report,
    control: &ControlLoop,
    handoff: &HandoffCounts,
    unread_at_end: bool,
) {
    for (k, v) in [
        ("cycles_run", control.cycles_run()),
        (
            "chunks_published",
            handoff.published.load(Ordering::Relaxed),
        ),
        (
            "chunks_overwritten_in_handoff",
            handoff.overwritten.load(Ordering::Relaxed) + control.chunks_overwritten_waiting(),
        ),
        (
            "replay_late",
            handoff.replay_late.load(Ordering::Relaxed) + control.chunks_played_late(),
        ),
        ("chunks_unread_at_end", u64::from(unread_at_end)),
        (
            "residual_failed",
            handoff.residual_failed.load(Ordering::Relaxed),
        ),
        (
            "residual_out_of_domain",
            handoff.residual_out_of_domain.load(Ordering::Relaxed),
        ),
        (
            "residual_non_finite",
            handoff.residual_non_finite.load(Ordering::Relaxed),
        ),
        (
            "residual_refused",
            control.residual().map_or(0, |r| r.refused()),
        ),
        (
            "chunks_out_of_bounds",
            handoff.out_of_bounds.load(Ordering::Relaxed),
        ),
    ] {
        report.counters.insert(k.into(), v);
    }
}

fn finish_report(report: &mut Report, cfg: &Config, control: &ControlLoop, opts: &RunOptions) {
    let ex = &control.executor;
    let seam = ex.seam_stats();
    report.seam.insert("seam_count".into(), seam.seams as f64);
    report
        .seam
        .insert("seam_max_pos_step_rad".into(), seam.max_pos_step_rad);
    report
        .seam
        .insert("seam_max_vel_step_rad_s".into(), seam.max_vel_step_rad_s);
    report
        .seam
        .insert("seam_max_acc_step_rad_s2".into(), seam.max_acc_step_rad_s2);
    report
        .seam
        .insert("seam_blend_restarts".into(), seam.blend_restarts as f64);
    // The executor is the authority on the chunk life cycle (see ChunkCounts).
    let c = ex.counts();
    for (k, v) in [
        ("chunks_offered", c.offered),
        ("chunks_accepted", c.accepted),
        ("chunks_rejected", c.rejected),
        ("chunks_used", c.used),
        ("chunks_superseded", c.superseded),
        ("chunks_discarded", c.discarded),
        ("chunks_expired", c.expired),
        ("chunks_horizon_ended", c.horizon_ended),
        ("chunks_pending", c.pending),
        ("fallback_entries", c.fallback_entries),
        ("mode_events_dropped", ex.events_dropped()),
        ("chunks_ignored_stopping", control.chunks_ignored_stopping()),
    ] {
        report.counters.insert(k.into(), v);
    }
    if let Some(peaks) = control.thermal_peaks() {
        // The I²t high-water mark per joint (load 1: the drive's own limit).
        let dof = cfg.control.joints.min(peaks.len());
        report
            .extra
            .insert("thermal_peak_load".into(), json!(peaks[..dof].to_vec()));
    }
    if let Some(seed) = control.thermal_seed() {
        // Where the monitor started: the ledger's last load, cooled, or the worst case.
        let dof = cfg.control.joints.min(seed.load.len());
        report.extra.insert(
            "thermal_initial_load".into(),
            json!(seed.load[..dof].to_vec()),
        );
        report
            .extra
            .insert("thermal_initial_from".into(), json!(seed.from));
    }
    for (i, n) in control.gate_counts().iter().enumerate() {
        report.gate.insert(
            chunkrt_telemetry::collector::constraint_name_index(i).into(),
            *n,
        );
    }
    report.config = report_config(cfg, opts, control.backend.name());
}

/// The report's `config`: what the run was, in a few keys (the file, the backend and its
/// model, the policy and the checkpoints its commands came from, the timing, the
/// episodes' plan).
fn report_config(
    cfg: &Config,
    opts: &RunOptions,
    backend: &str,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut conf = std::collections::BTreeMap::new();
    conf.insert("file".into(), json!(opts.config_name));
    conf.insert("backend".into(), json!(backend));
    if let (chunkrt_config::BackendKind::Mujoco, Some(m)) = (cfg.backend.kind, &cfg.mujoco) {
        // The arm model the run was on: the file, and the digest it was checked against.
        conf.insert(
            "backend_model".into(),
            json!(cfg.resolve(&m.model).display().to_string()),
        );
        conf.insert("backend_model_sha256".into(), json!(m.model_sha256));
        if let Some(files) = &m.model_files_sha256 {
            // The files it names (includes, meshes), loaded with it.
            conf.insert("backend_model_files_sha256".into(), json!(files));
        }
    }
    conf.insert(
        "policy".into(),
        json!(format!("{:?}", cfg.policy.kind).to_lowercase()),
    );
    // The checkpoints the run's commands came from (the learner's record cites them):
    // the base's model digest and, with a residual in authority, the residual's.
    if let Some(m) = &cfg.policy.manifest {
        let path = cfg.resolve(m);
        if let Ok(sha) = crate::build::model_sha256(&path) {
            conf.insert("policy_manifest".into(), json!(path.display().to_string()));
            conf.insert("policy_model_sha256".into(), json!(sha));
            // In process the model file's digest is checked at load; a policy server
            // proved it unless `verify_model = false` let one through that could not.
            let verified = cfg.policy.remote.as_ref().is_none_or(|r| r.verify_model);
            conf.insert("policy_model_verified".into(), json!(verified));
        }
    }
    if let Some(r) = &cfg.policy.residual {
        let path = cfg.resolve(&r.manifest);
        if let Ok(sha) = crate::build::model_sha256(&path) {
            conf.insert(
                "residual_manifest".into(),
                json!(path.display().to_string()),
            );
            conf.insert("residual_model_sha256".into(), json!(sha));
        }
    }
    conf.insert("period_ms".into(), json!(cfg.control.period_ms));
    conf.insert(
        "chunk_period_ms".into(),
        json!(cfg.inference.chunk_period_ms),
    );
    conf.insert(
        "max_chunk_age_ms".into(),
        json!(cfg.executor.max_chunk_age_ms),
    );
    conf.insert("blend_ms".into(), json!(cfg.executor.blend_ms));
    conf.insert("joints".into(), json!(cfg.control.joints));
    if let Some(e) = &cfg.episodes {
        // The episodes' poses: the learner's record names each episode's goal by them.
        conf.insert("episodes".into(), json!(e));
    }
    conf
}

/// Opens the camera and builds its thread's parts, the inference thread's feed and the
/// telemetry ring. Kept out of [`Runtime::run`]'s stack frame: a `Frame` is 48 KiB, and
/// `run` is called from test threads with the default stack.
#[inline(never)]
fn camera_parts(
    inject: chunkrt_config::InjectConfig,
    cam_cfg: &chunkrt_config::CameraConfig,
    size: (usize, usize),
    world: chunkrt_buffer::Subscriber<Observation>,
    record_images: bool,
) -> Result<
    (
        crate::camera::CameraParts,
        crate::camera::CameraFeed,
        chunkrt_telemetry::CameraConsumer,
    ),
    RunError,
> {
    let camera =
        crate::camera::open(cam_cfg, world).map_err(|e| RunError::Camera(e.to_string()))?;
    tracing::info!("{}", camera.describe());
    let (frames_pub, frames_sub) = chunkrt_buffer::channel(chunkrt_camera::Frame::default());
    // The images the policy is given, for the recording: 16 (half a second at 30 fps,
    // five drains) before one is dropped.
    let images = if record_images { 16 } else { 0 };
    let (camera_p, camera_c) = chunkrt_telemetry::camera_ring(4096, images);
    Ok((
        crate::camera::CameraParts {
            camera,
            frames: frames_pub,
            records: camera_p,
            spec: crate::camera::spec(cam_cfg, size),
            stop: Arc::new(AtomicBool::new(false)),
            inject: crate::camera::CameraInjection::new(&inject),
        },
        crate::camera::CameraFeed {
            frames: frames_sub,
            max_age_ns: chunkrt_core::ms_to_ns(cam_cfg.max_age_ms),
        },
        camera_c,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> RunOutcome {
        RunOutcome {
            report: Report::default(),
            inference_panicked: None,
            shutdown_error: None,
            drive_lost: None,
            metrics: MetricSet::default(),
            records_error: None,
            thread_panics: Vec::new(),
            quick_stop: None,
            policy_unusable: None,
        }
    }

    /// The most serious of what happened decides, in the documented order (README
    /// "Reliability": 4, 7, 6, 3, 9, 8, 5), each added on top of the less serious ones.
    #[test]
    fn the_most_serious_ending_wins() {
        let mut o = outcome();
        assert_eq!(o.ending(), Ending::Normal);
        assert_eq!(o.describe_ending(), "");
        o.records_error = Some("disk full".into());
        assert_eq!(o.ending(), Ending::RecordsIncomplete);
        o.quick_stop = Some(QuickStopOutcome {
            by_signal: true,
            third_signal: false,
            standstill: true,
            after_ms: 40.0,
            disabled: true,
        });
        assert_eq!(o.ending(), Ending::QuickStopped);
        o.policy_unusable = Some("no usable chunk".into());
        assert_eq!(o.ending(), Ending::PolicyUnusable);
        o.inference_panicked = Some("policy".into());
        assert_eq!(o.ending(), Ending::PolicyFailed);
        o.drive_lost = Some("joint 3".into());
        assert_eq!(o.ending(), Ending::DriveLost);
        o.thread_panics.push(supervise::ThreadPanic {
            thread: "chunkrt-telemetry".into(),
            message: "boom".into(),
        });
        assert_eq!(o.ending(), Ending::ThreadPanicked);
        o.shutdown_error = Some("drive 2 still enabled".into());
        assert_eq!(o.ending(), Ending::ShutdownFailed);
        // Every item is said, the shutdown first.
        let d = o.describe_ending();
        assert!(
            d.starts_with("the shutdown failed: drive 2 still enabled"),
            "{d}"
        );
        for part in [
            "chunkrt-telemetry panicked: boom",
            "joint 3",
            "policy",
            "no usable chunk",
            "disk full",
        ] {
            assert!(d.contains(part), "{part} missing from {d}");
        }
        // A quick stop a panic caused is not a quick stop by signal.
        let mut o = outcome();
        o.quick_stop = Some(QuickStopOutcome {
            by_signal: false,
            third_signal: false,
            standstill: false,
            after_ms: 1000.0,
            disabled: true,
        });
        assert_eq!(o.ending(), Ending::Normal);
        assert!(o.describe_ending().contains("no standstill within 1000 ms"));
    }
}
