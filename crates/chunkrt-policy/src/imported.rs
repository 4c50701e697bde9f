//! `ImportedPolicy`: a policy brought from elsewhere (manifest format 2, [`crate::manifest2`]),
//! behind [`chunkrt_core::Policy`].
//!
//! Per chunk: advance the goal sequence, assemble the raw observation (each input's
//! `sources` of the manifest's state), keep the observation history (one step per
//! observation, oldest first; LeRobot's queues: the first observation fills every step),
//! normalise each input as LeRobot does, run the graph (a denoiser under its diffusers
//! scheduler, or one call for a chunk model), de-normalise `[start, start + len)` of the
//! sequence into joint positions. A model that takes a camera image gets the newest frame
//! through [`Policy::observe_image`] before each `infer`; its image history moves in step
//! with the state's. Buffers are allocated at load; `infer` allocates nothing.

use std::path::{Path, PathBuf};
use std::time::Instant;

use chunkrt_core::{
    Chunk, ImageRef, InferInfo, JointVec, Observation, Policy, PolicyError, PolicySpec,
};

use crate::diffusers::DiffusersScheduler;
use crate::domain::{Domain, DomainVerdict};
use crate::error::{ManifestProblem, PolicyConfigProblem, PolicyLoadError};
use crate::goals::{GoalSequence, Settler};
use crate::graph::{OrtGraph, TensorSpec};
use crate::manifest::{ActionEncoding, StateSource};
use crate::manifest2::{CheckedManifest2, FlowSettings, Manifest2, ModelKind, Source};
use crate::model::{anytime_steps, read_verified, step_estimate, write_chunk};
use crate::noise::GaussianNoise;
use crate::onnx_policy::AnytimeStats;
use crate::sampler::{flow, Denoiser, SamplerBuffers};
use crate::session::SessionOptions;
use crate::smoothing::ChunkSmoother;

/// A format-2 model loaded and checked: graph, scheduler, history and buffers.
#[derive(Debug)]
pub struct ImportedModel {
    m: CheckedManifest2,
    manifest_path: PathBuf,
    model_path: PathBuf,
    domain: Domain,
    graph: OrtGraph,
    scheduler: Option<DiffusersScheduler>,
    /// Flow-matching integration and its buffers (diffusion without a scheduler).
    flow: Option<(FlowSettings, SamplerBuffers)>,
    /// Raw observations, `history` rows of `d_obs` values, oldest first.
    history: Vec<f64>,
    history_len: usize,
    /// Normalised images, `history` steps of `3 x height x width` (channel-major), oldest
    /// first; empty for a model without a camera.
    images: Vec<f32>,
    images_len: usize,
    /// The graph's sequence (normalised): the sample, or the chunk model's output.
    seq: Vec<f32>,
    /// A residual's base chunk input (`steps x d_a` raw values, encoded); empty for a
    /// model that takes none.
    base: Vec<f64>,
}

/// The denoiser view of the graph: writes `x` and `t` into their inputs and runs it.
struct GraphDenoiser<'a> {
    graph: &'a mut OrtGraph,
    x: usize,
    t: usize,
}

impl Denoiser for GraphDenoiser<'_> {
    fn denoise(
        &mut self,
        _obs_n: &[f32],
        x: &[f32],
        t: f32,
        out: &mut [f32],
    ) -> Result<(), PolicyError> {
        self.graph.input_mut(self.x).copy_from_slice(x);
        self.graph.input_mut(self.t)[0] = t;
        self.graph.run(out)
    }
}

impl ImportedModel {
    /// Loads the manifest, verifies the model's digest, opens the graph and checks its
    /// inputs and outputs against the manifest.
    pub fn load(
        manifest_path: &Path,
        opts: &SessionOptions,
    ) -> Result<ImportedModel, PolicyLoadError> {
        let m = CheckedManifest2::load(manifest_path)?;
        let raw = &m.raw;
        let model_path = raw.model_path(manifest_path);
        let bytes = read_verified(
            &model_path,
            manifest_path,
            &raw.model_sha256,
            raw.model_bytes,
        )?;
        let domain = Domain::new(&raw.domain).map_err(|e| PolicyLoadError::ManifestInvalid {
            path: manifest_path.to_path_buf(),
            what: e.into(),
        })?;
        let (inputs, output) = graph_ports(raw);
        let graph = OrtGraph::open(&model_path, &bytes, opts, &inputs, &output)?;
        let len = raw.sequence_len();
        let scheduler = m.scheduler.clone().map(|s| DiffusersScheduler::new(s, len));
        let flow = m.flow.map(|f| (f, SamplerBuffers::new(len)));
        Ok(ImportedModel {
            flow,
            history: vec![0.0; raw.observation.history * raw.d_obs()],
            history_len: 0,
            images: vec![
                0.0;
                raw.observation
                    .images
                    .first()
                    .map_or(0, |i| raw.observation.history * 3 * i.height * i.width)
            ],
            images_len: 0,
            seq: vec![0.0; len],
            base: vec![0.0; raw.base_chunk().map_or(0, |b| b.steps * raw.d_a)],
            m,
            manifest_path: manifest_path.to_path_buf(),
            model_path,
            domain,
            graph,
            scheduler,
        })
    }

    /// The checked manifest.
    pub fn manifest(&self) -> &CheckedManifest2 {
        &self.m
    }

    /// The manifest's path.
    pub fn manifest_path(&self) -> &Path {
        &self.manifest_path
    }

    /// The model file's path.
    pub fn model_path(&self) -> &Path {
        &self.model_path
    }

    /// The declared operating domain.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Most inference steps (diffusers schedulers: the training timesteps; flow: 10 000;
    /// chunk models: 1).
    pub fn max_steps(&self) -> usize {
        match (&self.scheduler, &self.flow) {
            (Some(s), _) => s.train_timesteps(),
            (None, Some(_)) => 10_000,
            (None, None) => 1,
        }
    }

    /// Forgets the observation history (a new episode: the next observation fills it).
    pub fn reset_history(&mut self) {
        self.history_len = 0;
        self.images_len = 0;
    }

    /// The camera image the model takes, `(height, width)`; `None`: it takes none.
    pub fn image_size(&self) -> Option<(usize, usize)> {
        self.m
            .raw
            .observation
            .images
            .first()
            .map(|i| (i.height, i.width))
    }

    /// Appends one camera image (RGB8, row-major, `height * width * 3` bytes) to the image
    /// history, normalised; the first after a reset fills every step. The image history
    /// moves with the state's: push one image per observation.
    pub fn push_image(&mut self, rgb: &[u8]) -> Result<(), PolicyError> {
        let step = self.image_step_len(rgb)?;
        let h = self.m.raw.observation.history;
        if self.images_len == 0 {
            self.normalise_image(rgb, (h - 1) * step);
            let (head, last) = self.images.split_at_mut((h - 1) * step);
            for row in head.chunks_mut(step) {
                row.copy_from_slice(last);
            }
            self.images_len = h;
        } else {
            self.images.copy_within(step.., 0);
            self.normalise_image(rgb, (h - 1) * step);
        }
        Ok(())
    }

    /// Replaces the newest image (another draw for the same observation).
    pub fn replace_newest_image(&mut self, rgb: &[u8]) -> Result<(), PolicyError> {
        let step = self.image_step_len(rgb)?;
        let h = self.m.raw.observation.history;
        if self.images_len == 0 {
            return self.push_image(rgb);
        }
        self.normalise_image(rgb, (h - 1) * step);
        Ok(())
    }

    fn image_step_len(&self, rgb: &[u8]) -> Result<usize, PolicyError> {
        let (hgt, wid) = self
            .image_size()
            .ok_or_else(|| PolicyError("imported policy: this model takes no image".into()))?;
        let step = 3 * hgt * wid;
        if rgb.len() != step {
            return Err(PolicyError(format!(
                "imported policy: image has {} bytes, the model takes {hgt} x {wid} RGB ({step})",
                rgb.len()
            )));
        }
        Ok(step)
    }

    /// HWC bytes -> CHW float32 at `offset`: `p / 255` normalised per channel.
    fn normalise_image(&mut self, rgb: &[u8], offset: usize) {
        let norm = &self.m.image_norms[0];
        let plane = rgb.len() / 3;
        let dst = &mut self.images[offset..offset + 3 * plane];
        for (p, px) in rgb.chunks_exact(3).enumerate() {
            for c in 0..3 {
                dst[c * plane + p] = norm.forward(c, px[c] as f32 / 255.0);
            }
        }
    }

    /// Appends one raw observation (`d_obs` values: each input's sources in input order);
    /// the oldest drops out. The first after a reset fills every step, as LeRobot's queues do.
    pub fn push_observation(&mut self, raw: &[f64]) {
        let d = self.m.raw.d_obs();
        let h = self.m.raw.observation.history;
        if self.history_len == 0 {
            for row in self.history.chunks_mut(d) {
                row.copy_from_slice(raw);
            }
            self.history_len = h;
        } else {
            self.history.copy_within(d.., 0);
            self.history[(h - 1) * d..].copy_from_slice(raw);
        }
    }

    /// Replaces the newest step (another draw for the same observation).
    pub fn replace_newest(&mut self, raw: &[f64]) {
        let d = self.m.raw.d_obs();
        let n = self.history.len();
        self.history[n - d..].copy_from_slice(raw);
    }

    /// Writes the normalised history into the graph's observation inputs.
    fn write_inputs(&mut self) {
        let raw = &self.m.raw;
        let (d, h) = (raw.d_obs(), raw.observation.history);
        let mut offset = 0;
        for (k, input) in raw.observation.inputs.iter().enumerate() {
            let dim = raw.input_dim(input);
            let norm = &self.m.input_norms[k];
            let dst = self.graph.input_mut(k);
            for step in 0..h {
                let src = &self.history[step * d + offset..step * d + offset + dim];
                for (i, v) in src.iter().enumerate() {
                    dst[step * dim + i] = norm.forward(i, *v as f32);
                }
            }
            offset += dim;
        }
        let mut k = raw.observation.inputs.len();
        if !self.images.is_empty() {
            self.graph.input_mut(k).copy_from_slice(&self.images);
            k += 1;
        }
        if let Some(norm) = self.m.base_norm.as_ref() {
            let dst = self.graph.input_mut(k);
            for (i, v) in self.base.iter().enumerate() {
                dst[i] = norm.forward(i % raw.d_a, *v as f32);
            }
        }
    }

    /// The base chunk input's values (`steps x d_a`, encoded as the manifest's
    /// `[residual.base_chunk]` says), written by [`ImportedPolicy`] before each run;
    /// empty for a model that takes none.
    pub fn base_input_mut(&mut self) -> &mut [f64] {
        &mut self.base
    }

    /// Runs the model on the history: a diffusion model from `init` (the initial noise,
    /// `sequence_len` values) for `steps` steps with `step_noise` for the scheduler's
    /// draws; a chunk model in one call. The normalised sequence is then
    /// [`Self::sequence`]. Allocates nothing.
    pub fn run(
        &mut self,
        init: &[f32],
        steps: usize,
        step_noise: &mut dyn FnMut(&mut [f32]),
        after_step: &mut dyn FnMut(usize),
    ) -> Result<(), PolicyError> {
        if self.history_len == 0 {
            return Err(PolicyError(
                "imported policy: no observation in the history".into(),
            ));
        }
        if !self.images.is_empty() && self.images_len == 0 {
            return Err(PolicyError(
                "imported policy: the model takes a camera image and none was given".into(),
            ));
        }
        self.write_inputs();
        let raw = &self.m.raw;
        let n_inputs = raw.observation.inputs.len()
            + raw.observation.images.len()
            + usize::from(raw.base_chunk().is_some());
        if self.m.raw.kind == ModelKind::Chunk {
            self.graph.run(&mut self.seq)?;
            after_step(0);
            return Ok(());
        }
        if init.len() != self.seq.len() {
            return Err(PolicyError(format!(
                "imported policy: initial noise has {} values, expected {}",
                init.len(),
                self.seq.len()
            )));
        }
        let mut den = GraphDenoiser {
            graph: &mut self.graph,
            x: n_inputs,
            t: n_inputs + 1,
        };
        match (self.scheduler.as_mut(), self.flow.as_mut()) {
            (Some(sch), _) => {
                self.seq.copy_from_slice(init);
                sch.sample(steps, &mut den, &[], &mut self.seq, step_noise, after_step)
            }
            (None, Some((f, buf))) => {
                buf.x.copy_from_slice(init);
                flow(f.heun, steps, f.from, f.to, &mut den, &[], buf, after_step)?;
                self.seq.copy_from_slice(&buf.x);
                Ok(())
            }
            (None, None) => Err(PolicyError(
                "imported policy: a diffusion model without a scheduler".into(),
            )),
        }
    }

    /// The normalised sequence of the last run.
    pub fn sequence(&self) -> &[f32] {
        &self.seq
    }

    /// De-normalises `[start, start + len)` of the last sequence into joint positions,
    /// `out[i * d_a + j]`; `q` is the state's positions (delta encodings add them).
    pub fn actions_into(&self, q: &[f64], out: &mut [f64]) {
        let raw = &self.m.raw;
        let d_a = raw.d_a;
        for i in 0..raw.action.len {
            for j in 0..d_a {
                let v = self.seq[(raw.action.start + i) * d_a + j];
                let a = self.m.action_norm.inverse(j, v) as f64;
                out[i * d_a + j] = match raw.action.encoding {
                    ActionEncoding::Absolute | ActionEncoding::Residual => a,
                    ActionEncoding::DeltaFromObserved => q[j] + a,
                };
            }
        }
    }
}

/// The graph's inputs as the manifest names and shapes them (the observation inputs,
/// the images, a residual's base chunk, a denoiser's `x` and `t`) and its output.
fn graph_ports(raw: &Manifest2) -> (Vec<TensorSpec>, TensorSpec) {
    let mut inputs: Vec<TensorSpec> = raw
        .observation
        .inputs
        .iter()
        .enumerate()
        .map(|(k, i)| TensorSpec {
            name: i.name.clone(),
            shape: raw.input_shape(i),
            key: format!("observation.inputs[{k}]"),
        })
        .collect();
    for (k, i) in raw.observation.images.iter().enumerate() {
        inputs.push(TensorSpec {
            name: i.name.clone(),
            shape: raw.image_shape(i),
            key: format!("observation.images[{k}]"),
        });
    }
    if let Some(b) = raw.base_chunk() {
        inputs.push(TensorSpec {
            name: b.name.clone(),
            shape: vec![1, b.steps, raw.d_a],
            key: "residual.base_chunk".into(),
        });
    }
    let seq_shape = vec![1, raw.action.horizon, raw.d_a];
    if raw.kind == ModelKind::Diffusion {
        // Checked present for diffusion by the manifest check.
        let (x, t) = (
            raw.io.x.clone().unwrap_or_default(),
            raw.io.t.clone().unwrap_or_default(),
        );
        inputs.push(TensorSpec {
            name: x,
            shape: seq_shape.clone(),
            key: "io.x".into(),
        });
        inputs.push(TensorSpec {
            name: t,
            shape: vec![1],
            key: "io.t".into(),
        });
    }
    let output = TensorSpec {
        name: raw.io.out.clone(),
        shape: seq_shape,
        key: "io.out".into(),
    };
    (inputs, output)
}

/// Configuration of an [`ImportedPolicy`]; `None` fields take the manifest's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportedPolicyConfig {
    /// The manifest (format 2).
    pub manifest: PathBuf,
    /// ONNX Runtime library, provider, threads.
    pub session: SessionOptions,
    /// Nominal inference steps (diffusion).
    pub steps: Option<usize>,
    /// Fewest steps the anytime sampler may use.
    pub min_steps: Option<usize>,
    /// Anytime budget (ms): fewer steps when the nominal count would overrun it.
    pub deadline_ms: Option<f64>,
    /// Noise seed.
    pub seed: Option<u64>,
    /// Goal poses; default: the manifest's `task.goals`.
    pub goals: Option<Vec<Vec<f64>>>,
    /// Replayed goal changes: from observation (cycle) `.0` on, goal `.1`; the goals
    /// then do not advance on arrival (see [`crate::goals::GoalSequence::with_schedule`]). Empty:
    /// they do.
    pub goal_schedule: Vec<(u64, usize)>,
    /// Which state the policy observes; `None`: the manifest's `observation.state`.
    pub state: Option<StateSource>,
    /// Settled near the goal (see [`Settler`]): radius; `None`: 4 x the goal tolerance.
    pub goal_settle_radius_rad: Option<f64>,
    /// ... for this many consecutive observations.
    pub settle_chunks: u32,
    /// Low-pass each chunk onto this many cosine modes per joint (0: off); see
    /// [`crate::smoothing`].
    pub smoothing_modes: usize,
}

impl ImportedPolicyConfig {
    /// Manifest defaults for everything, CPU.
    pub fn new(manifest: impl Into<PathBuf>) -> Self {
        ImportedPolicyConfig {
            manifest: manifest.into(),
            session: SessionOptions::default(),
            steps: None,
            min_steps: None,
            deadline_ms: None,
            seed: None,
            goals: None,
            goal_schedule: Vec::new(),
            state: None,
            goal_settle_radius_rad: None,
            settle_chunks: 5,
            smoothing_modes: 0,
        }
    }
}

impl ImportedPolicyConfig {
    /// A problem with the manifest (or this configuration against it), named by the
    /// manifest's path.
    fn invalid(&self, what: ManifestProblem) -> PolicyLoadError {
        PolicyLoadError::ManifestInvalid {
            path: self.manifest.clone(),
            what,
        }
    }

    /// A configuration value the model cannot take.
    fn config_problem(&self, p: PolicyConfigProblem) -> PolicyLoadError {
        self.invalid(ManifestProblem::Config(p))
    }

    /// The nominal and fewest steps and the anytime deadline (ns), checked against the
    /// model's scheduler.
    fn anytime(
        &self,
        model: &ImportedModel,
    ) -> Result<(usize, usize, Option<f64>), PolicyLoadError> {
        let raw = &model.manifest().raw;
        let steps = self.steps.unwrap_or(raw.sampler.steps);
        let min_steps = self.min_steps.unwrap_or(raw.sampler.min_steps.min(steps));
        if steps == 0 || steps > model.max_steps() {
            return Err(self.config_problem(PolicyConfigProblem::Steps {
                steps,
                max: model.max_steps(),
            }));
        }
        if let Some(s) = &model.manifest().scheduler {
            s.check(steps).map_err(|e| self.config_problem(e.into()))?;
        }
        if min_steps == 0 || min_steps > steps {
            return Err(self.config_problem(PolicyConfigProblem::MinSteps { min_steps, steps }));
        }
        let deadline_ns = match self.deadline_ms {
            Some(d) if !(d.is_finite() && d > 0.0) => {
                return Err(self.config_problem(PolicyConfigProblem::DeadlineMs(d)))
            }
            d => d.map(|d| d * 1e6),
        };
        Ok((steps, min_steps, deadline_ns))
    }

    /// The goals (configured, or the manifest's) with their schedule; `None` for a model
    /// that reads its goal in the camera image.
    fn goal_sequence(&self, raw: &Manifest2) -> Result<Option<GoalSequence>, PolicyLoadError> {
        let goal_list = self.goals.as_ref().unwrap_or(&raw.task.goals);
        if goal_list.is_empty() {
            // The manifest check allows this only for a model that reads its goal in
            // the image and takes no `goal` source; it has no goal to schedule.
            if let Some(&(seq, goal)) = self.goal_schedule.first() {
                let e = crate::goals::GoalError::BadSchedule {
                    entry: 0,
                    seq,
                    goal,
                    len: 0,
                    why: "the model reads its goal in the camera image",
                };
                return Err(self.invalid(e.into()));
            }
            return Ok(None);
        }
        GoalSequence::new(raw.d_a, goal_list, raw.task.goal_tolerance_rad, 0)
            .and_then(|g| g.with_schedule(&self.goal_schedule))
            .map(Some)
            .map_err(|e| self.invalid(e.into()))
    }
}

/// A format-2 policy; see the module docs.
#[derive(Debug)]
pub struct ImportedPolicy {
    model: ImportedModel,
    /// The goal sequence (none: the model sees its goal in the camera image).
    goals: Option<GoalSequence>,
    /// The newest camera frame (`observe_image`), RGB8; its frame counter (0: none yet).
    image: Vec<u8>,
    image_seq: u64,
    settler: Settler,
    state_source: StateSource,
    steps: usize,
    min_steps: usize,
    deadline_ns: Option<f64>,
    noise: GaussianNoise,
    init: Vec<f32>,
    obs_raw: Vec<f64>,
    pos_buf: Vec<f64>,
    last_seq: Option<u64>,
    last_capture_ns: Option<u64>,
    step_ns_est: f64,
    stats: AnytimeStats,
    last_verdict: Option<DomainVerdict>,
    smoother: Option<ChunkSmoother>,
    /// A residual's base chunk on its own grid, absolute (`steps x d_a`; empty: the
    /// model takes none), and whether one was given for the next `infer`.
    base_abs: Vec<f64>,
    base_given: bool,
}

impl ImportedPolicy {
    /// Loads and checks the model, validates the configuration against it, and runs one
    /// warm-up chunk (ONNX Runtime's first run is the slow one; the anytime sampler starts
    /// with a measured step latency).
    pub fn new(cfg: &ImportedPolicyConfig) -> Result<ImportedPolicy, PolicyLoadError> {
        let model = ImportedModel::load(&cfg.manifest, &cfg.session)?;
        let raw = &model.manifest().raw;
        let (steps, min_steps, deadline_ns) = cfg.anytime(&model)?;
        let goals = cfg.goal_sequence(raw)?;
        let image_bytes = model.image_size().map_or(0, |(h, w)| h * w * 3);
        let radius = cfg
            .goal_settle_radius_rad
            .unwrap_or(4.0 * raw.task.goal_tolerance_rad);
        if !(radius.is_finite() && radius >= 0.0) {
            return Err(cfg.config_problem(PolicyConfigProblem::SettleRadius(radius)));
        }
        let settler = Settler::new(radius, 0.2 * raw.task.goal_tolerance_rad, cfg.settle_chunks);
        let (d_obs, len, played) = (raw.d_obs(), raw.sequence_len(), raw.action.len * raw.d_a);
        let smoother = ChunkSmoother::new(raw.action.len, cfg.smoothing_modes);
        let state_source = cfg.state.unwrap_or(raw.observation.state);
        let base_len = raw.base_chunk().map_or(0, |b| b.steps * raw.d_a);
        let seed = cfg.seed.unwrap_or(raw.sampler.seed);
        let mut policy = ImportedPolicy {
            state_source,
            noise: GaussianNoise::new(seed),
            init: vec![0.0; len],
            obs_raw: vec![0.0; d_obs],
            pos_buf: vec![0.0; played],
            model,
            goals,
            image: vec![0; image_bytes],
            image_seq: 0,
            settler,
            steps,
            min_steps,
            deadline_ns,
            last_seq: None,
            last_capture_ns: None,
            step_ns_est: 0.0,
            stats: AnytimeStats::default(),
            last_verdict: None,
            smoother,
            base_abs: vec![0.0; base_len],
            base_given: false,
        };
        policy.warm_up().map_err(|e| PolicyLoadError::Runtime {
            path: policy.model.model_path().to_path_buf(),
            message: e.0,
        })?;
        Ok(policy)
    }

    fn warm_up(&mut self) -> Result<(), PolicyError> {
        let mean = self.model.domain().mean().to_vec();
        let mut noise = GaussianNoise::new(u64::MAX);
        noise.fill(&mut self.init);
        self.model.push_observation(&mean);
        if self.model.image_size().is_some() {
            let grey = vec![128u8; self.image.len()];
            self.model.push_image(&grey)?;
        }
        let start = Instant::now();
        self.model
            .run(&self.init, self.steps, &mut |z| noise.fill(z), &mut |_| {})?;
        self.step_ns_est = start.elapsed().as_nanos() as f64 / self.steps as f64;
        self.model.reset_history();
        Ok(())
    }

    /// The loaded model.
    pub fn model(&self) -> &ImportedModel {
        &self.model
    }

    /// Anytime/domain counters.
    pub fn stats(&self) -> AnytimeStats {
        self.stats
    }

    /// The verdict of the last observation checked by `infer`.
    pub fn last_verdict(&self) -> Option<DomainVerdict> {
        self.last_verdict
    }

    /// Index of the goal currently pursued.
    pub fn goal_index(&self) -> usize {
        self.goals.as_ref().map_or(0, GoalSequence::index)
    }

    /// Writes the base chunk given for this call into the model's input, encoded against
    /// the observed positions `q`; a model that takes one refuses to run without it.
    fn take_base(&mut self, q: &[f64]) -> Result<(), PolicyError> {
        if self.base_abs.is_empty() {
            return Ok(());
        }
        if !std::mem::take(&mut self.base_given) {
            return Err(PolicyError(
                "imported policy: the residual takes its base's chunk \
                 ([residual.base_chunk]) and none was given for this observation"
                    .into(),
            ));
        }
        let delta = self
            .model
            .manifest()
            .raw
            .base_chunk()
            .is_some_and(|b| b.encoding == ActionEncoding::DeltaFromObserved);
        let d_a = q.len();
        let dst = self.model.base_input_mut();
        for (i, (d, a)) in dst.iter_mut().zip(&self.base_abs).enumerate() {
            *d = if delta { a - q[i % d_a] } else { *a };
        }
        Ok(())
    }

    /// Fills the raw observation: each input's sources in order.
    fn assemble(&mut self, pos: &JointVec, vel: &JointVec) {
        let raw = &self.model.manifest().raw;
        let d_a = raw.d_a;
        let mut o = 0;
        for input in &raw.observation.inputs {
            for src in &input.sources {
                let v: &[f64] = match src {
                    Source::JointPos => &pos[..d_a],
                    Source::JointVel => &vel[..d_a],
                    // The manifest check refuses a `goal` source without goals.
                    Source::Goal => match &self.goals {
                        Some(g) => &g.current()[..d_a],
                        None => &pos[..d_a],
                    },
                };
                self.obs_raw[o..o + d_a].copy_from_slice(v);
                o += d_a;
            }
        }
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
                "imported policy: observation has {} joints, model expects {d_a}",
                obs.dof
            )));
        }
        let (pos, vel) = self.state_source.of(obs);
        if let Some(j) = (0..d_a).find(|&j| !(pos[j].is_finite() && vel[j].is_finite())) {
            return Err(PolicyError(format!(
                "imported policy: state of joint {j} is not finite (position {}, velocity {})",
                pos[j], vel[j]
            )));
        }
        Ok((pos, vel))
    }

    /// A new observation: the goals observe it (and may advance), a new goal or a gap
    /// starts a new episode, and the observation (with the newest frame) becomes the
    /// history's newest step.
    fn push_step(
        &mut self,
        obs: &Observation,
        (pos, vel): (&JointVec, &JointVec),
        dt_ns: u64,
        takes_image: bool,
    ) -> Result<(), PolicyError> {
        let mut changed = false;
        if let Some(goals) = self.goals.as_mut() {
            changed = goals.observe(obs.seq, pos, obs.t_capture);
            if self.settler.observe(goals, pos) {
                goals.advance();
                self.stats.settled_advances += 1;
                changed = true;
            }
        }
        // A new goal starts a new episode, as in the training data; so does a gap of
        // more than two frames (the loop held the arm, or inference stalled).
        let t = obs.t_capture.as_ns();
        let gap = self
            .last_capture_ns
            .is_some_and(|prev| t.saturating_sub(prev) > 2 * dt_ns + dt_ns / 2);
        if changed || gap {
            self.settler.restart();
            self.model.reset_history();
        }
        self.assemble(pos, vel);
        self.model.push_observation(&self.obs_raw);
        if takes_image {
            self.model.push_image(&self.image)?;
        }
        self.last_seq = Some(obs.seq);
        self.last_capture_ns = Some(t);
        Ok(())
    }

    /// Runs the model at the anytime step count from fresh noise and de-normalises the
    /// played setpoints (smoothed) into `pos_buf`; `q`: the observed positions. The steps
    /// and the measured latency per step.
    fn sample(&mut self, q: &[f64]) -> Result<(usize, f64), PolicyError> {
        let steps = anytime_steps(
            self.deadline_ns,
            self.step_ns_est,
            self.min_steps,
            self.steps,
        );
        self.noise.fill(&mut self.init);
        let noise = &mut self.noise;
        let start = Instant::now();
        self.model
            .run(&self.init, steps, &mut |z| noise.fill(z), &mut |_| {})?;
        let step_ns = start.elapsed().as_nanos() as f64 / steps as f64;
        self.model.actions_into(q, &mut self.pos_buf);
        if let Some(sm) = self.smoother.as_mut() {
            sm.apply(&mut self.pos_buf, q.len(), q);
        }
        Ok((steps, step_ns))
    }
}

impl Policy for ImportedPolicy {
    fn begin_episode(&mut self, goal: &chunkrt_core::JointVec) {
        if let Some(g) = self.goals.as_mut() {
            g.pursue_only(goal);
        }
        self.settler.restart();
    }

    fn spec(&self) -> PolicySpec {
        let raw = &self.model.manifest().raw;
        PolicySpec {
            dof: raw.d_a,
            horizon: raw.action.len,
            dt_ns: raw.dt_ns(),
        }
    }

    /// Setpoint `i` is for `obs.t_capture + i * dt` (setpoint 0 is "now").
    fn infer(&mut self, obs: &Observation, out: &mut Chunk) -> Result<InferInfo, PolicyError> {
        let (d_a, len, dt_ns) = {
            let raw = &self.model.manifest().raw;
            (raw.d_a, raw.action.len, raw.dt_ns())
        };
        let (pos, vel) = self.checked_state(obs, d_a)?;
        // A new observation is one history step; further draws for the same observation
        // (the runtime's candidates) see the same history.
        let fresh = self.last_seq != Some(obs.seq);
        let takes_image = self.model.image_size().is_some();
        if takes_image && self.image_seq == 0 {
            return Err(PolicyError(
                "imported policy: the model takes a camera image and no frame has arrived".into(),
            ));
        }
        self.take_base(&pos[..d_a])?;
        if fresh {
            self.push_step(obs, (pos, vel), dt_ns, takes_image)?;
        } else {
            self.assemble(pos, vel);
            self.model.replace_newest(&self.obs_raw);
            if takes_image {
                self.model.replace_newest_image(&self.image)?;
            }
        }
        let verdict = self.model.domain().check(&self.obs_raw);
        self.last_verdict = Some(verdict);
        let (steps, step_ns) = self.sample(&pos[..d_a])?;
        self.step_ns_est = step_estimate(self.step_ns_est, step_ns);
        let out_of_domain = self.stats.record(steps, self.steps, verdict);
        write_chunk(out, &self.pos_buf, len, d_a, dt_ns, steps);
        Ok(InferInfo {
            steps: steps as u16,
            steps_nominal: self.steps as u16,
            step_ns: step_ns as u64,
            out_of_domain,
            goal: self.goals.as_ref().map(|g| g.index() as u16),
            ..InferInfo::default()
        })
    }

    fn image_size(&self) -> Option<(usize, usize)> {
        self.model.image_size()
    }

    fn exclusions(&self) -> chunkrt_core::Exclusions {
        self.model.manifest().raw.provenance().exclusions()
    }

    fn goals(&self) -> &[chunkrt_core::JointVec] {
        self.goals.as_ref().map_or(&[], GoalSequence::all)
    }

    /// The base chunk on the residual's grid: setpoint `i` at `i * dt_ms` from the base
    /// chunk's start, linear between the base's setpoints, its last one held past its end.
    fn observe_base(&mut self, base: &Chunk) -> Result<(), PolicyError> {
        if self.base_abs.is_empty() {
            return Ok(());
        }
        let raw = &self.model.manifest().raw;
        let (d_a, n) = (raw.d_a, base.len as usize);
        if base.dof as usize != d_a || n == 0 || base.dt_ns == 0 {
            return Err(PolicyError(format!(
                "imported policy: the base's chunk has {} joints and {n} setpoints every {} ns; \
                 the residual takes {d_a} joints and at least one setpoint",
                base.dof, base.dt_ns
            )));
        }
        let ratio = raw.dt_ns() as f64 / base.dt_ns as f64;
        for (i, row) in self.base_abs.chunks_exact_mut(d_a).enumerate() {
            let s = (i as f64 * ratio).min((n - 1) as f64);
            let (k, f) = (s.floor() as usize, s.fract());
            let (a, b) = (&base.pos_rad[k], &base.pos_rad[(k + 1).min(n - 1)]);
            for (j, v) in row.iter_mut().enumerate() {
                *v = a[j] + (b[j] - a[j]) * f;
                if !v.is_finite() {
                    self.base_given = false;
                    return Err(PolicyError(format!(
                        "imported policy: the base's chunk is not finite at setpoint {k}, joint {j}"
                    )));
                }
            }
        }
        self.base_given = true;
        Ok(())
    }

    fn observe_image(&mut self, image: &ImageRef<'_>) -> Result<(), PolicyError> {
        let want = self.model.image_size();
        if want != Some((image.height, image.width)) || image.rgb.len() != self.image.len() {
            return Err(PolicyError(format!(
                "imported policy: camera frame {} is {} x {} ({} bytes), the model takes {}",
                image.seq,
                image.height,
                image.width,
                image.rgb.len(),
                match want {
                    Some((h, w)) => format!("{h} x {w} RGB"),
                    None => "no image".into(),
                }
            )));
        }
        self.image.copy_from_slice(image.rgb);
        self.image_seq = image.seq.max(1);
        Ok(())
    }
}
