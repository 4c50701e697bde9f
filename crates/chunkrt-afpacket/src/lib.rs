//! An AF_PACKET raw socket bound to one network interface and one EtherType.
//!
//! The EtherCAT master (`chunkrt-ethercat`'s raw wire) and the simulated drives
//! (`chunkrt ecsim` on the other end of a veth pair) both exchange Ethernet frames of
//! EtherType 0x88A4 on a named interface; this is the one copy of that code. The
//! crates that use it keep their own error wording: [`OpenError`] carries the facts.
//!
//! Hand-written on `libc` rather than through a socket crate: `socket2` and `nix` would
//! still leave the `sockaddr_ll` set-up and the `PACKET_OUTGOING` filter to us, and the
//! receive path runs on the control thread, where nothing may allocate (an
//! [`std::io::Error`] from `last_os_error` does not).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// EtherCAT's EtherType.
pub const ETHERTYPE_ECAT: u16 = 0x88A4;

/// Why the socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// No interface of that name.
    #[error("network interface `{interface}` does not exist (interfaces here: {available})")]
    NoSuchInterface {
        /// The name asked for.
        interface: String,
        /// The interfaces that exist, from /sys/class/net.
        available: String,
    },
    /// Not allowed to open a raw socket (EPERM/EACCES: needs CAP_NET_RAW).
    #[error("opening a raw socket on `{interface}` needs CAP_NET_RAW ({source})")]
    Permission {
        /// The interface.
        interface: String,
        /// The OS error.
        source: io::Error,
    },
    /// Any other error while opening.
    #[error("raw socket on `{interface}`: {op}: {source}")]
    Socket {
        /// The interface.
        interface: String,
        /// The failing call (`socket`, `bind`).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// A failed send or receive: the call and the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{op}: {source}")]
pub struct IoError {
    /// The failing call (`send`, `ppoll`, `recvfrom`).
    pub op: &'static str,
    /// The OS error.
    pub source: io::Error,
}

impl IoError {
    fn last(op: &'static str) -> IoError {
        IoError {
            op,
            source: io::Error::last_os_error(),
        }
    }

    /// The OS error number (0 if there is none).
    pub fn errno(&self) -> i32 {
        self.source.raw_os_error().unwrap_or(0)
    }
}

/// An open raw socket bound to one interface and one EtherType; closed on drop.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    interface: String,
}

/// The interfaces in /sys/class/net, sorted and comma-separated ("none found" if none).
pub fn interfaces() -> String {
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

impl PacketSocket {
    /// Opens a raw socket for frames of `ethertype` and binds it to `interface`. Frames
    /// the socket sends itself are not received back (`PACKET_IGNORE_OUTGOING` where
    /// the kernel has it, Linux >= 4.20; [`PacketSocket::recv`] skips them otherwise).
    pub fn open(interface: &str, ethertype: u16) -> Result<PacketSocket, OpenError> {
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
        let proto = ethertype.to_be();
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
        // SAFETY: `fd` is a socket just opened, owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid starting value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = proto;
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a fully initialised sockaddr_ll and the length matches it.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
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
        // Our own outgoing frames would otherwise wake every receive; older kernels
        // refuse the option and still work, recv skips those frames.
        let one: libc::c_int = 1;
        // SAFETY: `one` is a valid c_int and the length passed matches it.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
        Ok(PacketSocket {
            fd,
            interface: interface.to_string(),
        })
    }

    /// The interface the socket is bound to.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// Sends one whole Ethernet frame (destination, source, EtherType, payload).
    pub fn send(&self, frame: &[u8]) -> Result<(), IoError> {
        // SAFETY: `frame` is valid for `frame.len()` bytes.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(IoError::last("send"));
        }
        Ok(())
    }

    /// Waits up to `timeout` for a frame and copies it into `buf`; returns its length,
    /// or 0 when none came in time, a signal interrupted the wait, or the frame was one
    /// this host sent. Allocates nothing. `ppoll`, not `poll`: sub-millisecond
    /// timeouts matter at a 1 ms bus period.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> Result<usize, IoError> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: `pfd` and `ts` are valid for the call; no signal mask is passed.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        if rc < 0 {
            let e = IoError::last("ppoll");
            return if e.errno() == libc::EINTR {
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
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut from_len,
            )
        };
        if n < 0 {
            let e = IoError::last("recvfrom");
            return if e.errno() == libc::EAGAIN || e.errno() == libc::EINTR {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_missing_interface_is_named_with_the_ones_that_exist() {
        let err = PacketSocket::open("nosuchif0", ETHERTYPE_ECAT).expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.contains("`nosuchif0` does not exist"), "{msg}");
        assert!(msg.contains("lo"), "lists the interfaces: {msg}");
        let err = PacketSocket::open("bad\0name", ETHERTYPE_ECAT).expect_err("must fail");
        assert!(matches!(err, OpenError::NoSuchInterface { .. }), "{err}");
    }

    /// A frame sent on the loopback interface by one socket arrives whole at another
    /// bound to the same interface and EtherType; a frame of another EtherType does not.
    #[test]
    fn a_frame_sent_on_loopback_arrives_whole_at_another_socket() {
        let rx = match PacketSocket::open("lo", ETHERTYPE_ECAT) {
            Ok(s) => s,
            Err(OpenError::Permission { .. }) => {
                chunkrt_testkit::missing_prerequisite(
                    "a_frame_sent_on_loopback_arrives_whole_at_another_socket",
                    "a raw socket needs root or CAP_NET_RAW",
                );
                return;
            }
            Err(e) => panic!("opening lo: {e}"),
        };
        let tx = PacketSocket::open("lo", ETHERTYPE_ECAT).expect("second socket on lo");
        let other = PacketSocket::open("lo", 0x88B5).expect("socket for another EtherType");
        let mut frame = vec![0u8; 60];
        frame[..6].copy_from_slice(&[0xff; 6]);
        frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        frame[12..14].copy_from_slice(&ETHERTYPE_ECAT.to_be_bytes());
        for (i, b) in frame[14..].iter_mut().enumerate() {
            *b = i as u8 ^ 0x5a;
        }
        tx.send(&frame).expect("send");
        let mut buf = [0u8; 2048];
        let give_up = Instant::now() + Duration::from_secs(5);
        let n = loop {
            let n = rx.recv(&mut buf, Duration::from_millis(100)).expect("recv");
            if n > 0 || Instant::now() > give_up {
                break n;
            }
        };
        assert_eq!(&buf[..n], &frame[..], "the frame as sent");
        assert_eq!(
            other
                .recv(&mut buf, Duration::from_millis(50))
                .expect("recv"),
            0,
            "a socket bound to another EtherType sees nothing"
        );
        assert_eq!(rx.interface(), "lo");
    }
}
