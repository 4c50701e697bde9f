//! Issue 37: a live margin sweep whose first (smallest) delay loses authority stops
//! there, with the reason and the fix, instead of running every larger delay for
//! minutes to print `lost authority` on each.

use std::process::Command;

#[test]
fn a_sweep_whose_first_point_loses_authority_stops_with_reason_and_fix() {
    let out = std::env::temp_dir().join(format!("chunkrt-margin-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rt-config/sim.toml");
    // The excursion guard set to 5 mrad, just above the probe's own 4 mrad peak: the
    // bundled flow policy moves joint 0 at up to ~0.75 rad/s between its goals, and the
    // arm, measured a bus cycle behind that setpoint (~15 mrad), is past it: the guard
    // takes authority at 0 ms.
    let run = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args(["margin", "--config"])
        .arg(&config)
        .args([
            "--delays",
            "0,10,20ms",
            "--window-s",
            "4",
            "--settle-s",
            "0.5",
            "--free-s",
            "1",
            "--freqs",
            "0.5,1",
            "--max-excursion-rad",
            "0.005",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let seen = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        !run.status.success(),
        "a sweep that measured nothing: {seen}"
    );
    // The header and the one row measured, nothing after it.
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains("none ")).collect();
    assert_eq!(rows.len(), 1, "{seen}");
    assert!(rows[0].contains("lost authority"), "{seen}");
    assert!(
        !out.join("none").join("delay-10ms").exists(),
        "the sweep went on to 10 ms: {seen}"
    );
    assert!(
        out.join("margin.json").is_file(),
        "the stopped sweep wrote no margin.json: {seen}"
    );
    let json = chunkrt_tests::schema::read_json_checked(&out.join("margin.json"));
    assert!(json["rows"].is_array(), "{json:#}");
    for needle in [
        "the sweep stops",
        "smallest delay (0 ms",
        "excursion guard",
        "--hold",
        "--max-excursion-rad",
    ] {
        assert!(stderr.contains(needle), "`{needle}` missing: {seen}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
