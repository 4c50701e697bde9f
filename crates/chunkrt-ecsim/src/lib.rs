//! chunkrt-ecsim: the other end of the EtherCAT wire, for testing without hardware.
//!
//! A [`SimNetwork`] is a line of simulated CiA 402 servo drives. Each drive has an ESC model
//! (register file, auto-increment / configured / broadcast / logical addressing, several PDUs
//! per frame, working counters, sync managers, FMMUs, SII EEPROM, DC registers, AL state
//! machine), a CoE mailbox with expedited and single-frame SDO transfers, an object dictionary
//! with remappable PDOs, and a CSP drive with its motor. Faults (lost, late and corrupted
//! frames, drive faults, refused transitions, cable cuts, power cycles) are injected from a
//! seeded [`SimConfig`] or by calls on the network.
//!
//! Two transports put it on a wire:
//! - [`spawn_in_process`]: runs on ethercrab's `PduTx`/`PduRx` hooks in a thread, so
//!   `cargo test` drives the real master against simulated drives without root;
//! - [`run_af_packet`]: a raw socket on a named interface (e.g. one end of a veth pair inside a
//!   network namespace), for `chunkrt ecsim --iface IF --drives N [--config FILE]`.
//!
//! In-process use from a test or a backend's test (each master needs its own `static`
//! `PduStorage`, since `try_split` works once per static):
//!
//! ```no_run
//! use chunkrt_ecsim::{spawn_in_process, SimConfig, SimNetwork};
//! use ethercrab::{MainDevice, MainDeviceConfig, PduStorage, Timeouts};
//!
//! static STORAGE: PduStorage<16, { PduStorage::element_size(1100) }> = PduStorage::new();
//!
//! let (tx, rx, pdu_loop) = STORAGE.try_split().expect("split once");
//! // Seven drives, virtual clock: one 1 ms cycle per process-data frame, no sleeping needed.
//! let net = SimNetwork::new(SimConfig::virtual_chain(7))?;
//! let sim = spawn_in_process(tx, rx, net)?;
//! let config = MainDeviceConfig { dc_static_sync_iterations: 100, ..Default::default() };
//! let md = MainDevice::new(pdu_loop, Timeouts::default(), config);
//! // ... md.init_single_group(..), SDO, into_op, tx_rx every cycle ...
//! sim.network().inject_drive_fault(3, 0x2310); // drive 3 faults on its next cycle
//! sim.network().cut_link(5); // drives 5 and 6 disappear
//! sim.network().power_cycle(2, 500_000_000); // drive 2 off for 0.5 s, back in INIT
//! # Ok::<(), chunkrt_ecsim::EcsimError>(())
//! ```

#![deny(missing_docs)]

pub mod catalogue;
pub mod cia402;
pub mod coe;
pub mod config;
pub mod device;
pub mod error;
pub mod esc;
pub mod network;
pub mod od;
pub mod pdo;
pub mod plant;
pub mod sii;
pub mod transport;

pub use config::{ClockMode, DriveParams, SimConfig};
pub use error::EcsimError;
pub use network::{FrameOutcome, Garble, SimNetwork, WireStats};
pub use plant::{ChainPlant, ShaftCommand, ShaftState};
pub use transport::af_packet::{run_af_packet, run_af_packet_with};
pub use transport::in_process::{spawn_in_process, SimHandle};

/// Most drives one simulated chain may hold.
pub const MAX_DRIVES: usize = 64;
