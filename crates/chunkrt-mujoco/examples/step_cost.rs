//! What the MuJoCo arm costs the control thread: the wall-clock time of one
//! `Backend::exchange` per bus period (the physics steps of one period, the drives'
//! loops and the feedback) while the Panda swings every joint, as HDR percentiles.
//!
//!   cargo run --release -p chunkrt-mujoco --example step_cost [-- PERIOD_US SECONDS]
//!
//! Defaults: a 1000 us bus period (8 physics steps of 125 us each), 20 s of simulated
//! time. Prints P50/P99/P99.9/max per bus period and per physics step. Measured on the
//! machine it runs on, beside whatever else runs there: a figure, not a verdict.

use std::path::PathBuf;
use std::time::Instant;

use chunkrt_core::{Backend, Command, DriveRequest, Feedback, MonoTime};
use chunkrt_mujoco::{MujocoArm, MujocoParams};
use hdrhistogram::Histogram;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let period_us: u64 = args.first().map_or(1000, |s| s.parse().expect("PERIOD_US"));
    let seconds: f64 = args.get(1).map_or(20.0, |s| s.parse().expect("SECONDS"));
    let model =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/franka_panda/panda.xml");
    let params = MujocoParams::panda(model);
    let start = params.initial_pos_rad;
    let mut arm = MujocoArm::new(params).expect("the bundled model loads");
    let steps_per_period = (period_us * 1000).div_ceil(arm.step_ns());
    let t0 = MonoTime(1_000_000_000);
    let mut fb = Feedback::default();
    arm.start(t0, &mut fb).expect("start");
    let mut hist = Histogram::<u64>::new_with_bounds(1, 1_000_000_000, 3).expect("histogram");
    let mut cmd = Command {
        dof: 7,
        request: DriveRequest::Track,
        ..Command::default()
    };
    let cycles = (seconds * 1e6 / period_us as f64) as u64;
    for k in 1..=cycles {
        let t = k as f64 * period_us as f64 * 1e-6;
        for (j, q0) in start[..7].iter().enumerate() {
            let w = 2.0 * std::f64::consts::PI * (0.5 + 0.1 * j as f64);
            cmd.pos_rad[j] = q0 + 0.3 * (w * t).sin();
            cmd.vel_rad_s[j] = 0.3 * w * (w * t).cos();
        }
        let now = t0.add_ns(k * period_us * 1000);
        let began = Instant::now();
        arm.exchange(now, &cmd, &mut fb).expect("exchange");
        hist.saturating_record(began.elapsed().as_nanos() as u64);
    }
    println!(
        "MuJoCo Panda, {period_us} us bus period ({steps_per_period} physics steps of {} us), {cycles} periods",
        arm.step_ns() as f64 * 1e-3
    );
    println!("{:>10} {:>14} {:>14}", "", "per period us", "per step us");
    for (name, q) in [("P50", 0.5), ("P99", 0.99), ("P99.9", 0.999), ("max", 1.0)] {
        let ns = hist.value_at_quantile(q) as f64;
        println!(
            "{name:>10} {:>14.1} {:>14.2}",
            ns * 1e-3,
            ns * 1e-3 / steps_per_period as f64
        );
    }
}
