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
//!
//! [`stop_peak`] is not a safety rule but the gate's approach to a proposal it
//! cannot reach at once: a stop that ends at rest (its acceleration swung back to
//! zero) rather than at full deceleration, so that the gate can steer by it onto a
//! held position without stopping short or overshooting.

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

/// Velocity change while the acceleration `a` is swung back to 0 by `d` per
/// period (the last period reaches 0 and adds nothing): the velocity a stop must
/// keep in hand to end at rest rather than at full deceleration.
pub(crate) fn ramp_out(a: f64, t: f64, d: f64) -> f64 {
    let m = (a.abs() / d).ceil().max(1.0) - 1.0;
    t * (m * a - a.signum() * d * m * (m + 1.0) * 0.5)
}

/// State after `i` periods of a swing from `(q, v, a)` with accelerations
/// `a + s k d`, `k = 1..=i` (`s` = +-1): closed-form sums of the triple integrator.
fn swing(q: f64, v: f64, a: f64, s: f64, d: f64, t: f64, i: f64) -> (f64, f64, f64) {
    let tri = i * (i + 1.0) * 0.5;
    (
        q + t * (i * v + t * (a * tri + s * d * tri * (i + 2.0) / 3.0)),
        v + t * (i * a + s * d * tri),
        a + s * d * i,
    )
}

/// Smallest integer `i` in `(lo, hi]` with `pred(i)`, given `!pred(lo)`, `pred(hi)`
/// and a monotone `pred` (bounded: 64 halvings cover any float range).
fn first_true(mut lo: f64, mut hi: f64, pred: impl Fn(f64) -> bool) -> f64 {
    for _ in 0..64 {
        if hi - lo <= 1.0 {
            break;
        }
        let mid = (0.5 * (lo + hi)).floor();
        if pred(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Highest position of the final swing of [`stop_peak`]: from `(q, v, a)` the
/// acceleration returns to 0 by `d` per period (the last period reaches 0).
fn ramp_out_peak(q: f64, v: f64, a: f64, t: f64, d: f64, mut peak: f64) -> f64 {
    if a == 0.0 {
        return peak;
    }
    let s = -a.signum();
    let m = (a.abs() / d).ceil().max(1.0);
    // Periods 1..m-1 follow the swing; the m-th ends at zero acceleration.
    let (qm, vm, _) = swing(q, v, a, s, d, t, m - 1.0);
    if a < 0.0 && v > 0.0 {
        // The velocity falls: the position rises up to the last period with v > 0.
        let last = if vm > 0.0 {
            m - 1.0
        } else {
            first_true(0.0, m - 1.0, |i| swing(q, v, a, s, d, t, i).1 <= 0.0) - 1.0
        };
        peak = peak.max(swing(q, v, a, s, d, t, last).0);
    }
    peak.max(qm).max(qm + vm * t)
}

/// Highest position reached after choosing `alpha` for the next period and then
/// stopping as a time-optimal jerk-limited stop does in discrete time: the
/// acceleration swung toward `-b` by `d` per period and held there while the
/// velocity exceeds what the swing back to zero acceleration ([`ramp_out`]) will
/// shed, then swung back to 0. Unlike [`pos_peak`] (the limits' braking rule, which
/// ends at full deceleration and so stops well short of where it could with a slow
/// jerk) this one ends at rest, within about one period's velocity step, which is
/// what lets the gate land on a held proposal in close to minimum time.
///
/// O(log) in the number of periods: the swings and the constant phase are summed in
/// closed form and the switching periods found by integer bisection on quantities
/// that are monotone along the stop (the velocity the stop would end with if it
/// swung back now never rises while braking; the velocity falls while the
/// acceleration is negative).
pub(crate) fn stop_peak(q: f64, v: f64, alpha: f64, t: f64, d: f64, b: f64) -> f64 {
    let v1 = v + alpha * t;
    let q1 = q + v1 * t;
    let mut peak = q1;
    let (mut q, mut v, mut a) = (q1, v1, alpha);
    if a != -b {
        // Swing toward -b; `n` periods, the last one clipped to -b.
        let s = if a > -b { -1.0 } else { 1.0 };
        let n = ((a + b).abs() / d).ceil().max(1.0);
        let ends_with = |i: f64| {
            let (_, vi, ai) = swing(q, v, a, s, d, t, i);
            vi + ramp_out(ai, t, d)
        };
        if ends_with(0.0) <= 0.0 {
            return ramp_out_peak(q, v, a, t, d, peak);
        }
        if ends_with(n - 1.0) <= 0.0 {
            // Switch inside the swing. Before it the position only falls while the
            // acceleration is still positive (the velocity is positive wherever the
            // stop still has velocity to shed with a <= 0), so its highest point is
            // at the start or one of the last two periods.
            let i = first_true(0.0, n - 1.0, |i| ends_with(i) <= 0.0);
            let (qp, _, _) = swing(q, v, a, s, d, t, i - 1.0);
            let (qi, vi, ai) = swing(q, v, a, s, d, t, i);
            return ramp_out_peak(qi, vi, ai, t, d, peak.max(qp).max(qi));
        }
        let (qi, vi, _) = swing(q, v, a, s, d, t, n - 1.0);
        a = -b;
        v = vi + a * t;
        q = qi + v * t;
        peak = peak.max(qi).max(q);
    }
    let r = ramp_out(-b, t, d);
    if v + r > 0.0 {
        // Constant -b for `n` periods, while v + r > 0 before each.
        let bt = b * t;
        let n = ((v + r) / bt).ceil();
        let (qi, vi, _) = swing(q, v, -b, 1.0, 0.0, t, n - 1.0);
        v = vi - bt;
        q = qi + v * t;
        peak = peak.max(qi).max(q);
    }
    ramp_out_peak(q, v, -b, t, d, peak)
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

    /// Step-by-step simulation of the stop rule of [`stop_peak`] (no closed form).
    fn stop_peak_sim(q: f64, v: f64, alpha: f64, t: f64, d: f64, b: f64) -> (f64, f64, f64) {
        let (mut a, mut v) = (alpha, v + alpha * t);
        let mut q = q + v * t;
        let mut peak = q;
        let mut out = false;
        for _ in 0..10_000_000 {
            out = out || v + ramp_out(a, t, d) <= 0.0;
            if out && a == 0.0 {
                break;
            }
            a = if out {
                if a < 0.0 {
                    (a + d).min(0.0)
                } else {
                    (a - d).max(0.0)
                }
            } else if a > -b {
                (a - d).max(-b)
            } else {
                (a + d).min(-b)
            };
            v += a * t;
            q += v * t;
            peak = peak.max(q);
        }
        (peak, v, a)
    }

    proptest::proptest! {
        #[test]
        fn stop_peak_matches_its_rule_and_ends_at_rest(
            v in -3.0f64..3.0,
            acc in 1.0f64..20.0,
            alpha_frac in -1.0f64..1.0,
            jerk_ratio in 5.0f64..500.0,
            t in proptest::sample::select(vec![1e-3, 2e-3, 4e-3, 1e-2, 2e-2]),
        ) {
            let (alpha, b, d) = (alpha_frac * acc, acc, acc * jerk_ratio * t);
            let exact = stop_peak(0.0, v, alpha, t, d, b);
            let (sim, v_end, a_end) = stop_peak_sim(0.0, v, alpha, t, d, b);
            proptest::prop_assert!((exact - sim).abs() < 1e-9 * (1.0 + sim.abs()), "{exact} vs {sim}");
            // Ends at rest (zero acceleration), never still moving up, and with at
            // most the velocity of one period's swing left over.
            proptest::prop_assert!(a_end == 0.0);
            proptest::prop_assert!(v_end <= 1e-12, "v_end {v_end}");
            // When the stop has velocity to shed at all, it sheds it within a
            // period's steps of exactly zero.
            if v + alpha * t + ramp_out(alpha, t, d) > 0.0 {
                proptest::prop_assert!(v_end >= -2.0 * (b + d) * t - 1e-12, "v_end {v_end}");
            }
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
