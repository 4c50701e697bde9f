//! `chunkrt plot RUN_DIR`: the plots of a run, drawn from its recording (what
//! every run also draws at its end): `timeline.{svg,png}` (the joints: chunks
//! proposed, setpoint, command, measured; seams, gate interventions, mode
//! changes) and `latency.{svg,png}` (percentiles and histograms). `--from` and
//! `--to` draw a window of the run, where every chunk and sample shows.

use crate::EXIT_USAGE;
use clap::Parser;
use std::path::PathBuf;

/// `chunkrt plot`.
#[derive(Parser, Debug, Clone)]
pub struct PlotArgs {
    /// The run's output directory (its `recording.mcap` and segments, or the
    /// recording its `report.json` names).
    pub run_dir: PathBuf,
    /// Start of the window, seconds since the run's start.
    #[arg(long)]
    pub from: Option<f64>,
    /// End of the window, seconds since the run's start.
    #[arg(long)]
    pub to: Option<f64>,
    /// Where the plots go (default: RUN_DIR).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Runs `chunkrt plot`; exit 0, or 2 when the arguments or the recording are
/// wrong (said on stderr).
pub fn plot(args: &PlotArgs) -> anyhow::Result<u8> {
    let window = match (args.from, args.to) {
        (None, None) => None,
        (from, to) => {
            let (a, b) = (from.unwrap_or(0.0), to.unwrap_or(f64::MAX));
            if !(a.is_finite() && a >= 0.0 && b > a) {
                errln!(
                    "chunkrt: error: --from {a} --to {b}: the window must start at or after 0 s \
                     and end after it starts"
                );
                return Ok(EXIT_USAGE);
            }
            Some((a, b))
        }
    };
    let out = args.out.clone().unwrap_or_else(|| args.run_dir.clone());
    match chunkrt_telemetry::plot::plot_run(&args.run_dir, window, &out) {
        Ok(files) => {
            for f in files {
                outln!("wrote {}", f.display());
            }
            Ok(0)
        }
        Err(e) => {
            errln!("chunkrt: error: plot {}: {e}", args.run_dir.display());
            Ok(EXIT_USAGE)
        }
    }
}
