//! The adaptation loop end to end (issue 40), through `scripts/adapt.sh` and the real
//! binary: the frozen base on the worn arm, its record exported, a residual trained on it
//! (`scripts/adapt/train_residual.py`), the base with the residual on the same episodes.
//! Judged from what the runs recorded and what the files say, and the book's table
//! (docs/measurements/adapt.md) gated at its figures.

mod common;

use chunkrt_tests::recording;
use common::{repo, temp_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A Python with what the loop needs: numpy, pyarrow (the dataset), onnx (the model).
fn python() -> Option<PathBuf> {
    common::python_that_imports("numpy, pyarrow, onnx")
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The book's adaptation table (docs/measurements/adapt.md): policy -> (successes,
/// episodes, goal error, gate interventions per episode).
fn book_table() -> Vec<(String, u64, u64, f64, f64)> {
    let page = repo().join("docs/measurements/adapt.md");
    let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let start = text
        .find("| held-out starts | episodes | success |")
        .expect("docs/measurements/adapt.md has the adaptation table");
    text[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let (ok, n) = cells[3].split_once('/').unwrap();
            (
                cells[1].to_string(),
                ok.parse().unwrap(),
                n.parse().unwrap(),
                cells[4].parse().unwrap(),
                cells[6].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_residual_trained_on_the_frozen_bases_record_reaches_the_goals_it_missed_from_held_out_starts()
{
    let Some(py) = python() else {
        chunkrt_testkit::missing_prerequisite(
            "adapt",
            "no Python with numpy, pyarrow and onnx (scripts/setup.sh)",
        );
        return;
    };
    let dir = temp_dir("adapt", "loop");
    let out = dir.join("adapt");
    let o = Command::new("bash")
        .arg(repo().join("scripts/adapt.sh"))
        .env("OUT", &out)
        .env("CHUNKRT_BIN", common::bin())
        .env("CHUNKRT_PYTHON", &py)
        .output()
        .unwrap();
    let text = common::output_text(&o);
    assert!(o.status.success(), "{text}");
    eprintln!("{text}");

    // The residual is bound to the base it was trained on, and its ledger is the base's
    // stages then its own.
    let base = std::fs::read_to_string(repo().join("rt-config/policies/flow.toml")).unwrap();
    let base: toml::Value = toml::from_str(&base).unwrap();
    let res = std::fs::read_to_string(out.join("residual/residual.toml")).unwrap();
    let res: toml::Value = toml::from_str(&res).unwrap();
    assert_eq!(res["residual"]["base_sha256"], base["model_sha256"]);
    assert_eq!(res["action"]["encoding"].as_str(), Some("residual"));
    let stages = res["regime_sequence"].as_array().unwrap();
    let base_stages = base["regime_sequence"].as_array().unwrap();
    assert_eq!(&stages[..base_stages.len()], &base_stages[..]);
    assert_eq!(stages.len(), base_stages.len() + 1);
    assert_eq!(
        stages.last().unwrap()["checkpoint_sha256"],
        res["model_sha256"]
    );
    // Trained on the seen starts only: the held-out episodes of the frozen run are not
    // among those it used.
    let frozen_eps: Vec<Value> = std::fs::read_to_string(out.join("frozen/events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "episode")
        .collect();
    let trained: Vec<u64> = json(&out.join("train.json"))["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_u64().unwrap())
        .collect();
    let seen: Vec<u64> = frozen_eps
        .iter()
        .enumerate()
        .filter(|(_, e)| e["held_out"] == false)
        .map(|(k, _)| k as u64)
        .collect();
    assert_eq!(
        trained, seen,
        "trained on exactly the seen starts' episodes"
    );
    // The adapted run's commands came from that base and that residual.
    let cfg = &common::read_json_checked(&out.join("adapted/report.json"))["config"];
    assert_eq!(
        cfg["policy_model_sha256"].as_str(),
        base["model_sha256"].as_str()
    );
    assert_eq!(
        cfg["residual_model_sha256"].as_str(),
        res["model_sha256"].as_str()
    );

    // Judged on the recording: where each held-out episode ended, the measured position
    // against its goal. Frozen, the play leaves it short; with the residual it arrives.
    let goals: Vec<Vec<f64>> =
        serde_json::from_value(cfg["episodes"]["goals_rad"].clone()).unwrap();
    let end_errors = |run: &str| -> Vec<f64> {
        let run = out.join(run);
        let eps: Vec<Value> = std::fs::read_to_string(run.join("events.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["event"] == "episode" && e["held_out"] == true)
            .collect();
        let (cycles, _) = recording::read(&run.join("recording.mcap")).unwrap();
        eps.iter()
            .map(|e| {
                let k = e["episode"].as_u64().unwrap();
                let last = cycles
                    .iter()
                    .rfind(|c| c.episode == Some((k, "running".to_string())))
                    .expect("the episode's cycles recorded");
                let goal = &goals[k as usize % goals.len()];
                last.feedback_rad
                    .iter()
                    .zip(goal)
                    .map(|(m, g)| (m - g).abs())
                    .fold(0.0, f64::max)
            })
            .collect()
    };
    let frozen = end_errors("frozen");
    let adapted = end_errors("adapted");
    eprintln!("held-out end errors: frozen {frozen:?}, residual {adapted:?}");
    assert_eq!((frozen.len(), adapted.len()), (4, 4));
    let tolerance = 0.02; // rt-config/sim-worn.toml [episodes] tolerance_rad
    assert!(frozen.iter().all(|e| *e > tolerance), "frozen: {frozen:?}");
    assert!(
        adapted.iter().all(|e| *e <= tolerance),
        "residual: {adapted:?}"
    );

    // The book's table, gated at its figures: the successes exactly, the goal error
    // within 3 mrad.
    let summaries = json(&out.join("episodes.json"))["summaries"].clone();
    let table = book_table();
    assert_eq!(table.len(), 2, "{table:?}");
    for (policy, ok, n, goal_err, gate_per_episode) in table {
        let s = summaries
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["starts"] == "held_out" && s["policy"] == policy.as_str())
            .unwrap_or_else(|| panic!("no held-out {policy} summary: {summaries}"));
        let measured_ok = (s["success_rate"].as_f64().unwrap() * n as f64).round() as u64;
        assert_eq!(
            (s["episodes"].as_u64().unwrap(), measured_ok),
            (n, ok),
            "{policy}: {s}"
        );
        let e = s["goal_err_rad"].as_f64().unwrap();
        assert!(
            (e - goal_err).abs() <= 0.003,
            "{policy}: goal error {e} where the book says {goal_err}"
        );
        // The permission gate's interventions, to the book's figure (issue 56: a
        // residual that set in with a step in its velocity made it act 7.2 times an
        // episode).
        let g = s["gate_interventions_per_episode"].as_f64().unwrap();
        assert!(
            (g - gate_per_episode).abs() < 0.05,
            "{policy}: {g} gate interventions per episode where the book says {gate_per_episode}"
        );
    }
    // The figure: every episode a marker in each of its three panels, the 12 from seen
    // starts circles (with the legend's two), the 8 held-out ones triangles.
    let svg = std::fs::read_to_string(out.join("episodes.svg")).unwrap();
    assert_eq!(svg.matches("<circle").count(), 12 * 3 + 2);
    assert!(out.join("episodes.png").exists());
    // And the seen starts' rows, as the book says (docs/measurements/adapt.md): frozen 0/6, residual 6/6.
    for (policy, rate) in [("frozen", 0.0), ("residual", 1.0)] {
        let s = summaries
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["starts"] == "seen" && s["policy"] == policy)
            .unwrap_or_else(|| panic!("no seen {policy} summary: {summaries}"));
        assert_eq!(
            (s["episodes"].as_u64(), s["success_rate"].as_f64()),
            (Some(6), Some(rate)),
            "{policy}: {s}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
