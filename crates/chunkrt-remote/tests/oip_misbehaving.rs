//! The OIP client against a gRPC server that misbehaves on purpose, in this process (h2's
//! server side, the gRPC framing written out: a 5-byte prefix per message, `grpc-status`
//! in the trailers; the protocol's messages are the client's prost types, so field
//! numbers are shared, but nothing of the client's logic is). A reply to another
//! request, from another model or version, raw output with a stray byte, and a model
//! whose versions name no digest are each refused; with `verify_model = false` the last
//! is served. A well-behaved run of the same server is served, so each refusal is the
//! departure's.

mod common;

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use chunkrt_remote::oip::pb;
use chunkrt_remote::{OipConfig, OipSampler, RemoteError, ServerConfig};
use common::Request;
use prost::Message;

/// How the server departs from the protocol.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Departure {
    None,
    /// The reply's `id` is another request's.
    OtherId,
    /// The reply's `model_name` is another model's.
    OtherModel,
    /// The reply's `model_version` is another version's.
    OtherVersion,
    /// The raw output has one byte more than its shape holds.
    StrayByte,
}

#[derive(Clone, Debug)]
struct Server {
    versions: Vec<String>,
    departure: Departure,
    horizon: usize,
    d_a: usize,
}

/// The gRPC message `m` as a body frame: uncompressed flag, big-endian length, bytes.
fn grpc_frame(m: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + m.len());
    b.put_u8(0);
    b.put_u32(m.len() as u32);
    b.put_slice(m);
    b.freeze()
}

impl Server {
    /// The reply to a call of `path` whose request message is `body`.
    fn reply(&self, path: &str, body: &[u8]) -> Vec<u8> {
        match path {
            "/inference.GRPCInferenceService/ModelReady" => {
                pb::ModelReadyResponse { ready: true }.encode_to_vec()
            }
            "/inference.GRPCInferenceService/ModelMetadata" => pb::ModelMetadataResponse {
                name: "flow".into(),
                versions: self.versions.clone(),
                ..Default::default()
            }
            .encode_to_vec(),
            _ => self.infer(&pb::ModelInferRequest::decode(body).expect("a request")),
        }
    }

    fn infer(&self, req: &pb::ModelInferRequest) -> Vec<u8> {
        let values = vec![0.1f32; self.horizon * self.d_a];
        let mut raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let d = self.departure;
        if d == Departure::StrayByte {
            raw.push(0);
        }
        pb::ModelInferResponse {
            model_name: if d == Departure::OtherModel {
                "ddim".into()
            } else {
                req.model_name.clone()
            },
            model_version: if d == Departure::OtherVersion {
                "0".repeat(64)
            } else {
                req.model_version.clone()
            },
            id: if d == Departure::OtherId {
                format!("{}0", req.id)
            } else {
                req.id.clone()
            },
            outputs: vec![pb::Tensor {
                name: "actions".into(),
                datatype: "FP32".into(),
                shape: vec![self.horizon as i64, self.d_a as i64],
                contents: None,
            }],
            raw_output_contents: vec![raw],
            ..Default::default()
        }
        .encode_to_vec()
    }
}

async fn call(
    server: Arc<Server>,
    request: http::Request<h2::RecvStream>,
    mut respond: h2::server::SendResponse<Bytes>,
) -> Result<(), h2::Error> {
    let path = request.uri().path().to_string();
    let mut body = request.into_body();
    let mut buf = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    let reply = server.reply(&path, &buf[5.min(buf.len())..]);
    let head = http::Response::builder()
        .status(200)
        .header("content-type", "application/grpc")
        .body(())
        .unwrap();
    let mut send = respond.send_response(head, false)?;
    send.send_data(grpc_frame(&reply), false)?;
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    send.send_trailers(trailers)
}

/// Serves `server` on a loopback port in its own thread; the URL.
fn start(server: Server) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = Arc::new(server);
    std::thread::spawn(move || {
        rt.block_on(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move {
                    let Ok(mut conn) = h2::server::handshake(tcp).await else {
                        return;
                    };
                    while let Some(Ok((request, respond))) = conn.accept().await {
                        tokio::spawn(call(server.clone(), request, respond));
                    }
                });
            }
        })
    });
    url
}

fn flow() -> chunkrt_policy::Manifest {
    chunkrt_policy::Manifest::load(&common::manifest("flow.toml")).unwrap()
}

fn sampler(url: &str, verify_model: bool) -> Result<OipSampler, RemoteError> {
    let mut server = ServerConfig::new(url);
    server.verify_model = verify_model;
    common::flow_sampler(OipConfig {
        server,
        model: "flow".into(),
    })
}

fn server(versions: &[&str], departure: Departure) -> String {
    let m = flow();
    start(Server {
        versions: versions.iter().map(|v| v.to_string()).collect(),
        departure,
        horizon: m.horizon,
        d_a: m.d_a,
    })
}

#[test]
fn replies_of_another_request_model_or_version_and_stray_bytes_are_refused() {
    let sha = flow().model_sha256;
    let mut r = Request::flow();
    let url = server(&[&sha], Departure::None);
    let mut s = sampler(&url, true).expect("a well-behaved server");
    r.sample(&mut s).expect("served");
    assert!(r.out.iter().all(|&x| (x - 0.1).abs() < 1e-6));
    for (departure, says) in [
        (
            Departure::OtherId,
            "answers request \"10\", not request \"1\"",
        ),
        (Departure::OtherModel, "model \"ddim\"'s, not \"flow\"'s"),
        (Departure::OtherVersion, "(the manifest's model)"),
        (
            Departure::StrayByte,
            "raw bytes (897) are not whole FP32 values",
        ),
    ] {
        let url = server(&[&sha], departure);
        let mut s = sampler(&url, true).expect("the metadata is right");
        let e = r.sample(&mut s).expect_err("refused");
        assert!(
            e.0.contains(says),
            "{departure:?}: expected {says:?} in {e}"
        );
    }
}

#[test]
fn a_model_whose_versions_name_no_digest_is_refused_unless_verify_model_is_off() {
    for versions in [&[][..], &["1"], &["latest"]] {
        let url = server(versions, Departure::None);
        let e = sampler(&url, true).expect_err("no digest").to_string();
        assert!(
            e.contains("names no SHA-256 among its versions") && e.contains("verify_model"),
            "{versions:?}: {e}"
        );
        let mut s = sampler(&url, false).expect("unverified, as asked");
        Request::flow().sample(&mut s).expect("served");
    }
}
