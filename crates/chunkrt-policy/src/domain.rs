//! The declared operating domain of a policy: per-dimension bounds and a Mahalanobis support
//! check against the training observations.
//!
//! [`Domain::check`] does not allocate (the Cholesky factor is computed at load, the solve
//! uses a stack buffer), so the permission gate may call it at control rate.

use crate::manifest::{DomainSpec, MAX_OBS};

/// Result of checking one observation vector against the declared domain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DomainVerdict {
    /// Inside the bounds and within the Mahalanobis threshold.
    Inside {
        /// Mahalanobis distance from the training mean.
        mahalanobis: f64,
    },
    /// A component outside its declared bounds.
    OutOfBounds {
        /// Index in the observation vector.
        dim: usize,
        /// The value.
        value: f64,
        /// Declared lower bound.
        min: f64,
        /// Declared upper bound.
        max: f64,
    },
    /// Inside the bounds but too far from the training data.
    OutOfSupport {
        /// Mahalanobis distance from the training mean.
        mahalanobis: f64,
        /// Declared threshold.
        max: f64,
    },
    /// A NaN or infinite component.
    NotFinite {
        /// Index in the observation vector.
        dim: usize,
    },
    /// The vector has the wrong length.
    WrongLength {
        /// Its length.
        got: usize,
        /// The domain's dimension.
        expected: usize,
    },
}

impl DomainVerdict {
    /// Whether the policy may keep authority.
    pub fn is_inside(&self) -> bool {
        matches!(self, DomainVerdict::Inside { .. })
    }
}

pub use crate::error::DomainError;

/// A ready-to-use declared operating domain.
#[derive(Clone, Debug, PartialEq)]
pub struct Domain {
    dim: usize,
    min: Vec<f64>,
    max: Vec<f64>,
    mean: Vec<f64>,
    /// Lower-triangular Cholesky factor L of (covariance + ridge I), row-major dim x dim.
    chol: Vec<f64>,
    mahalanobis_max: f64,
}

impl Domain {
    /// Factorises the regularised covariance.
    pub fn new(spec: &DomainSpec) -> Result<Domain, DomainError> {
        let n = spec.mean.len();
        if n == 0
            || n > MAX_OBS
            || spec.obs_min.len() != n
            || spec.obs_max.len() != n
            || spec.covariance.len() != n
            || spec.covariance.iter().any(|r| r.len() != n)
        {
            return Err(DomainError::Dims {
                d_obs: n,
                max: MAX_OBS,
            });
        }
        let mut l = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                // Symmetrise: use the mean of (i, j) and (j, i).
                let a = 0.5 * (spec.covariance[i][j] + spec.covariance[j][i])
                    + if i == j { spec.ridge } else { 0.0 };
                let mut s = a;
                for k in 0..j {
                    s -= l[i * n + k] * l[j * n + k];
                }
                if i == j {
                    if !(s > 0.0 && s.is_finite()) {
                        return Err(DomainError::NotPositiveDefinite { pivot: i, value: s });
                    }
                    l[i * n + i] = s.sqrt();
                } else {
                    l[i * n + j] = s / l[j * n + j];
                }
            }
        }
        Ok(Domain {
            dim: n,
            min: spec.obs_min.clone(),
            max: spec.obs_max.clone(),
            mean: spec.mean.clone(),
            chol: l,
            mahalanobis_max: spec.mahalanobis_max,
        })
    }

    /// Length of the observation vectors it checks.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The training observations' mean.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Mahalanobis distance of `obs` from the training mean (no bounds check).
    pub fn mahalanobis(&self, obs: &[f64]) -> f64 {
        let n = self.dim.min(obs.len());
        let mut y = [0.0f64; MAX_OBS];
        let mut d2 = 0.0;
        // Solve L y = (obs - mean); d^2 = |y|^2.
        for i in 0..n {
            let row = &self.chol[i * self.dim..i * self.dim + i];
            let s =
                obs[i] - self.mean[i] - row.iter().zip(&y[..i]).map(|(l, y)| l * y).sum::<f64>();
            y[i] = s / self.chol[i * self.dim + i];
            d2 += y[i] * y[i];
        }
        d2.sqrt()
    }

    /// Checks an observation vector (encoded as the manifest's `encoding.observation` says).
    pub fn check(&self, obs: &[f64]) -> DomainVerdict {
        if obs.len() != self.dim {
            return DomainVerdict::WrongLength {
                got: obs.len(),
                expected: self.dim,
            };
        }
        if let Some(dim) = obs.iter().position(|v| !v.is_finite()) {
            return DomainVerdict::NotFinite { dim };
        }
        if let Some(dim) = (0..self.dim).find(|&i| obs[i] < self.min[i] || obs[i] > self.max[i]) {
            return DomainVerdict::OutOfBounds {
                dim,
                value: obs[dim],
                min: self.min[dim],
                max: self.max[dim],
            };
        }
        let mahalanobis = self.mahalanobis(obs);
        if mahalanobis > self.mahalanobis_max {
            DomainVerdict::OutOfSupport {
                mahalanobis,
                max: self.mahalanobis_max,
            }
        } else {
            DomainVerdict::Inside { mahalanobis }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> DomainSpec {
        DomainSpec {
            obs_min: vec![-10.0, -10.0],
            obs_max: vec![10.0, 10.0],
            mean: vec![1.0, 2.0],
            ridge: 0.0,
            mahalanobis_max: 3.0,
            covariance: vec![vec![4.0, 1.0], vec![1.0, 1.0]],
        }
    }

    #[test]
    fn mahalanobis_matches_the_closed_form() {
        let d = Domain::new(&spec()).unwrap();
        // inv([[4,1],[1,1]]) = [[1,-1],[-1,4]] / 3; v = (1, 1) -> (1 - 2 + 4) / 3 = 1.
        let m = d.mahalanobis(&[2.0, 3.0]);
        assert!((m - 1.0).abs() < 1e-12, "{m}");
        assert!(d.check(&[2.0, 3.0]).is_inside());
    }

    #[test]
    fn verdicts_name_what_is_wrong() {
        let d = Domain::new(&spec()).unwrap();
        assert_eq!(
            d.check(&[11.0, 0.0]),
            DomainVerdict::OutOfBounds {
                dim: 0,
                value: 11.0,
                min: -10.0,
                max: 10.0
            }
        );
        assert_eq!(
            d.check(&[0.0, f64::NAN]),
            DomainVerdict::NotFinite { dim: 1 }
        );
        assert_eq!(
            d.check(&[0.0]),
            DomainVerdict::WrongLength {
                got: 1,
                expected: 2
            }
        );
        // Along the weak direction: (0, 5) from the mean -> d^2 = 4 * 25 / 3.
        match d.check(&[1.0, 7.0]) {
            DomainVerdict::OutOfSupport { mahalanobis, max } => {
                assert!((mahalanobis - (100.0f64 / 3.0).sqrt()).abs() < 1e-9);
                assert_eq!(max, 3.0);
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn refuses_an_indefinite_covariance() {
        let mut s = spec();
        s.covariance = vec![vec![1.0, 2.0], vec![2.0, 1.0]];
        assert!(matches!(
            Domain::new(&s),
            Err(DomainError::NotPositiveDefinite { pivot: 1, .. })
        ));
    }
}
