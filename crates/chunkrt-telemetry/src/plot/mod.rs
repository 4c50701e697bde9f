//! Plots, drawn with `plotters` into an SVG and a PNG each.
//!
//! - [`latency`]: percentile curves and histograms of the latency metrics
//!   (`chunkrt bench`, and every run from its recording);
//! - [`timeline`]: a run's joints over time from `recording.mcap`: what the
//!   executor proposed, what the gate commanded and what was measured, with the
//!   seams, the gate's interventions and the mode changes marked (every run, and
//!   `chunkrt plot RUN_DIR`);
//! - [`episodes`]: the episodes of runs, frozen and residual (`chunkrt episodes --plot`).
//!
//! A figure draws itself on any plotters backend ([`Figure::draw`]); [`save`] draws
//! it twice, once per format. Text is laid out with the bundled DejaVu Sans
//! (`assets/`, Bitstream Vera licence), so no system font library is needed and
//! the PNG looks the same on every machine.

pub mod episodes;
pub mod error;
pub mod figure;
pub mod latency;
pub mod timeline;

pub use error::PlotError;
pub use figure::{err, legend, save, seconds_label, svg_string, svg_texts, Figure, COLOURS, FONT};
pub use latency::{metric_series, percentile_plot, standard_panels, LatencyFigure, Panel};

use std::path::{Path, PathBuf};

/// The plots of the run in `run_dir` (or of `window`, s since its start): reads its
/// recording and writes `timeline.{svg,png}` and `latency.{svg,png}` into
/// `out_dir`. Returns the files written.
pub fn plot_run(
    run_dir: &Path,
    window: Option<(f64, f64)>,
    out_dir: &Path,
) -> Result<Vec<PathBuf>, PlotError> {
    let files = crate::readback::segments(run_dir).map_err(PlotError::Recording)?;
    let data = crate::readback::read(&files, window).map_err(PlotError::Recording)?;
    if data.cycles == 0 {
        return Err(match window {
            Some((from_s, to_s)) => PlotError::NoCycleInWindow { from_s, to_s },
            None => PlotError::NoCycle,
        });
    }
    std::fs::create_dir_all(out_dir).map_err(|source| PlotError::OutputDir {
        dir: out_dir.to_path_buf(),
        source,
    })?;
    let name = run_dir.file_name().map_or_else(
        || run_dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let span = match window {
        Some((a, b)) => format!(" ({a} s to {b} s)"),
        None => String::new(),
    };
    let mut written = save(
        &timeline::Timeline::new(&data, &format!("chunkrt run {name}{span}: joints")),
        &out_dir.join("timeline"),
    )?;
    let panels = latency::standard_panels(&data.metrics, Vec::new());
    if let Some(fig) = latency::percentile_plot(
        &panels,
        &format!("chunkrt run {name}{span}: latency per cycle and per chunk (from the recording)"),
    ) {
        written.extend(save(&fig, &out_dir.join("latency"))?);
    }
    Ok(written)
}
