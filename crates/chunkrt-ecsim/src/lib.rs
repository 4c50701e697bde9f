//! chunkrt-ecsim: the other end of the EtherCAT wire, for testing without hardware.
//!
//! A [`SimNetwork`] is a line of simulated CiA 402 servo drives. Each drive has an ESC model
//! (register file, auto-increment / configured / broadcast / logical addressing, several PDUs
//! per frame, working counters, sync managers, FMMUs, SII EEPROM, DC registers, AL state
//! machine), a CoE mailbox with expedited and single-frame SDO transfers, an object dictionary
//! with remappable PDOs, and a CSP drive with its motor. Faults are injected from a seeded
//! [`SimConfig`].
//!
//! Two transports put it on a wire:
//! - [`spawn_in_process`]: runs on ethercrab's `PduTx`/`PduRx` hooks in a thread, so
//!   `cargo test` drives the real master against simulated drives without root;
//! - [`run_af_packet`]: a raw socket on a named interface (e.g. one end of a veth pair inside a
//!   network namespace), for `chunkrt ecsim --iface IF --drives N [--config FILE]`.

#![deny(missing_docs)]

pub mod cia402;
pub mod coe;
pub mod config;
pub mod device;
pub mod error;
pub mod esc;
pub mod network;
pub mod od;
pub mod pdo;
pub mod sii;
pub mod transport;

pub use config::{ClockMode, DriveParams, SimConfig};
pub use error::EcsimError;
pub use network::{FrameOutcome, SimNetwork, WireStats};
pub use transport::af_packet::{run_af_packet, run_af_packet_with};
pub use transport::in_process::{spawn_in_process, SimHandle};

/// Most drives one simulated chain may hold.
pub const MAX_DRIVES: usize = 64;
