//! The physics-modelled arm through the real binary (issue 39): the bundled flow policy
//! and LeRobot's ACT run on MuJoCo's Panda as they run on the simulated arm, judged from
//! what the arm was commanded and measured (`chunkrt_tests::playback`, which knows only
//! the goal list and the joint limits; `scripts/plant_figures.py`, which reads the
//! recording with the `mcap` package; the plots), and a model that is not the configured
//! one is refused before anything moves.
//!
//! Each run's config is the simulated arm's own (`rt-config/sim.toml`,
//! `rt-config/sim-lerobot-act.toml`) with `[backend] kind = "mujoco"` and the `[mujoco]`
//! section of `rt-config/sim-mujoco.toml`: the plant is the only difference.

mod common;

use chunkrt_config::Config;
use chunkrt_testkit::edit::Edit;
use chunkrt_tests::playback;
use common::{python_with_mcap, repo, script_json, temp_dir, wait};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Goal-to-goal times a 30 s run must show (the flow policy takes about 2 s a goal,
/// ACT's demonstrations 1.5-3 s).
const MIN_GOALS: usize = 4;

/// The `[mujoco]` section of `rt-config/sim-mujoco.toml`, its model path made absolute.
fn mujoco_section() -> String {
    let text = std::fs::read_to_string(repo().join("rt-config/sim-mujoco.toml")).unwrap();
    let start = text.find("[mujoco]").expect("sim-mujoco.toml has [mujoco]");
    let end = text[start + 1..]
        .find("\n[")
        .map_or(text.len(), |i| start + 1 + i);
    let model = repo().join("models");
    text[start..end].to_string().edit(
        "model = \"../models/",
        &format!("model = \"{}/", model.display()),
    )
}

/// `rt-config/<config>` on the MuJoCo arm (threads unpinned: tests run beside each other,
/// paths absolute), written to `dir`.
fn on_mujoco(config: &str, dir: &Path, digest: Option<&str>) -> PathBuf {
    let policies = repo().join("rt-config/policies");
    let mut section = mujoco_section();
    if let Some(d) = digest {
        let start = section.find("model_sha256 = \"").unwrap() + "model_sha256 = \"".len();
        section.replace_range(start..start + 64, d);
    }
    let mut text = std::fs::read_to_string(repo().join("rt-config").join(config)).unwrap();
    if text.contains("manifest = \"policies/") {
        text = text.edit(
            "manifest = \"policies/",
            &format!("manifest = \"{}/", policies.display()),
        );
    }
    let text = text
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n")
        .edit("[backend]\nkind = \"sim\"", "[backend]\nkind = \"mujoco\"")
        + "\n"
        + &section;
    let path = dir.join("mujoco.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `chunkrt run` of `cfg_path` for `duration` into `dir/run`; its exit status.
fn run(cfg_path: &Path, dir: &Path, duration: &str) -> Option<i32> {
    let mut child = Command::new(common::bin())
        .args(["run", "--duration", duration, "--no-plots", "--config"])
        .arg(cfg_path)
        .arg("--out")
        .arg(dir.join("run"))
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chunkrt starts");
    wait(&mut child, Duration::from_secs(180))
}

fn sha256(path: &Path) -> String {
    format!("{:x}", Sha256::digest(std::fs::read(path).unwrap()))
}

/// Runs `config` on the MuJoCo arm for 30 s and judges it: goals visited in order, no
/// chunk expired, no inference error, no observation out of the domain; the report names
/// the arm model and its digest; the recording holds the torques the drives reported,
/// within their limits, with the shoulder and elbow holding the arm against gravity.
fn reaches_its_goals_on_mujoco(config: &str, name: &str) {
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite("mujoco", &e.to_string());
        return;
    }
    let Some(py) = python_with_mcap() else {
        chunkrt_testkit::missing_prerequisite("mujoco", "no Python with the mcap package");
        return;
    };
    let dir = temp_dir("mujoco", name);
    let cfg_path = on_mujoco(config, &dir, None);
    assert_eq!(run(&cfg_path, &dir, "30s"), Some(0), "chunkrt run ({name})");
    let out = dir.join("run");
    let cfg = Config::load(&cfg_path).unwrap();
    let p = playback::judge_run(&cfg, &out).unwrap();
    p.assert_judged(name, playback::min_playing(30.0, cfg.control.period_ms));
    eprintln!("{name}: {}", p.line());
    assert!(
        p.goal_times_s.len() >= MIN_GOALS,
        "{name}: {} goal-to-goal times (at least {MIN_GOALS}): {}",
        p.goal_times_s.len(),
        p.line()
    );
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    for k in [
        "chunks_expired",
        "inference_errors",
        "out_of_domain",
        "backend_errors",
    ] {
        assert_eq!(report["counters"][k].as_u64(), Some(0), "{name}: {k}");
    }
    let model = repo().join("models/franka_panda/panda.xml");
    assert_eq!(report["config"]["backend"], "mujoco", "{name}");
    assert_eq!(
        report["config"]["backend_model_sha256"],
        sha256(&model),
        "{name}"
    );
    assert!(
        report["config"]["backend_model"]
            .as_str()
            .is_some_and(|m| m.ends_with("panda.xml")),
        "{name}: {}",
        report["config"]
    );

    let f = script_json(&py, "plant_figures.py", &[out.as_os_str()]);
    eprintln!("{name}: {f}");
    let share = f["torque_peak_of_limit"]
        .as_array()
        .expect("torques recorded");
    assert_eq!(share.len(), 7, "{name}: {f}");
    for (j, s) in share.iter().enumerate() {
        let s = s.as_f64().unwrap();
        assert!(
            s > 0.0 && s <= 1.0,
            "{name}: joint {} peak torque {s} of its limit",
            j + 1
        );
    }
    // Gravity: the shoulder holds the arm up (negative about joint 2's axis at these
    // poses) and the elbow the forearm, the whole run through; the simulated arm,
    // which has no gravity, averages under 0.5 N m on every joint.
    let mean = |j: usize| f["torque_mean_nm"][j].as_f64().unwrap();
    assert!(
        mean(1) < -5.0 && mean(3) > 5.0,
        "{name}: mean torques {}",
        f["torque_mean_nm"]
    );

    // The plots show it: the joints' figure has a torque axis on every joint's panel.
    common::plot(&out);
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert_eq!(
        svg.matches("torque (N m)").count(),
        7,
        "{name}: a torque axis per joint"
    );
}

#[test]
fn the_bundled_flow_policy_reaches_its_goals_on_the_mujoco_arm() {
    reaches_its_goals_on_mujoco("sim.toml", "flow");
}

#[test]
fn lerobot_act_reaches_its_goals_on_the_mujoco_arm() {
    reaches_its_goals_on_mujoco("sim-lerobot-act.toml", "act");
}

/// A model file that is not the one the configuration names: `run` and `validate` refuse
/// it, naming the file and both digests, and no run is written.
#[test]
fn an_arm_model_with_another_digest_is_refused_before_anything_moves() {
    let dir = temp_dir("mujoco", "digest");
    let wrong = "0".repeat(64);
    let cfg_path = on_mujoco("sim-scripted.toml", &dir, Some(&wrong));
    let model = repo().join("models/franka_panda/panda.xml");
    for args in [
        vec!["run", "--duration", "1s", "--no-plots", "--out"],
        vec!["validate"],
    ] {
        let mut cmd = Command::new(common::bin());
        cmd.args(&args);
        if args[0] == "run" {
            cmd.arg(dir.join("run")).arg("--config");
        }
        let o = cmd.arg(&cfg_path).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("panda.xml"), "{args:?}: {err}");
        assert!(
            err.contains(&sha256(&model)) && err.contains(&wrong),
            "{args:?}: {err}"
        );
        assert!(err.contains("a different arm model"), "{args:?}: {err}");
    }
    assert!(!dir.join("run/report.json").exists(), "a run was written");
}

/// The probe's frequency, the probed joint (the elbow) and the probe's window.
const PROBE_HZ: f64 = 2.0;
const PROBE_JOINT: usize = 3;
const PROBE_START_S: f64 = 2.0;
const PROBE_S: f64 = 7.0;

/// `chunkrt run` of the servo loop holding the MuJoCo arm (gravity off: linear about the
/// pose) at a 1 ms bus, with the runtime's own probe (`[inject.probe]`, one component at
/// `PROBE_HZ` on the elbow) and a transport delay of `delay_ms` in the drives; the lag
/// (deg, positive: behind) of the measured position against the command the drives
/// received, at `PROBE_HZ`, over whole periods of the probe's steady part, and the
/// number of cycles it was taken over.
fn probed_lag_deg(dir: &Path, delay_ms: f64) -> (f64, usize) {
    let base = on_mujoco("sim-servo.toml", dir, None);
    let text = std::fs::read_to_string(&base)
        .unwrap()
        .edit("transport_delay_ms = 0.0", &format!("transport_delay_ms = {delay_ms}"))
        .edit("gravity = true", "gravity = false")
        .edit(
            "initial_pos_rad = [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8]",
            "initial_pos_rad = [0.05, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]",
        )
        + &format!(
            "\n[inject.probe]\njoint = {PROBE_JOINT}\namplitude_rad = 0.01\nfreqs_hz = [{PROBE_HZ}]\n\
             start_s = {PROBE_START_S}\nduration_s = {PROBE_S}\nramp_s = 0.25\n"
        );
    let cfg_path = dir.join(format!("probe-{delay_ms}.toml"));
    std::fs::write(&cfg_path, text).unwrap();
    let out = dir.join(format!("probe-{delay_ms}"));
    let status = Command::new(common::bin())
        .args([
            "run",
            "--duration",
            "10s",
            "--no-plots",
            "--bus-period-ms",
            "1",
            "--config",
        ])
        .arg(&cfg_path)
        .arg("--out")
        .arg(&out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(Stdio::null())
        .status()
        .expect("chunkrt starts");
    assert_eq!(status.code(), Some(0), "probed run with {delay_ms} ms");
    let (cycles, _) = chunkrt_tests::recording::read(&out.join("recording.mcap"))
        .unwrap_or_else(|e| panic!("{delay_ms} ms: {e}"));
    let t0 = cycles.first().expect("cycles recorded").t_deadline_ns;
    // The probe's steady part (after its fade-in and a second for the loop to settle),
    // cut to whole periods.
    let from = PROBE_START_S + 1.25;
    let periods = ((PROBE_START_S + PROBE_S - 0.25 - from) * PROBE_HZ).floor();
    let to = from + periods / PROBE_HZ;
    let w = 2.0 * std::f64::consts::PI * PROBE_HZ;
    let win: Vec<_> = cycles
        .iter()
        .map(|c| ((c.t_deadline_ns - t0) as f64 * 1e-9, c))
        .filter(|(t, _)| (from..to).contains(t))
        .collect();
    let mean = |f: &dyn Fn(&chunkrt_tests::recording::RecordedCycle) -> f64| {
        win.iter().map(|(_, c)| f(c)).sum::<f64>() / win.len() as f64
    };
    let (c0, y0) = (
        mean(&|c| c.command_rad[PROBE_JOINT]),
        mean(&|c| c.feedback_rad[PROBE_JOINT]),
    );
    let (mut cz, mut yz) = ((0.0, 0.0), (0.0, 0.0));
    for (t, c) in &win {
        let (co, si) = ((w * t).cos(), (w * t).sin());
        let (dc, dy) = (
            c.command_rad[PROBE_JOINT] - c0,
            c.feedback_rad[PROBE_JOINT] - y0,
        );
        cz = (cz.0 + dc * co, cz.1 + dc * si);
        yz = (yz.0 + dy * co, yz.1 + dy * si);
    }
    let angle = |z: (f64, f64)| z.1.atan2(z.0);
    let lag = (angle(yz) - angle(cz)).to_degrees();
    ((lag + 540.0).rem_euclid(360.0) - 180.0, win.len())
}

/// Issue 39 with the runtime's own probe: a transport delay tau in the drives adds
/// 360 f tau to the plant's lag from command to position at the probe's frequency, on
/// top of the drive loop's own lag, which is the cascade's (P position loop around a
/// velocity loop of 4x its bandwidth: `sim-mujoco.toml`'s 20 Hz) with the command's
/// velocity fed forward (the runtime sends it: CSP with velocity offset, which cancels
/// most of the P loop's lag), within the 2 deg.
#[test]
fn the_runtime_probe_measures_a_drive_delay_as_360_f_tau_on_the_loops_own_lag() {
    let dir = temp_dir("mujoco", "probe");
    let (own, n0) = probed_lag_deg(&dir, 0.0);
    let (delayed, n1) = probed_lag_deg(&dir, 25.0);
    // A whole number of probe periods at 1 kHz: 5.5 s of the 7 s probe.
    for n in [n0, n1] {
        assert!(n >= 5000, "{n} cycles in the window");
    }
    let kp = 2.0 * std::f64::consts::PI * 20.0;
    let kv = 4.0 * kp;
    let w = 2.0 * std::f64::consts::PI * PROBE_HZ;
    // T(jw) = (kp + jw) / (kp + jw - w^2 / kv): the feed-forward's zero against the
    // cascade's poles.
    let model = (w.atan2(kp - w * w / kv) - w.atan2(kp)).to_degrees();
    let added = 360.0 * PROBE_HZ * 0.025;
    eprintln!(
        "lag at {PROBE_HZ} Hz through the probe: {own:.3} deg (cascade {model:.3} deg), \
         with 25 ms: {delayed:.3} deg (own + 360 f tau = {:.3} deg)",
        own + added
    );
    // The issue asks for 2 deg; measured: 0.025 deg from the model, and the 25 ms add
    // 360 f tau to 0.001 deg. Gated at 0.25 deg, a third of what one 1 ms bus cycle
    // more or less would shift (0.72 deg at 2 Hz).
    assert!(
        (own - model).abs() < 0.25,
        "own lag {own} deg, cascade {model} deg"
    );
    assert!(
        (delayed - own - added).abs() < 0.25,
        "25 ms added {} deg, 360 f tau = {added} deg",
        delayed - own
    );
    let _ = std::fs::remove_dir_all(&dir);
}
