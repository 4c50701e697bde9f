//! The gap between two plants, channel by channel, against tolerances.

use crate::measure::{JointResponse, PlantMeasurement};
use crate::signal::{ks_distance, wrap_deg};
use serde::Serialize;

/// The tolerance of each metric. The defaults are the design table's where it has one
/// (phase lag 5 degrees at 10 Hz, step settling time 15 ms and overshoot 5 %,
/// end-to-end jitter 2 ms, observation age 25 ms, no
/// deadline overrun at 50 Hz, sensor distributions KS 0.05) and chunkrt's own
/// otherwise (gain, backlash, coupling, hold torque, bias).
///
/// Every tolerance bounds the difference between the plants (the gap), not either
/// plant alone: a plant alone is judged by `chunkrt bench`'s budget files.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Tolerances {
    /// `|Δ phase lag|` at every probe frequency (degrees).
    pub phase_lag_deg: f64,
    /// `|Δ gain|` at every probe frequency (dB).
    pub gain_db: f64,
    /// `|Δ settling time|` of the step response (ms).
    pub settling_ms: f64,
    /// `|Δ overshoot|` of the step response (percentage points of the step).
    pub overshoot_pct: f64,
    /// `|Δ play|` between the directions of motion (rad).
    pub backlash_rad: f64,
    /// `|Δ coupling|`: another joint's `|Y_k / C_j|`.
    pub coupling: f64,
    /// `|Δ torque|` holding the arm at rest (N m): gravity, a payload, a spring.
    pub hold_torque_nm: f64,
    /// `|Δ bias|` of measured against commanded at rest (rad).
    pub bias_rad: f64,
    /// KS distance of the two plants' measurement noise at rest.
    pub noise_ks: f64,
    /// The noise is compared at this resolution (rad): below it two plants' noise is
    /// the same (an exact simulator against a 27-bit encoder is no gap).
    pub noise_resolution_rad: f64,
    /// `|Δ end-to-end jitter|` (P99 - P50, ms).
    pub e2e_jitter_ms: f64,
    /// `|Δ oldest observation age|` (ms).
    pub obs_age_ms: f64,
    /// `|Δ deadline overruns|`, judged at a 20 ms (50 Hz) bus only, the table's rate;
    /// at faster buses reported without a verdict.
    pub overruns: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances {
            phase_lag_deg: 5.0,
            gain_db: 1.0,
            settling_ms: 15.0,
            overshoot_pct: 5.0,
            backlash_rad: 5e-4,
            coupling: 0.02,
            hold_torque_nm: 1.0,
            bias_rad: 1e-3,
            noise_ks: 0.05,
            noise_resolution_rad: 1e-6,
            e2e_jitter_ms: 2.0,
            obs_age_ms: 25.0,
            overruns: 0.0,
        }
    }
}

/// One metric of one channel on both plants.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct GapRow {
    /// `actuator`, `coupling`, `load`, `sensing` or `timing`.
    pub channel: &'static str,
    /// What is measured, with its unit and, for a frequency response, its frequency
    /// (`phase_lag_deg@10Hz`).
    pub metric: String,
    /// The joint (none for the timing channel).
    pub joint: Option<usize>,
    /// On the reference plant.
    pub reference: f64,
    /// On the plant compared with it.
    pub plant: f64,
    /// `plant - reference` (for the KS distance: the distance itself).
    pub difference: f64,
    /// The tolerance on `|difference|` (none: reported, not judged).
    pub tolerance: Option<f64>,
    /// `|difference|` is over the tolerance.
    pub over: bool,
}

impl GapRow {
    fn new(
        channel: &'static str,
        metric: String,
        joint: Option<usize>,
        (reference, plant, difference): (f64, f64, f64),
        tolerance: Option<f64>,
    ) -> GapRow {
        GapRow {
            channel,
            metric,
            joint,
            reference,
            plant,
            difference,
            tolerance,
            // A difference that is not a number is over.
            over: tolerance.is_some_and(|t| difference.is_nan() || difference.abs() > t),
        }
    }
}

/// A frequency as a metric's name writes it: `10`, `0.5` (no trailing zeros).
fn fmt_hz(f: f64) -> String {
    let s = format!("{f:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A row of `b` against `a`: the difference is `b - a`.
fn diff(
    channel: &'static str,
    metric: String,
    joint: Option<usize>,
    (a, b): (f64, f64),
    tolerance: Option<f64>,
) -> GapRow {
    GapRow::new(channel, metric, joint, (a, b, b - a), tolerance)
}

/// The rows of `plant` against `reference`, channel by channel. Joints excited on
/// one plant only, or absent from one, are left out.
pub fn compare(
    reference: &PlantMeasurement,
    plant: &PlantMeasurement,
    tol: &Tolerances,
) -> Vec<GapRow> {
    let mut rows = Vec::new();
    for r in &reference.responses {
        if let Some(p) = plant.responses.iter().find(|p| p.joint == r.joint) {
            response_rows(r, p, tol, &mut rows);
        }
    }
    for (a, b) in reference.hold.iter().zip(&plant.hold) {
        let j = Some(a.joint);
        let (t, l) = (Some(tol.hold_torque_nm), "hold_torque_nm".to_string());
        rows.push(diff("load", l, j, (a.torque_nm, b.torque_nm), t));
        let (t, l) = (Some(tol.bias_rad), "bias_rad".to_string());
        rows.push(diff("sensing", l, j, (a.bias_rad, b.bias_rad), t));
        let q = |v: &[f64]| -> Vec<f64> {
            v.iter()
                .map(|x| (x / tol.noise_resolution_rad).round())
                .collect()
        };
        let ks = ks_distance(&q(&a.residual_rad), &q(&b.residual_rad));
        let noise = (a.noise_rms_rad, b.noise_rms_rad, ks);
        let t = Some(tol.noise_ks);
        rows.push(GapRow::new("sensing", "noise_ks".into(), j, noise, t));
    }
    let (a, b) = (&reference.timing, &plant.timing);
    let (t, l) = (Some(tol.e2e_jitter_ms), "e2e_jitter_ms".to_string());
    rows.push(diff(
        "timing",
        l,
        None,
        (a.e2e_jitter_ms, b.e2e_jitter_ms),
        t,
    ));
    let (t, l) = (Some(tol.obs_age_ms), "obs_age_max_ms".to_string());
    rows.push(diff(
        "timing",
        l,
        None,
        (a.obs_age_max_ms, b.obs_age_max_ms),
        t,
    ));
    let at_50hz =
        (reference.period_ms - 20.0).abs() < 1e-9 && (plant.period_ms - 20.0).abs() < 1e-9;
    let overruns = (a.overruns as f64, b.overruns as f64);
    let t = at_50hz.then_some(tol.overruns);
    rows.push(diff(
        "timing",
        "deadline_overruns".into(),
        None,
        overruns,
        t,
    ));
    rows
}

/// The actuator and coupling rows of one joint excited on both plants.
fn response_rows(r: &JointResponse, p: &JointResponse, tol: &Tolerances, rows: &mut Vec<GapRow>) {
    let j = Some(r.joint);
    for (a, b) in r.points.iter().zip(&p.points) {
        let hz = fmt_hz(a.freq_hz);
        let lag = (
            a.phase_lag_deg,
            b.phase_lag_deg,
            wrap_deg(b.phase_lag_deg - a.phase_lag_deg),
        );
        let (t, l) = (Some(tol.phase_lag_deg), format!("phase_lag_deg@{hz}Hz"));
        rows.push(GapRow::new("actuator", l, j, lag, t));
        let (t, l) = (Some(tol.gain_db), format!("gain_db@{hz}Hz"));
        rows.push(diff("actuator", l, j, (a.gain_db, b.gain_db), t));
    }
    let (t, l) = (Some(tol.backlash_rad), "backlash_rad".to_string());
    rows.push(diff("actuator", l, j, (r.backlash_rad, p.backlash_rad), t));
    let (a, b) = (&r.step, &p.step);
    let (t, l) = (Some(tol.settling_ms), "step_settling_ms".to_string());
    rows.push(diff("actuator", l, j, (a.settling_ms, b.settling_ms), t));
    let (t, l) = (Some(tol.overshoot_pct), "step_overshoot_pct".to_string());
    rows.push(diff(
        "actuator",
        l,
        j,
        (a.overshoot_pct, b.overshoot_pct),
        t,
    ));
    for (k, (a, b)) in r.coupling.iter().zip(&p.coupling).enumerate() {
        if k != r.joint {
            let l = format!("gain_from_joint_{}", r.joint);
            rows.push(diff("coupling", l, Some(k), (*a, *b), Some(tol.coupling)));
        }
    }
}
