//! Command-line arguments.

use crate::setup::parse_duration;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// chunkrt: a real-time dual-rate control runtime for arms driven by learned policies.
#[derive(Parser, Debug)]
#[command(name = "chunkrt", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the whole pipeline (default: the simulated arm, rt-config/sim.toml).
    Run(RunArgs),
    /// Latency benchmark: run the pipeline, judge it against a budget, write
    /// report.json, .hgrm files and a latency plot (exit 1 when a limit is broken).
    Bench(crate::bench::BenchArgs),
    /// Plot a run from its recording: joints (proposed, commanded, measured, with
    /// seams, gate interventions and mode changes) and latency, SVG and PNG.
    Plot(crate::plot::PlotArgs),
    /// Host readiness for real time: kernel, limits, isolation, governor, SMT, NIC.
    Check(crate::check::CheckArgs),
    /// How much delay can the loop take? Phase margin on the simulated arm, swept
    /// against injected delay (writes margin.json, margin.svg and margin.png).
    Margin(crate::margin::MarginArgs),
    /// The reality gap between two plants: the same excitations on both, sized channel
    /// by channel (actuator, coupling, load, sensing, timing) against tolerances (writes
    /// gap.json, gap.svg and gap.png; exit 1 when a channel is over).
    Gap(crate::gap::GapArgs),
    /// EtherCAT SubDevice simulator: CiA 402 servo drives answering on a network
    /// interface (AF_PACKET; root or CAP_NET_RAW), e.g. inside a network namespace.
    Ecsim(crate::tools::EcsimArgs),
    /// A wear ledger (`[wear] ledger`): each hardware id's runs, hours, shocks and
    /// peaks, and the `[[adaptation_wear_ledger]]` entry a policy manifest cites it by.
    Wear(crate::tools::wear::WearArgs),
    /// The episodes of one or more runs (`[episodes]`): outcomes, goal and tracking
    /// errors, gate interventions, operator stops, resets, the residual's budget; the
    /// success rate per kind of start, frozen base against residual.
    Episodes(crate::tools::episodes::EpisodesArgs),
    /// A running controller's state (mode, authority, faults, latency percentiles, its
    /// last events) from its `[metrics]` endpoint, for an operator on SSH.
    Status(crate::tools::status::StatusArgs),
    /// Runs' records in a learner's format.
    #[command(subcommand)]
    Export(crate::tools::export::ExportCommand),
    /// Inspect a policy model.
    #[command(subcommand)]
    Policy(crate::tools::PolicyCommand),
    /// Reference pages generated from the code: the exit statuses, the man pages, shell
    /// completions (`scripts/install-cli-docs.sh` installs the last two).
    #[command(subcommand)]
    Reference(crate::tools::reference::ReferenceCommand),
    /// Check a configuration file and print what it resolves to.
    Validate {
        /// The file.
        file: PathBuf,
    },
}

/// `chunkrt run`.
#[derive(Parser, Debug, Clone)]
pub struct RunArgs {
    /// Configuration file (default: rt-config/sim.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// How long to run: `10s`, `500ms`, `2m`, `1h` (0 or `inf`: until Ctrl-C).
    #[arg(long, default_value = "10s", value_parser = parse_run_for)]
    pub duration: RunFor,
    /// Output directory for report.json, gate.jsonl, events.jsonl (one that already
    /// holds a run is refused unless `--overwrite` is given).
    #[arg(long, default_value = "runs/latest")]
    pub out: PathBuf,
    /// Write the full-rate recording (MCAP) to FILE instead of `recording.mcap` in
    /// `--out` (refused when FILE exists, unless `--overwrite`).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Replace the run already in `--out` (its report.json, events.jsonl and
    /// gate.jsonl are removed before the new run starts).
    #[arg(long, conflicts_with = "runs_dir")]
    pub overwrite: bool,
    /// Give the run a directory of its own in DIR (`NNNNNN-<UTC time>`, a `latest`
    /// link to the newest) instead of `--out`: what a service uses, nothing is ever
    /// overwritten. Older runs are removed by the retention rule (`--keep`).
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub runs_dir: Option<PathBuf>,
    /// With `--runs-dir`: how many of the newest runs are always kept; an older run is
    /// removed only if it ended normally (exit status 0) and is not running.
    #[arg(long, value_name = "N", default_value_t = 20, requires = "runs_dir",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub keep: u32,
    /// With `--runs-dir`: retention may also remove older runs that ended in a fault or
    /// were killed (never one still running).
    #[arg(long, requires = "runs_dir")]
    pub prune_faulted: bool,
    /// Override `control.period_ms` (the bus period, 1 to 20 ms).
    #[arg(long)]
    pub bus_period_ms: Option<f64>,
    /// Run the base policy alone: the config's `[policy.residual]` is left out (not
    /// loaded, no correction added; the run is the base's as if the section were absent).
    #[arg(long)]
    pub frozen: bool,
    /// Do not print the live status line.
    #[arg(long)]
    pub quiet: bool,
    /// Do not draw the plots at the end of the run (timeline and latency, from the
    /// recording; `chunkrt plot` draws them later).
    #[arg(long)]
    pub no_plots: bool,
    /// Inject transport delay between the gate and the backend (overrides
    /// `inject.transport_delay_ms`).
    #[arg(long)]
    pub inject_transport_ms: Option<f64>,
    /// Inject observation delay: inference sees older observations
    /// (`inject.observation_delay_ms`).
    #[arg(long)]
    pub inject_obs_ms: Option<f64>,
    /// Inject a fixed inference delay (replaces `inject.inference_delay`).
    #[arg(long)]
    pub inject_inference_ms: Option<f64>,
    /// Inject feedback delay: the loop sees older measurements
    /// (`inject.feedback_delay_ms`).
    #[arg(long)]
    pub inject_feedback_ms: Option<f64>,
    /// Drop computed chunks with this probability (`inject.drop_chunk_probability`).
    #[arg(long)]
    pub inject_drop: Option<f64>,
    /// Seed of the injected random draws (`inject.seed`).
    #[arg(long)]
    pub inject_seed: Option<u64>,
}

/// How long to run; `None`: until stopped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunFor(pub Option<Duration>);

/// clap's parser for [`RunFor`].
pub fn parse_run_for(s: &str) -> Result<RunFor, String> {
    parse_duration(s).map(RunFor)
}
