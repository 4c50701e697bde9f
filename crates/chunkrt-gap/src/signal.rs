//! The arithmetic of the channels: one DFT bin over a window, the mean, and the
//! two-sample Kolmogorov-Smirnov distance.

/// A complex number as (re, im).
pub type Cx = (f64, f64);

/// The DFT bin of `x` (sampled at times `t`, s) at `f_hz`, after its mean is taken
/// out: `sum (x_n - mean) e^{-i 2 pi f t_n}`. Over a whole number of periods of `f`
/// on a uniform grid the other probe components and a constant leave nothing in it.
pub fn bin(t: &[f64], x: &[f64], f_hz: f64) -> Cx {
    let m = mean(x);
    let w = 2.0 * std::f64::consts::PI * f_hz;
    t.iter().zip(x).fold((0.0, 0.0), |(re, im), (&t, &x)| {
        let (s, c) = (w * t).sin_cos();
        (re + (x - m) * c, im - (x - m) * s)
    })
}

/// `a / b`.
pub fn div(a: Cx, b: Cx) -> Cx {
    let d = b.0 * b.0 + b.1 * b.1;
    ((a.0 * b.0 + a.1 * b.1) / d, (a.1 * b.0 - a.0 * b.1) / d)
}

/// `|z|`.
pub fn abs(z: Cx) -> f64 {
    z.0.hypot(z.1)
}

/// The phase lag of `z` in degrees, `-arg z`, in (-180, 180].
pub fn lag_deg(z: Cx) -> f64 {
    -z.1.atan2(z.0).to_degrees()
}

/// `a - b` in degrees, wrapped into (-180, 180].
pub fn wrap_deg(d: f64) -> f64 {
    let w = d.rem_euclid(360.0);
    if w > 180.0 {
        w - 360.0
    } else {
        w
    }
}

/// `x` with `a x = b` (Cramer's rule); `None` when `a` is singular.
pub fn solve3(a: [[f64; 3]; 3], b: [f64; 3]) -> Option<[f64; 3]> {
    let det = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let d = det(a);
    let scale = a.iter().flatten().fold(0.0f64, |s, x| s.max(x.abs()));
    if d.is_nan() || d.abs() <= 1e-12 * scale.powi(3) {
        return None;
    }
    let mut x = [0.0; 3];
    for (k, xk) in x.iter_mut().enumerate() {
        let mut m = a;
        for r in 0..3 {
            m[r][k] = b[r];
        }
        *xk = det(m) / d;
    }
    Some(x)
}

/// The mean (0 for no values).
pub fn mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        0.0
    } else {
        x.iter().sum::<f64>() / x.len() as f64
    }
}

/// The two-sample Kolmogorov-Smirnov distance: the largest gap between the two
/// empirical distribution functions (0: the same, 1: apart). Empty samples: 0.
pub fn ks_distance(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let sorted = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s
    };
    let (a, b) = (sorted(a), sorted(b));
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut i, mut k, mut d) = (0, 0, 0.0f64);
    while i < a.len() && k < b.len() {
        let x = a[i].min(b[k]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while k < b.len() && b[k] <= x {
            k += 1;
        }
        d = d.max((i as f64 / na - k as f64 / nb).abs());
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bin_reads_a_known_gain_and_delay_and_ignores_the_other_components() {
        // 1 kHz, 2 s; x at 2 and 5 Hz, y = x delayed 8 ms and halved, plus an offset.
        let t: Vec<f64> = (0..2000).map(|n| n as f64 * 1e-3).collect();
        let x = |t: f64| {
            (2.0 * std::f64::consts::PI * 2.0 * t).sin() + (10.0 * std::f64::consts::PI * t).cos()
        };
        let xs: Vec<f64> = t.iter().map(|&t| x(t)).collect();
        let ys: Vec<f64> = t.iter().map(|&t| 0.3 + 0.5 * x(t - 0.008)).collect();
        let h = div(bin(&t, &ys, 5.0), bin(&t, &xs, 5.0));
        assert!((abs(h) - 0.5).abs() < 1e-9, "{h:?}");
        assert!((lag_deg(h) - 14.4).abs() < 1e-6, "{}", lag_deg(h));
    }

    #[test]
    fn solve3_solves_and_refuses_a_singular_system() {
        let a = [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]];
        let x = [1.0, -2.0, 0.5];
        let b = [0, 1, 2].map(|r| (0..3).map(|c| a[r][c] * x[c]).sum::<f64>());
        let got = solve3(a, b).unwrap();
        for k in 0..3 {
            assert!((got[k] - x[k]).abs() < 1e-12, "{got:?}");
        }
        assert!(solve3([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]], b).is_none());
    }

    #[test]
    fn ks_distance_of_the_same_sample_is_zero_of_disjoint_ones_one() {
        let a = [0.0, 1.0, 2.0, 3.0];
        assert_eq!(ks_distance(&a, &a), 0.0);
        assert_eq!(ks_distance(&a, &[10.0, 11.0]), 1.0);
        // Half of b below every a: the functions part by 0.5 there.
        assert_eq!(ks_distance(&a, &[-1.0, 5.0]), 0.5);
        assert_eq!(wrap_deg(350.0), -10.0);
        assert_eq!(wrap_deg(-190.0), 170.0);
    }
}
