//! The control loop phase-locked to SYNC0: the whole runtime on the EtherCAT backend
//! with Distributed Clocks, over the in-process simulated chain on the wall clock,
//! whose drives' clocks run 500 ppm fast against the host's (a real crystal is off by
//! up to about 100 ppm; 500 makes a free-running loop slide across a whole 2 ms SYNC0
//! period in 4 s). The oracle is the simulated reference drive's own clock: where in
//! its SYNC0 period each process-data frame arrived, recorded by the simulator, not by
//! the master.

use chunkrt_ecsim::{ClockMode, SimConfig, SimNetwork};
use chunkrt_ethercat::{EthercatBackend, EthercatParams};
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_telemetry::Metric;
use chunkrt_tests::faulty::out_dir;
use std::time::Duration;

const PERIOD_MS: f64 = 2.0;

/// Runs 4 s with the SYNC0 shift at `shift_frac` of the period; returns the phase
/// errors (ns, wrapped into half a period either side) of the frames of the last half
/// of the run by the reference drive's clock, and the report's median |error| in ns.
fn run(shift_frac: f64) -> (Vec<i64>, u64) {
    let mut cfg = chunkrt_tests::veth_config();
    cfg.control.period_ms = PERIOD_MS;
    let period_ns = (PERIOD_MS * 1e6) as i64;
    let shift_ns = (shift_frac * period_ns as f64) as i64;
    {
        let ec = cfg.ethercat.as_mut().expect("ethercat section");
        ec.dc_sync0 = true;
        ec.sync0_shift_us = Some(shift_ns as f64 * 1e-3);
        ec.frame_timeout_ms = Some(1.0);
    }
    cfg.check().expect("the edited config is valid");
    let mut sim = SimConfig::virtual_chain(7);
    sim.clock = ClockMode::Wall;
    sim.dc_drift_ppm = 500.0;
    let mut params = EthercatParams::from_config(&cfg).expect("ethercat section");
    params.dc_static_sync_iterations = 20;
    let net = SimNetwork::new(sim).expect("valid simulator config");
    let (backend, ctl) = EthercatBackend::simulated(params, net);
    let policy = chunkrt_rt::build::policy(&cfg).expect("scripted policy");
    let opts = RunOptions {
        duration: Some(Duration::from_secs(4)),
        out_dir: Some(out_dir(&format!("sync0_phase_{shift_frac}"))),
        ..RunOptions::default()
    };
    let out = Runtime::with_parts(&cfg, Box::new(backend), policy)
        .run(&opts)
        .expect("the run completes");
    let phases = ctl.network().sync_phases_ns().to_vec();
    assert!(
        phases.len() > 1000,
        "{} process-data frames with SYNC0 running",
        phases.len()
    );
    let errors = phases[phases.len() / 2..]
        .iter()
        .map(|&p| (i64::from(p) - shift_ns).rem_euclid(period_ns))
        .map(|e| if e >= period_ns / 2 { e - period_ns } else { e })
        .collect();
    let reported = out.metrics.get(Metric::SyncPhase);
    assert!(
        reported.len() > 1000,
        "the report has {} sync0_phase samples",
        reported.len()
    );
    (errors, reported.value_at_quantile(0.5))
}

fn median_abs(errors: &[i64]) -> u64 {
    let mut a: Vec<u64> = errors.iter().map(|e| e.unsigned_abs()).collect();
    a.sort_unstable();
    a[a.len() / 2]
}

#[test]
fn frames_reach_the_drives_at_sync0_plus_the_shift_though_their_clocks_drift() {
    let period_ns = (PERIOD_MS * 1e6) as u64;
    for shift in [0.25, 0.75] {
        let (errors, reported_p50) = run(shift);
        let median = median_abs(&errors);
        let within_quarter = errors
            .iter()
            .filter(|e| e.unsigned_abs() < period_ns / 4)
            .count() as f64
            / errors.len() as f64;
        eprintln!(
            "shift {shift} T: median |phase error| {:.1} us by the drive's clock, {:.1} us in \
             the report; {:.1} % of frames within T/4",
            median as f64 * 1e-3,
            reported_p50 as f64 * 1e-3,
            within_quarter * 100.0
        );
        // Unlocked (the schedule's phase correction taken out), the frames slide across
        // the period: median |error| 748 us, 18.7 % of them within T/4. Locked, the
        // median is the host's wake jitter (12-97 us here). The share within T/4 is that
        // jitter's tail, 94-99.8 % on a quiet host and 88.1 % once in a fresh-clone run
        // on a noisy one; it is held to 75 %, well clear of unlocked, and the host's
        // tail beyond that is reported, not gated (issue 16: a timing figure gates only
        // through a budget file).
        assert!(
            median < period_ns / 10,
            "shift {shift}: median |phase error| {median} ns, not locked to SYNC0 + shift"
        );
        assert!(
            within_quarter > 0.75,
            "shift {shift}: only {:.1} % of frames within T/4 of SYNC0 + shift",
            within_quarter * 100.0
        );
        // The report's figure is the master's view of the same arrivals.
        assert!(
            reported_p50.abs_diff(median) < 50_000,
            "the report's median {reported_p50} ns against the drive's {median} ns"
        );
    }
}
