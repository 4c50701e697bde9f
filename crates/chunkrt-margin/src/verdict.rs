//! Stability verdicts from the loop's free response: after the probe stops, the
//! loop's own transient either decays (stable), grows (unstable), or changes too
//! little within the window to tell (undetermined: run longer).
//!
//! A phase margin read off `L(jw)` is only meaningful for a stable loop; near the
//! delay margin an unstable loop's growth is slow enough that a DFT window takes a
//! growing transient for a forced response and returns a small positive "margin".
//! The verdict looks at the envelope instead: the peak of `|x|` in each of
//! [`BLOCKS`] equal blocks of the free response, and the least-squares growth rate
//! of their logarithm. Blocks at or below the noise floor are left out (a transient
//! that has died into the noise is decaying, not flat).

/// Blocks the free response is split into.
pub const BLOCKS: usize = 16;

/// What the envelope says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stability {
    /// The free response decayed by at least half within the window (or into the
    /// noise floor).
    Stable,
    /// The free response grew by at least twice within the window, or diverged.
    Unstable,
    /// Neither within the window: it takes about `run_longer_s` of free response to
    /// tell.
    Undetermined {
        /// Free-response time that would change the envelope by a factor of two
        /// at the growth rate measured.
        run_longer_s: f64,
    },
}

impl Stability {
    /// A short word for tables and JSON: `stable`, `unstable`, `undetermined`.
    pub fn word(&self) -> &'static str {
        match self {
            Stability::Stable => "stable",
            Stability::Unstable => "unstable",
            Stability::Undetermined { .. } => "undetermined",
        }
    }

    /// What a table prints where a margin would stand: `unstable`, or
    /// `undetermined (run longer: N s)`.
    pub fn explain(&self) -> String {
        match self {
            Stability::Stable => "stable".into(),
            Stability::Unstable => "unstable".into(),
            Stability::Undetermined { run_longer_s } => {
                format!("undetermined (run longer: {run_longer_s:.0} s)")
            }
        }
    }
}

/// The verdict and the growth rate it rests on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict {
    /// Stable, unstable or undetermined.
    pub stability: Stability,
    /// Least-squares growth rate of the envelope (1/s; negative: decaying).
    pub growth_per_s: f64,
    /// The envelope's first and last block peaks above the floor (the same unit as
    /// the samples).
    pub first_peak: f64,
    /// See `first_peak`.
    pub last_peak: f64,
}

/// Judges the free response `x` (deviations from the loop's rest point, one sample
/// every `dt_s`; its first block may hold the end of the forced response) against a
/// `floor` (same unit; the envelope below it is not judged). The largest block peak
/// of the last third of the window against that of the first third (block 0
/// left out): grown at least twice, unstable; fallen at least by half, stable; in
/// between, a sustained oscillation above `sustained_limit` is unstable (a limit
/// cycle: the loop hunts on its own after the probe is gone), anything else
/// undetermined, with the time the measured growth rate would need to change the
/// envelope twofold. `diverged` forces `Unstable`.
pub fn envelope_verdict(
    x: &[f64],
    dt_s: f64,
    floor: f64,
    sustained_limit: f64,
    diverged: bool,
) -> Verdict {
    let unstable = Verdict {
        stability: Stability::Unstable,
        growth_per_s: f64::INFINITY,
        first_peak: 0.0,
        last_peak: f64::INFINITY,
    };
    if diverged || x.iter().any(|v| !v.is_finite()) {
        return unstable;
    }
    let block = x.len() / BLOCKS;
    if block == 0 {
        return Verdict {
            stability: Stability::Undetermined {
                run_longer_s: BLOCKS as f64 * dt_s,
            },
            growth_per_s: 0.0,
            first_peak: 0.0,
            last_peak: 0.0,
        };
    }
    let window_s = (block * BLOCKS) as f64 * dt_s;
    let peak_of = |b: usize| {
        x[b * block..(b + 1) * block]
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()))
    };
    let peaks: Vec<(f64, f64)> = (1..BLOCKS)
        .map(|b| ((b as f64 + 0.5) * block as f64 * dt_s, peak_of(b)))
        .collect();
    let third = peaks.len() / 3;
    let first = peaks[..third].iter().fold(0.0f64, |m, p| m.max(p.1));
    let last = peaks[peaks.len() - third..]
        .iter()
        .fold(0.0f64, |m, p| m.max(p.1));
    // Growth rate over the blocks above the floor (for the report and for how much
    // longer an undecided run needs).
    let above: Vec<(f64, f64)> = peaks.iter().copied().filter(|p| p.1 > floor).collect();
    let sigma = growth_rate(&above);
    let undetermined = Stability::Undetermined {
        run_longer_s: (core::f64::consts::LN_2 / sigma.abs().max(1e-6))
            .min(3600.0)
            .max(2.0 * window_s),
    };
    let stability = if first <= floor && last <= floor {
        // Quiet from block 1 on: stable if there was a response to go quiet after.
        if peak_of(0) > floor {
            Stability::Stable
        } else {
            undetermined
        }
    } else if last >= 2.0 * first.max(floor) {
        Stability::Unstable
    } else if last <= 0.5 * first {
        Stability::Stable
    } else if last > sustained_limit {
        Stability::Unstable
    } else {
        undetermined
    };
    Verdict {
        stability,
        growth_per_s: sigma,
        first_peak: first,
        last_peak: last,
    }
}

/// Least-squares slope of `ln(peak)` against time over `(t_s, peak)` pairs (1/s);
/// 0 with fewer than two points or no spread in time.
fn growth_rate(peaks: &[(f64, f64)]) -> f64 {
    if peaks.len() < 2 {
        return 0.0;
    }
    let n = peaks.len() as f64;
    let mt = peaks.iter().map(|p| p.0).sum::<f64>() / n;
    let ml = peaks.iter().map(|p| p.1.ln()).sum::<f64>() / n;
    let stt: f64 = peaks.iter().map(|p| (p.0 - mt).powi(2)).sum();
    let stl: f64 = peaks.iter().map(|p| (p.0 - mt) * (p.1.ln() - ml)).sum();
    if stt > 0.0 {
        stl / stt
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ringing(sigma: f64, secs: f64) -> Vec<f64> {
        let dt = 1e-3;
        (0..(secs / dt) as usize)
            .map(|k| {
                let t = k as f64 * dt;
                (sigma * t).exp() * (2.0 * core::f64::consts::PI * 3.0 * t).sin()
            })
            .collect()
    }

    #[test]
    fn growth_rate_is_the_exponent_of_an_exact_exponential() {
        let peaks: Vec<(f64, f64)> = (0..10)
            .map(|k| {
                let t = 0.3 * k as f64;
                (t, 1e-3 * (0.7 * t).exp())
            })
            .collect();
        assert!((growth_rate(&peaks) - 0.7).abs() < 1e-9);
        let decaying: Vec<(f64, f64)> = peaks.iter().map(|p| (p.0, 1.0 / p.1)).collect();
        assert!((growth_rate(&decaying) + 0.7).abs() < 1e-9);
        assert_eq!(growth_rate(&peaks[..1]), 0.0);
        assert_eq!(growth_rate(&[(1.0, 2.0), (1.0, 3.0)]), 0.0);
    }

    #[test]
    fn growth_decay_and_doubt_are_told_apart() {
        let dt = 1e-3;
        assert_eq!(
            envelope_verdict(&ringing(0.3, 10.0), dt, 1e-9, 10.0, false).stability,
            Stability::Unstable
        );
        assert_eq!(
            envelope_verdict(&ringing(-0.3, 10.0), dt, 1e-9, 10.0, false).stability,
            Stability::Stable
        );
        let slow = envelope_verdict(&ringing(0.02, 10.0), dt, 1e-9, 10.0, false);
        match slow.stability {
            Stability::Undetermined { run_longer_s } => {
                assert!((run_longer_s - 34.7).abs() < 5.0, "{run_longer_s}")
            }
            other => panic!("{other:?}"),
        }
        assert!((slow.growth_per_s - 0.02).abs() < 0.01, "{slow:?}");
        // A transient that dies into the noise within the window is stable, even
        // though the noise itself does not decay.
        let mut x = ringing(-8.0, 10.0);
        for (k, v) in x.iter_mut().enumerate() {
            *v += 1e-4 * ((k * 7919 % 1000) as f64 / 500.0 - 1.0);
        }
        assert_eq!(
            envelope_verdict(&x, dt, 3e-4, 10.0, false).stability,
            Stability::Stable
        );
        // A sustained ring well above the limit is a limit cycle: unstable.
        assert_eq!(
            envelope_verdict(&ringing(0.0, 10.0), dt, 1e-9, 0.5, false).stability,
            Stability::Unstable
        );
        // Noise alone, nothing to judge.
        let noise: Vec<f64> = (0..10_000)
            .map(|k| 1e-4 * ((k * 7919 % 1000) as f64 / 500.0 - 1.0))
            .collect();
        assert!(matches!(
            envelope_verdict(&noise, dt, 3e-4, 10.0, false).stability,
            Stability::Undetermined { .. }
        ));
        assert_eq!(
            envelope_verdict(&ringing(-0.3, 10.0), dt, 1e-9, 10.0, true).stability,
            Stability::Unstable
        );
    }
}
