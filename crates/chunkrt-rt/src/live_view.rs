//! `[live_view]`: the recording's channels, live, over the Foxglove WebSocket protocol,
//! for Foxglove (or any client of the protocol) to open as a live connection.
//!
//! The server is the Foxglove SDK's (`foxglove`, the protocol's own maintained
//! implementation: handshake, advertisement, subscriptions, per-client backlogs) on a
//! tokio runtime of one worker thread kept off the control thread's CPU. Its messages
//! come from the telemetry thread: the recorder hands every message it writes to
//! [`FoxgloveSink`], which forwards each channel's at most `rate_hz` times a second
//! (the events every one) and never waits (the SDK queues per client, dropping what a
//! slow client cannot take). The SDK has no cap on clients, so the configured address
//! is served by a small proxy here that admits at most `max_clients` at once (one more
//! is closed at once) and relays them to the SDK's server on a loopback port of its own.

use chunkrt_config::LiveViewConfig;
use chunkrt_telemetry::recording::LiveSink;
use foxglove::{Context, PartialMetadata, RawChannel, Schema, WebSocketServerHandle};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// How often the idle proxy looks at its stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The live view: the SDK's server, its channels and the proxy in front of it.
pub struct LiveView {
    addr: SocketAddr,
    ctx: Arc<Context>,
    channels: HashMap<&'static str, Arc<RawChannel>>,
    server: Option<WebSocketServerHandle>,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Arc<AtomicBool>,
    proxy: Option<thread::JoinHandle<()>>,
    rate_hz: f64,
}

impl LiveView {
    /// Binds `cfg.listen` and starts the server; `control_cpu`: the CPU its threads
    /// keep off.
    pub fn start(
        cfg: &LiveViewConfig,
        camera: bool,
        control_cpu: Option<usize>,
    ) -> Result<LiveView, String> {
        let listen: SocketAddr = cfg
            .listen
            .parse()
            .map_err(|_| format!("`{}` is not an address", cfg.listen))?;
        let front = TcpListener::bind(listen).map_err(|e| format!("cannot listen there: {e}"))?;
        let addr = front.local_addr().map_err(|e| e.to_string())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("chunkrt-live")
            .on_thread_start(move || {
                if let Some(cpu) = control_cpu {
                    let _ = crate::os::keep_off(cpu);
                }
            })
            .enable_all()
            .build()
            .map_err(|e| format!("the live view's runtime: {e}"))?;
        let ctx = Context::new();
        let mut channels = HashMap::new();
        // The camera's channel only where there is a camera: every channel advertised
        // carries messages.
        let channels_here = chunkrt_telemetry::recording::channels()
            .filter(|(topic, _, _)| camera || *topic != chunkrt_telemetry::recording::TOPIC_IMAGE);
        for (topic, name, schema) in channels_here {
            let ch = ctx
                .channel_builder(topic)
                .message_encoding("json")
                .schema(Schema::new(name, "jsonschema", schema.as_bytes()))
                .build_raw()
                .map_err(|e| format!("channel {topic}: {e}"))?;
            channels.insert(topic, ch);
        }
        let server = ctx
            .websocket_server()
            .name("chunkrt")
            .bind("127.0.0.1", 0)
            .message_backlog_size(256)
            .tokio_runtime(runtime.handle())
            .start_blocking()
            .map_err(|e| format!("the live view's server: {e}"))?;
        let inner: SocketAddr = ([127, 0, 0, 1], server.port()).into();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let max = cfg.max_clients as usize;
        front.set_nonblocking(true).map_err(|e| e.to_string())?;
        let proxy = thread::Builder::new()
            .name("chunkrt-live-proxy".into())
            .spawn(move || {
                if let Some(cpu) = control_cpu {
                    let _ = crate::os::keep_off(cpu);
                }
                admit(&front, inner, max, &flag)
            })
            .map_err(|e| e.to_string())?;
        Ok(LiveView {
            addr,
            ctx,
            channels,
            server: Some(server),
            runtime: Some(runtime),
            stop,
            proxy: Some(proxy),
            rate_hz: cfg.rate_hz,
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the telemetry thread's recorder forwards to.
    pub fn sink(&self) -> FoxgloveSink {
        let mono = crate::os::now().as_ns() as i128;
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        FoxgloveSink {
            channels: self.channels.clone(),
            min_gap_ns: (1e9 / self.rate_hz) as u64,
            last: HashMap::new(),
            wall_minus_mono_ns: wall - mono,
            _ctx: self.ctx.clone(),
        }
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(p) = self.proxy.take() {
            let _ = p.join();
        }
        if let Some(s) = self.server.take() {
            let _ = s.stop();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

/// Accepts clients on `front` and relays each to `inner`, at most `max` at once.
fn admit(front: &TcpListener, inner: SocketAddr, max: usize, stop: &Arc<AtomicBool>) {
    let live = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Acquire) {
        let conn = match front.accept() {
            Ok((c, _)) => c,
            Err(_) => {
                thread::sleep(POLL);
                continue;
            }
        };
        if live.load(Ordering::Acquire) >= max {
            // Over the cap: closed at once.
            let _ = conn.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(upstream) = TcpStream::connect(inner) else {
            continue;
        };
        live.fetch_add(1, Ordering::AcqRel);
        let done = live.clone();
        let stop = stop.clone();
        let spawned = thread::Builder::new()
            .name("chunkrt-live-client".into())
            .spawn(move || {
                relay(conn, upstream, &stop);
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            live.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Copies bytes both ways until either side closes or the view stops.
fn relay(client: TcpStream, upstream: TcpStream, stop: &Arc<AtomicBool>) {
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let _ = client.set_read_timeout(Some(POLL * 4));
    let _ = upstream.set_read_timeout(Some(POLL * 4));
    let flag = stop.clone();
    let down = thread::Builder::new()
        .name("chunkrt-live-down".into())
        .spawn(move || pump(u2, c2, &flag));
    pump(client, upstream, stop);
    if let Ok(h) = down {
        let _ = h.join();
    }
}

/// One direction of a relayed connection, until either side closes or the view stops
/// (reads time out every few polls to look at `stop`); then both sides are shut down,
/// which ends the other direction too.
fn pump(mut from: TcpStream, mut to: TcpStream, stop: &AtomicBool) {
    let mut buf = [0u8; 16 << 10];
    while !stop.load(Ordering::Acquire) {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// The recorder's messages to the live view's channels, each channel's at most
/// `rate_hz` a second (the events every one).
pub struct FoxgloveSink {
    channels: HashMap<&'static str, Arc<RawChannel>>,
    min_gap_ns: u64,
    last: HashMap<&'static str, u64>,
    wall_minus_mono_ns: i128,
    _ctx: Arc<Context>,
}

impl LiveSink for FoxgloveSink {
    fn publish(&mut self, topic: &'static str, log_time_ns: u64, json: &[u8]) {
        let Some(ch) = self.channels.get(topic) else {
            return;
        };
        if !ch.has_sinks() {
            return;
        }
        if topic != chunkrt_telemetry::recording::TOPIC_EVENTS {
            let due = self
                .last
                .get(topic)
                .is_none_or(|l| log_time_ns.saturating_sub(*l) >= self.min_gap_ns);
            if !due {
                return;
            }
            self.last.insert(topic, log_time_ns);
        }
        let wall = (log_time_ns as i128 + self.wall_minus_mono_ns).max(0) as u64;
        ch.log_with_meta(
            json,
            PartialMetadata {
                log_time: Some(wall),
            },
        );
    }
}
