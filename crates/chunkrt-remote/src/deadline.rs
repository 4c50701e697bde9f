//! A TCP stream whose every read and write ends by one deadline: before each system call
//! the socket's timeout is set to the time *left* until the deadline, and once none is
//! left the call fails with `TimedOut` without touching the socket.
//!
//! A per-read timeout alone is no deadline: tungstenite (and rustls under it) reads until
//! a frame is complete, so a server that sends one byte every half second keeps a read
//! of a timeout of one second going for ever. With the time left as the timeout, the
//! whole exchange (TCP, TLS and WebSocket handshakes, the metadata, one request and its
//! reply) ends by the deadline however the bytes are spread. After a deadline has passed
//! the connection is in an unknown state (a frame half read) and is never used again:
//! the caller drops it and connects anew.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A [`TcpStream`] bounded by a deadline (see the module's documentation).
#[derive(Debug)]
pub struct DeadlineStream {
    tcp: TcpStream,
    deadline: Instant,
}

impl DeadlineStream {
    /// `tcp`, every read and write of which must end by `deadline`.
    pub fn new(tcp: TcpStream, deadline: Instant) -> DeadlineStream {
        DeadlineStream { tcp, deadline }
    }

    /// From now on, every read and write must end by `deadline`.
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    /// The time left, at least 1 µs (a zero timeout means "none" to the socket), or
    /// `TimedOut` when the deadline has passed.
    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the deadline for this exchange has passed",
            ));
        }
        Ok(left.max(Duration::from_micros(1)))
    }
}

/// A socket timeout's expiry (`EAGAIN` from `SO_RCVTIMEO`) as what it is here: the
/// deadline passed.
fn expired(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::WouldBlock {
        io::Error::new(
            io::ErrorKind::TimedOut,
            "the deadline for this exchange has passed",
        )
    } else {
        e
    }
}

impl Read for DeadlineStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.tcp.set_read_timeout(Some(left))?;
        self.tcp.read(buf).map_err(expired)
    }
}

impl Write for DeadlineStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.tcp.set_write_timeout(Some(left))?;
        self.tcp.write(buf).map_err(expired)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A peer that sends one byte every 20 ms, 200 of them (4 s in all); how many it
    /// has sent.
    fn dribbler() -> (TcpStream, Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let sent = Arc::new(AtomicUsize::new(0));
        let count = sent.clone();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            for _ in 0..200 {
                if s.write_all(b"x").is_err() {
                    return;
                }
                count.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        (TcpStream::connect(addr).unwrap(), sent)
    }

    #[test]
    fn a_dribbling_peer_cannot_stretch_a_read_past_the_deadline() {
        let (tcp, sent) = dribbler();
        // A read of 200 bytes in one go (as a frame's payload is read), bounded by a
        // deadline 200 ms away: each byte comes well within any per-read timeout.
        let mut s = DeadlineStream::new(tcp, Instant::now() + Duration::from_millis(200));
        let mut buf = [0u8; 200];
        let e = s.read_exact(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        // The read ended while the peer was still sending (a hang detector, not a
        // timing claim: the peer needs 4 s for all of it).
        let n = sent.load(Ordering::SeqCst);
        assert!(n < 200, "the read lasted until the peer sent all {n} bytes");
        // Past the deadline nothing touches the socket.
        let e = s.read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let e = s.write(b"y").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }
}
