//! The inference thread stalls mid-run: the arm comes to rest without a jump, no
//! chunk older than `max_chunk_age_ms` is ever played, and playback resumes when
//! chunks return. Real threads, real clock, real simulated arm.

use chunkrt_core::{Chunk, InferInfo, Observation, Policy, PolicyError, PolicySpec};
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_tests::faulty::Logged;
use chunkrt_tests::sim_config;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wraps a policy; while `stall` is set every call blocks until it is cleared.
struct Stallable {
    inner: Box<dyn Policy>,
    stall: Arc<AtomicBool>,
}

impl Policy for Stallable {
    fn spec(&self) -> PolicySpec {
        self.inner.spec()
    }
    fn infer(&mut self, obs: &Observation, out: &mut Chunk) -> Result<InferInfo, PolicyError> {
        while self.stall.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.inner.infer(obs, out)
    }
}

fn mode_events(report: &chunkrt_telemetry::Report) -> Vec<(String, String, f64)> {
    report
        .events
        .iter()
        .filter(|e| e["event"] == "mode")
        .map(|e| {
            (
                e["to"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap().to_string(),
                e["t_s"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_stalled_policy_brings_the_arm_to_rest_smoothly_and_playback_resumes() {
    let cfg = sim_config(|c| {
        c.executor.max_chunk_age_ms = 150.0;
        c.executor.safe_stop_after_ms = 1000.0;
    });
    let (backend, log) =
        Logged::new(chunkrt_sim::SimArm::new(chunkrt_rt::build::sim_params(&cfg)).unwrap());
    let stall = Arc::new(AtomicBool::new(false));
    let policy = Stallable {
        inner: chunkrt_rt::build::policy(&cfg).unwrap(),
        stall: stall.clone(),
    };
    let runtime = Runtime::with_parts(&cfg, Box::new(backend), Box::new(policy));
    let stall_ctl = stall.clone();
    // Stall from 1.5 s to 4.0 s: longer than safe_stop_after, so the whole ladder runs.
    let t0 = Instant::now();
    let driver = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500).saturating_sub(t0.elapsed()));
        stall_ctl.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(2500));
        stall_ctl.store(false, Ordering::Relaxed);
    });
    let opts = RunOptions {
        duration: Some(Duration::from_millis(6000)),
        ..RunOptions::default()
    };
    let outcome = runtime.run(&opts).unwrap();
    driver.join().unwrap();
    let report = outcome.report;

    // The ladder ran in order, and playback came back.
    let modes = mode_events(&report);
    let order: Vec<&str> = modes.iter().map(|m| m.0.as_str()).collect();
    let find = |name: &str, after: usize| {
        order[after..]
            .iter()
            .position(|m| *m == name)
            .map(|p| p + after)
    };
    let first_play = find("Playing", 0).expect("played at all");
    let decel = find("Decelerating", first_play).expect("decelerated when chunks stopped");
    let hold = find("Holding", decel).expect("came to rest");
    let safe = find("SafeStop", hold).expect("safe stop after safe_stop_after_ms");
    let resumed = find("Playing", safe).expect("playback resumed when chunks returned");
    assert!(
        modes[decel].1.contains("Expired") || modes[decel].1.contains("Horizon"),
        "{:?}",
        modes[decel]
    );
    assert!(modes[decel].2 > 1.4 && modes[resumed].2 > 3.9, "{modes:?}");

    // No chunk older than max_chunk_age was ever played.
    let age = &report.metrics["chunk_age"];
    assert!(
        age.max <= 150_000_000 + 1_000_000,
        "chunk age max {} ns",
        age.max
    );

    // No position or velocity jump in the commands: every step within what the
    // limits allow over one period (with the period's real length).
    let limits = cfg.joint_limits();
    let seen = log.lock().unwrap();
    assert!(seen.len() > 200);
    chunkrt_tests::faulty::check_commands(
        seen.iter().map(|e| &e.seen.cmd),
        &limits,
        cfg.period_ns(),
    )
    .unwrap();
    // While held, the commanded position does not move.
    let hold_t = modes[hold].2;
    let resume_t = modes[resumed].2;
    let t_first = seen[0].seen.t;
    let held: Vec<_> = seen
        .iter()
        .filter(|s| {
            let t = s.seen.t.diff_ns(t_first) as f64 * 1e-9;
            // Event times count from the runtime's start, exchange times from the
            // first exchange (tens of ms later): keep well inside the held window.
            t > hold_t + 0.2 && t < resume_t - 0.2
        })
        .collect();
    assert!(held.len() > 10);
    for s in &held {
        for j in 0..cfg.control.joints {
            assert!((s.seen.cmd.pos_rad[j] - held[0].seen.cmd.pos_rad[j]).abs() < 1e-9);
        }
    }
    assert_eq!(report.counters["ring_drops"], 0);
}
