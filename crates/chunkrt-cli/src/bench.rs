//! `chunkrt bench`: the latency benchmark.
//!
//! Runs the whole pipeline (the same runtime as `chunkrt run`), optionally with
//! cyclictest beside the control loop, judges the report against a budget file and
//! writes `report.json` (with `budget` and `baseline`), one `.hgrm` percentile file
//! per metric and `latency.svg`. Exit 0 within budget, 1 when a limit is broken or
//! the run failed, 2 on usage, configuration or bring-up errors.

use crate::args::parse_duration;
use crate::{paths, EXIT_FAIL};
use anyhow::Context;
use chunkrt_config::Config;
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_telemetry::baseline::{Baseline, Cyclictest, CyclictestSpec};
use chunkrt_telemetry::budget::{self, Budget};
use chunkrt_telemetry::{hgrm, plot, METRICS};
use clap::{Parser, ValueEnum};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// A reference measurement run beside the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BaselineTool {
    /// cyclictest (rt-tests) with the loop's period, priority and CPU.
    Cyclictest,
}

/// `chunkrt bench`.
#[derive(Parser, Debug, Clone)]
pub struct BenchArgs {
    /// Configuration file (default: rt-config/sim.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Budget file (default: budget.toml beside the configuration file).
    #[arg(long)]
    pub budget: Option<PathBuf>,
    /// How long to run: `30s`, `500ms`, `2m`, `1h`.
    #[arg(long, default_value = "30s", value_parser = finite_duration)]
    pub duration: Duration,
    /// Output directory for report.json, the .hgrm files and latency.svg/.png.
    #[arg(long, default_value = "runs/bench")]
    pub out: PathBuf,
    /// Run a reference measurement beside the loop, in the same run.
    #[arg(long, value_enum)]
    pub baseline: Option<BaselineTool>,
    /// Do not print the live status line.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs the benchmark; returns the exit status.
pub fn bench(args: &BenchArgs) -> anyhow::Result<u8> {
    let duration = args.duration;
    let config_path = match &args.config {
        Some(p) => p.clone(),
        None => paths::default_config()?,
    };
    let cfg = Config::load(&config_path)?;
    let budget_path = match &args.budget {
        Some(p) => p.clone(),
        None => default_budget(&config_path)?,
    };
    let budget = Budget::load(&budget_path)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("output directory {}", args.out.display()))?;
    chunkrt_rt::signals::install().map_err(anyhow::Error::msg)?;

    eprintln!(
        "chunkrt bench: {} for {:?} on the {:?} backend, {} ms period, budget {}{}",
        config_path.display(),
        duration,
        cfg.backend.kind,
        cfg.control.period_ms,
        budget_path.display(),
        if args.baseline.is_some() {
            ", cyclictest beside the loop"
        } else {
            ""
        }
    );
    // Bring-up first (a policy or backend error is a usage error: nothing ran),
    // then cyclictest, so that it covers the whole loop and little else.
    let runtime = Runtime::from_config(&cfg).context("bring-up failed")?;
    let cyclictest = match args.baseline {
        Some(BaselineTool::Cyclictest) => {
            let spec = CyclictestSpec::for_loop(
                cfg.period_ns(),
                cfg.control.priority,
                usize::try_from(cfg.control.cpu).ok(),
            );
            Some(Cyclictest::start(&spec).context("--baseline cyclictest")?)
        }
        None => None,
    };
    let opts = RunOptions {
        duration: Some(duration),
        out_dir: Some(args.out.clone()),
        live_status: !args.quiet,
        stop: Arc::new(AtomicBool::new(false)),
        config_name: config_path.display().to_string(),
    };
    let outcome = match runtime.run(&opts) {
        Ok(o) => o,
        Err(e @ chunkrt_rt::RunError::Backend(_)) => return Err(e).context("bring-up failed"),
        Err(e) => {
            eprintln!("chunkrt: error: {e}");
            return Ok(EXIT_FAIL);
        }
    };
    let mut report = outcome.report;
    let metrics = outcome.metrics;

    let mut loop_extra = Vec::new();
    let baseline_hist;
    let mut baseline_text = None;
    if let Some(ct) = cyclictest {
        let spec = ct.spec().clone();
        let hist = ct.stop().context("--baseline cyclictest")?;
        let block = Baseline::new(&spec, &hist, report.metrics.get("wake_latency"));
        baseline_text = Some(block.table());
        report
            .extra
            .insert("baseline".into(), serde_json::to_value(&block)?);
        baseline_hist = hist.to_hdr();
        write(
            &args.out.join("cyclictest.hgrm"),
            &hgrm::percentile_distribution(&baseline_hist),
        )?;
        loop_extra.push(("cyclictest (wake)".to_string(), &baseline_hist));
    }

    let verdicts = budget.evaluate(&report)?;
    budget::add_to_report(&mut report, &budget, &verdicts);

    for (m, name, _) in METRICS.iter() {
        let h = metrics.get(*m);
        if !h.is_empty() {
            write(
                &args.out.join(format!("{name}.hgrm")),
                &hgrm::percentile_distribution(h),
            )?;
        }
    }
    let title = format!(
        "chunkrt {} ms loop, {} ({}), {:.1} s",
        cfg.control.period_ms, report.host.kernel, report.host.preempt, report.duration_s
    );
    let panels = plot::standard_panels(&metrics, loop_extra);
    if let Some(fig) = plot::percentile_plot(&panels, &title) {
        plot::save(&fig, &args.out.join("latency")).map_err(anyhow::Error::msg)?;
    }
    chunkrt_telemetry::outdir::write_atomic(&args.out, "report.json", report.to_json().as_bytes())
        .with_context(|| format!("writing {}", args.out.join("report.json").display()))?;

    println!("{}", report.table());
    if let Some(t) = baseline_text {
        println!("{t}");
    }
    println!("{}", budget::verdict_table(&report, &verdicts));
    println!(
        "report: {} (+ .hgrm per metric, latency.svg and .png)",
        args.out.join("report.json").display()
    );
    if let Some(msg) = outcome.inference_panicked {
        eprintln!("chunkrt: error: the inference thread panicked: {msg}");
        return Ok(EXIT_FAIL);
    }
    Ok(if budget::all_pass(&verdicts) {
        0
    } else {
        EXIT_FAIL
    })
}

/// A duration with a unit; a benchmark has an end, so `0` and `inf` are refused.
fn finite_duration(s: &str) -> Result<Duration, String> {
    match parse_duration(s)? {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(format!(
            "`{s}`: a benchmark needs a finite duration, e.g. 30s"
        )),
    }
}

/// `budget.toml` beside the configuration file (`rt-config/`).
fn default_budget(config: &Path) -> anyhow::Result<PathBuf> {
    let p = config
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("budget.toml");
    if p.is_file() {
        Ok(p)
    } else {
        anyhow::bail!(
            "no --budget given and {} does not exist; pass --budget FILE",
            p.display()
        )
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
