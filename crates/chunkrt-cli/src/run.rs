//! `chunkrt run`: the whole pipeline for a while, its records in `--out`.

use crate::args::RunArgs;
use crate::console;
use crate::setup::{load_config, prepare_out_dir};
use crate::{paths, EXIT_USAGE};
use anyhow::Context;
use chunkrt_config::Config;
use chunkrt_rt::{Ending, RunOptions, RunOutcome, Runtime};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

fn load(path: Option<&std::path::Path>) -> anyhow::Result<(Config, String)> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => paths::default_config()?,
    };
    let cfg = load_config(&path)?;
    Ok((cfg, path.display().to_string()))
}

pub fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let notifier = crate::service::start();
    let mut claimed = None;
    let mut what = String::new();
    let result = run_with(args, &mut claimed, &mut what);
    let status = *result.as_ref().unwrap_or(&EXIT_USAGE);
    if what.is_empty() {
        what = match &result {
            Ok(0) => "ended normally".into(),
            Ok(_) => "refused before anything moved, or failed (see stderr)".into(),
            Err(e) => format!("{e:#}"),
        };
    }
    if let Some(c) = &claimed {
        if let Err(e) = crate::runs_dir::write_ending(&c.dir, status, &what) {
            console::err(&format!("chunkrt: warning: {e}"));
        }
    }
    if let Some(n) = notifier {
        n.finish(format!("ended with exit status {status}: {what}"));
    }
    result
}

/// The run's directory: `--out`, or a new one in `--runs-dir` (claimed, locked,
/// `latest` pointed at it, older runs trimmed by the retention rule).
fn out_dir(
    args: &RunArgs,
    claimed: &mut Option<crate::runs_dir::Claimed>,
) -> Result<std::path::PathBuf, String> {
    let Some(root) = &args.runs_dir else {
        return Ok(args.out.clone());
    };
    let c = crate::runs_dir::claim(root).map_err(|e| format!("--runs-dir: {e}"))?;
    let dir = c.dir.clone();
    *claimed = Some(c);
    let pruned = crate::runs_dir::prune(root, args.keep as usize, args.prune_faulted, &dir);
    for e in &pruned.errors {
        console::err(&format!("chunkrt: warning: --runs-dir retention: {e}"));
    }
    if !pruned.removed.is_empty() && !args.quiet {
        console::err(&format!(
            "chunkrt: --runs-dir: removed {} older run(s) that ended normally (--keep {})",
            pruned.removed.len(),
            args.keep
        ));
    }
    Ok(dir)
}

fn run_with(
    args: &RunArgs,
    claimed: &mut Option<crate::runs_dir::Claimed>,
    what: &mut String,
) -> anyhow::Result<u8> {
    // Before anything is read: a stop request while loading ends the process at once
    // (nothing is powered yet); from `loaded` on it starts the controlled stop.
    chunkrt_rt::signals::install().map_err(anyhow::Error::msg)?;
    let (mut cfg, name) = load(args.config.as_deref())?;
    if let Err(status) = apply_overrides(args, &mut cfg) {
        return Ok(status);
    }
    // The policy is loaded before the output directory is claimed: a stop request
    // while loading ends the process at once, with nothing left behind.
    let runtime = Runtime::from_config(&cfg).context("bring-up failed")?;
    let (out, _reserve) = match claim_out(args, claimed) {
        Ok(held) => held,
        Err(status) => return Ok(status),
    };
    let opts = RunOptions {
        duration: args.duration.0,
        out_dir: Some(out.clone()),
        live_status: !args.quiet,
        stop: Arc::new(AtomicBool::new(false)),
        config_name: name.clone(),
    };
    console::err(&format!(
        "chunkrt: {} on the {:?} backend, {} ms bus period, {:?} policy; Ctrl-C stops safely",
        name, cfg.backend.kind, cfg.control.period_ms, cfg.policy.kind
    ));
    chunkrt_rt::signals::loaded();
    let outcome = match crate::setup::start_run(runtime, &opts)? {
        Ok(o) => o,
        Err(status) => return Ok(status),
    };
    Ok(finish(args, &outcome, &out, what))
}

/// The command line's overrides of the configuration (`--bus-period-ms`, `--frozen`,
/// `--inject-*`, `--record`); `Err` carries the exit status of a refused one.
fn apply_overrides(args: &RunArgs, cfg: &mut Config) -> Result<(), u8> {
    if let Some(p) = args.bus_period_ms {
        if !(1.0..=20.0).contains(&p) {
            errln!("chunkrt: error: --bus-period-ms {p}: expected 1 to 20");
            return Err(EXIT_USAGE);
        }
        cfg.control.period_ms = p;
    }
    if args.frozen && cfg.policy.residual.take().is_some() && !args.quiet {
        console::err("chunkrt: --frozen: [policy.residual] left out, the base policy alone");
    }
    apply_inject(args, &mut cfg.inject);
    if let Err(e) = cfg.check_inject() {
        errln!("chunkrt: error: command line: {e}");
        return Err(EXIT_USAGE);
    }
    if let Some(file) = &args.record {
        if let Err(e) = record_file(file, args.overwrite) {
            console::err(&format!(
                "chunkrt: error: --record {}: {e}; nothing was moved",
                file.display()
            ));
            return Err(EXIT_USAGE);
        }
        cfg.telemetry.record = true;
        cfg.telemetry.record_file = Some(file.clone());
    }
    Ok(())
}

/// `--inject-*` overrides of `[inject]` (issue 8), checked afterwards like the file's
/// values.
fn apply_inject(args: &RunArgs, inj: &mut chunkrt_config::InjectConfig) {
    if let Some(v) = args.inject_transport_ms {
        inj.transport_delay_ms = v;
    }
    if let Some(v) = args.inject_obs_ms {
        inj.observation_delay_ms = v;
    }
    if let Some(v) = args.inject_inference_ms {
        inj.inference_delay = chunkrt_config::InferenceDelayConfig::Fixed { ms: v };
    }
    if let Some(v) = args.inject_feedback_ms {
        inj.feedback_delay_ms = v;
    }
    if let Some(v) = args.inject_drop {
        inj.drop_chunk_probability = v;
    }
    if let Some(v) = args.inject_seed {
        inj.seed = v;
    }
}

/// The run's output directory, claimed and its reserve held until the report is
/// written (see chunkrt_telemetry::outdir); `Err` carries the exit status.
///
/// Checked before anything is brought up: a run whose records could not be written
/// must not move the arm (a usage error, exit 2).
fn claim_out(
    args: &RunArgs,
    claimed: &mut Option<crate::runs_dir::Claimed>,
) -> Result<(std::path::PathBuf, chunkrt_telemetry::outdir::Reserve), u8> {
    let out = match out_dir(args, claimed) {
        Ok(d) => d,
        Err(e) => {
            console::err(&format!("chunkrt: error: {e}; nothing was moved"));
            return Err(EXIT_USAGE);
        }
    };
    match prepare_out_dir(&out, args.overwrite) {
        Ok(r) => Ok((out, r)),
        Err(e) => {
            console::err(&format!(
                "chunkrt: error: output directory {}: {e}; nothing was moved",
                out.display()
            ));
            Err(EXIT_USAGE)
        }
    }
}

/// After the run: the report, the ending (`what`, for the run's directory), the plots
/// and whether the records are whole; returns the exit status.
fn finish(args: &RunArgs, outcome: &RunOutcome, out: &std::path::Path, what: &mut String) -> u8 {
    console::out(&outcome.report.table());
    console::out(&format!("report: {}", out.join("report.json").display()));
    let ending = outcome.ending();
    *what = match outcome.describe_ending() {
        d if d.is_empty() => "ended normally".into(),
        d => d,
    };
    if !matches!(ending, Ending::Normal | Ending::RecordsIncomplete) {
        // Before anything else: the drives may still be powered.
        console::err(&format!("chunkrt: error: {}", outcome.describe_ending()));
        return crate::exit_status(ending);
    }
    // The plots, from the recording just closed (the arm is at rest and the
    // backend shut down): a failure is said, the run's status stays.
    if !args.no_plots && outcome.records_error.is_none() {
        plot(out);
    }
    if let Some(e) = &outcome.records_error {
        console::err(&format!(
            "chunkrt: error: the records in {} are incomplete: {e} (the run ended normally \
             and the arm was brought to rest)",
            out.display()
        ));
    }
    crate::exit_status(ending)
}

/// The run's plots, drawn from its records in `out`; the PNGs are listed, a failure
/// is a warning.
fn plot(out: &std::path::Path) {
    match chunkrt_telemetry::plot::plot_run(out, None, out) {
        Ok(files) => console::out(&format!(
            "plots: {}",
            files
                .iter()
                .filter(|f| f.extension().is_some_and(|e| e == "png"))
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(e) => console::err(&format!("chunkrt: warning: no plots: {e}")),
    }
}

/// A `--record` file: refused when it exists (unless `overwrite`); its directory is
/// created.
fn record_file(file: &std::path::Path, overwrite: bool) -> Result<(), String> {
    if file.exists() && !overwrite {
        return Err("already exists; pass --overwrite to replace it".into());
    }
    if file.is_dir() {
        return Err("is a directory".into());
    }
    match file.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => std::fs::create_dir_all(dir).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}
