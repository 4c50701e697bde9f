//! openpi's WebSocket protocol, client side (`openpi_client.WebsocketClientPolicy`'s, and
//! what `openpi.serving.websocket_policy_server` answers): connect, read the server's
//! metadata message, then one binary request and one binary reply per chunk, both msgpack
//! in msgpack_numpy's layout ([`crate::codec`]). A text reply is the server's error (its
//! traceback). Blocking: it runs on the inference thread, never on the control thread.
//!
//! Every exchange ends by one deadline ([`crate::deadline`]): the connection (TCP, TLS,
//! the WebSocket handshake and the metadata) by `connect_timeout`, each request and its
//! reply by `reply_timeout`, however slowly a server sends. A reply is read in place
//! ([`crate::scan`]), never as a tree.
//!
//! openpi's protocol carries nothing that ties a reply to its request (the reply is the
//! policy's output and `server_timing`), so a stale reply (one request behind) or a
//! second reply to one request would be taken for the answer to the next. chunkrt adds
//! `request_id` to every request (a sequence number, increasing over the sampler's
//! life, across reconnections) and takes only a reply that echoes it: a reply naming
//! another request puts the connection out of step and it is made again; a reply that
//! names none is refused (scripts/policy_server.py echoes it, as any server for chunkrt
//! must; openpi's own server ignores keys it does not know).

use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmpv::Value;
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::HandshakeError;
use tungstenite::http::HeaderValue;
use tungstenite::protocol::WebSocketConfig;
use tungstenite::stream::MaybeTlsStream;
use tungstenite::{Bytes, Connector, Message, WebSocket};

use crate::codec::{self, get, CodecError, NdArray};
use crate::deadline::DeadlineStream;
use crate::sampler::{
    other_model, unproven_model, ChunkReply, ChunkRequest, Link, MessageKeys, ServedSampler,
};
use crate::scan::{self, REQUEST_ID};
use crate::server::{read_ca_file, target, Schemes, ServerConfig};
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
    ws: WebSocket<MaybeTlsStream<DeadlineStream>>,
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

/// openpi's `Authorization: Api-Key <token>`, marked sensitive (kept out of `Debug`
/// output and, over HTTP/2, out of header compression tables).
pub(crate) fn api_key_header(token: &str) -> Option<HeaderValue> {
    let mut v = HeaderValue::from_str(&format!("Api-Key {token}")).ok()?;
    v.set_sensitive(true);
    Some(v)
}

impl OpenpiClient {
    /// Checks the URL without connecting.
    pub fn check(cfg: &ServerConfig) -> Result<(), RemoteError> {
        target(cfg, WS).map(|_| ())
    }

    /// Connects, shakes hands (TLS for `wss://`), and reads the server's metadata, all
    /// by one deadline `cfg.connect_timeout` away, however slowly the server sends.
    pub fn connect(cfg: &ServerConfig) -> Result<OpenpiClient, RemoteError> {
        let deadline = Instant::now() + cfg.connect_timeout;
        let t = target(cfg, WS)?;
        let fail = |why: String| RemoteError::Connect {
            url: cfg.url.clone(),
            why,
        };
        let late = || {
            fail(format!(
                "not connected within {} ms (policy.remote.connect_timeout_ms)",
                cfg.connect_timeout.as_millis()
            ))
        };
        let addr = (t.host.as_str(), t.port)
            .to_socket_addrs()
            .map_err(|e| fail(format!("cannot resolve {}: {e}", t.host)))?
            .next()
            .ok_or_else(|| fail(format!("{} resolves to no address", t.host)))?;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        let tcp = TcpStream::connect_timeout(&addr, left).map_err(|e| fail(e.to_string()))?;
        tcp.set_nodelay(true).map_err(|e| fail(e.to_string()))?;
        let stream = DeadlineStream::new(tcp, deadline);
        let mut request = cfg
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| fail(e.to_string()))?;
        if let Some(token) = &cfg.token {
            let v = api_key_header(token)
                .ok_or_else(|| fail("the token is not a valid header value".into()))?;
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
            .map_err(|e| match e {
                HandshakeError::Failure(e) if timed_out(&e) => late(),
                HandshakeError::Failure(e) => fail(format!("handshake: {e}")),
                HandshakeError::Interrupted(_) => late(),
            })?;
        let mut client = OpenpiClient {
            cfg: cfg.clone(),
            ws,
            metadata: Value::Nil,
        };
        let metadata = client
            .next_binary(cfg.connect_timeout)
            .map_err(|e| match e {
                RemoteError::Timeout { .. } => late(),
                other => other,
            })?;
        client.metadata = scan::decode(&metadata).map_err(|e| RemoteError::Protocol {
            url: cfg.url.clone(),
            why: format!("its metadata: {e}"),
        })?;
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

    /// Sends `request` and waits for its reply, both by one deadline `reply_timeout`
    /// away; the reply as a (bounded) tree.
    pub fn infer(&mut self, request: &Value) -> Result<Value, RemoteError> {
        let bytes = self.exchange(request)?;
        scan::decode(&bytes).map_err(|e| self.unreadable(e))
    }

    /// Closes the connection politely (best effort, by a deadline of one reply).
    pub fn close(mut self) {
        let deadline = Instant::now() + self.cfg.reply_timeout;
        self.stream().set_deadline(deadline);
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }

    /// The socket under the WebSocket (and TLS).
    fn stream(&mut self) -> &mut DeadlineStream {
        match self.ws.get_mut() {
            MaybeTlsStream::Plain(s) => s,
            MaybeTlsStream::Rustls(s) => s.get_mut(),
            _ => unreachable!("only plain and rustls streams are made here"),
        }
    }

    /// Sends `request`; its reply's bytes, both by one deadline.
    fn exchange(&mut self, request: &Value) -> Result<Bytes, RemoteError> {
        let limit = self.cfg.reply_timeout;
        self.stream().set_deadline(Instant::now() + limit);
        let bytes = codec::encode(request);
        self.ws
            .send(Message::Binary(bytes.into()))
            .map_err(|e| self.ws_error(e, limit))?;
        self.next_binary(limit)
    }

    /// The next data message by the stream's deadline (`limit` away when it was set):
    /// binary is returned, text is the server's error; pings are answered by
    /// tungstenite, pongs skipped.
    fn next_binary(&mut self, limit: Duration) -> Result<Bytes, RemoteError> {
        loop {
            let msg = self.ws.read().map_err(|e| self.ws_error(e, limit))?;
            match msg {
                Message::Binary(b) => return Ok(b),
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

    fn unreadable(&self, e: CodecError) -> RemoteError {
        RemoteError::Protocol {
            url: self.cfg.url.clone(),
            why: e.to_string(),
        }
    }

    fn ws_error(&self, e: tungstenite::Error, limit: Duration) -> RemoteError {
        let url = self.cfg.url.clone();
        match e {
            e if timed_out(&e) => RemoteError::Timeout {
                url,
                ms: limit.as_millis(),
            },
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

/// Whether `e` is the stream's deadline passing (or a socket timeout).
fn timed_out(e: &tungstenite::Error) -> bool {
    matches!(e, tungstenite::Error::Io(io)
        if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

/// The TLS connector for `wss://`: the CA file's roots (read with a bound), or `None`
/// (tungstenite's default, the Mozilla roots).
fn tls_connector(cfg: &ServerConfig) -> Result<Option<Connector>, String> {
    let Some(path) = &cfg.ca_file else {
        return Ok(None);
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_ca_file(path)?.certs {
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
        match (model_sha256, served) {
            (Some(want), Some(got)) if !want.eq_ignore_ascii_case(got) => {
                Err(other_model(&cfg.url, got, want))
            }
            (Some(_), None) if cfg.verify_model => Err(unproven_model(
                &cfg.url,
                "its metadata names no model_sha256",
            )),
            _ => Ok(client),
        }
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
            (Value::from(REQUEST_ID), Value::from(r.id)),
        ]);
        let bytes = self.exchange(&request)?;
        let key = &r.keys.actions;
        let reply = scan::read_reply(&bytes, key).map_err(|e| self.unreadable(e))?;
        let url = self.cfg.url.clone();
        match reply.request_id {
            Some(id) if id == r.id => {}
            // Out of step with the server (a stale reply, or a second one to an earlier
            // request): the connection is made again.
            Some(id) => {
                return Err(RemoteError::Protocol {
                    url,
                    why: format!(
                        "the reply answers request {id}, not request {} (a stale or repeated \
                         reply)",
                        r.id
                    ),
                })
            }
            None => {
                return Err(RemoteError::Reply {
                    url,
                    why: format!(
                        "the reply does not echo the request's {REQUEST_ID:?}, so it cannot be \
                         told from a stale or repeated one (a server for chunkrt echoes it: \
                         scripts/policy_server.py)"
                    ),
                })
            }
        }
        let actions = reply.actions.ok_or_else(|| RemoteError::Reply {
            url,
            why: format!("the reply has no {key:?}"),
        })?;
        Ok(ChunkReply {
            values: actions.to_f64(),
            shape: actions.shape.clone(),
            server_ns: reply
                .infer_ms
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map(|ms| (ms * 1e6) as u64),
        })
    }

    fn disconnect(self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_key_header_is_sensitive() {
        let v = api_key_header("s3cret").unwrap();
        assert!(v.is_sensitive());
        assert!(!format!("{v:?}").contains("s3cret"), "{v:?}");
        assert!(api_key_header("bad\ntoken").is_none());
    }
}
