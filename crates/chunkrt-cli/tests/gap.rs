//! `chunkrt gap` end to end: the table, gap.json and gap.svg/.png, the exit status
//! that says a channel is over, and clear refusals of bad arguments.

use std::path::{Path, PathBuf};
use std::process::Command;

fn chunkrt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn gap_finds_an_encoder_offset_writes_its_json_and_figure_and_exits_1() {
    let out = std::env::temp_dir().join(format!("chunkrt-gap-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    // The plant: the simulated arm read through a 5 mrad offset on joint 2.
    let sim = repo().join("rt-config/sim.toml");
    let text = std::fs::read_to_string(&sim).unwrap().replace(
        "manifest = \"policies/flow.toml\"",
        &format!(
            "manifest = {:?}",
            repo().join("rt-config/policies/flow.toml")
        ),
    );
    let plant = out.join("sim-offset.toml");
    std::fs::write(
        &plant,
        text + "\n[inject]\nfeedback_bias_rad = [0, 0, 0.005, 0, 0, 0, 0]\n",
    )
    .unwrap();
    let run = chunkrt()
        .arg("gap")
        .arg("--reference")
        .arg(&sim)
        .arg("--plant")
        .arg(&plant)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stdout}\n{stderr}");
    let over: Vec<&str> = stdout.lines().filter(|l| l.ends_with("OVER")).collect();
    assert_eq!(over.len(), 1, "{stdout}");
    assert!(over[0].starts_with("sensing   bias_rad"), "{stdout}");
    let json: serde_json::Value = chunkrt_tests::schema::read_json_checked(&out.join("gap.json"));
    assert_eq!(json["over"], 1);
    // Its schema can fail: without `tolerances`, or a row's verdict as text, it is refused.
    use chunkrt_tests::schema::assert_refused;
    let path = out.join("gap.json");
    assert_refused(&path, &json, "no tolerances", |j| {
        j.as_object_mut().unwrap().remove("tolerances");
    });
    assert_refused(&path, &json, "a verdict as text", |j| {
        j["rows"][0]["over"] = serde_json::json!("yes");
    });
    let rows = json["rows"].as_array().unwrap();
    let bias = rows
        .iter()
        .find(|r| r["metric"] == "bias_rad" && r["joint"] == 2)
        .unwrap();
    assert_eq!(bias["over"], true);
    let d = bias["difference"].as_f64().unwrap();
    assert!((d - 0.005).abs() <= 0.0005, "{bias}");
    // Both plants' runs are kept, and both measured the same joint.
    for side in ["reference", "plant"] {
        let report =
            chunkrt_tests::schema::read_json_checked(&out.join(side).join("joint-0/report.json"));
        assert!(
            report["counters"]["cycles"].as_u64() > Some(0),
            "{side}: {report:#}"
        );
        assert_eq!(json[side]["responses"][0]["joint"], 0);
    }
    let svg = std::fs::read_to_string(out.join("gap.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let png = std::fs::read(out.join("gap.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_gap_arguments_are_refused_with_the_reason() {
    let sim = repo().join("rt-config/sim.toml");
    for (extra, needle) in [
        (vec!["--joints", "9"], "`9` is not a joint of this arm"),
        (
            vec!["--freqs-hz", "1,2.5"],
            "2.5 Hz is not a whole multiple",
        ),
        (vec!["--freqs-hz", "30"], "Nyquist"),
    ] {
        let run = chunkrt()
            .arg("gap")
            .arg("--reference")
            .arg(&sim)
            .arg("--plant")
            .arg(&sim)
            .args(["--out", "/tmp/chunkrt-gap-refused"])
            .args(&extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(needle), "{extra:?}: {stderr}");
    }
    assert!(!Path::new("/tmp/chunkrt-gap-refused").exists());
}
