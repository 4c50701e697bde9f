//! Issue 14: the runtime loop's phase margin measured on the EtherCAT backend over the
//! in-process simulated chain (ecsim's drives behind ethercrab, no root, no wire):
//! the servo policy's crossover appears where its gain puts it, as it does on the
//! simulated arm and over the veth wire (scripts/test.d/40-ethercat-veth.sh).

use chunkrt_config::{InjectConfig, PolicyKind};
use chunkrt_ecsim::{SimConfig, SimNetwork};
use chunkrt_ethercat::{EthercatBackend, EthercatParams};
use chunkrt_margin::live::{measure_with, LiveSetup, LiveStatus};
use chunkrt_margin::MarginError;
use chunkrt_rt::Runtime;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

#[test]
fn the_runtime_loop_is_measured_on_the_ethercat_backend() {
    let mut cfg = chunkrt_tests::veth_config();
    // The servo policy, k = 2 pi: crossover near 1 Hz, holding where the arm starts.
    cfg.policy.kind = PolicyKind::Servo;
    cfg.policy.gain_per_s = 2.0 * std::f64::consts::PI;
    cfg.policy.goals_rad.clear();
    let mut setup = LiveSetup::new(cfg, "rt-config/arm-ethercat-veth.toml".into());
    setup.window_s = 10.0;
    setup.settle_s = 2.0;
    setup.free_s = 5.0;
    setup.freqs_hz = chunkrt_margin::live::default_freqs(10.0, 0.2, 4.0, 11);
    let dir = std::env::temp_dir().join(format!("chunkrt-margin-ec-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let row = measure_with(
        &setup,
        &InjectConfig::default(),
        &dir,
        Arc::new(AtomicBool::new(false)),
        |cfg| {
            let mut sim = SimConfig::virtual_chain(7);
            sim.cycle_us = (cfg.control.period_ms * 1000.0).round() as u64;
            let mut params =
                EthercatParams::from_config(cfg).map_err(|e| MarginError::Run(e.to_string()))?;
            params.dc_static_sync_iterations = 20;
            params.frame_timeout = Duration::from_millis(20);
            params.frame_late = Duration::from_millis(10);
            params.max_consecutive_lost = 3;
            let net = SimNetwork::new(sim).map_err(|e| MarginError::Run(e.to_string()))?;
            let (backend, _ctl) = EthercatBackend::simulated(params, net);
            let policy =
                chunkrt_rt::build::policy(cfg).map_err(|e| MarginError::Run(e.to_string()))?;
            Ok(Runtime::with_parts(cfg, Box::new(backend), policy))
        },
    )
    .expect("the measurement runs");
    assert_eq!(row.backend, "ethercat");
    match row.status {
        LiveStatus::Margin {
            crossover_hz,
            pm_deg,
            ..
        } => {
            assert!(
                (crossover_hz - 1.0).abs() < 0.2,
                "crossover {crossover_hz} Hz, predicted 1 Hz: {row:?}"
            );
            assert!((60.0..95.0).contains(&pm_deg), "{row:?}");
        }
        // Lost authority (or any other verdict) is no margin: the test names the
        // margin measured on EtherCAT, so it fails then (it used to pass on it).
        ref other => panic!("{other:?}: {row:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
