//! `chunkrt bench`: the latency benchmark.
//!
//! Runs the whole pipeline (the same runtime as `chunkrt run`), judges the report
//! against a budget file and writes `report.json` (with `budget` and `baseline`),
//! one `.hgrm` percentile file per metric and `latency.svg`/`.png`. With
//! `--baseline cyclictest` the run is followed by pairs of segments, the loop alone
//! then cyclictest alone on the same CPU, priority, period and
//! `/dev/cpu_dma_latency` setting (never both at once: each would perturb the
//! other). Exit 0 within budget, 1 when a limit is broken or the run failed, 2 on
//! usage, configuration or bring-up errors.

use crate::setup::parse_duration;
use crate::{paths, EXIT_FAIL, EXIT_USAGE};
use anyhow::Context;
use chunkrt_config::Config;
use chunkrt_rt::{RunOptions, Runtime};
use chunkrt_telemetry::baseline::{Baseline, Cyclictest, CyclictestHistogram, CyclictestSpec};
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
    /// Output directory for report.json, the .hgrm files and latency.svg/.png (one
    /// that already holds a run is refused unless `--overwrite` is given, as `run`
    /// refuses it).
    #[arg(long, default_value = "runs/bench")]
    pub out: PathBuf,
    /// Replace the run already in `--out` (its files are removed before the bench
    /// starts).
    #[arg(long)]
    pub overwrite: bool,
    /// Measure a reference after the run: pairs of segments, the loop alone then
    /// the reference alone.
    #[arg(long, value_enum)]
    pub baseline: Option<BaselineTool>,
    /// Pairs of baseline segments.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub baseline_pairs: u32,
    /// Length of each baseline segment.
    #[arg(long, default_value = "5s", value_parser = finite_duration)]
    pub baseline_segment: Duration,
    /// Do not print the live status line.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs the benchmark; returns the exit status.
pub fn bench(args: &BenchArgs) -> anyhow::Result<u8> {
    let config_path = match &args.config {
        Some(p) => p.clone(),
        None => paths::default_config()?,
    };
    chunkrt_rt::signals::install().map_err(anyhow::Error::msg)?;
    let cfg = crate::setup::load_config(&config_path)?;
    let budget_path = match &args.budget {
        Some(p) => p.clone(),
        None => default_budget(&config_path)?,
    };
    let budget = Budget::load(&budget_path)?;
    let baseline_missing = warn_baseline_missing(args, &budget, &budget_path);
    announce(args, &config_path, &cfg, &budget_path);
    // Bring-up first (a policy or backend error is a usage error: nothing ran);
    // cyclictest is tried before the run, so that a missing or refused one is said
    // before anything moves.
    let runtime = Runtime::from_config(&cfg).context("bring-up failed")?;
    let spec = args
        .baseline
        .map(|BaselineTool::Cyclictest| cyclictest_spec(&cfg));
    if let Some(spec) = &spec {
        drop(Cyclictest::start(spec).context("--baseline cyclictest")?);
    }
    let _reserve = match claim_out(args) {
        Ok(r) => r,
        Err(status) => return Ok(status),
    };
    let outcome = match run_loop(runtime, args, &config_path)? {
        Ok(o) => o,
        Err(status) => return Ok(status),
    };
    // A run that ended as a run must not (a panic, a failed shutdown, a drive lost, a
    // quick stop, lost records) ends the bench with `chunkrt run`'s status, after its
    // files are written.
    let ending = outcome.ending();
    let ending_message = outcome.describe_ending();
    let mut report = outcome.report;
    let normal = ending == chunkrt_rt::Ending::Normal;
    // The baseline's segments run the loop again: never after a run that did not end
    // normally (a panic, a lost drive, a second Ctrl-C).
    let baseline = match spec.as_ref().filter(|_| normal) {
        Some(spec) => Some(measure_baseline(&cfg, spec, args, &mut report)?),
        None => None,
    };
    // The files: written whatever the ending (a failure to write them is said beside
    // the ending's own message, which decides the status).
    let written = write_files(
        args,
        &cfg,
        &budget,
        &mut report,
        &outcome.metrics,
        baseline.as_ref(),
    );
    let verdicts = match written {
        Ok(v) => v,
        Err(e) if normal => return Err(e),
        Err(e) => {
            errln!("chunkrt: error: {e:#}");
            errln!("chunkrt: error: {ending_message}");
            return Ok(crate::exit_status(ending));
        }
    };
    print_results(args, &report, baseline, &verdicts);
    if !normal {
        errln!("chunkrt: error: {ending_message}");
        return Ok(crate::exit_status(ending));
    }
    if let Some(why) = baseline_missing {
        errln!("chunkrt: error: {why}");
    }
    Ok(if budget::all_pass(&verdicts) {
        0
    } else {
        EXIT_FAIL
    })
}

/// `--out`, claimed as `run` claims it: a directory holding a run is refused (its old
/// plots and .hgrm files would sit beside the new report); `Err` carries the exit status.
/// The reserve is held until the report is written.
fn claim_out(args: &BenchArgs) -> Result<chunkrt_telemetry::outdir::Reserve, u8> {
    crate::setup::prepare_out_dir(&args.out, args.overwrite).map_err(|e| {
        errln!(
            "chunkrt: error: output directory {}: {e}; nothing was moved",
            args.out.display()
        );
        EXIT_USAGE
    })
}

/// The measured run, for `--duration`, its records in `--out`; the inner `Err` is the
/// exit status of a run that could not start (`crate::setup::start_run`).
fn run_loop(
    runtime: Runtime,
    args: &BenchArgs,
    config_path: &Path,
) -> anyhow::Result<Result<chunkrt_rt::RunOutcome, u8>> {
    let opts = RunOptions {
        duration: Some(args.duration),
        out_dir: Some(args.out.clone()),
        live_status: !args.quiet,
        stop: Arc::new(AtomicBool::new(false)),
        config_name: config_path.display().to_string(),
    };
    chunkrt_rt::signals::loaded();
    crate::setup::start_run(runtime, &opts)
}

/// Why the run's required baseline limits cannot pass, when no `--baseline` is given;
/// warned here, before the run.
///
/// A budget whose baseline ratios are required fails every run without a baseline
/// ("no data"): said before the run (it can be stopped at once) and after the
/// verdicts, with the option it needs. The run goes on: its other limits are judged.
fn warn_baseline_missing(args: &BenchArgs, budget: &Budget, budget_path: &Path) -> Option<String> {
    let baseline_missing = args
        .baseline
        .is_none()
        .then(|| required_baseline(budget))
        .flatten()
        .map(|keys| {
            format!(
                "budget {}: its [baseline] limits ({keys}) are required (`required = true`) \
                 and judge the wake latency against cyclictest run beside the loop, and no \
                 baseline is measured; pass --baseline cyclictest (cyclictest from rt-tests), \
                 or use a budget without a required [baseline]",
                budget_path.display()
            )
        });
    if let Some(why) = &baseline_missing {
        errln!("chunkrt: warning: {why}; they will fail with no data");
    }
    baseline_missing
}

/// The bench's first line: what runs, for how long, judged by which budget.
fn announce(args: &BenchArgs, config_path: &Path, cfg: &Config, budget_path: &Path) {
    errln!(
        "chunkrt bench: {} for {:?} on the {:?} backend, {} ms period, budget {}{}",
        config_path.display(),
        args.duration,
        cfg.backend.kind,
        cfg.control.period_ms,
        budget_path.display(),
        match args.baseline {
            Some(_) => format!(
                ", then {} pairs of {:?} segments: the loop alone, cyclictest alone",
                args.baseline_pairs, args.baseline_segment
            ),
            None => String::new(),
        }
    );
}

/// cyclictest with the loop's period, priority, CPU and `/dev/cpu_dma_latency` setting.
fn cyclictest_spec(cfg: &Config) -> CyclictestSpec {
    let mut spec = CyclictestSpec::for_loop(
        cfg.period_ns(),
        cfg.control.priority,
        usize::try_from(cfg.control.cpu).ok(),
    );
    spec.hold_dma_latency = cfg.control.hold_cpu_dma_latency;
    spec
}

/// The baseline as measured: its table (when the segments gave one) and the merged
/// wake-latency histograms of the loop's segments and cyclictest's.
struct MeasuredBaseline {
    text: Option<String>,
    ours: hdrhistogram::Histogram<u64>,
    theirs: hdrhistogram::Histogram<u64>,
}

/// Runs the baseline's pairs of segments; adds the `baseline` block to the report and
/// writes `cyclictest.hgrm`.
fn measure_baseline(
    cfg: &Config,
    spec: &CyclictestSpec,
    args: &BenchArgs,
    report: &mut chunkrt_telemetry::Report,
) -> anyhow::Result<MeasuredBaseline> {
    let pairs = alternating_segments(cfg, spec, args)?;
    let mut text = None;
    if let Some(block) = Baseline::alternating(spec, args.baseline_segment.as_secs_f64(), &pairs) {
        text = Some(block.table());
        report
            .extra
            .insert("baseline".into(), serde_json::to_value(&block)?);
    }
    let mut ours = pairs[0].0.clone();
    let mut theirs = pairs[0].1.clone();
    for (l, c) in &pairs[1..] {
        ours.add(l)
            .map_err(|e| anyhow::anyhow!("merging the loop's wake-latency segments: {e:?}"))?;
        theirs.merge(c);
    }
    let theirs = theirs.to_hdr();
    write(
        &args.out.join("cyclictest.hgrm"),
        &hgrm::percentile_distribution(&theirs),
    )?;
    Ok(MeasuredBaseline { text, ours, theirs })
}

/// The verdicts, added to the report, and the bench's files: one `.hgrm` per metric,
/// `latency.svg`/`.png` and `report.json`.
fn write_files(
    args: &BenchArgs,
    cfg: &Config,
    budget: &Budget,
    report: &mut chunkrt_telemetry::Report,
    metrics: &chunkrt_telemetry::MetricSet,
    baseline: Option<&MeasuredBaseline>,
) -> anyhow::Result<Vec<budget::Verdict>> {
    let verdicts = budget.evaluate(report)?;
    budget::add_to_report(report, budget, &verdicts);
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
    let loop_extra = match baseline {
        Some(b) => vec![
            ("wake, loop segments".to_string(), &b.ours),
            ("wake, cyclictest segments".to_string(), &b.theirs),
        ],
        None => Vec::new(),
    };
    let panels = plot::standard_panels(metrics, loop_extra);
    if let Some(fig) = plot::percentile_plot(&panels, &title) {
        plot::save(&fig, &args.out.join("latency")).map_err(anyhow::Error::msg)?;
    }
    chunkrt_telemetry::outdir::write_atomic(&args.out, "report.json", report.to_json().as_bytes())
        .with_context(|| format!("writing {}", args.out.join("report.json").display()))?;
    Ok(verdicts)
}

/// The tables on stdout: the report, the baseline's (when measured), the verdicts,
/// and where the files are.
fn print_results(
    args: &BenchArgs,
    report: &chunkrt_telemetry::Report,
    baseline: Option<MeasuredBaseline>,
    verdicts: &[budget::Verdict],
) {
    outln!("{}", report.table());
    if let Some(t) = baseline.and_then(|b| b.text) {
        outln!("{t}");
    }
    outln!("{}", budget::verdict_table(report, verdicts));
    outln!(
        "report: {} (+ .hgrm per metric, latency.svg and .png)",
        args.out.join("report.json").display()
    );
}

/// The budget's required baseline limits (`p50_ratio, p99_ratio`), if any.
fn required_baseline(budget: &Budget) -> Option<String> {
    let keys: Vec<String> = budget
        .limits
        .iter()
        .filter_map(|l| match l {
            budget::Limit::BaselineRatio {
                stat,
                required: true,
                ..
            } => Some(format!("{stat}_ratio")),
            _ => None,
        })
        .collect();
    (!keys.is_empty()).then(|| keys.join(", "))
}

/// The baseline's pairs of segments: the loop alone (a fresh runtime from `cfg`,
/// nothing written), then cyclictest alone; the loop's wake-latency histogram and
/// cyclictest's, per pair.
fn alternating_segments(
    cfg: &Config,
    spec: &CyclictestSpec,
    args: &BenchArgs,
) -> anyhow::Result<Vec<(hdrhistogram::Histogram<u64>, CyclictestHistogram)>> {
    let mut pairs = Vec::new();
    for i in 1..=args.baseline_pairs {
        let runtime = Runtime::from_config(cfg).context("baseline segment: bring-up failed")?;
        let opts = RunOptions {
            duration: Some(args.baseline_segment),
            out_dir: None,
            live_status: false,
            stop: Arc::new(AtomicBool::new(false)),
            config_name: "baseline segment".into(),
        };
        let outcome = runtime
            .run(&opts)
            .map_err(|e| anyhow::anyhow!("baseline segment {i}: {e}"))?;
        let ours = outcome
            .metrics
            .get(chunkrt_telemetry::Metric::WakeLatency)
            .clone();
        let ct = Cyclictest::start(spec).context("--baseline cyclictest")?;
        std::thread::sleep(args.baseline_segment);
        let theirs = ct.stop().context("--baseline cyclictest")?;
        let p99 = |h: &hdrhistogram::Histogram<u64>| h.value_at_quantile(0.99) as f64 / 1000.0;
        errln!(
            "baseline pair {i}/{}: wake P99 {:.1} us (loop) vs {} us (cyclictest)",
            args.baseline_pairs,
            p99(&ours),
            theirs.quantile_us(0.99).0
        );
        pairs.push((ours, theirs));
    }
    Ok(pairs)
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
