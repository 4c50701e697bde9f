//! The Open Inference Protocol v2 over gRPC, client side: the `inference.
//! GRPCInferenceService` of KServe, Triton and MLServer. On connecting, `ModelReady` and
//! `ModelMetadata` for the configured model (its inputs and outputs are checked against
//! the message keys, its versions against the manifest's SHA-256); then one `ModelInfer`
//! per chunk: the observation vector and the initial noise as FP32 tensors, the sampler's
//! method and steps as request parameters, the chunk as the output tensor (FP32 or FP64,
//! typed contents or raw bytes). The whole sampler runs on the server, one round trip per
//! chunk: a round trip per denoising step would put the network in a chunk's age ten
//! times over.
//!
//! gRPC is tonic's (HTTP/2 by hyper and h2, TLS by rustls with the ring provider), driven
//! by a current-thread tokio runtime that this client owns and runs only while it waits
//! for a reply, on the inference thread. The few messages used are written out below with
//! prost's derive, field numbers from the protocol's `grpc_service.proto` (MLServer's
//! `dataplane.proto`); fields this client does not read are skipped as protobuf skips
//! unknown fields.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::sampler::{
    other_model, unproven_model, ChunkReply, ChunkRequest, Link, MessageKeys, ServedSampler,
};
use crate::server::{read_ca_file, target, Schemes, ServerConfig};
use crate::RemoteError;

mod bounded;

/// The protocol's messages (the subset this client sends and reads).
pub mod pb {
    use std::collections::HashMap;

    /// `ModelReadyRequest` and `ModelMetadataRequest` (the same fields).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ModelRef {
        /// The model's name.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Its version ("" for the server's choice).
        #[prost(string, tag = "2")]
        pub version: String,
    }

    /// `ModelReadyResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ModelReadyResponse {
        /// Whether it takes requests.
        #[prost(bool, tag = "1")]
        pub ready: bool,
    }

    /// A tensor: `ModelMetadataResponse.TensorMetadata` (no contents),
    /// `ModelInferRequest.InferInputTensor` and `ModelInferResponse.InferOutputTensor`
    /// share these fields and numbers (their parameters, field 4, are not used).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Tensor {
        /// The tensor's name.
        #[prost(string, tag = "1")]
        pub name: String,
        /// Its datatype (`FP32`, `FP64`, ...).
        #[prost(string, tag = "2")]
        pub datatype: String,
        /// Its shape (in metadata, -1: any size).
        #[prost(int64, repeated, tag = "3")]
        pub shape: Vec<i64>,
        /// Its values (an output's, when not in `raw_output_contents`).
        #[prost(message, optional, tag = "5")]
        pub contents: Option<InferTensorContents>,
    }

    /// `ModelMetadataResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ModelMetadataResponse {
        /// The model's name.
        #[prost(string, tag = "1")]
        pub name: String,
        /// The versions served.
        #[prost(string, repeated, tag = "2")]
        pub versions: Vec<String>,
        /// The framework or runtime.
        #[prost(string, tag = "3")]
        pub platform: String,
        /// Its inputs.
        #[prost(message, repeated, tag = "4")]
        pub inputs: Vec<Tensor>,
        /// Its outputs.
        #[prost(message, repeated, tag = "5")]
        pub outputs: Vec<Tensor>,
    }

    /// `InferParameter`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InferParameter {
        /// The value.
        #[prost(oneof = "Parameter", tags = "1, 2, 3")]
        pub parameter_choice: Option<Parameter>,
    }

    /// `InferParameter.parameter_choice`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Parameter {
        /// A boolean.
        #[prost(bool, tag = "1")]
        Bool(bool),
        /// An integer.
        #[prost(int64, tag = "2")]
        Int64(i64),
        /// A string.
        #[prost(string, tag = "3")]
        String(String),
    }

    /// `InferTensorContents` (the float fields; a reply in another type is refused).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InferTensorContents {
        /// FP32 values.
        #[prost(float, repeated, tag = "6")]
        pub fp32_contents: Vec<f32>,
        /// FP64 values.
        #[prost(double, repeated, tag = "7")]
        pub fp64_contents: Vec<f64>,
    }

    /// `ModelInferRequest.InferRequestedOutputTensor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InferRequestedOutputTensor {
        /// The output's name.
        #[prost(string, tag = "1")]
        pub name: String,
    }

    /// `ModelInferRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ModelInferRequest {
        /// The model's name.
        #[prost(string, tag = "1")]
        pub model_name: String,
        /// Its version ("" for the server's choice).
        #[prost(string, tag = "2")]
        pub model_version: String,
        /// The request's id, echoed in the reply.
        #[prost(string, tag = "3")]
        pub id: String,
        /// The request's parameters.
        #[prost(map = "string, message", tag = "4")]
        pub parameters: HashMap<String, InferParameter>,
        /// The inputs.
        #[prost(message, repeated, tag = "5")]
        pub inputs: Vec<Tensor>,
        /// The outputs asked for.
        #[prost(message, repeated, tag = "6")]
        pub outputs: Vec<InferRequestedOutputTensor>,
    }

    /// `ModelInferResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ModelInferResponse {
        /// The model's name.
        #[prost(string, tag = "1")]
        pub model_name: String,
        /// The version that answered.
        #[prost(string, tag = "2")]
        pub model_version: String,
        /// The request's id.
        #[prost(string, tag = "3")]
        pub id: String,
        /// The reply's parameters.
        #[prost(map = "string, message", tag = "4")]
        pub parameters: HashMap<String, InferParameter>,
        /// The outputs.
        #[prost(message, repeated, tag = "5")]
        pub outputs: Vec<Tensor>,
        /// The outputs' values as little-endian bytes, one entry per output, when the
        /// server sends them raw.
        #[prost(bytes = "vec", repeated, tag = "6")]
        pub raw_output_contents: Vec<Vec<u8>>,
    }
}

/// The service's methods.
const MODEL_READY: &str = "/inference.GRPCInferenceService/ModelReady";
const MODEL_METADATA: &str = "/inference.GRPCInferenceService/ModelMetadata";
const MODEL_INFER: &str = "/inference.GRPCInferenceService/ModelInfer";

/// gRPC's schemes, as tonic takes them.
const GRPC: Schemes = Schemes {
    plain: "http",
    tls: "https",
};

/// The reply parameter that carries the server's own time for a chunk (ns), as
/// scripts/oip_runtime.py sets it (OIP has no per-request statistics field).
pub const SERVER_NS_PARAMETER: &str = "server_ns";

/// Where an OIP model is served.
#[derive(Clone, Debug, PartialEq)]
pub struct OipConfig {
    /// The server (`http://host:port` or `https://...`, its gRPC port).
    pub server: ServerConfig,
    /// The model's name on the server.
    pub model: String,
}

/// An Open Inference Protocol v2 server (gRPC) as a sampler.
pub type OipSampler = ServedSampler<OipClient>;

/// A connection to an OIP server and one of its models.
pub struct OipClient {
    cfg: OipConfig,
    /// Dropped before the runtime its connection's tasks run on.
    grpc: tonic::client::Grpc<Channel>,
    rt: tokio::runtime::Runtime,
    token: Option<MetadataValue<tonic::metadata::Ascii>>,
    metadata: pb::ModelMetadataResponse,
    /// The version every request names (the manifest's SHA-256 when the server serves
    /// it under that name, else the server's choice).
    version: String,
}

/// The `authorization: Bearer <token>` metadata, marked sensitive: HTTP/2 never puts it
/// in its header compression tables (HPACK's never-indexed literal), and `Debug` output
/// leaves it out.
pub(crate) fn bearer(token: &str) -> Option<MetadataValue<tonic::metadata::Ascii>> {
    let mut v: MetadataValue<tonic::metadata::Ascii> = format!("Bearer {token}").parse().ok()?;
    v.set_sensitive(true);
    Some(v)
}

impl std::fmt::Debug for OipClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OipClient")
            .field("url", &self.cfg.server.url)
            .field("model", &self.cfg.model)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl OipClient {
    /// Checks the URL without connecting.
    pub fn check(cfg: &OipConfig) -> Result<(), RemoteError> {
        target(&cfg.server, GRPC).map(|_| ())
    }

    /// Connects (TLS for `https://`), and asks whether the model is ready and what it
    /// takes, all by one deadline the connect timeout away.
    pub fn connect(cfg: &OipConfig) -> Result<OipClient, RemoteError> {
        let s = &cfg.server;
        let deadline = Instant::now() + s.connect_timeout;
        let t = target(s, GRPC)?;
        let fail = |why: String| RemoteError::Connect {
            url: s.url.clone(),
            why,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| fail(format!("no runtime for the connection: {e}")))?;
        let mut endpoint = Endpoint::from_shared(s.url.clone())
            .map_err(|e| fail(e.to_string()))?
            .connect_timeout(s.connect_timeout)
            .tcp_nodelay(true);
        if t.tls {
            let mut tls = ClientTlsConfig::new().domain_name(t.host.clone());
            tls = match &s.ca_file {
                // Read with a bound and checked here (a regular file, PEM, at least one
                // certificate); tonic takes the same bytes.
                Some(path) => tls.ca_certificate(Certificate::from_pem(
                    read_ca_file(path).map_err(&fail)?.pem,
                )),
                None => tls.with_webpki_roots(),
            };
            endpoint = endpoint.tls_config(tls).map_err(|e| fail(e.to_string()))?;
        }
        let channel = rt
            .block_on(async { tokio::time::timeout_at(deadline.into(), endpoint.connect()).await })
            .map_err(|_| {
                fail(format!(
                    "no connection within {} ms",
                    s.connect_timeout.as_millis()
                ))
            })?
            .map_err(|e| fail(error_chain(&e)))?;
        let grpc = tonic::client::Grpc::new(channel)
            .max_decoding_message_size(s.max_message_bytes.min(bounded::REPLY_LIMIT_BYTES))
            .max_encoding_message_size(s.max_message_bytes);
        let token = match &s.token {
            Some(tok) => Some(
                bearer(tok).ok_or_else(|| fail("the token is not a valid header value".into()))?,
            ),
            None => None,
        };
        let mut client = OipClient {
            cfg: cfg.clone(),
            grpc,
            rt,
            token,
            metadata: pb::ModelMetadataResponse::default(),
            version: String::new(),
        };
        let ready: pb::ModelReadyResponse = client.unary(
            MODEL_READY,
            pb::ModelRef {
                name: cfg.model.clone(),
                version: String::new(),
            },
            (deadline, s.connect_timeout),
        )?;
        if !ready.ready {
            return Err(fail(format!("model {:?} is not ready", cfg.model)));
        }
        client.metadata = client.unary(
            MODEL_METADATA,
            pb::ModelRef {
                name: cfg.model.clone(),
                version: String::new(),
            },
            (deadline, s.connect_timeout),
        )?;
        Ok(client)
    }

    /// The model's metadata, as the server said on connecting.
    pub fn metadata(&self) -> &pb::ModelMetadataResponse {
        &self.metadata
    }

    /// One unary call by `deadline` (`wait` after the exchange began: what a timeout
    /// says), the token in its metadata; the reply is checked for its size and field
    /// count before it is decoded ([`bounded`]).
    fn unary<Req, Resp>(
        &mut self,
        path: &'static str,
        message: Req,
        (deadline, wait): (Instant, Duration),
    ) -> Result<Resp, RemoteError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let url = self.cfg.server.url.clone();
        let limit = deadline.saturating_duration_since(Instant::now());
        let ms = wait.as_millis();
        if limit.is_zero() {
            return Err(RemoteError::Timeout { url, ms });
        }
        let mut request = tonic::Request::new(message);
        request.set_timeout(limit);
        if let Some(tok) = &self.token {
            request.metadata_mut().insert("authorization", tok.clone());
        }
        let grpc = &mut self.grpc;
        let call = async move {
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::unavailable(error_chain(&e)))?;
            let codec = bounded::BoundedCodec::<Req, Resp>::default();
            grpc.unary(request, PathAndQuery::from_static(path), codec)
                .await
        };
        match self
            .rt
            .block_on(async { tokio::time::timeout_at(deadline.into(), call).await })
        {
            Err(_) => Err(RemoteError::Timeout { url, ms }),
            Ok(Ok(reply)) => Ok(reply.into_inner()),
            Ok(Err(status)) => Err(status_error(url, &status, ms)),
        }
    }

    /// The request of one chunk.
    fn request(&self, r: &ChunkRequest<'_>) -> pb::ModelInferRequest {
        let tensor = |name: &str, shape: Vec<i64>, values: Vec<f32>| pb::Tensor {
            name: name.to_string(),
            datatype: "FP32".into(),
            shape,
            contents: Some(pb::InferTensorContents {
                fp32_contents: values,
                fp64_contents: Vec::new(),
            }),
        };
        let param = |p: pb::Parameter| pb::InferParameter {
            parameter_choice: Some(p),
        };
        pb::ModelInferRequest {
            model_name: self.cfg.model.clone(),
            model_version: self.version.clone(),
            id: r.id.to_string(),
            parameters: HashMap::from([
                (
                    "sampler_method".to_string(),
                    param(pb::Parameter::String(r.method.name().into())),
                ),
                (
                    "sampler_steps".to_string(),
                    param(pb::Parameter::Int64(r.steps as i64)),
                ),
            ]),
            inputs: vec![
                tensor(
                    &r.keys.state,
                    vec![r.obs.len() as i64],
                    r.obs.iter().map(|&x| x as f32).collect(),
                ),
                tensor(
                    &r.keys.noise,
                    vec![r.horizon as i64, r.d_a as i64],
                    r.noise.to_vec(),
                ),
            ],
            outputs: vec![pb::InferRequestedOutputTensor {
                name: r.keys.actions.clone(),
            }],
        }
    }

    /// What, if anything, makes `reply` not the answer of request `id` by this model.
    fn mismatch(&self, reply: &pb::ModelInferResponse, id: u64) -> Option<String> {
        if reply.id != id.to_string() {
            return Some(format!(
                "the reply answers request {:?}, not request \"{id}\" (a stale or repeated \
                 reply)",
                reply.id
            ));
        }
        if reply.model_name != self.cfg.model {
            return Some(format!(
                "the reply is model {:?}'s, not {:?}'s",
                reply.model_name, self.cfg.model
            ));
        }
        if !self.version.is_empty() && !reply.model_version.eq_ignore_ascii_case(&self.version) {
            return Some(format!(
                "the reply is version {:?}'s, not {:?}'s (the manifest's model)",
                reply.model_version, self.version
            ));
        }
        None
    }

    /// The named output of a reply, as f64, with its shape.
    fn output(&self, reply: &pb::ModelInferResponse, name: &str) -> Result<ChunkReply, String> {
        let (index, out) = reply
            .outputs
            .iter()
            .enumerate()
            .find(|(_, o)| o.name == name)
            .ok_or_else(|| {
                let names: Vec<&str> = reply.outputs.iter().map(|o| o.name.as_str()).collect();
                format!("the reply has no output {name:?} (it has {names:?})")
            })?;
        let shape = out
            .shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("{name:?} has shape {:?}", out.shape)))
            .collect::<Result<Vec<usize>, String>>()?;
        let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let count = count
            .filter(|&n| n <= crate::scan::MAX_ACTION_ELEMENTS)
            .ok_or_else(|| {
                format!(
                    "{name:?} has shape {shape:?}: more than {} values",
                    crate::scan::MAX_ACTION_ELEMENTS
                )
            })?;
        let values = values(out, reply.raw_output_contents.get(index), name)?;
        if count != values.len() {
            return Err(format!(
                "{name:?} has shape {shape:?} but {} values",
                values.len()
            ));
        }
        let server_ns =
            reply
                .parameters
                .get(SERVER_NS_PARAMETER)
                .and_then(|p| match p.parameter_choice {
                    Some(pb::Parameter::Int64(ns)) => u64::try_from(ns).ok(),
                    _ => None,
                });
        Ok(ChunkReply {
            shape,
            values,
            server_ns,
        })
    }
}

impl Link for OipClient {
    type Config = OipConfig;

    fn describe(cfg: &OipConfig) -> String {
        format!("OIP server {} (model {:?})", cfg.server.url, cfg.model)
    }

    fn open(
        cfg: &OipConfig,
        keys: &MessageKeys,
        model_sha256: Option<&str>,
    ) -> Result<Self, RemoteError> {
        let mut client = OipClient::connect(cfg)?;
        let url = &cfg.server.url;
        // The versions name the model's SHA-256 (a model-settings.json's version): one
        // that is not the manifest's is another policy, and a model whose versions name
        // no digest ("1", "latest", none) proves nothing.
        let versions = &client.metadata.versions;
        let digests: Vec<&String> = versions
            .iter()
            .filter(|v| v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
            .collect();
        match (model_sha256, digests.first()) {
            (Some(want), Some(got)) => {
                if !digests.iter().any(|d| d.eq_ignore_ascii_case(want)) {
                    return Err(other_model(url, got, want));
                }
                client.version = want.to_string();
            }
            (Some(_), None) if cfg.server.verify_model => {
                return Err(unproven_model(
                    url,
                    &format!(
                        "model {:?} names no SHA-256 among its versions {versions:?}",
                        cfg.model
                    ),
                ))
            }
            _ => {}
        }
        check_signature(&client.metadata, keys).map_err(|why| RemoteError::Protocol {
            url: url.clone(),
            why: format!("model {:?} {why}", cfg.model),
        })?;
        Ok(client)
    }

    fn chunk(&mut self, r: &ChunkRequest<'_>) -> Result<ChunkReply, RemoteError> {
        let request = self.request(r);
        let wait = self.cfg.server.reply_timeout;
        let reply: pb::ModelInferResponse =
            self.unary(MODEL_INFER, request, (Instant::now() + wait, wait))?;
        let url = self.cfg.server.url.clone();
        // The reply must be this request's, from this model (and version, when one was
        // named): anything else and the connection is made again (its metadata and
        // digest checked anew).
        if let Some(why) = self.mismatch(&reply, r.id) {
            return Err(RemoteError::Protocol { url, why });
        }
        self.output(&reply, &r.keys.actions)
            .map_err(|why| RemoteError::Reply { url, why })
    }

    fn disconnect(self) {}
}

/// An output tensor's values as f64: its raw bytes (exactly 4 or 8 per value, none
/// left over) or its typed contents.
fn values(out: &pb::Tensor, raw: Option<&Vec<u8>>, name: &str) -> Result<Vec<f64>, String> {
    let size = match out.datatype.as_str() {
        "FP32" => 4,
        "FP64" => 8,
        other => return Err(format!("{name:?} is {other}, expected FP32 or FP64")),
    };
    Ok(match (raw, &out.contents) {
        (Some(raw), _) if raw.len() % size != 0 => {
            return Err(format!(
                "{name:?}'s raw bytes ({}) are not whole {} values",
                raw.len(),
                out.datatype
            ))
        }
        (Some(raw), _) if size == 4 => raw
            .chunks_exact(4)
            .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
        (Some(raw), _) => raw
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
            .collect(),
        (None, Some(c)) if size == 4 => c.fp32_contents.iter().map(|&x| f64::from(x)).collect(),
        (None, Some(c)) => c.fp64_contents.clone(),
        (None, None) => return Err(format!("{name:?} has no values")),
    })
}

/// Checks what the model's metadata declares (a server may declare nothing) against the
/// message keys: FP32 inputs under the state and noise keys, an output under the actions
/// key.
fn check_signature(md: &pb::ModelMetadataResponse, keys: &MessageKeys) -> Result<(), String> {
    if !md.inputs.is_empty() {
        for (key, what) in [(&keys.state, "state_key"), (&keys.noise, "noise_key")] {
            match md.inputs.iter().find(|t| &t.name == key) {
                None => {
                    let names: Vec<&str> = md.inputs.iter().map(|t| t.name.as_str()).collect();
                    return Err(format!(
                        "takes no input {key:?} (policy.remote.{what}); its inputs are {names:?}"
                    ));
                }
                Some(t) if t.datatype != "FP32" => {
                    return Err(format!(
                        "takes input {key:?} as {}, this client sends FP32",
                        t.datatype
                    ))
                }
                Some(_) => {}
            }
        }
    }
    if !md.outputs.is_empty() && !md.outputs.iter().any(|t| t.name == keys.actions) {
        let names: Vec<&str> = md.outputs.iter().map(|t| t.name.as_str()).collect();
        return Err(format!(
            "has no output {:?} (policy.remote.actions_key); its outputs are {names:?}",
            keys.actions
        ));
    }
    Ok(())
}

/// An error and its sources, one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// A gRPC status as this crate's error: the transport's failures lose the connection,
/// the server's own refusals do not.
fn status_error(url: String, status: &tonic::Status, ms: u128) -> RemoteError {
    use tonic::Code;
    let message: String = status.message().chars().take(2000).collect();
    // tonic enforces the request's deadline (its `grpc-timeout`, sent so the server can
    // drop the work too) on this side as CANCELLED with its `TimeoutExpired`'s text.
    let expired = status.code() == Code::Cancelled
        && status.message() == tonic::TimeoutExpired(()).to_string();
    match status.code() {
        _ if expired => RemoteError::Timeout { url, ms },
        Code::DeadlineExceeded => RemoteError::Timeout { url, ms },
        Code::Unavailable | Code::Cancelled | Code::Aborted | Code::Unknown => {
            RemoteError::Closed {
                url,
                why: format!("{:?}: {message}", status.code()),
            }
        }
        Code::ResourceExhausted => RemoteError::Reply {
            url,
            why: format!(
                "{message} (a reply is at most policy.remote.max_message_mb, and 1 MiB: \
                 {} values of a chunk)",
                crate::scan::MAX_ACTION_ELEMENTS
            ),
        },
        // This client's own refusal of a reply it read (`bounded`), or the server's
        // word that data was lost: the connection is in an unknown state.
        Code::DataLoss => RemoteError::Protocol { url, why: message },
        code => RemoteError::Refused {
            url,
            message: format!("{code:?}: {message}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_token_is_sensitive() {
        let v = bearer("s3cret").unwrap();
        assert!(v.is_sensitive());
        assert!(!format!("{v:?}").contains("s3cret"), "{v:?}");
        assert!(bearer("bad\ntoken").is_none());
    }
}
