//! The wear ledger around a run (issues 41 and 56): read before anything moves (a
//! ledger that is no regular file, or holds a line no run writes, refuses the run as a
//! configuration error), its hardware's last recorded I²t load the thermal monitor
//! starts from, and this run's wear per hardware unit in the report (`wear`) and
//! appended to `[wear] ledger` at the end. A unit is a drive that reports its identity
//! (EtherCAT: its SII identity and serial number, see
//! [`chunkrt_core::Backend::hardware`]), else the whole arm under the config's
//! `wear.hardware_id` (default: the backend's name).

use crate::control::{ControlLoop, ThermalSeed};
use chunkrt_config::Config;
use chunkrt_core::{cooled, Backend, JointVec, ThermalLimits, MAX_DOF};
use chunkrt_telemetry::ledger::{append_ledger, LedgerTotals};
use chunkrt_telemetry::report::Report;
use chunkrt_telemetry::wear::WearTally;
use serde_json::{json, Value};
use std::ops::Range;

/// The ledger of `[wear]` (none without the section), its totals taken as a run takes
/// them: from the totals file beside it and its tail, or by a scan of a line at a time.
/// `write_totals`: write the totals file again when it had to be rebuilt (a run does,
/// so that its end reads the tail only; `validate` writes nothing). The error names the
/// file and, for a bad line, the line.
pub fn load_ledger(cfg: &Config, write_totals: bool) -> Result<Option<LedgerTotals>, String> {
    let Some(w) = &cfg.wear else {
        return Ok(None);
    };
    let path = cfg.resolve(&w.ledger);
    let (totals, rebuilt) = LedgerTotals::load(&path).map_err(|e| format!("wear.ledger: {e}"))?;
    if rebuilt && write_totals {
        totals
            .write(&path)
            .map_err(|e| format!("wear.ledger: {e}"))?;
    }
    Ok(Some(totals))
}

/// The hardware units of the arm: the backend's (EtherCAT drives), else the whole arm
/// under `wear.hardware_id` or the backend's name.
fn units(cfg: &Config, backend: &dyn Backend) -> Vec<(String, Range<usize>)> {
    let dof = cfg.control.joints;
    let mut units: Vec<(String, Range<usize>)> = Vec::new();
    backend.hardware(&mut |id, joints| {
        units.push((id.to_string(), joints.start.min(dof)..joints.end.min(dof)))
    });
    if units.is_empty() {
        let id = cfg
            .wear
            .as_ref()
            .and_then(|w| w.hardware_id.clone())
            .unwrap_or_else(|| backend.name().to_string());
        units.push((id, 0..dof));
    }
    units
}

/// The load each joint of `units` starts at: its unit's last run in `ledger`, the I²t
/// load recorded at that run's end (or, on a line from before the end was recorded,
/// its peak: an upper bound), cooled by the monitor's first-order model for the time
/// from that end to `now_unix_s` (`exp(-dt / T)`, no cooling credited for time the
/// clock does not show passed); where the ledger has no such line (or none is kept),
/// the declared worst case `declared` (`limits.thermal.initial_load`). Pure.
pub fn thermal_seed(
    limits: &ThermalLimits,
    declared: &JointVec,
    units: &[(String, Range<usize>)],
    ledger: Option<&LedgerTotals>,
    now_unix_s: f64,
) -> ThermalSeed {
    let mut seed = ThermalSeed {
        load: *declared,
        from: Vec::new(),
    };
    for (id, joints) in units {
        let joints = joints.start.min(MAX_DOF)..joints.end.min(MAX_DOF);
        let last = ledger.and_then(|l| l.last_run(id));
        let recorded = last.and_then(|r| {
            let (key, v) = match (&r.i2t_end, &r.i2t_peak) {
                (Some(v), _) => ("i2t_end", v),
                (None, Some(v)) => ("i2t_peak", v),
                (None, None) => return None,
            };
            (v.len() == joints.len()).then_some((r, key, v))
        });
        let Some((r, key, v)) = recorded else {
            let why = match last {
                None => "no ledger line of this hardware",
                Some(_) => "its last ledger line records no I²t load of these joints",
            };
            seed.from.push(
                json!({"hardware_id": id, "joints": joints.clone().collect::<Vec<_>>(),
                                  "from": "initial_load", "why": why}),
            );
            continue;
        };
        let dt_s = r.t_end_unix_s.map_or(0.0, |t| (now_unix_s - t).max(0.0));
        for (k, j) in joints.clone().enumerate() {
            seed.load[j] = cooled(v[k], dt_s, limits.time_constant_s[j]);
        }
        seed.from.push(
            json!({"hardware_id": id, "joints": joints.collect::<Vec<_>>(),
                              "from": "ledger", "line": r.line, "recorded": key,
                              "t_end_unix_s": r.t_end_unix_s, "cooled_s": dt_s}),
        );
    }
    seed
}

/// The seed for this run's monitor (none without `[limits.thermal]`), at the wall-clock
/// time now: called at bring-up, once the backend names its hardware.
pub(crate) fn thermal_seed_now(
    cfg: &Config,
    backend: &dyn Backend,
    ledger: Option<&LedgerTotals>,
) -> Option<ThermalSeed> {
    let limits = cfg.thermal_limits()?;
    let declared = cfg.thermal_initial_load()?;
    Some(thermal_seed(
        &limits,
        &declared,
        &units(cfg, backend),
        ledger,
        unix_now_s(),
    ))
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The run's wear lines, one per hardware unit (without the ledger's running total).
fn entries(cfg: &Config, control: &ControlLoop, tally: &WearTally, config: &str) -> Vec<Value> {
    let t_end = unix_now_s();
    let period_s = cfg.period_ns() as f64 * 1e-9;
    let loads = control.thermal_loads();
    units(cfg, control.backend.as_ref())
        .into_iter()
        .map(|(id, joints)| {
            let mut e = tally.summary(joints.clone(), period_s);
            e["hardware_id"] = json!(id);
            e["t_end_unix_s"] = json!(t_end);
            e["config"] = json!(config);
            e["backend"] = json!(control.backend.name());
            // The I²t high-water mark where the thermal monitor ran (1: the rating), and
            // the load at the end, which the next run of this hardware starts from.
            e["i2t_peak"] = match control.thermal_peaks() {
                Some(p) => json!(p[joints.clone()].to_vec()),
                None => Value::Null,
            };
            e["i2t_end"] = match &loads {
                Some(l) => json!(l[joints].to_vec()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use chunkrt_telemetry::ledger::{LastRun, UnitTotals};

    fn limits() -> ThermalLimits {
        ThermalLimits {
            dof: 3,
            continuous_nm: [10.0; MAX_DOF],
            time_constant_s: [4.0; MAX_DOF],
            derate_at: 0.8,
            withdraw_at: 0.95,
            min_derate: 0.25,
        }
    }

    fn ledger(id: &str, last: LastRun) -> LedgerTotals {
        let mut t = LedgerTotals::default();
        t.units.insert(
            id.into(),
            UnitTotals {
                last,
                ..UnitTotals::default()
            },
        );
        t
    }

    /// The seed is the recorded end load times `exp(-dt / T)` (the closed form of the
    /// monitor's model without current), per joint of the unit; a line from before the
    /// end load was recorded starts from its peak; no line, or a line without I²t,
    /// starts from the declared worst case.
    #[test]
    fn the_seed_is_the_last_recorded_load_cooled_for_the_time_since() {
        let declared = [1.0; MAX_DOF];
        let units = [("drive-a".to_string(), 0..1), ("drive-b".to_string(), 1..3)];
        let mut totals = ledger(
            "drive-b",
            LastRun {
                line: 7,
                t_end_unix_s: Some(1000.0),
                joints: vec![1, 2],
                i2t_end: Some(vec![1.5, 0.4]),
                i2t_peak: Some(vec![1.9, 0.9]),
            },
        );
        let s = thermal_seed(&limits(), &declared, &units, Some(&totals), 1006.0);
        let k = (-6.0f64 / 4.0).exp();
        assert_eq!(s.load[0], 1.0, "drive-a: no line, the declared worst case");
        assert!((s.load[1] - 1.5 * k).abs() < 1e-15);
        assert!((s.load[2] - 0.4 * k).abs() < 1e-15);
        assert_eq!(s.from[0]["from"], "initial_load");
        assert_eq!(s.from[1]["from"], "ledger");
        assert_eq!(s.from[1]["line"], 7);
        assert_eq!(s.from[1]["cooled_s"], 6.0);
        // A clock behind the line's end credits no cooling.
        let s = thermal_seed(&limits(), &declared, &units, Some(&totals), 900.0);
        assert_eq!(s.load[1], 1.5);
        // A line from before i2t_end: its peak.
        let u = totals.units.get_mut("drive-b").unwrap();
        u.last.i2t_end = None;
        let s = thermal_seed(&limits(), &declared, &units, Some(&totals), 1006.0);
        assert!((s.load[1] - 1.9 * k).abs() < 1e-15);
        assert_eq!(s.from[1]["recorded"], "i2t_peak");
        // No I²t at all, or not for these joints: the declared worst case.
        let u = totals.units.get_mut("drive-b").unwrap();
        u.last.i2t_peak = Some(vec![0.2]);
        let s = thermal_seed(&limits(), &declared, &units, Some(&totals), 1006.0);
        assert_eq!((s.load[1], s.load[2]), (1.0, 1.0));
        assert_eq!(s.from[1]["from"], "initial_load");
        let s = thermal_seed(&limits(), &[0.0; MAX_DOF], &units, None, 1006.0);
        assert_eq!(s.load[..3], [0.0; 3]);
    }
}
