//! Padding entries (index 0x0000, any bit length) in a drive's mapping, the way real drives
//! align their PDOs: accepted in a fixed (SII) mapping and in one read back over CoE, and
//! skipped when the process data is packed and unpacked (issue 36). The simulated drives
//! fill padding bytes with 0xA5, so a master that decoded them as an object, or placed the
//! objects after them at the wrong offset, would read garbage.

mod common;

use chunkrt_config::{Config, PdoEntry, PdoEntry::*};
use chunkrt_core::{Backend, DriveRequest, DriveState, Feedback};
use chunkrt_ecsim::SimConfig;
use chunkrt_ethercat::SimControl;
use common::*;

/// controlword, target position, mode of operation, 8 bits of padding.
const RX_PADDED: [u32; 4] = [0x6040_0010, 0x607A_0020, 0x6060_0008, 0x0000_0008];
/// statusword, position actual, mode display, 8 bits of padding.
const TX_PADDED: [u32; 4] = [0x6041_0010, 0x6064_0020, 0x6061_0008, 0x0000_0008];
const RX_LIST: [PdoEntry; 3] = [Controlword, TargetPosition, ModeOfOperation];
const TX_LIST: [PdoEntry; 3] = [Statusword, PositionActual, ModeDisplay];

fn drives(cfg: &Config, coe: bool, rx: &[u32], tx: &[u32]) -> SimConfig {
    let mut s = sim_config(cfg, 7);
    s.drive.coe = coe;
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

/// Brings the chain up, checks every drive in CSP and enabled, then moves joint 3 by
/// 0.1 rad over 500 cycles: the drive follows and the feedback is its true position.
fn comes_up_and_follows(cfg: &Config, sim: SimConfig) {
    let (mut b, ctl) = backend(cfg, sim);
    let mut fb0 = Feedback::default();
    b.start(t(0, 1.0), &mut fb0)
        .unwrap_or_else(|e| panic!("bring-up: {e}"));
    b.enable(t(1, 1.0), &mut fb0)
        .unwrap_or_else(|e| panic!("enable: {e}"));
    assert!(fb0.state[..7].iter().all(|s| *s == DriveState::Enabled));
    for i in 0..7 {
        assert_eq!(ctl.network().device(i).unwrap().drive().mode_display(), 8);
    }
    assert_feedback_is_the_drives(cfg, &ctl, &fb0);
    let mut fb = fb0;
    let mut cmd = hold(&fb0, DriveRequest::Track);
    for k in 1..=500u64 {
        cmd.pos_rad[3] = fb0.pos_rad[3] + 0.1 * (k as f64 / 500.0);
        b.exchange(t(k + 1, 1.0), &cmd, &mut fb)
            .unwrap_or_else(|e| panic!("cycle {k}: {e}"));
        assert!(!fb.held);
    }
    assert!(
        (fb.pos_rad[3] - cmd.pos_rad[3]).abs() < 0.002,
        "the drive moved: {} for {}",
        fb.pos_rad[3],
        cmd.pos_rad[3]
    );
    // The target the drive holds is the command, decoded past the padding.
    let p = params(cfg);
    let target = ctl.network().device(3).unwrap().drive().target;
    assert_eq!(target, p.drives[3].scale.pos_counts(cmd.pos_rad[3]));
    b.shutdown(t(502, 1.0)).expect("clean shutdown");
}

/// The feedback is each drive's position (in counts, within what it moved since its
/// inputs were latched: it stands still here).
fn assert_feedback_is_the_drives(cfg: &Config, ctl: &SimControl, fb: &Feedback) {
    let p = params(cfg);
    let net = ctl.network();
    for (i, d) in p.drives.iter().enumerate() {
        let sim = net.device(i).unwrap().drive().position();
        let got = d.scale.pos_counts(fb.pos_rad[d.joint]);
        assert!(
            (i64::from(got) - i64::from(sim)).abs() < 50,
            "drive {i}: feedback {got} counts, the drive is at {sim}"
        );
    }
}

#[test]
fn a_fixed_mapping_with_padding_comes_up_with_write_false() {
    let cfg = with_pdo(false, &RX_LIST, &TX_LIST);
    comes_up_and_follows(&cfg, drives(&cfg, false, &RX_PADDED, &TX_PADDED));
}

#[test]
fn a_fixed_mapping_with_padding_comes_up_with_write_true() {
    // Nothing can be written without a mailbox: the SII mapping stands and is compared.
    let cfg = with_pdo(true, &RX_LIST, &TX_LIST);
    comes_up_and_follows(&cfg, drives(&cfg, false, &RX_PADDED, &TX_PADDED));
}

#[test]
fn padding_between_objects_shifts_them_and_is_skipped() {
    // Padding first, in the middle and 16 bits wide: every object after it moves.
    let rx = [
        0x0000_0008,
        0x6040_0010,
        0x0000_0010,
        0x607A_0020,
        0x6060_0008,
    ];
    let tx = [
        0x6041_0010,
        0x0000_0008,
        0x6061_0008,
        0x0000_0010,
        0x6064_0020,
        0x606C_0020,
    ];
    let cfg = with_pdo(
        false,
        &RX_LIST,
        &[Statusword, ModeDisplay, PositionActual, VelocityActual],
    );
    comes_up_and_follows(&cfg, drives(&cfg, false, &rx, &tx));
}

#[test]
fn a_coe_mapping_read_back_with_padding_is_accepted_without_writing() {
    // A drive with CoE whose own mapping holds padding, not rewritten (write = false):
    // the read-back is compared without its padding and decoded with it.
    let rx = [0x6040_0010, 0x0000_0010, 0x607A_0020];
    let tx = [0x6041_0010, 0x0000_0008, 0x0000_0008, 0x6064_0020];
    let cfg = with_pdo(
        false,
        &[Controlword, TargetPosition],
        &[Statusword, PositionActual],
    );
    comes_up_and_follows(&cfg, drives(&cfg, true, &rx, &tx));
}

#[test]
fn a_mismatch_beside_padding_names_the_padding_and_suggests_lists_without_it() {
    // The config lacks the mode entries: refused, naming the drive's lists (padding
    // included) and a fix the config can express (the lists without the padding).
    let cfg = with_pdo(
        false,
        &[Controlword, TargetPosition],
        &[Statusword, PositionActual],
    );
    let (mut b, ctl) = backend(&cfg, drives(&cfg, false, &RX_PADDED, &TX_PADDED));
    let err = b
        .start(t(0, 1.0), &mut Feedback::default())
        .expect_err("refused")
        .to_string();
    assert!(!any_sim_drive_enabled(&ctl));
    for part in [
        "rx mapping is [\"controlword\", \"target_position\", \"mode_of_operation\", 8 bits \
         of padding]",
        "set ethercat.pdo.write = false, rx = [\"controlword\", \"target_position\", \
         \"mode_of_operation\"] and tx = [\"statusword\", \"position_actual\", \
         \"mode_display\"]",
    ] {
        assert!(err.contains(part), "`{part}` missing from: {err}");
    }
    assert!(!err.contains("does not decode"), "{err}");
}
