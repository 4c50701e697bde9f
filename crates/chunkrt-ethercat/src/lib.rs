//! chunkrt-ethercat: the arm's host controller over EtherCAT.
//!
//! [`EthercatBackend`] implements `chunkrt_core::Backend` on `ethercrab` for a group of
//! CiA 402 servo drives in Cyclic Synchronous Position mode: bring-up (bus scan, identity
//! check, PDO mapping and mode 8 over CoE, SAFE-OP, OP, enable with target = actual), one
//! process-data frame per control cycle driven from the control thread itself (see
//! [`bus`]), typed per-cycle errors, and quick stop + disable + OP -> INIT at shutdown.
//!
//! Two wires: [`EthercatBackend::open`] takes a raw socket on a network interface (root
//! or CAP_NET_RAW); `EthercatBackend::simulated` (feature `sim`, for tests) runs the same
//! master against `chunkrt_ecsim`'s simulated drives in-process, so `cargo test` needs
//! neither.

pub mod backend;
mod bringup;
pub mod bus;
pub mod cia402;
pub mod error;
pub mod group;
pub mod loss;
mod mapping;
pub mod params;
pub mod rejoin;
mod teardown;
pub mod units;
pub mod wire;

pub use backend::{BusStats, EthercatBackend};
pub use error::{BringUpError, DriveId};
pub use params::{DriveParams, EthercatParams, MissingSection, PdoLayout, MAX_DRIVES};
pub use rejoin::RejoinFailure;
pub use units::JointScale;
#[cfg(any(test, feature = "sim"))]
pub use wire::sim::SimControl;
pub use wire::{Wire, WireError};
