//! One rule for every number of a run configuration, judged before any key's own range:
//! finite, 0 or of a magnitude a physical quantity can have, and a duration not
//! negative. It walks the typed configuration (as serde writes it), so every key is
//! judged, those a later change adds included, and a value set by a tool's override is
//! judged as one from the file.
//!
//! Why a magnitude window and not only "no subnormal": a value such as `5e-324` (the
//! smallest subnormal) or `1e-200` passes `> 0`, and squared (the thermal monitor's
//! load, an I²t) or in a filter's coefficient (`1 - exp(-2 pi fc T)`) it vanishes to 0:
//! `action_filter_hz = 5e-324` held the arm still, `continuous_torque_nm = 5e-324` made
//! the thermal load infinite (`thermal_peak_load: null`). Past [`MAX_MAGNITUDE`] a square
//! overflows the same way. No quantity chunkrt takes (rad, s, N m, kg m², Hz, MB, counts
//! per rad) is within a hundred orders of magnitude of either bound.

use serde::Serialize;

type Check = Result<(), (String, String)>;

/// Smallest magnitude a non-zero number may have.
pub const MIN_MAGNITUDE: f64 = 1e-100;
/// Largest magnitude a number may have.
pub const MAX_MAGNITUDE: f64 = 1e100;

/// Time keys that may be negative: offsets on the clock, not durations.
pub const SIGNED_TIMES: &[&str] = &["inference.start_offset_ms"];

/// Units a key's last word names a time in.
const TIME_UNITS: [&str; 4] = ["ns", "us", "ms", "s"];
/// Words before a time unit that make the key a rate (`max_vel_rad_s`, `gain_per_s`),
/// not a duration.
const RATE_OF: [&str; 6] = ["rad", "per", "nm", "m", "deg", "kg"];

/// Whether the key at `path` (`executor.blend_ms`, `inject.probe.freqs_hz[2]`) is a
/// duration by its unit: its last word a time unit not preceded by the quantity of a
/// rate.
pub fn is_duration(path: &str) -> bool {
    let key = path.rsplit('.').next().unwrap_or(path);
    let key = key.split('[').next().unwrap_or(key);
    let mut words = key.rsplit('_');
    let unit = words.next().unwrap_or("");
    let before = words.next().unwrap_or("");
    TIME_UNITS.contains(&unit) && !RATE_OF.contains(&before)
}

/// The rule for the number `v` at `path`.
pub fn check(path: &str, v: f64) -> Check {
    let fail = |message: String| Err((path.to_string(), message));
    if !v.is_finite() {
        return fail(format!("expected a finite number, got {v}"));
    }
    if v != 0.0 && v.abs() < MIN_MAGNITUDE {
        let subnormal = if v.is_subnormal() {
            " (a subnormal number)"
        } else {
            ""
        };
        return fail(format!(
            "expected 0 or a magnitude of at least {MIN_MAGNITUDE:e}, got {v:e}{subnormal}: \
             no quantity chunkrt takes is this small, and squared or in a filter's \
             coefficient it vanishes to 0"
        ));
    }
    if v.abs() > MAX_MAGNITUDE {
        return fail(format!(
            "expected a magnitude of at most {MAX_MAGNITUDE:e}, got {v:e}: no quantity \
             chunkrt takes is this large, and squared it is infinite"
        ));
    }
    let bare = path.split('[').next().unwrap_or(path);
    if v < 0.0 && is_duration(path) && !SIGNED_TIMES.contains(&bare) {
        return fail(format!("expected a duration of 0 or more, got {v}"));
    }
    Ok(())
}

/// Every number of `value` as serde writes it, with its key path (`limits.max_vel_rad_s`,
/// `policy.goals_rad[1][3]`), in order; integers as `f64` too.
pub fn numbers(value: &impl Serialize) -> Result<Vec<(String, f64)>, String> {
    let tree = toml::Value::try_from(value).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    walk(&tree, String::new(), &mut out);
    Ok(out)
}

fn walk(v: &toml::Value, path: String, out: &mut Vec<(String, f64)>) {
    match v {
        toml::Value::Float(x) => out.push((path, *x)),
        toml::Value::Integer(i) => out.push((path, *i as f64)),
        toml::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk(x, format!("{path}[{i}]"), out);
            }
        }
        toml::Value::Table(t) => {
            for (k, x) in t {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(x, p, out);
            }
        }
        _ => {}
    }
}

/// Judges every number of `value` by [`check`] (an integer passes unless it is a
/// negative duration); the first that fails.
pub fn check_all(value: &impl Serialize) -> Check {
    numbers(value)
        .map_err(|e| ("(top level)".to_string(), format!("cannot be judged: {e}")))?
        .iter()
        .try_for_each(|(path, v)| check(path, *v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_told_from_rates_by_their_unit() {
        for d in [
            "executor.blend_ms",
            "limits.thermal.time_constant_s",
            "sim.substep_us",
            "inject.probe.start_s",
            "telemetry.intervention_before_s",
        ] {
            assert!(is_duration(d), "{d}");
        }
        for r in [
            "limits.max_vel_rad_s",
            "policy.gain_per_s",
            "limits.max_acc_rad_s2",
            "sim.viscous_nm_s_rad",
            "episodes.settle_vel_rad_s",
            "limits.action_filter_hz",
            "policy.goals_rad[0][1]",
        ] {
            assert!(!is_duration(r), "{r}");
        }
    }

    #[test]
    fn the_rule_refuses_what_no_quantity_is_and_names_the_key() {
        assert_eq!(check("a.b_ms", 0.0), Ok(()));
        assert_eq!(check("a.b_rad", -1e-17), Ok(()));
        assert_eq!(check("inference.start_offset_ms", -10.0), Ok(()));
        for (key, v, says) in [
            ("a.x_hz", 5e-324, "(a subnormal number)"),
            ("a.x_hz", 1e-200, "at least 1e-100, got 1e-200"),
            ("a.x_hz", f64::INFINITY, "a finite number, got inf"),
            ("a.x_hz", f64::NAN, "a finite number, got NaN"),
            ("a.x_hz", -1e300, "at most 1e100"),
            ("a.x_ms", -1.0, "a duration of 0 or more, got -1"),
        ] {
            let (k, m) = check(key, v).unwrap_err();
            assert_eq!(k, key);
            assert!(m.contains(says), "{key} = {v}: {m}");
        }
    }
}
