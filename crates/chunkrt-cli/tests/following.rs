//! Issue 16, following error: a joint that cannot follow its commands (here the
//! simulated joint 0 with too little torque for the policy's accelerations) is
//! caught by `limits.max_following_error_rad`: a `following_error` event names the
//! joint and the error, and the policy loses authority (`FollowingError`), instead of
//! the lag showing only as a tracking error in the report.

use chunkrt_testkit::edit::Edit;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// sim-scripted.toml with joint 0 short of torque; `limit` sets the following-error
/// limit when given.
fn weak_joint_config(dir: &Path, limit: Option<f64>) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml")).unwrap();
    let weak = text.edit(
        "max_torque_nm = [87.0, 87.0,",
        "max_torque_nm = [1.1, 87.0,",
    );
    assert_ne!(weak, text, "the torque line of sim-scripted.toml moved");
    let weak = match limit {
        Some(l) => weak.edit(
            "brake_acc_rad_s2 = [",
            &format!("max_following_error_rad = {l}\nbrake_acc_rad_s2 = ["),
        ),
        None => weak,
    };
    let path = dir.join("weak.toml");
    std::fs::write(&path, weak).unwrap();
    path
}

fn run(name: &str, limit: Option<f64>) -> (serde_json::Value, Vec<serde_json::Value>) {
    let dir = std::env::temp_dir().join(format!("chunkrt-following-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = weak_joint_config(&dir, limit);
    let out = dir.join("run");
    let o = Command::new(env!("CARGO_BIN_EXE_chunkrt"))
        .args([
            "run",
            "--duration",
            "6s",
            "--quiet",
            "--no-plots",
            "--config",
        ])
        .arg(&cfg)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        chunkrt_tests::schema::read_json_checked(&out.join("report.json"));
    let events = std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    (report, events)
}

#[test]
fn a_joint_that_cannot_follow_takes_authority_from_the_policy() {
    let limit = 0.06;
    // Without a limit the lag is only a number in the report.
    let (report, events) = run("off", None);
    let lag = report["tracking"]["max_err_rad"]
        .as_f64()
        .or_else(|| report["extra"]["tracking"]["max_err_rad"].as_f64())
        .expect("the report's tracking figure");
    assert!(
        !events.iter().any(|e| e["event"] == "following_error"),
        "no limit, no event"
    );
    assert!(lag > limit, "the weak joint lags {lag} rad");
    // With it, the joint is named and the policy loses authority.
    let (report, events) = run("on", Some(limit));
    let fe: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["event"] == "following_error")
        .collect();
    assert!(!fe.is_empty(), "no following_error event: {events:?}");
    assert!(fe.iter().all(|e| e["joint"] == 0), "{fe:?}");
    assert!(
        fe.iter().all(|e| e["error_rad"].as_f64().unwrap() > limit),
        "{fe:?}"
    );
    assert!(
        events.iter().any(|e| e["event"] == "mode"
            && e["reason"] == "FollowingError"
            && e["from"] == "Playing"),
        "no fallback for the following error: {events:?}"
    );
    assert_eq!(
        report["counters"]["following_errors"].as_u64(),
        Some(fe.len() as u64)
    );
}
