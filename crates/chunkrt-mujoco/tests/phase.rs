//! Issue 39: a transport delay τ in the drive shows in the plant's phase lag from command
//! to position at a frequency f as 360·f·τ on top of the drive loop's own lag.
//!
//! The elbow (joint 4) is commanded a 2 Hz sine of 10 mrad about the start pose on a
//! 1 kHz bus, gravity off (so the loop is linear about the pose), and the phase of the
//! measured position against the command is taken at 2 Hz by a single-bin Fourier
//! transform over whole periods after it settled. The delay-free lag is checked against
//! the cascade's analytic closed loop (P position loop, velocity loop tuned for the
//! joint's inertia, the bus's hold), each delayed lag against it plus 360·f·τ.

mod common;

use std::f64::consts::PI;

use chunkrt_core::Backend;
use common::{cycle, panda_at, started, track};

const START: [f64; 7] = [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8];
const F_HZ: f64 = 2.0;
const JOINT: usize = 3;

/// The lag in degrees (positive: the position behind the command) of joint 4 at F_HZ,
/// with the drive's transport delay `delay_ms`.
fn lag_deg(delay_ms: f64) -> f64 {
    let mut p = panda_at(&START);
    p.gravity = false;
    p.transport_delay_ns = (delay_ms * 1e6) as u64;
    let (mut arm, mut fb) = started(p);
    let (settle, periods) = (2_000u64, 8u64);
    let per_period = (1_000.0 / F_HZ) as u64;
    let (mut u, mut y) = ((0.0, 0.0), (0.0, 0.0));
    for k in 1..=settle + periods * per_period {
        let t = k as f64 * 1e-3;
        let mut q = START;
        q[JOINT] += 0.01 * (2.0 * PI * F_HZ * t).sin();
        arm.exchange(cycle(k), &track(&q), &mut fb).unwrap();
        if k > settle {
            // The command sent at exchange k and the position measured at exchange k,
            // both at time t.
            let (c, s) = ((2.0 * PI * F_HZ * t).cos(), (2.0 * PI * F_HZ * t).sin());
            let du = q[JOINT] - START[JOINT];
            let dy = fb.pos_rad[JOINT] - START[JOINT];
            u = (u.0 + du * c, u.1 + du * s);
            y = (y.0 + dy * c, y.1 + dy * s);
        }
    }
    // With X = sum x cos(wt) + j sum x sin(wt), x = sin(wt - lag) has the angle
    // 90 deg + lag: the lag is y's angle less u's.
    let angle = |z: (f64, f64)| z.1.atan2(z.0);
    let lag = (angle(y) - angle(u)).to_degrees();
    (lag + 540.0).rem_euclid(360.0) - 180.0
}

/// The delay-free lag the cascade gives: P position loop `kp` around a velocity loop of
/// bandwidth `kv` (first order, its integral corner far below it), after the bus's
/// zero-order hold (half a 1 ms period).
fn analytic_lag_deg(kp: f64, kv: f64) -> f64 {
    let w = 2.0 * PI * F_HZ;
    // T(jw) = kp / (kp + jw - w^2 / kv)
    let loop_lag = w.atan2(kp - w * w / kv);
    (loop_lag + w * 0.5e-3).to_degrees()
}

#[test]
fn a_transport_delay_adds_360_f_tau_to_the_drive_loops_own_lag() {
    let tuning = *started(panda_at(&START)).0.drive_tuning(JOINT).unwrap();
    let own = lag_deg(0.0);
    let model = analytic_lag_deg(tuning.kp_pos, tuning.kv_rad_s);
    println!("delay-free lag at {F_HZ} Hz: {own:.3} deg (cascade model {model:.3} deg)");
    // The issue asks for 2 deg. Measured: the loop's own lag 0.074 deg from the model
    // (which leaves out the velocity integral, the encoder's filter and the arm's
    // coupling), gated at 0.25 deg; the delayed lags agree with own + 360 f tau to
    // 1e-5 deg (the delay is a whole number of physics steps and the loop is linear
    // here), gated at 0.01 deg, under the 0.09 deg one physics step more would add.
    assert!(
        (own - model).abs() < 0.25,
        "the loop's own lag {own} deg, model {model} deg"
    );
    for delay_ms in [10.0, 25.0] {
        let lag = lag_deg(delay_ms);
        let want = own + 360.0 * F_HZ * delay_ms * 1e-3;
        println!("{delay_ms} ms: lag {lag:.5} deg, 360 f tau + own lag {want:.5} deg");
        assert!(
            (lag - want).abs() < 0.01,
            "with {delay_ms} ms: lag {lag} deg, expected {want} deg"
        );
    }
}
