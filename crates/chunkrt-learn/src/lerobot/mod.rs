//! Runs' episodes as a LeRobot dataset, format v3.0 (numeric features and, with a camera,
//! the images as LeRobot `image` features; no video).
//!
//! One frame per recorded control cycle of a running episode (every `stride`-th, so the
//! frame rate is an integer `fps`). Columns:
//! - `observation.state`: measured positions, then velocities (backward difference of the
//!   measured positions over one control period), float32 `[2 dof]`;
//! - `observation.environment_state`: the episode's goal, float32 `[dof]`;
//! - `observation.force` (a run with a wrist force/torque sensor): the force on the tool
//!   (N) then the torque about the sensor (N m), base frame, float32 `[6]`;
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

mod export;
mod meta;
mod read;
mod stats;
mod write;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use chunkrt_telemetry::readback::Cut;
pub use export::export;
pub use read::{read_run, RunRead};

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
    /// The wrist force/torque reading, force (N) then torque (N m), with a sensor.
    wrench: Option<Vec<f32>>,
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

/// The outcome of a run without `[episodes]`, exported as one episode.
pub const CONTINUOUS_OUTCOME: &str = "continuous";
