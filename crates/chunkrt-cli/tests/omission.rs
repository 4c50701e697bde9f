//! The policy manifest's provenance ledger through the binary (issue 41).
//!
//! * An omission-log entry that excludes a region of joint 0 from the bundled flow
//!   policy's declared domain: `chunkrt run` on the simulated arm, the policy leading
//!   the arm toward its second goal across the region. The oracle reads
//!   `recording.mcap` (the measured positions and the commands the backend received):
//!   the cycle after the first measurement inside the region no longer plays the
//!   policy, no cycle after a measurement inside plays it, every joint stops within
//!   its braking envelope, and the report lists the withdrawal's intervention record.
//! * `validate` (and `run`) refuse a ledger whose digest does not match the file it
//!   cites, naming the key; `policy inspect` prints the ledger.
//! * `gap --from-json --omission-log` appends the over-tolerance rows of a gap.json,
//!   cites its copy by digest, and does not append them twice.

mod common;

use chunkrt_config::Config;
use chunkrt_testkit::edit::Edit;
use chunkrt_tests::braking::check_stop;
use chunkrt_tests::recording;
use common::{repo, temp_dir};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Output;

/// Joint 0's excluded band: the flow policy starts at its first goal (joint 0 at 0)
/// and heads for its second (joint 0 at 0.9 rad).
const REGION: [f64; 2] = [0.4, 0.6];

/// The bundled flow policy copied into `dir` with the files its manifest cites, and
/// `rt-config/sim.toml` naming it (unpinned threads); returns (manifest, run config).
fn flow_policy_in(dir: &Path) -> (PathBuf, PathBuf) {
    let manifest = chunkrt_testkit::policy_files::copy_bundled_policy("flow", dir);
    let sim = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    let text = sim
        .edit(
            "manifest = \"policies/flow.toml\"",
            &format!("manifest = \"{}\"", manifest.display()),
        )
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n");
    let config = dir.join("run.toml");
    std::fs::write(&config, text).unwrap();
    (manifest, config)
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The first file the manifest's omission log cites.
fn cited_measurement(manifest: &Path) -> PathBuf {
    let text = std::fs::read_to_string(manifest).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("measurement = "))
        .expect("the bundled manifest cites a gap measurement");
    let name = line.split('"').nth(1).unwrap();
    manifest.parent().unwrap().join(name)
}

fn chunkrt(args: &[&str], paths: &[&Path]) -> Output {
    common::chunkrt_at(args, paths)
}

fn text(o: &Output) -> String {
    common::output_text(o)
}

#[test]
fn an_excluded_region_takes_the_policys_authority_at_its_boundary() {
    let dir = temp_dir("omission", "boundary");
    let (manifest, config) = flow_policy_in(&dir);
    let measurement = cited_measurement(&manifest);
    let sha = sha256_hex(&std::fs::read(&measurement).unwrap());
    let mut m = std::fs::read_to_string(&manifest).unwrap();
    m.push_str(&format!(
        r#"
[[omission_log]]
mechanism = "joint coupling the reference does not model"
channel = "coupling"
metric = "gain_from_joint_0"
joints = [0, 2]
reference = 0.0
plant = 0.044
tolerance = 0.02
measurement = "{}"
measurement_sha256 = "{sha}"

[[omission_log.exclude]]
joint = 0
pos_rad = [{}, {}]
"#,
        measurement.file_name().unwrap().to_string_lossy(),
        REGION[0],
        REGION[1]
    ));
    std::fs::write(&manifest, m).unwrap();
    let out = dir.join("run");
    let o = chunkrt(
        &[
            "run",
            "--duration",
            "8s",
            "--quiet",
            "--no-plots",
            "--config",
        ],
        &[&config, Path::new("--out"), &out],
    );
    assert!(o.status.success(), "{}", text(&o));

    let (cycles, events) = recording::read(&out.join("recording.mcap")).unwrap();
    let inside =
        |c: &recording::RecordedCycle| (REGION[0]..=REGION[1]).contains(&c.feedback_rad[0]);
    let first_in = cycles
        .iter()
        .position(inside)
        .expect("the policy led joint 0 into the region");
    assert_eq!(
        cycles[first_in].mode, "Playing",
        "the policy had authority when the arm reached the region"
    );
    // The support monitor judges each cycle on the measurement of the one before.
    let next = &cycles[first_in + 1];
    assert_ne!(
        next.mode, "Playing",
        "cycle {}: joint 0 measured {} rad inside [{}, {}] the cycle before",
        next.cycle, cycles[first_in].feedback_rad[0], REGION[0], REGION[1]
    );
    for w in cycles[first_in..].windows(2) {
        assert!(
            !(inside(&w[0]) && w[1].mode == "Playing"),
            "cycle {} played the policy after joint 0 was measured at {} rad",
            w[1].cycle,
            w[0].feedback_rad[0]
        );
    }
    assert!(
        events
            .iter()
            .any(|e| e.to_string().contains("\"Excluded\"")),
        "an Excluded mode change in the events"
    );
    // Every joint stops within its braking envelope from the last command it played.
    let cfg = Config::load(&config).unwrap();
    let limits = cfg.joint_limits();
    let t = cfg.period_ns() as f64 * 1e-9;
    for (j, lim) in limits.joint[..cfg.control.joints].iter().enumerate() {
        let q: Vec<f64> = cycles.iter().map(|c| c.command_rad[j]).collect();
        check_stop(&q, first_in, lim, t).unwrap_or_else(|e| panic!("joint {j}: {e}"));
    }
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    let records = report["interventions"]
        .as_array()
        .expect("the report lists interventions");
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "withdrawal" && r["detail"] == "Excluded"),
        "{records:#?}"
    );
    eprintln!(
        "joint 0 measured {:.4} rad at cycle {} (region from {}), authority taken at cycle {}",
        cycles[first_in].feedback_rad[0], cycles[first_in].cycle, REGION[0], next.cycle
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn validate_and_run_refuse_a_ledger_whose_digest_does_not_match_what_it_cites() {
    let dir = temp_dir("omission", "digest");
    let (manifest, config) = flow_policy_in(&dir);
    let o = chunkrt(&["validate"], &[&manifest]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("12 omission(s)"), "{}", text(&o));
    let o = chunkrt(&["policy", "inspect"], &[&manifest]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    for want in [
        "regime_sequence: 1 stage(s)",
        "simulation_provenance: kinematic expert",
        "omission_log: 12 entr(ies)",
        "(load hold_torque_nm) joints [3]",
        "negative_event_registry: 0 record(s)",
    ] {
        assert!(t.contains(want), "{want:?} in\n{t}");
    }

    // One byte of the cited measurement changed.
    let measurement = cited_measurement(&manifest);
    let good = std::fs::read(&measurement).unwrap();
    let mut bad = good.clone();
    bad.push(b'\n');
    std::fs::write(&measurement, &bad).unwrap();
    let o = chunkrt(&["validate"], &[&manifest]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("omission_log[0].measurement"), "{t}");
    assert!(
        t.contains(&sha256_hex(&bad)),
        "the file's digest is said: {t}"
    );
    assert!(t.contains("does not match"), "{t}");
    let out = dir.join("run");
    let o = chunkrt(
        &["run", "--duration", "2s", "--quiet", "--config"],
        &[&config, Path::new("--out"), &out],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("omission_log[0].measurement"),
        "{}",
        text(&o)
    );
    assert!(!out.join("recording.mcap").exists(), "nothing ran");

    // The file back, a digest in the ledger wrong instead.
    std::fs::write(&measurement, &good).unwrap();
    let m = std::fs::read_to_string(&manifest).unwrap();
    let model_sha = m
        .lines()
        .find_map(|l| l.strip_prefix("model_sha256 = "))
        .unwrap()
        .trim_matches('"')
        .to_string();
    let other = format!("{}0", &model_sha[..63]);
    let edited = m.edit(
        &format!("checkpoint_sha256 = \"{model_sha}\""),
        &format!("checkpoint_sha256 = \"{other}\""),
    );
    std::fs::write(&manifest, edited).unwrap();
    let o = chunkrt(&["validate"], &[&manifest]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("regime_sequence[0].checkpoint_sha256"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gap_appends_its_over_rows_to_the_omission_log_once() {
    let dir = temp_dir("omission", "append");
    let (manifest, _) = flow_policy_in(&dir);
    let gap = dir.join("measured").join("gap.json");
    std::fs::create_dir_all(gap.parent().unwrap()).unwrap();
    let doc = serde_json::json!({
        "rows": [
            {"channel": "timing", "metric": "e2e_jitter_ms", "joint": null, "reference": 0.4,
             "plant": 3.1, "difference": 2.7, "tolerance": 2.0, "over": true},
            {"channel": "actuator", "metric": "phase_lag_deg@10Hz", "joint": 3, "reference": 10.0,
             "plant": 38.8, "difference": 28.8, "tolerance": 5.0, "over": true},
            {"channel": "sensing", "metric": "bias_rad", "joint": 3, "reference": 0.0,
             "plant": 0.0001, "difference": 0.0001, "tolerance": 0.001, "over": false}
        ]
    });
    let bytes = serde_json::to_vec_pretty(&doc).unwrap();
    std::fs::write(&gap, &bytes).unwrap();
    let sha = sha256_hex(&bytes);
    let append = || {
        chunkrt(
            &["gap", "--from-json"],
            &[&gap, Path::new("--omission-log"), &manifest],
        )
    };
    let o = append();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("2 entr(ies) appended, 0 already logged"),
        "{}",
        text(&o)
    );
    let copy = dir.join(format!("gap-{}.json", &sha[..12]));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        bytes,
        "the measurement travels beside it"
    );
    let m = std::fs::read_to_string(&manifest).unwrap();
    assert_eq!(
        m.matches(&format!("measurement_sha256 = \"{sha}\""))
            .count(),
        2
    );
    assert!(
        m.contains("metric = \"phase_lag_deg@10Hz\"\njoints = [3]\n"),
        "{m}"
    );
    assert!(
        !m.contains("bias_rad"),
        "a row within tolerance is not logged"
    );
    let o = chunkrt(&["policy", "inspect"], &[&manifest]);
    let t = text(&o);
    assert!(t.contains("omission_log: 14 entr(ies)"), "{t}");
    assert!(
        t.contains("actuator dynamics: phase lag (actuator phase_lag_deg@10Hz) joints [3]"),
        "{t}"
    );
    let o = append();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("0 entr(ies) appended, 2 already logged"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read_to_string(&manifest).unwrap(), m, "unchanged");
    let _ = std::fs::remove_dir_all(&dir);
}
