//! Drives with CoE: in PRE-OP, after the (optional) writes, bring-up reads back the PDO
//! assignment (0x1C12/0x1C13) and every assigned PDO's entries, and compares them with
//! `ethercat.pdo.rx` / `tx` entry for entry and in order. Each case here has the same byte
//! lengths as the config or more, so a check of lengths alone lets it through and the
//! backend decodes one object as another.

mod common;

use chunkrt_config::{Config, PdoEntry, PdoEntry::*};
use chunkrt_core::{Backend, DriveRequest, DriveState, Feedback};
use chunkrt_ecsim::SimConfig;
use chunkrt_ethercat::SimControl;
use common::*;

/// ecsim's power-up TxPDO with velocity_actual moved to the end: 14 bytes, as the default.
const TX_VELOCITY_LAST: [u32; 5] = [
    0x6041_0010,
    0x6064_0020,
    0x6077_0010,
    0x603F_0010,
    0x606C_0020,
];
const DEFAULT_TX: [PdoEntry; 5] = [
    Statusword,
    PositionActual,
    VelocityActual,
    TorqueActual,
    ErrorCode,
];

fn with_pdo(write: bool, rx: &[PdoEntry], tx: &[PdoEntry]) -> Config {
    let mut cfg = config();
    let pdo = &mut cfg.ethercat.as_mut().unwrap().pdo;
    pdo.write = write;
    pdo.rx = rx.to_vec();
    pdo.tx = tx.to_vec();
    cfg
}

/// 7 CoE drives with the power-up mapping `rx` / `tx`.
fn powered_up_with(cfg: &Config, rx: &[u32], tx: &[u32]) -> SimConfig {
    let mut s = sim_config(cfg, 7);
    assert!(s.drive.coe);
    s.drive.rx_pdo = rx.to_vec();
    s.drive.tx_pdo = tx.to_vec();
    s
}

fn refused(cfg: &Config, sim: SimConfig) -> (String, SimControl) {
    let (mut b, ctl) = backend(cfg, sim);
    let mut fb = Feedback::default();
    let err = b
        .start(t(0, 1.0), &mut fb)
        .expect_err("bring-up must be refused")
        .to_string();
    eprintln!("{err}");
    assert!(
        !any_sim_drive_enabled(&ctl),
        "a drive was left enabled: {err}"
    );
    {
        let net = ctl.network();
        for i in 0..net.len() {
            assert!(
                net.device(i).unwrap().al_state() <= 2,
                "drive {i} left PRE-OP: {err}"
            );
        }
    }
    (err, ctl)
}

fn assert_says(err: &str, parts: &[&str]) {
    for p in parts {
        assert!(err.contains(p), "`{p}` missing from: {err}");
    }
}

#[test]
fn without_write_a_drive_mapping_the_same_objects_in_another_order_is_refused() {
    let cfg = with_pdo(false, &[Controlword, TargetPosition], &DEFAULT_TX);
    let sim = powered_up_with(&cfg, &[0x6040_0010, 0x607A_0020], &TX_VELOCITY_LAST);
    let (err, _) = refused(&cfg, sim);
    assert_says(
        &err,
        &[
            "drive at bus position 0",
            "tx process data, read back over CoE in PRE-OP (0x1C13 assigns [0x1A00])",
            "is [\"statusword\", \"position_actual\", \"torque_actual\", \"error_code\", \
             \"velocity_actual\"]",
            "ethercat.pdo.tx asks for [\"statusword\", \"position_actual\", \
             \"velocity_actual\", \"torque_actual\", \"error_code\"]",
            "set ethercat.pdo.write = true, or set ethercat.pdo.rx/tx to the drive's lists: \
             rx = [\"controlword\", \"target_position\"], tx = [\"statusword\", \
             \"position_actual\", \"torque_actual\", \"error_code\", \"velocity_actual\"]",
        ],
    );
}

#[test]
fn without_write_a_drive_mapping_an_object_chunkrt_does_not_decode_is_refused() {
    // 0x60F4 (following error actual, 32 bits) where the config has torque and error code
    // (2 x 16 bits): 14 bytes either way.
    let cfg = with_pdo(false, &[Controlword, TargetPosition], &DEFAULT_TX);
    let tx = [0x6041_0010, 0x6064_0020, 0x606C_0020, 0x60F4_0020];
    let sim = powered_up_with(&cfg, &[0x6040_0010, 0x607A_0020], &tx);
    let (err, _) = refused(&cfg, sim);
    assert_says(
        &err,
        &[
            "is [\"statusword\", \"position_actual\", \"velocity_actual\", 0x60f4:00 (32 bits)]",
            "set ethercat.pdo.write = true: the drive's mapping holds objects chunkrt does not \
             decode (0x60f4:00 (32 bits))",
        ],
    );
}

#[test]
fn without_write_a_drive_mapping_more_than_the_config_is_refused_and_its_lists_bring_it_up() {
    let rx = [0x6040_0010, 0x607A_0020, 0x6060_0008];
    let tx: Vec<u32> = DEFAULT_TX.iter().map(|e| e.mapping_word()).collect();
    let cfg = with_pdo(false, &[Controlword, TargetPosition], &DEFAULT_TX);
    let (err, _) = refused(&cfg, powered_up_with(&cfg, &rx, &tx));
    assert_says(
        &err,
        &[
            "rx process data, read back over CoE in PRE-OP (0x1C12 assigns [0x1600])",
            "is [\"controlword\", \"target_position\", \"mode_of_operation\"]",
            "ethercat.pdo.rx asks for [\"controlword\", \"target_position\"]",
            "rx = [\"controlword\", \"target_position\", \"mode_of_operation\"]",
        ],
    );

    // The fix the message gives: the drive's lists, still without writing.
    let cfg = with_pdo(
        false,
        &[Controlword, TargetPosition, ModeOfOperation],
        &DEFAULT_TX,
    );
    let (mut b, ctl) = backend(&cfg, powered_up_with(&cfg, &rx, &tx));
    let fb0 = start(&mut b);
    assert!(fb0.state[..7].iter().all(|s| *s == DriveState::Enabled));
    let mut fb = fb0;
    let mut cmd = hold(&fb0, DriveRequest::Track);
    for k in 1..=300u64 {
        cmd.pos_rad[1] = fb0.pos_rad[1] + 0.05 * (k as f64 / 300.0);
        b.exchange(t(k, 1.0), &cmd, &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
    }
    assert!((fb.pos_rad[1] - cmd.pos_rad[1]).abs() < 0.002);
    b.shutdown(t(301, 1.0)).expect("clean shutdown");
    assert!(!any_sim_drive_enabled(&ctl));
}

#[test]
fn a_drive_that_acknowledges_the_mapping_writes_but_keeps_its_own_is_refused() {
    // The config's tx puts velocity last; the drive keeps its power-up order, so every
    // written entry was acknowledged and none taken.
    let tx_cfg = [
        Statusword,
        PositionActual,
        TorqueActual,
        ErrorCode,
        VelocityActual,
    ];
    let cfg = with_pdo(true, &[Controlword, TargetPosition], &tx_cfg);
    let mut sim = sim_config(&cfg, 7);
    sim.drive.pdo_writable = false;
    let (err, _) = refused(&cfg, sim);
    assert_says(
        &err,
        &[
            "drive at bus position 0",
            "tx process data, read back over CoE in PRE-OP",
            "the drive did not take the mapping written to 0x1600/0x1A00 (it reads back \
             rx = [\"controlword\", \"target_position\"], tx = [\"statusword\", \
             \"position_actual\", \"velocity_actual\", \"torque_actual\", \"error_code\"])",
        ],
    );
    assert!(!err.contains("set ethercat.pdo.write = true"), "{err}");
}

#[test]
fn a_drive_that_takes_the_writes_comes_up_with_the_written_mapping() {
    // The same config against a drive that takes the writes: the read-back agrees.
    let tx_cfg = [
        Statusword,
        PositionActual,
        TorqueActual,
        ErrorCode,
        VelocityActual,
    ];
    let cfg = with_pdo(true, &[Controlword, TargetPosition], &tx_cfg);
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    let fb0 = start(&mut b);
    assert!(fb0.state[..7].iter().all(|s| *s == DriveState::Enabled));
    let mut fb = fb0;
    let mut cmd = hold(&fb0, DriveRequest::Track);
    for k in 1..=300u64 {
        cmd.pos_rad[4] = fb0.pos_rad[4] + 0.05 * (k as f64 / 300.0);
        b.exchange(t(k, 1.0), &cmd, &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
    }
    // Velocity decoded from the end of the image: the drive's own 0x606C.
    let v = ctl.network().device(4).unwrap().drive().velocity();
    let scale = cfg.ethercat.as_ref().unwrap().drive[4].counts_per_rad;
    assert!(v != 0, "joint 4 moving");
    assert!(
        (fb.vel_rad_s[4] - f64::from(v) / scale).abs() < 0.05,
        "{} vs {}",
        fb.vel_rad_s[4],
        f64::from(v) / scale
    );
    b.shutdown(t(301, 1.0)).expect("clean shutdown");
}
