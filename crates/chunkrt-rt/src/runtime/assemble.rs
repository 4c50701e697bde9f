//! Building a run before anything moves: the listeners, the output directory, the
//! rings, executor, gate, collector and recorder, the camera's parts, the residual stage.

use super::control_thread::LoopParts;
use super::outcome::RunOptions;
use crate::error::RunError;
use crate::inference::{ControlGrid, HandoffCounts, InferenceParts};
use crate::os;
use crate::supervise::Failures;
use chunkrt_config::Config;
use chunkrt_core::{Chunk, MonoTime, Observation, Policy};
use chunkrt_telemetry::live::serve::MetricsServer;
use chunkrt_telemetry::live::LiveSlot;
use chunkrt_telemetry::{rings, CameraConsumer, ChunkConsumer, Collector, RingConsumers};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The `[live_view]` server, bound before anything moves (an address that cannot be
/// bound is a configuration error, exit 2).
pub(super) fn start_live_view(
    cfg: &Config,
) -> Result<Option<crate::live_view::LiveView>, RunError> {
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
pub(super) fn start_metrics(
    cfg: &Config,
) -> Result<(Option<Arc<LiveSlot>>, Option<MetricsServer>), RunError> {
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
pub(super) fn policy_goals(cfg: &Config, policy: &dyn Policy) -> Vec<Vec<f64>> {
    let dof = cfg.control.joints.min(chunkrt_core::MAX_DOF);
    policy.goals().iter().map(|g| g[..dof].to_vec()).collect()
}

/// The output directory, made before anything moves.
pub(super) fn make_out_dir(opts: &RunOptions) -> Result<(), RunError> {
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
pub(super) fn check_camera(
    cfg: &Config,
    image_size: Option<(usize, usize)>,
) -> Result<(), RunError> {
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
pub(super) struct Shared {
    /// Ends the inference thread (set by the control thread's stop, and after it).
    pub(super) stop_inference: Arc<AtomicBool>,
    /// The policy failed (the inference thread caught its panic).
    pub(super) policy_failed: Arc<AtomicBool>,
    /// The control thread has ended: the telemetry thread drains once more and ends.
    pub(super) control_done: Arc<AtomicBool>,
    pub(super) handoff: Arc<HandoffCounts>,
    pub(super) grid: Arc<ControlGrid>,
    pub(super) failures: Arc<Failures>,
    pub(super) inject_counts: Arc<crate::inject::InjectCounts>,
    /// What the `[metrics]` endpoint serves (none without it).
    pub(super) live: Option<Arc<LiveSlot>>,
    /// The policy's goals as loaded (the report's `config.policy_goals_rad`).
    pub(super) policy_goals: Vec<Vec<f64>>,
}

impl Shared {
    pub(super) fn new(cfg: &Config) -> Shared {
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
pub(super) struct TelemetryParts {
    pub(super) collector: Collector,
    pub(super) consumers: RingConsumers,
    pub(super) chunks: ChunkConsumer,
    pub(super) camera: Option<CameraConsumer>,
}

/// Everything the threads need, built before any starts: nothing is brought up yet
/// (a camera that cannot be opened fails the run here, before a drive is touched).
pub(super) struct Built {
    pub(super) loop_parts: LoopParts,
    pub(super) inference: InferenceParts,
    pub(super) camera: Option<(crate::camera::CameraParts, i32)>,
    pub(super) telemetry: TelemetryParts,
    pub(super) shared: Shared,
}

impl Built {
    pub(super) fn new(
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
        let CameraSides {
            thread: camera,
            feed: camera_feed,
            consumer: camera_c,
            world,
        } = camera_sides(cfg, image_size, recording)?;
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
            cartesian: crate::build::cartesian(cfg)?,
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
pub(super) fn episode_driver(cfg: &Config) -> Option<crate::inference::EpisodeDriver> {
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
pub(super) fn residual_stage(
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
pub(super) fn collector(
    cfg: &Config,
    opts: &RunOptions,
    t_start: MonoTime,
) -> Result<Collector, RunError> {
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
pub(super) fn selection_config(cfg: &Config) -> crate::select::SelectionConfig {
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

/// The full-rate recording in `dir` (`recording.mcap`), limits from `[telemetry]`.
pub(super) fn recorder(
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

/// The camera's part for each thread (all none without a camera, or for a policy that
/// takes no image): the camera thread and its CPU, the inference thread's feed, the
/// telemetry thread's consumer, the control loop's view of the arm.
#[derive(Default)]
pub(super) struct CameraSides {
    thread: Option<(crate::camera::CameraParts, i32)>,
    feed: Option<crate::camera::CameraFeed>,
    consumer: Option<chunkrt_telemetry::CameraConsumer>,
    world: Option<chunkrt_buffer::Publisher<Observation>>,
}

/// The camera's parts when the config has a camera and the policy an image size (out
/// of line, as `camera_parts`).
#[inline(never)]
fn camera_sides(
    cfg: &Config,
    image_size: Option<(usize, usize)>,
    recording: bool,
) -> Result<CameraSides, RunError> {
    let (Some(cam_cfg), Some(size)) = (&cfg.camera, image_size) else {
        return Ok(CameraSides::default());
    };
    let (world_pub, world_sub) = chunkrt_buffer::channel(Observation::default());
    let (parts, feed, consumer) =
        camera_parts(cfg.inject.clone(), cam_cfg, size, world_sub, recording)?;
    Ok(CameraSides {
        thread: Some((parts, cam_cfg.cpu)),
        feed: Some(feed),
        consumer: Some(consumer),
        world: Some(world_pub),
    })
}

/// Opens the camera and builds its thread's parts, the inference thread's feed and the
/// telemetry ring. Kept out of [`Runtime::run`]'s stack frame: a `Frame` is 48 KiB, and
/// `run` is called from test threads with the default stack.
#[inline(never)]
pub(super) fn camera_parts(
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
