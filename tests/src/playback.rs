//! How smooth a run's command stream was, judged from the recording alone: the positions
//! the backend received each cycle and the executor's proposal beside them. Independent of
//! the runtime's own figures (the gate's intervention mask, the report's `command_stream`):
//! nothing here reads them.
//!
//! - **altered cycles**: Playing cycles in which the command differs from the proposal on
//!   some joint by more than [`ALTERED_RAD`] (the gate changed what the executor asked);
//! - **gap**: `max_j |proposal_j - command_j|` per Playing cycle;
//! - **acceleration / jerk**: second and third finite differences of the commands over the
//!   cycles' deadlines, as fractions of each joint's limit, in windows that lie entirely in
//!   Playing (the commanded stop of the end of a run is judged elsewhere);
//! - **time to goal**: walking the goal list in order, the time between the commands'
//!   arrivals (every joint within the tolerance) at consecutive goals.
//!
//! A missed deadline is a timing fault, not a seam: the next command carries several
//! periods of motion and the gate rightly limits it. Cycles within [`RECOVERY_S`] after one
//! are counted apart (`after_missed`) and left out of the other figures.

use crate::recording::{self, RecordedCycle};
use chunkrt_config::Config;
use chunkrt_policy::Manifest;
use std::path::Path;

/// A command farther than this from the proposal counts as altered (rounding aside).
pub const ALTERED_RAD: f64 = 1e-9;

/// How long after a missed deadline cycles are left out, s.
pub const RECOVERY_S: f64 = 0.1;

/// The figures of one run.
#[derive(Clone, Debug, Default)]
pub struct Playback {
    /// Playing cycles judged.
    pub playing: usize,
    /// 4-cycle windows (consecutive Playing cycles) whose acceleration and jerk were judged.
    pub windows: usize,
    /// Cycles left out: within [`RECOVERY_S`] after a missed deadline.
    pub after_missed: usize,
    /// Playing cycles whose command differs from the proposal.
    pub altered: usize,
    /// P99 of the per-cycle gap, rad.
    pub gap_p99_rad: f64,
    /// Largest gap, rad.
    pub gap_max_rad: f64,
    /// P99.9 and largest per-cycle worst-joint acceleration, fraction of the limit.
    pub acc_p999: f64,
    /// Largest acceleration, fraction of the limit.
    pub acc_max: f64,
    /// P99.9 of the worst-joint jerk, fraction of the limit.
    pub jerk_p999: f64,
    /// Largest jerk, fraction of the limit.
    pub jerk_max: f64,
    /// Seconds between consecutive goal arrivals.
    pub goal_times_s: Vec<f64>,
}

impl Playback {
    /// Altered Playing cycles, percent.
    pub fn altered_pct(&self) -> f64 {
        100.0 * self.altered as f64 / self.playing.max(1) as f64
    }

    /// Mean time from one goal to the next, s (NaN when no goal was reached twice).
    pub fn mean_goal_time_s(&self) -> f64 {
        if self.goal_times_s.is_empty() {
            return f64::NAN;
        }
        self.goal_times_s.iter().sum::<f64>() / self.goal_times_s.len() as f64
    }

    /// One line for a log.
    pub fn line(&self) -> String {
        format!(
            "{} Playing cycles, {} windows ({} after a missed deadline left out), altered {:.2} %, gap P99 {:.3} mrad (max {:.3}), \
             acceleration P99.9 {:.3} (max {:.3}) of the limit, jerk P99.9 {:.3} (max {:.3}), \
             {} goal-to-goal times, mean {:.2} s",
            self.playing,
            self.windows,
            self.after_missed,
            self.altered_pct(),
            self.gap_p99_rad * 1e3,
            self.gap_max_rad * 1e3,
            self.acc_p999,
            self.acc_max,
            self.jerk_p999,
            self.jerk_max,
            self.goal_times_s.len(),
            self.mean_goal_time_s()
        )
    }

    /// Panics unless at least `min_cycles` Playing cycles and `min_cycles / 2` windows
    /// were judged (a window needs four consecutive Playing cycles outside the recovery
    /// after a missed deadline): a judge that judged nothing passes nothing.
    #[track_caller]
    pub fn assert_judged(&self, what: &str, min_cycles: usize) {
        assert!(
            self.playing >= min_cycles && self.windows >= min_cycles / 2,
            "{what}: judged {} Playing cycles and {} windows, fewer than the {min_cycles} the run should have played: {}",
            self.playing,
            self.windows,
            self.line()
        );
    }
}

/// The fewest Playing cycles a run of `duration_s` at `period_ms` must leave to judge:
/// half of its cycles (start-up, the first chunk and the closing stop take the rest of a
/// run of ten seconds or more).
pub fn min_playing(duration_s: f64, period_ms: f64) -> usize {
    (0.5 * duration_s * 1e3 / period_ms) as usize
}

/// The `q`-quantile (nearest rank) of `v`, `None` for an empty slice or one that holds
/// a NaN.
pub fn quantile(v: &mut [f64], q: f64) -> Option<f64> {
    if v.is_empty() || v.iter().any(|x| x.is_nan()) {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// The largest of `v`, `None` for an empty slice or one that holds a NaN (`f64::max`
/// drops a NaN).
pub fn max(v: &[f64]) -> Option<f64> {
    if v.iter().any(|x| x.is_nan()) {
        return None;
    }
    v.iter().copied().reduce(f64::max)
}

/// The larger of `a` and `b`, NaN when either is (`f64::max` returns the other).
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Judges the run in `run_dir` (its `recording.mcap`) against the limits of `cfg`, the
/// config it ran with, and the goals of that config's policy manifest.
pub fn judge_run(cfg: &Config, run_dir: &Path) -> Result<Playback, String> {
    let limits = cfg.joint_limits();
    let n = cfg.control.joints;
    let acc: Vec<f64> = (0..n).map(|j| limits.joint[j].max_acc_rad_s2).collect();
    let jerk: Vec<f64> = (0..n).map(|j| limits.joint[j].max_jerk_rad_s3).collect();
    let manifest = cfg
        .policy
        .manifest
        .as_ref()
        .map(|m| cfg.resolve(m))
        .ok_or("the config has no policy.manifest")?;
    let text = std::fs::read_to_string(&manifest).map_err(|e| e.to_string())?;
    let (goals, tolerance) = match chunkrt_policy::manifest2::manifest_format(&manifest, &text)
        .map_err(|e| e.to_string())?
    {
        2 => {
            let m = chunkrt_policy::CheckedManifest2::parse(&manifest, &text)
                .map_err(|e| e.to_string())?
                .raw;
            (m.task.goals, m.task.goal_tolerance_rad)
        }
        _ => {
            let m = Manifest::parse(&manifest, &text).map_err(|e| e.to_string())?;
            (m.encoding.goals, m.encoding.goal_tolerance_rad)
        }
    };
    let (cycles, _) = recording::read(&run_dir.join("recording.mcap"))?;
    judge(&cycles, &acc, &jerk, &goals, tolerance)
}

/// Judges `cycles` (file order) against the per-joint acceleration and jerk limits and
/// the goal list. Refuses a recording in which a cycle holds fewer joints than the limits
/// or a figure that is not finite (a NaN, a deadline that does not advance), and one in
/// which no Playing cycle or no window of four consecutive Playing cycles is left to judge.
pub fn judge(
    cycles: &[RecordedCycle],
    acc_limit: &[f64],
    jerk_limit: &[f64],
    goals: &[Vec<f64>],
    goal_tolerance_rad: f64,
) -> Result<Playback, String> {
    let mut out = Playback::default();
    let dof = acc_limit.len().min(jerk_limit.len());
    if dof == 0 {
        return Err("no joint limits to judge against".into());
    }
    for (i, c) in cycles.iter().enumerate() {
        let finite = |v: &[f64]| v.len() >= dof && v[..dof].iter().all(|x| x.is_finite());
        if !finite(&c.setpoint_rad) || !finite(&c.command_rad) {
            return Err(format!(
                "cycle {} (message {i}): setpoint_rad {:?} / command_rad {:?}: fewer than {dof} joints or not finite",
                c.cycle, c.setpoint_rad, c.command_rad
            ));
        }
    }
    let t = |c: &RecordedCycle| c.t_deadline_ns as f64 * 1e-9;
    // Per cycle: whether it lies within RECOVERY_S after a missed deadline.
    let mut last_missed = f64::NEG_INFINITY;
    let disturbed: Vec<bool> = cycles
        .iter()
        .map(|c| {
            if c.missed > 0 {
                last_missed = t(c);
            }
            t(c) - last_missed <= RECOVERY_S
        })
        .collect();
    out.after_missed = disturbed.iter().filter(|&&d| d).count();
    let playing = |c: &RecordedCycle| c.mode == "Playing";
    let mut gaps = Vec::new();
    for (c, _) in cycles
        .iter()
        .zip(&disturbed)
        .filter(|(c, d)| playing(c) && !**d)
    {
        let gap = (0..dof)
            .map(|j| (c.setpoint_rad[j] - c.command_rad[j]).abs())
            .fold(0.0, nan_max);
        out.playing += 1;
        out.altered += (gap > ALTERED_RAD) as usize;
        gaps.push(gap);
    }
    if gaps.is_empty() {
        return Err(format!(
            "no Playing cycle to judge among {} cycles ({} after a missed deadline)",
            cycles.len(),
            out.after_missed
        ));
    }
    out.gap_max_rad = max(&gaps).ok_or("a gap is NaN")?;
    out.gap_p99_rad = quantile(&mut gaps, 0.99).ok_or("a gap is NaN")?;

    let (mut accs, mut jerks) = (Vec::new(), Vec::new());
    for (i, w) in cycles.windows(4).enumerate() {
        if !w.iter().all(playing)
            || disturbed[i..i + 4].iter().any(|&d| d)
            || w.windows(2).any(|p| p[1].cycle != p[0].cycle + 1)
        {
            continue;
        }
        let (mut acc, mut jerk) = (0.0f64, 0.0f64);
        for j in 0..dof {
            let v: Vec<f64> = (0..3)
                .map(|k| {
                    (w[k + 1].command_rad[j] - w[k].command_rad[j]) / (t(&w[k + 1]) - t(&w[k]))
                })
                .collect();
            let a0 = (v[1] - v[0]) / ((t(&w[2]) - t(&w[0])) / 2.0);
            let a1 = (v[2] - v[1]) / ((t(&w[3]) - t(&w[1])) / 2.0);
            let jk = (a1 - a0) / ((t(&w[3]) + t(&w[2]) - t(&w[1]) - t(&w[0])) / 2.0);
            acc = nan_max(acc, a0.abs() / acc_limit[j]);
            jerk = nan_max(jerk, jk.abs() / jerk_limit[j]);
        }
        if !acc.is_finite() || !jerk.is_finite() {
            return Err(format!(
                "cycles {}..={}: acceleration {acc} / jerk {jerk} of the limit is not finite (deadlines {:?})",
                w[0].cycle,
                w[3].cycle,
                w.iter().map(|c| c.t_deadline_ns).collect::<Vec<_>>()
            ));
        }
        accs.push(acc);
        jerks.push(jerk);
    }
    out.windows = accs.len();
    let playing_cycles = out.playing;
    let none = || {
        format!(
            "no window of four consecutive Playing cycles to judge among {playing_cycles} Playing cycles"
        )
    };
    out.acc_max = max(&accs).ok_or_else(none)?;
    out.jerk_max = max(&jerks).ok_or_else(none)?;
    out.acc_p999 = quantile(&mut accs, 0.999).ok_or_else(none)?;
    out.jerk_p999 = quantile(&mut jerks, 0.999).ok_or_else(none)?;

    if !goals.is_empty() {
        let mut index = 0;
        let mut last: Option<f64> = None;
        for c in cycles {
            let g = &goals[index];
            let near = (0..dof.min(g.len()))
                .all(|j| (c.command_rad[j] - g[j]).abs() <= goal_tolerance_rad);
            if near {
                if let Some(t0) = last {
                    out.goal_times_s.push(t(c) - t0);
                }
                last = Some(t(c));
                index = (index + 1) % goals.len();
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cycle(k: u64, period_s: f64, mode: &str, set: f64, cmd: f64) -> RecordedCycle {
        RecordedCycle {
            cycle: k,
            t_deadline_ns: (k as f64 * period_s * 1e9).round() as u64,
            mode: mode.into(),
            setpoint_rad: vec![set],
            command_rad: vec![cmd],
            ..RecordedCycle::default()
        }
    }

    #[test]
    fn a_parabola_has_its_acceleration_and_no_jerk() {
        // p = 0.5 a t^2 with a = 3 rad/s^2, limit 10: 0.3 of the limit, jerk 0.
        let cycles: Vec<_> = (0..50)
            .map(|k| {
                let t = k as f64 * 0.02;
                cycle(k, 0.02, "Playing", 1.5 * t * t, 1.5 * t * t)
            })
            .collect();
        let p = judge(&cycles, &[10.0], &[100.0], &[], 0.05).unwrap();
        assert!((p.acc_max - 0.3).abs() < 1e-9, "{}", p.line());
        assert!(p.jerk_max < 1e-6, "{}", p.line());
        assert_eq!((p.playing, p.altered), (50, 0));
    }

    #[test]
    fn altered_cycles_and_gaps_count_only_playing() {
        let mut cycles: Vec<_> = (0..100)
            .map(|k| cycle(k, 0.001, "Playing", 0.0, 0.0))
            .collect();
        cycles[10].command_rad[0] = 0.002;
        cycles[20].mode = "Decelerating".into();
        cycles[20].command_rad[0] = 0.5;
        let p = judge(&cycles, &[10.0], &[100.0], &[], 0.05).unwrap();
        assert_eq!((p.playing, p.altered), (99, 1));
        assert_eq!(p.gap_max_rad, 0.002);
        // Windows touching the non-Playing cycle are not judged; the step at 10 is.
        assert!(p.acc_max > 100.0, "{}", p.line());
    }

    #[test]
    fn cycles_after_a_missed_deadline_are_left_out() {
        let mut cycles: Vec<_> = (0..300)
            .map(|k| cycle(k, 0.001, "Playing", 0.0, 0.0))
            .collect();
        cycles[100].missed = 2;
        cycles[120].command_rad[0] = 0.002; // within 100 ms: left out
        cycles[250].command_rad[0] = 0.001; // after: counted
        let p = judge(&cycles, &[10.0], &[100.0], &[], 0.05).unwrap();
        assert_eq!(p.after_missed, 101);
        assert_eq!((p.playing, p.altered), (199, 1));
        assert_eq!(p.gap_max_rad, 0.001);
    }

    #[test]
    fn goal_times_follow_the_list_in_order() {
        // Goal 0 at t = 0, 1 at 1 s, 0 at 2 s, 1 at 3 s, 0 at 4 s: four times of 1 s.
        let pos = |k: u64| match k {
            0..=9 => 0.0,
            10..=19 => 1.0,
            20..=29 => 0.0,
            30..=39 => 1.0,
            _ => 0.0,
        };
        let cycles: Vec<_> = (0..50)
            .map(|k| cycle(k, 0.1, "Playing", pos(k), pos(k)))
            .collect();
        let p = judge(&cycles, &[1e9], &[1e9], &[vec![0.0], vec![1.0]], 0.05).unwrap();
        assert_eq!(p.goal_times_s.len(), 4);
        assert!((p.goal_times_s[0] - 1.0).abs() < 1e-9);
        assert!(p.goal_times_s.iter().all(|t| (t - 1.0).abs() < 1e-9));
    }

    fn steady(n: u64) -> Vec<RecordedCycle> {
        (0..n)
            .map(|k| cycle(k, 0.001, "Playing", 0.01 * k as f64, 0.01 * k as f64))
            .collect()
    }

    #[test]
    fn cycles_that_are_never_consecutive_are_refused() {
        // Every other cycle recorded: no 4-cycle window; the old judge reported 0.
        let cycles: Vec<_> = steady(200).into_iter().step_by(2).collect();
        let e = judge(&cycles, &[10.0], &[100.0], &[], 0.05).unwrap_err();
        assert!(e.contains("no window"), "{e}");
    }

    #[test]
    fn nothing_playing_is_refused() {
        let mut cycles = steady(100);
        cycles
            .iter_mut()
            .for_each(|c| c.mode = "Decelerating".into());
        let e = judge(&cycles, &[10.0], &[100.0], &[], 0.05).unwrap_err();
        assert!(e.contains("no Playing cycle"), "{e}");
        assert!(judge(&[], &[10.0], &[100.0], &[], 0.05).is_err());
    }

    #[test]
    fn a_nan_is_refused() {
        for field in ["command", "setpoint"] {
            let mut cycles = steady(100);
            match field {
                "command" => cycles[50].command_rad[0] = f64::NAN,
                _ => cycles[50].setpoint_rad[0] = f64::NAN,
            }
            let e = judge(&cycles, &[10.0], &[100.0], &[], 0.05).unwrap_err();
            assert!(e.contains("cycle 50"), "{field}: {e}");
        }
    }

    #[test]
    fn a_cycle_without_its_joints_is_refused() {
        let mut cycles = steady(100);
        cycles[30].command_rad.clear();
        let e = judge(&cycles, &[10.0], &[100.0], &[], 0.05).unwrap_err();
        assert!(e.contains("cycle 30"), "{e}");
    }

    #[test]
    fn a_deadline_that_does_not_advance_is_refused() {
        let mut cycles = steady(100);
        cycles[40].t_deadline_ns = cycles[39].t_deadline_ns;
        let e = judge(&cycles, &[10.0], &[100.0], &[], 0.05).unwrap_err();
        assert!(e.contains("not finite"), "{e}");
    }

    #[test]
    fn the_judged_count_is_asserted() {
        let p = judge(&steady(100), &[10.0], &[100.0], &[], 0.05).unwrap();
        assert_eq!((p.playing, p.windows), (100, 97));
        p.assert_judged("steady", 90);
        let short = std::panic::catch_unwind(|| p.assert_judged("steady", 101));
        assert!(short.is_err());
    }

    #[test]
    fn quantile_and_max_refuse_empty_and_nan() {
        assert_eq!(quantile(&mut [], 0.5), None);
        assert_eq!(quantile(&mut [1.0, f64::NAN], 0.5), None);
        assert_eq!(max(&[]), None);
        assert_eq!(max(&[f64::NAN, 1.0]), None);
        assert_eq!(max(&[1.0, 3.0, 2.0]), Some(3.0));
    }
}
