//! Images in the observation (issue 19): the bundled visuomotor policy
//! (`rt-config/sim-vision.toml`, a CNN + flow-matching head through real ONNX Runtime)
//! on the simulated arm, seeing its goals only in the synthetic camera's images, run by
//! the real binary. Judged from the recording: where the arm was measured against the
//! targets the camera showed (the target poses computed here from the scene's
//! definition), the modes the executor went through, the commands the arm was sent.
//!
//! - Nominally: the arm reaches target after target, no chunk expires, and the
//!   observation's age counts from the image (at least the camera's latency).
//! - The camera stalls (`[inject] camera_stall_*`), its frames also delayed by 20 ms
//!   (`camera_delay`): every frame is at least that much later, the policy loses
//!   authority within the chunk age counted from the last image, the arm is held at
//!   rest, and playback resumes and reaches targets again when frames return.

mod common;

use chunkrt_testkit::edit::Edit;
use chunkrt_tests::recording::{self, RecordedCycle};
use common::{repo, wait};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The scene's definition (`chunkrt_camera::synthetic`, `scripts/vision/scene.py`):
/// target `(u, v)` is the joint pose `G0 + u D1 + v D2`.
const G0: [f64; 7] = [-0.5, -0.6, -0.3, -2.0, -0.3, 0.9, 0.8];
const D1: [f64; 7] = [1.0, 0.0, 0.6, 0.0, 0.6, 0.0, 0.0];
const D2: [f64; 7] = [0.0, 0.8, 0.0, 0.8, 0.0, 0.6, 0.0];
/// `camera.tolerance_rad` and `camera.settle_s` of sim-vision.toml.
const TOLERANCE_RAD: f64 = 0.05;
const SETTLE_S: f64 = 0.3;
/// `executor.max_chunk_age_ms` and the control period of sim-vision.toml.
const MAX_CHUNK_AGE_S: f64 = 0.2;
const PERIOD_S: f64 = 0.02;
/// The camera delay the stall test injects besides the stall.
const CAMERA_DELAY_MS: f64 = 20.0;

fn pose(u: f64, v: f64) -> [f64; 7] {
    std::array::from_fn(|j| G0[j] + u * D1[j] + v * D2[j])
}

/// A target the camera showed: its index, `(u, v)`, the run time of its first frame
/// (s, the events' clock) and that frame's capture time (monotonic ns, the cycles').
#[derive(Debug, Clone)]
struct Shown {
    index: u64,
    uv: (f64, f64),
    t_s: f64,
    t_capture_ns: u64,
}

struct Run {
    dir: PathBuf,
    report: Value,
    cycles: Vec<RecordedCycle>,
    targets: Vec<Shown>,
    /// `(to, reason, t_s)` of every mode change.
    modes: Vec<(String, String, f64)>,
}

fn run(name: &str, duration: &str, extra: &str) -> Option<Run> {
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite("vision", &e.to_string());
        return None;
    }
    let dir = common::temp_dir("vision", name);
    let policies = repo().join("rt-config/policies");
    let text = std::fs::read_to_string(repo().join("rt-config/sim-vision.toml"))
        .unwrap()
        .edit(
            "manifest = \"policies/",
            &format!("manifest = \"{}/", policies.display()),
        )
        // Threads unpinned: tests run beside each other.
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n")
        + extra;
    let cfg_path = dir.join("sim-vision.toml");
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
    let report: Value = common::read_json_checked(&out.join("report.json"));
    let (cycles, events) = recording::read(&out.join("recording.mcap")).unwrap();
    Some(Run {
        dir: out,
        report,
        cycles,
        targets: targets(&events),
        modes: modes(&events),
    })
}

fn targets(events: &[Value]) -> Vec<Shown> {
    events
        .iter()
        .filter(|e| e["event"] == "camera_target")
        .map(|e| Shown {
            index: e["index"].as_u64().unwrap(),
            uv: (e["u"].as_f64().unwrap(), e["v"].as_f64().unwrap()),
            t_s: e["t_s"].as_f64().unwrap(),
            t_capture_ns: e["t_capture_ns"].as_u64().unwrap(),
        })
        .collect()
}

fn modes(events: &[Value]) -> Vec<(String, String, f64)> {
    events
        .iter()
        .filter(|e| e["event"] == "mode")
        .map(|e| {
            (
                e["to"].as_str().unwrap_or("").to_string(),
                e["reason"].as_str().unwrap_or("").to_string(),
                e["t_s"].as_f64().unwrap_or(0.0),
            )
        })
        .collect()
}

fn counter(report: &Value, k: &str) -> u64 {
    report["counters"][k].as_u64().unwrap_or(0)
}

/// Targets the arm is shown to have reached: for each target replaced by the next, the
/// arm's measured pose in the settle window before the replacement was within the
/// tolerance of the target's pose on every joint. Returns how many; panics on a target
/// replaced while the arm was elsewhere.
fn reached(name: &str, run: &Run) -> usize {
    let mut n = 0;
    for pair in run.targets.windows(2) {
        let (shown, next) = (&pair[0], &pair[1]);
        assert_eq!(next.index, shown.index + 1, "{name}: targets in order");
        let g = pose(shown.uv.0, shown.uv.1);
        let lo = next
            .t_capture_ns
            .saturating_sub(((SETTLE_S - 0.05) * 1e9) as u64);
        let hi = next.t_capture_ns.saturating_sub(30_000_000);
        let window: Vec<&RecordedCycle> = run
            .cycles
            .iter()
            .filter(|c| c.t_deadline_ns >= lo && c.t_deadline_ns <= hi)
            .collect();
        assert!(
            window.len() >= 5,
            "{name}: {} cycles before target {}",
            window.len(),
            next.index
        );
        for c in &window {
            let err = (0..7)
                .map(|j| (c.feedback_rad[j] - g[j]).abs())
                .fold(0.0, f64::max);
            assert!(
                err < TOLERANCE_RAD,
                "{name}: target {} ({:.3}, {:.3}) replaced at {:.2} s while the arm was {err:.3} rad from it",
                shown.index,
                shown.uv.0,
                shown.uv.1,
                next.t_s
            );
        }
        n += 1;
    }
    n
}

#[test]
fn the_arm_reaches_the_targets_it_sees_only_in_the_camera_image() {
    let Some(r) = run("nominal", "30s", "") else {
        return;
    };
    let n = reached("nominal", &r);
    eprintln!(
        "vision nominal: {n} targets reached in 30 s; camera frames {}, latency P50 {} ns, obs_age P50 {} ns (min {} ns); {}",
        counter(&r.report, "camera_frames"),
        r.report["metrics"]["camera_latency"]["p50"],
        r.report["metrics"]["obs_age"]["p50"],
        r.report["metrics"]["obs_age"]["min"],
        r.dir.display()
    );
    assert!(n >= 5, "{n} targets reached in 30 s: {:?}", r.targets);
    for k in [
        "chunks_expired",
        "inference_errors",
        "observations_stale_image",
        "camera_errors",
        "camera_seq_gaps",
    ] {
        assert_eq!(counter(&r.report, k), 0, "{k}");
    }
    // 30 fps for 30 s.
    assert!(counter(&r.report, "camera_frames") > 800);
    // The observation is as old as its image: at least the camera's 8 ms latency
    // (a joint-state observation alone is tens of microseconds old).
    let min_obs_age = r.report["metrics"]["obs_age"]["min"].as_u64().unwrap();
    assert!(min_obs_age >= 8_000_000, "obs_age min {min_obs_age} ns");
    let cam_p50 = r.report["metrics"]["camera_latency"]["p50"]
        .as_u64()
        .unwrap();
    assert!(cam_p50 >= 8_000_000, "camera latency P50 {cam_p50} ns");
}

#[test]
fn a_stalled_camera_takes_authority_from_the_policy_and_playback_resumes_with_frames() {
    let (after_s, stall_s) = (8.0, 3.0);
    let Some(r) = run(
        "stall",
        "18s",
        &format!(
            "\n[inject]\ncamera_stall_after_s = {after_s}\ncamera_stall_s = {stall_s}\n\
             camera_delay = {{ kind = \"fixed\", ms = {CAMERA_DELAY_MS:.1} }}\n"
        ),
    ) else {
        return;
    };
    // The camera's first frame is the first target event; the stall counts from it.
    let first = r.targets.first().expect("a target was shown");
    let stall_from = first.t_s + after_s;
    let stall_to = stall_from + stall_s;
    eprintln!(
        "vision stall ({:.2}-{:.2} s): modes {:?}; withheld {}, stale observations {}; {}",
        stall_from,
        stall_to,
        r.modes,
        counter(&r.report, "camera_frames_withheld_injected"),
        counter(&r.report, "observations_stale_image"),
        r.dir.display()
    );
    assert!(counter(&r.report, "camera_frames_withheld_injected") >= 80);
    // The injected delay on top of the camera's own 8 ms: no frame is ready sooner,
    // and no observation is younger.
    let floor_ns = ((8.0 + CAMERA_DELAY_MS) * 1e6) as u64;
    for m in ["camera_latency", "obs_age"] {
        let min = r.report["metrics"][m]["min"].as_u64().unwrap();
        assert!(min >= floor_ns, "{m} min {min} ns, below {floor_ns} ns");
    }
    // Withheld frames are the stall's, not frames the camera lost.
    assert_eq!(counter(&r.report, "camera_seq_gaps"), 0);
    assert!(counter(&r.report, "observations_stale_image") >= 40);
    // Authority is lost once the last chunk, aged from its image, passes the chunk
    // age: within max_chunk_age of the stall's start (plus a control period and the
    // frame period the last image may predate it by), never before the stall.
    let decel = r
        .modes
        .iter()
        .find(|m| m.0 == "Decelerating" && m.2 > stall_from - 0.05)
        .unwrap_or_else(|| panic!("no fallback after the stall began: {:?}", r.modes));
    assert!(
        decel.1.contains("Expired"),
        "fallback reason {:?} (expected the chunk's expiry)",
        decel.1
    );
    assert!(
        decel.2 <= stall_from + MAX_CHUNK_AGE_S + PERIOD_S + 0.04,
        "authority lost at {:.3} s, the stall began at {stall_from:.3} s",
        decel.2
    );
    assert!(
        !r.modes
            .iter()
            .any(|m| m.0 != "Playing" && m.2 > first.t_s + 1.0 && m.2 < stall_from - 0.05),
        "no fallback before the stall: {:?}",
        r.modes
    );
    // The arm is brought to rest and held.
    let hold = r
        .modes
        .iter()
        .find(|m| m.0 == "Holding" && m.2 > decel.2)
        .expect("came to rest");
    assert!(hold.2 < stall_to, "held before the frames returned");
    let held: Vec<&RecordedCycle> = r.cycles.iter().filter(|c| c.mode == "Holding").collect();
    assert!(held.len() > 20);
    for w in held.windows(2) {
        if w[1].cycle == w[0].cycle + 1 {
            for j in 0..7 {
                assert!(
                    (w[1].command_rad[j] - w[0].command_rad[j]).abs() < 1e-9,
                    "the held command moved"
                );
            }
        }
    }
    // Playback resumes when frames return, and the arm goes on reaching targets.
    let resumed = r
        .modes
        .iter()
        .find(|m| m.0 == "Playing" && m.2 > hold.2)
        .expect("playback resumed");
    assert!(
        resumed.2 >= stall_to - 0.05,
        "resumed at {:.2} s, before the frames returned at {stall_to:.2} s",
        resumed.2
    );
    let n = reached("stall", &r);
    let after: Vec<&Shown> = r.targets.iter().filter(|t| t.t_s > resumed.2).collect();
    assert!(
        !after.is_empty(),
        "no target reached after the frames returned ({n} in all): {:?}",
        r.targets
    );
    assert_eq!(counter(&r.report, "inference_errors"), 0);
}

/// A policy that takes images and a config without a camera (or the reverse) is a
/// configuration error: said before the loop starts, exit 2, nothing moved.
#[test]
fn a_camera_that_does_not_fit_the_policy_is_refused_before_anything_moves() {
    if chunkrt_policy::find_ort_library(None).is_err() {
        chunkrt_testkit::missing_prerequisite("vision", "no ONNX Runtime library");
        return;
    }
    let dir = common::temp_dir("vision", "refused");
    let policies = repo().join("rt-config/policies");
    let absolute = |text: String| {
        text.edit(
            "manifest = \"policies/",
            &format!("manifest = \"{}/", policies.display()),
        )
    };
    let vision =
        absolute(std::fs::read_to_string(repo().join("rt-config/sim-vision.toml")).unwrap());
    let (head, tail) = vision.split_at(vision.find("[camera]").unwrap());
    let no_camera = format!("{head}{}", &tail[tail.find("[telemetry]").unwrap()..]);
    let no_image = absolute(std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap())
        + "\n[camera]\nkind = \"synthetic\"\n";
    for (name, text, says) in [
        (
            "no-camera",
            no_camera,
            "the policy takes a 64 x 64 camera image and the config has no [camera]",
        ),
        (
            "no-image",
            no_image,
            "the config has a [camera] and the policy takes no image",
        ),
    ] {
        let cfg = dir.join(format!("{name}.toml"));
        std::fs::write(&cfg, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
            .args(["run", "--duration", "2s", "--config"])
            .arg(&cfg)
            .arg("--out")
            .arg(dir.join(name))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("nothing was moved"),
            "{name}: {stderr}"
        );
    }
}
