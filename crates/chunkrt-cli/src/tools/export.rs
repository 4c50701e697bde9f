//! `chunkrt export lerobot RUN_DIR... --out DATASET`: runs' episodes as a LeRobot
//! dataset (`chunkrt-learn`).

use clap::{Parser, Subcommand};
use std::num::NonZeroUsize;
use std::path::PathBuf;

/// `chunkrt export`.
#[derive(Subcommand, Debug, Clone)]
pub enum ExportCommand {
    /// The running episodes of runs with `[episodes]` (a run without: one episode, its
    /// goal the policy's at each cycle) as a LeRobot dataset (v3.0):
    /// observation, the command as executed, the proposal and its base and residual
    /// parts, which gate blocked which joint, interventions, the episodes' outcomes.
    Lerobot(LerobotArgs),
}

/// `chunkrt export lerobot`.
#[derive(Parser, Debug, Clone)]
pub struct LerobotArgs {
    /// Run directories (each a `chunkrt run --out` or a `--runs-dir` run; each once).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// The dataset's directory (must not exist).
    #[arg(long)]
    pub out: PathBuf,
    /// One frame every this many control cycles, 1 or more (the frame rate must come out
    /// whole).
    #[arg(long, default_value = "1")]
    pub stride: NonZeroUsize,
    /// The task's text.
    #[arg(long, default_value = "reach the goal")]
    pub task: String,
    /// A run whose recording is cut short or corrupt is exported in part, its episodes
    /// wholly recorded before the cut only, the cut noted in `meta/chunkrt.json`; the
    /// exit status is then 5 (records incomplete). Without it such a run is refused.
    #[arg(long)]
    pub allow_partial: bool,
}

/// Runs `chunkrt export`: 0 with every episode of every run exported,
/// [`crate::EXIT_RECORDS_INCOMPLETE`] when a run was exported in part
/// (`--allow-partial`).
pub fn export(cmd: &ExportCommand) -> anyhow::Result<u8> {
    let ExportCommand::Lerobot(a) = cmd;
    let s = chunkrt_learn::lerobot::export(&a.runs, &a.out, a.stride, &a.task, a.allow_partial)?;
    outln!(
        "{}: {} episodes, {} frames at {} fps, {} joints (LeRobotDataset v3.0)",
        a.out.display(),
        s.episodes,
        s.frames,
        s.fps,
        s.dof
    );
    if s.partial.is_empty() {
        return Ok(0);
    }
    for p in &s.partial {
        let left_out = if p.left_out.is_empty() {
            "no episode left out".to_string()
        } else {
            format!("episodes {:?} left out", p.left_out)
        };
        errln!(
            "chunkrt: warning: {}: exported in part ({left_out}): {}",
            p.run.display(),
            p.cut
        );
    }
    Ok(crate::EXIT_RECORDS_INCOMPLETE)
}
