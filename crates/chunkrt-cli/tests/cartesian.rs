//! The gate's Cartesian stage through the binary (issue 57): the default configuration
//! (the bundled flow policy through real ONNX Runtime, the simulated arm), the
//! kinematics of the bundled Panda model. Judged from what the backend received
//! (`recording.mcap`'s commands), the tool point of each computed by **MuJoCo**
//! (`chunkrt_tests::kinematics`), not by the code under test:
//!
//! - a first run without `[cartesian]` shows where the policy takes the tool: it goes
//!   below a height `h` halfway between where it starts and its lowest point (the
//!   check below would fail on it — the oracle can fail);
//! - the same run with a keep-out plane at `h` and a tool-speed limit of 0.5 m/s: no
//!   command puts the tool below `h`, no Playing step moves it faster than 0.5 m/s, and
//!   the report counts the approach envelope acting;
//! - the same with the plane touched at 0.03 m/s: the tool reaches the plane no faster
//!   than that.

mod common;

use chunkrt_tests::recording;
use common::repo;
use std::path::{Path, PathBuf};

/// The Panda's joints in the model, base first.
const JOINTS: [&str; 7] = [
    "joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "joint7",
];
/// The flange: 0.107 m along link 7's z.
const FLANGE: [f64; 3] = [0.0, 0.0, 0.107];
const PANDA_SHA256: &str = "2eb1f4a236a2c1795d1bc4491e1b083a739179e640a09739bad16749bc2f07ab";

/// Runs `chunkrt run` on `rt-config/sim.toml` for 12 s with `extra` appended; returns
/// the run directory.
fn run(name: &str, extra: &str) -> Option<PathBuf> {
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite("cartesian", &e.to_string());
        return None;
    }
    let dir = common::temp_dir("cartesian", name);
    let text = common::bundled_config_text("sim.toml", extra);
    let config = dir.join("sim.toml");
    std::fs::write(&config, text).unwrap();
    let out = dir.join("run");
    common::run_chunkrt(name, &config, &out, "12s");
    Some(out)
}

/// Per recorded cycle: its mode, its deadline (s), and the commanded flange point by
/// MuJoCo.
fn flange_points(out: &Path) -> Vec<(String, f64, [f64; 3])> {
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let poses: Vec<Vec<f64>> = cycles.iter().map(|c| c.command_rad.clone()).collect();
    let points = chunkrt_tests::kinematics::body_points(
        &repo().join("models/franka_panda/panda.xml"),
        "link7",
        FLANGE,
        &JOINTS,
        &poses,
    )
    .unwrap();
    cycles
        .into_iter()
        .zip(points)
        .map(|(c, p)| (c.mode, c.t_deadline_ns as f64 * 1e-9, p))
        .collect()
}

fn section(h: f64, touch: f64) -> String {
    format!(
        r#"
[cartesian]
model = "{}"
model_sha256 = "{PANDA_SHA256}"
tool = "link7"
tool_offset_m = [0.0, 0.0, 0.107]
brake_m_s2 = 2.0
max_tool_speed_m_s = 0.5

[[cartesian.plane]]
name = "table"
point_m = [0.0, 0.0, {h}]
normal = [0.0, 0.0, 1.0]
touch_speed_m_s = {touch}
"#,
        repo().join("models/franka_panda/panda.xml").display()
    )
}

fn report(out: &Path) -> serde_json::Value {
    common::read_json_checked(&out.join("report.json"))
}

#[test]
fn the_commanded_tool_never_crosses_a_declared_plane() {
    let Some(free) = run("free", "") else {
        return;
    };
    let free = flange_points(&free);
    let start = free[0].2[2];
    let lowest = free
        .iter()
        .map(|(_, _, p)| p[2])
        .fold(f64::INFINITY, f64::min);
    eprintln!("without [cartesian]: the flange starts at z {start:.4} m, lowest {lowest:.4} m");
    assert!(
        start - lowest > 0.05,
        "the policy moves the tool down {:.4} m only: no plane to test against",
        start - lowest
    );
    let h = 0.5 * (start + lowest);
    let below = free.iter().filter(|(_, _, p)| p[2] < h).count();
    assert!(
        below > 10,
        "without the stage {below} commands go below {h}"
    );

    let guarded = run("keep-out", &section(h, 0.0)).unwrap();
    let points = flange_points(&guarded);
    let deepest = points
        .iter()
        .map(|(_, _, p)| p[2])
        .fold(f64::INFINITY, f64::min);
    let mut speeds: Vec<f64> = points
        .windows(2)
        .filter(|w| w[0].0 == "Playing" && w[1].0 == "Playing")
        .map(|w| {
            let d: f64 = (0..3).map(|k| (w[1].2[k] - w[0].2[k]).powi(2)).sum();
            d.sqrt() / (w[1].1 - w[0].1)
        })
        .collect();
    speeds.sort_by(f64::total_cmp);
    let fastest = speeds.last().copied().unwrap_or(0.0);
    eprintln!(
        "keep-out plane at z {h:.4} m: deepest command {deepest:.6} m ({:.3e} m from the plane), \
         fastest flange {fastest:.4} m/s over {} Playing steps",
        deepest - h,
        speeds.len()
    );
    assert!(
        deepest >= h - 1e-9,
        "a command put the flange {:.3e} m below the keep-out plane",
        h - deepest
    );
    // The speed limit holds on every Playing step (a stop is the gate's braking, not
    // bounded in tool space).
    assert!(
        fastest <= 0.5 * (1.0 + 1e-6),
        "the flange moved at {fastest} m/s (limit 0.5)"
    );
    let gate = &report(&guarded)["gate"];
    assert!(gate["approach"].as_u64().unwrap() > 0, "{gate}");
    let conf = &report(&guarded)["config"];
    assert_eq!(conf["cartesian_model_sha256"], PANDA_SHA256, "{conf}");

    let touched = run("touch", &section(h, 0.03)).unwrap();
    let points = flange_points(&touched);
    let mut crossings = 0;
    for w in points.windows(2) {
        let (z0, z1) = (w[0].2[2] - h, w[1].2[2] - h);
        if z1 < 0.0 {
            crossings += 1;
            let v = (z0 - z1) / (w[1].1 - w[0].1);
            assert!(
                v <= 0.03 * (1.0 + 1e-9),
                "the flange crossed the plane at {v} m/s"
            );
        }
    }
    eprintln!("touch plane: {crossings} commands below it, each reached at 0.03 m/s or less");
}

/// A `[cartesian]` model that is not the configured arm is refused by `validate` (and
/// `run`, which builds the stage the same way, `chunkrt_rt::build::cartesian`) before
/// anything moves: another file (both digests named), a tool whose chain has another
/// joint count than `control.joints`.
#[test]
fn a_cartesian_model_that_is_not_the_arm_is_refused_before_anything_moves() {
    let dir = common::temp_dir("cartesian", "refusals");
    let good = section(0.5, 0.0);
    let other = "0".repeat(64);
    for (name, extra, expect) in [
        (
            "digest",
            good.replace(PANDA_SHA256, &other),
            format!("its SHA-256 is {PANDA_SHA256}, cartesian.model_sha256 says {other}"),
        ),
        (
            "joints",
            good.replace("tool = \"link7\"", "tool = \"link5\""),
            "5 hinge joints from the world body to \"link5\"; control.joints is 7".to_string(),
        ),
    ] {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, common::bundled_config_text("sim.toml", &extra)).unwrap();
        let o = common::chunkrt_at(&["validate"], &[&config]);
        let out = common::output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {out}");
        assert!(out.contains(&expect), "{name}: {out}");
    }
}
