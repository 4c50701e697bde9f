//! The subcommands.

use crate::args::{Cli, Command, RunArgs};
use crate::{paths, EXIT_FAIL, EXIT_USAGE};
use anyhow::Context;
use chunkrt_config::{Config, FileKind};
use chunkrt_rt::{RunOptions, Runtime};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Runs a subcommand; returns the exit status.
pub fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Run(args) => run(&args),
        Command::Bench(args) => crate::bench::bench(&args),
        Command::Check(args) => crate::check::check(&args),
        Command::Margin(args) => crate::margin::margin(&args),
        Command::Ecsim(args) => crate::tools::ecsim(&args),
        Command::Policy(cmd) => crate::tools::policy(&cmd),
        Command::Validate { file } => validate(&file),
    }
}

fn load(path: Option<&std::path::Path>) -> anyhow::Result<(Config, String)> {
    let path = match path {
        Some(p) => p.to_path_buf(),
        None => paths::default_config()?,
    };
    let cfg = Config::load(&path)?;
    Ok((cfg, path.display().to_string()))
}

/// `chunkrt validate FILE`: tells which of chunkrt's file kinds FILE is (run
/// configuration, budget, ecsim configuration, policy manifest), loads it with that
/// kind's loader, and says which kind it validated.
fn validate(file: &std::path::Path) -> anyhow::Result<u8> {
    let text = chunkrt_config::read_file(file)?;
    let kind = FileKind::detect(file, &text);
    let summary = validate_as(kind, file, &text).map_err(|e| {
        anyhow::anyhow!(
            "{} (read as a {}; the kind is told from its keys)",
            chunkrt_config::clip(&e.to_string()),
            kind.name()
        )
    })?;
    println!("{}: OK: {}: {summary}", file.display(), kind.name());
    Ok(0)
}

/// Loads `text` as a file of `kind`; a one-line summary of what it holds.
fn validate_as(
    kind: FileKind,
    file: &std::path::Path,
    text: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    Ok(match kind {
        FileKind::Run => {
            let cfg = Config::parse_str(text, file)?;
            format!(
                "{} joints, {} ms bus period, {:?} policy, {:?} backend",
                cfg.control.joints, cfg.control.period_ms, cfg.policy.kind, cfg.backend.kind
            )
        }
        FileKind::Budget => {
            let b = chunkrt_telemetry::budget::Budget::parse_str(text, file)?;
            format!(
                "{} limits{}",
                b.limits.len(),
                b.description
                    .map(|d| format!(" ({})", chunkrt_config::clip(&d)))
                    .unwrap_or_default()
            )
        }
        FileKind::Ecsim => {
            let c = chunkrt_ecsim::SimConfig::from_toml_str(text, file)?;
            format!(
                "{} drives, {:?} clock, {} timed drive faults, {} link cuts",
                c.drives,
                c.clock,
                c.drive_fault.len(),
                c.link_cut.len()
            )
        }
        FileKind::PolicyManifest => {
            let m = chunkrt_policy::Manifest::parse(file, text)?;
            format!(
                "{:?} model {}, {} joints, {} setpoints {} ms apart",
                m.kind, m.model_file, m.d_a, m.horizon, m.dt_ms
            )
        }
    })
}

fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let (mut cfg, name) = load(args.config.as_deref())?;
    if let Some(p) = args.bus_period_ms {
        if !(1.0..=20.0).contains(&p) {
            eprintln!("chunkrt: error: --bus-period-ms {p}: expected 1 to 20");
            return Ok(EXIT_USAGE);
        }
        cfg.control.period_ms = p;
    }
    // `--inject-*` overrides of `[inject]` (issue 8), checked like the file's values.
    let inj = &mut cfg.inject;
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
    if let Err(e) = cfg.check_inject() {
        eprintln!("chunkrt: error: command line: {e}");
        return Ok(EXIT_USAGE);
    }
    // Checked before anything is brought up: a run whose records could not be
    // written must not move the arm (a usage error, exit 2).
    if let Err(e) = writable_dir(&args.out) {
        eprintln!(
            "chunkrt: error: output directory {}: {e}; nothing was moved",
            args.out.display()
        );
        return Ok(EXIT_USAGE);
    }
    chunkrt_rt::signals::install().map_err(anyhow::Error::msg)?;
    let opts = RunOptions {
        duration: args.duration.0,
        out_dir: Some(args.out.clone()),
        live_status: !args.quiet,
        stop: Arc::new(AtomicBool::new(false)),
        config_name: name.clone(),
    };
    eprintln!(
        "chunkrt: {} on the {:?} backend, {} ms bus period, {:?} policy; Ctrl-C stops safely",
        name, cfg.backend.kind, cfg.control.period_ms, cfg.policy.kind
    );
    let runtime = Runtime::from_config(&cfg).context("bring-up failed")?;
    let outcome = match runtime.run(&opts) {
        Ok(o) => o,
        Err(e @ chunkrt_rt::RunError::Backend(_)) => return Err(e).context("bring-up failed"),
        Err(e) => {
            eprintln!("chunkrt: error: {e}");
            return Ok(EXIT_FAIL);
        }
    };
    println!("{}", outcome.report.table());
    println!("report: {}", args.out.join("report.json").display());
    if let Some(e) = &outcome.shutdown_error {
        // Before anything else: the drives may still be powered.
        eprintln!(
            "chunkrt: error: shutdown failed: {e}; drives may still be enabled or the bus \
             not in INIT: check the drives before going near the arm"
        );
    }
    if let Some(msg) = &outcome.inference_panicked {
        eprintln!("chunkrt: the policy failed during the run ({msg}); the arm was brought to rest");
    }
    if outcome.shutdown_error.is_some() {
        return Ok(crate::EXIT_SHUTDOWN_FAILED);
    }
    if outcome.inference_panicked.is_some() {
        return Ok(crate::EXIT_POLICY_FAILED);
    }
    Ok(0)
}

/// Creates `dir` if needed and proves that a file can be written in it (a read-only
/// file system or a path under a regular file fail here, not after the run).
fn writable_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(".chunkrt-write-probe");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}
