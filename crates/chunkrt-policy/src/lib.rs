//! chunkrt-policy: the [`chunkrt_core::Policy`] implementations.
//!
//! - [`ScriptedPolicy`]: an analytic closed-loop planner toward a cyclic list of goal poses
//!   (tests, CI without the model, the phase-margin reference loop).
//! - [`OnnxPolicy`]: a learned denoiser (flow matching or DDIM) run through ONNX Runtime
//!   (`ort`, library loaded at run time, see [`ortlib`]), sampled in Rust, refused at load
//!   when it disagrees with its [`Manifest`].
//! - [`ImportedPolicy`]: a policy brought from elsewhere (manifest format 2: LeRobot's
//!   Diffusion Policy under its diffusers scheduler, ACT-style chunk models), with named
//!   observation inputs, history and LeRobot's normalisation.
//! - [`sample_chunks`]: offline sampling for `chunkrt policy sample`.
//! - [`RemoteSampler`]: an [`OnnxPolicy`]'s sampler on a policy server
//!   ([`OnnxPolicy::remote`]; the client is `chunkrt-remote`'s).

pub mod diffusers;
pub mod domain;
mod engine;
pub mod error;
pub mod goals;
pub mod graph;
pub mod imported;
pub mod inspect;
pub mod manifest;
pub mod manifest2;
pub mod model;
pub mod noise;
pub mod onnx_policy;
pub mod ortlib;
pub mod provenance;
pub mod quintic;
pub mod sample;
pub mod sampler;
pub mod scripted;
pub mod servo;
pub mod session;
pub mod smoothing;
pub mod verify;

pub use domain::{Domain, DomainError, DomainVerdict};
pub use engine::{RemoteSampler, Served};
pub use error::PolicyLoadError;
pub use goals::{GoalError, GoalSequence, Settler};
pub use imported::{ImportedModel, ImportedPolicy, ImportedPolicyConfig};
pub use manifest::{Manifest, PolicyKind, SamplerMethod};
pub use manifest2::{CheckedManifest2, Manifest2, ModelKind};
pub use model::PolicyModel;
pub use noise::GaussianNoise;
pub use onnx_policy::{AnytimeStats, NoiseMode, OnnxPolicy, OnnxPolicyConfig, StateSource};
pub use ortlib::{find_ort_library, ORT_LIBRARY_NAME};
pub use sample::{
    describe_verdict, report_to_json, report_to_text, sample_chunks, sample_chunks_with,
    SampleOptions, SampleReport, SampledChunk,
};
pub use scripted::{ScriptedParams, ScriptedParamsError, ScriptedPolicy};
pub use servo::{ServoParams, ServoPolicy};
pub use session::{ExecutionProvider, SessionOptions};
pub use smoothing::ChunkSmoother;
pub use verify::{verify_manifest, ManifestVerdict};
