//! Shared set-up for the in-process integration tests.

#![allow(dead_code)]

pub mod master;

use chunkrt_ecsim::{spawn_in_process, SimConfig, SimHandle, SimNetwork};
use ethercrab::{MainDevice, MainDeviceConfig, PduStorage, Timeouts};
use std::time::Duration;

/// Frames in flight per master.
pub const MAX_FRAMES: usize = 16;
/// Frame payload size.
pub const MAX_PDU_DATA: usize = PduStorage::element_size(1100);
/// PDU storage type every test declares a `static` of.
pub type Storage = PduStorage<MAX_FRAMES, MAX_PDU_DATA>;

/// Timeouts that keep failing tests short but leave room for a loaded 2-core machine.
pub fn timeouts(state_transition: Duration, pdu: Duration) -> Timeouts {
    Timeouts {
        state_transition,
        pdu,
        eeprom: Duration::from_millis(100),
        wait_loop_delay: Duration::from_millis(0),
        mailbox_echo: Duration::from_millis(500),
        mailbox_response: Duration::from_millis(1000),
    }
}

/// Split `storage`, start the simulated chain on it and build a master with few DC sync
/// iterations.
pub fn start(
    storage: &'static Storage,
    cfg: SimConfig,
    timeouts: Timeouts,
) -> (MainDevice<'static>, SimHandle) {
    let (tx, rx, pdu_loop) = storage
        .try_split()
        .expect("each test has its own PduStorage");
    let net = SimNetwork::new(cfg).expect("valid simulator config");
    let handle = spawn_in_process(tx, rx, net).expect("wire thread");
    let md = MainDevice::new(
        pdu_loop,
        timeouts,
        MainDeviceConfig {
            dc_static_sync_iterations: 50,
            ..MainDeviceConfig::default()
        },
    );
    (md, handle)
}
