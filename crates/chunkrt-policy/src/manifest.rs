//! The policy manifest: a TOML file beside each model that says what the model is, how its
//! inputs and outputs are encoded, how to sample it, what it was trained on and where it may
//! be trusted. Parsed with `deny_unknown_fields`; every value is checked before use.

use crate::provenance::{
    NegativeEvent, Omission, Provenance, RegimeStage, SimulationProvenance, WearLedgerRef,
};
use std::path::{Path, PathBuf};

use chunkrt_core::{JointVec, MAX_DOF, MAX_HORIZON};
use serde::Deserialize;

use crate::error::ManifestProblem::{self, Rule};
use crate::error::PolicyLoadError;

/// Largest observation vector a manifest may declare (the domain check works on the stack).
pub const MAX_OBS: usize = 64;

/// What the graph predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// Flow matching: the graph returns the velocity `dx/dt`, t in [0, 1], t = 1 is data.
    Flow,
    /// DDIM: the graph returns the predicted noise at an integer timestep.
    Ddim,
}

/// The sampler that integrates the denoiser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SamplerMethod {
    /// Flow matching, explicit Euler: one graph call per step.
    Euler,
    /// Flow matching, Heun (trapezoidal predictor-corrector): two graph calls per step.
    Heun,
    /// DDIM with eta = 0 (deterministic after the initial noise).
    Ddim,
}

impl SamplerMethod {
    /// Parses `euler`, `heun` or `ddim`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "euler" => Some(SamplerMethod::Euler),
            "heun" => Some(SamplerMethod::Heun),
            "ddim" => Some(SamplerMethod::Ddim),
            _ => None,
        }
    }

    /// The name used in manifests and configs.
    pub fn name(self) -> &'static str {
        match self {
            SamplerMethod::Euler => "euler",
            SamplerMethod::Heun => "heun",
            SamplerMethod::Ddim => "ddim",
        }
    }

    /// Whether this sampler fits a model of `kind`.
    pub fn fits(self, kind: PolicyKind) -> bool {
        matches!(
            (self, kind),
            (SamplerMethod::Euler | SamplerMethod::Heun, PolicyKind::Flow)
                | (SamplerMethod::Ddim, PolicyKind::Ddim)
        )
    }
}

/// Graph input and output names.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IoNames {
    /// Normalised observation, [1, d_obs].
    pub obs: String,
    /// Noisy normalised action chunk, [1, horizon, d_a].
    pub x: String,
    /// Flow time or DDIM timestep, [1].
    pub t: String,
    /// Velocity (flow) or noise (DDIM), [1, horizon, d_a].
    pub out: String,
}

/// How the observation vector is built from the arm's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationEncoding {
    /// `[q_1..q_n, goal_1..goal_n]`: joint positions, then the current goal.
    JointPosAndGoal,
    /// `[q_1..q_n, goal_1..goal_n, v_1..v_n]`: joint positions, the current goal, joint
    /// velocities (rad/s). With the commanded state, a policy sees the trajectory it is
    /// continuing, not only where it is.
    JointPosGoalVel,
}

impl ObservationEncoding {
    /// Length of the observation vector for `d_a` joints.
    pub fn d_obs(self, d_a: usize) -> usize {
        match self {
            ObservationEncoding::JointPosAndGoal => 2 * d_a,
            ObservationEncoding::JointPosGoalVel => 3 * d_a,
        }
    }

    /// The name written in manifests.
    pub fn name(self) -> &'static str {
        match self {
            ObservationEncoding::JointPosAndGoal => "joint_pos_and_goal",
            ObservationEncoding::JointPosGoalVel => "joint_pos_goal_vel",
        }
    }
}

/// Which state the policy takes as the arm's (network input and the origin of a
/// delta-encoded chunk).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateSource {
    /// The measured positions and velocities (`Observation::pos_rad`, `vel_rad_s`).
    #[default]
    Measured,
    /// The last command sent to the drives and its velocity (`Observation::cmd_pos_rad`,
    /// `cmd_vel_rad_s`): chunks then start where the command stream is, not where the
    /// lagging measurement is.
    Commanded,
    /// The trajectory being played, without the seam blends toward it
    /// (`Observation::plan_pos_rad`, `plan_vel_rad_s`): a policy trained on it continues
    /// its own plan, and a blend's transients are not fed back into the next chunk.
    Planned,
}

impl StateSource {
    /// The positions and velocities of this state in an observation.
    pub fn of(self, obs: &chunkrt_core::Observation) -> (&JointVec, &JointVec) {
        match self {
            StateSource::Measured => (&obs.pos_rad, &obs.vel_rad_s),
            StateSource::Commanded => (&obs.cmd_pos_rad, &obs.cmd_vel_rad_s),
            StateSource::Planned => (&obs.plan_pos_rad, &obs.plan_vel_rad_s),
        }
    }
}

/// How the de-normalised action chunk maps to joint positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionEncoding {
    /// `chunk[i][j] = q_j + a[i][j]`: deltas from the observed position.
    DeltaFromObserved,
    /// `chunk[i][j] = a[i][j]`: absolute joint positions.
    Absolute,
    /// `chunk[i][j] = a[i][j]`: a correction added to the base policy's chunk (a
    /// residual policy's format-2 manifest, with its `[residual]` binding).
    Residual,
}

/// Observation/action encoding and the task's goals.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Encoding {
    /// Observation encoding.
    pub observation: ObservationEncoding,
    /// The state the policy was trained to observe (default `measured`); the runtime's
    /// `policy.state_source` overrides it.
    #[serde(default)]
    pub state: StateSource,
    /// Action encoding.
    pub action: ActionEncoding,
    /// A goal counts as reached within this distance on every joint.
    pub goal_tolerance_rad: f64,
    /// The goal poses the policy was trained on, visited in order.
    pub goals: Vec<Vec<f64>>,
}

/// Normalisation statistics: `n = (v - mean) / std` element-wise.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Normalisation {
    /// Observation mean, d_obs values.
    pub obs_mean: Vec<f64>,
    /// Observation standard deviation, d_obs positive values.
    pub obs_std: Vec<f64>,
    /// Action mean, horizon * d_a values (row-major, setpoint-major).
    pub act_mean: Vec<f64>,
    /// Action standard deviation, horizon * d_a positive values.
    pub act_std: Vec<f64>,
}

/// Sampler defaults (a runtime config may override them).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplerDefaults {
    /// Sampler method.
    pub method: SamplerMethod,
    /// Steps per chunk.
    pub steps: usize,
    /// Fewest steps the anytime sampler may fall back to.
    pub min_steps: usize,
    /// Seed of the noise stream.
    pub seed: u64,
}

/// DDIM noise schedule.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Schedule family (informative, e.g. `cosine`).
    pub name: String,
    /// Number of training timesteps N.
    pub train_timesteps: usize,
    /// The predicted clean sample is clipped to +-clip_x0 (normalised units).
    pub clip_x0: f64,
    /// Cumulative product of alphas, N values in (0, 1].
    pub alphas_cumprod: Vec<f64>,
}

/// Provenance of the model.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    /// SHA-256 of the training data (see the training script for the byte layout).
    pub data_sha256: String,
    /// Training samples.
    pub samples: u64,
    /// Demonstrations they were cut from.
    pub demonstrations: u64,
    /// Training seed.
    pub seed: u64,
    /// The script that trained the model.
    pub script: String,
    /// Final training loss.
    pub final_loss: f64,
}

/// Declared operating domain of the observation vector.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainSpec {
    /// Lower bounds, d_obs values.
    pub obs_min: Vec<f64>,
    /// Upper bounds, d_obs values.
    pub obs_max: Vec<f64>,
    /// Mean of the training observations.
    pub mean: Vec<f64>,
    /// Ridge added to the covariance's diagonal before inversion.
    pub ridge: f64,
    /// Largest accepted Mahalanobis distance.
    pub mahalanobis_max: f64,
    /// Covariance of the training observations, d_obs rows of d_obs values.
    pub covariance: Vec<Vec<f64>>,
}

/// A parsed, checked policy manifest.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Manifest format version (1).
    pub format: u32,
    /// What the graph predicts.
    pub kind: PolicyKind,
    /// Model file, relative to the manifest's directory.
    pub model_file: String,
    /// SHA-256 of the model file, lowercase hex.
    pub model_sha256: String,
    /// The model file's size in bytes, when declared: a file of another size is
    /// refused before it is read (else it may be up to
    /// [`chunkrt_files::MODEL_LIMIT_BYTES`]).
    #[serde(default)]
    pub model_bytes: Option<u64>,
    /// Observation vector length.
    pub d_obs: usize,
    /// Action dimension (joints).
    pub d_a: usize,
    /// Setpoints per chunk.
    pub horizon: usize,
    /// Setpoint period in ms.
    pub dt_ms: f64,
    /// Graph input/output names.
    pub io: IoNames,
    /// Observation/action encoding.
    pub encoding: Encoding,
    /// Normalisation statistics.
    pub normalisation: Normalisation,
    /// Sampler defaults.
    pub sampler: SamplerDefaults,
    /// Noise schedule (DDIM only).
    pub schedule: Option<Schedule>,
    /// Provenance.
    pub training: Training,
    /// Declared operating domain.
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
}

impl Manifest {
    /// Reads, parses and checks a manifest, and the digests of the files its provenance
    /// ledger cites.
    pub fn load(path: &Path) -> Result<Manifest, PolicyLoadError> {
        let text = read_manifest_text(path)?;
        let m = Manifest::parse(path, &text)?;
        m.provenance()
            .verify_files(path)
            .map_err(|what| PolicyLoadError::ManifestInvalid {
                path: path.to_path_buf(),
                what,
            })?;
        Ok(m)
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

    /// Parses and checks manifest text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Manifest, PolicyLoadError> {
        let m: Manifest = toml::from_str(text).map_err(|e| PolicyLoadError::ManifestParse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        m.validate()
            .map_err(|what| PolicyLoadError::ManifestInvalid {
                path: path.to_path_buf(),
                what,
            })?;
        Ok(m)
    }

    /// The model file's path, resolved against the manifest's directory.
    pub fn model_path(&self, manifest_path: &Path) -> PathBuf {
        manifest_path
            .parent()
            .unwrap_or_else(|| Path::new("."))
            .join(&self.model_file)
    }

    /// Setpoint period in ns.
    pub fn dt_ns(&self) -> u64 {
        (self.dt_ms * 1e6).round() as u64
    }

    /// Values per action chunk (horizon * d_a).
    pub fn chunk_len(&self) -> usize {
        self.horizon * self.d_a
    }

    fn validate(&self) -> Result<(), ManifestProblem> {
        if self.format != 1 {
            return Err(Rule(format!(
                "format = {} is not supported (expected 1)",
                self.format
            )));
        }
        check_digest_and_file(&self.model_sha256, &self.model_file)?;
        check_model_bytes(self.model_bytes)?;
        range("d_a", self.d_a, 1, MAX_DOF)?;
        range("horizon", self.horizon, 2, MAX_HORIZON)?;
        range("d_obs", self.d_obs, 1, MAX_OBS)?;
        positive("dt_ms", self.dt_ms)?;
        self.check_encoding()?;
        self.check_normalisation()?;
        self.check_sampler()?;
        check_domain(&self.domain, self.d_obs)?;
        check_training(&self.training)?;
        self.provenance().check(self.d_a, &self.model_sha256)
    }

    /// The action and observation encodings (d_obs fits the observation's), the goal
    /// tolerance and the goals.
    fn check_encoding(&self) -> Result<(), ManifestProblem> {
        if self.encoding.action == ActionEncoding::Residual {
            return Err(Rule(
                "encoding.action = \"residual\" is a residual policy's: its manifest is format 2 \
                 with a [residual] table"
                    .into(),
            ));
        }
        let enc = self.encoding.observation;
        if self.d_obs != enc.d_obs(self.d_a) {
            return Err(Rule(format!(
                "encoding.observation = \"{}\" needs d_obs = {} for d_a = {}, got {}",
                enc.name(),
                enc.d_obs(self.d_a),
                self.d_a,
                self.d_obs
            )));
        }
        positive(
            "encoding.goal_tolerance_rad",
            self.encoding.goal_tolerance_rad,
        )?;
        if self.encoding.goals.is_empty() {
            return Err(Rule("encoding.goals is empty".into()));
        }
        for (i, g) in self.encoding.goals.iter().enumerate() {
            check_values(&format!("encoding.goals[{i}]"), g, self.d_a)?;
        }
        Ok(())
    }

    /// The normalisation vectors: their lengths, finite values and positive deviations.
    fn check_normalisation(&self) -> Result<(), ManifestProblem> {
        let n = &self.normalisation;
        check_values("normalisation.obs_mean", &n.obs_mean, self.d_obs)?;
        check_values("normalisation.obs_std", &n.obs_std, self.d_obs)?;
        check_values("normalisation.act_mean", &n.act_mean, self.chunk_len())?;
        check_values("normalisation.act_std", &n.act_std, self.chunk_len())?;
        for (name, v) in [
            ("normalisation.obs_std", &n.obs_std),
            ("normalisation.act_std", &n.act_std),
        ] {
            if let Some(i) = v.iter().position(|x| *x <= 0.0) {
                return Err(Rule(format!("{name}[{i}] = {} must be positive", v[i])));
            }
        }
        Ok(())
    }

    /// The sampler's method and step counts against the kind, and the DDIM schedule
    /// (which only a ddim policy has).
    fn check_sampler(&self) -> Result<(), ManifestProblem> {
        let s = &self.sampler;
        if !s.method.fits(self.kind) {
            return Err(Rule(format!(
                "sampler.method = \"{}\" does not fit kind = \"{}\" (flow: euler or heun; ddim: ddim)",
                s.method.name(),
                match self.kind {
                    PolicyKind::Flow => "flow",
                    PolicyKind::Ddim => "ddim",
                }
            )));
        }
        range("sampler.steps", s.steps, 1, 10_000)?;
        range("sampler.min_steps", s.min_steps, 1, s.steps)?;
        match (&self.schedule, self.kind) {
            (None, PolicyKind::Ddim) => {
                return Err(Rule(
                    "kind = \"ddim\" needs a [schedule] table with alphas_cumprod".into(),
                ))
            }
            (Some(sch), PolicyKind::Ddim) => {
                range("schedule.train_timesteps", sch.train_timesteps, 1, 100_000)?;
                check_values(
                    "schedule.alphas_cumprod",
                    &sch.alphas_cumprod,
                    sch.train_timesteps,
                )?;
                if let Some(i) = sch
                    .alphas_cumprod
                    .iter()
                    .position(|a| !(*a > 0.0 && *a <= 1.0))
                {
                    return Err(Rule(format!(
                        "schedule.alphas_cumprod[{i}] = {} is outside (0, 1]",
                        sch.alphas_cumprod[i]
                    )));
                }
                positive("schedule.clip_x0", sch.clip_x0)?;
                range("sampler.steps", s.steps, 1, sch.train_timesteps)?;
            }
            (Some(_), PolicyKind::Flow) => {
                return Err(Rule("kind = \"flow\" takes no [schedule] table".into()))
            }
            (None, PolicyKind::Flow) => {}
        }
        Ok(())
    }
}

/// Checks a model digest (64 lowercase hex digits) and a model file name.
pub(crate) fn check_digest_and_file(sha: &str, file: &str) -> Result<(), ManifestProblem> {
    crate::provenance::check_sha256("model_sha256", sha)?;
    if file.is_empty() {
        return Err(Rule("model_file is empty".into()));
    }
    Ok(())
}

/// Checks a declared model size: 1 byte to [`chunkrt_files::MODEL_LIMIT_BYTES`].
pub(crate) fn check_model_bytes(bytes: Option<u64>) -> Result<(), ManifestProblem> {
    match bytes {
        Some(b) if b == 0 || b > chunkrt_files::MODEL_LIMIT_BYTES => Err(Rule(format!(
            "model_bytes = {b}: expected 1 to {} (an ONNX file holds at most 2 GiB; larger \
             models keep their weights in external data, which chunkrt does not load)",
            chunkrt_files::MODEL_LIMIT_BYTES
        ))),
        _ => Ok(()),
    }
}

/// Reads a manifest's text with a bound: a regular file of at most
/// [`chunkrt_files::TOML_LIMIT_BYTES`], in UTF-8.
pub fn read_manifest_text(path: &Path) -> Result<String, PolicyLoadError> {
    chunkrt_files::read_text_bounded(path, chunkrt_files::TOML_LIMIT_BYTES, "policy manifest")
        .map_err(PolicyLoadError::ManifestRead)?
        .map_err(|_| PolicyLoadError::ManifestParse {
            path: path.to_path_buf(),
            message: "not UTF-8 text (a binary file?): a manifest is TOML; the model it \
                      describes is named by its model_file key"
                .to_string(),
        })
}

/// Checks a `[domain]` table over observations of `d_obs` values.
pub(crate) fn check_domain(d: &DomainSpec, d_obs: usize) -> Result<(), ManifestProblem> {
    check_values("domain.obs_min", &d.obs_min, d_obs)?;
    check_values("domain.obs_max", &d.obs_max, d_obs)?;
    check_values("domain.mean", &d.mean, d_obs)?;
    if let Some(i) = (0..d_obs).find(|&i| d.obs_min[i] > d.obs_max[i]) {
        return Err(Rule(format!(
            "domain.obs_min[{i}] = {} exceeds domain.obs_max[{i}] = {}",
            d.obs_min[i], d.obs_max[i]
        )));
    }
    if !(d.ridge.is_finite() && d.ridge >= 0.0) {
        return Err(Rule(format!(
            "domain.ridge = {} must be finite and >= 0",
            d.ridge
        )));
    }
    positive("domain.mahalanobis_max", d.mahalanobis_max)?;
    if d.covariance.len() != d_obs {
        return Err(Rule(format!(
            "domain.covariance has {} rows, expected d_obs = {}",
            d.covariance.len(),
            d_obs
        )));
    }
    for (i, row) in d.covariance.iter().enumerate() {
        check_values(&format!("domain.covariance[{i}]"), row, d_obs)?;
    }
    Ok(())
}

/// Checks a `[training]` table.
pub(crate) fn check_training(t: &Training) -> Result<(), ManifestProblem> {
    if t.data_sha256.len() != 64 {
        return Err(Rule(format!(
            "training.data_sha256 = \"{}\" is not a SHA-256 (64 hex digits)",
            t.data_sha256
        )));
    }
    Ok(())
}

pub(crate) fn range(name: &str, v: usize, lo: usize, hi: usize) -> Result<(), ManifestProblem> {
    if v < lo || v > hi {
        return Err(ManifestProblem::OutOfRange {
            key: name.to_string(),
            value: v,
            lo,
            hi,
        });
    }
    Ok(())
}

pub(crate) fn positive(name: &str, v: f64) -> Result<(), ManifestProblem> {
    if !(v.is_finite() && v > 0.0) {
        return Err(ManifestProblem::NotPositive {
            key: name.to_string(),
            value: v,
        });
    }
    Ok(())
}

pub(crate) fn check_values(name: &str, v: &[f64], expected: usize) -> Result<(), ManifestProblem> {
    if v.len() != expected {
        return Err(ManifestProblem::WrongCount {
            key: name.to_string(),
            got: v.len(),
            expected,
        });
    }
    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
        return Err(ManifestProblem::NotFinite {
            key: name.to_string(),
            index: i,
            value: v[i],
        });
    }
    Ok(())
}
