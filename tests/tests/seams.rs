//! Chunks arriving with random lateness (0-40 ms injected inference delay) from the
//! bundled stochastic flow policy: with the seam blend the executor's output has no
//! position step at any seam and every executed command stays within the limits;
//! with the blend switched off (newest chunk wins at once) the steps are there.

use chunkrt_config::Config;
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_tests::faulty::Logged;
use chunkrt_tests::repo_root;
use std::time::Duration;

fn late_chunks_config(blend_ms: f64) -> Option<Config> {
    let dir = repo_root().join("rt-config");
    let text = std::fs::read_to_string(dir.join("sim.toml")).unwrap()
        + "\n[inject]\nseed = 11\ninference_delay = { kind = \"uniform\", min_ms = 0.0, max_ms = 40.0 }\n";
    let mut cfg = Config::parse_str(&text, &dir.join("sim.toml")).unwrap();
    cfg.base_dir = dir;
    cfg.executor.blend_ms = blend_ms;
    cfg.control.cpu = -1;
    cfg.inference.cpu = -1;
    cfg.telemetry.status_interval_ms = 0.0;
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite("seams", &e.to_string());
        return None;
    }
    Some(cfg)
}

struct Seams {
    pos: f64,
    vel: f64,
    seams: f64,
}

fn run(blend_ms: f64) -> Option<Seams> {
    let cfg = late_chunks_config(blend_ms)?;
    let (backend, log) =
        Logged::new(chunkrt_sim::SimArm::new(chunkrt_rt::build::sim_params(&cfg)).unwrap());
    let policy = chunkrt_rt::build::policy(&cfg).unwrap();
    let opts = RunOptions {
        duration: Some(Duration::from_secs(6)),
        ..RunOptions::default()
    };
    let report = Runtime::with_parts(&cfg, Box::new(backend), policy)
        .run(&opts)
        .unwrap()
        .report;
    assert!(report.counters["chunks_used"] > 50, "{:?}", report.counters);
    // Whatever the seams, the commands the drives got respect the limits.
    let seen = log.lock().unwrap();
    chunkrt_tests::faulty::check_commands(
        seen.iter().map(|e| &e.seen.cmd),
        &cfg.joint_limits(),
        cfg.period_ns(),
    )
    .unwrap();
    Some(Seams {
        pos: report.seam["seam_max_pos_step_rad"],
        vel: report.seam["seam_max_vel_step_rad_s"],
        seams: report.seam["seam_count"],
    })
}

#[test]
fn late_chunks_splice_without_a_step_with_blending_and_with_one_without() {
    let Some(blended) = run(40.0) else { return };
    let Some(raw) = run(0.0) else { return };
    eprintln!(
        "seams: blended {} seams, max pos step {:.6} rad, vel step {:.4} rad/s; \
         newest-wins {} seams, max pos step {:.6} rad, vel step {:.4} rad/s",
        blended.seams, blended.pos, blended.vel, raw.seams, raw.pos, raw.vel
    );
    assert!(blended.seams > 50.0 && raw.seams > 50.0);
    assert!(blended.pos < 1e-9, "blended position step {}", blended.pos);
    assert!(
        raw.pos > 1e-4,
        "newest-wins shows its position jumps: {}",
        raw.pos
    );
}
