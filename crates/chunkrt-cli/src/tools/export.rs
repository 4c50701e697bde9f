//! `chunkrt export lerobot RUN_DIR... --out DATASET`: runs' episodes as a LeRobot
//! dataset (`chunkrt-learn`).

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// `chunkrt export`.
#[derive(Subcommand, Debug, Clone)]
pub enum ExportCommand {
    /// The running episodes of runs with `[episodes]` as a LeRobot dataset (v3.0):
    /// observation, the command as executed, the proposal and its base and residual
    /// parts, which gate blocked which joint, interventions, the episodes' outcomes.
    Lerobot(LerobotArgs),
}

/// `chunkrt export lerobot`.
#[derive(Parser, Debug, Clone)]
pub struct LerobotArgs {
    /// Run directories (each a `chunkrt run --out` with `[episodes]`).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// The dataset's directory (must not exist).
    #[arg(long)]
    pub out: PathBuf,
    /// One frame every this many control cycles (the frame rate must come out whole).
    #[arg(long, default_value_t = 1)]
    pub stride: usize,
    /// The task's text.
    #[arg(long, default_value = "reach the goal")]
    pub task: String,
}

/// Runs `chunkrt export`.
pub fn export(cmd: &ExportCommand) -> anyhow::Result<u8> {
    let ExportCommand::Lerobot(a) = cmd;
    let s = chunkrt_learn::lerobot::export(&a.runs, &a.out, a.stride, &a.task)?;
    outln!(
        "{}: {} episodes, {} frames at {} fps, {} joints (LeRobotDataset v3.0)",
        a.out.display(),
        s.episodes,
        s.frames,
        s.fps,
        s.dof
    );
    Ok(0)
}
