//! [`ServedSampler`]: an [`OnnxPolicy`](chunkrt_policy::OnnxPolicy)'s sampler on a policy
//! server, over one of the protocols ([`Link`]: openpi's WebSocket, the Open Inference
//! Protocol over gRPC). Each chunk is one request: the raw observation vector, the
//! host's seeded initial noise and the sampler's method and steps; the reply's actions
//! are the chunk's joint positions. A lost connection is made again on a later chunk,
//! with a growing pause between failed attempts, all on the inference thread.

use std::time::{Duration, Instant};

use chunkrt_core::PolicyError;
use chunkrt_policy::{RemoteSampler, SamplerMethod, Served};

use crate::RemoteError;

/// The message keys (openpi's convention by default; an OIP server's tensor names).
#[derive(Clone, Debug, PartialEq)]
pub struct MessageKeys {
    /// The observation vector (float32 [d_obs]); default `observation/state`.
    pub state: String,
    /// The initial noise (float32 [horizon, d_a]); default `noise`.
    pub noise: String,
    /// The reply's chunk ([horizon, d_a] or wider); default `actions`.
    pub actions: String,
}

impl Default for MessageKeys {
    fn default() -> Self {
        MessageKeys {
            state: "observation/state".into(),
            noise: "noise".into(),
            actions: "actions".into(),
        }
    }
}

/// How the reply's actions are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ActionsAre {
    /// Absolute joint positions.
    #[default]
    Absolute,
    /// Offsets from the observed joint positions (the first d_a values of the
    /// observation vector).
    DeltaFromObserved,
}

/// One chunk's request, as every protocol carries it.
#[derive(Clone, Copy, Debug)]
pub struct ChunkRequest<'a> {
    /// The raw observation vector (the manifest's d_obs values).
    pub obs: &'a [f64],
    /// The initial noise, horizon x d_a, row-major.
    pub noise: &'a [f32],
    /// The chunk's setpoints.
    pub horizon: usize,
    /// The chunk's joints.
    pub d_a: usize,
    /// The sampler's method.
    pub method: SamplerMethod,
    /// The sampler's steps.
    pub steps: usize,
    /// The message keys.
    pub keys: &'a MessageKeys,
    /// The request's sequence number (from 1, increasing over the sampler's life, across
    /// reconnections): a reply must name it (OIP's `id`, `request_id` in openpi's
    /// messages), so that a stale or repeated reply is told from the answer.
    pub id: u64,
}

/// One chunk's reply: the actions array as sent, and the server's own time.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkReply {
    /// The array's shape.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    pub values: Vec<f64>,
    /// The server's time for it (ns), when it says.
    pub server_ns: Option<u64>,
}

/// A protocol's connection to a policy server.
pub trait Link: Sized + Send + std::fmt::Debug {
    /// What a connection is made from.
    type Config: Clone + Send + std::fmt::Debug;

    /// The server, for messages (its URL, and what it serves).
    fn describe(cfg: &Self::Config) -> String;

    /// Connects within the configured time. A server that says it serves a model other
    /// than `model_sha256`, or declares a model that does not take `keys`, is refused,
    /// with what it said; so is one that does not name `model_sha256` among what it
    /// serves, unless the configuration's `verify_model` is off.
    fn open(
        cfg: &Self::Config,
        keys: &MessageKeys,
        model_sha256: Option<&str>,
    ) -> Result<Self, RemoteError>;

    /// Sends one chunk's request and waits (bounded) for its reply, which must name the
    /// request's `id`.
    fn chunk(&mut self, request: &ChunkRequest<'_>) -> Result<ChunkReply, RemoteError>;

    /// Ends the connection (best effort).
    fn disconnect(self);
}

/// The error of a server whose model is not the manifest's.
pub(crate) fn other_model(url: &str, got: &str, want: &str) -> RemoteError {
    RemoteError::Protocol {
        url: url.to_string(),
        why: format!(
            "it serves the model with SHA-256 {got}, the manifest names {want}: a different \
             policy"
        ),
    }
}

/// The error of a server that does not prove which model it serves (the manifest's
/// digest is not among what it says of itself), with `verify_model` on.
pub(crate) fn unproven_model(url: &str, why: &str) -> RemoteError {
    RemoteError::Protocol {
        url: url.to_string(),
        why: format!(
            "{why}, so it does not prove that it serves the manifest's model: refused (set \
             policy.remote.verify_model = false to accept a server that cannot prove it; the \
             run's report then says the model was not verified)"
        ),
    }
}

/// Shortest and longest pause between failed connection attempts.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Counters of the connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Connections made after the first.
    pub reconnects: u64,
    /// Connection attempts that failed.
    pub failed_connects: u64,
    /// Chunks whose request failed (timeout, closed, server error, unreadable reply).
    pub failed_chunks: u64,
}

/// A policy server as an [`OnnxPolicy`](chunkrt_policy::OnnxPolicy)'s sampler.
#[derive(Debug)]
pub struct ServedSampler<L: Link> {
    cfg: L::Config,
    keys: MessageKeys,
    actions: ActionsAre,
    horizon: usize,
    d_a: usize,
    /// The model the manifest names: a server that names another is refused.
    model_sha256: Option<String>,
    link: Option<L>,
    next_attempt: Instant,
    backoff: Duration,
    last_error: Option<String>,
    stats: ConnectionStats,
    /// Connections made again since the last chunk served.
    unreported_reconnects: u32,
    /// The last request's sequence number.
    last_request: u64,
}

impl<L: Link> ServedSampler<L> {
    /// A sampler for chunks of `horizon` x `d_a` from the server `cfg` names; connects at
    /// once (a server that cannot be reached, or that serves another model, is refused
    /// here with the reason).
    pub fn connect(
        cfg: L::Config,
        keys: MessageKeys,
        actions: ActionsAre,
        horizon: usize,
        d_a: usize,
        model_sha256: Option<String>,
    ) -> Result<ServedSampler<L>, RemoteError> {
        let link = L::open(&cfg, &keys, model_sha256.as_deref())?;
        Ok(ServedSampler {
            cfg,
            keys,
            actions,
            horizon,
            d_a,
            model_sha256,
            link: Some(link),
            next_attempt: Instant::now(),
            backoff: BACKOFF_MIN,
            last_error: None,
            stats: ConnectionStats::default(),
            unreported_reconnects: 0,
            last_request: 0,
        })
    }

    /// Connection counters.
    pub fn stats(&self) -> ConnectionStats {
        self.stats
    }

    /// The connection, made again if it was lost and the pause after the last failed
    /// attempt is over.
    fn link(&mut self) -> Result<&mut L, PolicyError> {
        if self.link.is_none() {
            let now = Instant::now();
            if now < self.next_attempt {
                return Err(PolicyError(format!(
                    "{}: not connected, next attempt in {} ms (last error: {})",
                    L::describe(&self.cfg),
                    (self.next_attempt - now).as_millis(),
                    self.last_error.as_deref().unwrap_or("none")
                )));
            }
            match L::open(&self.cfg, &self.keys, self.model_sha256.as_deref()) {
                Ok(link) => {
                    self.link = Some(link);
                    self.stats.reconnects += 1;
                    self.unreported_reconnects += 1;
                    self.backoff = BACKOFF_MIN;
                }
                Err(e) => {
                    self.stats.failed_connects += 1;
                    self.next_attempt = now + self.backoff;
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                    self.last_error = Some(e.to_string());
                    return Err(PolicyError(e.to_string()));
                }
            }
        }
        Ok(self.link.as_mut().expect("connected above"))
    }

    /// The reply's actions into `out` (absolute joint positions), or what is wrong with
    /// them.
    fn write_chunk(&self, reply: &ChunkReply, obs: &[f64], out: &mut [f64]) -> Result<(), String> {
        let key = &self.keys.actions;
        let (rows, cols) = match reply.shape.as_slice() {
            [r, c] => (*r, *c),
            [1, r, c] => (*r, *c),
            s => {
                return Err(format!(
                    "{key:?} has shape {s:?}, expected [horizon, joints]"
                ))
            }
        };
        if rows < self.horizon || cols < self.d_a || reply.values.len() != rows * cols {
            return Err(format!(
                "{key:?} has shape [{rows}, {cols}] ({} values), the manifest's chunk is [{}, {}]",
                reply.values.len(),
                self.horizon,
                self.d_a
            ));
        }
        for i in 0..self.horizon {
            for j in 0..self.d_a {
                let a = reply.values[i * cols + j];
                if !a.is_finite() {
                    return Err(format!("{key:?}: setpoint {i}, joint {j} is {a}"));
                }
                out[i * self.d_a + j] = match self.actions {
                    ActionsAre::Absolute => a,
                    ActionsAre::DeltaFromObserved => obs[j] + a,
                };
            }
        }
        Ok(())
    }
}

impl<L: Link> RemoteSampler for ServedSampler<L> {
    fn describe(&self) -> String {
        L::describe(&self.cfg)
    }

    fn sample(
        &mut self,
        obs: &[f64],
        noise: &[f32],
        method: SamplerMethod,
        steps: usize,
        out: &mut [f64],
    ) -> Result<Served, PolicyError> {
        if noise.len() != self.horizon * self.d_a || out.len() < self.horizon * self.d_a {
            return Err(PolicyError(format!(
                "{}: noise {} and output {} for a {}x{} chunk",
                L::describe(&self.cfg),
                noise.len(),
                out.len(),
                self.horizon,
                self.d_a
            )));
        }
        let keys = self.keys.clone();
        self.last_request += 1;
        let request = ChunkRequest {
            obs,
            noise,
            horizon: self.horizon,
            d_a: self.d_a,
            method,
            steps,
            keys: &keys,
            id: self.last_request,
        };
        let reply = match self.link()?.chunk(&request) {
            Ok(r) => r,
            Err(e) => {
                self.stats.failed_chunks += 1;
                if e.needs_reconnect() {
                    // The connection is in an unknown state: start again on a later chunk.
                    if let Some(link) = self.link.take() {
                        link.disconnect();
                    }
                    self.last_error = Some(e.to_string());
                }
                return Err(PolicyError(e.to_string()));
            }
        };
        self.write_chunk(&reply, obs, out).map_err(|why| {
            self.stats.failed_chunks += 1;
            PolicyError(format!("{}: {why}", L::describe(&self.cfg)))
        })?;
        Ok(Served {
            server_ns: reply.server_ns,
            reconnects: std::mem::take(&mut self.unreported_reconnects),
        })
    }
}
