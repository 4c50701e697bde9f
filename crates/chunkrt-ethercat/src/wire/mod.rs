//! The byte pipe under the master: a raw socket on a network interface, or the in-process
//! simulated chain. Both are driven from the calling thread (see `bus`), so a cycle's frame
//! goes out and its reply comes back without a hand-off to another thread.

pub mod raw;
#[cfg(any(test, feature = "sim"))]
pub mod sim;

use std::time::Duration;

/// Largest Ethernet frame the pipe carries.
pub const MAX_FRAME: usize = 1536;

/// An OS error on the wire (`errno`), small and `Copy` for the control thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("wire I/O error (errno {errno})")]
pub struct WireError {
    /// errno.
    pub errno: i32,
}

/// Sends Ethernet frames and waits for replies. Neither method may allocate.
pub trait Wire: Send {
    /// Puts one Ethernet frame on the wire.
    fn send(&mut self, frame: &[u8]) -> Result<(), WireError>;

    /// Waits up to `timeout` for one incoming frame, copies it into `buf` and returns its
    /// length; 0 when nothing came.
    fn recv(&mut self, buf: &mut [u8], timeout: Duration) -> Result<usize, WireError>;

    /// Where the frames go (an interface name, or "in-process simulator").
    fn describe(&self) -> String;
}
