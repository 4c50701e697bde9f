//! Policies brought from LeRobot (issue 18): the bundled Diffusion Policy (DDPM) and ACT,
//! exported by `scripts/lerobot/export_lerobot.py`, run by the real binary on the
//! simulated arm through real ONNX Runtime. Judged from what the arm was commanded, read
//! back from `recording.mcap` (`chunkrt_tests::playback`, which knows only the goal list
//! and the joint limits), and from the run's counters:
//!
//! - the arm visits the goals in order (at least `MIN_GOALS` goal-to-goal times, each
//!   goal within its tolerance on every joint);
//! - no chunk expired, no inference error, no observation outside the declared domain.

mod common;

use chunkrt_config::Config;
use chunkrt_testkit::edit::Edit;
use chunkrt_tests::playback;
use common::{repo, wait};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Goal-to-goal times a 30 s run must show (the demonstrations take 1.5-3 s a segment).
const MIN_GOALS: usize = 4;

/// Runs `chunkrt run` on `rt-config/<config>` (threads unpinned: tests run beside each
/// other, manifest made absolute) with `extra` appended, for `duration`; returns the
/// judged playback and the report.
fn run(
    config: &str,
    name: &str,
    duration: &str,
    extra: &str,
) -> Option<(playback::Playback, serde_json::Value)> {
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite("lerobot", &e.to_string());
        return None;
    }
    let dir = common::temp_dir("lerobot", name);
    let policies = repo().join("rt-config/policies");
    let text = std::fs::read_to_string(repo().join("rt-config").join(config))
        .unwrap()
        .edit(
            "manifest = \"policies/",
            &format!("manifest = \"{}/", policies.display()),
        )
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n")
        + extra;
    let cfg_path = dir.join("sim.toml");
    std::fs::write(&cfg_path, text).unwrap();
    let out = dir.join("run");
    let mut child = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["run", "--duration", duration, "--config"])
        .arg(&cfg_path)
        .arg("--out")
        .arg(&out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chunkrt starts");
    let code = wait(&mut child, Duration::from_secs(180));
    assert_eq!(code, Some(0), "chunkrt run exit status ({name})");
    let cfg = Config::load(&cfg_path).unwrap();
    let p = playback::judge_run(&cfg, &out).unwrap();
    let secs: f64 = duration.trim_end_matches('s').parse().unwrap();
    p.assert_judged(name, playback::min_playing(secs, cfg.control.period_ms));
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    eprintln!("{name}: {}", p.line());
    Some((p, report))
}

fn assert_reaches_goals(name: &str, p: &playback::Playback, report: &serde_json::Value) {
    let counter = |k: &str| {
        report["counters"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: no counter {k} in the report"))
    };
    assert!(
        p.goal_times_s.len() >= MIN_GOALS,
        "{name}: {} goal-to-goal times (at least {MIN_GOALS}): {}",
        p.goal_times_s.len(),
        p.line()
    );
    for k in ["chunks_expired", "inference_errors", "out_of_domain"] {
        assert_eq!(counter(k), 0, "{name}: {k}");
    }
    eprintln!(
        "{name}: fallbacks {}, gate interventions {}, chunks used {}",
        counter("fallback_entries"),
        counter("gate_interventions"),
        counter("chunks_used")
    );
}

/// The bundled Diffusion Policy config: the U-Net under the DDPM scheduler it was trained
/// with (10 steps). (Under DDIM the same graph agrees with LeRobot's goldens, but its closed
/// loop here had the gate change 20 % of the commands and left the declared domain 1-2
/// times in 15-20 s: no closed-loop claim is made for it, docs/policy/lerobot.md.)
#[test]
fn lerobot_diffusion_ddpm_reaches_its_goals() {
    let text =
        std::fs::read_to_string(repo().join("rt-config/sim-lerobot-diffusion.toml")).unwrap();
    assert!(text.contains("manifest = \"policies/lerobot-diffusion-ddpm.toml\""));
    let Some((p, r)) = run("sim-lerobot-diffusion.toml", "ddpm", "30s", "") else {
        return;
    };
    assert_reaches_goals("diffusion DDPM", &p, &r);
}

#[test]
fn lerobot_act_reaches_its_goals() {
    let Some((p, r)) = run("sim-lerobot-act.toml", "act", "30s", "") else {
        return;
    };
    assert_reaches_goals("ACT (ensemble)", &p, &r);
}

/// A model with an observation history takes its observations `dt_ms` apart: a chunk
/// period that would space them otherwise is refused before anything moves.
#[test]
fn a_chunk_period_other_than_the_history_spacing_is_refused() {
    let dir = common::temp_dir("lerobot", "period");
    let manifest = repo().join("rt-config/policies/lerobot-diffusion-ddpm.toml");
    let text = std::fs::read_to_string(repo().join("rt-config/sim-lerobot-diffusion.toml"))
        .unwrap()
        .edit(
            "manifest = \"policies/lerobot-diffusion-ddpm.toml\"",
            &format!("manifest = \"{}\"", manifest.display()),
        )
        .edit("chunk_period_ms = 50.0", "chunk_period_ms = 40.0");
    let config = dir.join("sim.toml");
    std::fs::write(&config, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["run", "--duration", "2s", "--config"])
        .arg(&config)
        .arg("--out")
        .arg(dir.join("run"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "the model takes a history of 2 observations 50 ms apart (dt_ms); \
             inference.chunk_period_ms = 40 would space them differently: set it to 50"
        ),
        "{stderr}"
    );
    assert!(!dir.join("run/report.json").exists(), "a run was written");
}

/// ACT's chunks played with ACT's own temporal ensembling as LeRobot runs it (weights
/// switched at once: `blend_ms = 0`) against chunkrt's continuous ensemble (each chunk
/// faded in and out over 200 ms, the bundled config): the first makes the gate step in
/// on many cycles, the second leaves it idle. Other seams are measured the same way with `CHUNKRT_SEAMS=all`
/// (docs/policy/lerobot.md).
#[test]
fn the_continuous_ensemble_keeps_the_gate_idle_where_acts_own_does_not() {
    let mut variants = vec![("ensemble", 200), ("ensemble", 0)];
    if std::env::var("CHUNKRT_SEAMS").as_deref() == Ok("all") {
        variants.extend([("ensemble", 100), ("transition", 200), ("crossfade", 200)]);
    }
    let mut altered = Vec::new();
    for (seam, blend) in variants {
        let extra = String::new();
        let name = format!("act-{seam}-{blend}");
        let dir = common::temp_dir("lerobot", &format!("{name}-config"));
        let text = std::fs::read_to_string(repo().join("rt-config/sim-lerobot-act.toml"))
            .unwrap()
            .edit("seam = \"ensemble\" ", &format!("seam = \"{seam}\" "))
            .edit("blend_ms = 200.0 ", &format!("blend_ms = {blend}.0 "));
        let config = dir.join("act.toml");
        std::fs::write(&config, text).unwrap();
        let Some((p, r)) = run(config.to_str().unwrap(), &name, "20s", &extra) else {
            return;
        };
        eprintln!(
            "{seam} {blend} ms: gate altered {:.1} % of Playing cycles, acceleration P99.9 {:.2} and jerk P99.9 {:.3} of the limits, {} goals, mean {:.2} s, gate interventions {}",
            p.altered_pct(),
            p.acc_p999,
            p.jerk_p999,
            p.goal_times_s.len(),
            p.mean_goal_time_s(),
            r["counters"]["gate_interventions"]
        );
        altered.push(p.altered_pct());
    }
    assert!(
        altered[0] <= 1.0,
        "continuous ensemble: gate altered {} %",
        altered[0]
    );
    assert!(
        altered[1] >= 10.0,
        "ACT's own ensembling: gate altered only {} %",
        altered[1]
    );
}
