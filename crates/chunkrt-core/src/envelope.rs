//! Viability math of the permission gate, in discrete time.
//!
//! The gate commands one position per period `t`. Its velocity, acceleration and
//! jerk are the backward differences of those positions, so the commanded motion is
//! exactly the discrete triple integrator
//! `a' = a + j t`, `v' = v + a' t`, `q' = q + v' t`, with the gate choosing `a'`.
//!
//! A choice of `a'` is *safe* when, from the state it leads to, a fixed braking
//! rule keeps every limit for ever. The braking rules used here are simple enough
//! that their outcome has a closed form or a short loop:
//!
//! * velocity: swing the acceleration down by the full jerk step `d = J t` each
//!   period until it is no longer positive ([`vel_peak`]);
//! * position: swing the acceleration toward `-b` (the braking deceleration) by `d`
//!   each period and hold it there until the velocity is no longer positive
//!   ([`pos_peak`]).
//!
//! Both outcomes grow monotonically with `a'`, and the braking rule's own next
//! action leads to a state whose outcome is the same as before. So if the current
//! state is safe, the most-braking admissible `a'` is safe again: the admissible
//! set never becomes empty and the limits hold by induction. The lower side is the
//! mirror image (negate positions, velocities and accelerations).

/// Phase-1 steps allowed in [`pos_peak`] before the state is treated as unsafe
/// (only reached when `J t` is tiny compared with the acceleration limits).
const MAX_RAMP_STEPS: usize = 4096;

/// Largest velocity reached after choosing `alpha` for the next period and then
/// lowering the acceleration by `d` per period until it is `<= 0`.
pub(crate) fn vel_peak(v: f64, alpha: f64, t: f64, d: f64) -> f64 {
    let v1 = v + alpha * t;
    if alpha <= 0.0 {
        return v1;
    }
    // Further periods with a positive acceleration alpha - i d, i = 1..=m.
    let m = ((alpha / d).ceil() - 1.0).max(0.0);
    v1 + t * (m * alpha - d * m * (m + 1.0) * 0.5)
}

/// Highest position reached after choosing `alpha` for the next period and then
/// braking: acceleration swung toward `-b` by `d` per period, held at `-b` until the
/// velocity is no longer positive.
pub(crate) fn pos_peak(q: f64, v: f64, alpha: f64, t: f64, d: f64, b: f64) -> f64 {
    let mut a = alpha;
    let mut v = v + a * t;
    let mut q = q + v * t;
    let mut peak = q;
    let mut steps = 0;
    while a != -b {
        a = if a > -b {
            (a - d).max(-b)
        } else {
            (a + d).min(-b)
        };
        v += a * t;
        q += v * t;
        peak = peak.max(q);
        steps += 1;
        if steps > MAX_RAMP_STEPS {
            return f64::INFINITY;
        }
    }
    if v > 0.0 {
        // Constant -b: v_k = v - k b t stays positive for k = 1..=m.
        let bt = b * t;
        let m = ((v / bt).ceil() - 1.0).max(0.0);
        peak = peak.max(q + t * (m * v - bt * m * (m + 1.0) * 0.5));
    }
    peak
}

/// A cheap upper bound of [`pos_peak`], used to skip the exact evaluation far from
/// the limits: the peak velocity times a bound on the time until it has been braked.
pub(crate) fn pos_peak_bound(q: f64, v: f64, alpha: f64, t: f64, d: f64, b: f64) -> f64 {
    let vp = vel_peak(v, alpha, t, d).max(0.0);
    let ramp_steps = ((alpha + b) / d).max(0.0) + 1.0;
    q + vp * (t * (ramp_steps + 2.0) + vp / b)
}

/// Largest `x` in `[lo, hi]` with `ok(x)`, given `ok(lo)`; `ok` must be monotone
/// (true below some threshold). The result always satisfies `ok`.
pub(crate) fn bisect_max(mut lo: f64, mut hi: f64, ok: impl Fn(f64) -> bool) -> f64 {
    // 24 halvings of an interval of width <= 2 J t: far below any meaningful
    // acceleration difference.
    for _ in 0..24 {
        let mid = 0.5 * (lo + hi);
        if ok(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Brute-force simulation of the velocity braking rule.
    fn vel_peak_sim(v: f64, alpha: f64, t: f64, d: f64) -> f64 {
        let (mut a, mut v) = (alpha, v + alpha * t);
        let mut peak = v;
        while a > 0.0 {
            a -= d;
            if a > 0.0 {
                v += a * t;
            }
            peak = peak.max(v);
        }
        peak
    }

    fn pos_peak_sim(q: f64, v: f64, alpha: f64, t: f64, d: f64, b: f64) -> f64 {
        let (mut a, mut v) = (alpha, v + alpha * t);
        let mut q = q + v * t;
        let mut peak = q;
        for _ in 0..1_000_000 {
            a = if a > -b {
                (a - d).max(-b)
            } else {
                (a + d).min(-b)
            };
            v += a * t;
            q += v * t;
            peak = peak.max(q);
            if a == -b && v <= 0.0 {
                break;
            }
        }
        peak
    }

    #[test]
    fn closed_forms_match_simulation() {
        let t = 1e-3;
        let d = 500.0 * t;
        for &(v, alpha) in &[
            (0.0, 0.0),
            (1.0, 3.0),
            (-1.0, 7.3),
            (0.5, -2.0),
            (1.9, 10.0),
        ] {
            let exact = vel_peak(v, alpha, t, d);
            let sim = vel_peak_sim(v, alpha, t, d);
            assert!(
                (exact - sim).abs() < 1e-12,
                "v {v} alpha {alpha}: {exact} vs {sim}"
            );
            let pe = pos_peak(0.0, v, alpha, t, d, 8.0);
            let ps = pos_peak_sim(0.0, v, alpha, t, d, 8.0);
            assert!((pe - ps).abs() < 1e-9, "v {v} alpha {alpha}: {pe} vs {ps}");
            assert!(pos_peak_bound(0.0, v, alpha, t, d, 8.0) >= pe);
        }
    }

    #[test]
    fn bisection_keeps_the_feasible_side() {
        let x = bisect_max(0.0, 10.0, |x| x * x <= 2.0);
        assert!(x * x <= 2.0 && (x - 2f64.sqrt()).abs() < 1e-5);
    }
}
