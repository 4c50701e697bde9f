//! Low-pass projection of a sampled chunk onto low-degree polynomials of time.
//!
//! A sampler run with few steps leaves some of the initial noise in the chunk, independently
//! per setpoint: a chunk that is smooth in the mean but jittery from setpoint to setpoint
//! (accelerations of hundreds of rad/s² on the bundled models). Demonstrated motion is
//! smooth, so the policy projects each joint's deltas (least squares) onto the polynomials of
//! degree below `modes` over the horizon, which removes the jitter and keeps the motion.
//! Polynomials rather than cosines: they put no constraint on the slope at the ends, so an
//! arm already moving at setpoint 0 keeps its start. Off with `modes = 0`.

/// Precomputed projection `P = B Bᵀ` onto `modes` discrete orthonormal polynomials.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkSmoother {
    horizon: usize,
    proj: Vec<f64>,
    scratch: Vec<f64>,
}

impl ChunkSmoother {
    /// A smoother for chunks of `horizon` setpoints keeping `modes` modes (`None` when
    /// `modes` is 0 or not below `horizon`: nothing to remove).
    pub fn new(horizon: usize, modes: usize) -> Option<Self> {
        if modes == 0 || modes >= horizon {
            return None;
        }
        // Orthonormal polynomials on the grid t_i in [-1, 1] (modified Gram-Schmidt on
        // monomials; well conditioned for the few low degrees used here).
        let t: Vec<f64> = (0..horizon)
            .map(|i| 2.0 * i as f64 / (horizon - 1) as f64 - 1.0)
            .collect();
        let mut basis: Vec<Vec<f64>> = Vec::with_capacity(modes);
        for k in 0..modes {
            let mut v: Vec<f64> = t.iter().map(|x| x.powi(k as i32)).collect();
            for b in &basis {
                let d: f64 = v.iter().zip(b).map(|(x, y)| x * y).sum();
                v.iter_mut().zip(b).for_each(|(x, y)| *x -= d * y);
            }
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
            v.iter_mut().for_each(|x| *x /= norm);
            basis.push(v);
        }
        let mut proj = vec![0.0; horizon * horizon];
        for i in 0..horizon {
            for j in 0..horizon {
                proj[i * horizon + j] = basis.iter().map(|b| b[i] * b[j]).sum();
            }
        }
        Some(ChunkSmoother {
            horizon,
            proj,
            scratch: vec![0.0; horizon],
        })
    }

    /// Smooths `values` (row-major `horizon x dof`) in place, joint by joint, as deltas
    /// from `origin` (one value per joint). Allocates nothing.
    pub fn apply(&mut self, values: &mut [f64], dof: usize, origin: &[f64]) {
        let h = self.horizon;
        for j in 0..dof {
            for i in 0..h {
                let mut acc = 0.0;
                for k in 0..h {
                    acc += self.proj[i * h + k] * (values[k * dof + j] - origin[j]);
                }
                self.scratch[i] = acc;
            }
            for i in 0..h {
                values[i * dof + j] = origin[j] + self.scratch[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_slow_motion_and_removes_setpoint_jitter() {
        let h = 32;
        let mut s = ChunkSmoother::new(h, 6).unwrap();
        // A smooth ramp-and-settle plus alternating jitter of 0.01 rad.
        let smooth: Vec<f64> = (0..h)
            .map(|i| 0.5 * (1.0 - (-(i as f64) / 10.0).exp()))
            .collect();
        let mut v: Vec<f64> = smooth
            .iter()
            .enumerate()
            .map(|(i, x)| x + if i % 2 == 0 { 0.01 } else { -0.01 })
            .collect();
        s.apply(&mut v, 1, &[0.0]);
        let worst = v
            .iter()
            .zip(&smooth)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst < 0.006, "smoothed error {worst}");
        let jitter: f64 = (1..h - 1)
            .map(|i| (v[i + 1] - 2.0 * v[i] + v[i - 1]).abs())
            .fold(0.0, f64::max);
        assert!(jitter < 0.005, "second difference {jitter}");
        assert!(ChunkSmoother::new(h, 0).is_none() && ChunkSmoother::new(h, h).is_none());
    }
}
