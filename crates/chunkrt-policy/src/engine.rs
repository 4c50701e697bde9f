//! Where an [`OnnxPolicy`](crate::OnnxPolicy)'s chunks are sampled: in this process
//! through ONNX Runtime, or on a policy server ([`RemoteSampler`]) that runs the same
//! sampler on the same observation vector and initial noise. Everything around the
//! sampler (goals, the observation vector, the domain check, the seeded noise, smoothing)
//! stays on the host either way, so a chunk served remotely is the chunk the host would
//! have computed, and its age counts the network and the server.

use std::path::{Path, PathBuf};

use chunkrt_core::PolicyError;

use crate::domain::Domain;
use crate::error::SamplerError;
use crate::manifest::{Manifest, SamplerMethod};
use crate::model::{check_sampler, PolicyModel};

/// A policy server that samples chunks (see `chunkrt-remote`).
pub trait RemoteSampler: Send + std::fmt::Debug {
    /// Where it is, for messages (e.g. its URL).
    fn describe(&self) -> String;

    /// Samples one chunk on the server: `obs` the raw observation vector (the manifest's
    /// d_obs values), `noise` the initial noise (horizon * d_a), `method` at `steps`;
    /// writes absolute joint positions into `out` (`out[i * d_a + j]` for setpoint `i`,
    /// joint `j`).
    fn sample(
        &mut self,
        obs: &[f64],
        noise: &[f32],
        method: SamplerMethod,
        steps: usize,
        out: &mut [f64],
    ) -> Result<Served, PolicyError>;
}

/// What a server said about a chunk it served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Served {
    /// The server's own time for it, when it says (ns).
    pub server_ns: Option<u64>,
    /// Connections made again since the last chunk served (a lost connection, a server
    /// that came back).
    pub reconnects: u32,
}

/// The sampler behind a policy.
#[derive(Debug)]
pub(crate) enum Engine {
    /// ONNX Runtime in this process.
    Local(Box<PolicyModel>),
    /// A policy server; the manifest describes what it serves.
    Remote(Box<RemoteModel>),
}

/// A policy server and the manifest of what it serves.
#[derive(Debug)]
pub(crate) struct RemoteModel {
    pub(crate) manifest: Manifest,
    pub(crate) manifest_path: PathBuf,
    pub(crate) domain: Domain,
    pub(crate) server: Box<dyn RemoteSampler>,
}

impl Engine {
    /// The checked manifest.
    pub(crate) fn manifest(&self) -> &Manifest {
        match self {
            Engine::Local(m) => m.manifest(),
            Engine::Remote(r) => &r.manifest,
        }
    }

    /// The declared operating domain.
    pub(crate) fn domain(&self) -> &Domain {
        match self {
            Engine::Local(m) => m.domain(),
            Engine::Remote(r) => &r.domain,
        }
    }

    /// What a load error names: the model file, or the manifest of a served policy.
    pub(crate) fn origin(&self) -> &Path {
        match self {
            Engine::Local(m) => m.model_path(),
            Engine::Remote(r) => &r.manifest_path,
        }
    }

    /// Checks that `method` at `steps` fits the model.
    pub(crate) fn check_sampler(
        &self,
        method: SamplerMethod,
        steps: usize,
    ) -> Result<(), SamplerError> {
        check_sampler(self.manifest(), method, steps)
    }

    /// One chunk's absolute joint positions into `out`, and what the server said of it
    /// (nothing, sampled here).
    pub(crate) fn positions(
        &mut self,
        obs: &[f64],
        noise: &[f32],
        method: SamplerMethod,
        steps: usize,
        out: &mut [f64],
    ) -> Result<Served, PolicyError> {
        match self {
            Engine::Local(m) => {
                m.sample(obs, noise, method, steps, &mut |_| {})?;
                m.positions_into(obs, out);
                Ok(Served::default())
            }
            Engine::Remote(r) => r.server.sample(obs, noise, method, steps, out),
        }
    }
}
