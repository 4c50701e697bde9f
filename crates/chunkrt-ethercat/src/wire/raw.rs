//! The master's wire on a network interface: the shared AF_PACKET socket
//! (`chunkrt-afpacket`), EtherType 0x88A4 only, with this crate's error wording.

use super::{Wire, WireError};
use chunkrt_afpacket::{PacketSocket, ETHERTYPE_ECAT};
use std::io;
use std::time::Duration;

/// Why the socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No interface of that name.
    #[error(
        "network interface `{interface}` does not exist (interfaces here: {available}); \
         set ethercat.interface to the port the drives are plugged into"
    )]
    NoSuchInterface {
        /// The name asked for.
        interface: String,
        /// The interfaces that exist.
        available: String,
    },
    /// Not allowed to open a raw socket.
    #[error(
        "opening a raw socket on `{interface}` needs CAP_NET_RAW: run as root, or \
         `sudo setcap cap_net_raw,cap_sys_nice,cap_ipc_lock+ep <path to chunkrt>` ({source})"
    )]
    Permission {
        /// The interface.
        interface: String,
        /// The OS error.
        source: io::Error,
    },
    /// Any other socket error.
    #[error("raw socket on `{interface}`: {op}: {source}")]
    Socket {
        /// The interface.
        interface: String,
        /// The failing call.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// An open raw socket on the drives' interface (the shared [`PacketSocket`]).
pub struct RawSocket {
    socket: PacketSocket,
}

impl From<chunkrt_afpacket::OpenError> for OpenError {
    fn from(e: chunkrt_afpacket::OpenError) -> OpenError {
        use chunkrt_afpacket::OpenError as E;
        match e {
            E::NoSuchInterface {
                interface,
                available,
            } => OpenError::NoSuchInterface {
                interface,
                available,
            },
            E::Permission { interface, source } => OpenError::Permission { interface, source },
            E::Socket {
                interface,
                op,
                source,
            } => OpenError::Socket {
                interface,
                op,
                source,
            },
        }
    }
}

impl RawSocket {
    /// Opens and binds a raw socket on `interface` for EtherCAT frames.
    pub fn open(interface: &str) -> Result<RawSocket, OpenError> {
        Ok(RawSocket {
            socket: PacketSocket::open(interface, ETHERTYPE_ECAT)?,
        })
    }
}

fn wire_error(e: chunkrt_afpacket::IoError) -> WireError {
    WireError { errno: e.errno() }
}

impl Wire for RawSocket {
    fn send(&mut self, frame: &[u8]) -> Result<(), WireError> {
        self.socket.send(frame).map_err(wire_error)
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize, WireError> {
        self.socket.recv(buf, timeout).map_err(wire_error)
    }

    fn describe(&self) -> String {
        format!("interface {}", self.socket.interface())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interface_is_named_with_the_ones_that_exist() {
        let err = RawSocket::open("nosuchif0").err().expect("must fail");
        let msg = err.to_string();
        assert!(msg.contains("`nosuchif0` does not exist"), "{msg}");
        assert!(msg.contains("ethercat.interface"), "{msg}");
        assert!(msg.contains("lo"), "lists interfaces: {msg}");
    }
}
