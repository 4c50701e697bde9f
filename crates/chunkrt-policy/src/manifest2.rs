//! Manifest format 2: policies brought from elsewhere (LeRobot's Diffusion Policy and ACT,
//! exported by `scripts/lerobot/export_lerobot.py`, or any graph that fits the contract).
//!
//! Format 1 ([`crate::Manifest`]) describes chunkrt's own models: one observation vector,
//! per-element normalisation, chunkrt's samplers. Format 2 describes a model the way its
//! trainer sees it:
//! - **named observation inputs** (each a graph input), each the concatenation of
//!   `sources` (`joint_pos`, `joint_vel`, `goal`) over an observation `history` of n steps,
//!   normalised by LeRobot's formulas (`mean_std`, `min_max`, `identity`);
//! - **the action sequence** the graph produces (`horizon` steps, normalised per joint), of
//!   which `[start, start + len)` is played (LeRobot's sequence starts at the oldest
//!   observation: `start = n_obs_steps - 1`);
//! - **a camera image** (`[[observation.images]]`, at most one): a graph input of
//!   `[1, 3, height, width]` (`[1, history, 3, height, width]` with a history), RGB,
//!   pixels scaled to `[0, 1]` then normalised per channel, its history kept in step
//!   with the state's;
//! - **the kind**: `diffusion` (a denoiser; chunkrt runs the diffusers scheduler the model
//!   was trained with, [`crate::diffusers`]) or `chunk` (one call returns the sequence: ACT).
//!
//! Parsed with `deny_unknown_fields`; every value is checked before use, and the message
//! names the key.

use std::path::{Path, PathBuf};

use chunkrt_core::{MAX_DOF, MAX_HORIZON};
use serde::Deserialize;

use crate::diffusers::{
    PredictionType, SchedulerSettings, SchedulerType, TimestepSpacing, VarianceType,
};
use crate::error::ManifestProblem::{self, Rule};
use crate::error::PolicyLoadError;
use crate::manifest::{
    check_digest_and_file, check_domain, check_training, check_values as values, positive, range,
    DomainSpec, StateSource, Training, MAX_OBS,
};
use crate::provenance::{
    NegativeEvent, Omission, Provenance, RegimeStage, SimulationProvenance, WearLedgerRef,
};

/// Longest observation history a manifest may declare.
pub const MAX_HISTORY: usize = 16;

/// What the graph is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// A denoiser `out = f(x, timestep, observation inputs)`, sampled by chunkrt with the
    /// `[scheduler]` the model was trained with.
    Diffusion,
    /// One call returns the normalised action sequence (ACT).
    Chunk,
}

/// A part of an observation input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Joint positions (rad) of the state the manifest's `observation.state` names.
    JointPos,
    /// Joint velocities (rad/s) of that state.
    JointVel,
    /// The goal pose being pursued (rad).
    Goal,
}

impl Source {
    /// The name written in manifests.
    pub fn name(self) -> &'static str {
        match self {
            Source::JointPos => "joint_pos",
            Source::JointVel => "joint_vel",
            Source::Goal => "goal",
        }
    }
}

/// A normalisation mode, LeRobot's `NormalizationMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormMode {
    /// `(x - mean) / (std + 1e-8)`; inverse `x * std + mean`.
    MeanStd,
    /// `2 (x - min) / (max - min) - 1` (a zero range taken as 1e-8); inverse
    /// `(x + 1) / 2 * (max - min) + min`.
    MinMax,
    /// Passed through.
    Identity,
}

/// Per-dimension statistics for a normalisation.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormStats {
    /// Mode.
    pub normalisation: Option<NormMode>,
    /// Means (`mean_std`).
    pub mean: Option<Vec<f64>>,
    /// Standard deviations (`mean_std`).
    pub std: Option<Vec<f64>>,
    /// Minima (`min_max`).
    pub min: Option<Vec<f64>>,
    /// Maxima (`min_max`).
    pub max: Option<Vec<f64>>,
}

/// LeRobot's epsilon in its normalisation formulas.
const NORM_EPS: f32 = 1e-8;

/// A checked normalisation: float32 parameters, as LeRobot holds them.
#[derive(Clone, Debug, PartialEq)]
pub enum Normaliser {
    /// `(x - mean) / (std + eps)`.
    MeanStd {
        /// Means.
        mean: Vec<f32>,
        /// Standard deviations.
        std: Vec<f32>,
    },
    /// `2 (x - min) / denom - 1`, denom = max - min (0 taken as eps).
    MinMax {
        /// Minima.
        min: Vec<f32>,
        /// `max - min` (0 replaced by eps).
        denom: Vec<f32>,
    },
    /// Passed through.
    Identity,
}

impl Normaliser {
    fn from_stats(key: &str, s: &NormStats, dim: usize) -> Result<Normaliser, ManifestProblem> {
        let f32s = |name: &str, v: &Option<Vec<f64>>| -> Result<Vec<f32>, ManifestProblem> {
            let v = v
                .as_ref()
                .ok_or_else(|| Rule(format!("{key}: `{name}` is missing ({dim} values)")))?;
            values(&format!("{key}.{name}"), v, dim)?;
            Ok(v.iter().map(|x| *x as f32).collect())
        };
        let unused = |names: &[(&str, bool)]| -> Result<(), ManifestProblem> {
            match names.iter().find(|(_, present)| *present) {
                Some((n, _)) => Err(Rule(format!(
                    "{key}.{n} does not belong to normalisation = \"{}\"",
                    match s.normalisation {
                        Some(NormMode::MeanStd) => "mean_std",
                        Some(NormMode::MinMax) => "min_max",
                        _ => "identity",
                    }
                ))),
                None => Ok(()),
            }
        };
        match s.normalisation {
            Some(NormMode::MeanStd) => {
                unused(&[("min", s.min.is_some()), ("max", s.max.is_some())])?;
                let mean = f32s("mean", &s.mean)?;
                let std = f32s("std", &s.std)?;
                if let Some(i) = std.iter().position(|x| *x < 0.0) {
                    return Err(Rule(format!("{key}.std[{i}] = {} is negative", std[i])));
                }
                Ok(Normaliser::MeanStd { mean, std })
            }
            Some(NormMode::MinMax) => {
                unused(&[("mean", s.mean.is_some()), ("std", s.std.is_some())])?;
                let min = f32s("min", &s.min)?;
                let max = f32s("max", &s.max)?;
                if let Some(i) = (0..dim).find(|&i| max[i] < min[i]) {
                    return Err(Rule(format!(
                        "{key}.max[{i}] = {} is below {key}.min[{i}] = {}",
                        max[i], min[i]
                    )));
                }
                let denom = (0..dim)
                    .map(|i| {
                        let d = max[i] - min[i];
                        if d == 0.0 {
                            NORM_EPS
                        } else {
                            d
                        }
                    })
                    .collect();
                Ok(Normaliser::MinMax { min, denom })
            }
            Some(NormMode::Identity) | None => {
                unused(&[
                    ("mean", s.mean.is_some()),
                    ("std", s.std.is_some()),
                    ("min", s.min.is_some()),
                    ("max", s.max.is_some()),
                ])?;
                if s.normalisation.is_none() {
                    return Err(Rule(format!(
                        "{key}.normalisation is missing (mean_std, min_max or identity)"
                    )));
                }
                Ok(Normaliser::Identity)
            }
        }
    }

    /// Normalises value `x` of dimension `i` (float32, LeRobot's operation order).
    pub fn forward(&self, i: usize, x: f32) -> f32 {
        match self {
            Normaliser::MeanStd { mean, std } => (x - mean[i]) / (std[i] + NORM_EPS),
            Normaliser::MinMax { min, denom } => (2.0 * (x - min[i])) / denom[i] - 1.0,
            Normaliser::Identity => x,
        }
    }

    /// The inverse for dimension `i`.
    pub fn inverse(&self, i: usize, x: f32) -> f32 {
        match self {
            Normaliser::MeanStd { mean, std } => x * std[i] + mean[i],
            Normaliser::MinMax { min, denom } => (x + 1.0) / 2.0 * denom[i] + min[i],
            Normaliser::Identity => x,
        }
    }
}

/// One named observation input.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    /// The graph input's name (LeRobot's feature key, e.g. `observation.state`).
    pub name: String,
    /// Its parts, concatenated in order, each `d_a` values.
    pub sources: Vec<Source>,
    /// Normalisation and its statistics (`dim` values each).
    #[serde(flatten)]
    pub stats: NormStats,
}

/// The observation the model takes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObservationSpec {
    /// Steps of history (LeRobot's `n_obs_steps`), oldest first; 1: no time axis.
    pub history: usize,
    /// Which arm state `joint_pos` and `joint_vel` read.
    #[serde(default)]
    pub state: StateSource,
    /// The graph's observation inputs.
    pub inputs: Vec<InputSpec>,
    /// Camera images (at most one).
    #[serde(default)]
    pub images: Vec<ImageSpec>,
}

/// Most camera images a manifest may take.
pub const MAX_IMAGES: usize = 1;

/// A camera image the graph takes.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// The graph input's name (LeRobot's `observation.image`, `observation.images.top`).
    pub name: String,
    /// What camera it was trained on (informative).
    pub camera: Option<String>,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
    /// Normalisation of pixels scaled to `[0, 1]`, per channel R, G, B (3 values each).
    #[serde(flatten)]
    pub stats: NormStats,
}

/// The action sequence the model produces.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionSpec {
    /// `absolute` joint positions or `delta_from_observed`.
    pub encoding: crate::manifest::ActionEncoding,
    /// Normalisation of each joint's action (`d_a` values each).
    #[serde(flatten)]
    pub stats: NormStats,
    /// The graph's sequence length.
    pub horizon: usize,
    /// Index of the action for the current observation.
    pub start: usize,
    /// Setpoints played from the sequence: `[start, start + len)`.
    pub len: usize,
}

/// Graph input/output names besides the observation inputs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoNames2 {
    /// The noisy normalised sequence, `[1, horizon, d_a]` (diffusion).
    pub x: Option<String>,
    /// The timestep, `[1]` float32 holding an integer (diffusion).
    pub t: Option<String>,
    /// The output, `[1, horizon, d_a]`.
    pub out: String,
}

/// How the scheduler is written in a manifest.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSpec {
    /// `ddpm` or `ddim`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Training timesteps T.
    pub train_timesteps: usize,
    /// Informative (`alphas_cumprod` is authoritative).
    pub beta_schedule: Option<String>,
    /// T float32 values.
    pub alphas_cumprod: Vec<f64>,
    /// `epsilon`, `sample` or `v_prediction`.
    pub prediction_type: String,
    /// Clamp the predicted clean sample.
    pub clip_sample: bool,
    /// ... to this range.
    #[serde(default = "one")]
    pub clip_sample_range: f64,
    /// `leading`, `trailing` or `linspace`.
    pub timestep_spacing: String,
    /// Added to the leading timesteps.
    #[serde(default)]
    pub steps_offset: usize,
    /// DDPM: `fixed_small`, `fixed_small_log` or `fixed_large`.
    pub variance_type: Option<String>,
    /// DDIM.
    pub set_alpha_to_one: Option<bool>,
    /// DDIM.
    pub eta: Option<f64>,
}

fn one() -> f64 {
    1.0
}

/// A flow-matching model's integration (`[flow]`, instead of a `[scheduler]`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// `euler` (one call a step) or `heun` (two).
    pub method: String,
    /// Where the noise is: `t = 0` (chunkrt's own models, rectified flow: integrate 0 -> 1)
    /// or `t = 1` (pi0's convention: integrate 1 -> 0).
    pub noise_at: f64,
}

/// A checked `[flow]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSettings {
    /// Heun (else Euler).
    pub heun: bool,
    /// Integrate from this time ...
    pub from: f64,
    /// ... to this one.
    pub to: f64,
}

impl FlowSpec {
    fn settings(&self) -> Result<FlowSettings, ManifestProblem> {
        let heun = match self.method.as_str() {
            "euler" => false,
            "heun" => true,
            m => {
                return Err(Rule(format!(
                    "flow.method = \"{m}\" is not one of euler, heun"
                )))
            }
        };
        let (from, to) = if self.noise_at == 0.0 {
            (0.0, 1.0)
        } else if self.noise_at == 1.0 {
            (1.0, 0.0)
        } else {
            return Err(Rule(format!(
                "flow.noise_at = {} must be 0 or 1",
                self.noise_at
            )));
        };
        Ok(FlowSettings { heun, from, to })
    }
}

/// Sampler defaults.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplerDefaults2 {
    /// Inference steps (chunk models: 1).
    pub steps: usize,
    /// Fewest steps the anytime sampler may use.
    pub min_steps: usize,
    /// Seed of the noise stream.
    pub seed: u64,
}

/// The task's goals.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// A goal counts as reached within this distance on every joint.
    pub goal_tolerance_rad: f64,
    /// Goal poses, visited in order.
    pub goals: Vec<Vec<f64>>,
}

/// Where the model came from (informative).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// e.g. `lerobot 0.6.1`.
    pub framework: String,
    /// e.g. `diffusion`, `act`.
    pub policy: String,
    /// The checkpoint it was exported from.
    pub checkpoint: String,
}

/// A parsed format-2 manifest (see the module docs).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest2 {
    /// 2.
    pub format: u32,
    /// What the graph is.
    pub kind: ModelKind,
    /// Model file, relative to the manifest.
    pub model_file: String,
    /// SHA-256 of the model file.
    pub model_sha256: String,
    /// The model file's size in bytes, when declared: a file of another size is
    /// refused before it is read.
    #[serde(default)]
    pub model_bytes: Option<u64>,
    /// Joints.
    pub d_a: usize,
    /// Frame period of the training data: one action step, one history step (ms).
    pub dt_ms: f64,
    /// Provenance of the graph.
    pub origin: Origin,
    /// The observation.
    pub observation: ObservationSpec,
    /// The action sequence.
    pub action: ActionSpec,
    /// Graph names.
    pub io: IoNames2,
    /// The scheduler (diffusion).
    pub scheduler: Option<SchedulerSpec>,
    /// Flow-matching integration (diffusion, instead of a scheduler).
    pub flow: Option<FlowSpec>,
    /// Sampler defaults.
    pub sampler: SamplerDefaults2,
    /// Goals.
    pub task: Task,
    /// Provenance of the training.
    pub training: Training,
    /// Operating domain over the raw current-step observation (every input's sources, in
    /// input order).
    pub domain: DomainSpec,

    /// Provenance: the training stages in order ([`crate::provenance`]).
    #[serde(default)]
    pub regime_sequence: Vec<RegimeStage>,
    /// Provenance: the simulator it was trained in.
    #[serde(default)]
    pub simulation_provenance: Option<SimulationProvenance>,
    /// Provenance: mechanisms measured unclosed, and the regions they exclude from the
    /// declared domain.
    #[serde(default)]
    pub omission_log: Vec<Omission>,
    /// Provenance: intervention records cited by digest.
    #[serde(default)]
    pub negative_event_registry: Vec<NegativeEvent>,
    /// Provenance: wear ledgers per hardware id.
    #[serde(default)]
    pub adaptation_wear_ledger: Vec<WearLedgerRef>,
    /// Whether a file the provenance ledger cites may lie outside the manifest's
    /// directory (an absolute path, `..`, a symbolic link out of it). Default: no.
    #[serde(default)]
    pub cite_outside_manifest_dir: bool,
    /// A residual policy's binding to its base (with `action.encoding = "residual"`).
    #[serde(default)]
    pub residual: Option<ResidualBinding>,
}

/// `[residual]`: this model returns a correction to another policy's chunk, and was
/// trained on top of that base model only.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResidualBinding {
    /// SHA-256 of the base's model file (its manifest's `model_sha256`): a run refuses
    /// this residual on any other base.
    pub base_sha256: String,
    /// The graph input that takes the base's chunk, when the model takes it.
    #[serde(default)]
    pub base_chunk: Option<BaseChunkSpec>,
}

/// `[residual.base_chunk]`: a graph input `[1, steps, d_a]` holding the base's chunk on
/// the residual's own grid (`dt_ms`): setpoint `i` is the base's at `i * dt_ms` from the
/// base chunk's start, interpolated linearly between the base's setpoints and held at
/// its last one past its end.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseChunkSpec {
    /// The graph input's name (e.g. `action.base`).
    pub name: String,
    /// Setpoints it takes.
    pub steps: usize,
    /// `absolute` joint positions, or `delta_from_observed` (minus the observed
    /// positions of the manifest's state).
    pub encoding: crate::manifest::ActionEncoding,
    /// Normalisation per joint (`d_a` values each).
    #[serde(flatten)]
    pub stats: NormStats,
}

/// A format-2 manifest with its derived, checked values.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckedManifest2 {
    /// As written.
    pub raw: Manifest2,
    /// One normaliser per observation input.
    pub input_norms: Vec<Normaliser>,
    /// One normaliser per image (per channel).
    pub image_norms: Vec<Normaliser>,
    /// The action normaliser.
    pub action_norm: Normaliser,
    /// The base chunk input's normaliser (a residual that takes its base's chunk).
    pub base_norm: Option<Normaliser>,
    /// The scheduler (diffusion).
    pub scheduler: Option<SchedulerSettings>,
    /// Flow-matching integration (diffusion without a scheduler).
    pub flow: Option<FlowSettings>,
}

impl Manifest2 {
    /// Values of one input at one history step.
    pub fn input_dim(&self, input: &InputSpec) -> usize {
        input.sources.len() * self.d_a
    }

    /// Length of the raw current-step observation (the domain's dimension).
    pub fn d_obs(&self) -> usize {
        self.observation
            .inputs
            .iter()
            .map(|i| self.input_dim(i))
            .sum()
    }

    /// The graph shape of an image input.
    pub fn image_shape(&self, image: &ImageSpec) -> Vec<usize> {
        if self.observation.history > 1 {
            vec![1, self.observation.history, 3, image.height, image.width]
        } else {
            vec![1, 3, image.height, image.width]
        }
    }

    /// The base chunk input a residual takes, if it takes one.
    pub fn base_chunk(&self) -> Option<&BaseChunkSpec> {
        self.residual.as_ref().and_then(|r| r.base_chunk.as_ref())
    }

    /// The graph shape of an observation input.
    pub fn input_shape(&self, input: &InputSpec) -> Vec<usize> {
        if self.observation.history > 1 {
            vec![1, self.observation.history, self.input_dim(input)]
        } else {
            vec![1, self.input_dim(input)]
        }
    }

    /// Values of the graph's action sequence.
    pub fn sequence_len(&self) -> usize {
        self.action.horizon * self.d_a
    }

    /// Setpoint period in ns.
    pub fn dt_ns(&self) -> u64 {
        (self.dt_ms * 1e6).round() as u64
    }

    /// The model file's path, resolved against the manifest's directory.
    pub fn model_path(&self, manifest_path: &Path) -> PathBuf {
        manifest_path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join(&self.model_file)
    }

    /// The provenance sections.
    pub fn provenance(&self) -> Provenance<'_> {
        Provenance {
            regime_sequence: &self.regime_sequence,
            simulation: self.simulation_provenance.as_ref(),
            omission_log: &self.omission_log,
            negative_events: &self.negative_event_registry,
            wear_ledger: &self.adaptation_wear_ledger,
            cite_outside: self.cite_outside_manifest_dir,
        }
    }
}

impl CheckedManifest2 {
    /// Reads, parses and checks a manifest, and the digests of the files its provenance
    /// ledger cites.
    pub fn load(path: &Path) -> Result<CheckedManifest2, PolicyLoadError> {
        let text = crate::manifest::read_manifest_text(path)?;
        let m = CheckedManifest2::parse(path, &text)?;
        m.raw
            .provenance()
            .verify_files(path)
            .map_err(|what| PolicyLoadError::ManifestInvalid {
                path: path.to_path_buf(),
                what,
            })?;
        Ok(m)
    }

    /// Parses and checks manifest text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<CheckedManifest2, PolicyLoadError> {
        let raw: Manifest2 = toml::from_str(text).map_err(|e| PolicyLoadError::ManifestParse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        raw.check()
            .map_err(|what| PolicyLoadError::ManifestInvalid {
                path: path.to_path_buf(),
                what,
            })
    }
}

impl Manifest2 {
    /// A `[residual]` binding and `action.encoding = "residual"` go together; the base
    /// chunk input's normaliser.
    fn check_residual(&self) -> Result<Option<Normaliser>, ManifestProblem> {
        use crate::manifest::ActionEncoding;
        let residual_encoding = self.action.encoding == ActionEncoding::Residual;
        match &self.residual {
            Some(b) => {
                crate::provenance::check_sha256("residual.base_sha256", &b.base_sha256)?;
                if !residual_encoding {
                    return Err(Rule(
                        "a [residual] table needs action.encoding = \"residual\" (the model \
                         returns a correction to its base's chunk)"
                            .into(),
                    ));
                }
                let Some(c) = &b.base_chunk else {
                    return Ok(None);
                };
                let key = format!("residual.base_chunk (\"{}\")", c.name);
                let o = &self.observation;
                if c.name.is_empty() {
                    return Err(Rule(format!("{key}.name is empty")));
                }
                if o.inputs.iter().any(|i| i.name == c.name)
                    || o.images.iter().any(|i| i.name == c.name)
                {
                    return Err(Rule(format!(
                        "{key}: the name is also an observation input's"
                    )));
                }
                range(&format!("{key}.steps"), c.steps, 1, MAX_HORIZON)?;
                if !matches!(
                    c.encoding,
                    ActionEncoding::Absolute | ActionEncoding::DeltaFromObserved
                ) {
                    return Err(Rule(format!(
                        "{key}.encoding must be absolute or delta_from_observed"
                    )));
                }
                Normaliser::from_stats(&key, &c.stats, self.d_a).map(Some)
            }
            None if residual_encoding => Err(Rule(
                "action.encoding = \"residual\" needs a [residual] table with base_sha256 \
                 (the base model it was trained on)"
                    .into(),
            )),
            None => Ok(None),
        }
    }

    fn check(self) -> Result<CheckedManifest2, ManifestProblem> {
        if self.format != 2 {
            return Err(Rule(format!("format = {} (expected 2)", self.format)));
        }
        check_digest_and_file(&self.model_sha256, &self.model_file)?;
        crate::manifest::check_model_bytes(self.model_bytes)?;
        range("d_a", self.d_a, 1, MAX_DOF)?;
        positive("dt_ms", self.dt_ms)?;
        let input_norms = self.check_inputs()?;
        let image_norms = self.check_images()?;
        let d_obs = self.d_obs();
        range("the observation's length (domain)", d_obs, 1, MAX_OBS)?;
        let base_norm = self.check_residual()?;
        let action_norm = self.check_action()?;
        if self.io.out.is_empty() {
            return Err(Rule("io.out is empty".into()));
        }
        let (scheduler, flow) = self.check_sampling()?;
        self.check_task()?;
        check_domain(&self.domain, d_obs)?;
        check_training(&self.training)?;
        self.provenance().check(self.d_a, &self.model_sha256)?;
        Ok(CheckedManifest2 {
            raw: self,
            input_norms,
            image_norms,
            action_norm,
            base_norm,
            scheduler,
            flow,
        })
    }

    /// The observation's history and its named inputs (unique, each with sources); one
    /// normaliser per input.
    fn check_inputs(&self) -> Result<Vec<Normaliser>, ManifestProblem> {
        let o = &self.observation;
        range("observation.history", o.history, 1, MAX_HISTORY)?;
        if o.inputs.is_empty() {
            return Err(Rule(
                "observation.inputs is empty: the model needs at least one".into(),
            ));
        }
        let mut input_norms = Vec::new();
        for (k, input) in o.inputs.iter().enumerate() {
            let key = format!("observation.inputs[{k}] (\"{}\")", input.name);
            if input.name.is_empty() {
                return Err(Rule(format!("{key}.name is empty")));
            }
            if o.inputs[..k].iter().any(|i| i.name == input.name) {
                return Err(Rule(format!("{key}: the name is used twice")));
            }
            if input.sources.is_empty() {
                return Err(Rule(format!("{key}.sources is empty")));
            }
            input_norms.push(Normaliser::from_stats(
                &key,
                &input.stats,
                self.input_dim(input),
            )?);
        }
        Ok(input_norms)
    }

    /// The camera images: how many, their names and sizes; one normaliser per image.
    fn check_images(&self) -> Result<Vec<Normaliser>, ManifestProblem> {
        let o = &self.observation;
        if o.images.len() > MAX_IMAGES {
            return Err(Rule(format!(
                "observation.images has {} images; chunkrt takes at most {MAX_IMAGES} camera",
                o.images.len()
            )));
        }
        let mut image_norms = Vec::new();
        for (k, image) in o.images.iter().enumerate() {
            let key = format!("observation.images[{k}] (\"{}\")", image.name);
            if image.name.is_empty() {
                return Err(Rule(format!("{key}.name is empty")));
            }
            if o.inputs.iter().any(|i| i.name == image.name) {
                return Err(Rule(format!(
                    "{key}: the name is also an observation input's"
                )));
            }
            range(&format!("{key}.height"), image.height, 8, 128)?;
            range(&format!("{key}.width"), image.width, 8, 128)?;
            if image.height * image.width * 3 > 128 * 128 * 3 {
                return Err(Rule(format!("{key}: at most 128 x 128 pixels")));
            }
            image_norms.push(Normaliser::from_stats(&key, &image.stats, 3)?);
        }
        Ok(image_norms)
    }

    /// The action's normaliser and the slice of the model's horizon that is executed.
    fn check_action(&self) -> Result<Normaliser, ManifestProblem> {
        let a = &self.action;
        let action_norm = Normaliser::from_stats("action", &a.stats, self.d_a)?;
        range("action.horizon", a.horizon, 2, 1024)?;
        range("action.len", a.len, 2, MAX_HORIZON)?;
        if a.start + a.len > a.horizon {
            return Err(Rule(format!(
                "action.start + action.len = {} + {} is past action.horizon = {}",
                a.start, a.len, a.horizon
            )));
        }
        Ok(action_norm)
    }

    /// The model kind against its [scheduler] or [flow] table, its io.x and io.t, and
    /// the sampler's step counts; the scheduler or flow settings a diffusion model uses.
    fn check_sampling(
        &self,
    ) -> Result<(Option<SchedulerSettings>, Option<FlowSettings>), ManifestProblem> {
        let s = &self.sampler;
        let settings =
            match (self.kind, &self.scheduler, &self.flow) {
                (ModelKind::Diffusion, None, None) => return Err(Rule(
                    "kind = \"diffusion\" needs a [scheduler] table (DDPM, DDIM) or a [flow] table"
                        .into(),
                )),
                (ModelKind::Diffusion, Some(_), Some(_)) => {
                    return Err(Rule(
                        "a model has a [scheduler] or a [flow] table, not both".into(),
                    ))
                }
                (ModelKind::Chunk, Some(_), _) => {
                    return Err(Rule("kind = \"chunk\" takes no [scheduler] table".into()))
                }
                (ModelKind::Chunk, None, Some(_)) => {
                    return Err(Rule("kind = \"chunk\" takes no [flow] table".into()))
                }
                (ModelKind::Diffusion, sched, fl) => {
                    if self.io.x.is_none() || self.io.t.is_none() {
                        return Err(Rule("kind = \"diffusion\" needs io.x and io.t".into()));
                    }
                    match (sched, fl) {
                        (Some(spec), _) => {
                            let settings = spec.settings()?;
                            range("sampler.steps", s.steps, 1, spec.train_timesteps)?;
                            settings.check(s.steps)?;
                            (Some(settings), None)
                        }
                        (None, Some(f)) => {
                            range("sampler.steps", s.steps, 1, 10_000)?;
                            (None, Some(f.settings()?))
                        }
                        (None, None) => unreachable!("refused above"),
                    }
                }
                (ModelKind::Chunk, None, None) => {
                    if self.io.x.is_some() || self.io.t.is_some() {
                        return Err(Rule("kind = \"chunk\" takes no io.x or io.t".into()));
                    }
                    if s.steps != 1 {
                        return Err(Rule(format!(
                            "sampler.steps = {} for kind = \"chunk\" (one call per chunk: 1)",
                            s.steps
                        )));
                    }
                    (None, None)
                }
            };
        range("sampler.min_steps", s.min_steps, 1, s.steps)?;
        Ok(settings)
    }

    /// The task's goal tolerance and goals (each one joint vector); a model may go
    /// without goals only when it sees its goal in a camera image.
    fn check_task(&self) -> Result<(), ManifestProblem> {
        let o = &self.observation;
        positive("task.goal_tolerance_rad", self.task.goal_tolerance_rad)?;
        let uses_goal = o.inputs.iter().any(|i| i.sources.contains(&Source::Goal));
        if self.task.goals.is_empty() && (uses_goal || o.images.is_empty()) {
            return Err(Rule(
                "task.goals is empty (only a model that sees its goal in a camera image, with no `goal` source, may leave it empty)"
                    .into(),
            ));
        }
        for (i, g) in self.task.goals.iter().enumerate() {
            values(&format!("task.goals[{i}]"), g, self.d_a)?;
        }
        Ok(())
    }
}

impl SchedulerSpec {
    fn settings(&self) -> Result<SchedulerSettings, ManifestProblem> {
        let kind = match self.kind.as_str() {
            "ddpm" => SchedulerType::Ddpm,
            "ddim" => SchedulerType::Ddim,
            k => {
                return Err(Rule(format!(
                    "scheduler.type = \"{k}\" is not supported (ddpm or ddim)"
                )))
            }
        };
        range(
            "scheduler.train_timesteps",
            self.train_timesteps,
            1,
            100_000,
        )?;
        values(
            "scheduler.alphas_cumprod",
            &self.alphas_cumprod,
            self.train_timesteps,
        )?;
        let prediction = match self.prediction_type.as_str() {
            "epsilon" => PredictionType::Epsilon,
            "sample" => PredictionType::Sample,
            "v_prediction" => PredictionType::VPrediction,
            p => {
                return Err(Rule(format!(
                "scheduler.prediction_type = \"{p}\" is not one of epsilon, sample, v_prediction"
            )))
            }
        };
        let spacing = match self.timestep_spacing.as_str() {
            "leading" => TimestepSpacing::Leading,
            "trailing" => TimestepSpacing::Trailing,
            "linspace" => TimestepSpacing::Linspace,
            p => {
                return Err(Rule(format!(
                    "scheduler.timestep_spacing = \"{p}\" is not one of leading, trailing, linspace"
                )))
            }
        };
        let variance = match (kind, self.variance_type.as_deref()) {
            // DDIM's variance is its own (eta); "fixed_small" is what it computes.
            (SchedulerType::Ddim, Some(v)) if v != "fixed_small" => {
                return Err(Rule(format!(
                    "scheduler.variance_type = \"{v}\" applies to ddpm only (ddim's noise is eta)"
                )))
            }
            (_, None | Some("fixed_small")) => VarianceType::FixedSmall,
            (_, Some("fixed_small_log")) => VarianceType::FixedSmallLog,
            (_, Some("fixed_large")) => VarianceType::FixedLarge,
            (_, Some(v)) => {
                return Err(Rule(format!(
                    "scheduler.variance_type = \"{v}\" is not supported (fixed_small, \
                     fixed_small_log, fixed_large; learned variances need the model's second output)"
                )))
            }
        };
        // DDPM has no final alpha (it is 1) and no eta: only those values are accepted.
        if kind == SchedulerType::Ddpm
            && (self.set_alpha_to_one == Some(false) || self.eta.is_some_and(|e| e != 0.0))
        {
            return Err(Rule(
                "scheduler.set_alpha_to_one = false and scheduler.eta > 0 apply to ddim only"
                    .into(),
            ));
        }
        Ok(SchedulerSettings {
            kind,
            alphas_cumprod: self.alphas_cumprod.iter().map(|a| *a as f32).collect(),
            prediction,
            clip: self.clip_sample.then_some(self.clip_sample_range as f32),
            spacing,
            steps_offset: self.steps_offset,
            variance,
            set_alpha_to_one: self.set_alpha_to_one.unwrap_or(true),
            eta: self.eta.unwrap_or(0.0) as f32,
        })
    }
}

/// The `format` a manifest's text declares (1: chunkrt's own models, [`crate::Manifest`];
/// 2: [`Manifest2`]), read before the manifest is parsed as either.
pub fn manifest_format(path: &Path, text: &str) -> Result<u32, PolicyLoadError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| PolicyLoadError::ManifestParse {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
    })?;
    let invalid = |what: ManifestProblem| PolicyLoadError::ManifestInvalid {
        path: path.to_path_buf(),
        what,
    };
    match table.get("format") {
        Some(toml::Value::Integer(f @ (1 | 2))) => Ok(*f as u32),
        Some(v) => Err(invalid(Rule(format!(
            "format = {v} is not supported (1: chunkrt's own models, 2: imported models)"
        )))),
        None => Err(invalid(Rule("`format` is missing (1 or 2)".into()))),
    }
}

/// Checks a manifest of either format and says in one line what it describes.
pub fn check_any_manifest(path: &Path, text: &str) -> Result<String, PolicyLoadError> {
    Ok(match manifest_format(path, text)? {
        2 => {
            let m = CheckedManifest2::parse(path, text)?.raw;
            format!(
                "{:?} model {} ({} {}), {} joints, {} of {} setpoints {} ms apart, {} input(s), history {}{}",
                m.kind,
                m.model_file,
                m.origin.framework,
                m.origin.policy,
                m.d_a,
                m.action.len,
                m.action.horizon,
                m.dt_ms,
                m.observation.inputs.len(),
                m.observation.history,
                m.provenance().summary()
            )
        }
        _ => {
            let m = crate::Manifest::parse(path, text)?;
            format!(
                "{:?} model {}, {} joints, {} setpoints {} ms apart{}",
                m.kind,
                m.model_file,
                m.d_a,
                m.horizon,
                m.dt_ms,
                m.provenance().summary()
            )
        }
    })
}
