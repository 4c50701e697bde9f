//! Runs' episodes as a LeRobot dataset, format v3.0 (numeric features and, with a camera,
//! the images as LeRobot `image` features; no video).
//!
//! One frame per recorded control cycle of a running episode (every `stride`-th, so the
//! frame rate is an integer `fps`). Columns:
//! - `observation.state`: measured positions, then velocities (backward difference of the
//!   measured positions over one control period), float32 `[2 dof]`;
//! - `observation.environment_state`: the episode's goal, float32 `[dof]`;
//! - `action`: the command that left the permission gate (what the drives got);
//! - `action.proposed`: what the gate was given (base + correction, after the action
//!   filter); `action.base`, `action.residual`: its parts (base = proposal and residual
//!   0 without a residual policy);
//! - `gate.mask`: per joint the constraints that acted, int64 `[dof]`;
//! - `gate.blocked`: the permission gate changed the proposal (a blocked proposal: kept,
//!   never an expert target); `intervention`: the policy had no authority or the
//!   gate blocked it;
//! - `episode.success`: the episode ended as a success;
//! - `observation.image` (a run with a camera): the newest camera frame captured by the
//!   cycle's deadline, the PNG the recording holds, stored as `datasets.Image()` does;
//! - the five columns every LeRobot frame has: `timestamp`, `frame_index`,
//!   `episode_index`, `index`, `task_index`.
//!
//! `meta/episodes` holds each episode's rows, its outcome and whether the residual had
//! authority; `meta/info.json` the features and, under `chunkrt`, the runs and the
//! policy digests; `meta/stats.json` min, max, mean, std, count and quantiles per
//! feature. Layout and types follow lerobot 0.6.1's reader: `scripts/lerobot/check_dataset.py`
//! loads an export with `LeRobotDataset`; `chunkrt-cli`'s episodes test reads one back
//! against the recording.

use arrow_array::builder::{
    BooleanBuilder, FixedSizeListBuilder, Float32Builder, Int64Builder, PrimitiveBuilder,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use chunkrt_telemetry::readback::Cut;

/// Why a dataset could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A run's records could not be read or lack what the export needs.
    #[error("{run}: {what}")]
    Run {
        /// The run directory.
        run: PathBuf,
        /// What was wrong.
        what: String,
    },
    /// The dataset could not be written.
    #[error("{path}: {what}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What failed.
        what: String,
    },
}

/// One frame's values.
#[derive(Clone, Debug, Default)]
struct Frame {
    state: Vec<f32>,
    goal: Vec<f32>,
    action: Vec<f32>,
    proposed: Vec<f32>,
    base: Vec<f32>,
    residual: Vec<f32>,
    mask: Vec<i64>,
    blocked: bool,
    intervention: bool,
    /// The newest camera image captured by the cycle's deadline (PNG), with a camera.
    image: Option<Arc<[u8]>>,
}

/// One episode's frames and outcome.
#[derive(Clone, Debug)]
pub struct Episode {
    frames: Vec<Frame>,
    /// Its outcome (`success`, `timeout`, ...).
    pub outcome: String,
    /// The residual had authority in it.
    pub residual: bool,
    /// Its start pose was held out.
    pub held_out: bool,
    /// The run it came from.
    pub run: PathBuf,
    /// Its index in that run.
    pub run_episode: u64,
    /// The camera images' size `(height, width)`, when the run had a camera.
    pub image_size: Option<(u32, u32)>,
}

/// What was exported.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Episodes written.
    pub episodes: usize,
    /// Frames written.
    pub frames: usize,
    /// Frames per second.
    pub fps: u32,
    /// Joints.
    pub dof: usize,
    /// The runs exported in part (`allow_partial`): each one's cut and the episodes
    /// left out. Empty: every episode of every run is in the dataset.
    pub partial: Vec<PartialRun>,
}

/// A run whose recording is not whole, exported in part: its whole episodes only.
#[derive(Clone, Debug)]
pub struct PartialRun {
    /// The run directory.
    pub run: PathBuf,
    /// Where and why its recording was cut.
    pub cut: Cut,
    /// Its episodes (their index in the run) left out: ended (in `events.jsonl`) but not
    /// wholly recorded before the cut.
    pub left_out: Vec<u64>,
}

impl PartialRun {
    /// As `meta/chunkrt.json` records it.
    fn json(&self) -> Value {
        let c = &self.cut;
        json!({
            "file": c.file.display().to_string(),
            "offset_bytes": c.offset,
            "file_bytes": c.file_bytes,
            "why": c.why,
            "last_whole_cycle": c.last_cycle.as_ref().map(|l| l.cycle),
            "last_whole_cycle_t_s": c.last_cycle.as_ref().map(|l| l.t_s),
            "episodes_left_out": self.left_out,
        })
    }
}

fn run_err(run: &Path, what: impl Into<String>) -> ExportError {
    ExportError::Run {
        run: run.to_path_buf(),
        what: what.into(),
    }
}

fn read_report(run: &Path) -> Result<Value, ExportError> {
    let text = chunkrt_files::read_text_bounded(&run.join("report.json"), 64 << 20, "report")
        .map_err(|e| run_err(run, e.to_string()))?
        .map_err(|_| run_err(run, "report.json is not UTF-8"))?;
    serde_json::from_str(&text).map_err(|e| run_err(run, format!("report.json: {e}")))
}

/// The checkpoints `run`'s commands came from, as its report names them: the base
/// policy's manifest and model digest and, with a residual in authority, the residual's
/// (null when the run was frozen, or its report predates them).
fn checkpoints(run: &Path) -> Result<Value, ExportError> {
    let report = read_report(run)?;
    let c = &report["config"];
    Ok(json!({
        "run": run.display().to_string(),
        "policy_manifest": c["policy_manifest"],
        "policy_model_sha256": c["policy_model_sha256"],
        "residual_manifest": c["residual_manifest"],
        "residual_model_sha256": c["residual_model_sha256"],
    }))
}

/// A run's episode lines, its episodes' goals, its control period (s) and whether it
/// is one continuous run (no `[episodes]`: the whole run is its one episode, each
/// cycle's goal the one the policy pursued at that cycle's observation).
type RunPlan = (Vec<Value>, Vec<Vec<f64>>, f64, bool);

/// The outcome of a run without `[episodes]`, exported as one episode.
pub const CONTINUOUS_OUTCOME: &str = "continuous";

/// The episodes of `run` (its events), the goals of its plan (its report's config: the
/// episodes' goals, or without `[episodes]` the policy's) and its control period in
/// seconds.
fn run_plan(run: &Path) -> Result<RunPlan, ExportError> {
    // Each ended episode once, in order: a repeated line is refused, not exported twice.
    let mut episodes =
        chunkrt_telemetry::episodes::read_log(run).map_err(|e| run_err(run, e.to_string()))?;
    let report = read_report(run)?;
    let cfg = &report["config"];
    let continuous = cfg.get("episodes").is_none_or(Value::is_null);
    let goals_key = if continuous {
        "policy_goals_rad"
    } else {
        "episodes.goals_rad"
    };
    let goals = match continuous {
        true => cfg["policy_goals_rad"].clone(),
        false => cfg["episodes"]["goals_rad"].clone(),
    };
    let goals: Vec<Vec<f64>> = serde_json::from_value(goals).map_err(|_| {
        run_err(
            run,
            format!(
                "report.json's config has no {goals_key}{}",
                if continuous {
                    " (a run without [episodes] is exported as one episode whose goal is \
                     the policy's at each cycle; this run's policy names no goals, or \
                     an older chunkrt recorded it)"
                } else {
                    ""
                }
            ),
        )
    })?;
    if continuous {
        episodes = vec![json!({
            "episode": 0,
            "outcome": CONTINUOUS_OUTCOME,
            "residual": cfg["residual_manifest"].is_string(),
            "held_out": false,
        })];
    } else if episodes.is_empty() {
        return Err(run_err(
            run,
            "no episode in events.jsonl (its [episodes] ended none)",
        ));
    }
    let period_ms = cfg["period_ms"]
        .as_f64()
        .ok_or_else(|| run_err(run, "report.json's config has no period_ms"))?;
    Ok((episodes, goals, period_ms * 1e-3, continuous))
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|x| *x as f32).collect()
}

/// What one run gives the dataset.
#[derive(Clone, Debug)]
pub struct RunRead {
    /// Its episodes, each with its frames, in order.
    pub episodes: Vec<Episode>,
    /// The period of its frames (s): the control period times the stride.
    pub frame_dt_s: f64,
    /// Its recording was cut (read with `allow_partial`): where, and what was left out.
    pub partial: Option<PartialRun>,
    /// Its start (the recording's clock record): two runs with the same are one run.
    pub start: Option<(u64, i64)>,
}

/// Reads `run`'s running episodes as frames, every `stride`-th cycle.
///
/// A recording that is not whole (cut short, or failing a CRC: see
/// [`chunkrt_telemetry::readback::Cut`]) is refused, naming the run and the cut; with
/// `allow_partial` only the episodes wholly recorded before the cut are read (an
/// episode whose end the intact part holds: a cycle after its running phase), and
/// [`RunRead::partial`] says which were left out.
pub fn read_run(
    run: &Path,
    stride: NonZeroUsize,
    allow_partial: bool,
) -> Result<RunRead, ExportError> {
    let stride = stride.get();
    let (eps, goals, period_s, continuous) = run_plan(run)?;
    let files =
        chunkrt_telemetry::readback::segments(run).map_err(|e| run_err(run, e.to_string()))?;
    // The recorded cycles say which episode's running phase their command was made in.
    let index: Vec<u64> = eps
        .iter()
        .map(|e| e["episode"].as_u64().unwrap_or(u64::MAX))
        .collect();
    let mut frames: Vec<Vec<Frame>> = vec![Vec::new(); eps.len()];
    let mut seen: Vec<usize> = vec![0; eps.len()];
    let mut prev_fb: Option<Vec<f64>> = None;
    let images = camera_images(run, &files)?;
    let image_size = images.first().map(|i| i.2);
    let (mut next_image, mut no_image): (usize, Option<String>) = (0, None);
    // The shaping stages (action filter, residual gate) are not blocks.
    let shaping = chunkrt_core::SHAPING_BITS;
    // Per episode, the first cycle after its running phase (the recording holds its end).
    let mut ended_at: Vec<Option<u64>> = vec![None; eps.len()];
    // A continuous run's frames' cycles (their goal is known after the read).
    let mut cycles: Vec<u64> = Vec::new();
    let mut current: Option<usize> = None;
    let data = chunkrt_telemetry::readback::read_with(&files, None, |c| {
        let fb_prev = prev_fb.replace(c.feedback_rad.to_vec());
        // A continuous run: every cycle is its one episode's.
        let running = match continuous {
            true => Some(0),
            false => c
                .running_episode
                .and_then(|e| index.iter().position(|i| *i == e)),
        };
        if let Some(p) = current.filter(|p| running != Some(*p)) {
            ended_at[p].get_or_insert(c.cycle);
        }
        current = running;
        let Some(k) = running else {
            return;
        };
        seen[k] += 1;
        if !(seen[k] - 1).is_multiple_of(stride) {
            return;
        }
        let dof = c.command_rad.len();
        let vel: Vec<f64> = match &fb_prev {
            Some(p) if p.len() == dof => (0..dof)
                .map(|j| (c.feedback_rad[j] - p[j]) / period_s)
                .collect(),
            _ => vec![0.0; dof],
        };
        let mut state = f32s(c.feedback_rad);
        state.extend(f32s(&vel));
        // The plan's goals in turn, by the episode's index in its run (a continuous
        // run's: filled in after the read, from the goal changes it recorded).
        let goal = goals
            .get(index[k] as usize % goals.len().max(1))
            .cloned()
            .unwrap_or_default();
        if continuous {
            cycles.push(c.cycle);
        }
        let mask: Vec<i64> = (0..dof)
            .map(|j| i64::from(c.gate_mask_joints.get(j).copied().unwrap_or(0)))
            .collect();
        let blocked = c.gate_mask as u32 & !shaping != 0;
        // The newest image captured by the cycle's deadline.
        while images.get(next_image).is_some_and(|i| i.0 <= c.t_s) {
            next_image += 1;
        }
        let image = match next_image.checked_sub(1) {
            Some(i) => Some(images[i].1.clone()),
            None if !images.is_empty() => {
                no_image.get_or_insert_with(|| {
                    format!(
                        "cycle {} (episode {}, t = {:.3} s) has no camera image captured \
                         before it (the first is at {:.3} s)",
                        c.cycle, index[k], c.t_s, images[0].0
                    )
                });
                None
            }
            None => None,
        };
        frames[k].push(Frame {
            state,
            goal: f32s(&goal),
            action: f32s(c.command_rad),
            proposed: f32s(c.setpoint_rad),
            base: if c.base_rad.is_empty() {
                f32s(c.setpoint_rad)
            } else {
                f32s(c.base_rad)
            },
            residual: if c.residual_rad.is_empty() {
                vec![0.0; dof]
            } else {
                f32s(c.residual_rad)
            },
            mask,
            blocked,
            intervention: blocked || c.mode != chunkrt_core::Mode::Playing,
            image,
        });
    })
    .map_err(|e| run_err(run, e.to_string()))?;
    if let Some(e) = no_image {
        return Err(run_err(run, e));
    }
    if continuous {
        goals_by_observation(&mut frames[0], &cycles, &data.goal_changes, &goals);
    }
    let cut = data.truncated;
    if let (Some(cut), false) = (&cut, allow_partial) {
        return Err(run_err(
            run,
            format!(
                "its recording is not whole: {cut}. Exported, the dataset would hold part of \
                 the run as if it were all of it; --allow-partial exports only the episodes \
                 wholly recorded before the cut (and notes the cut in meta/chunkrt.json)"
            ),
        ));
    }
    // An episode is whole when the recording holds it to its end (or no cut at all).
    let whole = |k: usize| match &cut {
        None => true,
        Some(c) => {
            c.messages_whole
                || ended_at[k]
                    .zip(c.last_cycle.as_ref())
                    .is_some_and(|(end, last)| end <= last.cycle)
        }
    };
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for (k, (e, frames)) in eps.iter().zip(frames).enumerate() {
        let run_episode = e["episode"].as_u64().unwrap_or(0);
        if !whole(k) {
            left_out.push(run_episode);
        } else if !frames.is_empty() {
            out.push(Episode {
                frames,
                outcome: e["outcome"].as_str().unwrap_or("?").to_string(),
                residual: e["residual"] == true,
                held_out: e["held_out"] == true,
                run: run.to_path_buf(),
                run_episode,
                image_size,
            });
        }
    }
    if out.is_empty() {
        return Err(run_err(
            run,
            match &cut {
                Some(c) => format!("no episode of it was wholly recorded before the cut: {c}"),
                None => "its recording holds no cycle of a running episode (it does not say \
                         the episode and phase of each cycle: recorded by an older chunkrt?)"
                    .to_string(),
            },
        ));
    }
    Ok(RunRead {
        episodes: out,
        frame_dt_s: period_s * stride as f64,
        partial: cut.map(|cut| PartialRun {
            run: run.to_path_buf(),
            cut,
            left_out,
        }),
        start: data.start,
    })
}

/// A continuous run's frames' goals: at each frame's cycle, the goal the policy pursued
/// from the latest observation at or before it (`changes`: from observation `.0` on,
/// goal `.1`; before the first, the first goal).
fn goals_by_observation(
    frames: &mut [Frame],
    cycles: &[u64],
    changes: &[(u64, u16)],
    goals: &[Vec<f64>],
) {
    let mut next = 0;
    let mut goal = changes.first().map_or(0, |c| usize::from(c.1));
    for (f, &cycle) in frames.iter_mut().zip(cycles) {
        while changes.get(next).is_some_and(|c| c.0 <= cycle) {
            goal = usize::from(changes[next].1);
            next += 1;
        }
        if let Some(g) = goals.get(goal % goals.len().max(1)) {
            f.goal = f32s(g);
        }
    }
}

/// A recorded camera image: capture time (s since the run's start), PNG, `(height, width)`.
type CameraImage = (f64, Arc<[u8]>, (u32, u32));

/// The run's recorded camera images in capture order (none without a camera), each
/// checked to be an RGB8 PNG of the first one's size.
fn camera_images(run: &Path, files: &[PathBuf]) -> Result<Vec<CameraImage>, ExportError> {
    let recorded =
        chunkrt_telemetry::readback::images(files).map_err(|e| run_err(run, e.to_string()))?;
    let mut out: Vec<CameraImage> = Vec::with_capacity(recorded.len());
    for r in recorded {
        let bad = |what: String| run_err(run, format!("camera image {}: {what}", r.seq));
        let reader = png::Decoder::new(std::io::Cursor::new(&r.png[..]))
            .read_info()
            .map_err(|e| bad(e.to_string()))?;
        let info = reader.info();
        if (info.color_type, info.bit_depth) != (png::ColorType::Rgb, png::BitDepth::Eight) {
            return Err(bad(format!(
                "{:?} {:?}, not RGB8",
                info.color_type, info.bit_depth
            )));
        }
        let size = (info.height, info.width);
        if let Some(first) = out.first().filter(|f| f.2 != size) {
            return Err(bad(format!(
                "{} x {}, the first image is {} x {}",
                size.0, size.1, first.2 .0, first.2 .1
            )));
        }
        if out.last().is_some_and(|l| l.0 > r.t_s) {
            return Err(bad("captured before the image recorded ahead of it".into()));
        }
        out.push((r.t_s, Arc::from(r.png), size));
    }
    Ok(out)
}

/// Per channel, how many pixels of each value the frames' images hold.
fn pixel_histograms(frames: &[&Frame]) -> Result<[[u64; 256]; 3], String> {
    let mut h = [[0u64; 256]; 3];
    let mut buf = Vec::new();
    for png_bytes in frames.iter().filter_map(|f| f.image.as_deref()) {
        let mut reader = png::Decoder::new(std::io::Cursor::new(png_bytes))
            .read_info()
            .map_err(|e| e.to_string())?;
        buf.resize(reader.output_buffer_size(), 0);
        let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
        for px in buf[..info.buffer_size()].chunks_exact(3) {
            for c in 0..3 {
                h[c][px[c] as usize] += 1;
            }
        }
    }
    Ok(h)
}

/// LeRobot's image statistics: per channel, of pixels scaled to `[0, 1]`, shaped
/// `[3, 1, 1]`; `count` is the frames.
fn image_stats(frames: &[&Frame]) -> Result<Value, String> {
    let h = pixel_histograms(frames)?;
    let per = |f: &dyn Fn(&[u64; 256], u64) -> f64| -> Value {
        json!(h
            .iter()
            .map(|c| vec![vec![f(c, c.iter().sum::<u64>().max(1))]])
            .collect::<Vec<_>>())
    };
    let first = |c: &[u64; 256]| c.iter().position(|n| *n > 0).unwrap_or(0) as f64 / 255.0;
    let last = |c: &[u64; 256]| c.iter().rposition(|n| *n > 0).unwrap_or(0) as f64 / 255.0;
    let mean = |c: &[u64; 256], n: u64| {
        c.iter()
            .enumerate()
            .map(|(v, k)| v as f64 * *k as f64)
            .sum::<f64>()
            / n as f64
            / 255.0
    };
    let std = |c: &[u64; 256], n: u64| {
        let m = mean(c, n) * 255.0;
        let var = c
            .iter()
            .enumerate()
            .map(|(v, k)| (v as f64 - m).powi(2) * *k as f64)
            .sum::<f64>()
            / n as f64;
        var.sqrt() / 255.0
    };
    // The value at rank round((n - 1) p), as the numeric features' quantiles.
    let quantile = |p: f64| {
        move |c: &[u64; 256], n: u64| {
            let rank = ((n - 1) as f64 * p).round() as u64;
            let mut seen = 0;
            for (v, k) in c.iter().enumerate() {
                seen += k;
                if seen > rank {
                    return v as f64 / 255.0;
                }
            }
            1.0
        }
    };
    Ok(json!({
        "min": per(&|c, _| first(c)),
        "max": per(&|c, _| last(c)),
        "mean": per(&mean),
        "std": per(&std),
        "count": [frames.len()],
        "q01": per(&quantile(0.01)), "q10": per(&quantile(0.10)), "q50": per(&quantile(0.50)),
        "q90": per(&quantile(0.90)), "q99": per(&quantile(0.99)),
    }))
}

fn vec_field(name: &str, dt: DataType, n: usize) -> Field {
    Field::new(
        name,
        DataType::FixedSizeList(Arc::new(Field::new("item", dt, true)), n as i32),
        true,
    )
}

/// Rows of `n` values each as a fixed-size list column of Arrow type `T`.
fn fixed_list<T: arrow_array::ArrowPrimitiveType>(rows: &[&[T::Native]], n: usize) -> ArrayRef {
    let mut b = FixedSizeListBuilder::new(PrimitiveBuilder::<T>::new(), n as i32);
    for r in rows {
        b.values().append_slice(r);
        b.append(true);
    }
    Arc::new(b.finish())
}

fn f32_list(rows: &[&[f32]], n: usize) -> ArrayRef {
    fixed_list::<arrow_array::types::Float32Type>(rows, n)
}

fn bools(v: impl Iterator<Item = bool>) -> ArrayRef {
    let mut b = BooleanBuilder::new();
    for x in v {
        b.append_value(x);
    }
    Arc::new(b.finish())
}

fn i64s(v: impl Iterator<Item = i64>) -> ArrayRef {
    let mut b = Int64Builder::new();
    for x in v {
        b.append_value(x);
    }
    Arc::new(b.finish())
}

fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<(), ExportError> {
    let err = |what: String| ExportError::Write {
        path: path.to_path_buf(),
        what,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    }
    let file = std::fs::File::create(path).map_err(|e| err(e.to_string()))?;
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None)
        .map_err(|e| err(e.to_string()))?;
    w.write(batch).map_err(|e| err(e.to_string()))?;
    w.close().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// The data table of `episodes` at `fps`.
fn data_batch(episodes: &[Episode], fps: u32, dof: usize) -> Result<RecordBatch, String> {
    let frames: Vec<(usize, usize, &Frame)> = episodes
        .iter()
        .enumerate()
        .flat_map(|(k, e)| e.frames.iter().enumerate().map(move |(i, f)| (k, i, f)))
        .collect();
    let col = |get: &dyn Fn(&Frame) -> &[f32]| -> Vec<&[f32]> {
        frames.iter().map(|(_, _, f)| get(f)).collect()
    };
    let fields = vec![
        vec_field("observation.state", DataType::Float32, 2 * dof),
        vec_field("observation.environment_state", DataType::Float32, dof),
        vec_field("action", DataType::Float32, dof),
        vec_field("action.proposed", DataType::Float32, dof),
        vec_field("action.base", DataType::Float32, dof),
        vec_field("action.residual", DataType::Float32, dof),
        vec_field("gate.mask", DataType::Int64, dof),
        Field::new("gate.blocked", DataType::Boolean, true),
        Field::new("intervention", DataType::Boolean, true),
        Field::new("episode.success", DataType::Boolean, true),
        Field::new("timestamp", DataType::Float32, true),
        Field::new("frame_index", DataType::Int64, true),
        Field::new("episode_index", DataType::Int64, true),
        Field::new("index", DataType::Int64, true),
        Field::new("task_index", DataType::Int64, true),
    ];
    let masks: Vec<&[i64]> = frames.iter().map(|(_, _, f)| f.mask.as_slice()).collect();
    let mut ts = Float32Builder::new();
    for (_, i, _) in &frames {
        ts.append_value((*i as f64 / f64::from(fps)) as f32);
    }
    let mut columns: Vec<ArrayRef> = vec![
        f32_list(&col(&|f| &f.state), 2 * dof),
        f32_list(&col(&|f| &f.goal), dof),
        f32_list(&col(&|f| &f.action), dof),
        f32_list(&col(&|f| &f.proposed), dof),
        f32_list(&col(&|f| &f.base), dof),
        f32_list(&col(&|f| &f.residual), dof),
        fixed_list::<arrow_array::types::Int64Type>(&masks, dof),
        bools(frames.iter().map(|(_, _, f)| f.blocked)),
        bools(frames.iter().map(|(_, _, f)| f.intervention)),
        bools(
            frames
                .iter()
                .map(|(k, _, _)| episodes[*k].outcome == "success"),
        ),
        Arc::new(ts.finish()),
        i64s(frames.iter().map(|(_, i, _)| *i as i64)),
        i64s(frames.iter().map(|(k, _, _)| *k as i64)),
        i64s(0..frames.len() as i64),
        i64s(frames.iter().map(|_| 0)),
    ];
    let mut fields = fields;
    if episodes.iter().any(|e| e.image_size.is_some()) {
        let (field, images) = image_column(frames.iter().map(|(_, _, f)| f.image.as_deref()));
        fields.insert(0, field);
        columns.insert(0, images);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| e.to_string())
}

/// The feature LeRobot names a single camera's image.
const IMAGE_FEATURE: &str = "observation.image";

/// The images as Hugging Face `datasets.Image()` stores them: `struct<bytes: binary,
/// path: string>`, the PNG in `bytes`, no path.
fn image_column<'a>(images: impl Iterator<Item = Option<&'a [u8]>>) -> (Field, ArrayRef) {
    let mut bytes = arrow_array::builder::BinaryBuilder::new();
    let mut paths = arrow_array::builder::StringBuilder::new();
    for png in images {
        bytes.append_option(png);
        paths.append_null();
    }
    let parts = arrow_schema::Fields::from(vec![
        Field::new("bytes", DataType::Binary, true),
        Field::new("path", DataType::Utf8, true),
    ]);
    let array = arrow_array::StructArray::new(
        parts.clone(),
        vec![Arc::new(bytes.finish()), Arc::new(paths.finish())],
        None,
    );
    (
        Field::new(IMAGE_FEATURE, DataType::Struct(parts), true),
        Arc::new(array),
    )
}

/// Exports the running episodes of `runs` into `out` (a new directory) at every
/// `stride`-th control cycle. A run given twice (by any path, or a copy of it) is
/// refused; so is a run whose recording is not whole, unless `allow_partial`: then its
/// whole episodes are exported and [`Summary::partial`] (and `meta/chunkrt.json`) says
/// where it was cut and what was left out.
pub fn export(
    runs: &[PathBuf],
    out: &Path,
    stride: NonZeroUsize,
    task: &str,
    allow_partial: bool,
) -> Result<Summary, ExportError> {
    distinct_dirs(runs)?;
    let mut episodes = Vec::new();
    let mut partial = Vec::new();
    let mut starts: Vec<((u64, i64), &Path)> = Vec::new();
    let mut dt: Option<f64> = None;
    for run in runs {
        let r = read_run(run, stride, allow_partial)?;
        if let Some(start) = r.start {
            if let Some((_, first)) = starts.iter().find(|s| s.0 == start) {
                return Err(run_err(
                    run,
                    format!(
                        "the same run as {} (their recordings start at the same instant): a \
                         run given twice would be in the dataset twice",
                        first.display()
                    ),
                ));
            }
            starts.push((start, run));
        }
        if dt.is_some_and(|d| (d - r.frame_dt_s).abs() > 1e-9) {
            return Err(run_err(
                run,
                "its frame period differs from the other runs' (control.period_ms x stride)",
            ));
        }
        dt = Some(r.frame_dt_s);
        episodes.extend(r.episodes);
        partial.extend(r.partial);
    }
    if episodes.is_empty() {
        return Err(ExportError::Write {
            path: out.to_path_buf(),
            what: "no run given".into(),
        });
    }
    let dt = dt.unwrap_or(0.02);
    let fps = (1.0 / dt).round();
    if (fps * dt - 1.0).abs() > 1e-6 || fps < 1.0 {
        return Err(ExportError::Write {
            path: out.to_path_buf(),
            what: format!("a frame period of {dt} s is not a whole number of frames per second: choose another stride"),
        });
    }
    let fps = fps as u32;
    let dof = episodes.first().map_or(0, |e| e.frames[0].action.len());
    if let Some(e) = episodes
        .iter()
        .find(|e| e.image_size != episodes[0].image_size)
    {
        return Err(run_err(
            &e.run,
            format!(
                "its camera images ({}) differ from {}'s ({}): a dataset has one image feature",
                size_text(e.image_size),
                episodes[0].run.display(),
                size_text(episodes[0].image_size)
            ),
        ));
    }
    let write_err = |what: String| ExportError::Write {
        path: out.to_path_buf(),
        what,
    };
    if out.exists() {
        return Err(write_err(
            "exists already: the export writes a new dataset".into(),
        ));
    }
    let batch = data_batch(&episodes, fps, dof).map_err(write_err)?;
    write_parquet(&out.join("data/chunk-000/file-000.parquet"), &batch)?;
    write_meta(out, &episodes, &partial, &batch, (fps, dof), task)?;
    Ok(Summary {
        episodes: episodes.len(),
        frames: batch.num_rows(),
        fps,
        dof,
        partial,
    })
}

/// Refuses a run directory given twice (by the same or another path to it): its
/// episodes would be in the dataset twice.
fn distinct_dirs(runs: &[PathBuf]) -> Result<(), ExportError> {
    let mut seen: Vec<(PathBuf, &PathBuf)> = Vec::with_capacity(runs.len());
    for run in runs {
        let real = std::fs::canonicalize(run).map_err(|e| run_err(run, e.to_string()))?;
        if let Some((_, first)) = seen.iter().find(|s| s.0 == real) {
            return Err(run_err(
                run,
                format!(
                    "given twice (first as {}): its episodes would be in the dataset twice",
                    first.display()
                ),
            ));
        }
        seen.push((real, run));
    }
    Ok(())
}

fn size_text(s: Option<(u32, u32)>) -> String {
    s.map_or_else(|| "none".into(), |(h, w)| format!("{h} x {w}"))
}

/// meta/episodes, meta/tasks.parquet, meta/info.json, meta/stats.json.
fn write_meta(
    out: &Path,
    episodes: &[Episode],
    partial: &[PartialRun],
    batch: &RecordBatch,
    (fps, dof): (u32, usize),
    task: &str,
) -> Result<(), ExportError> {
    let werr = |path: &Path, what: String| ExportError::Write {
        path: path.to_path_buf(),
        what,
    };
    // meta/episodes: row i is episode i.
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
    let ep_fields = vec![
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
    ];
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
    let eb = RecordBatch::try_new(Arc::new(Schema::new(ep_fields)), ep_cols)
        .map_err(|e| werr(&path, e.to_string()))?;
    write_parquet(&path, &eb)?;
    // meta/tasks.parquet with the pandas index metadata pandas rebuilds the task from.
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
    write_parquet(&path, &tbatch)?;
    // meta/info.json and meta/stats.json.
    let mut features = serde_json::Map::new();
    for f in batch.schema().fields() {
        if let (DataType::Struct(_), Some((h, w))) = (f.data_type(), episodes[0].image_size) {
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
    let info = json!({
        "codebase_version": "v3.0",
        "fps": fps,
        "features": features,
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
    });
    let path = out.join("meta/info.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&info).unwrap_or_default(),
    )
    .map_err(|e| werr(&path, e.to_string()))?;
    // What chunkrt adds (LeRobot's info.json warns on keys it does not know).
    let path = out.join("meta/chunkrt.json");
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
    let ours = json!({"dof": dof, "runs": runs, "fps": fps});
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&ours).unwrap_or_default(),
    )
    .map_err(|e| werr(&path, e.to_string()))?;
    let path = out.join("meta/stats.json");
    let mut stats = stats(batch);
    if episodes[0].image_size.is_some() {
        let frames: Vec<&Frame> = episodes.iter().flat_map(|e| &e.frames).collect();
        stats[IMAGE_FEATURE] = image_stats(&frames).map_err(|e| werr(&path, e))?;
    }
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&stats).unwrap_or_default(),
    )
    .map_err(|e| werr(&path, e.to_string()))?;
    Ok(())
}

fn dtype_name(dt: &DataType) -> &'static str {
    match dt {
        DataType::Float32 => "float32",
        DataType::Int64 => "int64",
        DataType::Boolean => "bool",
        _ => "float64",
    }
}

/// Per feature and dimension: min, max, mean, std (population), count, q01..q99.
fn stats(batch: &RecordBatch) -> Value {
    use arrow_array::cast::AsArray;
    let mut out = serde_json::Map::new();
    for (f, col) in batch.schema().fields().iter().zip(batch.columns()) {
        let dims: Vec<Vec<f64>> = match f.data_type() {
            DataType::Struct(_) => continue, // images: `image_stats`
            DataType::FixedSizeList(_, n) => {
                let l = col.as_fixed_size_list();
                let n = *n as usize;
                let mut dims = vec![Vec::with_capacity(l.len()); n];
                for r in 0..l.len() {
                    let v = l.value(r);
                    for (d, dim) in dims.iter_mut().enumerate() {
                        dim.push(value_f64(&v, d));
                    }
                }
                dims
            }
            _ => vec![(0..col.len()).map(|r| value_f64(col, r)).collect()],
        };
        let per = |g: &dyn Fn(&mut Vec<f64>) -> f64| -> Vec<f64> {
            dims.iter().map(|d| g(&mut d.clone())).collect()
        };
        let q = |p: f64| {
            per(&|d: &mut Vec<f64>| {
                d.sort_by(f64::total_cmp);
                if d.is_empty() {
                    0.0
                } else {
                    d[((d.len() - 1) as f64 * p).round() as usize]
                }
            })
        };
        let mean = per(&|d: &mut Vec<f64>| d.iter().sum::<f64>() / d.len().max(1) as f64);
        let std: Vec<f64> = dims
            .iter()
            .zip(&mean)
            .map(|(d, m)| {
                (d.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / d.len().max(1) as f64).sqrt()
            })
            .collect();
        out.insert(
            f.name().clone(),
            json!({
                "min": per(&|d: &mut Vec<f64>| d.iter().copied().fold(f64::INFINITY, f64::min)),
                "max": per(&|d: &mut Vec<f64>| d.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
                "mean": mean,
                "std": std,
                "count": [batch.num_rows()],
                "q01": q(0.01), "q10": q(0.10), "q50": q(0.50), "q90": q(0.90), "q99": q(0.99),
            }),
        );
    }
    Value::Object(out)
}

fn value_f64(a: &ArrayRef, i: usize) -> f64 {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Int64Type};
    match a.data_type() {
        DataType::Float32 => f64::from(a.as_primitive::<Float32Type>().value(i)),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i) as f64,
        DataType::Boolean => f64::from(u8::from(a.as_boolean().value(i))),
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: NonZeroUsize = NonZeroUsize::MIN;

    fn run_dir(name: &str, events: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-learn-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("events.jsonl"), events).unwrap();
        d
    }

    #[test]
    fn a_run_whose_episodes_ended_none_is_refused_naming_the_run_and_why() {
        let run = run_dir("noep", "{\"event\":\"mode\",\"t_s\":0.1}\n");
        std::fs::write(
            run.join("report.json"),
            r#"{"config": {"period_ms": 20.0, "episodes": {"goals_rad": [[0.0]]}}}"#,
        )
        .unwrap();
        let out = run.join("ds");
        let e = export(std::slice::from_ref(&run), &out, ONE, "t", false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&run.display().to_string()), "{text}");
        assert!(text.contains("no episode in events.jsonl"), "{text}");
        assert!(!out.exists(), "nothing written");
        let _ = std::fs::remove_dir_all(&run);
    }

    #[test]
    fn a_continuous_run_whose_policy_names_no_goals_is_refused_saying_so() {
        let run = run_dir("nogoals", "{\"event\":\"mode\",\"t_s\":0.1}\n");
        std::fs::write(
            run.join("report.json"),
            r#"{"config": {"period_ms": 20.0}}"#,
        )
        .unwrap();
        let e = export(std::slice::from_ref(&run), &run.join("ds"), ONE, "t", false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("has no policy_goals_rad"), "{text}");
        let _ = std::fs::remove_dir_all(&run);
    }

    #[test]
    fn a_continuous_runs_goal_follows_the_observations_it_changed_at() {
        let frame = |g: f32| Frame {
            state: vec![],
            goal: vec![g],
            action: vec![],
            proposed: vec![],
            base: vec![],
            residual: vec![],
            mask: vec![],
            blocked: false,
            intervention: false,
            image: None,
        };
        let mut frames: Vec<Frame> = (0..5).map(|_| frame(-1.0)).collect();
        let goals = vec![vec![10.0], vec![20.0], vec![30.0]];
        // Goal 0 from observation 0, goal 2 from observation 3.
        goals_by_observation(&mut frames, &[1, 2, 3, 4, 9], &[(0, 0), (3, 2)], &goals);
        let got: Vec<f32> = frames.iter().map(|f| f.goal[0]).collect();
        assert_eq!(got, vec![10.0, 10.0, 30.0, 30.0, 30.0]);
    }

    #[test]
    fn a_broken_event_line_is_named_by_file_and_line() {
        let run = run_dir("badline", "{\"event\":\"mode\",\"t_s\":0.1}\nnot json\n");
        let e = export(std::slice::from_ref(&run), &run.join("ds"), ONE, "t", false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("events.jsonl:2:"), "{text}");
        let _ = std::fs::remove_dir_all(&run);
    }
}
