//! `chunkrt ecsim`, `chunkrt policy sample`, `chunkrt policy inspect` and `chunkrt validate`: the tools around
//! the runtime.

pub mod episodes;
pub mod export;
pub mod reference;
pub mod status;
pub mod validate;
pub mod wear;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};

/// `chunkrt ecsim`.
#[derive(Parser, Debug, Clone)]
pub struct EcsimArgs {
    /// Network interface to answer on (the far end of a veth pair, say).
    #[arg(long)]
    pub iface: String,
    /// Number of simulated drives in the chain.
    #[arg(long, default_value_t = 7)]
    pub drives: usize,
    /// Simulator configuration (drive parameters, fault injection), TOML.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A run configuration whose `[mujoco]` arm moves the drives (one physics model of
    /// the whole arm behind all of them), each joint on its drive as its
    /// `[[ethercat.drive]]` says; e.g. rt-config/arm-ethercat-mujoco.toml.
    #[arg(long)]
    pub arm: Option<PathBuf>,
}

/// `chunkrt policy ...`.
#[derive(Subcommand, Debug, Clone)]
pub enum PolicyCommand {
    /// Draw action chunks from a model at one observation.
    Sample(SampleArgs),
    /// A graph's inputs and outputs, and a drafted manifest (format 2) for it; or a
    /// policy manifest's provenance ledger.
    Inspect(InspectArgs),
}

/// `chunkrt policy inspect`.
#[derive(Parser, Debug, Clone)]
pub struct InspectArgs {
    /// The ONNX model, or a policy manifest (its provenance ledger is printed, the
    /// digests of the files it cites checked).
    pub model: PathBuf,
    /// Print only the drafted manifest (to redirect into a file).
    #[arg(long)]
    pub manifest_only: bool,
}

/// `chunkrt policy sample`.
#[derive(Parser, Debug, Clone)]
pub struct SampleArgs {
    /// The policy manifest (the model sits beside it).
    #[arg(long)]
    pub manifest: PathBuf,
    /// The observation vector, comma separated (as the manifest encodes it).
    #[arg(long, allow_hyphen_values = true)]
    pub obs: String,
    /// Number of chunks to draw.
    #[arg(long, default_value_t = 1)]
    pub samples: usize,
    /// Sampler steps (default: the manifest's).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Noise seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Serves simulated drives until SIGINT / SIGTERM.
pub fn ecsim(args: &EcsimArgs) -> anyhow::Result<u8> {
    if args.drives == 0 || args.drives > chunkrt_core::MAX_DOF {
        anyhow::bail!(
            "--drives {}: expected 1 to {}",
            args.drives,
            chunkrt_core::MAX_DOF
        );
    }
    chunkrt_rt::signals::install().map_err(anyhow::Error::msg)?;
    let mut sim = match &args.config {
        Some(p) => chunkrt_ecsim::SimConfig::load(p)?,
        None => chunkrt_ecsim::SimConfig::default(),
    };
    sim.drives = args.drives;
    let mut net = chunkrt_ecsim::SimNetwork::new(sim)?;
    if let Some(path) = &args.arm {
        let cfg = chunkrt_config::Config::load(path)?;
        let plant = chunkrt_rt::build::ecsim_arm(&cfg)
            .map_err(|e| anyhow::anyhow!("--arm {}: {e}", path.display()))?;
        errln!(
            "chunkrt ecsim: the drives move {}",
            chunkrt_ecsim::ChainPlant::describe(&plant)
        );
        net.set_plant(Box::new(plant))?;
    }
    // Loaded: a stop request from now on ends the simulator through its flag.
    chunkrt_rt::signals::loaded();
    errln!(
        "chunkrt ecsim: {} drive(s) on {}; Ctrl-C stops",
        args.drives,
        args.iface
    );
    chunkrt_ecsim::run_af_packet_with(&args.iface, net, chunkrt_rt::signals::flag())?;
    Ok(0)
}

/// Why `policy inspect` could not read `model`, when the cause is the path rather than
/// the model: no such file (with the models beside where it was looked for). `None`:
/// the model's own error stands.
fn not_a_model(model: &Path) -> Option<anyhow::Error> {
    let m = model.display();
    match std::fs::symlink_metadata(model) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = model
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let mut models: Vec<String> = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
                .map(|p| p.display().to_string())
                .collect();
            models.sort();
            let beside = if models.is_empty() {
                String::new()
            } else {
                format!(" (the models in {}: {})", dir.display(), models.join(", "))
            };
            Some(anyhow::anyhow!(
                "{m}: no such file: `chunkrt policy inspect` takes the path of an ONNX model \
                 (.onnx); check the path{beside}"
            ))
        }
        _ => None,
    }
}

/// Whether `path` is a policy manifest (told from its keys): `policy inspect` prints
/// its provenance ledger.
fn is_manifest(path: &Path) -> bool {
    chunkrt_config::read_file(path).is_ok_and(|text| {
        chunkrt_config::FileKind::detect(path, &text) == chunkrt_config::FileKind::PolicyManifest
    })
}

/// Runs a policy subcommand.
pub fn policy(cmd: &PolicyCommand) -> anyhow::Result<u8> {
    match cmd {
        PolicyCommand::Inspect(a) => {
            if is_manifest(&a.model) {
                if a.manifest_only {
                    anyhow::bail!(
                        "--manifest-only drafts a manifest for an ONNX model; {} is a manifest",
                        a.model.display()
                    );
                }
                out!("{}", chunkrt_policy::verify::ledger_text(&a.model)?);
                return Ok(0);
            }
            let i = chunkrt_policy::inspect::inspect(
                &a.model,
                &chunkrt_policy::SessionOptions::default(),
            )
            .map_err(|e| not_a_model(&a.model).unwrap_or_else(|| e.into()))?;
            let draft = chunkrt_policy::inspect::draft_manifest(&a.model, &i);
            if a.manifest_only {
                out!("{draft}");
            } else {
                out!(
                    "{}\ndrafted manifest:\n\n{draft}",
                    chunkrt_policy::inspect::inspection_text(&a.model, &i)
                );
            }
            Ok(0)
        }
        PolicyCommand::Sample(a) => {
            let obs = a
                .obs
                .split(',')
                .map(|v| {
                    v.trim()
                        .parse::<f32>()
                        .map_err(|_| anyhow::anyhow!("--obs: `{}` is not a number", v.trim()))
                })
                .collect::<anyhow::Result<Vec<f32>>>()?;
            if a.samples == 0 {
                anyhow::bail!("--samples must be at least 1");
            }
            let opts = chunkrt_policy::SampleOptions {
                samples: a.samples,
                steps: a.steps,
                seed: a.seed,
                ..chunkrt_policy::SampleOptions::default()
            };
            let report = chunkrt_policy::sample_chunks_with(&a.manifest, &obs, &opts)?;
            if a.json {
                outln!("{}", chunkrt_policy::report_to_json(&report));
            } else {
                out!("{}", chunkrt_policy::report_to_text(&report));
            }
            Ok(0)
        }
    }
}
