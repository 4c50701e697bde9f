//! AF_PACKET transport: the simulated chain answers EtherCAT frames on a real interface, e.g.
//! one end of a veth pair inside a network namespace, with the master on the other end.

use crate::config::SimConfig;
use crate::error::EcsimError;
use crate::network::{FrameOutcome, SimNetwork, WireStats, ETHERTYPE_ECAT};
use chunkrt_afpacket::PacketSocket;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The shared AF_PACKET socket ([`PacketSocket`]) with ecsim's error wording.
struct RawSocket {
    socket: PacketSocket,
}

impl RawSocket {
    fn open(iface: &str) -> Result<Self, EcsimError> {
        use chunkrt_afpacket::OpenError as E;
        let socket = PacketSocket::open(iface, ETHERTYPE_ECAT).map_err(|e| match e {
            E::NoSuchInterface { interface, .. } => EcsimError::InterfaceNotFound(interface),
            E::Permission { interface, source } => EcsimError::Permission {
                iface: interface,
                source,
            },
            E::Socket {
                interface,
                op,
                source,
            } => EcsimError::Socket {
                op,
                iface: interface,
                source,
            },
        })?;
        Ok(RawSocket { socket })
    }

    fn err(&self, e: chunkrt_afpacket::IoError) -> EcsimError {
        EcsimError::Socket {
            op: e.op,
            iface: self.socket.interface().to_string(),
            source: e.source,
        }
    }

    /// Wait up to `timeout` for a frame; returns its length, or 0 on timeout. Frames this socket
    /// sent itself (outgoing) are skipped.
    fn recv(&self, buf: &mut [u8], timeout: Duration) -> Result<usize, EcsimError> {
        self.socket.recv(buf, timeout).map_err(|e| self.err(e))
    }

    fn send(&self, frame: &[u8]) -> Result<(), EcsimError> {
        self.socket.send(frame).map_err(|e| self.err(e))
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
