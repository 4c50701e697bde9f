//! Intervention records through the binary: a joint that cannot follow (the weak
//! joint of `following.rs`) makes a following-error excursion and the withdrawal of
//! the policy's authority; each is written as a standalone record with the cycles
//! around it, with the full recording off, named by the SHA-256 of its bytes and
//! listed in the report.

use chunkrt_testkit::edit::Edit;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn each_intervention_is_a_record_of_its_window_named_by_its_digest_without_the_recording() {
    let dir = std::env::temp_dir().join(format!("chunkrt-interventions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml")).unwrap();
    let cfg = text
        .edit("max_torque_nm = [87.0, 87.0,", "max_torque_nm = [1.1, 87.0,")
        .edit(
            "brake_acc_rad_s2 = [",
            "max_following_error_rad = 0.06\nbrake_acc_rad_s2 = [",
        )
        .edit(
            "[telemetry]\n",
            "[telemetry]\nrecord = false\nintervention_before_s = 1.0\nintervention_after_s = 0.5\n",
        );
    let path = dir.join("weak.toml");
    std::fs::write(&path, cfg).unwrap();
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
        .arg(&path)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !out.join("recording.mcap").exists(),
        "the recording was off"
    );
    let report: serde_json::Value =
        chunkrt_tests::schema::read_json_checked(&out.join("report.json"));
    let listed = report["extra"]["interventions"]
        .as_array()
        .or_else(|| report["interventions"].as_array())
        .expect("the report lists the interventions")
        .clone();
    let kinds: Vec<&str> = listed.iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"following_error"), "{listed:#?}");
    assert!(kinds.contains(&"withdrawal"), "{listed:#?}");
    assert_eq!(
        report["counters"]["intervention_records"].as_u64(),
        Some(listed.len() as u64)
    );
    let files = std::fs::read_dir(out.join("interventions"))
        .unwrap()
        .count();
    assert_eq!(files, listed.len(), "one file per listed record");
    for r in &listed {
        let bytes = std::fs::read(out.join(r["file"].as_str().unwrap())).unwrap();
        let sha: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(r["sha256"], sha.as_str(), "{r}");
        assert!(r["file"].as_str().unwrap().contains(&sha), "{r}");
        let lines: Vec<serde_json::Value> = String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let head = &lines[0];
        assert_eq!(head["intervention"], r["kind"]);
        assert_eq!(head["complete"], true, "{head}");
        // 20 ms cycles: 1 s before (the trigger's cycle included; less when the
        // run began within it) and 0.5 s after, each cycle once and in order.
        let t = head["t_s"].as_f64().unwrap();
        let cycles = &lines[1..];
        let before = head["cycles_before"].as_u64().unwrap();
        let after = head["cycles_after"].as_u64().unwrap();
        assert!((24..=26).contains(&after), "{head}");
        assert_eq!(cycles.len() as u64, before + after);
        let numbers: Vec<u64> = cycles
            .iter()
            .map(|c| c["cycle"].as_u64().unwrap())
            .collect();
        assert!(numbers.windows(2).all(|w| w[1] == w[0] + 1), "{numbers:?}");
        let first = cycles[0]["t_s"].as_f64().unwrap();
        let last = cycles[cycles.len() - 1]["t_s"].as_f64().unwrap();
        let span = t - first;
        assert!(span <= 1.0 + 0.025, "{t} {first}");
        if t > 1.1 {
            assert!(span >= 1.0 - 0.025, "{t} {first}");
        }
        let want_before = (span / 0.02).round() as u64 + 1;
        assert!(before.abs_diff(want_before) <= 1, "{head}");
        assert!((last - t - 0.5).abs() < 0.025, "{t} {last}");
        assert!(cycles
            .iter()
            .all(|c| c["command_rad"].as_array().unwrap().len() == 7));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
