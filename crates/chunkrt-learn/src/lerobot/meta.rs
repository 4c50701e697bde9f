//! Writing the metadata: `meta/episodes`, `meta/tasks.parquet`, `meta/info.json`, what
//! chunkrt adds (`meta/chunkrt.json`) and `meta/stats.json`.

use super::read::checkpoints;
use super::stats::{image_stats, stats};
use super::write::{bools, i64s, write_json, write_parquet, IMAGE_FEATURE};
use super::{Episode, ExportError, Frame, PartialRun};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

fn werr(path: &Path, what: String) -> ExportError {
    ExportError::Write {
        path: path.to_path_buf(),
        what,
    }
}

/// meta/episodes, meta/tasks.parquet, meta/info.json, meta/stats.json.
pub(super) fn write_meta(
    out: &Path,
    episodes: &[Episode],
    partial: &[PartialRun],
    batch: &RecordBatch,
    (fps, dof): (u32, usize),
    task: &str,
) -> Result<(), ExportError> {
    write_episodes(out, episodes, task)?;
    write_tasks(out, task)?;
    write_json(&out.join("meta/info.json"), &info(episodes, batch, fps))?;
    // What chunkrt adds (LeRobot's info.json warns on keys it does not know).
    let path = out.join("meta/chunkrt.json");
    let ours = chunkrt_json(episodes, partial, (fps, dof))?;
    write_json(&path, &ours)?;
    let path = out.join("meta/stats.json");
    let mut stats = stats(batch);
    if episodes[0].image_size.is_some() {
        let frames: Vec<&Frame> = episodes.iter().flat_map(|e| &e.frames).collect();
        stats[IMAGE_FEATURE] = image_stats(&frames).map_err(|e| werr(&path, e))?;
    }
    write_json(&path, &stats)
}

/// meta/episodes: row i is episode i, with its rows of the data table.
fn write_episodes(out: &Path, episodes: &[Episode], task: &str) -> Result<(), ExportError> {
    let mut from = 0i64;
    let mut bounds = Vec::new();
    for e in episodes {
        let to = from + e.frames.len() as i64;
        bounds.push((from, to));
        from = to;
    }
    let n = episodes.len();
    let mut tasks_b =
        arrow_array::builder::ListBuilder::new(arrow_array::builder::StringBuilder::new());
    let mut outcome_b = arrow_array::builder::StringBuilder::new();
    let mut run_b = arrow_array::builder::StringBuilder::new();
    for e in episodes {
        tasks_b.values().append_value(task);
        tasks_b.append(true);
        outcome_b.append_value(&e.outcome);
        run_b.append_value(e.run.display().to_string());
    }
    let ep_cols: Vec<ArrayRef> = vec![
        i64s(0..n as i64),
        Arc::new(tasks_b.finish()),
        i64s(bounds.iter().map(|(a, b)| b - a)),
        i64s((0..n).map(|_| 0)),
        i64s((0..n).map(|_| 0)),
        i64s(bounds.iter().map(|b| b.0)),
        i64s(bounds.iter().map(|b| b.1)),
        i64s((0..n).map(|_| 0)),
        i64s((0..n).map(|_| 0)),
        Arc::new(outcome_b.finish()),
        bools(episodes.iter().map(|e| e.residual)),
        bools(episodes.iter().map(|e| e.held_out)),
        Arc::new(run_b.finish()),
        i64s(episodes.iter().map(|e| e.run_episode as i64)),
    ];
    let path = out.join("meta/episodes/chunk-000/file-000.parquet");
    let eb = RecordBatch::try_new(Arc::new(Schema::new(episode_fields())), ep_cols)
        .map_err(|e| werr(&path, e.to_string()))?;
    write_parquet(&path, &eb)
}

/// The columns of meta/episodes: LeRobot's, then the outcome and where it came from.
fn episode_fields() -> Vec<Field> {
    vec![
        Field::new("episode_index", DataType::Int64, true),
        Field::new(
            "tasks",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
        Field::new("length", DataType::Int64, true),
        Field::new("data/chunk_index", DataType::Int64, true),
        Field::new("data/file_index", DataType::Int64, true),
        Field::new("dataset_from_index", DataType::Int64, true),
        Field::new("dataset_to_index", DataType::Int64, true),
        Field::new("meta/episodes/chunk_index", DataType::Int64, true),
        Field::new("meta/episodes/file_index", DataType::Int64, true),
        Field::new("outcome", DataType::Utf8, true),
        Field::new("residual", DataType::Boolean, true),
        Field::new("held_out", DataType::Boolean, true),
        Field::new("run", DataType::Utf8, true),
        Field::new("run_episode", DataType::Int64, true),
    ]
}

/// meta/tasks.parquet with the pandas index metadata pandas rebuilds the task from.
fn write_tasks(out: &Path, task: &str) -> Result<(), ExportError> {
    let pandas = json!({
        "index_columns": ["task"],
        "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode", "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": null},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": null}],
        "creator": {"library": "pyarrow", "version": "21.0.0"},
        "pandas_version": "2.2.3"
    });
    let mut md = HashMap::new();
    md.insert("pandas".to_string(), pandas.to_string());
    let ts = Schema::new_with_metadata(
        vec![
            Field::new("task_index", DataType::Int64, true),
            Field::new("task", DataType::Utf8, true),
        ],
        md,
    );
    let mut tb = arrow_array::builder::StringBuilder::new();
    tb.append_value(task);
    let path = out.join("meta/tasks.parquet");
    let tbatch = RecordBatch::try_new(
        Arc::new(ts),
        vec![i64s(std::iter::once(0)), Arc::new(tb.finish())],
    )
    .map_err(|e| werr(&path, e.to_string()))?;
    write_parquet(&path, &tbatch)
}

/// meta/info.json: LeRobot's description of the dataset and its features.
fn info(episodes: &[Episode], batch: &RecordBatch, fps: u32) -> Value {
    let n = episodes.len();
    json!({
        "codebase_version": "v3.0",
        "fps": fps,
        "features": features(batch, episodes[0].image_size),
        "total_episodes": n,
        "total_frames": batch.num_rows(),
        "total_tasks": 1,
        "chunks_size": 1000,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": null,
        "robot_type": "chunkrt",
        "splits": {"train": format!("0:{n}")},
    })
}

/// Each column of the data table as a LeRobot feature: its dtype, shape and names (the
/// image, with `image_size`, as LeRobot's image feature).
fn features(batch: &RecordBatch, image_size: Option<(u32, u32)>) -> serde_json::Map<String, Value> {
    let mut features = serde_json::Map::new();
    for f in batch.schema().fields() {
        if let (DataType::Struct(_), Some((h, w))) = (f.data_type(), image_size) {
            features.insert(
                f.name().clone(),
                json!({"dtype": "image", "shape": [h, w, 3], "names": ["height", "width", "channels"]}),
            );
            continue;
        }
        let (dtype, shape) = match f.data_type() {
            DataType::FixedSizeList(item, n) => (dtype_name(item.data_type()), *n as usize),
            dt => (dtype_name(dt), 1),
        };
        features.insert(
            f.name().clone(),
            json!({"dtype": dtype, "shape": [shape], "names": if shape > 1 { json!((0..shape).map(|i| format!("{i}")).collect::<Vec<_>>()) } else { Value::Null }}),
        );
    }
    features
}

fn dtype_name(dt: &DataType) -> &'static str {
    match dt {
        DataType::Float32 => "float32",
        DataType::Int64 => "int64",
        DataType::Boolean => "bool",
        _ => "float64",
    }
}

/// meta/chunkrt.json: the joints, the frame rate and each run's checkpoints (and, for a
/// run exported in part, its cut).
fn chunkrt_json(
    episodes: &[Episode],
    partial: &[PartialRun],
    (fps, dof): (u32, usize),
) -> Result<Value, ExportError> {
    let runs: std::collections::BTreeSet<&Path> =
        episodes.iter().map(|e| e.run.as_path()).collect();
    let mut runs = runs
        .into_iter()
        .map(checkpoints)
        .collect::<Result<Vec<Value>, _>>()?;
    // A run exported in part carries its cut (a whole run's entry is as before).
    for r in &mut runs {
        if let Some(p) = partial
            .iter()
            .find(|p| r["run"] == p.run.display().to_string())
        {
            r["cut"] = p.json();
        }
    }
    Ok(json!({"dof": dof, "runs": runs, "fps": fps}))
}
