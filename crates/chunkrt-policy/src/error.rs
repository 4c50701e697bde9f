//! Why a policy model could not be loaded or sampled.

use std::path::{Path, PathBuf};

use crate::goals::GoalError;

/// ` (model_file of manifest M)` when a manifest named the model.
fn named_by(manifest: Option<&Path>) -> String {
    manifest
        .map(|m| format!(" (model_file of manifest {})", m.display()))
        .unwrap_or_default()
}

/// A refusal at load time (or a failure of the offline sampling helpers).
///
/// Every variant names the file and the mismatch, so that an operator can tell which model
/// was refused and why without reading code.
#[derive(Debug, thiserror::Error)]
pub enum PolicyLoadError {
    /// The manifest file cannot be read: missing, not a regular file, or larger than
    /// a manifest may be (the message names the path).
    #[error(transparent)]
    ManifestRead(chunkrt_files::FileError),
    /// The manifest is not valid TOML or lacks/misnames a field.
    #[error("policy manifest {path}: {message}")]
    ManifestParse {
        /// The manifest path.
        path: PathBuf,
        /// The parser's message (names the field and its line).
        message: String,
    },
    /// The manifest parses but a value is inconsistent or out of range.
    #[error("policy manifest {path}: {what}")]
    ManifestInvalid {
        /// The manifest path.
        path: PathBuf,
        /// What is wrong, naming the key.
        what: ManifestProblem,
    },
    /// The model file cannot be read: missing, not a regular file, larger than a
    /// model may be, or of another size than its manifest's `model_bytes` (the message
    /// names the path).
    #[error("{error}{}", named_by(manifest.as_deref()))]
    ModelRead {
        /// The manifest that names it (none for `chunkrt policy inspect FILE`).
        manifest: Option<PathBuf>,
        /// Why it cannot be read (in the message, not a `source`: said once).
        error: chunkrt_files::FileError,
    },
    /// The model file's SHA-256 differs from the manifest's `model_sha256`.
    #[error(
        "policy model {path}: SHA-256 {actual} ({size} bytes) does not match model_sha256 {expected} \
         in its manifest: the file was changed, truncated or replaced"
    )]
    DigestMismatch {
        /// The model path.
        path: PathBuf,
        /// Digest in the manifest.
        expected: String,
        /// Digest of the file.
        actual: String,
        /// File size in bytes.
        size: u64,
    },
    /// The graph's inputs or outputs disagree with the manifest.
    #[error("policy model {path}: {what}")]
    GraphMismatch {
        /// The model path.
        path: PathBuf,
        /// Which input/output and how it differs.
        what: String,
    },
    /// No ONNX Runtime library where it was looked for.
    #[error(
        "ONNX Runtime library not found (looked for {tried}); run ./scripts/bootstrap-ort.sh \
         from the repository root, or set ORT_DYLIB_PATH or the policy's ort_library key to \
         libonnxruntime.so.1.31.1"
    )]
    OrtLibraryMissing {
        /// The places looked at, in order.
        tried: String,
    },
    /// The ONNX Runtime library exists but could not be loaded or initialised.
    #[error("ONNX Runtime library {path}: {message}")]
    OrtLibrary {
        /// The library path.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The configured execution provider is unknown or not available.
    #[error("execution provider `{name}`: {message}")]
    ExecutionProvider {
        /// The provider named in the configuration.
        name: String,
        /// Why it cannot be used.
        message: String,
    },
    /// ONNX Runtime refused the model or a run failed.
    #[error("ONNX Runtime, model {path}: {message}")]
    Runtime {
        /// The model path.
        path: PathBuf,
        /// ONNX Runtime's message.
        message: String,
    },
    /// A request to the sampling helpers is inconsistent with the model.
    #[error("policy request: {0}")]
    Request(String),
    /// The sampler asked of the sampling helpers cannot run on the model.
    #[error("policy request: {0}")]
    Sampler(#[from] SamplerError),
}

/// Why a domain specification cannot be used (here, not in `domain`, so that this
/// module imports none of the modules that report through it).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DomainError {
    /// The regularised covariance is not positive definite.
    #[error("domain.covariance + ridge * I is not positive definite (pivot {pivot} = {value})")]
    NotPositiveDefinite {
        /// Row where the factorisation failed.
        pivot: usize,
        /// The non-positive pivot.
        value: f64,
    },
    /// Dimensions disagree or exceed the most a manifest may declare (`max`).
    #[error("domain has inconsistent dimensions (d_obs = {d_obs}, at most {max})")]
    Dims {
        /// The observation's length.
        d_obs: usize,
        /// The most allowed (`manifest::MAX_OBS`).
        max: usize,
    },
}

/// What is wrong with a manifest (or with the run configuration's policy settings,
/// judged against it): the key and the rule it breaks.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ManifestProblem {
    /// A count outside its range.
    #[error("{key} = {value} is outside {lo}..={hi}")]
    OutOfRange {
        /// The key.
        key: String,
        /// Its value.
        value: usize,
        /// Least allowed.
        lo: usize,
        /// Most allowed.
        hi: usize,
    },
    /// A value that must be positive and finite.
    #[error("{key} = {value} must be positive and finite")]
    NotPositive {
        /// The key.
        key: String,
        /// Its value.
        value: f64,
    },
    /// A list of another length than the model needs.
    #[error("{key} has {got} values, expected {expected}")]
    WrongCount {
        /// The key.
        key: String,
        /// Values given.
        got: usize,
        /// Values needed.
        expected: usize,
    },
    /// A list holding a NaN or an infinity.
    #[error("{key}[{index}] = {value} is not finite")]
    NotFinite {
        /// The list's key.
        key: String,
        /// Index of the first value that is not finite.
        index: usize,
        /// That value.
        value: f64,
    },
    /// A rule of its own (a missing table, two that exclude each other, a name used
    /// twice): the message names the key and what was expected.
    #[error("{0}")]
    Rule(String),
    /// The `[domain]` table does not describe a usable operating domain.
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// The diffusion scheduler's settings do not work for the steps asked.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// The run configuration's policy settings do not fit this model.
    #[error("policy config: {0}")]
    Config(#[from] PolicyConfigProblem),
    /// The goals (the manifest's, or the configuration's in their place) are unusable.
    #[error("policy goals: {0}")]
    Goals(#[from] GoalError),
}

/// A run configuration's `[policy]` setting that does not fit the model.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PolicyConfigProblem {
    /// The sampler cannot run on this model.
    #[error(transparent)]
    Sampler(#[from] SamplerError),
    /// The scheduler cannot run at these steps.
    #[error(transparent)]
    Scheduler(#[from] SchedulerError),
    /// More steps than the model has (or none).
    #[error("steps = {steps} is outside 1..={max} for this model")]
    Steps {
        /// Steps asked.
        steps: usize,
        /// Most the model takes.
        max: usize,
    },
    /// `min_steps` not within 1..=steps.
    #[error("min_steps = {min_steps} must be within 1..=steps ({steps})")]
    MinSteps {
        /// Fewest steps asked.
        min_steps: usize,
        /// Steps asked.
        steps: usize,
    },
    /// `deadline_ms` is zero, negative or not finite.
    #[error("deadline_ms = {0} must be positive and finite")]
    DeadlineMs(f64),
    /// `goal_settle_radius_rad` is negative or not finite.
    #[error("goal_settle_radius_rad = {0} must be finite and >= 0")]
    SettleRadius(f64),
}

/// A sampler that cannot run on a format-1 model.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SamplerError {
    /// The method does not fit the model's kind (flow: euler or heun; ddim: ddim).
    #[error("sampler `{method}` does not fit a {kind} model")]
    WrongKind {
        /// The method's name.
        method: &'static str,
        /// The model's kind (`Flow`, `Ddim`).
        kind: &'static str,
    },
    /// Steps outside 1..=the schedule's training timesteps (10000 for flow).
    #[error("steps = {steps} is outside 1..={max} for `{method}`")]
    Steps {
        /// Steps asked.
        steps: usize,
        /// Most allowed.
        max: usize,
        /// The method's name.
        method: &'static str,
    },
}

/// A diffusers scheduler's settings that cannot run the steps asked; each names its
/// manifest key.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SchedulerError {
    /// No training timesteps.
    #[error("scheduler.alphas_cumprod is empty")]
    Empty,
    /// An `alphas_cumprod` value outside (0, 1].
    #[error("scheduler.alphas_cumprod[{index}] = {value} is outside (0, 1]")]
    Alpha {
        /// Its index.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// Steps outside 1..=train_timesteps.
    #[error("steps = {steps} is outside 1..={train_timesteps} (scheduler.train_timesteps)")]
    Steps {
        /// Steps asked.
        steps: usize,
        /// The schedule's length.
        train_timesteps: usize,
    },
    /// `clip_sample_range` is zero, negative or not finite.
    #[error("scheduler.clip_sample_range = {0} must be positive")]
    Clip(f32),
    /// `eta` is negative or not finite.
    #[error("scheduler.eta = {0} must be >= 0")]
    Eta(f32),
    /// An eta on a DDPM scheduler.
    #[error("scheduler.eta applies to ddim only")]
    EtaOnDdpm,
    /// The spacing puts a timestep past the schedule.
    #[error(
        "timestep {timestep} of {steps} steps (spacing {spacing}, steps_offset {steps_offset}) \
         is past train_timesteps = {train_timesteps}"
    )]
    PastSchedule {
        /// The timestep.
        timestep: usize,
        /// Steps asked.
        steps: usize,
        /// The spacing (`Leading`, `Trailing`, `Linspace`).
        spacing: &'static str,
        /// The offset.
        steps_offset: usize,
        /// The schedule's length.
        train_timesteps: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts users and the CLI tests read, written out as they were when the
    /// checks returned strings: the typed errors must say the same.
    #[test]
    fn typed_problems_say_what_the_string_checks_said() {
        let cases: [(ManifestProblem, &str); 6] = [
            (
                ManifestProblem::OutOfRange {
                    key: "d_a".into(),
                    value: 0,
                    lo: 1,
                    hi: 16,
                },
                "d_a = 0 is outside 1..=16",
            ),
            (
                ManifestProblem::NotFinite {
                    key: "task.goals[1]".into(),
                    index: 2,
                    value: f64::NAN,
                },
                "task.goals[1][2] = NaN is not finite",
            ),
            (
                PolicyConfigProblem::from(SamplerError::WrongKind {
                    method: "ddim",
                    kind: "Flow",
                })
                .into(),
                "policy config: sampler `ddim` does not fit a Flow model",
            ),
            (
                PolicyConfigProblem::from(SchedulerError::PastSchedule {
                    timestep: 1000,
                    steps: 10,
                    spacing: "Leading",
                    steps_offset: 1,
                    train_timesteps: 1000,
                })
                .into(),
                "policy config: timestep 1000 of 10 steps (spacing Leading, steps_offset 1) \
                 is past train_timesteps = 1000",
            ),
            (
                PolicyConfigProblem::MinSteps {
                    min_steps: 0,
                    steps: 4,
                }
                .into(),
                "policy config: min_steps = 0 must be within 1..=steps (4)",
            ),
            (
                DomainError::Dims { d_obs: 70, max: 64 }.into(),
                "domain has inconsistent dimensions (d_obs = 70, at most 64)",
            ),
        ];
        for (problem, text) in cases {
            assert_eq!(problem.to_string(), text);
        }
    }
}
