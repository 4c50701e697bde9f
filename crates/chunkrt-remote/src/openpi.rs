//! openpi's WebSocket protocol, client side (`openpi_client.WebsocketClientPolicy`'s, and
//! what `openpi.serving.websocket_policy_server` answers): connect, read the server's
//! metadata message, then one binary request and one binary reply per chunk, both msgpack
//! in msgpack_numpy's layout ([`crate::codec`]). A text reply is the server's error (its
//! traceback). Blocking, with bounded waits: it runs on the inference thread, never on
//! the control thread.

use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmpv::Value;
use tungstenite::client::IntoClientRequest;
use tungstenite::http::HeaderValue;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Connector, Message, WebSocket};

use crate::codec::{self, get, get_f64, CodecError, NdArray};
use crate::sampler::{other_model, ChunkReply, ChunkRequest, Link, MessageKeys, ServedSampler};
use crate::server::{ca_certificates, target, Schemes, ServerConfig};
use crate::RemoteError;

/// openpi's schemes.
const WS: Schemes = Schemes {
    plain: "ws",
    tls: "wss",
};

/// An openpi policy server (WebSocket, msgpack_numpy) as a sampler.
pub type OpenpiSampler = ServedSampler<OpenpiClient>;

/// A connection to an openpi policy server.
pub struct OpenpiClient {
    cfg: ServerConfig,
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    metadata: Value,
}

impl std::fmt::Debug for OpenpiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenpiClient")
            .field("url", &self.cfg.url)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl OpenpiClient {
    /// Checks the URL without connecting.
    pub fn check(cfg: &ServerConfig) -> Result<(), RemoteError> {
        target(cfg, WS).map(|_| ())
    }

    /// Connects, shakes hands (TLS for `wss://`), and reads the server's metadata, all
    /// within `cfg.connect_timeout`.
    pub fn connect(cfg: &ServerConfig) -> Result<OpenpiClient, RemoteError> {
        let t = target(cfg, WS)?;
        let fail = |why: String| RemoteError::Connect {
            url: cfg.url.clone(),
            why,
        };
        let addr = (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map_err(|e| fail(format!("cannot resolve {}: {e}", t.host)))?
            .next()
            .ok_or_else(|| fail(format!("{} resolves to no address", t.host)))?;
        let stream = TcpStream::connect_timeout(&addr, cfg.connect_timeout)
            .map_err(|e| fail(e.to_string()))?;
        let io = |e: std::io::Error| fail(e.to_string());
        stream.set_nodelay(true).map_err(io)?;
        stream
            .set_read_timeout(Some(cfg.connect_timeout))
            .map_err(io)?;
        stream
            .set_write_timeout(Some(cfg.connect_timeout))
            .map_err(io)?;
        let mut request = cfg
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| fail(e.to_string()))?;
        if let Some(token) = &cfg.token {
            let v = HeaderValue::from_str(&format!("Api-Key {token}"))
                .map_err(|_| fail("the token is not a valid header value".into()))?;
            request.headers_mut().insert("Authorization", v);
        }
        let ws_cfg = WebSocketConfig::default()
            .max_message_size(Some(cfg.max_message_bytes))
            .max_frame_size(Some(cfg.max_message_bytes));
        let connector = if t.tls {
            tls_connector(cfg).map_err(fail)?
        } else {
            Some(Connector::Plain)
        };
        let (ws, _) = tungstenite::client_tls_with_config(request, stream, Some(ws_cfg), connector)
            .map_err(|e| fail(format!("handshake: {e}")))?;
        let mut client = OpenpiClient {
            cfg: cfg.clone(),
            ws,
            metadata: Value::Nil,
        };
        client.metadata = client.read_reply(cfg.connect_timeout)?;
        client.set_read_timeout(cfg.reply_timeout)?;
        Ok(client)
    }

    /// What the server sent on connecting (openpi: the policy's metadata).
    pub fn metadata(&self) -> &Value {
        &self.metadata
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &ServerConfig {
        &self.cfg
    }

    /// Sends `request` and waits (at most `reply_timeout`) for its reply.
    pub fn infer(&mut self, request: &Value) -> Result<Value, RemoteError> {
        let bytes = codec::encode(request);
        self.ws
            .send(Message::Binary(bytes.into()))
            .map_err(|e| self.ws_error(e))?;
        self.read_reply(self.cfg.reply_timeout)
    }

    /// Closes the connection politely (best effort).
    pub fn close(mut self) {
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }

    fn set_read_timeout(&mut self, t: Duration) -> Result<(), RemoteError> {
        let sock = match self.ws.get_mut() {
            MaybeTlsStream::Plain(s) => s,
            MaybeTlsStream::Rustls(s) => s.get_mut(),
            _ => return Ok(()),
        };
        sock.set_read_timeout(Some(t))
            .map_err(|e| RemoteError::Connect {
                url: self.cfg.url.clone(),
                why: e.to_string(),
            })
    }

    /// The next data message within `limit`: binary is decoded, text is the server's
    /// error; pings are answered by tungstenite, pongs skipped.
    fn read_reply(&mut self, limit: Duration) -> Result<Value, RemoteError> {
        let start = Instant::now();
        loop {
            if start.elapsed() > limit {
                return Err(RemoteError::Timeout {
                    url: self.cfg.url.clone(),
                    ms: limit.as_millis(),
                });
            }
            let msg = self.ws.read().map_err(|e| self.ws_error(e))?;
            match msg {
                Message::Binary(b) => {
                    return codec::decode(&b).map_err(|e: CodecError| RemoteError::Protocol {
                        url: self.cfg.url.clone(),
                        why: e.to_string(),
                    })
                }
                Message::Text(t) => {
                    return Err(RemoteError::Server {
                        url: self.cfg.url.clone(),
                        message: t.as_str().chars().take(2000).collect(),
                    })
                }
                Message::Close(frame) => {
                    return Err(RemoteError::Closed {
                        url: self.cfg.url.clone(),
                        why: frame.map_or("no reason given".into(), |f| {
                            format!("{} {}", u16::from(f.code), f.reason.as_str())
                        }),
                    })
                }
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => continue,
            }
        }
    }

    fn ws_error(&self, e: tungstenite::Error) -> RemoteError {
        let url = self.cfg.url.clone();
        match e {
            tungstenite::Error::Io(io)
                if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
            {
                RemoteError::Timeout {
                    url,
                    ms: self.cfg.reply_timeout.as_millis(),
                }
            }
            tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
                RemoteError::Closed {
                    url,
                    why: "closed".into(),
                }
            }
            tungstenite::Error::Capacity(c) => RemoteError::Protocol {
                url,
                why: format!("{c} (policy.remote.max_message_mb)"),
            },
            other => RemoteError::Closed {
                url,
                why: other.to_string(),
            },
        }
    }
}

/// The TLS connector for `wss://`: the CA file's roots, or `None` (tungstenite's default,
/// the Mozilla roots).
fn tls_connector(cfg: &ServerConfig) -> Result<Option<Connector>, String> {
    let Some(path) = &cfg.ca_file else {
        return Ok(None);
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in ca_certificates(path)? {
        roots
            .add(cert)
            .map_err(|e| format!("CA file {}: {e}", path.display()))?;
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Some(Connector::Rustls(Arc::new(config))))
}

impl Link for OpenpiClient {
    type Config = ServerConfig;

    fn describe(cfg: &ServerConfig) -> String {
        format!("openpi server {}", cfg.url)
    }

    fn open(
        cfg: &ServerConfig,
        _keys: &MessageKeys,
        model_sha256: Option<&str>,
    ) -> Result<Self, RemoteError> {
        let client = OpenpiClient::connect(cfg)?;
        let served = get(client.metadata(), "model_sha256").and_then(Value::as_str);
        if let (Some(want), Some(got)) = (model_sha256, served) {
            if want != got {
                return Err(other_model(&cfg.url, got, want));
            }
        }
        Ok(client)
    }

    fn chunk(&mut self, r: &ChunkRequest<'_>) -> Result<ChunkReply, RemoteError> {
        let state = NdArray::f32(&[r.obs.len()], r.obs.iter().map(|&x| x as f32));
        let noise = NdArray::f32(&[r.horizon, r.d_a], r.noise.iter().copied());
        let request = Value::Map(vec![
            (Value::from(r.keys.state.as_str()), state.to_value()),
            (Value::from(r.keys.noise.as_str()), noise.to_value()),
            (
                Value::from("sampler"),
                Value::Map(vec![
                    (Value::from("method"), Value::from(r.method.name())),
                    (Value::from("steps"), Value::from(r.steps as u64)),
                ]),
            ),
        ]);
        let reply = self.infer(&request)?;
        let key = &r.keys.actions;
        let bad = |why: String| RemoteError::Reply {
            url: self.cfg.url.clone(),
            why,
        };
        let actions = get(&reply, key).ok_or_else(|| bad(format!("the reply has no {key:?}")))?;
        let actions = NdArray::from_value(actions)
            .map_err(|e| bad(format!("{key:?}: {e}")))?
            .ok_or_else(|| bad(format!("{key:?} is not a NumPy array")))?;
        let server_ms = get(&reply, "server_timing").and_then(|t| get_f64(t, "infer_ms"));
        Ok(ChunkReply {
            values: actions.to_f64(),
            shape: actions.shape.clone(),
            server_ns: server_ms
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map(|ms| (ms * 1e6) as u64),
        })
    }

    fn disconnect(self) {
        self.close();
    }
}
