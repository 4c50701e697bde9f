//! AF_PACKET raw socket bound to one interface, EtherType 0x88A4 only.

use super::{Wire, WireError};
use std::ffi::CString;
use std::io;
use std::time::Duration;

/// EtherCAT's EtherType.
const ETHERTYPE_ECAT: u16 = 0x88A4;

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

/// An open raw socket; closed on drop.
pub struct RawSocket {
    fd: libc::c_int,
    interface: String,
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: `fd` is a socket this struct opened and owns; closed exactly once here.
        unsafe {
            libc::close(self.fd);
        }
    }
}

/// Names in /sys/class/net, for the error message.
fn interfaces() -> String {
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    if names.is_empty() {
        "none found".into()
    } else {
        names.join(", ")
    }
}

impl RawSocket {
    /// Opens and binds a raw socket on `interface`.
    pub fn open(interface: &str) -> Result<RawSocket, OpenError> {
        let no_such = || OpenError::NoSuchInterface {
            interface: interface.to_string(),
            available: interfaces(),
        };
        let name = CString::new(interface).map_err(|_| no_such())?;
        // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(no_such());
        }
        let proto = ETHERTYPE_ECAT.to_be();
        // SAFETY: plain socket(2) with constant arguments; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, libc::c_int::from(proto)) };
        if fd < 0 {
            let source = io::Error::last_os_error();
            return Err(match source.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => OpenError::Permission {
                    interface: interface.to_string(),
                    source,
                },
                _ => OpenError::Socket {
                    interface: interface.to_string(),
                    op: "socket",
                    source,
                },
            });
        }
        let sock = RawSocket {
            fd,
            interface: interface.to_string(),
        };
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid starting value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a fully initialised sockaddr_ll and the length matches it.
        let rc = unsafe {
            libc::bind(
                sock.fd,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(OpenError::Socket {
                interface: interface.to_string(),
                op: "bind",
                source: io::Error::last_os_error(),
            });
        }
        // Our own outgoing frames would otherwise wake every receive (Linux >= 4.20);
        // older kernels still work, recv skips them.
        let one: libc::c_int = 1;
        // SAFETY: `one` is a valid c_int and the length passed matches it.
        unsafe {
            libc::setsockopt(
                sock.fd,
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        Ok(sock)
    }

    fn errno() -> WireError {
        WireError {
            errno: io::Error::last_os_error().raw_os_error().unwrap_or(0),
        }
    }
}

impl Wire for RawSocket {
    fn send(&mut self, frame: &[u8]) -> Result<(), WireError> {
        // SAFETY: `frame` is valid for `frame.len()` bytes.
        let n = unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(Self::errno());
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize, WireError> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // ppoll, not poll: sub-millisecond timeouts matter at a 1 ms bus period.
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: `pfd` and `ts` are valid for the call; no signal mask is passed.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc < 0 {
            let e = Self::errno();
            return if e.errno == libc::EINTR {
                Ok(0)
            } else {
                Err(e)
            };
        }
        if rc == 0 {
            return Ok(0);
        }
        // SAFETY: sockaddr_ll is plain old data; zeroed is valid.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut from_len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` is valid for `buf.len()` bytes; `from`/`from_len` describe a valid
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
            let e = Self::errno();
            return if e.errno == libc::EAGAIN || e.errno == libc::EINTR {
                Ok(0)
            } else {
                Err(e)
            };
        }
        if from.sll_pkttype == libc::PACKET_OUTGOING {
            return Ok(0);
        }
        Ok(n as usize)
    }

    fn describe(&self) -> String {
        format!("interface {}", self.interface)
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
