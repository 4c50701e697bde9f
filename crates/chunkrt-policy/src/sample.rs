//! Offline sampling for `chunkrt policy sample`: draw chunks from a model at a given
//! observation vector, and format them as text or JSON.

use std::path::Path;

use serde::Serialize;

use crate::domain::DomainVerdict;
use crate::error::PolicyLoadError;
use crate::manifest::SamplerMethod;
use crate::model::PolicyModel;
use crate::noise::GaussianNoise;
use crate::session::SessionOptions;

/// One sampled action chunk.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampledChunk {
    /// Joint positions in rad, `pos_rad[i][j]` for setpoint `i`, joint `j`.
    pub pos_rad: Vec<Vec<f64>>,
}

/// What [`sample_chunks_with`] did, with the chunks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleReport {
    /// The manifest sampled.
    pub manifest: String,
    /// Sampler method.
    pub method: &'static str,
    /// Sampler steps.
    pub steps: usize,
    /// Noise seed.
    pub seed: u64,
    /// Setpoint period in ms.
    pub dt_ms: f64,
    /// Whether the observation lies inside the declared operating domain.
    pub in_domain: bool,
    /// The domain verdict, in words.
    pub domain: String,
    /// The chunks.
    pub chunks: Vec<SampledChunk>,
}

/// Options of [`sample_chunks_with`]; `None`: the manifest's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampleOptions {
    /// Chunks to draw.
    pub samples: usize,
    /// Sampler steps.
    pub steps: Option<usize>,
    /// Sampler method.
    pub method: Option<SamplerMethod>,
    /// Noise seed: sample `k` uses the `k`-th block of horizon * d_a values of the stream.
    pub seed: u64,
    /// ONNX Runtime options.
    pub session: SessionOptions,
}

/// Draws `samples` chunks at observation vector `obs` (d_obs values, encoded as the
/// manifest declares, e.g. `[q_1..q_7, goal_1..goal_7, v_1..v_7]`) with the manifest's sampler.
pub fn sample_chunks(
    manifest: &Path,
    obs: &[f32],
    samples: usize,
    steps: Option<usize>,
    seed: u64,
) -> Result<Vec<SampledChunk>, PolicyLoadError> {
    let opts = SampleOptions {
        samples,
        steps,
        seed,
        ..SampleOptions::default()
    };
    Ok(sample_chunks_with(manifest, obs, &opts)?.chunks)
}

/// [`sample_chunks`] with every option, returning a report.
pub fn sample_chunks_with(
    manifest: &Path,
    obs: &[f32],
    opts: &SampleOptions,
) -> Result<SampleReport, PolicyLoadError> {
    let mut model = PolicyModel::load(manifest, &opts.session)?;
    let m = model.manifest().clone();
    if obs.len() != m.d_obs {
        return Err(PolicyLoadError::Request(format!(
            "observation has {} values, the model expects d_obs = {} ({} encoding)",
            obs.len(),
            m.d_obs,
            m.encoding.observation.name()
        )));
    }
    if let Some(i) = obs.iter().position(|v| !v.is_finite()) {
        return Err(PolicyLoadError::Request(format!(
            "observation value {i} is not finite"
        )));
    }
    let method = opts.method.unwrap_or(m.sampler.method);
    let steps = opts.steps.unwrap_or(m.sampler.steps);
    model.check_sampler(method, steps)?;
    let obs: Vec<f64> = obs.iter().map(|v| *v as f64).collect();
    let verdict = model.domain().check(&obs);
    let mut noise = GaussianNoise::new(opts.seed);
    let mut noise_buf = vec![0.0f32; m.chunk_len()];
    let mut pos = vec![0.0f64; m.chunk_len()];
    let mut chunks = Vec::with_capacity(opts.samples);
    for _ in 0..opts.samples {
        noise.fill(&mut noise_buf);
        model
            .sample(&obs, &noise_buf, method, steps, &mut |_| {})
            .map_err(|e| PolicyLoadError::Runtime {
                path: model.model_path().to_path_buf(),
                message: e.0,
            })?;
        model.positions_into(&obs, &mut pos);
        chunks.push(SampledChunk {
            pos_rad: pos.chunks(m.d_a).map(<[f64]>::to_vec).collect(),
        });
    }
    Ok(SampleReport {
        manifest: manifest.display().to_string(),
        method: method.name(),
        steps,
        seed: opts.seed,
        dt_ms: m.dt_ms,
        in_domain: verdict.is_inside(),
        domain: describe_verdict(&verdict),
        chunks,
    })
}

/// A verdict in words (for reports and logs).
pub fn describe_verdict(v: &DomainVerdict) -> String {
    match v {
        DomainVerdict::Inside { mahalanobis } => format!("inside (Mahalanobis {mahalanobis:.2})"),
        DomainVerdict::OutOfBounds {
            dim,
            value,
            min,
            max,
        } => {
            format!("outside: obs[{dim}] = {value} is not within [{min}, {max}]")
        }
        DomainVerdict::OutOfSupport { mahalanobis, max } => {
            format!("outside: Mahalanobis distance {mahalanobis:.2} exceeds {max:.2}")
        }
        DomainVerdict::NotFinite { dim } => format!("outside: obs[{dim}] is not finite"),
        DomainVerdict::WrongLength { got, expected } => {
            format!("outside: {got} values, expected {expected}")
        }
    }
}

/// The report as pretty JSON (stable keys: manifest, method, steps, seed, dt_ms,
/// in_domain, domain, chunks[].pos_rad).
pub fn report_to_json(report: &SampleReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The report as text: a header, then one block per chunk, one line per setpoint.
pub fn report_to_text(report: &SampleReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# {}: {} x {} steps, seed {}, dt {} ms, domain {}",
        report.manifest, report.method, report.steps, report.seed, report.dt_ms, report.domain
    );
    for (k, c) in report.chunks.iter().enumerate() {
        let _ = writeln!(s, "chunk {k}");
        for (i, row) in c.pos_rad.iter().enumerate() {
            let vals: Vec<String> = row.iter().map(|v| format!("{v:+.4}")).collect();
            let _ = writeln!(
                s,
                "  {:>4} ms  {}",
                (i as f64 * report.dt_ms).round(),
                vals.join(" ")
            );
        }
    }
    s
}
