//! Errors of the simulator's setup paths (configuration, sockets). Frame processing itself never
//! fails: a malformed frame is forwarded or dropped as a real ESC would, never reported as an error.

use std::path::PathBuf;

/// Everything that can stop the simulator from starting or running.
#[derive(Debug, thiserror::Error)]
pub enum EcsimError {
    /// The fault/parameter configuration file could not be read (missing, not a
    /// regular file, too large, not text).
    #[error("cannot read simulator config {path}: {message}")]
    ConfigRead {
        /// File that was asked for.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The configuration file is not valid TOML or has unknown/mistyped keys.
    #[error("invalid simulator config {path}: {message}")]
    ConfigParse {
        /// File that was parsed (`<string>` when parsed from memory).
        path: PathBuf,
        /// The parser's message, naming the key and line.
        message: String,
    },
    /// The configuration parses but a value is out of range or inconsistent.
    #[error("invalid simulator config: {0}")]
    ConfigValue(String),
    /// The requested number of drives is not supported.
    #[error("drive count {0} is out of range (1..={max})", max = crate::MAX_DRIVES)]
    DriveCount(usize),
    /// The network interface does not exist.
    #[error(
        "network interface {0:?} not found (check `ip link`; inside a netns use `ip netns exec`)"
    )]
    InterfaceNotFound(String),
    /// Opening a raw socket needs root or CAP_NET_RAW.
    #[error("opening a raw socket on {iface:?} needs root or CAP_NET_RAW: {source}")]
    Permission {
        /// Interface being opened.
        iface: String,
        /// The OS error (EPERM/EACCES).
        source: std::io::Error,
    },
    /// Any other socket error, with the operation that failed.
    #[error("raw socket {op} on {iface:?} failed: {source}")]
    Socket {
        /// What was being done (`socket`, `bind`, `recv`, `send`...).
        op: &'static str,
        /// Interface in use.
        iface: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The in-process transport thread could not be started.
    #[error("cannot start the in-process wire thread: {0}")]
    Thread(std::io::Error),
}
