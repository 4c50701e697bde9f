//! The configuration schema. Every table denies unknown keys; units are in key names.

use crate::perjoint::PerJoint;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A whole chunkrt configuration (`rt-config/sim.toml` is the default).
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The control loop.
    pub control: ControlConfig,
    /// The inference thread.
    #[serde(default)]
    pub inference: InferenceConfig,
    /// The policy that produces chunks.
    pub policy: PolicyConfig,
    /// The chunk executor.
    #[serde(default)]
    pub executor: ExecutorSection,
    /// Joint limits enforced by the permission gate.
    pub limits: LimitsConfig,
    /// The tool point's limits in the base frame: speed, approach to declared planes
    /// (`[cartesian]`; absent: joint space only).
    #[serde(default)]
    pub cartesian: Option<crate::cartesian::CartesianConfig>,
    /// The wrist force/torque sensor on the permission path (`[force]`; absent: force
    /// is recorded where the backend measures it, and nothing acts on it).
    #[serde(default)]
    pub force: Option<crate::force::ForceConfig>,
    /// Declared operating domain (support monitor); absent: no box check.
    #[serde(default)]
    pub domain: Option<DomainConfig>,
    /// Which backend drives the arm.
    pub backend: BackendConfig,
    /// The simulated arm (used when `backend.kind = "sim"`).
    #[serde(default)]
    pub sim: Option<SimConfig>,
    /// The EtherCAT bus (required when `backend.kind = "ethercat"`).
    #[serde(default)]
    pub ethercat: Option<crate::ethercat::EthercatConfig>,
    /// The physics-modelled arm (required when `backend.kind = "mujoco"`; with
    /// `"ethercat"`, the arm `chunkrt ecsim --arm` simulates behind the drives).
    #[serde(default)]
    pub mujoco: Option<MujocoConfig>,
    /// Telemetry rings and reports.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// Delay and loss injection (`[inject]`; absent: nothing injected).
    #[serde(default)]
    pub inject: crate::inject::InjectConfig,
    /// The camera a policy conditioned on images sees (`[camera]`; absent: none).
    #[serde(default)]
    pub camera: Option<CameraConfig>,
    /// The wear ledger (`[wear]`; absent: none kept, the report still says this run's
    /// wear).
    #[serde(default)]
    pub wear: Option<WearConfig>,
    /// The run as a sequence of episodes (`[episodes]`; absent: one continuous run).
    #[serde(default)]
    pub episodes: Option<EpisodesConfig>,
    /// The operator's command channel (`[operator]`).
    #[serde(default)]
    pub operator: Option<OperatorConfig>,
    /// The live OpenMetrics/Prometheus endpoint (`[metrics]`; absent: none).
    #[serde(default)]
    pub metrics: Option<MetricsConfig>,
    /// The live view: the recording's channels over the Foxglove WebSocket protocol
    /// (`[live_view]`; absent: none).
    #[serde(default)]
    pub live_view: Option<LiveViewConfig>,
    /// Directory of the file the config came from (relative paths resolve against it).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// The control loop.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlConfig {
    /// Bus / control period (1 to 20 ms; the 20 ms setpoint grid is independent).
    pub period_ms: f64,
    /// SCHED_FIFO priority of the control thread (1-99).
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// CPU the control thread is pinned to (`-1`: not pinned).
    #[serde(default = "default_control_cpu")]
    pub cpu: i32,
    /// Lock all memory (`mlockall`) and prefault the stack.
    #[serde(default = "yes")]
    pub lock_memory: bool,
    /// Hold `/dev/cpu_dma_latency` at 0 while the loop runs (no deep C-states, as
    /// cyclictest does); without the device or permission the run goes on and its
    /// report's `host` block says why.
    #[serde(default = "yes")]
    pub hold_cpu_dma_latency: bool,
    /// Number of joints of the arm.
    pub joints: usize,
    /// How long the quick stop (a second stop request, a thread's panic) waits for
    /// the drives to report standstill before they are disabled anyway.
    #[serde(default = "default_quick_stop_timeout")]
    pub quick_stop_timeout_ms: f64,
}

fn default_quick_stop_timeout() -> f64 {
    1000.0
}

/// The inference thread.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InferenceConfig {
    /// Period of the absolute chunk schedule.
    #[serde(default = "default_chunk_period")]
    pub chunk_period_ms: f64,
    /// CPU the inference thread is pinned to (`-1`: not pinned).
    #[serde(default = "minus_one")]
    pub cpu: i32,
    /// Time of setpoint 0 relative to the observation's capture time.
    #[serde(default)]
    pub start_offset_ms: f64,
    /// Kinematic extrapolation (Smith-predictor style): the measured positions the
    /// policy is given are moved on by the measured velocity times the
    /// observation's age when inference begins (its capture to now: a delayed
    /// observation or feedback path included). Times are left as they are.
    #[serde(default)]
    pub extrapolate_observation: bool,
}

impl Default for InferenceConfig {
    fn default() -> Self {
        InferenceConfig {
            chunk_period_ms: default_chunk_period(),
            cpu: -1,
            start_offset_ms: 0.0,
            extrapolate_observation: false,
        }
    }
}

/// Which policy produces chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// The analytic closed-loop planner (no ONNX).
    Scripted,
    /// An integral servo as a policy: holds `goals_rad[0]` (without goals: where the
    /// arm was first observed) by integrating the measured error at `gain_per_s`
    /// (the loop `chunkrt margin` can predict).
    Servo,
    /// An ONNX denoiser with its manifest, run through ONNX Runtime.
    Onnx,
    /// The policy a manifest describes, its sampler run by a policy server on another
    /// machine (`[policy.remote]`); everything else as `onnx`.
    Remote,
}

impl PolicyKind {
    /// Whether the policy is a manifest's model (`onnx`, `remote`): goals from the
    /// manifest, sampled chunks, a declared domain.
    pub fn is_learned(self) -> bool {
        matches!(self, PolicyKind::Onnx | PolicyKind::Remote)
    }
}

/// The policy.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// `scripted`, `servo`, `onnx` or `remote`.
    pub kind: PolicyKind,
    /// Integral gain of the `servo` policy (1/s): its crossover is near
    /// `gain_per_s / 2 pi` Hz.
    #[serde(default = "default_servo_gain")]
    pub gain_per_s: f64,
    /// Setpoints per chunk (scripted policy; ONNX models take it from the manifest).
    #[serde(default = "default_horizon")]
    pub horizon: usize,
    /// Setpoint period (scripted policy; ONNX models take it from the manifest).
    #[serde(default = "default_dt")]
    pub dt_ms: f64,
    /// Goal poses the policy cycles through, one list of joint positions each.
    #[serde(default)]
    pub goals_rad: Vec<Vec<f64>>,
    /// Replays a recorded run's goal changes (an `onnx` policy with a goal list):
    /// `[[cycle, goal], ...]`, from the observation captured in that cycle on, that
    /// goal (its index); the goals then do not advance on arrival. The margin
    /// instrument runs a moving policy's probed run on its unprobed twin's schedule
    /// (docs/margin.md). Empty: goals advance on arrival.
    #[serde(default)]
    pub goal_schedule: Vec<[u64; 2]>,
    /// Replays a recorded run's chunks: `[[cycle, drawn, chosen, played], ...]`: the
    /// observation captured in that cycle is taken (the inference thread waits for
    /// it, whatever its own schedule), that many candidates are drawn (whatever the
    /// time budget), that one is published, and the control loop takes it up in
    /// cycle `played`, not before (0: when it arrives). With `goal_schedule`, a run
    /// repeats the recorded one's discrete decisions and their timing on the control
    /// grid (the margin instrument's probed run on its twin's). Empty: the inference
    /// thread's own schedule, drawn within the budget, the best published.
    #[serde(default)]
    pub draw_schedule: Vec<[u64; 4]>,
    /// Cruise speed of the scripted planner.
    #[serde(default = "default_policy_vel")]
    pub max_vel_rad_s: f64,
    /// Path of the policy manifest (ONNX), relative to this file.
    #[serde(default)]
    pub manifest: Option<PathBuf>,
    /// Path of `libonnxruntime.so` (else `ORT_DYLIB_PATH`, else `.ort/lib`).
    #[serde(default)]
    pub ort_library: Option<PathBuf>,
    /// ONNX Runtime execution provider: `cpu`, `cuda` or `tensorrt`.
    #[serde(default = "default_ep")]
    pub execution_provider: String,
    /// Sampler (`euler`, `heun`, `ddim`; default from the manifest).
    #[serde(default)]
    pub sampler: Option<String>,
    /// Sampler steps (default from the manifest).
    #[serde(default)]
    pub steps: Option<usize>,
    /// Anytime sampling: the chunk must be ready within this many ms (0: off).
    #[serde(default)]
    pub deadline_ms: f64,
    /// Anytime sampling: never fewer steps than this (default from the manifest).
    #[serde(default)]
    pub min_steps: Option<usize>,
    /// Seed of the sampler noise.
    #[serde(default)]
    pub seed: u64,
    /// Intra-op threads for ONNX Runtime.
    #[serde(default = "one")]
    pub threads: usize,
    /// Candidate chunks drawn per observation; the one that continues the trajectory
    /// being played most smoothly is published (1: no selection).
    #[serde(default = "one")]
    pub candidates: usize,
    /// The state the policy observes: `manifest` (what its manifest declares it was
    /// trained on, `encoding.state`), `measured`, `commanded` (the last command and its
    /// velocity: chunks then start where the command stream is, not where the lagging
    /// measurement is) or `planned` (the trajectory being played without the seam blends
    /// toward it: the policy continues its own plan).
    #[serde(default = "default_state_source")]
    pub state_source: String,
    /// Low-pass each sampled chunk onto polynomials of degree below this over the horizon
    /// (removes setpoint-to-setpoint jitter a sampler run with few steps leaves; 0: off).
    #[serde(default = "default_smoothing_modes")]
    pub smoothing_modes: usize,
    /// The policy server (`kind = "remote"`).
    #[serde(default)]
    pub remote: Option<RemoteConfig>,
    /// A residual policy on top of this (frozen) base (`[policy.residual]`).
    #[serde(default)]
    pub residual: Option<ResidualConfig>,
}

/// `[policy.residual]`: a residual policy (a format-2 manifest with `[residual]`, bound
/// to the base's model by its SHA-256) whose correction chunk is added to the base's,
/// through the residual stage: per joint within `bound_rad`, changing by at most
/// `rate_rad_s` with its acceleration and jerk bounded (`acc_rad_s2`, `jerk_rad_s3`), and
/// only inside `[policy.residual.region]` (faded at its faces); nothing once the policy's
/// authority is withdrawn.
/// `chunkrt run --frozen` leaves it out: the base alone.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResidualConfig {
    /// The residual policy's manifest, relative to this file.
    pub manifest: PathBuf,
    /// The largest correction per joint (rad).
    pub bound_rad: PerJoint,
    /// The largest change of the correction per joint (rad/s), below the speed limit.
    pub rate_rad_s: PerJoint,
    /// The largest acceleration of the correction per joint (rad/s²), at most
    /// `limits.max_acc_rad_s2`; absent: a tenth of it, which leaves the base nine tenths
    /// of the joint's acceleration while a correction sets in or goes away.
    #[serde(default)]
    pub acc_rad_s2: Option<PerJoint>,
    /// The largest jerk of the correction per joint (rad/s³), at most
    /// `limits.max_jerk_rad_s3`; absent: a tenth of it.
    #[serde(default)]
    pub jerk_rad_s3: Option<PerJoint>,
    /// Where the correction may act (absent: wherever the policy plays).
    #[serde(default)]
    pub region: Option<RegionConfig>,
    /// Its intervention budget, judged at the end of every episode (needs
    /// `[episodes]`): past it the residual loses authority for the rest of the run.
    #[serde(default)]
    pub budget: Option<BudgetConfig>,
}

/// `[operator]`: a UNIX socket, and or the process's standard input, taking `stop`,
/// `intervene` and `rearm` (or their keys `s`, `i`, `r`), one per line.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperatorConfig {
    /// The socket's path, relative to this file: created mode 0600 (0660 with `group`);
    /// a socket left there by an earlier run is replaced, any other file refused.
    #[serde(default)]
    pub socket: Option<PathBuf>,
    /// A group whose members may use the socket besides chunkrt's own user and root
    /// (the socket is then mode 0660, of this group).
    #[serde(default)]
    pub group: Option<String>,
    /// Read the commands from standard input too (a key and Enter at the terminal that
    /// started the run).
    #[serde(default)]
    pub stdin: bool,
}

/// `[metrics]`: the run's counters, gate interventions, stage latencies, mode and wear
/// as OpenMetrics text at `http://LISTEN/metrics`, served by a thread of its own from
/// the telemetry thread's snapshots (never from the control thread).
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// The address and port to listen on, e.g. `127.0.0.1:9464` (port 0: any free
    /// one); a loopback address unless `allow_remote`.
    pub listen: String,
    /// Let an address other than loopback be named (anyone who can reach it reads the
    /// run's figures; nothing can be changed through it).
    #[serde(default)]
    pub allow_remote: bool,
    /// How long the endpoint goes on serving the run's final values (the report's)
    /// after the run has ended, so that a scraper sees them (ms, 0 to 600000).
    #[serde(default)]
    pub linger_ms: f64,
}

/// `[live_view]`: the recording's channels (cycles, inference calls, events, chunks,
/// camera images) published live over the Foxglove WebSocket protocol (the Foxglove
/// SDK's server) for Foxglove to open as a live connection, from the telemetry thread,
/// each channel at most `rate_hz` (events: every one).
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiveViewConfig {
    /// The address and port to listen on, e.g. `127.0.0.1:8765` (port 0: any free
    /// one); a loopback address unless `allow_remote`.
    pub listen: String,
    /// Let an address other than loopback be named (anyone who reaches it sees the
    /// arm's state; nothing can be changed through it).
    #[serde(default)]
    pub allow_remote: bool,
    /// The most messages per second on each channel but the events (0.1 to 1000).
    #[serde(default = "default_live_rate")]
    pub rate_hz: f64,
    /// Clients connected at once (1 to 64); one more is closed at once.
    #[serde(default = "default_live_clients")]
    pub max_clients: u32,
}

fn default_live_rate() -> f64 {
    10.0
}

fn default_live_clients() -> u32 {
    4
}

/// `[policy.residual.budget]`: each figure optional; at least one.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Cycles in which the permission gate acted, per episode.
    #[serde(default)]
    pub max_gate_interventions: Option<u64>,
    /// Operator stops within the last `window_episodes` episodes.
    #[serde(default)]
    pub max_operator_stops: Option<u32>,
    /// The operator-stop window (1 to 64 episodes).
    #[serde(default = "default_budget_window")]
    pub window_episodes: u32,
    /// An episode's tracking error P99 (rad).
    #[serde(default)]
    pub max_tracking_error_p99_rad: Option<f64>,
}

fn default_budget_window() -> u32 {
    10
}

/// `[episodes]`: the run as a sequence of episodes, each from a start pose toward a goal
/// with a time limit and a success rule, a reset move under the gate between them.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EpisodesConfig {
    /// Episodes to run (default: one per start pose).
    #[serde(default)]
    pub count: Option<u32>,
    /// Start poses (rad, one list per pose); episode k starts at `starts_rad[k % n]`.
    pub starts_rad: Vec<Vec<f64>>,
    /// Which start poses are held out (evaluation only), one flag per pose.
    #[serde(default)]
    pub held_out: Vec<bool>,
    /// Goals (rad); episode k pursues `goals_rad[k % n]`.
    pub goals_rad: Vec<Vec<f64>>,
    /// An episode's time limit (s).
    pub time_limit_s: f64,
    /// The reset move's time limit (s); past it the run ends.
    #[serde(default = "default_reset_limit")]
    pub reset_limit_s: f64,
    /// Success: every joint within this of the goal (rad).
    #[serde(default = "default_episode_tolerance")]
    pub tolerance_rad: f64,
    /// A reset is done within this of the start pose (rad; default `tolerance_rad`): a
    /// start need not be as exact as a goal, and on a worn arm the reset planner, which
    /// does not learn, may not reach the goal's tolerance.
    #[serde(default)]
    pub reset_tolerance_rad: Option<f64>,
    /// And slower than this (rad/s).
    #[serde(default = "default_settle_vel")]
    pub settle_vel_rad_s: f64,
    /// For this long (ms).
    #[serde(default = "default_settle_ms")]
    pub settle_ms: f64,
    /// The reset planner's cruise speed (rad/s).
    #[serde(default = "default_reset_vel")]
    pub reset_vel_rad_s: f64,
}

fn default_reset_limit() -> f64 {
    20.0
}
fn default_episode_tolerance() -> f64 {
    0.05
}
fn default_settle_vel() -> f64 {
    0.05
}
fn default_settle_ms() -> f64 {
    200.0
}
fn default_reset_vel() -> f64 {
    0.5
}

/// `[policy.residual.region]`: a box of joint positions, judged on the base's setpoint;
/// the correction is zero outside it and fades in over `fade_rad` inside its faces.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegionConfig {
    /// Lower corner per joint (rad).
    pub lo_rad: PerJoint,
    /// Upper corner per joint (rad).
    pub hi_rad: PerJoint,
    /// The fade band's depth (rad).
    pub fade_rad: f64,
}

/// A policy server (`[policy.remote]`): openpi's WebSocket protocol or the Open
/// Inference Protocol v2 over gRPC.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RemoteConfig {
    /// `openpi` (WebSocket, msgpack with NumPy arrays) or `oip` (Open Inference Protocol
    /// v2 over gRPC: KServe, Triton, MLServer).
    #[serde(default = "default_remote_protocol")]
    pub protocol: String,
    /// openpi: `ws://host:port[/path]` or `wss://...`; OIP: `http://host:port` or
    /// `https://...` (its gRPC port). Plain text only to this host, unless
    /// `allow_plaintext_remote`.
    pub url: String,
    /// The model's name on an OIP server (`protocol = "oip"`).
    #[serde(default)]
    pub model: Option<String>,
    /// The environment variable that holds the server's API token (openpi: sent as
    /// `Authorization: Api-Key <token>`; OIP: `authorization: Bearer <token>`); the token
    /// itself never sits in the file.
    #[serde(default)]
    pub token_env: Option<String>,
    /// PEM file of the certificate authorities a TLS server must chain to
    /// (relative to this file; default: the Mozilla roots).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Allows `ws://` or `http://` to another host: observations in clear text on the
    /// network.
    #[serde(default)]
    pub allow_plaintext_remote: bool,
    /// Longest wait for a connection (TCP, TLS, handshake, the server's metadata).
    #[serde(default = "default_remote_connect_ms")]
    pub connect_timeout_ms: f64,
    /// Longest wait for a chunk once asked.
    #[serde(default = "default_remote_reply_ms")]
    pub reply_timeout_ms: f64,
    /// Largest message accepted from the server.
    #[serde(default = "default_remote_max_mb")]
    pub max_message_mb: f64,
    /// What the reply's actions are: `absolute` joint positions or `delta` from the
    /// observed ones.
    #[serde(default = "default_remote_actions")]
    pub actions: String,
    /// The request's observation key (float32 [d_obs]; OIP: the input tensor's name).
    #[serde(default = "default_remote_state_key")]
    pub state_key: String,
    /// The request's noise key (float32 [horizon, d_a]; OIP: the input tensor's name).
    #[serde(default = "default_remote_noise_key")]
    pub noise_key: String,
    /// The reply's chunk key ([horizon, d_a]; OIP: the output tensor's name).
    #[serde(default = "default_remote_actions_key")]
    pub actions_key: String,
    /// Whether the server must prove that it serves the manifest's model (openpi: its
    /// metadata's `model_sha256`; OIP: the digest among the model's versions). `false`
    /// accepts a server that names no digest (never one that names another), and the
    /// run's report then says `policy_model_verified: false`.
    #[serde(default = "default_true")]
    pub verify_model: bool,
}

fn default_remote_protocol() -> String {
    "openpi".into()
}

fn default_remote_connect_ms() -> f64 {
    2000.0
}

fn default_remote_reply_ms() -> f64 {
    1000.0
}

fn default_remote_max_mb() -> f64 {
    16.0
}

fn default_remote_actions() -> String {
    "absolute".into()
}

fn default_remote_state_key() -> String {
    "observation/state".into()
}

fn default_remote_noise_key() -> String {
    "noise".into()
}

fn default_remote_actions_key() -> String {
    "actions".into()
}

fn default_servo_gain() -> f64 {
    core::f64::consts::PI
}

fn default_ensemble_coeff() -> f64 {
    0.01
}

fn default_ensemble_chunks() -> usize {
    8
}

fn default_smoothing_modes() -> usize {
    6
}

fn default_state_source() -> String {
    "manifest".into()
}

/// Whether fresh chunks resume playback on their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ResumeMode {
    /// Fresh chunks bring the arm back.
    Auto,
    /// An operator must re-arm.
    Manual,
}

/// How a seam crosses to the new chunk (see `chunkrt_core::SeamMode`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum SeamKind {
    /// Crossfade over the blend: averages chunks that disagree.
    #[default]
    Crossfade,
    /// The new chunk at once, the seam's offset faded out over the blend: for policies
    /// that continue the trajectory being played.
    Transition,
    /// ACT's temporal ensembling: the weighted mean of the recent chunks
    /// (`ensemble_coeff`, `ensemble_chunks`), each fading in and out over the blend.
    Ensemble,
}

/// The executor.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutorSection {
    /// A chunk older than this (now - t_obs) is never played.
    #[serde(default = "default_max_age")]
    pub max_chunk_age_ms: f64,
    /// Seam blend length (0: newest chunk wins at once).
    #[serde(default = "default_blend")]
    pub blend_ms: f64,
    /// `crossfade` (default), `transition` or `ensemble`.
    #[serde(default)]
    pub seam: SeamKind,
    /// `seam = "ensemble"`: chunk `k` from the oldest weighs `exp(-coeff * k)` (ACT's
    /// temporal ensembling; its paper used 0.01 with a chunk per frame).
    #[serde(default = "default_ensemble_coeff")]
    pub ensemble_coeff: f64,
    /// `seam = "ensemble"`: most chunks in the mean at full weight (1 to 12).
    #[serde(default = "default_ensemble_chunks")]
    pub ensemble_chunks: usize,
    /// Sample the trajectory this far ahead (drive + bus delay).
    #[serde(default)]
    pub lookahead_ms: f64,
    /// Without a fresh chunk this long: safe stop.
    #[serde(default = "default_safe_stop")]
    pub safe_stop_after_ms: f64,
    /// `auto` or `manual`.
    #[serde(default = "default_resume")]
    pub resume: ResumeMode,
    /// Smallest accepted chunk `dt`.
    #[serde(default = "default_dt_min")]
    pub dt_min_ms: f64,
    /// Largest accepted chunk `dt`.
    #[serde(default = "default_dt_max")]
    pub dt_max_ms: f64,
    /// Smallest accepted chunk length.
    #[serde(default = "default_min_len")]
    pub min_len: usize,
    /// Chunks whose `t_start` is further than this from now are rejected.
    #[serde(default = "default_max_offset")]
    pub max_time_offset_ms: f64,
    /// A joint whose command the gate has held off the proposal for this long without
    /// a break is logged (`gate_saturated` event, joint and constraint).
    #[serde(default = "default_gate_saturated_event")]
    pub gate_saturated_event_ms: f64,
    /// ... and past this long the policy loses authority (`GateSaturated` fallback).
    #[serde(default = "default_gate_saturated_fallback")]
    pub gate_saturated_fallback_ms: f64,
}

impl Default for ExecutorSection {
    fn default() -> Self {
        ExecutorSection {
            max_chunk_age_ms: default_max_age(),
            blend_ms: default_blend(),
            seam: SeamKind::default(),
            ensemble_coeff: default_ensemble_coeff(),
            ensemble_chunks: default_ensemble_chunks(),
            lookahead_ms: 0.0,
            safe_stop_after_ms: default_safe_stop(),
            resume: default_resume(),
            dt_min_ms: default_dt_min(),
            dt_max_ms: default_dt_max(),
            min_len: default_min_len(),
            max_time_offset_ms: default_max_offset(),
            gate_saturated_event_ms: default_gate_saturated_event(),
            gate_saturated_fallback_ms: default_gate_saturated_fallback(),
        }
    }
}

/// Joint limits.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Lower position limits.
    pub pos_min_rad: PerJoint,
    /// Upper position limits.
    pub pos_max_rad: PerJoint,
    /// Commands stay this far inside the position limits.
    #[serde(default = "default_margin")]
    pub pos_margin_rad: PerJoint,
    /// Speed limits.
    pub max_vel_rad_s: PerJoint,
    /// Acceleration limits.
    pub max_acc_rad_s2: PerJoint,
    /// Jerk limits.
    pub max_jerk_rad_s3: PerJoint,
    /// Deceleration assumed by the braking envelope.
    pub brake_acc_rad_s2: PerJoint,
    /// Following-error limit: a joint measured further than this from the command
    /// it was sent takes authority from the policy (event `following_error`, the
    /// fallback ladder). Not set: no limit.
    #[serde(default)]
    pub max_following_error_rad: Option<PerJoint>,
    /// The thermal monitor (`[limits.thermal]`): an I²t estimate per joint from the
    /// measured torque that derates the joint's speed and then takes the policy's
    /// authority before the drive's own limit. Not set: no monitor.
    #[serde(default)]
    pub thermal: Option<ThermalConfig>,
    /// The low-pass action filter's cutoff (Hz, at most 20): a first-order low-pass on every proposal before the
    /// gate while the policy has authority. Its phase cost is in `chunkrt margin`'s
    /// report. Not set: no filter.
    #[serde(default)]
    pub action_filter_hz: Option<f64>,
    /// The torque slew-rate limit (`[limits.torque_slew]`): the torque the commanded
    /// motion asks of a joint's inertia changes by at most `max_torque_nm /
    /// rise_time_ms` per second. Not set: no limit beyond the jerk limit.
    #[serde(default)]
    pub torque_slew: Option<TorqueSlewConfig>,
}

/// `[wear]`: the ledger the runtime appends one line per hardware id to at the end of
/// every run (shock counts, torque RMS and peak, I²t high-water mark, running hours).
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WearConfig {
    /// The ledger file (JSON lines), relative to this file; created on the first run.
    pub ledger: PathBuf,
    /// The arm's hardware id where its drives do not report one (EtherCAT drives are
    /// named by their SII identity and serial number). Default: the backend's name.
    #[serde(default)]
    pub hardware_id: Option<String>,
}

/// `[limits.torque_slew]`: `d tau / dt <= max_torque_nm / rise_time`, with `tau =
/// inertia * acceleration` of the commanded motion; the gate keeps it as a jerk limit
/// of `max_torque_nm / (rise_time * inertia_kg_m2)` per joint.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TorqueSlewConfig {
    /// The drive's peak torque per joint, N m.
    pub max_torque_nm: PerJoint,
    /// The shortest time in which the torque may swing from 0 to `max_torque_nm`, ms.
    pub rise_time_ms: f64,
    /// The inertia the joint's motor moves (reflected rotor plus link), kg m^2.
    pub inertia_kg_m2: PerJoint,
}

/// `[limits.thermal]`: per joint, the load `LP_T(tau^2) / tau_cont^2`.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ThermalConfig {
    /// Continuous (rated) torque per joint, N m; the drive's I²t trips at load 1.
    pub continuous_torque_nm: PerJoint,
    /// The winding's thermal time constant per joint, s.
    pub time_constant_s: PerJoint,
    /// Load where the speed limit starts to be derated.
    #[serde(default = "default_derate_at")]
    pub derate_at: f64,
    /// Load where the policy loses authority (below the drive's own 1).
    #[serde(default = "default_withdraw_at")]
    pub withdraw_at: f64,
    /// Speed-limit factor at `withdraw_at`.
    #[serde(default = "default_min_derate")]
    pub min_derate: f64,
    /// The load each joint starts a run at where the wear ledger (`[wear]`) has no line
    /// of the same hardware to start from: the declared worst case. Default 1: the
    /// rating, the hottest a winding can be that its drive's own I²t has not stopped;
    /// 0 declares the motors cold (e.g. after a night off).
    #[serde(default = "default_initial_load")]
    pub initial_load: PerJoint,
}

fn default_initial_load() -> PerJoint {
    PerJoint::All(1.0)
}

fn default_derate_at() -> f64 {
    0.8
}

fn default_withdraw_at() -> f64 {
    0.95
}

fn default_min_derate() -> f64 {
    0.25
}

/// A box on the observed joint positions outside which the policy loses authority.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DomainConfig {
    /// Lower bounds of the observed positions.
    pub pos_min_rad: PerJoint,
    /// Upper bounds of the observed positions.
    pub pos_max_rad: PerJoint,
}

/// Which backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// The simulated arm (`[sim]`).
    Sim,
    /// EtherCAT drives (`[ethercat]`).
    Ethercat,
    /// The physics-modelled arm: MuJoCo with an arm's model (`[mujoco]`).
    Mujoco,
}

/// The backend.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BackendConfig {
    /// `sim`, `ethercat` or `mujoco`.
    pub kind: BackendKind,
}

/// The simulated arm.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Integration sub-step.
    #[serde(default = "default_substep")]
    pub substep_us: f64,
    /// Position-loop bandwidth of the simulated drives.
    #[serde(default = "default_bandwidth")]
    pub bandwidth_hz: f64,
    /// Link + rotor inertia per joint.
    pub inertia_kg_m2: Option<PerJoint>,
    /// Viscous friction per joint.
    pub viscous_nm_s_rad: Option<PerJoint>,
    /// Coulomb friction per joint.
    pub coulomb_nm: Option<PerJoint>,
    /// Torque limit per joint.
    pub max_torque_nm: Option<PerJoint>,
    /// Starting pose.
    pub initial_pos_rad: Option<PerJoint>,
    /// Play between each drive's motor (and its encoder) and the link the host reads
    /// (a link-side encoder), per joint (rad; absent or 0: none).
    pub backlash_rad: Option<PerJoint>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            substep_us: default_substep(),
            bandwidth_hz: default_bandwidth(),
            inertia_kg_m2: None,
            viscous_nm_s_rad: None,
            coulomb_nm: None,
            max_torque_nm: None,
            initial_pos_rad: None,
            backlash_rad: None,
        }
    }
}

/// The physics-modelled arm (`chunkrt-mujoco`): an MJCF model stepped by MuJoCo, one CSP
/// drive per hinge joint.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MujocoConfig {
    /// The MJCF file of the arm, relative to this file.
    pub model: PathBuf,
    /// Its SHA-256 (hex): a different file is refused.
    pub model_sha256: String,
    /// For a model that names other files (`<include>`s, meshes, textures): their
    /// digest together, the SHA-256 of `sha256sum`'s lines for them sorted by path
    /// (relative to the model's directory); a different set is refused. Not set: the
    /// model names no other file.
    #[serde(default)]
    pub model_files_sha256: Option<String>,
    /// Position-loop bandwidth of the drives (the velocity loop is 4 times faster).
    #[serde(default = "default_bandwidth")]
    pub bandwidth_hz: f64,
    /// Load inertia each drive's velocity loop is tuned for (default: the model's
    /// joint-space inertia at the start pose).
    pub inertia_kg_m2: Option<PerJoint>,
    /// Torque limit per joint (default: the model's `actuatorfrcrange`).
    pub max_torque_nm: Option<PerJoint>,
    /// Encoder counts per joint revolution (0: exact position and velocity).
    #[serde(default = "default_encoder_counts")]
    pub encoder_counts_per_rev: u64,
    /// Corner of the filter on the velocity estimated from the encoder.
    #[serde(default = "default_velocity_filter")]
    pub velocity_filter_hz: f64,
    /// Time from a setpoint's arrival to the drives acting on it.
    #[serde(default)]
    pub transport_delay_ms: f64,
    /// Whether gravity acts.
    #[serde(default = "default_true")]
    pub gravity: bool,
    /// Whether each joint has a holding brake, engaged while its drive is disabled or
    /// faulted.
    #[serde(default = "default_true")]
    pub brakes: bool,
    /// Starting pose (at rest).
    pub initial_pos_rad: Option<PerJoint>,
    /// Torsional stiffness of each joint's gear between motor and link (N m/rad; absent
    /// or 0: rigid). With it the drive and its encoder sit on the motor side.
    pub joint_stiffness_nm_rad: Option<PerJoint>,
    /// Damping of the gear's twist (N m s/rad; compliant joints only).
    pub joint_damping_nm_s_rad: Option<PerJoint>,
    /// Play between the gear's teeth (rad at the joint; compliant joints only).
    pub backlash_rad: Option<PerJoint>,
    /// Motor-side inertia reflected to the joint (kg m^2; required on a compliant joint).
    pub motor_inertia_kg_m2: Option<PerJoint>,
    /// A wrist force/torque sensor at this `<site>` of the model (its `<force>` and
    /// `<torque>` sensors): the wrench the world exerts on the bodies beyond it, in the
    /// feedback every exchange. Absent: the arm measures no force.
    #[serde(default)]
    pub ft_site: Option<String>,
}

fn default_encoder_counts() -> u64 {
    1 << 27
}

fn default_velocity_filter() -> f64 {
    1000.0
}

fn default_true() -> bool {
    true
}

/// Telemetry.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Capacity of each record ring (records).
    #[serde(default = "default_ring")]
    pub ring_capacity: usize,
    /// How often the telemetry thread drains the rings.
    #[serde(default = "default_drain")]
    pub drain_interval_ms: f64,
    /// Live status line period (0: off).
    #[serde(default = "default_status")]
    pub status_interval_ms: f64,
    /// Most bytes `gate.jsonl` may hold (MiB); gate runs beyond it are counted in
    /// the report (`gate_log_lines_cut`, `gate_log_repeats_cut`), not written.
    #[serde(default = "default_gate_log_max_mb")]
    pub gate_log_max_mb: f64,
    /// Write the full-rate recording (`recording.mcap`) in the output directory.
    #[serde(default = "yes")]
    pub record: bool,
    /// A recording segment is closed and the next started past this size (MiB).
    #[serde(default = "default_record_segment_mb")]
    pub record_segment_mb: f64,
    /// ... or past this long (s).
    #[serde(default = "default_record_segment_s")]
    pub record_segment_s: f64,
    /// Nothing more is recorded past this size in all (MiB); the rest is counted.
    #[serde(default = "default_record_max_mb")]
    pub record_max_mb: f64,
    /// Where the recording goes instead of `recording.mcap` in the output directory
    /// (`chunkrt run --record FILE`; not a key of the file).
    #[serde(skip)]
    pub record_file: Option<PathBuf>,
    /// Write an intervention record (`interventions/<sha256>.jsonl`: the full-rate
    /// cycles around it, whether or not the recording is on) at every withdrawal of
    /// the policy's authority, gate saturation, following-error excursion and
    /// backend fault.
    #[serde(default = "yes")]
    pub intervention_records: bool,
    /// The cycles kept before the intervention (s).
    #[serde(default = "default_intervention_before")]
    pub intervention_before_s: f64,
    /// ... and after it (s).
    #[serde(default = "default_intervention_after")]
    pub intervention_after_s: f64,
}

fn default_intervention_before() -> f64 {
    2.0
}

fn default_intervention_after() -> f64 {
    1.0
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            ring_capacity: default_ring(),
            drain_interval_ms: default_drain(),
            status_interval_ms: default_status(),
            gate_log_max_mb: default_gate_log_max_mb(),
            record: true,
            record_segment_mb: default_record_segment_mb(),
            record_segment_s: default_record_segment_s(),
            record_max_mb: default_record_max_mb(),
            record_file: None,
            intervention_records: true,
            intervention_before_s: default_intervention_before(),
            intervention_after_s: default_intervention_after(),
        }
    }
}

fn default_priority() -> u8 {
    80
}
fn default_control_cpu() -> i32 {
    1
}
fn yes() -> bool {
    true
}
fn minus_one() -> i32 {
    -1
}
fn one() -> usize {
    1
}
fn default_chunk_period() -> f64 {
    50.0
}
fn default_horizon() -> usize {
    25
}
fn default_dt() -> f64 {
    20.0
}
fn default_policy_vel() -> f64 {
    0.8
}
fn default_ep() -> String {
    "cpu".to_string()
}
fn default_max_age() -> f64 {
    200.0
}
fn default_blend() -> f64 {
    40.0
}
fn default_safe_stop() -> f64 {
    1000.0
}
fn default_gate_saturated_event() -> f64 {
    200.0
}
fn default_gate_saturated_fallback() -> f64 {
    1000.0
}
fn default_resume() -> ResumeMode {
    ResumeMode::Auto
}
fn default_dt_min() -> f64 {
    1.0
}
fn default_dt_max() -> f64 {
    100.0
}
fn default_min_len() -> usize {
    2
}
fn default_max_offset() -> f64 {
    1000.0
}
fn default_margin() -> PerJoint {
    PerJoint::All(0.02)
}
fn default_substep() -> f64 {
    100.0
}
fn default_bandwidth() -> f64 {
    20.0
}
fn default_ring() -> usize {
    16384
}
fn default_drain() -> f64 {
    100.0
}
fn default_status() -> f64 {
    1000.0
}
fn default_gate_log_max_mb() -> f64 {
    64.0
}
fn default_record_segment_mb() -> f64 {
    512.0
}
fn default_record_segment_s() -> f64 {
    3600.0
}
fn default_record_max_mb() -> f64 {
    8192.0
}

/// Which camera source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CameraKind {
    /// The simulated arm's scene rendered from its measured pose (needs the sim backend
    /// or any backend: it draws what the arm reports).
    Synthetic,
    /// A V4L2 device (`/dev/videoN`).
    V4l2,
}

/// `[camera]`: the camera, its frame rate and how old an image may be.
///
/// ```toml
/// [camera]
/// kind = "synthetic"     # or "v4l2"
/// fps = 30.0
/// max_age_ms = 120.0     # an older image makes the observation stale: no chunk from it
/// cpu = 0                # camera thread pinned here (-1: not pinned)
/// # synthetic
/// size = 64              # rendered side (pixels)
/// latency_ms = 8.0       # exposure + transport of the simulated camera
/// seed = 1               # target sequence
/// # v4l2
/// device = "/dev/video0"
/// pixel_format = "YUYV"  # or "MJPG"
/// width = 640
/// height = 480
/// crop = [80, 0, 480, 480]  # x, y, width, height before the resize to the model's size
/// ```
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CameraConfig {
    /// The source.
    pub kind: CameraKind,
    /// Frames per second asked for.
    #[serde(default = "default_camera_fps")]
    pub fps: f64,
    /// An observation whose image is older than this when inference starts is stale:
    /// no chunk is computed from it (the executor's chunk then ages out and the
    /// policy loses authority as with any stale chunk).
    #[serde(default = "default_camera_max_age")]
    pub max_age_ms: f64,
    /// CPU the camera thread is pinned to (`-1`: not pinned).
    #[serde(default = "default_camera_cpu")]
    pub cpu: i32,
    /// Synthetic: rendered image side in pixels.
    #[serde(default = "default_camera_size")]
    pub size: usize,
    /// Synthetic: exposure + transport time of a frame.
    #[serde(default = "default_camera_latency")]
    pub latency_ms: f64,
    /// Synthetic: seed of the target sequence.
    #[serde(default = "default_camera_seed")]
    pub seed: u64,
    /// Synthetic: a target is reached within this distance on every joint ...
    #[serde(default = "default_camera_tolerance")]
    pub tolerance_rad: f64,
    /// ... every joint slower than this ...
    #[serde(default = "default_camera_settle_speed")]
    pub settle_speed_rad_s: f64,
    /// ... for this long; then the scene shows the next target.
    #[serde(default = "default_camera_settle")]
    pub settle_s: f64,
    /// V4L2: the device.
    pub device: Option<PathBuf>,
    /// V4L2: `YUYV` or `MJPG`.
    pub pixel_format: Option<String>,
    /// V4L2: capture width.
    pub width: Option<u32>,
    /// V4L2: capture height.
    pub height: Option<u32>,
    /// Crop `[x, y, width, height]` of the captured image before it is resized to the
    /// model's size (absent: the largest centred crop of the model's aspect ratio).
    pub crop: Option<[u32; 4]>,
}

fn default_camera_fps() -> f64 {
    30.0
}
fn default_camera_max_age() -> f64 {
    120.0
}
fn default_camera_cpu() -> i32 {
    0
}
fn default_camera_size() -> usize {
    64
}
fn default_camera_latency() -> f64 {
    8.0
}
fn default_camera_seed() -> u64 {
    1
}
fn default_camera_tolerance() -> f64 {
    0.05
}
fn default_camera_settle_speed() -> f64 {
    0.1
}
fn default_camera_settle() -> f64 {
    0.3
}
