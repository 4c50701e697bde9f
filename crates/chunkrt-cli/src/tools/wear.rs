//! `chunkrt wear LEDGER`: what a wear ledger holds per hardware id (runs, running hours,
//! shocks, torque and I²t peaks over its lines), and the `[[adaptation_wear_ledger]]`
//! entries that cite it, as it is now, from a policy manifest.

use anyhow::{bail, Context};
use chunkrt_telemetry::wear::{read_ledger, SHOCKS};
use clap::Parser;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `chunkrt wear`.
#[derive(Parser, Debug, Clone)]
pub struct WearArgs {
    /// The ledger (a config's `[wear] ledger`).
    pub ledger: PathBuf,
    /// The directory of the manifest that is to cite it (the citation's path is
    /// relative to it).
    #[arg(long, default_value = ".")]
    pub manifest_dir: PathBuf,
}

/// One hardware id's totals over the ledger.
#[derive(Default)]
struct Totals {
    runs: u64,
    running_s: f64,
    shocks: [u64; 4],
    torque_peak_nm: f64,
    i2t_peak: Option<f64>,
}

fn max_of(v: &Value) -> Option<f64> {
    v.as_array()?
        .iter()
        .filter_map(Value::as_f64)
        .reduce(f64::max)
}

fn totals(lines: &[Value]) -> BTreeMap<String, Totals> {
    let mut out: BTreeMap<String, Totals> = BTreeMap::new();
    for l in lines {
        let id = l["hardware_id"].as_str().unwrap_or("?").to_string();
        let t = out.entry(id).or_default();
        t.runs += 1;
        t.running_s += l["running_s"].as_f64().unwrap_or(0.0);
        for (k, name) in SHOCKS.iter().enumerate() {
            t.shocks[k] += l["shocks"][name]
                .as_array()
                .map_or(0, |v| v.iter().filter_map(Value::as_u64).sum());
        }
        t.torque_peak_nm = t
            .torque_peak_nm
            .max(max_of(&l["torque_peak_nm"]).unwrap_or(0.0));
        if let Some(p) = max_of(&l["i2t_peak"]) {
            t.i2t_peak = Some(t.i2t_peak.map_or(p, |q: f64| q.max(p)));
        }
    }
    out
}

/// The path of `ledger` relative to `dir` where it lies below it, else absolute.
fn cited_path(ledger: &Path, dir: &Path) -> String {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (l, d) = (abs(ledger), abs(dir));
    l.strip_prefix(&d)
        .map_or(l.clone(), Path::to_path_buf)
        .display()
        .to_string()
}

/// Runs `chunkrt wear`.
pub fn wear(args: &WearArgs) -> anyhow::Result<u8> {
    let lines = read_ledger(&args.ledger).map_err(anyhow::Error::msg)?;
    if lines.is_empty() {
        bail!(
            "{}: no wear ledger lines (a run with `[wear] ledger` appends them)",
            args.ledger.display()
        );
    }
    let n = lines.len() as u64;
    let sha = chunkrt_files::lines_prefix_sha256(
        &args.ledger,
        n,
        chunkrt_files::MODEL_LIMIT_BYTES,
        "wear ledger",
    )
    .with_context(|| format!("reading {}", args.ledger.display()))?
    .context("the ledger's last line has no newline")?;
    outln!("wear ledger {}: {n} line(s)", args.ledger.display());
    outln!(
        "{:<32} {:>5} {:>10} {:>28} {:>12} {:>8}",
        "hardware id",
        "runs",
        "hours",
        "shocks acc/jerk/slew/follow",
        "peak_tau_Nm",
        "i2t_peak"
    );
    let by_id = totals(&lines);
    for (id, t) in &by_id {
        let s = t.shocks;
        outln!(
            "{:<32} {:>5} {:>10.4} {:>28} {:>12.2} {:>8}",
            id,
            t.runs,
            t.running_s / 3600.0,
            format!("{}/{}/{}/{}", s[0], s[1], s[2], s[3]),
            t.torque_peak_nm,
            t.i2t_peak.map_or("-".into(), |p| format!("{p:.3}"))
        );
    }
    outln!("\ncite it from the policy manifest (its first {n} lines; later runs append):");
    let file = cited_path(&args.ledger, &args.manifest_dir);
    for id in by_id.keys() {
        outln!(
            "\n[[adaptation_wear_ledger]]\nhardware_id = {}\nledger = {}\nledger_sha256 = \"{sha}\"\nentries = {n}",
            toml_str(id),
            toml_str(&file)
        );
    }
    Ok(0)
}

/// `s` as a TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}
