//! Seeded Gaussian noise for the samplers: ChaCha8 (rand_chacha) + Box-Muller.
//!
//! Written out (rather than taken from a distribution crate) so the stream is fixed by this
//! file alone: the same seed gives the same noise on every platform and crate version.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A reproducible stream of standard normal samples.
#[derive(Clone, Debug)]
pub struct GaussianNoise {
    rng: ChaCha8Rng,
}

impl GaussianNoise {
    /// A stream from a 64-bit seed.
    pub fn new(seed: u64) -> Self {
        GaussianNoise {
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// A uniform sample in (0, 1]: 53 random bits, never 0 (so `ln` is finite).
    fn uniform(&mut self) -> f64 {
        ((self.rng.next_u64() >> 11) as f64 + 1.0) * (1.0 / (1u64 << 53) as f64)
    }

    /// Fills `out` with independent N(0, 1) samples (pairs from one Box-Muller draw).
    pub fn fill(&mut self, out: &mut [f32]) {
        let mut chunks = out.chunks_mut(2);
        for pair in &mut chunks {
            let r = (-2.0 * self.uniform().ln()).sqrt();
            let phi = std::f64::consts::TAU * self.uniform();
            pair[0] = (r * phi.cos()) as f32;
            if pair.len() > 1 {
                pair[1] = (r * phi.sin()) as f32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_and_standard_normal() {
        let mut a = vec![0.0f32; 20_001];
        let mut b = vec![0.0f32; 20_001];
        GaussianNoise::new(7).fill(&mut a);
        GaussianNoise::new(7).fill(&mut b);
        assert_eq!(a, b);
        let n = a.len() as f64;
        let mean = a.iter().map(|v| *v as f64).sum::<f64>() / n;
        let var = a.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "var {var}");
        let mut c = vec![0.0f32; 4];
        GaussianNoise::new(8).fill(&mut c);
        assert_ne!(&a[..4], &c[..]);
    }
}
