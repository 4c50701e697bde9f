//! A residual policy on the frozen base through the binary (issue 40): the bundled
//! flow policy on the simulated arm is the base; the residual is a format-2 model bound
//! to it by its digest (LeRobot's ACT graph, whose absolute joint positions read as
//! corrections are far out of scale: the residual gate must hold them).
//!
//! The oracle reads what the drives were sent (the recording's commands) against the
//! base's own setpoint: wherever the permission gate did not act, every command is
//! within the residual bound of the base; where the base has been outside the activity
//! region for longer than the correction takes to slew to zero within its rate,
//! acceleration and jerk limits, the proposal is the base's exactly. `--frozen` leaves
//! the residual out, and a residual bound to another base is refused before anything
//! moves.

mod common;

use chunkrt_core::SHAPING_BITS;
use chunkrt_testkit::edit::Edit;
use chunkrt_tests::recording;
use common::{
    act_residual_manifest, bundled_model_sha256, flow_sim_config_text, output_text, temp_dir,
};
use std::path::{Path, PathBuf};

const BOUND: f64 = 0.05;
/// Joint 0's activity region (the other joints' spans cover their range).
const J0_LO: f64 = -0.3;
const J0_HI: f64 = 0.45;

/// `rt-config/sim.toml` (the flow base), threads unpinned, with `[policy.residual]`.
fn config_in(dir: &Path, base_sha256: &str) -> PathBuf {
    config_with(dir, &act_residual_manifest(dir, base_sha256))
}

/// ... with the residual of manifest `residual`.
fn config_with(dir: &Path, residual: &Path) -> PathBuf {
    let text = flow_sim_config_text().edit_once(
        "\n[executor]",
        &format!(
            "\n[policy.residual]\nmanifest = \"{}\"\nbound_rad = {BOUND}\nrate_rad_s = 0.3\n\n\
             [policy.residual.region]\nlo_rad = [{J0_LO}, -3, -3, -3, -3, -3, -3]\n\
             hi_rad = [{J0_HI}, 3, 3, 3, 3, 4, 3]\nfade_rad = 0.1\n\n[executor]",
            residual.display()
        ),
    );
    let path = dir.join("residual-run.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(config: &Path, out: &Path, duration: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["run", "--duration", duration, "--quiet", "--no-plots"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--config"]);
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_chunkrt"));
    c.args(&args).arg(config).arg("--out").arg(out);
    c.env("CHUNKRT_LOG", "warn").output().unwrap()
}

/// A run of `duration` with the residual of manifest `residual`, in `dir/run`: it
/// succeeds and no correction fails.
fn run_with(dir: &Path, residual: &Path, duration: &str) -> PathBuf {
    let out = dir.join("run");
    let o = run(&config_with(dir, residual), &out, duration, &[]);
    assert!(o.status.success(), "{}", output_text(&o));
    let counters = &report(&out)["counters"];
    assert_eq!(counters["residual_failed"], 0, "{counters}");
    out
}

fn report(out: &Path) -> serde_json::Value {
    common::read_json_checked(&out.join("report.json"))
}

#[test]
fn the_residual_moves_the_commands_within_its_bound_of_the_base_and_only_in_its_region() {
    let dir = temp_dir("residual", "bound");
    let config = config_in(&dir, &bundled_model_sha256("flow.toml"));
    let out = dir.join("run");
    let o = run(&config, &out, "5s", &[]);
    assert!(o.status.success(), "{}", output_text(&o));
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    // The slowest joint's slew of the correction from its bound to zero, moving the
    // other way at its rate: the config's rate, and a tenth of the joint's acceleration
    // (7.5 rad/s²) and jerk (3750 rad/s³) limits, the defaults.
    let (rate, acc, jerk) = (0.3, 0.75, 375.0);
    let settle_s: f64 = 2.0 * (rate / acc + acc / jerk) + 2.0 * BOUND / rate;
    let settle_cycles = (settle_s / 0.02).ceil() as usize;
    let (mut free, mut outside, mut moved, mut outside_for) = (0usize, 0usize, 0usize, 0usize);
    for c in &cycles {
        let n = c.command_rad.len();
        assert_eq!(c.base_rad.len(), n, "cycle {}: base_rad recorded", c.cycle);
        assert_eq!(c.residual_rad.len(), n, "cycle {}: residual_rad", c.cycle);
        if c.mode != "Playing" {
            outside_for = 0;
            continue;
        }
        let base_outside = c.base_rad[0] <= J0_LO || c.base_rad[0] >= J0_HI;
        outside_for = if base_outside { outside_for + 1 } else { 0 };
        if outside_for > settle_cycles {
            outside += 1;
            assert_eq!(
                c.setpoint_rad, c.base_rad,
                "cycle {}: {outside_for} cycles outside the region the proposal is the base's",
                c.cycle
            );
        }
        // Per joint: the constraints that acted on it, whose union is the cycle's mask.
        let joint_mask = |j: usize| c.gate_mask_joints.get(j).copied().unwrap_or(0);
        assert_eq!(
            (0..n).fold(0, |m, j| m | joint_mask(j)),
            c.gate_mask,
            "cycle {}: the joints' masks make the cycle's",
            c.cycle
        );
        for j in (0..n).filter(|&j| joint_mask(j) & !SHAPING_BITS == 0) {
            free += 1;
            let off = (c.command_rad[j] - c.base_rad[j]).abs();
            assert!(
                off <= BOUND + 1e-9,
                "cycle {} joint {j}: command {off} rad off the base (bound {BOUND})",
                c.cycle
            );
            if off > 0.5 * BOUND {
                moved += 1;
            }
        }
    }
    assert!(
        free > 350,
        "only {free} joint-cycles without the permission gate"
    );
    assert!(
        outside > 10,
        "the base left the region in {outside} cycles only"
    );
    assert!(
        moved > 50,
        "the residual moved the commands in {moved} joint-cycles only"
    );
    let gate = &report(&out)["gate"];
    assert!(gate["residual_bound"].as_u64().unwrap() > 0, "{gate}");
    assert!(gate["residual_region"].as_u64().unwrap() > 0, "{gate}");
    let logged = std::fs::read_to_string(out.join("gate.jsonl")).unwrap();
    assert!(
        logged.contains("\"constraint\":\"residual_bound\""),
        "gate.jsonl"
    );

    // --frozen: the base alone, no correction recorded or counted.
    let frozen = dir.join("frozen");
    let o = run(&config, &frozen, "3s", &["--frozen"]);
    assert!(o.status.success(), "{}", output_text(&o));
    let (cycles, _) = recording::read(&frozen.join("recording.mcap")).unwrap();
    assert!(cycles.iter().all(|c| c.base_rad.is_empty()));
    let gate = &report(&frozen)["gate"];
    for k in ["residual_bound", "residual_rate", "residual_region"] {
        assert_eq!(gate[k], 0, "{k} in a frozen run");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_residual_trained_on_another_base_is_refused_before_anything_moves() {
    let dir = temp_dir("residual", "other-base");
    let config = config_in(&dir, &bundled_model_sha256("ddim.toml"));
    let out = dir.join("run");
    let o = run(&config, &out, "5s", &[]);
    let text = output_text(&o);
    assert!(!o.status.success(), "{text}");
    assert!(
        text.contains("was trained on the base model")
            && text.contains(&bundled_model_sha256("ddim.toml"))
            && text.contains(&bundled_model_sha256("flow.toml")),
        "{text}"
    );
    assert!(!out.join("report.json").exists(), "nothing ran");
    // The frozen base does not load the residual: it runs.
    let o = run(&config, &dir.join("frozen"), "1s", &["--frozen"]);
    assert!(o.status.success(), "{}", output_text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A residual that conditions on its base's chunk (`[residual.base_chunk]`): the fixture's
/// correction is a quarter of where the base's chunk is heading, relative to the
/// observed pose. Without the base chunk handed over every correction fails (and is
/// counted): here none does, and the commands move toward where the base is going.
#[test]
fn a_residual_that_takes_its_bases_chunk_corrects_toward_where_the_base_is_heading() {
    let dir = temp_dir("residual", "base-chunk");
    let fixture = common::repo().join("tests/fixtures/policies/base-following-residual.toml");
    let out = run_with(&dir, &fixture, "4s");
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let (mut along, mut against) = (0usize, 0usize);
    for w in cycles.windows(2) {
        let (prev, c) = (&w[0], &w[1]);
        if c.mode != "Playing" || prev.mode != "Playing" {
            continue;
        }
        for j in 0..c.command_rad.len() {
            // Where the base is going: its own motion over the cycle.
            let (r, ahead) = (c.residual_rad[j], c.base_rad[j] - prev.base_rad[j]);
            if r.abs() < 0.002 || ahead.abs() < 1e-4 {
                continue;
            }
            if r.signum() == ahead.signum() {
                along += 1;
            } else {
                against += 1;
            }
        }
    }
    eprintln!("corrections along the base's way {along}, against it {against}");
    assert!(
        along > 100,
        "the residual moved {along} joint-cycles along the base's way"
    );
    assert!(
        against * 10 < along,
        "{against} joint-cycles against, {along} along"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A residual is not trusted outside its own declared domain: the fixture above with
/// joint 0's position bounds moved where the arm never goes gives no correction at all
/// (each one withheld and counted), while the base plays on.
#[test]
fn a_residual_outside_its_declared_domain_corrects_nothing() {
    let dir = temp_dir("residual", "out-of-domain");
    let fixtures = common::repo().join("tests/fixtures/policies");
    std::fs::copy(
        fixtures.join("base-following-residual.onnx"),
        dir.join("base-following-residual.onnx"),
    )
    .unwrap();
    let mut m: toml::Table = std::fs::read_to_string(fixtures.join("base-following-residual.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let domain = m["domain"].as_table_mut().unwrap();
    domain["obs_min"].as_array_mut().unwrap()[0] = toml::Value::Float(2.5);
    domain["obs_max"].as_array_mut().unwrap()[0] = toml::Value::Float(2.8);
    let manifest = dir.join("narrow.toml");
    std::fs::write(&manifest, toml::to_string(&m).unwrap()).unwrap();
    let out = run_with(&dir, &manifest, "3s");
    let counters = &report(&out)["counters"];
    assert!(
        counters["chunks_published"].as_u64().unwrap() > 20,
        "{counters}"
    );
    assert_eq!(
        counters["residual_out_of_domain"], counters["chunks_published"],
        "{counters}"
    );
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let playing = cycles.iter().filter(|c| c.mode == "Playing").count();
    assert!(playing > 100, "{playing} cycles played");
    for c in &cycles {
        assert!(
            c.residual_rad.iter().all(|r| *r == 0.0),
            "cycle {}: {:?}",
            c.cycle,
            c.residual_rad
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 56: an operator's `stop` (standard input) with the residual's correction in the
/// commands. The stop brakes the commanded state, which holds the correction, and the
/// hold keeps it: no correction is added after the withdrawal (it was, and the hold
/// moved by what was left of it as it decayed). Judged on the commands the simulated
/// drives were sent, against the braking reference from the joint limits alone
/// (`chunkrt_tests::braking::check_stop`), for the stop and two seconds of hold.
#[test]
fn an_operator_stop_with_the_residual_in_the_commands_holds_where_they_were() {
    use std::io::Write;
    let dir = temp_dir("residual", "operator-stop");
    let manifest = act_residual_manifest(&dir, &bundled_model_sha256("flow.toml"));
    // The correction everywhere, slow to change: what is left of it at the stop would
    // take a second to decay.
    let text = flow_sim_config_text().edit_once(
        "\n[executor]",
        &format!(
            "\n[policy.residual]\nmanifest = \"{}\"\nbound_rad = {BOUND}\nrate_rad_s = 0.05\n\n\
             [executor]",
            manifest.display()
        ),
    ) + "\n[operator]\nstdin = true\n";
    let config = dir.join("residual-stop.toml");
    std::fs::write(&config, text).unwrap();
    let out = dir.join("run");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args([
            "run",
            "--duration",
            "5s",
            "--quiet",
            "--no-plots",
            "--config",
        ])
        .arg(&config)
        .arg("--out")
        .arg(&out)
        .env("CHUNKRT_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !out.join("recording.mcap").exists() {
        assert!(t0.elapsed().as_secs() < 60, "the run never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let mut input = child.stdin.take().unwrap();
    writeln!(input, "s").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    // The withdrawal: the last cycle the policy played, and none after it.
    let w = cycles
        .iter()
        .rposition(|c| c.mode == "Playing")
        .expect("the policy played")
        + 1;
    assert!(
        w + 100 <= cycles.len(),
        "a stop and two seconds of hold recorded: {w} of {}",
        cycles.len()
    );
    let held = cycles[w - 1]
        .residual_rad
        .iter()
        .fold(0.0f64, |m, r| m.max(r.abs()));
    assert!(
        held > 0.5 * BOUND,
        "the correction was in the commands at the stop: {held}"
    );
    for c in &cycles[w..] {
        assert!(
            c.residual_rad.iter().all(|r| *r == 0.0),
            "cycle {}: {:?}",
            c.cycle,
            c.residual_rad
        );
    }
    let cfg = chunkrt_config::Config::load(&config).unwrap();
    let limits = cfg.joint_limits();
    let t = cfg.control.period_ms * 1e-3;
    let mut moved: f64 = 0.0;
    for j in 0..cfg.control.joints {
        let q: Vec<f64> = cycles.iter().map(|c| c.command_rad[j]).collect();
        let s = chunkrt_tests::braking::check_stop(&q, w - 1, &limits.joint[j], t)
            .unwrap_or_else(|e| panic!("joint {j}: {e}"));
        moved = moved.max(s.moved_rad);
    }
    eprintln!("operator stop with a {held:.4} rad correction in the commands: moved at most {moved:.5} rad");
    let _ = std::fs::remove_dir_all(&dir);
}
