//! A loaded policy model: manifest checked, model digest verified, graph checked, sampler
//! buffers allocated. Shared by [`crate::OnnxPolicy`] (the runtime) and the offline helpers
//! ([`crate::sample_chunks`], the tests and the benchmark).

use std::path::{Path, PathBuf};

use chunkrt_core::{Chunk, PolicyError};
use sha2::{Digest, Sha256};

use crate::domain::Domain;
use crate::error::{PolicyLoadError, SamplerError};
use crate::graph::OrtDenoiser;
use crate::manifest::{ActionEncoding, Manifest, PolicyKind, SamplerMethod};
use crate::sampler::{run_sampler, DdimSchedule, Denoiser, SamplerBuffers};
use crate::session::SessionOptions;

/// A policy model ready to sample.
#[derive(Debug)]
pub struct PolicyModel {
    manifest: Manifest,
    manifest_path: PathBuf,
    model_path: PathBuf,
    domain: Domain,
    denoiser: OrtDenoiser,
    ddim: Option<DdimSchedule>,
    buf: SamplerBuffers,
    obs_n: Vec<f32>,
}

/// Checks that `method` at `steps` can run on the model `manifest` describes (kind, step
/// range), wherever it runs.
pub fn check_sampler(
    manifest: &Manifest,
    method: SamplerMethod,
    steps: usize,
) -> Result<(), SamplerError> {
    if !method.fits(manifest.kind) {
        return Err(SamplerError::WrongKind {
            method: method.name(),
            kind: match manifest.kind {
                PolicyKind::Flow => "Flow",
                PolicyKind::Ddim => "Ddim",
            },
        });
    }
    let max = manifest
        .schedule
        .as_ref()
        .map_or(10_000, |s| DdimSchedule::new(s).train_timesteps());
    if steps == 0 || steps > max {
        return Err(SamplerError::Steps {
            steps,
            max,
            method: method.name(),
        });
    }
    Ok(())
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Reads the model file with a bound and checks its SHA-256 against the manifest's.
///
/// A model that is not a regular file (a directory, FIFO, `/dev/zero`) is refused
/// without reading; so is one of another size than the manifest's `model_bytes`, or,
/// without it, one larger than [`chunkrt_files::MODEL_LIMIT_BYTES`]. The digest is
/// taken while reading, of the very bytes handed to ONNX Runtime: no window in which
/// the file could change between check and load.
pub fn read_verified(
    model_path: &Path,
    manifest_path: &Path,
    expected_sha256: &str,
    model_bytes: Option<u64>,
) -> Result<Vec<u8>, PolicyLoadError> {
    let declared = model_bytes.map(|bytes| chunkrt_files::DeclaredSize {
        bytes,
        by: format!("manifest {} (model_bytes)", manifest_path.display()),
    });
    let (bytes, actual) = chunkrt_files::read_with_sha256(
        model_path,
        chunkrt_files::MODEL_LIMIT_BYTES,
        "policy model",
        declared.as_ref(),
    )
    .map_err(|error| PolicyLoadError::ModelRead {
        manifest: Some(manifest_path.to_path_buf()),
        error,
    })?;
    if actual != expected_sha256 {
        return Err(PolicyLoadError::DigestMismatch {
            path: model_path.to_path_buf(),
            expected: expected_sha256.to_string(),
            actual,
            size: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// Steps for the next chunk under an anytime budget: `nominal`, or fewer (not below
/// `min`) when `nominal` steps at the measured step latency would overrun `deadline_ns`.
pub fn anytime_steps(
    deadline_ns: Option<f64>,
    step_ns_est: f64,
    min: usize,
    nominal: usize,
) -> usize {
    match deadline_ns {
        Some(deadline) if step_ns_est > 0.0 => {
            let fit = (deadline / step_ns_est).floor() as usize;
            fit.clamp(min, nominal)
        }
        _ => nominal,
    }
}

/// The step-latency estimate after a chunk whose steps took `step_ns` each: an
/// exponential average weighting the newest a quarter (the first measurement as is).
pub fn step_estimate(est: f64, step_ns: f64) -> f64 {
    const ALPHA: f64 = 0.25;
    if est > 0.0 {
        (1.0 - ALPHA) * est + ALPHA * step_ns
    } else {
        step_ns
    }
}

/// Writes `len` setpoints of `d_a` joints (`positions[i * d_a + j]`), `dt_ns` apart and
/// sampled in `steps` steps, into `out`.
pub(crate) fn write_chunk(
    out: &mut Chunk,
    positions: &[f64],
    len: usize,
    d_a: usize,
    dt_ns: u64,
    steps: usize,
) {
    out.len = len as u16;
    out.dof = d_a as u16;
    out.dt_ns = dt_ns;
    out.sampler_steps = steps as u16;
    for i in 0..len {
        out.pos_rad[i][..d_a].copy_from_slice(&positions[i * d_a..(i + 1) * d_a]);
    }
}

impl PolicyModel {
    /// Loads the manifest, verifies the model file's SHA-256 against it, opens the graph in
    /// ONNX Runtime and checks its inputs and outputs. Any disagreement is refused with an
    /// error that names the file and the mismatch.
    pub fn load(
        manifest_path: &Path,
        opts: &SessionOptions,
    ) -> Result<PolicyModel, PolicyLoadError> {
        let manifest = Manifest::load(manifest_path)?;
        let model_path = manifest.model_path(manifest_path);
        let bytes = read_verified(
            &model_path,
            manifest_path,
            &manifest.model_sha256,
            manifest.model_bytes,
        )?;
        let domain =
            Domain::new(&manifest.domain).map_err(|e| PolicyLoadError::ManifestInvalid {
                path: manifest_path.to_path_buf(),
                what: e.into(),
            })?;
        let denoiser = OrtDenoiser::open(&manifest, &model_path, &bytes, opts)?;
        let ddim = manifest.schedule.as_ref().map(DdimSchedule::new);
        Ok(PolicyModel {
            buf: SamplerBuffers::new(manifest.chunk_len()),
            obs_n: vec![0.0; manifest.d_obs],
            manifest,
            manifest_path: manifest_path.to_path_buf(),
            model_path,
            domain,
            denoiser,
            ddim,
        })
    }

    /// The checked manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
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

    /// Checks that `method` at `steps` can run on this model (kind, step range).
    pub fn check_sampler(&self, method: SamplerMethod, steps: usize) -> Result<(), SamplerError> {
        check_sampler(&self.manifest, method, steps)
    }

    /// Runs the sampler on observation vector `obs` (raw, d_obs values) from `noise`
    /// (horizon * d_a values); the normalised sample is then [`Self::last_sample`].
    /// Allocates nothing.
    pub fn sample(
        &mut self,
        obs: &[f64],
        noise: &[f32],
        method: SamplerMethod,
        steps: usize,
        after_step: &mut dyn FnMut(usize),
    ) -> Result<(), PolicyError> {
        let m = &self.manifest;
        if obs.len() != m.d_obs || noise.len() != m.chunk_len() {
            return Err(PolicyError(format!(
                "sample: obs has {} values (expected {}), noise {} (expected {})",
                obs.len(),
                m.d_obs,
                noise.len(),
                m.chunk_len()
            )));
        }
        let norm = &m.normalisation;
        for (i, o) in self.obs_n.iter_mut().enumerate() {
            *o = ((obs[i] - norm.obs_mean[i]) / norm.obs_std[i]) as f32;
        }
        self.buf.x.copy_from_slice(noise);
        run_sampler(
            method,
            steps,
            self.ddim.as_ref(),
            &mut self.denoiser,
            &self.obs_n,
            &mut self.buf,
            after_step,
        )
    }

    /// The normalised result of the last [`Self::sample`].
    pub fn last_sample(&self) -> &[f32] {
        &self.buf.x
    }

    /// De-normalises the last sample into joint positions, `out[i * d_a + j]` for setpoint
    /// `i`, joint `j`, following the manifest's action encoding (`q` = the first d_a values
    /// of the observation vector `obs` for delta encodings).
    pub fn positions_into(&self, obs: &[f64], out: &mut [f64]) {
        let m = &self.manifest;
        let x = &self.buf.x;
        let norm = &m.normalisation;
        for (k, o) in out.iter_mut().enumerate().take(m.chunk_len()) {
            let a = x[k] as f64 * norm.act_std[k] + norm.act_mean[k];
            *o = match m.encoding.action {
                ActionEncoding::DeltaFromObserved => obs[k % m.d_a] + a,
                ActionEncoding::Absolute | ActionEncoding::Residual => a,
            };
        }
    }

    /// One graph call (for benchmarks): `out = f(obs_n, x, t)`.
    pub fn denoise_once(
        &mut self,
        obs_n: &[f32],
        x: &[f32],
        t: f32,
        out: &mut [f32],
    ) -> Result<(), PolicyError> {
        self.denoiser.denoise(obs_n, x, t, out)
    }
}
