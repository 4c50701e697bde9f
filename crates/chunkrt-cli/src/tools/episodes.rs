//! `chunkrt episodes RUN_DIR...`: the episodes of one or more runs (`[episodes]`) in one
//! table, run after run: outcome, start pose (held out or seen), whether the residual had
//! authority (or the base ran frozen), goal error, tracking error P99, the permission
//! gate's and the residual gate's cycles, operator stops, the reset before it and a
//! budget breach (the residual rolled back from there); then per run and kind of start
//! the success rate and the means. Read from each run's `events.jsonl`, which holds
//! every ended episode even when the run was cut short; a log with an episode line
//! repeated or out of order is refused (the line named), so no episode counts twice and
//! no reset is negative. `--plot STEM` draws them too.

use anyhow::bail;
use clap::Parser;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// `chunkrt episodes`.
#[derive(Parser, Debug, Clone)]
pub struct EpisodesArgs {
    /// Run directories (each a `chunkrt run --out`).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Print the summaries as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also draw the episodes into STEM.svg and STEM.png: goal error, tracking error P99
    /// and the permission gate's cycles per episode, frozen and residual.
    #[arg(long, value_name = "STEM")]
    pub plot: Option<PathBuf>,
}

/// The success tolerance of `run` (its report's `[episodes]`), when it says one.
fn tolerance(run: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(run.join("report.json")).ok()?;
    let report: Value = serde_json::from_str(&text).ok()?;
    num(&report["config"]["episodes"]["tolerance_rad"])
}

/// Draws the runs' episodes (`--plot STEM`); the files written.
fn plot(
    runs: &[PathBuf],
    all: &[(String, Vec<Value>)],
    stem: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    use chunkrt_telemetry::plot::episodes::{EpisodePoint, EpisodesFigure};
    let mut fig = EpisodesFigure {
        points: Vec::new(),
        run_starts: Vec::new(),
        tolerance_rad: None,
    };
    for (_, eps) in all {
        if !fig.points.is_empty() {
            fig.run_starts.push(fig.points.len());
        }
        fig.points.extend(eps.iter().map(|e| EpisodePoint {
            residual: e["residual"] == true,
            held_out: e["held_out"] == true,
            success: e["outcome"] == "success",
            goal_err_rad: num(&e["goal_err_rad"]).unwrap_or(f64::NAN),
            tracking_p99_rad: num(&e["tracking_error_p99_rad"]).unwrap_or(f64::NAN),
            gate_interventions: num(&e["gate_interventions"]).unwrap_or(f64::NAN),
        }));
    }
    // One tolerance line when the runs share it.
    let tolerances: Vec<Option<f64>> = runs.iter().map(|r| tolerance(r)).collect();
    if tolerances.windows(2).all(|w| w[0] == w[1]) {
        fig.tolerance_rad = tolerances.first().copied().flatten();
    }
    Ok(chunkrt_telemetry::plot::save(&fig, stem)?)
}

/// A run's episodes, from its `events.jsonl` (a repeated or disordered episode line is
/// refused: `chunkrt_telemetry::episodes::read_log`).
pub fn read_episodes(run: &Path) -> anyhow::Result<Vec<Value>> {
    Ok(chunkrt_telemetry::episodes::read_log(run)?)
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// The last `n` characters of `s` (a run's path in a column of `n`).
fn tail(s: &str, n: usize) -> String {
    let skip = s.chars().count().saturating_sub(n);
    s.chars().skip(skip).collect()
}

fn opt(v: &Value, digits: usize) -> String {
    num(v).map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// Runs `chunkrt episodes`.
pub fn episodes(args: &EpisodesArgs) -> anyhow::Result<u8> {
    let all = read_runs(&args.runs)?;
    let sums: Vec<Value> = all
        .iter()
        .flat_map(|(r, e)| chunkrt_telemetry::episodes::summaries(r, e))
        .collect();
    if let Some(stem) = &args.plot {
        for file in plot(&args.runs, &all, stem)? {
            eprintln!("chunkrt: episodes: wrote {}", file.display());
        }
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({ "summaries": sums }))?
        );
        return Ok(0);
    }
    print_episodes(&all);
    print_summaries(&sums);
    Ok(0)
}

/// Each run's name and episodes; a run without an episode is refused.
fn read_runs(runs: &[PathBuf]) -> anyhow::Result<Vec<(String, Vec<Value>)>> {
    let mut all = Vec::new();
    for run in runs {
        let eps = read_episodes(run)?;
        if eps.is_empty() {
            bail!(
                "{}: no episode in events.jsonl (a run with [episodes] records them)",
                run.display()
            );
        }
        all.push((run.display().to_string(), eps));
    }
    Ok(all)
}

/// The table of episodes, run after run, with the reset before each.
fn print_episodes(all: &[(String, Vec<Value>)]) {
    outln!(
        "{:<24} {:>3} {:>6} {:>8} {:<13} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>7} {}",
        "run",
        "ep",
        "start",
        "policy",
        "outcome",
        "dur_s",
        "reset_s",
        "goal_err",
        "track_p99",
        "gate",
        "resid",
        "stops",
        "budget"
    );
    for (run, eps) in all {
        let mut prev_end: Option<f64> = None;
        for e in eps {
            let reset = match (prev_end, num(&e["t_begin_s"])) {
                (Some(a), Some(b)) => format!("{:.2}", b - a),
                _ => "-".into(),
            };
            prev_end = num(&e["t_s"]);
            outln!(
                "{:<24} {:>3} {:>6} {:>8} {:<13} {:>7} {:>7} {:>9} {:>9} {:>6} {:>6} {:>7} {}",
                tail(run, 24),
                e["episode"].to_string(),
                format!(
                    "{}{}",
                    e["start"],
                    if e["held_out"] == true { "*" } else { "" }
                ),
                if e["residual"] == true {
                    "residual"
                } else {
                    "frozen"
                },
                e["outcome"].as_str().unwrap_or("?"),
                opt(&e["duration_s"], 2),
                reset,
                opt(&e["goal_err_rad"], 4),
                opt(&e["tracking_error_p99_rad"], 4),
                e["gate_interventions"].to_string(),
                e["residual_interventions"].to_string(),
                e["operator_stops_window"].to_string(),
                e["budget_breach"].as_str().map_or("", |b| b),
            );
        }
    }
}

/// The summaries' table, per run and kind of start, after the key to the first.
fn print_summaries(sums: &[Value]) {
    outln!("\n(* held-out start; gate: cycles the permission gate acted; resid: cycles the residual gate acted)\n");
    outln!(
        "{:<24} {:<9} {:<8} {:>8} {:>8} {:>9} {:>9} {:>10} {:>10}",
        "run",
        "starts",
        "policy",
        "episodes",
        "success",
        "goal_err",
        "track_p99",
        "gate/ep",
        "stops/ep"
    );
    for s in sums {
        let run = s["run"].as_str().unwrap_or("");
        outln!(
            "{:<24} {:<9} {:<8} {:>8} {:>7.0}% {:>9} {:>9} {:>10.1} {:>10.2}",
            tail(run, 24),
            s["starts"].as_str().unwrap_or(""),
            s["policy"].as_str().unwrap_or(""),
            s["episodes"].to_string(),
            num(&s["success_rate"]).unwrap_or(0.0) * 100.0,
            opt(&s["goal_err_rad"], 4),
            opt(&s["tracking_error_p99_rad"], 4),
            num(&s["gate_interventions_per_episode"]).unwrap_or(0.0),
            num(&s["operator_stops_per_episode"]).unwrap_or(0.0),
        );
    }
}
