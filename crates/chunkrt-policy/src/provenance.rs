//! The provenance ledger of a policy manifest (either format): where the policy came
//! from, what its simulation left out, what went wrong with it on hardware.
//!
//! - `[[regime_sequence]]`: the training stages in order, each with the digest of the
//!   checkpoint it ended with; the last stage's is the deployed model's (`model_sha256`).
//! - `[simulation_provenance]`: the simulator the policy (or its last simulated stage)
//!   was trained in: engine, build, timestep, integrator, model asset digest,
//!   randomisation ranges.
//! - `[[omission_log]]`: mechanisms the reality gap measured unclosed (`chunkrt gap`
//!   appends its over-tolerance rows): the channel and metric, the joints, the
//!   measurement file and its digest, the states it affects, and the regions of joint
//!   state it removes from the declared domain (`[[omission_log.exclude]]`, enforced by
//!   the control loop every cycle: [`chunkrt_core::Exclusions`]).
//! - `[[negative_event_registry]]`: intervention records (`interventions/<sha256>.jsonl`
//!   of a run) cited by digest.
//! - `[[adaptation_wear_ledger]]`: per hardware id, the wear ledger file and its digest.
//!
//! Every section is optional. Its values are checked with the rest of the manifest; a
//! cited file (a path relative to the manifest) is read and its SHA-256 compared when
//! the manifest is loaded ([`Provenance::verify_files`]): a ledger whose digest does
//! not match what it cites is refused, naming the key. A cited file is read with a
//! bound (a regular file of at most [`CITED_LIMIT_BYTES`], digested while streaming,
//! never held; a wear ledger's first lines a line at a time), once per load however
//! often it is cited, and only inside the manifest's directory unless the manifest says
//! `cite_outside_manifest_dir = true`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use chunkrt_core::{ExcludedRegion, Exclusions, MAX_EXCLUSIONS};
use serde::Deserialize;

use crate::error::ManifestProblem::{self, Rule};

/// One training stage.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegimeStage {
    /// What the stage was (`imitation`, `residual fine-tuning`, ...).
    pub stage: String,
    /// Where its data came from (`chunkrt-sim`, `mujoco`, `franka-01`, ...).
    pub plant: String,
    /// SHA-256 of the checkpoint the stage ended with.
    pub checkpoint_sha256: String,
    /// That checkpoint's file, relative to the manifest (checked when given).
    #[serde(default)]
    pub checkpoint: Option<String>,
    /// What the data was (informative).
    #[serde(default)]
    pub data: Option<String>,
}

/// The simulator a policy was trained in.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimulationProvenance {
    /// `chunkrt-sim`, `mujoco`, ...
    pub engine: String,
    /// The engine's build (version, commit).
    pub build: String,
    /// Integration step (s).
    pub timestep_s: f64,
    /// Integrator (`semi-implicit euler`, `implicitfast`, ...).
    pub integrator: String,
    /// The plant's model asset (an MJCF, a config), relative to the manifest.
    #[serde(default)]
    pub model_asset: Option<String>,
    /// Its SHA-256 (none: the engine has no model asset, e.g. a kinematic expert).
    #[serde(default)]
    pub model_asset_sha256: Option<String>,
    /// Randomised parameters: name -> `[low, high]`.
    #[serde(default)]
    pub randomization: BTreeMap<String, [f64; 2]>,
}

/// A bound of an excluded region on one joint.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExcludeBound {
    /// The joint.
    pub joint: usize,
    /// `[low, high]` on its position (rad).
    #[serde(default)]
    pub pos_rad: Option<[f64; 2]>,
    /// `[low, high]` on its velocity (rad/s).
    #[serde(default)]
    pub vel_rad_s: Option<[f64; 2]>,
}

/// A mechanism the reality gap measured unclosed.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Omission {
    /// What is not modelled (`drive delay`, `backlash`, `gravity`, ...).
    pub mechanism: String,
    /// The gap's channel (`actuator`, `sensing`, `timing`, `load`, ...).
    pub channel: String,
    /// The gap's metric (`phase_lag_deg@10Hz`, ...).
    pub metric: String,
    /// The joints it concerns (empty: the arm as a whole).
    #[serde(default)]
    pub joints: Vec<usize>,
    /// The metric on the reference plant.
    pub reference: f64,
    /// The metric on the plant.
    pub plant: f64,
    /// Its tolerance.
    pub tolerance: f64,
    /// The measurement (`gap.json`), relative to the manifest (checked when given).
    #[serde(default)]
    pub measurement: Option<String>,
    /// Its SHA-256.
    pub measurement_sha256: String,
    /// The states it affects (informative: `joint_pos[3]`, `joint_vel[3]`, ...).
    #[serde(default)]
    pub affects: Vec<String>,
    /// The region it removes from the declared domain: the states inside every bound
    /// (none: the entry records the mechanism, the domain is unchanged).
    #[serde(default)]
    pub exclude: Vec<ExcludeBound>,
}

/// An intervention record cited by digest.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NegativeEvent {
    /// SHA-256 of the record (its name: `interventions/<sha256>.jsonl`).
    pub sha256: String,
    /// `withdrawal`, `gate_saturation`, `following_error`, `fault`, `operator_stop`.
    pub kind: String,
    /// What happened (informative).
    #[serde(default)]
    pub detail: Option<String>,
    /// The record file, relative to the manifest (checked when given).
    #[serde(default)]
    pub record: Option<String>,
}

/// One hardware id's wear ledger.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WearLedgerRef {
    /// The hardware (a drive serial, the config's id).
    pub hardware_id: String,
    /// SHA-256 of the ledger file (of its first `entries` lines when given).
    pub ledger_sha256: String,
    /// The ledger's lines the digest covers: the runtime appends to a ledger after every
    /// run, so a manifest cites it up to the runs the policy was adapted in. Not set:
    /// the whole file.
    #[serde(default)]
    pub entries: Option<u64>,
    /// The ledger file, relative to the manifest (checked when given).
    #[serde(default)]
    pub ledger: Option<String>,
}

/// The provenance sections of a manifest, borrowed from it.
#[derive(Clone, Copy, Debug)]
pub struct Provenance<'a> {
    /// `[[regime_sequence]]`.
    pub regime_sequence: &'a [RegimeStage],
    /// `[simulation_provenance]`.
    pub simulation: Option<&'a SimulationProvenance>,
    /// `[[omission_log]]`.
    pub omission_log: &'a [Omission],
    /// `[[negative_event_registry]]`.
    pub negative_events: &'a [NegativeEvent],
    /// `[[adaptation_wear_ledger]]`.
    pub wear_ledger: &'a [WearLedgerRef],
    /// `cite_outside_manifest_dir`: a cited file may lie outside the manifest's
    /// directory.
    pub cite_outside: bool,
}

/// The largest file a manifest may cite by its path: a checkpoint larger than this is
/// cited by its digest alone (`checkpoint_sha256` without `checkpoint`).
pub const CITED_LIMIT_BYTES: u64 = 1 << 30;

/// What a cited file is read as, in messages.
const CITED: &str = "file cited by a manifest";

/// Checks a SHA-256 written in a manifest: 64 lowercase hex digits.
pub(crate) fn check_sha256(key: &str, sha: &str) -> Result<(), ManifestProblem> {
    if sha.len() == 64
        && sha
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        Ok(())
    } else {
        Err(Rule(format!(
            "{key} = \"{sha}\" is not 64 lowercase hex digits"
        )))
    }
}

fn nonempty(key: &str, s: &str) -> Result<(), ManifestProblem> {
    if s.trim().is_empty() {
        Err(Rule(format!("{key} is empty")))
    } else {
        Ok(())
    }
}

fn interval(key: &str, b: [f64; 2]) -> Result<(), ManifestProblem> {
    if b.iter().all(|v| v.is_finite()) && b[0] <= b[1] {
        Ok(())
    } else {
        Err(Rule(format!(
            "{key} = [{}, {}]: expected [low, high], finite, low <= high",
            b[0], b[1]
        )))
    }
}

impl Provenance<'_> {
    /// Whether the manifest has no provenance section.
    pub fn is_empty(&self) -> bool {
        self.regime_sequence.is_empty()
            && self.simulation.is_none()
            && self.omission_log.is_empty()
            && self.negative_events.is_empty()
            && self.wear_ledger.is_empty()
    }

    /// Checks the values (no file is read): digests are hex, names not empty, the last
    /// regime stage's checkpoint is the model (`model_sha256`), excluded regions bound
    /// joints the model has, finitely.
    pub fn check(&self, d_a: usize, model_sha256: &str) -> Result<(), ManifestProblem> {
        for (i, s) in self.regime_sequence.iter().enumerate() {
            let key = format!("regime_sequence[{i}]");
            nonempty(&format!("{key}.stage"), &s.stage)?;
            nonempty(&format!("{key}.plant"), &s.plant)?;
            check_sha256(&format!("{key}.checkpoint_sha256"), &s.checkpoint_sha256)?;
        }
        if let Some(last) = self.regime_sequence.last() {
            if last.checkpoint_sha256 != model_sha256 {
                return Err(Rule(format!(
                    "regime_sequence[{}].checkpoint_sha256 = \"{}\" is not model_sha256: the \
                     last stage's checkpoint is the model this manifest deploys",
                    self.regime_sequence.len() - 1,
                    last.checkpoint_sha256
                )));
            }
        }
        if let Some(s) = self.simulation {
            nonempty("simulation_provenance.engine", &s.engine)?;
            nonempty("simulation_provenance.build", &s.build)?;
            nonempty("simulation_provenance.integrator", &s.integrator)?;
            if !(s.timestep_s > 0.0 && s.timestep_s.is_finite()) {
                return Err(Rule(format!(
                    "simulation_provenance.timestep_s = {} must be positive and finite",
                    s.timestep_s
                )));
            }
            match (&s.model_asset, &s.model_asset_sha256) {
                (_, Some(sha)) => check_sha256("simulation_provenance.model_asset_sha256", sha)?,
                (Some(_), None) => {
                    return Err(Rule(
                        "simulation_provenance.model_asset needs its model_asset_sha256".into(),
                    ))
                }
                (None, None) => {}
            }
            for (name, r) in &s.randomization {
                interval(&format!("simulation_provenance.randomization.{name}"), *r)?;
            }
        }
        self.check_omissions(d_a)?;
        for (i, e) in self.negative_events.iter().enumerate() {
            let key = format!("negative_event_registry[{i}]");
            check_sha256(&format!("{key}.sha256"), &e.sha256)?;
            nonempty(&format!("{key}.kind"), &e.kind)?;
        }
        for (i, w) in self.wear_ledger.iter().enumerate() {
            let key = format!("adaptation_wear_ledger[{i}]");
            nonempty(&format!("{key}.hardware_id"), &w.hardware_id)?;
            check_sha256(&format!("{key}.ledger_sha256"), &w.ledger_sha256)?;
            if w.entries == Some(0) {
                // The digest of no lines is the digest of nothing: it matches any file.
                return Err(Rule(format!(
                    "{key}.entries = 0: a citation covers the ledger's first lines, at \
                     least one (leave entries out to cite the whole file)"
                )));
            }
        }
        Ok(())
    }

    fn check_omissions(&self, d_a: usize) -> Result<(), ManifestProblem> {
        let mut regions = 0;
        for (i, o) in self.omission_log.iter().enumerate() {
            let key = format!("omission_log[{i}]");
            nonempty(&format!("{key}.mechanism"), &o.mechanism)?;
            nonempty(&format!("{key}.channel"), &o.channel)?;
            nonempty(&format!("{key}.metric"), &o.metric)?;
            check_sha256(&format!("{key}.measurement_sha256"), &o.measurement_sha256)?;
            for (name, v) in [
                ("reference", o.reference),
                ("plant", o.plant),
                ("tolerance", o.tolerance),
            ] {
                if !v.is_finite() {
                    return Err(Rule(format!("{key}.{name} = {v} is not a finite number")));
                }
            }
            if let Some(j) = o.joints.iter().find(|&&j| j >= d_a) {
                return Err(Rule(format!(
                    "{key}.joints names joint {j}; the model has {d_a} (0..{d_a})"
                )));
            }
            for (k, b) in o.exclude.iter().enumerate() {
                let bkey = format!("{key}.exclude[{k}]");
                if b.joint >= d_a {
                    return Err(Rule(format!(
                        "{bkey}.joint = {}; the model has {d_a} joints (0..{d_a})",
                        b.joint
                    )));
                }
                if o.exclude[..k].iter().any(|p| p.joint == b.joint) {
                    return Err(Rule(format!(
                        "{bkey}.joint = {} is bounded twice in one region",
                        b.joint
                    )));
                }
                if b.pos_rad.is_none() && b.vel_rad_s.is_none() {
                    return Err(Rule(format!("{bkey} bounds neither pos_rad nor vel_rad_s")));
                }
                if let Some(p) = b.pos_rad {
                    interval(&format!("{bkey}.pos_rad"), p)?;
                }
                if let Some(v) = b.vel_rad_s {
                    interval(&format!("{bkey}.vel_rad_s"), v)?;
                }
            }
            regions += usize::from(!o.exclude.is_empty());
        }
        if regions > MAX_EXCLUSIONS {
            return Err(Rule(format!(
                "omission_log excludes {regions} regions; at most {MAX_EXCLUSIONS}"
            )));
        }
        Ok(())
    }

    /// Reads every cited file (a path relative to the manifest's directory, inside it
    /// unless `cite_outside_manifest_dir`) with a bound, once however often it is cited,
    /// and compares its SHA-256 with the digest beside it.
    pub fn verify_files(&self, manifest_path: &Path) -> Result<(), ManifestProblem> {
        let dir = manifest_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."));
        let cited = self.cited_files();
        let root = std::fs::canonicalize(dir)
            .map_err(|e| Rule(format!("the manifest's directory {}: {e}", dir.display())))?;
        // A file cited twice (one measurement behind several omissions) is read once.
        let mut digests: HashMap<(PathBuf, Option<u64>), String> = HashMap::new();
        for (key, file, expected, lines) in cited {
            let (path, inside) = confine(&root, file, self.cite_outside)
                .map_err(|why| Rule(format!("{key} = \"{file}\": {why}")))?;
            let actual = match digests.get(&(path.clone(), lines)) {
                Some(d) => d.clone(),
                None => {
                    let d = cited_digest(&path, lines)
                        .map_err(|why| Rule(format!("{key} = \"{file}\": {why}")))?;
                    digests.insert((path, lines), d.clone());
                    d
                }
            };
            if &actual != expected {
                // The digest of a file outside the manifest's directory is not shown:
                // a manifest is not a way to learn what another file holds.
                let is = if inside {
                    format!("its SHA-256 is {actual}")
                } else {
                    "its SHA-256 differs".to_string()
                };
                return Err(Rule(format!(
                    "{key} = \"{file}\": {is}, the manifest says {expected}: \
                     the ledger does not match the file it cites (changed, replaced or a wrong digest)"
                )));
            }
        }
        Ok(())
    }

    /// The regions the omission log removes from the declared domain (checked values).
    pub fn exclusions(&self) -> Exclusions {
        let mut out = Exclusions::NONE;
        for (i, o) in self.omission_log.iter().enumerate() {
            if o.exclude.is_empty() {
                continue;
            }
            let mut r = ExcludedRegion::unbounded(i.min(u16::MAX as usize) as u16);
            for b in o.exclude.iter().filter(|b| b.joint < chunkrt_core::MAX_DOF) {
                if let Some([lo, hi]) = b.pos_rad {
                    (r.pos_lo_rad[b.joint], r.pos_hi_rad[b.joint]) = (lo, hi);
                }
                if let Some([lo, hi]) = b.vel_rad_s {
                    (r.vel_lo_rad_s[b.joint], r.vel_hi_rad_s[b.joint]) = (lo, hi);
                }
            }
            // More than MAX_EXCLUSIONS is refused by `check`.
            let _ = out.push(r);
        }
        out
    }

    /// The ledger in a few words for a one-line summary (empty when there is none):
    /// `; ledger: 1 stage(s), 12 omission(s) (2 excluded region(s)), ...`.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        format!(
            "; ledger: {} stage(s), {} simulator, {} omission(s) ({} excluded region(s)), \
             {} negative event(s), {} wear ledger(s)",
            self.regime_sequence.len(),
            if self.simulation.is_some() { "1" } else { "no" },
            self.omission_log.len(),
            self.exclusions().regions().len(),
            self.negative_events.len(),
            self.wear_ledger.len()
        )
    }

    /// The ledger as text, a line per entry (`chunkrt policy inspect`).
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let mut line = |l: String| {
            s.push_str(&l);
            s.push('\n');
        };
        if self.is_empty() {
            line("provenance: none declared".into());
            return s;
        }
        self.describe_training(&mut line);
        self.describe_omissions(&mut line);
        self.describe_records(&mut line);
        s
    }

    /// The training stages and the simulator, a line each.
    fn describe_training(&self, line: &mut impl FnMut(String)) {
        line(format!(
            "regime_sequence: {} stage(s)",
            self.regime_sequence.len()
        ));
        for (i, r) in self.regime_sequence.iter().enumerate() {
            line(format!(
                "  [{i}] {} on {}: checkpoint {}{}",
                r.stage,
                r.plant,
                short(&r.checkpoint_sha256),
                r.data
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ));
        }
        match self.simulation {
            Some(p) => line(format!(
                "simulation_provenance: {} ({}), {} s {}, model asset {}{}",
                p.engine,
                p.build,
                p.timestep_s,
                p.integrator,
                p.model_asset_sha256.as_deref().map_or("none".into(), short),
                if p.randomization.is_empty() {
                    String::new()
                } else {
                    let r: Vec<String> = p
                        .randomization
                        .iter()
                        .map(|(k, v)| format!("{k} [{}, {}]", v[0], v[1]))
                        .collect();
                    format!(", randomised {}", r.join(", "))
                }
            )),
            None => line("simulation_provenance: none".into()),
        }
    }

    /// The omission log, a line per omission.
    fn describe_omissions(&self, line: &mut impl FnMut(String)) {
        line(format!(
            "omission_log: {} entr(ies)",
            self.omission_log.len()
        ));
        for (i, o) in self.omission_log.iter().enumerate() {
            line(format!(
                "  [{i}] {} ({} {}) joints {:?}: reference {:.4}, plant {:.4}, tolerance {}; measurement {}; {}",
                o.mechanism,
                o.channel,
                o.metric,
                o.joints,
                o.reference,
                o.plant,
                o.tolerance,
                short(&o.measurement_sha256),
                describe_exclude(&o.exclude)
            ));
        }
    }

    /// The negative events and the wear ledgers, a line each.
    fn describe_records(&self, line: &mut impl FnMut(String)) {
        line(format!(
            "negative_event_registry: {} record(s)",
            self.negative_events.len()
        ));
        for (i, e) in self.negative_events.iter().enumerate() {
            line(format!(
                "  [{i}] {} {}: {}",
                e.kind,
                e.detail.as_deref().unwrap_or(""),
                short(&e.sha256)
            ));
        }
        line(format!(
            "adaptation_wear_ledger: {} hardware id(s)",
            self.wear_ledger.len()
        ));
        for (i, w) in self.wear_ledger.iter().enumerate() {
            line(format!(
                "  [{i}] {}: {}{}",
                w.hardware_id,
                short(&w.ledger_sha256),
                w.entries
                    .map_or(String::new(), |n| format!(" (its first {n} line(s))"))
            ));
        }
    }
}

impl<'a> Provenance<'a> {
    /// Every file the ledger cites: (its key, its path as written, the digest beside
    /// it, how many of its lines the digest covers; `None`: all).
    fn cited_files(&self) -> impl Iterator<Item = (String, &'a str, &'a String, Option<u64>)> {
        self.regime_sequence
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let file = s.checkpoint.as_deref()?;
                Some((
                    format!("regime_sequence[{i}].checkpoint"),
                    file,
                    &s.checkpoint_sha256,
                    None,
                ))
            })
            .chain(self.simulation.and_then(|s| {
                let file = s.model_asset.as_deref()?;
                Some((
                    "simulation_provenance.model_asset".to_string(),
                    file,
                    s.model_asset_sha256.as_ref()?,
                    None,
                ))
            }))
            .chain(self.omission_log.iter().enumerate().filter_map(|(i, o)| {
                let file = o.measurement.as_deref()?;
                Some((
                    format!("omission_log[{i}].measurement"),
                    file,
                    &o.measurement_sha256,
                    None,
                ))
            }))
            .chain(
                self.negative_events
                    .iter()
                    .enumerate()
                    .filter_map(|(i, e)| {
                        let file = e.record.as_deref()?;
                        Some((
                            format!("negative_event_registry[{i}].record"),
                            file,
                            &e.sha256,
                            None,
                        ))
                    }),
            )
            .chain(self.wear_ledger.iter().enumerate().filter_map(|(i, w)| {
                let file = w.ledger.as_deref()?;
                Some((
                    format!("adaptation_wear_ledger[{i}].ledger"),
                    file,
                    &w.ledger_sha256,
                    w.entries,
                ))
            }))
    }
}

/// The file `file` names, relative to the manifest's directory `root` (canonical), with
/// links resolved, and whether it lies inside `root`; one outside (absolute, `..`, a
/// link out) is refused unless `outside_allowed`, before it is opened.
fn confine(root: &Path, file: &str, outside_allowed: bool) -> Result<(PathBuf, bool), String> {
    let allow = "unless the manifest says cite_outside_manifest_dir = true";
    if Path::new(file).is_absolute() && !outside_allowed {
        return Err(format!(
            "an absolute path: a cited file is named relative to the manifest's directory \
             and lies inside it, {allow}"
        ));
    }
    let leaves = || {
        format!(
            "leaves the manifest's directory {} (through `..` or a symbolic link): a cited \
             file lies inside it, {allow}",
            root.display()
        )
    };
    // `..` out of the directory, judged on the name before the file system is asked
    // (whether a file outside exists is not for a manifest to learn either).
    let mut depth = 0usize;
    for c in Path::new(file).components() {
        match c {
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::ParentDir if depth == 0 && !outside_allowed => {
                return Err(leaves())
            }
            std::path::Component::ParentDir => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let path = std::fs::canonicalize(root.join(file))
        .map_err(|e| format!("cannot open the {CITED}: {e}"))?;
    let inside = path.starts_with(root);
    if !inside && !outside_allowed {
        return Err(leaves());
    }
    Ok((path, inside))
}

/// The SHA-256 of a cited file, streamed (of its first `lines` lines when given).
fn cited_digest(path: &Path, lines: Option<u64>) -> Result<String, String> {
    match lines {
        // An append-only ledger is cited up to a line: later runs append.
        Some(n) => chunkrt_files::lines::lines_prefix_sha256(
            path,
            n,
            chunkrt_files::lines::LINE_LIMIT_BYTES,
            CITED,
        )
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the file holds fewer than {n} lines")),
        None => chunkrt_files::sha256_streaming(path, CITED_LIMIT_BYTES, CITED)
            .map(|(_, sha)| sha)
            .map_err(|e| e.to_string()),
    }
}

fn short(sha: &str) -> String {
    format!("sha256 {}…", &sha[..sha.len().min(12)])
}

fn describe_exclude(bounds: &[ExcludeBound]) -> String {
    if bounds.is_empty() {
        return "domain unchanged".into();
    }
    let parts: Vec<String> = bounds
        .iter()
        .flat_map(|b| {
            let pos = b
                .pos_rad
                .map(|[lo, hi]| format!("{lo} <= q{} <= {hi} rad", b.joint));
            let vel = b
                .vel_rad_s
                .map(|[lo, hi]| format!("{lo} <= v{} <= {hi} rad/s", b.joint));
            pos.into_iter().chain(vel)
        })
        .collect();
    format!("excludes {}", parts.join(" and "))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    fn omission(exclude: Vec<ExcludeBound>) -> Omission {
        Omission {
            mechanism: "backlash".into(),
            channel: "actuator".into(),
            metric: "backlash_rad".into(),
            joints: vec![1],
            reference: 0.0,
            plant: 0.002,
            tolerance: 0.0005,
            measurement: None,
            measurement_sha256: SHA.into(),
            affects: vec![],
            exclude,
        }
    }

    fn ledger(omissions: &[Omission]) -> Provenance<'_> {
        Provenance {
            regime_sequence: &[],
            simulation: None,
            omission_log: omissions,
            negative_events: &[],
            wear_ledger: &[],
            cite_outside: false,
        }
    }

    #[test]
    fn an_omission_excludes_the_region_inside_all_its_bounds() {
        let o = [
            omission(vec![]),
            omission(vec![
                ExcludeBound {
                    joint: 1,
                    pos_rad: Some([0.4, 0.6]),
                    vel_rad_s: None,
                },
                ExcludeBound {
                    joint: 2,
                    pos_rad: None,
                    vel_rad_s: Some([-0.1, 0.1]),
                },
            ]),
        ];
        let p = ledger(&o);
        p.check(3, SHA).unwrap();
        let ex = p.exclusions();
        assert_eq!(
            ex.regions().len(),
            1,
            "the entry without a region excludes nothing"
        );
        let r = ex.regions()[0];
        assert_eq!(r.entry, 1);
        assert_eq!((r.pos_lo_rad[1], r.pos_hi_rad[1]), (0.4, 0.6));
        assert_eq!((r.vel_lo_rad_s[2], r.vel_hi_rad_s[2]), (-0.1, 0.1));
        assert_eq!(r.pos_lo_rad[2], f64::NEG_INFINITY);
    }

    #[test]
    fn bad_values_name_their_key() {
        let bad = |b: ExcludeBound, d_a: usize| {
            let o = [omission(vec![b])];
            ledger(&o).check(d_a, SHA).unwrap_err().to_string()
        };
        let b = |joint, pos_rad, vel_rad_s| ExcludeBound {
            joint,
            pos_rad,
            vel_rad_s,
        };
        assert!(
            bad(b(3, Some([0.0, 1.0]), None), 3).contains("omission_log[0].exclude[0].joint = 3")
        );
        assert!(bad(b(0, None, None), 3).contains("bounds neither"));
        assert!(bad(b(0, Some([1.0, 0.0]), None), 3).contains("exclude[0].pos_rad = [1, 0]"));
        assert!(bad(b(0, None, Some([f64::NAN, 0.0])), 3).contains("vel_rad_s"));
        let mut o = omission(vec![]);
        o.measurement_sha256 = "ABC".into();
        let e = ledger(std::slice::from_ref(&o)).check(3, SHA).unwrap_err();
        assert!(
            e.to_string().contains("omission_log[0].measurement_sha256"),
            "{e}"
        );
        let stages = [RegimeStage {
            stage: "imitation".into(),
            plant: "chunkrt-sim".into(),
            checkpoint_sha256: SHA.replace('0', "1"),
            checkpoint: None,
            data: None,
        }];
        let p = Provenance {
            regime_sequence: &stages,
            ..ledger(&[])
        };
        assert!(p
            .check(3, SHA)
            .unwrap_err()
            .to_string()
            .contains("is not model_sha256"));
    }

    fn cite(file: &str, sha: &str) -> Omission {
        Omission {
            measurement: Some(file.into()),
            measurement_sha256: sha.into(),
            ..omission(vec![])
        }
    }

    fn sha(bytes: &[u8]) -> String {
        crate::model::sha256_hex(bytes)
    }

    /// A cited file lies in the manifest's directory: an absolute path, `..` and a link
    /// out of it are refused before the file is opened (the digest of `/etc/hostname`
    /// is never computed, let alone shown), unless `cite_outside_manifest_dir`; then
    /// it is read, and a mismatch does not show its digest.
    #[test]
    fn a_cited_file_outside_the_manifest_directory_is_refused_unless_allowed() {
        let dir = std::env::temp_dir().join(format!("chunkrt-prov-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("m")).unwrap();
        let manifest = dir.join("m/policy.toml");
        std::fs::write(dir.join("outside.json"), b"{}").unwrap();
        std::fs::write(dir.join("m/gap.json"), b"[1]").unwrap();
        std::os::unix::fs::symlink(dir.join("outside.json"), dir.join("m/link.json")).unwrap();
        let outside = dir.join("outside.json").display().to_string();
        for (file, says) in [
            (
                outside.as_str(),
                "an absolute path: a cited file is named relative to the manifest's directory",
            ),
            ("../outside.json", "leaves the manifest's directory"),
            ("link.json", "leaves the manifest's directory"),
        ] {
            let o = [cite(file, SHA)];
            let e = ledger(&o).verify_files(&manifest).unwrap_err().to_string();
            assert!(e.contains(says), "{file}: {e}");
            assert!(e.contains("cite_outside_manifest_dir = true"), "{e}");
            assert!(!e.contains(&sha(b"{}")), "{file}: a digest shown: {e}");
            let allowed = Provenance {
                cite_outside: true,
                ..ledger(&o)
            };
            let e = allowed.verify_files(&manifest).unwrap_err().to_string();
            assert!(
                e.contains("its SHA-256 differs, the manifest says"),
                "{file}: {e}"
            );
            assert!(!e.contains(&sha(b"{}")), "{file}: a digest shown: {e}");
            let o = [cite(file, &sha(b"{}"))];
            let allowed = Provenance {
                cite_outside: true,
                ..ledger(&o)
            };
            allowed.verify_files(&manifest).unwrap();
        }
        // Inside: a mismatch names the file's digest (the manifest's own file).
        let o = [cite("gap.json", SHA), cite("./gap.json", SHA)];
        let e = ledger(&o).verify_files(&manifest).unwrap_err().to_string();
        assert!(
            e.contains(&format!("its SHA-256 is {}", sha(b"[1]"))),
            "{e}"
        );
        let good = sha(b"[1]");
        let o = [cite("gap.json", &good), cite("sub/../gap.json", &good)];
        std::fs::create_dir_all(dir.join("m/sub")).unwrap();
        ledger(&o).verify_files(&manifest).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `entries = 0` cites no line: its digest (of nothing) would match any file.
    #[test]
    fn a_ledger_citation_of_no_lines_is_refused() {
        let w = [WearLedgerRef {
            hardware_id: "arm".into(),
            ledger_sha256: sha(b""),
            entries: Some(0),
            ledger: Some("wear.jsonl".into()),
        }];
        let p = Provenance {
            wear_ledger: &w,
            ..ledger(&[])
        };
        let e = p.check(3, SHA).unwrap_err().to_string();
        assert!(e.contains("adaptation_wear_ledger[0].entries = 0"), "{e}");
    }
}
