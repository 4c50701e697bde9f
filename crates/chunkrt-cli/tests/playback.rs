//! Seamless playback (issue 13): the default configuration, the bundled flow policy through
//! real ONNX Runtime, the simulated arm, the real binary. Judged only from what the
//! backend received, read back from `recording.mcap` (`chunkrt_tests::playback`, which
//! does not read the gate's own mask or the report):
//!
//! - the gate changes the executor's proposal on at most 1 % of the Playing cycles, and
//!   the P99 of |proposal - command| is at most 1 mrad;
//! - the commands' acceleration and jerk (finite differences over the deadlines) stay at
//!   most half of each joint's limit at P99.9, seams included;
//! - the arm keeps going from goal to goal (the mean goal-to-goal time is bounded).
//!
//! At a 20 ms and a 1 ms bus, and with an injected inference delay drawn uniformly from
//! 0-40 ms. The previous release (a policy that saw positions only, blend 40 ms, one
//! candidate) changed the proposal on 97 % of the cycles (P99 gap 58-75 mrad) and ran
//! the clamped joints at their acceleration limit; its last settings (blend 300 ms, 8
//! candidates) on 19 %, and its arm never came within the goal tolerance.

mod common;

use chunkrt_config::Config;
use chunkrt_tests::playback::{self, Playback};
use common::wait;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Largest share of Playing cycles on which the gate may change the proposal, percent.
const MAX_ALTERED_PCT: f64 = 1.0;
/// Largest P99 of |proposal - command|, rad.
const MAX_GAP_P99_RAD: f64 = 1e-3;
/// Largest P99.9 of the commands' acceleration and jerk, fraction of the limit.
const MAX_DYNAMICS_P999: f64 = 0.5;
/// Largest mean goal-to-goal time, s: the previous release's 2.30 s (26 goals in 60 s at a
/// 20 ms bus, measured the same way; docs/measurements/playback.md) plus 20 %. Measured now:
/// 2.04-2.13 s.
const MAX_MEAN_GOAL_TIME_S: f64 = 2.76;

/// Runs `chunkrt run` on `rt-config/sim.toml` (threads unpinned: tests run beside each
/// other) with `extra` appended to the file, at `bus_ms`, for `duration`; returns the
/// judged figures and the config the run used.
fn run(name: &str, bus_ms: &str, duration: &str, extra: &str) -> Option<(Playback, Config)> {
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite("playback", &e.to_string());
        return None;
    }
    let dir = common::temp_dir("playback", name);
    let text = common::bundled_config_text("sim.toml", extra);
    let config = dir.join("sim.toml");
    std::fs::write(&config, text).unwrap();
    let out: PathBuf = dir.join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args([
            "run",
            "--duration",
            duration,
            "--bus-period-ms",
            bus_ms,
            "--config",
        ])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chunkrt starts");
    let code = wait(&mut child, Duration::from_secs(180));
    assert_eq!(code, Some(0), "chunkrt run exit status ({name})");
    let cfg = Config::load(&config).unwrap();
    let p = playback::judge_run(&cfg, &out).unwrap();
    eprintln!("{name}: {}", p.line());
    let secs: f64 = duration.trim_end_matches('s').parse().unwrap();
    p.assert_judged(name, playback::min_playing(secs, bus_ms.parse().unwrap()));
    Some((p, cfg))
}

fn assert_seamless(name: &str, p: &Playback) {
    assert!(p.playing > 0, "{name}: nothing was played");
    assert!(
        p.altered_pct() <= MAX_ALTERED_PCT,
        "{name}: the gate changed the proposal on {:.2} % of the Playing cycles (at most {MAX_ALTERED_PCT} %): {}",
        p.altered_pct(),
        p.line()
    );
    assert!(
        p.gap_p99_rad <= MAX_GAP_P99_RAD,
        "{name}: |proposal - command| P99 {:.3} mrad (at most {:.1}): {}",
        p.gap_p99_rad * 1e3,
        MAX_GAP_P99_RAD * 1e3,
        p.line()
    );
    assert!(
        p.acc_p999 <= MAX_DYNAMICS_P999 && p.jerk_p999 <= MAX_DYNAMICS_P999,
        "{name}: acceleration P99.9 {:.3}, jerk P99.9 {:.3} of the limits (at most {MAX_DYNAMICS_P999}): {}",
        p.acc_p999,
        p.jerk_p999,
        p.line()
    );
    assert!(
        p.goal_times_s.len() >= 2,
        "{name}: fewer than two goal-to-goal times: {}",
        p.line()
    );
    assert!(
        p.mean_goal_time_s() <= MAX_MEAN_GOAL_TIME_S,
        "{name}: mean goal-to-goal time {:.2} s (at most {MAX_MEAN_GOAL_TIME_S}): {}",
        p.mean_goal_time_s(),
        p.line()
    );
}

#[test]
fn the_gate_stays_idle_at_a_20_ms_bus() {
    let Some((p, _)) = run("bus20", "20", "20s", "") else {
        return;
    };
    assert_seamless("20 ms bus", &p);
}

#[test]
fn the_gate_stays_idle_at_a_1_ms_bus() {
    let Some((p, _)) = run("bus1", "1", "12s", "") else {
        return;
    };
    assert_seamless("1 ms bus", &p);
}

#[test]
fn the_gate_stays_idle_with_late_chunks() {
    let extra = "\n[inject]\nseed = 13\n\
                 inference_delay = { kind = \"uniform\", min_ms = 0.0, max_ms = 40.0 }\n";
    // 60 s, as the book's measurement of this case (docs/measurements/playback.md): at a 20 ms bus 20 s is only ~1000
    // Playing cycles, so their P99.9 was the single worst cycle (0.504 against 0.5 in one
    // fresh-clone run here, P99.9 = max), the one seam whose chunk came latest. 3000 cycles
    // make it a percentile again, with the bound unchanged.
    let Some((p, _)) = run("late", "20", "60s", extra) else {
        return;
    };
    assert_seamless("0-40 ms inference delay", &p);
}
