//! The oracle of "the stop begins where the arm is" (issue 12), on a command stream.
//!
//! It reads only the positions the backend received, one per period. The commands
//! are judged as every limit is judged: by backward differences, i.e. as the
//! discrete triple integrator `a' = a + j t, v' = v + a' t, q' = q + v' t` with
//! `|a| <= A` and `|a' - a| <= J t`. (A continuous-time stop from the same samples
//! mislocates the state by about half a period — 2.5e-5 rad at 1 ms — so it is no
//! oracle at 1e-6 rad.)
//!
//! [`reference_stop`] is the quickest stop of that integrator from the commanded
//! state, computed here by brute force (bisection on a simulation), not by the
//! gate's closed forms. [`check_stop`] then asserts on the commands after a
//! withdrawal of the policy's authority: every command within the reference stop's
//! excursion (+1e-6 rad) and so within its braking distance; the speed never above
//! the reference's peak and, once past its peak, never rising; at rest (1e-6 rad/s)
//! once the reference is.

use chunkrt_core::JointLimit;

/// Speed below which a joint counts as at rest (rad/s): a micro-radian a second.
pub const REST_RAD_S: f64 = 1e-6;

/// Positions after each period of the quickest stop from `(q0, v0, a0)`, until at
/// rest. See the module docs.
pub fn reference_stop(q0: f64, v0: f64, a0: f64, a_max: f64, j_max: f64, t: f64) -> Vec<f64> {
    let d = j_max * t;
    // Velocity (in the braking frame, moving forward at `w >= 0`) at the end of the
    // swing back toward zero from braking acceleration `b < 0` chosen now.
    let lands = |w: f64, b: f64| -> f64 {
        let mut w1 = w + b * t;
        let mut bi = b;
        loop {
            bi += d;
            if bi >= 0.0 {
                return w1;
            }
            w1 += bi * t;
        }
    };
    let (mut q, mut v, mut a) = (q0, v0, a0);
    let mut out = Vec::new();
    for _ in 0..200_000 {
        if v.abs() < 1e-12 && a.abs() < 1e-9 {
            break;
        }
        let s = if v != 0.0 { v.signum() } else { a.signum() };
        let (w, b) = (s * v, s * a);
        let lo = (b - d).max(-a_max);
        let hi = (b + d).min(a_max);
        // The hardest braking whose swing back does not reverse the motion.
        let next = if lands(w, lo) >= 0.0 {
            lo
        } else if lands(w, hi) < 0.0 {
            hi
        } else {
            let (mut l, mut h) = (lo, hi);
            for _ in 0..200 {
                let m = 0.5 * (l + h);
                if lands(w, m) >= 0.0 {
                    h = m;
                } else {
                    l = m;
                }
            }
            h
        };
        a = s * next;
        v += a * t;
        q += v * t;
        out.push(q);
    }
    out
}

/// What a stop looked like on one joint.
#[derive(Clone, Copy, Debug, Default)]
pub struct StopSummary {
    /// Commanded state at the withdrawal (backward differences).
    pub pos_rad: f64,
    /// Commanded velocity at the withdrawal.
    pub vel_rad_s: f64,
    /// Commanded acceleration at the withdrawal.
    pub acc_rad_s2: f64,
    /// Braking distance of the reference stop from that state.
    pub braking_distance_rad: f64,
    /// Largest distance the commands moved after the withdrawal.
    pub moved_rad: f64,
    /// Periods until the commands were at rest.
    pub rest_after: usize,
    /// Periods the reference stop takes.
    pub reference_periods: usize,
}

/// Checks one joint's commands `q` (one per period `t`, oldest first) after a
/// withdrawal: `q[base]` is the last command before it (`base >= 2`), everything
/// after it belongs to the stop. `lim` are the joint's limits.
///
/// Where the reference stop would end beyond a soft position limit, the limit wins:
/// the gate's position envelope brakes at `brake_acc` and leaves the jerk-limited
/// swing back to zero acceleration for after the limit, so such a stop may end with
/// a small reversal away from the limit. It is judged on the distance moved in the
/// direction of the motion and on reaching rest (within the extra periods of that
/// swing).
pub fn check_stop(q: &[f64], base: usize, lim: &JointLimit, t: f64) -> Result<StopSummary, String> {
    assert!(base >= 2 && base < q.len(), "base {base} of {}", q.len());
    // A NaN compares false with every bound below: it would pass them all.
    if let Some(i) = q.iter().position(|x| !x.is_finite()) {
        return Err(format!(
            "command {i} ({} periods from the withdrawal) is {}",
            i as i64 - base as i64,
            q[i]
        ));
    }
    let (q2, q1, q0) = (q[base], q[base - 1], q[base - 2]);
    let v_bd = (q2 - q1) / t;
    let a_bd = (v_bd - (q1 - q0) / t) / t;
    let reference = reference_stop(q2, v_bd, a_bd, lim.max_acc_rad_s2, lim.max_jerk_rad_s3, t);
    let lo = reference.iter().cloned().fold(q2, f64::min);
    let hi = reference.iter().cloned().fold(q2, f64::max);
    let mut prev = q2;
    let mut peak = v_bd.abs();
    for r in &reference {
        peak = peak.max((r - prev).abs() / t);
        prev = *r;
    }
    let after = &q[base..];
    let speeds: Vec<f64> = after.windows(2).map(|w| (w[1] - w[0]).abs() / t).collect();
    let at_limit = hi > lim.pos_max_rad - lim.pos_margin_rad - 1e-9
        || lo < lim.pos_min_rad + lim.pos_margin_rad + 1e-9;
    let braking_distance = (hi - q2).max(q2 - lo);
    let toward = |x: f64| {
        if at_limit {
            (x - q2) * v_bd.signum()
        } else {
            (x - q2).abs()
        }
    };
    let state = format!("commanded state {q2} rad, {v_bd} rad/s, {a_bd} rad/s2");
    let mut moved: f64 = 0.0;
    for (i, x) in after.iter().enumerate() {
        moved = moved.max((x - q2).abs());
        if toward(*x) > braking_distance + 1e-6 {
            return Err(format!(
                "moved {} rad {i} periods after the withdrawal; braking distance from the \
                 {state}: {braking_distance} rad",
                toward(*x)
            ));
        }
        if !at_limit && (*x < lo - 1e-6 || *x > hi + 1e-6) {
            return Err(format!(
                "command {x} {i} periods after the withdrawal lies outside the stop from \
                 the {state}: [{lo}, {hi}]"
            ));
        }
    }
    let top = speeds.iter().cloned().fold(0.0, f64::max);
    if !at_limit && top > peak + 1e-6 {
        return Err(format!(
            "speed {top} rad/s > the stop's peak {peak} from the {state}"
        ));
    }
    // Unless the commanded acceleration already reverses the motion (the stop then
    // brakes the reverse motion it started), the speed falls from its peak to rest.
    let released = v_bd + a_bd * a_bd.abs() / (2.0 * lim.max_jerk_rad_s3);
    if released * v_bd >= 0.0 && !at_limit {
        let i_peak = speeds.iter().position(|s| *s >= top - 1e-12).unwrap_or(0);
        for w in speeds[i_peak..].windows(2) {
            if w[1] > w[0] + 1e-9 {
                return Err(format!(
                    "speed rose from {} to {} rad/s after its peak ({state})",
                    w[0], w[1]
                ));
            }
        }
    }
    let swing = (lim.max_acc_rad_s2 / (lim.max_jerk_rad_s3 * t)).ceil() as usize;
    let rest_by = reference.len() + 1 + if at_limit { 2 * swing + 2 } else { 0 };
    let rest_after = speeds
        .iter()
        .rposition(|s| *s >= REST_RAD_S)
        .map_or(0, |i| i + 1);
    if rest_after > rest_by && speeds.len() > rest_by {
        return Err(format!(
            "still moving ({} rad/s) {rest_after} periods after the withdrawal; the \
             quickest stop from the {state} takes {} periods",
            speeds[rest_after - 1],
            reference.len()
        ));
    }
    Ok(StopSummary {
        pos_rad: q2,
        vel_rad_s: v_bd,
        acc_rad_s2: a_bd,
        braking_distance_rad: braking_distance,
        moved_rad: moved,
        rest_after,
        reference_periods: reference.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> JointLimit {
        JointLimit::default()
    }

    #[test]
    fn the_reference_stops_a_moving_joint_and_the_check_catches_a_chase() {
        let t = 0.02;
        // A joint moving at 1 rad/s, steady, A = 10, J = 500: at 20 ms one jerk step
        // (J t = 10) reaches full braking at once, so the backward-difference
        // velocities are 0.8, 0.6, 0.4, 0.2, 0 (then the acceleration swings back to
        // 0 in one step): 0.02 * (0.8 + 0.6 + 0.4 + 0.2) = 0.04 rad.
        let q: Vec<f64> = (0..10).map(|i| i as f64 * t).collect();
        let r = reference_stop(q[9], 1.0, 0.0, 10.0, 500.0, t);
        let dist = r.last().unwrap() - q[9];
        assert!((dist - 0.04).abs() < 1e-9, "{dist}");
        // Commands that follow the reference pass ...
        let mut stream = q.clone();
        stream.extend(r.iter().copied());
        stream.extend(std::iter::repeat_n(*r.last().unwrap(), 20));
        let s = check_stop(&stream, 9, &lim(), t).unwrap();
        assert!((s.braking_distance_rad - dist).abs() < 1e-12);
        // ... commands that keep going at the velocity limit (a chase) fail ...
        let mut chase = q.clone();
        chase.extend((1..60).map(|i| q[9] + i as f64 * 2.0 * t));
        assert!(check_stop(&chase, 9, &lim(), t).is_err());
        // ... and so do commands that stop but only later.
        let mut late = q.clone();
        late.extend(std::iter::repeat_n(q[9] + t, 3));
        late.extend(r.iter().map(|x| x + t));
        assert!(check_stop(&late, 9, &lim(), t).is_err());
    }

    #[test]
    fn a_nan_in_the_stop_is_refused() {
        let t = 0.02;
        let mut q: Vec<f64> = (0..10).map(|k| 0.02 * k as f64).collect();
        q.extend([0.2; 40]);
        q[20] = f64::NAN;
        let e = check_stop(&q, 9, &lim(), t).unwrap_err();
        assert!(e.contains("command 20"), "{e}");
    }
}
