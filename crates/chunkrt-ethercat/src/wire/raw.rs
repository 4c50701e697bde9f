//! The master's wire on a network interface: the shared AF_PACKET socket
//! (`chunkrt-afpacket`), EtherType 0x88A4 only, with this crate's error wording.

use super::{Wire, WireError};
use chunkrt_afpacket::{PacketSocket, ETHERTYPE_ECAT};
use std::time::Duration;

/// Why the socket could not be opened: the socket's own error (which names the
/// interface and the OS error) and what to do about it on a controller.
#[derive(Debug, thiserror::Error)]
#[error("{socket}{}", fix(.socket))]
pub struct OpenError {
    socket: chunkrt_afpacket::OpenError,
}

impl From<chunkrt_afpacket::OpenError> for OpenError {
    fn from(socket: chunkrt_afpacket::OpenError) -> OpenError {
        OpenError { socket }
    }
}

impl OpenError {
    /// The socket's error.
    pub fn socket(&self) -> &chunkrt_afpacket::OpenError {
        &self.socket
    }
}

/// What to do about an open that failed.
fn fix(e: &chunkrt_afpacket::OpenError) -> &'static str {
    use chunkrt_afpacket::OpenError as E;
    match e {
        E::NoSuchInterface { .. } => {
            "; set ethercat.interface to the port the drives are plugged into"
        }
        E::Permission { .. } => {
            ": run as root, or `sudo setcap cap_net_raw,cap_sys_nice,cap_ipc_lock+ep <path to chunkrt>`"
        }
        E::Socket { .. } => "",
    }
}

/// An open raw socket on the drives' interface (the shared [`PacketSocket`]).
pub struct RawSocket {
    socket: PacketSocket,
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

    #[test]
    fn a_refused_socket_names_the_capability_and_the_fix() {
        let err = OpenError::from(chunkrt_afpacket::OpenError::Permission {
            interface: "eth1".into(),
            source: std::io::Error::from_raw_os_error(libc_eperm()),
        });
        let msg = err.to_string();
        assert!(msg.contains("`eth1` needs CAP_NET_RAW"), "{msg}");
        assert!(
            msg.contains("run as root, or `sudo setcap cap_net_raw"),
            "{msg}"
        );
    }

    /// EPERM on Linux (no libc dependency for one constant).
    fn libc_eperm() -> i32 {
        1
    }
}
