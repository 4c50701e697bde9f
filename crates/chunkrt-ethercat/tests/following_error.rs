//! The drive's own following-error supervision: with `limits.max_following_error_rad` set,
//! bring-up writes it to every CoE drive's 0x6065 (counts) with 0x6066 (ms), and a drive
//! that cannot follow faults with 0x8611 on its own, which `exchange` reports.

mod common;

use chunkrt_config::{Config, PerJoint};
use chunkrt_core::{Backend, BackendError, DriveRequest};
use common::*;

/// Per joint, none of them near a whole count on either scale (see the check below).
const WINDOW_RAD: [f64; 7] = [0.0101, 0.0202, 0.0303, 0.0404, 0.0505, 0.0606, 0.0707];

fn with_window(timeout_ms: Option<f64>) -> Config {
    let mut cfg = config();
    cfg.limits.max_following_error_rad = Some(PerJoint::Each(WINDOW_RAD.to_vec()));
    cfg.ethercat.as_mut().unwrap().following_error_timeout_ms = timeout_ms;
    cfg
}

/// The window in counts, from ecsim's encoder (counts per revolution, direct drive) rather
/// than the config's counts_per_rad or the backend's conversion.
fn expected_counts(rad: f64, counts_per_rev: u32) -> u32 {
    let exact = rad * f64::from(counts_per_rev) / (2.0 * std::f64::consts::PI);
    let frac = exact - exact.floor();
    assert!(
        (0.01..0.99).contains(&frac),
        "{rad} rad is {exact} counts: too near a whole count for the two scales to agree"
    );
    exact.ceil() as u32
}

#[test]
fn bring_up_writes_each_joints_window_and_the_time_out_into_the_drive() {
    let cfg = with_window(Some(7.0));
    let sim = sim_config(&cfg, 7);
    let cpr = sim.drive.counts_per_rev;
    assert_ne!(sim.drive.following_error_timeout_ms, 7, "ecsim's own value");
    let (mut b, ctl) = backend(&cfg, sim);
    start(&mut b);
    {
        let net = ctl.network();
        for (i, d) in cfg.ethercat.as_ref().unwrap().drive.iter().enumerate() {
            let drive = net.device(i).unwrap().drive();
            assert_eq!(
                drive.fe_window,
                expected_counts(WINDOW_RAD[d.joint], cpr),
                "drive {i} (joint {}) 0x6065",
                d.joint
            );
            assert_eq!(drive.fe_timeout_ms, 7, "drive {i} 0x6066");
        }
    }
    b.shutdown(t(1, 1.0)).expect("clean shutdown");
}

#[test]
fn the_time_out_defaults_to_five_bus_periods_and_no_limit_leaves_the_drive_alone() {
    let cfg = with_window(None);
    let (mut b, ctl) = backend(&cfg, sim_config(&cfg, 7));
    start(&mut b);
    let period_ms = cfg.control.period_ms;
    assert_eq!(period_ms, 1.0);
    for i in 0..7 {
        assert_eq!(ctl.network().device(i).unwrap().drive().fe_timeout_ms, 5);
    }
    b.shutdown(t(1, 1.0)).expect("clean shutdown");

    let cfg = config();
    assert!(cfg.limits.max_following_error_rad.is_none());
    let sim = sim_config(&cfg, 7);
    let own = (
        sim.drive.following_error_window,
        sim.drive.following_error_timeout_ms,
    );
    let (mut b, ctl) = backend(&cfg, sim);
    start(&mut b);
    for i in 0..7 {
        let d = ctl.network().device(i).unwrap().drive().clone();
        assert_eq!((d.fe_window, d.fe_timeout_ms), own, "drive {i} untouched");
    }
    b.shutdown(t(1, 1.0)).expect("clean shutdown");
}

#[test]
fn a_drive_that_cannot_keep_up_faults_at_the_configured_window_and_exchange_reports_it() {
    let cfg = with_window(Some(5.0));
    let mut sim = sim_config(&cfg, 7);
    // 0.2 rad/s at most, commanded 1 rad/s: the error grows by about 0.8 rad/s.
    let counts_per_rad = f64::from(sim.drive.counts_per_rev) / (2.0 * std::f64::consts::PI);
    sim.drive.max_velocity_counts_s = 0.2 * counts_per_rad;
    // ecsim's own window (its power-up 0x6065) is far wider than the configured one.
    let own_window_rad = f64::from(sim.drive.following_error_window) / counts_per_rad;
    assert!(own_window_rad > 10.0 * WINDOW_RAD[3]);
    let (mut b, ctl) = backend(&cfg, sim);
    let fb0 = start(&mut b);
    let mut fb = fb0;
    let mut cmd = hold(&fb0, DriveRequest::Track);
    let mut reported = None;
    for k in 1..=400u64 {
        cmd.pos_rad[3] = fb0.pos_rad[3] + 1.0 * k as f64 * 1e-3;
        match b.exchange(t(k, 1.0), &cmd, &mut fb) {
            Ok(()) => {}
            Err(e) => {
                reported = Some((k, e, cmd.pos_rad[3] - fb.pos_rad[3]));
                break;
            }
        }
    }
    let (k, e, lag_rad) = reported.expect("the lagging drive faulted within 400 cycles");
    eprintln!("fault reported at cycle {k}, lag {lag_rad:.4} rad: {e}");
    assert_eq!(
        e,
        BackendError::DriveFault {
            joint: 3,
            code: 0x8611
        }
    );
    // Past the configured window, for about the time out, long before ecsim's own window:
    // 0x8611 came from what bring-up wrote.
    assert!(lag_rad > WINDOW_RAD[3], "lag {lag_rad}");
    assert!(lag_rad < WINDOW_RAD[3] + 0.8 * 0.020, "lag {lag_rad}");
    let net = ctl.network();
    let d = net.device(3).unwrap().drive();
    assert_eq!(d.error_code(), 0x8611);
    assert_eq!(d.statusword() & 0x08, 0x08, "fault bit");
    assert_ne!(d.statusword() & 0x2000, 0, "following error bit");
    for i in [0, 1, 2, 4, 5, 6] {
        assert_eq!(net.device(i).unwrap().drive().error_code(), 0, "drive {i}");
    }
}
