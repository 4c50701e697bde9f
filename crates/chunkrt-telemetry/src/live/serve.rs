//! The `[metrics]` endpoint: `GET /metrics` answered with the newest [`Snapshot`] as
//! OpenMetrics text, by one thread of its own at normal priority (never a real-time
//! thread; it reads only the [`LiveSlot`]).
//!
//! Written out on `std::net` rather than an HTTP crate: the surface is one `GET`, and
//! every bound is then this file's own. One connection at a time (a scraper's
//! requests are sequential), each given [`DEADLINE`] in all to send a request of at
//! most [`MAX_REQUEST`] bytes and take its answer, then closed (`Connection: close`);
//! a client that sends nothing or reads nothing costs at most the deadline and never
//! holds the run, whose stop does not wait on this thread. Bound to loopback unless
//! the configuration says `allow_remote`.

use super::{LiveSlot, Snapshot};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// A connection's whole time: its request read and its answer written.
pub const DEADLINE: Duration = Duration::from_secs(2);
/// The longest request (line and headers) read.
pub const MAX_REQUEST: usize = 8 << 10;
/// How often the idle listener looks at its stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The endpoint's thread; stopped (and joined) when dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and starts serving `slot`; its thread runs `on_start` first (the
    /// runtime keeps it off the control thread's CPU there).
    pub fn start(
        addr: SocketAddr,
        slot: Arc<LiveSlot>,
        on_start: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = thread::Builder::new()
            .name("chunkrt-metrics".into())
            .spawn(move || {
                on_start();
                serve(&listener, &slot, &flag)
            })?;
        Ok(MetricsServer {
            addr,
            stop,
            handle: Some(handle),
        })
    }

    /// The address it listens on (the port chosen when the configuration said 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(listener: &TcpListener, slot: &LiveSlot, stop: &AtomicBool) {
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((conn, _)) => {
                let _ = answer(conn, slot);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => thread::sleep(POLL),
            // A connection that failed before it was accepted (reset, out of
            // descriptors): wait a little and go on.
            Err(_) => thread::sleep(POLL),
        }
    }
}

/// Reads the request head (within the deadline and the size cap).
fn read_head(conn: &mut TcpStream, until: Instant) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || head.len() >= MAX_REQUEST {
            break;
        }
        conn.set_read_timeout(Some(left))?;
        let n = conn.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n.min(MAX_REQUEST - head.len())]);
    }
    Ok(head)
}

fn answer(mut conn: TcpStream, slot: &LiveSlot) -> std::io::Result<()> {
    let until = Instant::now() + DEADLINE;
    conn.set_nonblocking(false)?;
    conn.set_write_timeout(Some(DEADLINE))?;
    let head = read_head(&mut conn, until)?;
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let (method, target) = (words.next(), words.next());
    let (status, kind, body) = match (method, target) {
        (Some("GET"), Some("/metrics")) => {
            let snap = slot
                .latest()
                .unwrap_or_else(|| Arc::new(Snapshot::default()));
            (
                "200 OK",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                super::encode::openmetrics(&snap),
            )
        }
        (Some("GET"), Some("/")) => (
            "200 OK",
            "text/plain; charset=utf-8",
            "chunkrt: the run's metrics are at /metrics\n".to_string(),
        ),
        (Some("GET"), Some(_)) => ("404 Not Found", "text/plain", "not found\n".into()),
        _ => (
            "400 Bad Request",
            "text/plain",
            "expected GET /metrics\n".into(),
        ),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(reply.as_bytes())?;
    let _ = conn.shutdown(std::net::Shutdown::Write);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, request: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(request).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn serves_the_newest_snapshot_and_refuses_other_requests() {
        let slot = Arc::new(LiveSlot::default());
        let server =
            MetricsServer::start("127.0.0.1:0".parse().unwrap(), slot.clone(), || {}).unwrap();
        let mut s = Snapshot::default();
        s.counters.insert("cycles".into(), 3);
        slot.publish(s.clone());
        let r = get(server.addr(), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        assert!(r.contains("\nchunkrt_cycles_total 3\n"), "{r}");
        s.counters.insert("cycles".into(), 4);
        slot.publish(s);
        let r = get(server.addr(), b"GET /metrics HTTP/1.0\r\n\r\n");
        assert!(r.contains("\nchunkrt_cycles_total 4\n"), "{r}");
        assert!(get(server.addr(), b"GET /x HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(server.addr(), b"POST /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 400"));
        // A client that connects and sends nothing holds the endpoint at most the
        // deadline: the next request is answered after it.
        let idle = TcpStream::connect(server.addr()).unwrap();
        let r = get(server.addr(), b"GET /metrics HTTP/1.0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        drop(idle);
        // An over-long request is cut at the cap and answered (not read forever).
        let mut long = b"GET /metrics HTTP/1.0\r\nX: ".to_vec();
        long.extend(std::iter::repeat_n(b'a', 64 << 10));
        let mut c = TcpStream::connect(server.addr()).unwrap();
        let _ = c.write_all(&long);
        let mut r = String::new();
        let _ = c.read_to_string(&mut r);
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        drop(server);
    }
}
