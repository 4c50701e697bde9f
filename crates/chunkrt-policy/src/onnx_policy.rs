//! `OnnxPolicy`: the learned policy behind [`chunkrt_core::Policy`].
//!
//! Per chunk: advance the goal sequence, build the observation vector the manifest declares
//! (`[q, goal]`), check it against the declared domain (reported in `InferInfo`), draw the
//! seeded noise, run the sampler (fewer steps when the anytime budget says so), and turn the
//! de-normalised sample into absolute joint positions. Nothing is allocated per call.

use std::path::PathBuf;
use std::time::Instant;

use chunkrt_core::{Chunk, InferInfo, JointVec, Observation, Policy, PolicyError, PolicySpec};

use crate::domain::{Domain, DomainVerdict};
use crate::engine::{Engine, RemoteModel, RemoteSampler, Served};
use crate::error::{ManifestProblem, PolicyConfigProblem, PolicyLoadError};
use crate::goals::{GoalSequence, Settler};
pub use crate::manifest::StateSource;
use crate::manifest::{Manifest, ObservationEncoding, SamplerMethod};
use crate::model::{anytime_steps, step_estimate, write_chunk, PolicyModel};
use crate::noise::GaussianNoise;
use crate::session::SessionOptions;
use crate::smoothing::ChunkSmoother;

/// When the policy draws fresh sampler noise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoiseMode {
    /// Fresh noise for every chunk (independent samples), as the policy was trained. The
    /// side of an obstacle is chosen by the first chunks' noise and then carried by the
    /// measured state: once the arm has moved toward one side, the demonstrations seen
    /// from there all continue on it, so re-planning every 50 ms stays on it.
    #[default]
    PerChunk,
    /// Once per goal: consecutive chunks toward one goal start from the same noise (the
    /// samplers are deterministic maps from noise to chunk). Commits harder to one sample,
    /// but a fixed noise can also hold the arm at a state where its chunk barely moves.
    PerGoal,
}

/// Configuration of an [`OnnxPolicy`]; `None` fields take the manifest's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct OnnxPolicyConfig {
    /// The policy manifest (the model file sits beside it).
    pub manifest: PathBuf,
    /// ONNX Runtime library, execution provider, threads.
    pub session: SessionOptions,
    /// Sampler method (must fit the model's kind).
    pub method: Option<SamplerMethod>,
    /// Nominal sampler steps per chunk.
    pub steps: Option<usize>,
    /// Fewest steps the anytime sampler may use.
    pub min_steps: Option<usize>,
    /// Anytime budget: when `steps * measured step latency` would exceed it, run fewer
    /// steps (not below `min_steps`). `None`: always the nominal steps.
    pub deadline_ms: Option<f64>,
    /// Noise seed.
    pub seed: Option<u64>,
    /// Goal poses (each d_a values); default: the manifest's `encoding.goals`.
    pub goals: Option<Vec<Vec<f64>>>,
    /// Replayed goal changes: from observation (cycle) `.0` on, goal `.1`; the goals
    /// then do not advance on arrival (see [`GoalSequence::with_schedule`]). Empty:
    /// they do.
    pub goal_schedule: Vec<(u64, usize)>,
    /// Time at a reached goal before the next one is pursued.
    pub goal_dwell_ms: u64,
    /// When fresh noise is drawn.
    pub noise: NoiseMode,
    /// Which state the policy observes; `None`: the manifest's `encoding.state`.
    pub state: Option<StateSource>,
    /// A learned policy settles near its goal, not exactly on it (model bias). When the arm
    /// is within this distance of the goal (every joint) and has stopped moving for
    /// `settle_chunks` consecutive chunks, the next goal is pursued. `None`: four
    /// times the manifest's `goal_tolerance_rad`.
    pub goal_settle_radius_rad: Option<f64>,
    /// Low-pass the sampled chunk onto this many cosine modes of the horizon per joint
    /// (0: off); see [`crate::smoothing`].
    pub smoothing_modes: usize,
    /// Consecutive chunks near the goal with the arm still (every joint moved less than a
    /// fifth of the goal tolerance since the previous observation) that count as settled.
    pub settle_chunks: u32,
}

impl OnnxPolicyConfig {
    /// Manifest defaults for everything, CPU, library found by the standard lookup.
    pub fn new(manifest: impl Into<PathBuf>) -> Self {
        OnnxPolicyConfig {
            manifest: manifest.into(),
            session: SessionOptions::default(),
            method: None,
            steps: None,
            min_steps: None,
            deadline_ms: None,
            seed: None,
            goals: None,
            goal_schedule: Vec::new(),
            goal_dwell_ms: 0,
            noise: NoiseMode::PerChunk,
            state: None,
            goal_settle_radius_rad: None,
            settle_chunks: 5,
            smoothing_modes: 6,
        }
    }
}

/// Counters of the anytime sampler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnytimeStats {
    /// Chunks computed.
    pub chunks: u64,
    /// Chunks computed with fewer than the nominal steps.
    pub reduced: u64,
    /// Chunks whose observation was outside the declared domain.
    pub out_of_domain: u64,
    /// Goals left because the policy settled near them (not within the tolerance).
    pub settled_advances: u64,
}

impl AnytimeStats {
    /// Counts one chunk sampled in `steps` of the `nominal` steps from an observation
    /// with this verdict; whether that observation was outside the domain.
    pub(crate) fn record(&mut self, steps: usize, nominal: usize, verdict: DomainVerdict) -> bool {
        self.chunks += 1;
        if steps < nominal {
            self.reduced += 1;
        }
        let out_of_domain = !verdict.is_inside();
        if out_of_domain {
            self.out_of_domain += 1;
        }
        out_of_domain
    }
}

/// A learned policy run through ONNX Runtime; see the module docs.
#[derive(Debug)]
pub struct OnnxPolicy {
    engine: Engine,
    goals: GoalSequence,
    method: SamplerMethod,
    steps: usize,
    min_steps: usize,
    deadline_ns: Option<f64>,
    noise: GaussianNoise,
    noise_mode: NoiseMode,
    state_source: StateSource,
    noise_fresh: bool,
    noise_buf: Vec<f32>,
    obs_vec: Vec<f64>,
    pos_buf: Vec<f64>,
    step_ns_est: f64,
    settler: Settler,
    smoother: Option<ChunkSmoother>,
    stats: AnytimeStats,
    last_verdict: Option<DomainVerdict>,
    /// What the server said of the last chunk (nothing when sampled here).
    last_served: Served,
}

impl OnnxPolicy {
    /// Loads and checks the model (see [`PolicyModel::load`]), validates the configuration
    /// against it, and runs one warm-up chunk so the first real chunk is not the slow one
    /// and the anytime sampler starts with a measured step latency.
    pub fn new(cfg: &OnnxPolicyConfig) -> Result<OnnxPolicy, PolicyLoadError> {
        let model = PolicyModel::load(&cfg.manifest, &cfg.session)?;
        OnnxPolicy::with_engine(cfg, Engine::Local(Box::new(model)))
    }

    /// The policy `cfg.manifest` describes, its chunks sampled by `server` (a policy
    /// server serving that model): the manifest is loaded and checked here (its model
    /// file need not be on this host; `cfg.session` is not used), everything but the
    /// sampler runs here, and one warm-up chunk is asked of the server, so an unreachable
    /// or wrong server is refused at load, not found at the first chunk.
    pub fn remote(
        cfg: &OnnxPolicyConfig,
        server: Box<dyn RemoteSampler>,
    ) -> Result<OnnxPolicy, PolicyLoadError> {
        let manifest = Manifest::load(&cfg.manifest)?;
        let domain =
            Domain::new(&manifest.domain).map_err(|e| PolicyLoadError::ManifestInvalid {
                path: cfg.manifest.clone(),
                what: e.into(),
            })?;
        OnnxPolicy::with_engine(
            cfg,
            Engine::Remote(Box::new(RemoteModel {
                manifest,
                manifest_path: cfg.manifest.clone(),
                domain,
                server,
            })),
        )
    }

    fn with_engine(cfg: &OnnxPolicyConfig, model: Engine) -> Result<OnnxPolicy, PolicyLoadError> {
        let m = model.manifest();
        let invalid = |what: ManifestProblem| PolicyLoadError::ManifestInvalid {
            path: cfg.manifest.clone(),
            what,
        };
        let config = |p: PolicyConfigProblem| invalid(ManifestProblem::Config(p));
        let method = cfg.method.unwrap_or(m.sampler.method);
        let steps = cfg.steps.unwrap_or(m.sampler.steps);
        let min_steps = cfg.min_steps.unwrap_or(m.sampler.min_steps.min(steps));
        model
            .check_sampler(method, steps)
            .map_err(|e| config(e.into()))?;
        if min_steps == 0 || min_steps > steps {
            return Err(config(PolicyConfigProblem::MinSteps { min_steps, steps }));
        }
        let deadline_ns = match cfg.deadline_ms {
            Some(d) if !(d.is_finite() && d > 0.0) => {
                return Err(config(PolicyConfigProblem::DeadlineMs(d)))
            }
            d => d.map(|d| d * 1e6),
        };
        let goal_list = cfg.goals.as_ref().unwrap_or(&m.encoding.goals);
        let goals = GoalSequence::new(
            m.d_a,
            goal_list,
            m.encoding.goal_tolerance_rad,
            cfg.goal_dwell_ms * 1_000_000,
        )
        .and_then(|g| g.with_schedule(&cfg.goal_schedule))
        .map_err(|e| invalid(e.into()))?;
        let settle_radius_rad = cfg
            .goal_settle_radius_rad
            .unwrap_or(4.0 * m.encoding.goal_tolerance_rad);
        if !(settle_radius_rad.is_finite() && settle_radius_rad >= 0.0) {
            return Err(config(PolicyConfigProblem::SettleRadius(settle_radius_rad)));
        }
        let settle_motion_rad = 0.2 * m.encoding.goal_tolerance_rad;
        let smoother = ChunkSmoother::new(m.horizon, cfg.smoothing_modes);
        let seed = cfg.seed.unwrap_or(m.sampler.seed);
        let (d_obs, len) = (m.d_obs, m.chunk_len());
        let state_source = cfg.state.unwrap_or(m.encoding.state);
        let mut policy = OnnxPolicy {
            engine: model,
            goals,
            method,
            steps,
            min_steps,
            deadline_ns,
            noise: GaussianNoise::new(seed),
            noise_mode: cfg.noise,
            state_source,
            noise_fresh: false,
            noise_buf: vec![0.0; len],
            obs_vec: vec![0.0; d_obs],
            pos_buf: vec![0.0; len],
            step_ns_est: 0.0,
            settler: Settler::new(settle_radius_rad, settle_motion_rad, cfg.settle_chunks),
            smoother,
            stats: AnytimeStats::default(),
            last_verdict: None,
            last_served: Served::default(),
        };
        policy.warm_up().map_err(|e| PolicyLoadError::Runtime {
            path: policy.engine.origin().to_path_buf(),
            message: e.0,
        })?;
        Ok(policy)
    }

    /// Samples one chunk at the manifest's domain mean with a separate noise stream, to
    /// prime ONNX Runtime and measure the step latency.
    fn warm_up(&mut self) -> Result<(), PolicyError> {
        let mean = self.engine.manifest().domain.mean.clone();
        let mut noise = vec![0.0f32; self.noise_buf.len()];
        GaussianNoise::new(u64::MAX).fill(&mut noise);
        let start = Instant::now();
        self.engine
            .positions(&mean, &noise, self.method, self.steps, &mut self.pos_buf)?;
        self.step_ns_est = start.elapsed().as_nanos() as f64 / self.steps as f64;
        Ok(())
    }

    /// The declared operating domain (for the gate's support monitor).
    pub fn domain(&self) -> &Domain {
        self.engine.domain()
    }

    /// The policy server's own time for the last chunk (ns), when a server sampled it
    /// and said; `None` for a chunk sampled here.
    pub fn last_server_ns(&self) -> Option<u64> {
        self.last_served.server_ns
    }

    /// The verdict of the last observation checked by `infer`.
    pub fn last_verdict(&self) -> Option<DomainVerdict> {
        self.last_verdict
    }

    /// The goal currently pursued.
    pub fn current_goal(&self) -> &JointVec {
        self.goals.current()
    }

    /// Index of the goal currently pursued.
    pub fn goal_index(&self) -> usize {
        self.goals.index()
    }

    /// The checked manifest.
    pub fn manifest(&self) -> &Manifest {
        self.engine.manifest()
    }

    /// Anytime/domain counters.
    pub fn stats(&self) -> AnytimeStats {
        self.stats
    }

    /// Current estimate of one sampler step's latency in ns.
    pub fn step_ns_estimate(&self) -> f64 {
        self.step_ns_est
    }

    /// Builds the observation vector the manifest declares from joint positions,
    /// velocities and the current goal, into `out` (d_obs values). The gate can use it
    /// with [`Self::domain`].
    pub fn observation_vector(&self, pos_rad: &JointVec, vel_rad_s: &JointVec, out: &mut [f64]) {
        let d_a = self.engine.manifest().d_a;
        out[..d_a].copy_from_slice(&pos_rad[..d_a]);
        out[d_a..2 * d_a].copy_from_slice(&self.goals.current()[..d_a]);
        match self.engine.manifest().encoding.observation {
            ObservationEncoding::JointPosAndGoal => {}
            ObservationEncoding::JointPosGoalVel => {
                out[2 * d_a..3 * d_a].copy_from_slice(&vel_rad_s[..d_a]);
            }
        }
    }

    /// The state this policy observes (configured, or the manifest's).
    pub fn state_source(&self) -> StateSource {
        self.state_source
    }

    /// The observed state (positions, velocities) of `d_a` joints, refused when the
    /// joint count differs or a value is not finite.
    fn checked_state<'o>(
        &self,
        obs: &'o Observation,
        d_a: usize,
    ) -> Result<(&'o JointVec, &'o JointVec), PolicyError> {
        if obs.dof as usize != d_a {
            return Err(PolicyError(format!(
                "onnx policy: observation has {} joints, model expects {d_a}",
                obs.dof
            )));
        }
        let (state, vel) = self.state_source.of(obs);
        if let Some(j) = (0..d_a).find(|&j| !state[j].is_finite()) {
            return Err(PolicyError(format!(
                "onnx policy: state position of joint {j} is not finite ({})",
                state[j]
            )));
        }
        if let Some(j) = (0..d_a).find(|&j| !vel[j].is_finite()) {
            return Err(PolicyError(format!(
                "onnx policy: state velocity of joint {j} is not finite ({})",
                vel[j]
            )));
        }
        Ok((state, vel))
    }

    /// Steps for the next chunk: the nominal count, or fewer when the measured step
    /// latency says the nominal count would overrun the deadline.
    fn planned_steps(&self) -> usize {
        anytime_steps(
            self.deadline_ns,
            self.step_ns_est,
            self.min_steps,
            self.steps,
        )
    }
}

impl Policy for OnnxPolicy {
    fn begin_episode(&mut self, goal: &chunkrt_core::JointVec) {
        self.goals.pursue_only(goal);
        self.settler.restart();
    }

    fn spec(&self) -> PolicySpec {
        let m = self.engine.manifest();
        PolicySpec {
            dof: m.d_a,
            horizon: m.horizon,
            dt_ns: m.dt_ns(),
        }
    }

    fn exclusions(&self) -> chunkrt_core::Exclusions {
        self.engine.manifest().provenance().exclusions()
    }

    fn goals(&self) -> &[chunkrt_core::JointVec] {
        self.goals.all()
    }

    /// Setpoint `i` is for `obs.t_capture + i * dt` (setpoint 0 is "now").
    fn infer(&mut self, obs: &Observation, out: &mut Chunk) -> Result<InferInfo, PolicyError> {
        let (d_a, horizon, dt_ns) = {
            let m = self.engine.manifest();
            (m.d_a, m.horizon, m.dt_ns())
        };
        let (state, vel) = self.checked_state(obs, d_a)?;
        let goal_changed = self.goals.observe(obs.seq, state, obs.t_capture);
        let goal = Some(self.goals.index() as u16);
        let mut obs_vec = std::mem::take(&mut self.obs_vec);
        self.observation_vector(state, vel, &mut obs_vec);
        let verdict = self.engine.domain().check(&obs_vec);
        self.last_verdict = Some(verdict);

        let steps = self.planned_steps();
        if goal_changed {
            self.settler.restart();
        }
        if goal_changed || !self.noise_fresh || self.noise_mode == NoiseMode::PerChunk {
            self.noise.fill(&mut self.noise_buf);
            self.noise_fresh = true;
        }
        let start = Instant::now();
        let remote = matches!(self.engine, Engine::Remote(_));
        let result = self.engine.positions(
            &obs_vec,
            &self.noise_buf,
            self.method,
            steps,
            &mut self.pos_buf,
        );
        self.obs_vec = obs_vec;
        self.last_served = result?;
        let took_ns = start.elapsed().as_nanos() as u64;
        let step_ns = took_ns as f64 / steps as f64;
        if let Some(sm) = self.smoother.as_mut() {
            sm.apply(&mut self.pos_buf, d_a, &state[..d_a]);
        }

        self.step_ns_est = step_estimate(self.step_ns_est, step_ns);
        let out_of_domain = self.stats.record(steps, self.steps, verdict);
        // Settled near the goal: the arm is close and has stopped moving.
        // Taken at the next observation: this observation's other candidates pursue
        // the same goal (a recorded run's goals per observation can be replayed).
        if self.settler.observe(&self.goals, state) {
            self.goals.advance_at_next_observation();
            self.noise_fresh = false;
            self.stats.settled_advances += 1;
        }
        write_chunk(out, &self.pos_buf, horizon, d_a, dt_ns, steps);
        Ok(InferInfo {
            steps: steps as u16,
            steps_nominal: self.steps as u16,
            step_ns: step_ns as u64,
            out_of_domain,
            goal,
            remote_rtt_ns: if remote { took_ns.max(1) } else { 0 },
            server_ns: self.last_served.server_ns.unwrap_or(0),
            reconnects: self.last_served.reconnects.min(u32::from(u16::MAX)) as u16,
        })
    }
}
