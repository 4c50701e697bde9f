//! The wear ledger through the binary (issue 41): two runs of the scripted policy on
//! the simulated arm with `[wear]` append one line each for the arm's hardware id; the
//! lines are judged against the run's own records (the recording's measured torques
//! and cycles, `gate.jsonl`'s acceleration clamps per joint), the running hours add up
//! over the runs, and a policy manifest cites the ledger by the digest of its first
//! lines: a later run's append keeps the citation valid, a changed line breaks it.

mod common;

use chunkrt_testkit::edit::Edit;
use chunkrt_tests::recording;
use common::{repo, temp_dir};
use std::path::{Path, PathBuf};
use std::process::Output;

const ID: &str = "arm-under-test";

/// `rt-config/sim-scripted.toml` at 2 rad/s with acceleration limits the policy's
/// motion meets (gate clamps: shocks), threads unpinned, and `[wear]`.
fn config_in(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml"))
        .unwrap()
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n")
        .edit("max_vel_rad_s = 0.8\n", "max_vel_rad_s = 2.0\n")
        .edit(
            "max_acc_rad_s2 = [15.0, 7.5, 10.0, 12.5, 15.0, 20.0, 20.0]",
            "max_acc_rad_s2 = [1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5]",
        )
        .edit(
            "brake_acc_rad_s2 = [7.5, 3.75, 5.0, 6.25, 7.5, 10.0, 10.0]",
            "brake_acc_rad_s2 = [1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.5]",
        )
        + &format!("\n[wear]\nledger = \"wear.jsonl\"\nhardware_id = \"{ID}\"\n");
    let path = dir.join("wear.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn chunkrt(args: &[&str], paths: &[&Path]) -> Output {
    common::chunkrt_at(args, paths)
}

fn text(o: &Output) -> String {
    common::output_text(o)
}

fn ledger(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("wear.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs `config` for `secs` into `out`; checks the ledger's newest line against the
/// run's recording and gate log; returns its running seconds.
fn run_and_check(config: &Path, out: &Path, secs: &str) -> f64 {
    let o = chunkrt(
        &[
            "run",
            "--duration",
            secs,
            "--quiet",
            "--no-plots",
            "--config",
        ],
        &[config, Path::new("--out"), out],
    );
    assert!(o.status.success(), "{}", text(&o));
    let line = ledger(config.parent().unwrap()).pop().unwrap();
    assert_eq!(line["hardware_id"], ID);
    assert_eq!(line["backend"], "sim");
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    // Running time: the cycles the recording holds, at 20 ms.
    let running_s = line["running_s"].as_f64().unwrap();
    assert!(
        (running_s - cycles.len() as f64 * 0.02).abs() < 1e-9,
        "{running_s} s vs {} cycles",
        cycles.len()
    );
    // Torque RMS and peak per joint from the recorded measurements.
    for j in 0..7 {
        let taus: Vec<f64> = cycles.iter().map(|c| c.feedback_torque_nm[j]).collect();
        let rms = (taus.iter().map(|t| t * t).sum::<f64>() / taus.len() as f64).sqrt();
        let peak = taus.iter().fold(0.0f64, |m, t| m.max(t.abs()));
        let (l_rms, l_peak) = (
            line["torque_rms_nm"][j].as_f64().unwrap(),
            line["torque_peak_nm"][j].as_f64().unwrap(),
        );
        assert!(
            (l_rms - rms).abs() <= 1e-9 * (1.0 + rms),
            "joint {j}: rms {l_rms} vs {rms}"
        );
        assert!(
            (l_peak - peak).abs() <= 1e-12,
            "joint {j}: peak {l_peak} vs {peak}"
        );
        assert!(peak > 0.0, "joint {j} carried torque");
    }
    // Shocks at the acceleration limit per joint: the gate log's runs of them.
    let mut clamps = [0u64; 7];
    for l in std::fs::read_to_string(out.join("gate.jsonl"))
        .unwrap()
        .lines()
    {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["constraint"] == "acceleration" {
            clamps[v["joint"].as_u64().unwrap() as usize] += v["repeats"].as_u64().unwrap();
        }
    }
    let logged: Vec<u64> = (0..7)
        .map(|j| line["shocks"]["acceleration"][j].as_u64().unwrap())
        .collect();
    assert_eq!(logged, clamps.to_vec());
    assert!(
        clamps.iter().sum::<u64>() > 0,
        "the gate clamped at the acceleration limit"
    );
    running_s
}

#[test]
fn every_run_appends_its_wear_and_a_manifest_cites_the_ledger_up_to_a_line() {
    let dir = temp_dir("wear", "ledger");
    let config = config_in(&dir);
    let first = run_and_check(&config, &dir.join("run1"), "2s");
    let second = run_and_check(&config, &dir.join("run2"), "3s");
    let lines = ledger(&dir);
    assert_eq!(lines.len(), 2);
    let hours = |l: &serde_json::Value| l["running_hours_total"].as_f64().unwrap();
    assert!((hours(&lines[0]) - first / 3600.0).abs() < 1e-12);
    assert!((hours(&lines[1]) - (first + second) / 3600.0).abs() < 1e-12);

    // The citation `chunkrt wear` prints, in a copy of the bundled flow policy's
    // manifest: `policy inspect` (which checks every cited digest) accepts it.
    let ledger_file = dir.join("wear.jsonl");
    let o = chunkrt(
        &["wear"],
        &[&ledger_file, Path::new("--manifest-dir"), &dir],
    );
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains(&format!("{ID:<32}     2")), "{out}");
    let block = &out[out.find("[[adaptation_wear_ledger]]").expect("a citation")..];
    assert!(
        block.contains("entries = 2") && block.contains("ledger = \"wear.jsonl\""),
        "{block}"
    );
    let manifest = chunkrt_testkit::policy_files::copy_bundled_policy("flow", &dir);
    let m = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{m}\n{block}")).unwrap();
    let inspect = || chunkrt(&["policy", "inspect"], &[&manifest]);
    let o = inspect();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("{ID}: ")) && text(&o).contains("(its first 2 line(s))"),
        "{}",
        text(&o)
    );

    // A third run appends: the first two lines, and so the citation, stand.
    let o = chunkrt(
        &[
            "run",
            "--duration",
            "1s",
            "--quiet",
            "--no-plots",
            "--config",
        ],
        &[&config, Path::new("--out"), &dir.join("run3")],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(ledger(&dir).len(), 3);
    let o = inspect();
    assert!(o.status.success(), "{}", text(&o));

    // One cited line changed: refused, the entry named.
    let t = std::fs::read_to_string(&ledger_file).unwrap();
    let tampered = t.replacen(
        &format!("\"hardware_id\":\"{ID}\""),
        "\"hardware_id\":\"another-arm\"",
        1,
    );
    assert_ne!(t, tampered);
    std::fs::write(&ledger_file, tampered).unwrap();
    let o = inspect();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("adaptation_wear_ledger[0].ledger"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 56: a ledger line with a running time no run records (negative, absurd,
/// denormal) is refused with its line, by `chunkrt wear` and by `validate` of a config
/// that appends to the ledger (exit 2, before anything moves); before, `wear` summed
/// -5 s or 1e308 s into the totals it printed and cited.
#[test]
fn a_ledger_line_with_an_absurd_running_time_is_refused_with_its_line() {
    let dir = temp_dir("wear", "absurd");
    let config = config_in(&dir);
    let ledger = dir.join("wear.jsonl");
    let good = format!("{{\"hardware_id\":\"{ID}\",\"running_s\":2.0}}");
    for (value, shown) in [("-5.0", "-5"), ("1e308", "1e308"), ("5e-324", "5e-324")] {
        std::fs::write(
            &ledger,
            format!("{good}\n{{\"hardware_id\":\"{ID}\",\"running_s\":{value}}}\n"),
        )
        .unwrap();
        let says = format!(
            "wear.jsonl: line 2: running_s = {shown}: expected the run's running time, 0 to \
             31622400 s (366 days)"
        );
        let o = chunkrt(&["wear"], &[&ledger]);
        assert_eq!(o.status.code(), Some(2), "{value}: {}", text(&o));
        assert!(text(&o).contains(&says), "{value}: {}", text(&o));
        let o = chunkrt(&["validate"], &[&config]);
        assert_eq!(o.status.code(), Some(2), "{value}: {}", text(&o));
        assert!(text(&o).contains(&says), "{value}: {}", text(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
