//! Drives without CoE (no mailbox): their PDO mapping is fixed in the SII and the mode can
//! only be set through process data. Bring-up compares the SII mapping with the config,
//! entry for entry and in order, reads 0x6061 before enabling, and refuses with what the
//! drive has, what the config asks and the fix; nothing is left enabled.

mod common;

use chunkrt_config::{Config, PdoEntry, PdoEntry::*};
use chunkrt_core::{Backend, DriveRequest, DriveState, Feedback};
use chunkrt_ecsim::SimConfig;
use common::*;

const RX_CSP: [u32; 3] = [0x6040_0010, 0x607A_0020, 0x6060_0008];
const TX_CSP: [u32; 6] = [
    0x6041_0010,
    0x6064_0020,
    0x606C_0020,
    0x6077_0010,
    0x603F_0010,
    0x6061_0008,
];

/// 7 drives without CoE with the fixed mapping `rx` / `tx`.
fn no_coe(cfg: &Config, rx: &[u32], tx: &[u32]) -> SimConfig {
    let mut s = sim_config(cfg, 7);
    s.drive.coe = false;
    s.drive.rx_pdo = rx.to_vec();
    s.drive.tx_pdo = tx.to_vec();
    s
}

fn with_pdo(write: bool, rx: &[PdoEntry], tx: &[PdoEntry]) -> Config {
    let mut cfg = config();
    let pdo = &mut cfg.ethercat.as_mut().unwrap().pdo;
    pdo.write = write;
    pdo.rx = rx.to_vec();
    pdo.tx = tx.to_vec();
    cfg
}

fn refused(cfg: &Config, sim: SimConfig) -> String {
    let (mut b, ctl) = backend(cfg, sim);
    let mut fb = Feedback::default();
    let err = b
        .start(t(0, 1.0), &mut fb)
        .expect_err("bring-up must be refused")
        .to_string();
    assert!(
        !any_sim_drive_enabled(&ctl),
        "a drive was left enabled: {err}"
    );
    err
}

fn assert_says(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "`{p}` missing from: {err}");
    }
}

#[test]
fn the_default_lists_against_a_fixed_mapping_are_refused_with_the_drives_lists_and_the_fix() {
    let cfg = config(); // write = true, rx = [controlword, target_position]
    let err = refused(&cfg, no_coe(&cfg, &RX_CSP, &TX_CSP));
    eprintln!("{err}");
    assert_says(
        &err,
        &[
            "drive at bus position 0",
            "no CoE mailbox",
            "rx mapping is [\"controlword\", \"target_position\", \"mode_of_operation\"]",
            "ethercat.pdo.rx asks for [\"controlword\", \"target_position\"]",
            "ethercat.pdo.write = false",
            "tx = [\"statusword\", \"position_actual\", \"velocity_actual\", \"torque_actual\", \
             \"error_code\", \"mode_display\"]",
        ],
    );
    assert!(
        !err.contains("did not take the mapping written"),
        "nothing was written: {err}"
    );
}

#[test]
fn a_config_without_mode_of_operation_is_refused_against_a_drive_that_maps_it() {
    // The reviewer's case: write = false, the rx list lacks the mode entry.
    let cfg = with_pdo(
        false,
        &[Controlword, TargetPosition],
        &[
            Statusword,
            PositionActual,
            VelocityActual,
            TorqueActual,
            ErrorCode,
            ModeDisplay,
        ],
    );
    let err = refused(&cfg, no_coe(&cfg, &RX_CSP, &TX_CSP));
    assert_says(
        &err,
        &["rx mapping is", "\"mode_of_operation\"", "asks for"],
    );
}

#[test]
fn the_same_entries_in_another_order_are_refused() {
    let cfg = with_pdo(
        false,
        &[TargetPosition, Controlword, ModeOfOperation],
        &[
            Statusword,
            PositionActual,
            VelocityActual,
            TorqueActual,
            ErrorCode,
            ModeDisplay,
        ],
    );
    let err = refused(&cfg, no_coe(&cfg, &RX_CSP, &TX_CSP));
    assert_says(
        &err,
        &["asks for [\"target_position\", \"controlword\", \"mode_of_operation\"]"],
    );
}

#[test]
fn a_matching_fixed_mapping_comes_up_in_csp_and_follows_commands() {
    let cfg = with_pdo(
        false,
        &[Controlword, TargetPosition, ModeOfOperation],
        &[
            Statusword,
            PositionActual,
            VelocityActual,
            TorqueActual,
            ErrorCode,
            ModeDisplay,
        ],
    );
    let (mut b, ctl) = backend(&cfg, no_coe(&cfg, &RX_CSP, &TX_CSP));
    let fb0 = start(&mut b);
    assert!(fb0.state[..7].iter().all(|s| *s == DriveState::Enabled));
    for i in 0..7 {
        assert_eq!(ctl.network().device(i).unwrap().drive().mode_display(), 8);
    }
    let mut fb = fb0;
    let mut cmd = hold(&fb0, DriveRequest::Track);
    for k in 1..=500u64 {
        cmd.pos_rad[3] = fb0.pos_rad[3] + 0.1 * (k as f64 / 500.0);
        b.exchange(t(k, 1.0), &cmd, &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
    }
    assert!(
        (fb.pos_rad[3] - cmd.pos_rad[3]).abs() < 0.002,
        "the drive moved"
    );
    b.shutdown(t(501, 1.0)).expect("clean shutdown");
}

#[test]
fn a_drive_whose_fixed_mapping_cannot_set_csp_is_refused_by_its_mode_display() {
    // No 0x6060 in the drive's RxPDO: nothing sets CSP; 0x6061 shows it.
    let rx = [0x6040_0010, 0x607A_0020];
    let cfg = with_pdo(
        false,
        &[Controlword, TargetPosition],
        &[
            Statusword,
            PositionActual,
            VelocityActual,
            TorqueActual,
            ErrorCode,
            ModeDisplay,
        ],
    );
    let err = refused(&cfg, no_coe(&cfg, &rx, &TX_CSP));
    assert_says(
        &err,
        &[
            "0x6061) shows 0, not 8 (CSP)",
            "no `mode_of_operation`",
            "nothing can set CSP",
        ],
    );
}

#[test]
fn a_drive_whose_mode_cannot_be_read_is_refused() {
    let tx = [0x6041_0010, 0x6064_0020];
    let cfg = with_pdo(
        false,
        &[Controlword, TargetPosition, ModeOfOperation],
        &[Statusword, PositionActual],
    );
    let err = refused(&cfg, no_coe(&cfg, &RX_CSP, &tx));
    assert_says(&err, &["no `mode_display`", "cannot be read"]);
}
