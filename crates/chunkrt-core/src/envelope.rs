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
//! state is safe, the most-braking admissible `a'` is safe again for every bound
//! on that side, and the limits hold by induction. The lower side is the mirror
//! image (negate positions, velocities and accelerations). The two sides can only
//! contradict each other when the limits themselves do (a position range shorter
//! than the overshoot of a jerk-limited stop, or `max_vel` below `max_acc^2 /
//! max_jerk`); the gate then keeps the jerk and acceleration limits and reports
//! `Braking`. The proptests draw limits across the sane range and check every
//! executed command.

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

/// Largest `alpha` with `vel_peak(v, alpha, t, d) <= v_max`: the exact inverse of
/// the piecewise-linear [`vel_peak`], nudged down where rounding would overshoot.
pub(crate) fn vel_peak_inverse(v: f64, v_max: f64, t: f64, d: f64) -> f64 {
    let r = v_max - v;
    let mut alpha = if r <= 0.0 {
        r / t
    } else {
        // vel_peak(k d) = v + t d k (k + 1) / 2: the last k whose value fits, then
        // the linear piece above it, where m = k further positive periods follow.
        let k = ((-1.0 + (1.0 + 8.0 * r / (t * d)).sqrt()) * 0.5)
            .floor()
            .max(0.0);
        (r / t + d * k * (k + 1.0) * 0.5) / (k + 1.0)
    };
    for _ in 0..4 {
        if vel_peak(v, alpha, t, d) <= v_max {
            break;
        }
        alpha -= alpha.abs() * 1e-12 + 1e-12;
    }
    alpha
}

/// Highest position reached after choosing `alpha` for the next period and then
/// braking: acceleration swung toward `-b` by `d` per period, held at `-b` until the
/// velocity is no longer positive. O(1): the ramp and the constant phase are summed
/// in closed form.
pub(crate) fn pos_peak(q: f64, v: f64, alpha: f64, t: f64, d: f64, b: f64) -> f64 {
    let v1 = v + alpha * t;
    let q1 = q + v1 * t;
    let mut peak = q1;
    // Ramp: a_k = alpha + sg k d for k = 1..=m, then a_{m+1} = -b.
    let gap = alpha + b;
    let (mut qe, mut ve) = (q1, v1);
    if gap != 0.0 {
        let sg = if gap > 0.0 { -1.0 } else { 1.0 };
        let m = (gap.abs() / d).ceil() - 1.0;
        let vk = |k: f64| v1 + t * (k * alpha + sg * d * k * (k + 1.0) * 0.5);
        let qk = |k: f64| {
            q1 + t
                * (k * v1
                    + t * (alpha * k * (k + 1.0) * 0.5 + sg * d * k * (k + 1.0) * (k + 2.0) / 6.0))
        };
        if m >= 1.0 {
            // The position rises while v_k > 0; v_k is unimodal in k, so the ramp's
            // highest point is q_0 or q at the last k with v_k > 0.
            let last = last_positive(&vk, m, sg, alpha, d, t, v1);
            if last >= 1.0 {
                peak = peak.max(qk(last));
            }
            (qe, ve) = (qk(m), vk(m));
        }
        ve -= b * t;
        qe += ve * t;
        peak = peak.max(qe);
    }
    if ve > 0.0 {
        // Constant -b: v_k = ve - k b t stays positive for k = 1..=n.
        let bt = b * t;
        let n = ((ve / bt).ceil() - 1.0).max(0.0);
        peak = peak.max(qe + t * (n * ve - bt * n * (n + 1.0) * 0.5));
    }
    peak
}

/// Largest integer `k` in `[0, m]` with `vk(k) > 0` after the rising part (0 when
/// none), where `vk(k) = v1 + t (k alpha + sg d k (k + 1) / 2)`.
fn last_positive(
    vk: &impl Fn(f64) -> f64,
    m: f64,
    sg: f64,
    alpha: f64,
    d: f64,
    t: f64,
    v1: f64,
) -> f64 {
    // Roots of (sg d t / 2) k^2 + t (alpha + sg d / 2) k + v1 = 0.
    let a2 = 0.5 * sg * d * t;
    let b2 = t * (alpha + 0.5 * sg * d);
    let disc = b2 * b2 - 4.0 * a2 * v1;
    let guess = if disc < 0.0 {
        // No crossing: v_k keeps the sign of v1 (concave case) or of the minimum.
        if vk(m) > 0.0 {
            m
        } else {
            0.0
        }
    } else {
        // The crossing from positive to non-positive: the larger root when the
        // parabola opens downward (sg < 0), the smaller one when it opens upward.
        // (-b2 - sqrt(disc)) / (2 a2) is that root in both cases (a2's sign flips it).
        ((-b2 - disc.sqrt()) / (2.0 * a2)).floor().clamp(0.0, m)
    };
    // Float safety: settle on the exact integer boundary by evaluating v_k (the
    // root is off by at most a rounding error, so two steps either way suffice).
    let mut k = guess;
    for _ in 0..2 {
        if k < m && vk(k + 1.0) > 0.0 && (k < 1.0 || vk(k) > 0.0) {
            k += 1.0;
        }
    }
    for _ in 0..2 {
        if k >= 1.0 && vk(k) <= 0.0 {
            k -= 1.0;
        }
    }
    if k >= 1.0 && vk(k) <= 0.0 {
        0.0
    } else {
        k
    }
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
    // 16 halvings of an interval of width <= 2 J t leave J t / 32768 on the safe
    // side: far below any meaningful acceleration difference.
    for _ in 0..16 {
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

    proptest::proptest! {
        #[test]
        fn pos_peak_matches_a_step_by_step_simulation(
            q in -1.0f64..1.0,
            v in -3.0f64..3.0,
            acc in 1.0f64..20.0,
            alpha_frac in -1.0f64..1.0,
            b_frac in 0.3f64..1.0,
            jerk_ratio in 5.0f64..200.0,
            t in proptest::sample::select(vec![1e-3, 2e-3, 4e-3, 1e-2, 2e-2]),
        ) {
            let (alpha, b, d) = (alpha_frac * acc, b_frac * acc, acc * jerk_ratio * t);
            let exact = pos_peak(q, v, alpha, t, d, b);
            let sim = pos_peak_sim(q, v, alpha, t, d, b);
            proptest::prop_assert!((exact - sim).abs() < 1e-9 * (1.0 + sim.abs()), "{exact} vs {sim}");
            proptest::prop_assert!(pos_peak_bound(q, v, alpha, t, d, b) >= exact - 1e-12);
            let ve = vel_peak(v, alpha, t, d);
            proptest::prop_assert!((ve - vel_peak_sim(v, alpha, t, d)).abs() < 1e-9);
        }
    }

    #[test]
    fn velocity_inverse_is_the_largest_feasible_acceleration() {
        let (t, d) = (1e-3, 0.5);
        for &(v, v_max) in &[
            (0.0, 2.0),
            (1.9, 2.0),
            (2.0, 2.0),
            (-2.0, 2.0),
            (1.0, 1.0001),
            (2.5, 2.0),
        ] {
            let a = vel_peak_inverse(v, v_max, t, d);
            assert!(vel_peak(v, a, t, d) <= v_max, "v {v}");
            assert!(
                vel_peak(v, a + 1e-6, t, d) > v_max,
                "v {v}: {a} not the largest"
            );
        }
    }

    #[test]
    fn bisection_keeps_the_feasible_side() {
        let x = bisect_max(0.0, 10.0, |x| x * x <= 2.0);
        assert!(x * x <= 2.0 && (x - 2f64.sqrt()).abs() < 1e-3);
    }
}
