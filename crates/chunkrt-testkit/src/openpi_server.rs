//! An openpi policy server that misbehaves on purpose, in the test's own process (a
//! thread per connection on `127.0.0.1`, std sockets and tungstenite's server side: it
//! starts in microseconds, unlike a Python server).
//!
//! It speaks the protocol as `scripts/policy_server.py` does (the metadata message on
//! connect, one msgpack reply per request, arrays in msgpack_numpy's layout, the
//! request's `request_id` echoed) and departs from it as [`Behaviour`] says: a reply
//! dribbled a byte at a time, the handshake or the metadata dribbled, a stale reply, two
//! replies to one request, no echo, a reply of many tiny elements, a text error, no
//! model digest, absurd values. It knows nothing of chunkrt's client.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmpv::Value;

/// How the server answers each request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReplyKind {
    /// The chunk, echoing the request's `request_id`.
    Echo,
    /// From the second request on, the reply it made for the request before (its
    /// values and its `request_id`): one request behind.
    Stale,
    /// Two replies to the first request (the second a copy), then one per request.
    Twice,
    /// The chunk without `request_id`.
    NoId,
    /// The chunk, with an array of nils under another key beside it: almost 16 MiB on
    /// the wire (just under the client's default `max_message_mb`), one byte each.
    ManyTinyElements,
    /// A text message (the server's traceback) instead of a reply.
    Error,
}

/// Which part of the exchange is sent one byte at a time, and how fast.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dribble {
    /// Nothing: every message in one write.
    Nothing,
    /// The HTTP response of the WebSocket handshake.
    Handshake(Duration),
    /// The metadata message (padded to a few hundred bytes).
    Metadata(Duration),
    /// Every reply.
    Replies(Duration),
}

/// What the server does.
#[derive(Clone, Debug)]
pub struct Behaviour {
    /// The metadata's `model_sha256` (none: the metadata names no digest).
    pub model_sha256: Option<String>,
    /// The chunk's setpoints and joints.
    pub horizon: usize,
    /// Joints.
    pub d_a: usize,
    /// Every setpoint of the `k`-th reply (from 1) is `value_rad + k * 1e-3`.
    pub value_rad: f64,
    /// How it answers.
    pub reply: ReplyKind,
    /// What it dribbles.
    pub dribble: Dribble,
    /// With [`Dribble::Replies`]: the first reply dribbled (1: every one; 2: all but
    /// the first, which a run's warm-up asks for).
    pub dribble_from: u64,
}

impl Behaviour {
    /// A well-behaved server of `horizon` x `d_a` chunks at `value_rad`, naming
    /// `model_sha256`.
    pub fn new(model_sha256: Option<&str>, horizon: usize, d_a: usize, value_rad: f64) -> Self {
        Behaviour {
            model_sha256: model_sha256.map(str::to_string),
            horizon,
            d_a,
            value_rad,
            reply: ReplyKind::Echo,
            dribble: Dribble::Nothing,
            dribble_from: 1,
        }
    }
}

/// What the server saw and did, across its connections.
#[derive(Debug, Default)]
pub struct Counts {
    /// Connections accepted.
    pub connections: AtomicU64,
    /// Requests read.
    pub requests: AtomicU64,
    /// Dribbles begun.
    pub dribbles_begun: AtomicU64,
    /// Dribbles that sent their last byte.
    pub dribbles_done: AtomicU64,
}

/// A running server (its threads end with their connections; the listener's when the
/// test process ends).
pub struct OpenpiServer {
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// What it saw and did.
    pub counts: Arc<Counts>,
}

/// Starts a server that behaves as `b` says.
pub fn serve(b: Behaviour) -> OpenpiServer {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port on loopback");
    let url = format!("ws://{}", listener.local_addr().unwrap());
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { return };
            c.connections.fetch_add(1, Ordering::SeqCst);
            let (b, c) = (b.clone(), c.clone());
            std::thread::spawn(move || {
                let _ = connection(tcp, &b, &c);
            });
        }
    });
    OpenpiServer { url, counts }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Writes `bytes` one at a time, `period` apart, counted as a dribble.
fn dribble(tcp: &mut TcpStream, bytes: &[u8], period: Duration, c: &Counts) -> Result<()> {
    c.dribbles_begun.fetch_add(1, Ordering::SeqCst);
    for b in bytes {
        tcp.write_all(&[*b])?;
        std::thread::sleep(period);
    }
    c.dribbles_done.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// A server's binary WebSocket frame (unmasked) of `payload`.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x82];
    match payload.len() {
        n if n < 126 => f.push(n as u8),
        n if n < 65_536 => {
            f.push(126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    f.extend_from_slice(payload);
    f
}

fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    rmpv::encode::write_value(&mut out, v).expect("writing to a Vec");
    out
}

/// An f64 array of `shape` in msgpack_numpy's layout (bin keys, as Python's bytes).
fn ndarray(shape: &[usize], values: &[f64]) -> Value {
    let key = |k: &str| Value::Binary(k.as_bytes().to_vec());
    Value::Map(vec![
        (key("__ndarray__"), Value::Boolean(true)),
        (
            key("data"),
            Value::Binary(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ),
        (key("dtype"), Value::from("<f8")),
        (
            key("shape"),
            Value::Array(shape.iter().map(|&d| Value::from(d as u64)).collect()),
        ),
    ])
}

/// The WebSocket handshake's HTTP response, dribbled.
fn dribbled_handshake(mut tcp: TcpStream, period: Duration, c: &Counts) -> Result<TcpStream> {
    let mut key = None;
    let mut rd = BufReader::new(tcp.try_clone()?);
    loop {
        let mut line = String::new();
        if rd.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("sec-websocket-key") {
                key = Some(value.trim().to_string());
            }
        }
    }
    let accept = tungstenite::handshake::derive_accept_key(key.ok_or("no key")?.as_bytes());
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    dribble(&mut tcp, response.as_bytes(), period, c)?;
    Ok(tcp)
}

fn connection(tcp: TcpStream, b: &Behaviour, c: &Counts) -> Result<()> {
    tcp.set_nodelay(true)?;
    let mut ws = match b.dribble {
        Dribble::Handshake(p) => {
            let tcp = dribbled_handshake(tcp, p, c)?;
            tungstenite::WebSocket::from_raw_socket(tcp, tungstenite::protocol::Role::Server, None)
        }
        _ => tungstenite::accept(tcp)?,
    };
    let mut metadata = vec![
        (Value::from("horizon"), Value::from(b.horizon as u64)),
        (Value::from("d_a"), Value::from(b.d_a as u64)),
    ];
    if let Some(sha) = &b.model_sha256 {
        metadata.push((Value::from("model_sha256"), Value::from(sha.as_str())));
    }
    if let Dribble::Metadata(p) = b.dribble {
        metadata.push((Value::from("notes"), Value::from("x".repeat(400))));
        let bytes = frame(&encode(&Value::Map(metadata)));
        dribble(ws.get_mut(), &bytes, p, c)?;
    } else {
        ws.send(tungstenite::Message::Binary(
            encode(&Value::Map(metadata)).into(),
        ))?;
    }
    let mut before: Option<(u64, Vec<u8>)> = None;
    loop {
        let bytes = match ws.read()? {
            tungstenite::Message::Binary(bytes) => bytes,
            tungstenite::Message::Close(_) => return Ok(()),
            _ => continue,
        };
        let k = c.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let request = rmpv::decode::read_value(&mut &bytes[..])?;
        let id = request
            .as_map()
            .and_then(|m| m.iter().find(|(key, _)| key.as_str() == Some("request_id")))
            .and_then(|(_, v)| v.as_u64());
        let reply = reply(b, k, id);
        let sent = match (b.reply, before.take()) {
            (ReplyKind::Stale, Some((_, old))) => old,
            _ => reply.clone(),
        };
        before = Some((k, reply));
        if b.reply == ReplyKind::Error {
            ws.send(tungstenite::Message::Text(
                "Traceback (most recent call last):\n  ValueError: no".into(),
            ))?;
            continue;
        }
        match b.dribble {
            Dribble::Replies(p) if k >= b.dribble_from => {
                dribble(ws.get_mut(), &frame(&sent), p, c)?
            }
            _ => ws.send(tungstenite::Message::Binary(sent.clone().into()))?,
        }
        if b.reply == ReplyKind::Twice && k == 1 {
            ws.send(tungstenite::Message::Binary(sent.into()))?;
        }
    }
}

/// The `k`-th reply's bytes, echoing `id` unless told not to.
fn reply(b: &Behaviour, k: u64, id: Option<u64>) -> Vec<u8> {
    let values = vec![b.value_rad + k as f64 * 1e-3; b.horizon * b.d_a];
    let mut m = vec![
        (
            Value::from("actions"),
            ndarray(&[b.horizon, b.d_a], &values),
        ),
        (
            Value::from("server_timing"),
            Value::Map(vec![(Value::from("infer_ms"), Value::from(1.0))]),
        ),
    ];
    if let (Some(id), false) = (id, b.reply == ReplyKind::NoId) {
        m.push((Value::from("request_id"), Value::from(id)));
    }
    if b.reply != ReplyKind::ManyTinyElements {
        return encode(&Value::Map(m));
    }
    // One more map entry, "junk": an array32 of nils (one byte each) that fills the
    // message to 64 KiB under 16 MiB.
    let n: u32 = (16 << 20) - (64 << 10);
    m.push((Value::from("junk"), Value::Nil));
    let mut bytes = encode(&Value::Map(m));
    bytes.truncate(bytes.len() - 1);
    bytes.push(0xdd);
    bytes.extend_from_slice(&n.to_be_bytes());
    bytes.resize(bytes.len() + n as usize, 0xc0);
    bytes
}
