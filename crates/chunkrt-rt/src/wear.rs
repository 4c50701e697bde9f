//! The wear ledger at the end of a run (issue 41): this run's wear per hardware unit in
//! the report (`wear`), and appended to `[wear] ledger` when the config names one.
//! A unit is a drive that reports its identity (EtherCAT: its SII identity and serial
//! number, see [`chunkrt_core::Backend::hardware`]), else the whole arm under the
//! config's `wear.hardware_id` (default: the backend's name).

use crate::control::ControlLoop;
use chunkrt_config::Config;
use chunkrt_telemetry::report::Report;
use chunkrt_telemetry::wear::{append_ledger, WearTally};
use serde_json::{json, Value};

/// The run's wear lines, one per hardware unit (without the ledger's running total).
fn entries(cfg: &Config, control: &ControlLoop, tally: &WearTally, config: &str) -> Vec<Value> {
    let dof = cfg.control.joints;
    let mut units: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    control
        .backend
        .hardware(&mut |id, joints| units.push((id.to_string(), joints)));
    if units.is_empty() {
        let id = cfg
            .wear
            .as_ref()
            .and_then(|w| w.hardware_id.clone())
            .unwrap_or_else(|| control.backend.name().to_string());
        units.push((id, 0..dof));
    }
    let t_end = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let period_s = cfg.period_ns() as f64 * 1e-9;
    units
        .into_iter()
        .map(|(id, joints)| {
            let joints = joints.start.min(dof)..joints.end.min(dof);
            let mut e = tally.summary(joints.clone(), period_s);
            e["hardware_id"] = json!(id);
            e["t_end_unix_s"] = json!(t_end);
            e["config"] = json!(config);
            e["backend"] = json!(control.backend.name());
            // The I²t high-water mark where the thermal monitor ran (1: the rating).
            e["i2t_peak"] = match control.thermal_peaks() {
                Some(p) => json!(p[joints].to_vec()),
                None => Value::Null,
            };
            e
        })
        .collect()
}

/// Puts the run's wear in `report` and appends it to the ledger of `[wear]`; a ledger
/// that cannot be written is said in `records_error` (the run's records are
/// incomplete) and in the report.
pub(crate) fn record(
    report: &mut Report,
    cfg: &Config,
    control: &ControlLoop,
    tally: &WearTally,
    config: &str,
    records_error: &mut Option<String>,
) {
    let mut lines = entries(cfg, control, tally, config);
    report.extra.insert("wear".into(), json!(lines.clone()));
    let Some(w) = &cfg.wear else {
        return;
    };
    let path = cfg.resolve(&w.ledger);
    match append_ledger(&path, &mut lines) {
        Ok(()) => {
            report.extra.insert(
                "wear_ledger".into(),
                json!({"file": path.display().to_string(), "lines_appended": lines.len(),
                       "running_hours_total": lines.iter().map(|l| l["running_hours_total"].clone()).collect::<Vec<_>>()}),
            );
        }
        Err(e) => {
            let e = format!("the wear ledger was not written: {e}");
            report.extra.insert("wear_ledger_error".into(), json!(e));
            records_error.get_or_insert(e);
        }
    }
}
