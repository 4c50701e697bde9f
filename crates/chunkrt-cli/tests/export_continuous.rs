//! Any run's record can become a dataset (issue 59): a run without `[episodes]` (a
//! service's run in `--runs-dir`) exported by `chunkrt export lerobot` as one episode,
//! read back with the parquet crate and judged against the recording read raw with the
//! mcap crate: one frame per recorded cycle, the command as executed, the measured state,
//! and each frame's goal the one the policy pursued at that cycle's observation (the
//! published inference messages' goal index into the report's `policy_goals_rad`).
//! `CHUNKRT_BIN` runs it against another build (the one before refuses: "no episode in
//! events.jsonl").

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use common::{read_parquet, sim_with};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The recording's cycles (cycle, command) and published goal changes (observation,
/// goal), read raw.
type Raw = (Vec<(u64, Vec<f64>, Vec<f64>)>, Vec<(u64, u64)>);

fn raw(recording: &Path) -> Raw {
    let bytes = std::fs::read(recording).unwrap();
    let (mut cycles, mut goals) = (Vec::new(), Vec::new());
    for m in mcap::MessageStream::new(&bytes).unwrap() {
        let m = m.unwrap();
        let v: Value = serde_json::from_slice(&m.data).unwrap();
        let nums = |k: &str| -> Vec<f64> {
            v[k].as_array()
                .unwrap_or_else(|| panic!("{k} in {v}"))
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        };
        match m.channel.topic.as_str() {
            "/chunkrt/cycle" => cycles.push((
                v["cycle"].as_u64().unwrap(),
                nums("command_rad"),
                nums("feedback_rad"),
            )),
            "/chunkrt/inference" if v["status"] == "published" => {
                if let (Some(obs), Some(goal)) = (v["obs"]["seq"].as_u64(), v["goal"].as_u64()) {
                    goals.push((obs, goal));
                }
            }
            _ => {}
        }
    }
    (cycles, goals)
}

#[test]
fn a_run_without_episodes_exports_as_one_episode_with_the_goals_it_pursued() {
    let dir = common::temp_dir("export-continuous", "run");
    let config = sim_with(&dir, "sim.toml", "");
    let runs = dir.join("runs");
    let o = Command::new(common::bin())
        .args([
            "run",
            "--quiet",
            "--no-plots",
            "--duration",
            "6s",
            "--config",
        ])
        .arg(&config)
        .arg("--runs-dir")
        .arg(&runs)
        .env("CHUNKRT_LOG", "warn")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = runs.join("latest");
    let ds = dir.join("dataset");
    let o = Command::new(common::bin())
        .args(["export", "lerobot"])
        .arg(&run)
        .arg("--out")
        .arg(&ds)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let report: Value = common::read_json_checked(&run.join("report.json"));
    let goal_list: Vec<Vec<f64>> =
        serde_json::from_value(report["config"]["policy_goals_rad"].clone()).unwrap();
    assert!(goal_list.len() >= 2, "{goal_list:?}");
    let (cycles, changes) = raw(&run.join("recording.mcap"));
    assert!(
        changes.windows(2).any(|w| w[0].1 != w[1].1),
        "the policy never changed its goal in the run: nothing to judge"
    );

    let data = read_parquet(&ds, "data/chunk-000/file-000.parquet");
    assert_eq!(
        data.num_rows(),
        cycles.len(),
        "one frame per recorded cycle"
    );
    let col = |n: &str| data.column_by_name(n).unwrap().clone();
    let vec_at = |n: &str, r: usize| -> Vec<f32> {
        col(n)
            .as_fixed_size_list()
            .value(r)
            .as_primitive::<Float32Type>()
            .values()
            .to_vec()
    };
    let episode = col("episode_index");
    let episode = episode.as_primitive::<Int64Type>();
    let as32 = |v: &[f64]| v.iter().map(|x| *x as f32).collect::<Vec<f32>>();
    let mut goal = changes.first().map_or(0, |c| c.1) as usize;
    let mut next = 0;
    let mut goals_seen = std::collections::BTreeSet::new();
    for (row, (cycle, command, feedback)) in cycles.iter().enumerate() {
        while next < changes.len() && changes[next].0 <= *cycle {
            goal = changes[next].1 as usize;
            next += 1;
        }
        goals_seen.insert(goal);
        assert_eq!(episode.value(row), 0, "row {row}");
        assert_eq!(vec_at("action", row), as32(command), "row {row}");
        assert_eq!(
            vec_at("observation.state", row)[..feedback.len()],
            as32(feedback)[..],
            "row {row}"
        );
        assert_eq!(
            vec_at("observation.environment_state", row),
            as32(&goal_list[goal % goal_list.len()]),
            "row {row} (cycle {cycle})"
        );
    }
    assert!(goals_seen.len() >= 2, "{goals_seen:?}");
    let meta = read_parquet(&ds, "meta/episodes/chunk-000/file-000.parquet");
    assert_eq!(meta.num_rows(), 1);
    let outcome = meta.column_by_name("outcome").unwrap().clone();
    assert_eq!(outcome.as_string::<i32>().value(0), "continuous");
    let _ = std::fs::remove_dir_all(&dir);
}
