//! `chunkrt validate FILE`: what `run` (or `bench`, `ecsim`) checks when it loads the
//! file, done without moving anything.
//!
//! A policy manifest is loaded as a run loads it: the model read with its bound, its
//! size and SHA-256 against the manifest, its graph opened in ONNX Runtime and its
//! inputs and outputs checked. A run configuration has its policy built as `run` builds
//! it (the manifest it names, loaded as above) and, on the simulated arm, the arm built
//! at its start pose (inside the stops). Where a check cannot be made (no ONNX Runtime
//! library) the file is not called OK: exit status 1 and what was not checked.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use chunkrt_config::{BackendKind, Config, FileKind, PolicyKind};

/// Exit status when the file is not refused but a check could not be made.
const EXIT_NOT_CHECKED: u8 = crate::EXIT_FAIL;

/// A refusal as shown: config errors bound their file name and their message each to
/// `MAX_MESSAGE_BYTES`, so both are shown whole; anything longer is cut.
fn shown(text: &str) -> String {
    if text.len() <= 2 * chunkrt_config::MAX_MESSAGE_BYTES + 64 {
        text.to_string()
    } else {
        chunkrt_config::clip(text)
    }
}

/// Why a file was refused.
enum Refused {
    /// It does not parse or fit its kind's schema and ranges.
    Parse(Box<dyn std::error::Error>),
    /// It parses; what it names (policy, model, the arm at its start pose) was refused
    /// as `run` would refuse it.
    Load(anyhow::Error),
}

impl<E: std::error::Error + 'static> From<E> for Refused {
    fn from(e: E) -> Refused {
        Refused::Parse(Box::new(e))
    }
}

/// What was found: a one-line summary, and what could not be checked (if anything).
struct Verdict {
    summary: String,
    unchecked: Option<String>,
}

impl Verdict {
    fn checked(summary: String) -> Verdict {
        Verdict {
            summary,
            unchecked: None,
        }
    }
}

/// `chunkrt validate FILE`: tells which of chunkrt's file kinds FILE is (run
/// configuration, budget, ecsim configuration, policy manifest), loads it as the
/// command that uses it would, and says which kind it validated.
pub fn validate(file: &Path) -> anyhow::Result<u8> {
    let text = match chunkrt_config::read_file(file) {
        Ok(text) => text,
        // Told before its size or its bytes are: an ONNX model larger than a TOML file
        // may be would otherwise be refused for its size.
        Err(_) if looks_onnx(file) => return Err(onnx_model(file)),
        Err(e) => return Err(e.into()),
    };
    let kind = FileKind::detect(file, &text);
    let verdict = validate_as(kind, file, &text).map_err(|e| match e {
        // The file did not parse as the kind it was told to be: the kind may be wrong.
        Refused::Parse(e) => anyhow!(
            "{} (read as a {}; the kind is told from its keys)",
            shown(&e.to_string()),
            kind.name()
        ),
        // It parsed; what it names was refused (each message names its own file).
        Refused::Load(e) => e,
    })?;
    match verdict.unchecked {
        None => {
            outln!(
                "{}: OK: {}: {}",
                file.display(),
                kind.name(),
                verdict.summary
            );
            Ok(0)
        }
        Some(why) => {
            outln!(
                "{}: NOT CHECKED: {}: {}",
                file.display(),
                kind.name(),
                verdict.summary
            );
            crate::console::err(&format!(
                "chunkrt: error: {}: not validated: {why}",
                file.display()
            ));
            Ok(EXIT_NOT_CHECKED)
        }
    }
}

/// Whether `file` is an ONNX model: by its name, or (a regular file only: nothing
/// that could block is opened) by its first byte, a protobuf ModelProto's field 1
/// (ir_version, a varint), tag 0x08.
fn looks_onnx(file: &Path) -> bool {
    use std::io::Read;
    if file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    {
        return true;
    }
    if !std::fs::metadata(file).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut first = [0u8; 1];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut first))
        .is_ok_and(|()| first[0] == 0x08)
}

/// What to say of an ONNX model given to `validate`: a model is checked through the
/// policy manifest that names it, so the manifests beside it that name it are looked
/// up and named (or, when there is none, how to draft one).
fn onnx_model(file: &Path) -> anyhow::Error {
    let f = file.display();
    let manifests = manifests_naming(file);
    if manifests.is_empty() {
        let draft = file.with_extension("toml");
        anyhow!(
            "{f} is an ONNX model, not a manifest: `chunkrt validate` checks a model through \
             the policy manifest that names it (its model_file), and no manifest beside it \
             does; draft one with `chunkrt policy inspect {f} --manifest-only > {}`, then \
             validate that",
            draft.display()
        )
    } else {
        let names: Vec<String> = manifests
            .iter()
            .map(|m| format!("chunkrt validate {}", m.display()))
            .collect();
        anyhow!(
            "{f} is an ONNX model, not a manifest: `chunkrt validate` checks a model through \
             the policy manifest that names it; pass its manifest: {}",
            names.join(" or ")
        )
    }
}

/// The policy manifests in `model`'s directory whose `model_file` is `model`.
fn manifests_naming(model: &Path) -> Vec<std::path::PathBuf> {
    let dir = model
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let Ok(target) = std::fs::canonicalize(model) else {
        return vec![];
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut found: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| {
            // Read with the TOML bound, as every file a user names.
            let Ok(text) = chunkrt_config::read_file(p) else {
                return false;
            };
            let Ok(table) = chunkrt_config::parse_toml::<serde_json::Value>(&text, p) else {
                return false;
            };
            table
                .get("model_file")
                .and_then(|v| v.as_str())
                .and_then(|m| std::fs::canonicalize(dir.join(m)).ok())
                .is_some_and(|m| m == target)
        })
        .collect();
    found.sort();
    found
}

/// Loads `text` as a file of `kind`.
fn validate_as(kind: FileKind, file: &Path, text: &str) -> Result<Verdict, Refused> {
    Ok(match kind {
        FileKind::Run => run_config(file, text)?,
        FileKind::Budget => {
            let b = chunkrt_telemetry::budget::Budget::parse_str(text, file)?;
            Verdict::checked(format!(
                "{} limits{}",
                b.limits.len(),
                b.description
                    .map(|d| format!(" ({})", chunkrt_config::clip(&d)))
                    .unwrap_or_default()
            ))
        }
        FileKind::Ecsim => {
            let c = chunkrt_ecsim::SimConfig::from_toml_str(text, file)?;
            Verdict::checked(format!(
                "{} drives, {:?} clock, {} timed drive faults, {} link cuts",
                c.drives,
                c.clock,
                c.drive_fault.len(),
                c.link_cut.len()
            ))
        }
        FileKind::PolicyManifest => {
            manifest(file, &chunkrt_policy::SessionOptions::default(), None)?
        }
    })
}

/// A policy manifest, loaded as a run loads it. `named_by`: the run configuration
/// that names it, for messages.
fn manifest(
    file: &Path,
    opts: &chunkrt_policy::SessionOptions,
    named_by: Option<&Path>,
) -> Result<Verdict, Refused> {
    let v = chunkrt_policy::verify_manifest(file, opts).map_err(|e| match e {
        chunkrt_policy::PolicyLoadError::ManifestParse { .. }
        | chunkrt_policy::PolicyLoadError::ManifestInvalid { .. }
            if named_by.is_none() =>
        {
            Refused::Parse(Box::new(e))
        }
        e => Refused::Load(e.into()),
    })?;
    let model = format!(
        "model {} ({} bytes, SHA-256 as declared)",
        v.model.display(),
        v.model_bytes
    );
    let by = named_by
        .map(|c| format!(" (policy.manifest of {})", c.display()))
        .unwrap_or_default();
    Ok(match v.graph_unchecked {
        None => Verdict::checked(format!(
            "{}; {model}; graph inputs and outputs agree with the manifest (ONNX Runtime)",
            v.summary
        )),
        Some(why) => Verdict {
            summary: format!("{}; {model}; graph NOT checked", v.summary),
            unchecked: Some(format!(
                "the graph of {} could not be checked against its manifest {}{by}: {why}",
                v.model.display(),
                file.display()
            )),
        },
    })
}

/// A run configuration: parsed and range-checked, then its backend (the simulated arm
/// at its start pose) and its policy built as `run` builds them.
fn run_config(file: &Path, text: &str) -> Result<Verdict, Refused> {
    // Parsed from the text already read (with its bound), resolved and checked against
    // this host (the operator's socket path, its group) as `Config::load` does.
    let cfg = Config::from_file_text(text, file)?;
    let mut summary = format!(
        "{} joints, {} ms bus period, {:?} policy, {:?} backend",
        cfg.control.joints, cfg.control.period_ms, cfg.policy.kind, cfg.backend.kind
    );
    check_backend(&cfg, file, &mut summary)?;
    check_wear_ledger(&cfg, file, &mut summary)?;
    if cfg.policy.kind == PolicyKind::Onnx {
        if let Some(v) = onnx_without_runtime(&cfg, file, &summary)? {
            return Ok(v);
        }
    }
    if cfg.policy.kind == PolicyKind::Remote {
        return remote_policy(&cfg, file, &summary);
    }
    check_policy(&cfg, file)?;
    if cfg.policy.kind == PolicyKind::Onnx {
        summary.push_str(" (policy loaded as `run` loads it: model digest and graph checked)");
    }
    Ok(Verdict::checked(summary))
}

/// The backend built as `run` builds it, for the simulated arm and the MuJoCo model
/// (what was checked is added to `summary`).
fn check_backend(cfg: &Config, file: &Path, summary: &mut String) -> Result<(), Refused> {
    if cfg.backend.kind == BackendKind::Sim {
        // The arm is built here as `run` builds it: its start pose against its stops.
        chunkrt_rt::build::backend(cfg).map_err(|e| {
            let default = cfg.sim.as_ref().is_none_or(|s| s.initial_pos_rad.is_none());
            let hint = if default {
                " (the simulated arm's default start pose: [sim] sets no initial_pos_rad; \
                 set one inside limits.pos_min_rad / limits.pos_max_rad)"
            } else {
                ""
            };
            Refused::Load(anyhow!("{}: {e}{hint}", file.display()))
        })?;
        summary.push_str(" (start pose inside the stops)");
    }
    if cfg.backend.kind == BackendKind::Mujoco {
        // The model read, its digest checked and loaded by MuJoCo, as `run` does.
        chunkrt_rt::build::backend(cfg)
            .map_err(|e| Refused::Load(anyhow!("{}: {e}", file.display())))?;
        summary.push_str(" (the arm model's digest, joints and torque limits checked)");
    }
    if cfg.cartesian.is_some() {
        // The Cartesian stage's kinematics read as `run` reads them.
        chunkrt_rt::build::cartesian(cfg)
            .map_err(|e| Refused::Load(anyhow!("{}: {e}", file.display())))?;
        summary.push_str(" (the Cartesian stage's model digest, joints and tool checked)");
    }
    Ok(())
}

/// The wear ledger, when the config names one (its size is added to `summary`).
fn check_wear_ledger(cfg: &Config, file: &Path, summary: &mut String) -> Result<(), Refused> {
    // The wear ledger read as a run reads it before anything moves (a regular file,
    // every line a ledger line); nothing is written.
    if let Some(totals) = chunkrt_rt::wear::load_ledger(cfg, false)
        .map_err(|e| Refused::Load(anyhow!("{}: {e}", file.display())))?
    {
        summary.push_str(&format!(
            " (wear ledger: {} line(s), {} hardware id(s))",
            totals.lines,
            totals.units.len()
        ));
    }
    Ok(())
}

/// An ONNX policy's manifest, read with its bound; on a host without ONNX Runtime,
/// the verdict of what can be checked without it.
fn onnx_without_runtime(
    cfg: &Config,
    file: &Path,
    summary: &str,
) -> Result<Option<Verdict>, Refused> {
    let path = manifest_path(cfg, file)?;
    // The manifest read with its bound before `build::policy` reads it (a manifest
    // path naming /dev/zero or a FIFO is refused here, at once).
    chunkrt_policy::manifest::read_manifest_text(&path)
        .map_err(|e| Refused::Load(anyhow!("{}: policy.manifest: {e}", file.display())))?;
    let ort_library = cfg.policy.ort_library.as_ref().map(|l| cfg.resolve(l));
    if chunkrt_policy::find_ort_library(ort_library.as_deref()).is_err() {
        // Without ONNX Runtime the run could not load the policy at all; what can be
        // checked (manifest, model size and digest) is, and the rest is said.
        let opts = chunkrt_policy::SessionOptions {
            ort_library,
            ..chunkrt_policy::SessionOptions::default()
        };
        let v = manifest(&path, &opts, Some(file))?;
        return Ok(Some(Verdict {
            summary: format!("{summary}; policy {}", v.summary),
            unchecked: v.unchecked,
        }));
    }
    Ok(None)
}

/// A remote policy's verdict: its manifest and the server's URL checked.
fn remote_policy(cfg: &Config, file: &Path, summary: &str) -> Result<Verdict, Refused> {
    // What the host holds is checked (the manifest, the server's URL, its token's
    // variable); the server itself is not contacted by a check of a file.
    let path = manifest_path(cfg, file)?;
    chunkrt_policy::Manifest::load(&path)
        .map_err(|e| Refused::Load(anyhow!("{}: policy.manifest: {e}", file.display())))?;
    chunkrt_rt::build::remote_config(cfg)
        .map_err(|e| Refused::Load(anyhow!("{}: {e}", file.display())))?;
    Ok(Verdict::checked(format!(
        "{summary} (remote policy: its manifest and the server's URL checked; the \
         server is not contacted: `run` connects and refuses one that is unreachable \
         or serves another model)"
    )))
}

/// The policy built as `run` builds it, and checked against the camera (or its absence).
fn check_policy(cfg: &Config, file: &Path) -> Result<(), Refused> {
    // The policy as `run` builds it (for an ONNX policy: manifest, model digest,
    // graph, and the config's sampler, steps and history against the manifest).
    let policy = chunkrt_rt::build::policy(cfg)
        .map_err(|e| Refused::Load(anyhow!("{}: {e}", file.display())))?;
    // As `run` checks before anything is brought up: a policy that takes an image
    // needs a camera, and a camera such a policy.
    match (&cfg.camera, policy.image_size()) {
        (None, Some((h, w))) => {
            return Err(Refused::Load(anyhow!(
                "{}: the policy takes a {h} x {w} camera image and the config has no [camera]",
                file.display()
            )))
        }
        (Some(_), None) => {
            return Err(Refused::Load(anyhow!(
                "{}: the config has a [camera] and the policy takes no image",
                file.display()
            )))
        }
        _ => {}
    }
    Ok(())
}

/// The policy's manifest, resolved against the config's folder.
fn manifest_path(cfg: &Config, file: &Path) -> Result<PathBuf, Refused> {
    cfg.policy
        .manifest
        .as_ref()
        .map(|m| cfg.resolve(m))
        .ok_or_else(|| Refused::Load(anyhow!("{}: policy.manifest is not set", file.display())))
}
