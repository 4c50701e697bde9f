//! `chunkrt margin` end to end: the table, margin.json and margin.svg/.png, and clear
//! refusals of bad arguments.

use std::process::Command;

fn chunkrt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
}

#[test]
fn margin_writes_its_table_json_and_plot() {
    let out = std::env::temp_dir().join(format!("chunkrt-margin-{}", std::process::id()));
    let run = chunkrt()
        .args(["margin", "--delays", "0,20,40ms", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("phase margin PM0 = "), "{stdout}");
    assert!(stdout.contains("360 f_c = "), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("margin.json")).unwrap()).unwrap();
    let sweep = json["sweep"].as_array().unwrap();
    assert_eq!(sweep.len(), 3);
    // Each row carries the measurement and the analytic expectation beside it.
    for row in sweep {
        let (pm, expected) = (
            row["pm_deg"].as_f64().unwrap(),
            row["pm_expected_deg"].as_f64().unwrap(),
        );
        assert!((pm - expected).abs() < 2.0, "{row}");
    }
    let pm0 = json["pm0_deg"].as_f64().unwrap();
    let model = json["model"]["pm0_deg"].as_f64().unwrap();
    assert!((pm0 - model).abs() < 5.0, "{pm0} vs {model}");
    assert!(json["bode"].as_array().unwrap().len() >= 8);
    let svg = std::fs::read_to_string(out.join("margin.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // One dot per measured delay, one more in the legend.
    assert_eq!(svg.matches("<circle").count(), sweep.len() + 1);
    let png = std::fs::read(out.join("margin.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_margin_arguments_are_refused_with_the_reason() {
    for (args, needle) in [
        (vec!["margin", "--delays", "0:60:5"], "unit"),
        (vec!["margin", "--joint", "4"], "joint 4"),
        (vec!["margin", "--freqs", "1,700"], "Nyquist"),
        (vec!["margin", "--threshold-deg", "200"], "threshold"),
        (
            vec!["margin", "--config", "/nonexistent.toml"],
            "nonexistent",
        ),
    ] {
        let run = chunkrt().args(&args).output().unwrap();
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn run_refuses_an_out_of_range_injection_override() {
    let run = chunkrt()
        .args(["run", "--duration", "1s", "--inject-drop", "1.5", "--out"])
        .arg(std::env::temp_dir().join("chunkrt-inject-refused"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("inject.drop_chunk_probability"), "{stderr}");
}
