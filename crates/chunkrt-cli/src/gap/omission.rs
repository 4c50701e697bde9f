//! `chunkrt gap --omission-log MANIFEST`: the over-tolerance rows of a `gap.json`
//! appended to a policy manifest's `[[omission_log]]` (issue 41).
//!
//! The measurement is copied beside the manifest, named by its digest
//! (`gap-<sha256 prefix>.json`), and each entry cites it by path and SHA-256, so the
//! manifest and what it cites travel together and `validate` can check them. The
//! manifest's text is kept as it was (comments included) and the entries appended;
//! the result is checked as a manifest (digests too) before it replaces the file. A
//! row already logged from the same measurement is not appended twice. No entry
//! excludes a region: which states to take from the declared domain is the
//! engineer's call (`[[omission_log.exclude]]`, docs/gap.md).

use anyhow::{bail, Context};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What was appended.
pub struct Appended {
    /// Entries appended.
    pub entries: usize,
    /// Over-tolerance rows already in the log (same measurement, metric, joint).
    pub already: usize,
    /// The measurement's copy beside the manifest.
    pub measurement: PathBuf,
}

/// One over-tolerance row of `gap.json`.
struct OverRow {
    channel: String,
    metric: String,
    joint: Option<usize>,
    reference: f64,
    plant: f64,
    tolerance: f64,
}

fn over_rows(doc: &Value, gap_json: &Path) -> anyhow::Result<Vec<OverRow>> {
    let rows = doc
        .get("rows")
        .and_then(Value::as_array)
        .with_context(|| format!("{}: no `rows` array (not a gap.json)", gap_json.display()))?;
    let mut out = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.get("over").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let text = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .with_context(|| format!("{}: rows[{i}].{k} is not text", gap_json.display()))
        };
        let num = |k: &str| {
            r.get(k)
                .and_then(Value::as_f64)
                .filter(|v| v.is_finite())
                .with_context(|| format!("{}: rows[{i}].{k} is not a number", gap_json.display()))
        };
        out.push(OverRow {
            channel: text("channel")?,
            metric: text("metric")?,
            joint: r.get("joint").and_then(Value::as_u64).map(|j| j as usize),
            reference: num("reference")?,
            plant: num("plant")?,
            tolerance: num("tolerance")?,
        });
    }
    Ok(out)
}

/// The mechanism a channel's metric points at.
fn mechanism(channel: &str, metric: &str) -> &'static str {
    match (channel, metric) {
        ("actuator", m) if m.starts_with("phase_lag") => "actuator dynamics: phase lag",
        ("actuator", m) if m.starts_with("gain") => "actuator dynamics: gain",
        ("actuator", "backlash_rad") => "backlash",
        ("actuator", m) if m.starts_with("step_") => "actuator dynamics: step response",
        ("coupling", _) => "joint coupling the reference does not model",
        ("load", _) => "load held against (gravity, payload)",
        ("sensing", "bias_rad") => "position sensor bias",
        ("sensing", _) => "sensor noise",
        ("timing", _) => "timing: latency, jitter, observation age",
        _ => "unmodelled mechanism",
    }
}

/// The joints a row concerns: the excited joint of a coupling row too.
fn joints(row: &OverRow) -> Vec<usize> {
    let excited = row
        .metric
        .strip_prefix("gain_from_joint_")
        .and_then(|j| j.parse::<usize>().ok());
    excited.into_iter().chain(row.joint).collect()
}

fn entry_text(row: &OverRow, file: &str, sha: &str) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let joints = joints(row);
    let affects: Vec<String> = match row.joint {
        Some(j) => vec![q(&format!("joint_pos[{j}]")), q(&format!("joint_vel[{j}]"))],
        None => vec![q("every joint")],
    };
    let mut s = String::new();
    let _ = writeln!(s, "\n[[omission_log]]");
    let _ = writeln!(s, "mechanism = {}", q(mechanism(&row.channel, &row.metric)));
    let _ = writeln!(s, "channel = {}", q(&row.channel));
    let _ = writeln!(s, "metric = {}", q(&row.metric));
    let _ = writeln!(s, "joints = {joints:?}");
    let _ = writeln!(s, "reference = {:?}", row.reference);
    let _ = writeln!(s, "plant = {:?}", row.plant);
    let _ = writeln!(s, "tolerance = {:?}", row.tolerance);
    let _ = writeln!(s, "measurement = {}", q(file));
    let _ = writeln!(s, "measurement_sha256 = {}", q(sha));
    let _ = writeln!(s, "affects = [{}]", affects.join(", "));
    s
}

/// Whether the manifest already logs this row of this measurement.
fn logged(existing: &[chunkrt_policy::provenance::Omission], row: &OverRow, sha: &str) -> bool {
    let joints = joints(row);
    existing
        .iter()
        .any(|o| o.measurement_sha256 == sha && o.metric == row.metric && o.joints == joints)
}

fn existing_omissions(
    manifest: &Path,
    text: &str,
) -> anyhow::Result<Vec<chunkrt_policy::provenance::Omission>> {
    Ok(
        match chunkrt_policy::manifest2::manifest_format(manifest, text)? {
            2 => {
                chunkrt_policy::CheckedManifest2::parse(manifest, text)?
                    .raw
                    .omission_log
            }
            _ => chunkrt_policy::Manifest::parse(manifest, text)?.omission_log,
        },
    )
}

/// Appends the over-tolerance rows of `gap_json` to `manifest`'s omission log.
pub fn append(gap_json: &Path, manifest: &Path) -> anyhow::Result<Appended> {
    let (bytes, sha) = chunkrt_files::read_with_sha256(
        gap_json,
        chunkrt_files::TOML_LIMIT_BYTES,
        "gap measurement",
        None,
    )?;
    let doc: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: not JSON", gap_json.display()))?;
    let rows = over_rows(&doc, gap_json)?;
    let text = chunkrt_policy::manifest::read_manifest_text(manifest)?;
    let existing = existing_omissions(manifest, &text)?;
    let dir = manifest.parent().unwrap_or(Path::new("."));
    let file = format!("gap-{}.json", &sha[..12]);
    let copy = dir.join(&file);
    let fresh: Vec<&OverRow> = rows
        .iter()
        .filter(|r| !logged(&existing, r, &sha))
        .collect();
    if fresh.is_empty() {
        return Ok(Appended {
            entries: 0,
            already: rows.len(),
            measurement: copy,
        });
    }
    std::fs::write(&copy, &bytes).with_context(|| format!("writing {}", copy.display()))?;
    let mut new = text.clone();
    if !new.ends_with('\n') {
        new.push('\n');
    }
    let _ = write!(
        new,
        "\n# Appended by `chunkrt gap --omission-log`: {} over-tolerance row(s) of {}.\n",
        fresh.len(),
        gap_json.display()
    );
    for r in &fresh {
        new.push_str(&entry_text(r, &file, &sha));
    }
    // Checked as the run loads it (values and the cited files' digests) before it
    // replaces the manifest.
    let tmp = dir.join(format!(
        ".{}.omission.tmp",
        manifest
            .file_name()
            .map_or("manifest".into(), |n| n.to_string_lossy())
    ));
    std::fs::write(&tmp, &new).with_context(|| format!("writing {}", tmp.display()))?;
    if let Err(e) = chunkrt_policy::verify::ledger_text(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        bail!("the manifest with the appended entries does not load: {e}");
    }
    std::fs::rename(&tmp, manifest).with_context(|| format!("replacing {}", manifest.display()))?;
    Ok(Appended {
        entries: fresh.len(),
        already: rows.len() - fresh.len(),
        measurement: copy,
    })
}
