//! AF_PACKET transport: the simulated chain answers EtherCAT frames on a real interface, e.g.
//! one end of a veth pair inside a network namespace, with the master on the other end.

use crate::config::SimConfig;
use crate::error::EcsimError;
use crate::network::{FrameOutcome, SimNetwork, WireStats, ETHERTYPE_ECAT};
use std::ffi::CString;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// An open, bound raw socket; closed on drop.
struct RawSocket {
    fd: libc::c_int,
    iface: String,
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: `fd` is a socket this struct opened and owns; it is closed exactly once here.
        unsafe {
            libc::close(self.fd);
        }
    }
}

impl RawSocket {
    fn open(iface: &str) -> Result<Self, EcsimError> {
        let name =
            CString::new(iface).map_err(|_| EcsimError::InterfaceNotFound(iface.to_string()))?;
        // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(EcsimError::InterfaceNotFound(iface.to_string()));
        }
        let proto = ETHERTYPE_ECAT.to_be();
        // SAFETY: plain socket(2) call with constant arguments; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, libc::c_int::from(proto)) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => EcsimError::Permission {
                    iface: iface.to_string(),
                    source: e,
                },
                _ => EcsimError::Socket {
                    op: "socket",
                    iface: iface.to_string(),
                    source: e,
                },
            });
        }
        let sock = RawSocket {
            fd,
            iface: iface.to_string(),
        };
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid starting value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a fully initialised sockaddr_ll and the length passed matches it.
        let rc = unsafe {
            libc::bind(
                sock.fd,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(sock.err("bind"));
        }
        Ok(sock)
    }

    fn err(&self, op: &'static str) -> EcsimError {
        EcsimError::Socket {
            op,
            iface: self.iface.clone(),
            source: io::Error::last_os_error(),
        }
    }

    /// Wait up to `timeout` for a frame; returns its length, or 0 on timeout. Frames this socket
    /// sent itself (outgoing) are skipped.
    fn recv(&self, buf: &mut [u8], timeout: Duration) -> Result<usize, EcsimError> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(1000) as libc::c_int;
        // SAFETY: `pfd` is a valid pollfd and we pass a count of 1.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(EcsimError::Socket {
                op: "poll",
                iface: self.iface.clone(),
                source: e,
            });
        }
        if rc == 0 {
            return Ok(0);
        }
        // SAFETY: sockaddr_ll is plain old data; zeroed is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` is valid for `buf.len()` bytes, `from`/`from_len` describe a valid
        // sockaddr_ll buffer.
        let n = unsafe {
            libc::recvfrom(
                self.fd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut from_len,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) {
                return Ok(0);
            }
            return Err(EcsimError::Socket {
                op: "recv",
                iface: self.iface.clone(),
                source: e,
            });
        }
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            return Ok(0);
        }
        Ok(n as usize)
    }

    fn send(&self, frame: &[u8]) -> Result<(), EcsimError> {
        // SAFETY: `frame` is valid for `frame.len()` bytes.
        let n = unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(self.err("send"));
        }
        Ok(())
    }
}

/// Run `drives` simulated drives on `iface` until `stop` is set. `config` is an optional TOML
/// file (see [`SimConfig`]); its `drives` key is overridden by `drives`. This is what
/// `chunkrt ecsim --iface IF --drives N [--config FILE]` calls.
pub fn run_af_packet(
    iface: &str,
    drives: usize,
    config: Option<&Path>,
    stop: &AtomicBool,
) -> Result<(), EcsimError> {
    let mut cfg = match config {
        Some(p) => SimConfig::load(p)?,
        None => SimConfig::default(),
    };
    cfg.drives = drives;
    let net = SimNetwork::new(cfg)?;
    run_af_packet_with(iface, net, stop).map(|_| ())
}

/// Serve `net` on `iface` until `stop` is set; returns the wire counters.
pub fn run_af_packet_with(
    iface: &str,
    mut net: SimNetwork,
    stop: &AtomicBool,
) -> Result<WireStats, EcsimError> {
    let sock = RawSocket::open(iface)?;
    let mut buf = vec![0u8; 2048];
    let mut reply = Vec::with_capacity(2048);
    let mut delayed: Vec<(Instant, Vec<u8>)> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        let mut i = 0;
        while i < delayed.len() {
            if delayed[i].0 <= now {
                let (_, f) = delayed.swap_remove(i);
                sock.send(&f)?;
            } else {
                i += 1;
            }
        }
        let wait = delayed
            .iter()
            .map(|(due, _)| due.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_millis(20))
            .min(Duration::from_millis(20));
        let n = sock.recv(&mut buf, wait)?;
        if n == 0 {
            continue;
        }
        match net.process_frame(&buf[..n], &mut reply) {
            FrameOutcome::Reply { delay_ns: 0 } => sock.send(&reply)?,
            FrameOutcome::Reply { delay_ns } => {
                delayed.push((
                    Instant::now() + Duration::from_nanos(delay_ns),
                    reply.clone(),
                ));
            }
            FrameOutcome::NoReply => {}
        }
    }
    Ok(net.stats())
}
