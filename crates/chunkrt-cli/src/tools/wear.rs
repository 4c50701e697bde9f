//! `chunkrt wear LEDGER`: what a wear ledger holds per hardware id (runs, running hours,
//! shocks, torque and I²t peaks over its lines), and the `[[adaptation_wear_ledger]]`
//! entries that cite it, as it is now, from a policy manifest. The ledger is read a line
//! at a time (constant memory whatever its length), every line checked: a value no run
//! records (a negative or absurd running time) is refused with its line.

use anyhow::bail;
use chunkrt_telemetry::ledger::LedgerTotals;
use clap::Parser;
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
    let (totals, sha) = LedgerTotals::scan(&args.ledger)?;
    let n = totals.lines;
    if totals.units.is_empty() {
        bail!(
            "{}: no wear ledger lines (a run with `[wear] ledger` appends them)",
            args.ledger.display()
        );
    }
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
    let by_id = &totals.units;
    for (id, t) in by_id {
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
    if Path::new(&file).is_absolute() {
        outln!(
            "(the ledger lies outside {}: the manifest must also say \
             cite_outside_manifest_dir = true, at its top level)",
            args.manifest_dir.display()
        );
    }
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
