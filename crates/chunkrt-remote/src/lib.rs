//! chunkrt-remote: action chunks from a policy server on another machine.
//!
//! - [`codec`]: msgpack with NumPy arrays in `openpi_client.msgpack_numpy`'s layout;
//!   [`scan`]: a reply read in place with its elements counted, never as a tree.
//! - [`deadline`]: a TCP stream whose reads and writes end by one deadline, however
//!   slowly the other side sends.
//! - [`openpi`]: openpi's WebSocket protocol (metadata on connect, one request and one
//!   reply per chunk, the reply echoing the request's `request_id`), over TCP (`ws://`,
//!   loopback unless allowed) or TLS (`wss://`, rustls with the ring provider), an
//!   `Authorization: Api-Key` token, bounded message sizes and deadlines.
//! - [`oip`]: the Open Inference Protocol v2 over gRPC (KServe, Triton, MLServer):
//!   `ModelReady` and `ModelMetadata` on connect, one `ModelInfer` per chunk, over
//!   `http://` (loopback unless allowed) or `https://`, a `Bearer` token.
//! - [`sampler`]: either one as an `OnnxPolicy`'s sampler, reconnecting with backoff.
//! - [`server`]: what both share (the server's address, TLS, token, limits, errors).
//!
//! The client runs on the inference thread; the control thread never waits on the network.

pub mod codec;
pub mod deadline;
pub mod oip;
pub mod openpi;
pub mod sampler;
pub mod scan;
pub mod server;

pub use codec::{CodecError, DType, NdArray};
pub use oip::{OipClient, OipConfig, OipSampler};
pub use openpi::{OpenpiClient, OpenpiSampler};
pub use sampler::{
    ActionsAre, ChunkReply, ChunkRequest, ConnectionStats, Link, MessageKeys, ServedSampler,
};
pub use server::{check_ca_file, RemoteError, ServerConfig};
