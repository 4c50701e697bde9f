//! diffusers' DDPM and DDIM schedulers, as LeRobot's Diffusion Policy runs them.
//!
//! The arithmetic follows `DDPMScheduler.step` and `DDIMScheduler.step` of diffusers
//! (0.27 to 0.39: the math is unchanged) operation for operation in float32, so a model
//! trained and sampled in PyTorch samples the same here: the timestep lists of the three
//! `timestep_spacing`s, DDPM's "previous timestep" (the next one in the list) against
//! DDIM's (`t - T / n`, whatever the spacing), the three `prediction_type`s,
//! `clip_sample`, DDPM's variance types and DDIM's `eta`. The square roots are IEEE
//! `f32::sqrt`; PyTorch's vectorised one is off by one ulp on some inputs, which the golden
//! tests (`tests/lerobot_golden.rs`) bound.
//!
//! Buffers are allocated once ([`DiffusersScheduler::new`]); a sampler run allocates nothing.

use chunkrt_core::PolicyError;

use crate::error::SchedulerError;
use crate::sampler::Denoiser;

/// Which diffusers scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerType {
    /// `DDPMScheduler`: stochastic, one noise draw per step but the last.
    Ddpm,
    /// `DDIMScheduler`: deterministic at `eta = 0`.
    Ddim,
}

/// What the denoiser predicts (`prediction_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PredictionType {
    /// The noise.
    Epsilon,
    /// The clean sample.
    Sample,
    /// The velocity `v = sqrt(a) eps - sqrt(1 - a) x0`.
    VPrediction,
}

/// How the inference timesteps are spread over the training timesteps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestepSpacing {
    /// `arange(n) * (T / n)` reversed, plus `steps_offset` (diffusers' default, LeRobot's).
    Leading,
    /// `round(arange(T, 0, -T/n)) - 1`.
    Trailing,
    /// `round(linspace(0, T - 1, n))` reversed.
    Linspace,
}

/// DDPM's variance (`variance_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarianceType {
    /// The posterior variance (diffusers' default).
    FixedSmall,
    /// The posterior variance through `exp(0.5 log var)` (no square root).
    FixedSmallLog,
    /// The step's beta.
    FixedLarge,
}

/// A scheduler's settings, as a manifest states them.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerSettings {
    /// DDPM or DDIM.
    pub kind: SchedulerType,
    /// `alphas_cumprod` of the trained scheduler (float32 values), one per training step.
    pub alphas_cumprod: Vec<f32>,
    /// What the model predicts.
    pub prediction: PredictionType,
    /// `clip_sample_range` when `clip_sample` is on.
    pub clip: Option<f32>,
    /// Timestep spacing.
    pub spacing: TimestepSpacing,
    /// Added to the `leading` timesteps.
    pub steps_offset: usize,
    /// DDPM's variance.
    pub variance: VarianceType,
    /// DDIM: the last step's `alpha_prod_prev` is 1 (else `alphas_cumprod[0]`).
    pub set_alpha_to_one: bool,
    /// DDIM's eta (0: deterministic).
    pub eta: f32,
}

impl SchedulerSettings {
    /// Checks the settings for `steps` inference steps; the message names the key.
    pub fn check(&self, steps: usize) -> Result<(), SchedulerError> {
        let t = self.alphas_cumprod.len();
        if t == 0 {
            return Err(SchedulerError::Empty);
        }
        if let Some(i) = self
            .alphas_cumprod
            .iter()
            .position(|a| !(*a > 0.0 && *a <= 1.0))
        {
            return Err(SchedulerError::Alpha {
                index: i,
                value: self.alphas_cumprod[i],
            });
        }
        if steps == 0 || steps > t {
            return Err(SchedulerError::Steps {
                steps,
                train_timesteps: t,
            });
        }
        if let Some(c) = self.clip {
            if !(c.is_finite() && c > 0.0) {
                return Err(SchedulerError::Clip(c));
            }
        }
        if !(self.eta.is_finite() && self.eta >= 0.0) {
            return Err(SchedulerError::Eta(self.eta));
        }
        if self.kind == SchedulerType::Ddpm && self.eta != 0.0 {
            return Err(SchedulerError::EtaOnDdpm);
        }
        let mut ts = vec![0usize; t];
        let n = self.timesteps_into(steps, &mut ts);
        if let Some(bad) = ts[..n].iter().find(|s| **s >= t) {
            return Err(SchedulerError::PastSchedule {
                timestep: *bad,
                steps,
                spacing: match self.spacing {
                    TimestepSpacing::Leading => "Leading",
                    TimestepSpacing::Trailing => "Trailing",
                    TimestepSpacing::Linspace => "Linspace",
                },
                steps_offset: self.steps_offset,
                train_timesteps: t,
            });
        }
        Ok(())
    }

    /// The inference timesteps for `n` steps into `out` (at least `n` long), as
    /// `set_timesteps(n)` computes them; returns how many were written (`n`).
    pub fn timesteps_into(&self, n: usize, out: &mut [usize]) -> usize {
        let t = self.alphas_cumprod.len();
        let n = n.clamp(1, t.max(1));
        match self.spacing {
            TimestepSpacing::Leading => {
                let ratio = t / n;
                for (i, o) in out.iter_mut().take(n).enumerate() {
                    *o = (n - 1 - i) * ratio + self.steps_offset;
                }
            }
            TimestepSpacing::Trailing => {
                // np.round(np.arange(T, 0, -T / n)) - 1: arange computes start + i * step.
                let step = -(t as f64 / n as f64);
                for (i, o) in out.iter_mut().take(n).enumerate() {
                    let v = (t as f64 + i as f64 * step).round_ties_even();
                    *o = (v as i64 - 1).max(0) as usize;
                }
            }
            TimestepSpacing::Linspace => {
                // np.linspace(0, T - 1, n).round()[::-1]: start + i * step, the last point
                // exactly T - 1.
                let stop = (t - 1) as f64;
                for (i, o) in out.iter_mut().take(n).enumerate() {
                    let k = n - 1 - i;
                    let v = if n == 1 {
                        0.0
                    } else if k == n - 1 {
                        stop
                    } else {
                        k as f64 * (stop / (n - 1) as f64)
                    };
                    *o = v.round_ties_even() as usize;
                }
            }
        }
        n
    }
}

/// A scheduler with its buffers, ready to sample.
#[derive(Clone, Debug)]
pub struct DiffusersScheduler {
    settings: SchedulerSettings,
    timesteps: Vec<usize>,
    model_out: Vec<f32>,
    noise: Vec<f32>,
}

/// Where a scheduler's per-step noise comes from: fills its argument with N(0, 1) values.
pub type NoiseSource<'a> = &'a mut dyn FnMut(&mut [f32]);

impl DiffusersScheduler {
    /// A scheduler for samples of `len` values (settings checked by the caller).
    pub fn new(settings: SchedulerSettings, len: usize) -> Self {
        let t = settings.alphas_cumprod.len();
        DiffusersScheduler {
            settings,
            timesteps: vec![0; t.max(1)],
            model_out: vec![0.0; len],
            noise: vec![0.0; len],
        }
    }

    /// The settings.
    pub fn settings(&self) -> &SchedulerSettings {
        &self.settings
    }

    /// Training timesteps T (the most inference steps).
    pub fn train_timesteps(&self) -> usize {
        self.settings.alphas_cumprod.len()
    }

    /// Runs `steps` steps from the initial noise in `x` (the sample is left there):
    /// for each timestep the denoiser's output, then the scheduler's step. `noise` supplies
    /// the steps' noise in diffusers' order (DDPM: every step with `t > 0`; DDIM with
    /// `eta > 0`: every step). `after_step` is called after each step.
    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        &mut self,
        steps: usize,
        den: &mut dyn Denoiser,
        obs_n: &[f32],
        x: &mut [f32],
        noise: NoiseSource<'_>,
        after_step: &mut dyn FnMut(usize),
    ) -> Result<(), PolicyError> {
        let n = self.settings.timesteps_into(steps, &mut self.timesteps);
        for s in 0..n {
            let t = self.timesteps[s];
            den.denoise(obs_n, x, t as f32, &mut self.model_out)?;
            let prev = match self.settings.kind {
                SchedulerType::Ddpm => self.timesteps.get(s + 1).filter(|_| s + 1 < n).copied(),
                SchedulerType::Ddim => {
                    let p = t as i64 - (self.train_timesteps() / n) as i64;
                    (p >= 0).then_some(p as usize)
                }
            };
            step(
                &self.settings,
                t,
                prev,
                &self.model_out,
                x,
                &mut self.noise,
                noise,
            );
            after_step(s);
        }
        Ok(())
    }
}

/// One scheduler step in place on `x`, from the model output `m` at timestep `t` toward
/// `prev` (`None`: past the end). `z` is scratch for the step's noise.
pub fn step(
    st: &SchedulerSettings,
    t: usize,
    prev: Option<usize>,
    m: &[f32],
    x: &mut [f32],
    z: &mut [f32],
    noise: NoiseSource<'_>,
) {
    let acp = &st.alphas_cumprod;
    let a_t = acp[t];
    let b_t = 1.0 - a_t;
    let (sa_t, sb_t) = (a_t.sqrt(), b_t.sqrt());
    let clip = |v: f32| match st.clip {
        Some(r) => v.clamp(-r, r),
        None => v,
    };
    match st.kind {
        SchedulerType::Ddpm => {
            let a_p = prev.map_or(1.0, |p| acp[p]);
            let b_p = 1.0 - a_p;
            let ca = a_t / a_p;
            let cb = 1.0 - ca;
            let c0 = (a_p.sqrt() * cb) / b_t;
            let cs = (ca.sqrt() * b_p) / b_t;
            for (xi, mi) in x.iter_mut().zip(m) {
                let x0 = match st.prediction {
                    PredictionType::Epsilon => (*xi - sb_t * mi) / sa_t,
                    PredictionType::Sample => *mi,
                    PredictionType::VPrediction => sa_t * *xi - sb_t * mi,
                };
                *xi = c0 * clip(x0) + cs * *xi;
            }
            if t > 0 {
                let var = ((b_p / b_t) * cb).max(1e-20);
                let scale = match st.variance {
                    VarianceType::FixedSmall => var.sqrt(),
                    VarianceType::FixedSmallLog => (0.5 * var.ln()).exp(),
                    VarianceType::FixedLarge => cb.sqrt(),
                };
                noise(z);
                for (xi, zi) in x.iter_mut().zip(z.iter()) {
                    *xi += scale * zi;
                }
            }
        }
        SchedulerType::Ddim => {
            let a_p = match prev {
                Some(p) => acp[p],
                None if st.set_alpha_to_one => 1.0,
                None => acp[0],
            };
            let b_p = 1.0 - a_p;
            let var = (b_p / b_t) * (1.0 - a_t / a_p);
            let std = st.eta * var.sqrt();
            let dir = (1.0 - a_p - std * std).sqrt();
            let sa_p = a_p.sqrt();
            for (xi, mi) in x.iter_mut().zip(m) {
                let (x0, e) = match st.prediction {
                    PredictionType::Epsilon => ((*xi - sb_t * mi) / sa_t, *mi),
                    PredictionType::Sample => (*mi, (*xi - sa_t * mi) / sb_t),
                    PredictionType::VPrediction => (sa_t * *xi - sb_t * mi, sa_t * mi + sb_t * *xi),
                };
                *xi = sa_p * clip(x0) + dir * e;
            }
            if st.eta > 0.0 {
                noise(z);
                for (xi, zi) in x.iter_mut().zip(z.iter()) {
                    *xi += std * zi;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(kind: SchedulerType, spacing: TimestepSpacing) -> SchedulerSettings {
        SchedulerSettings {
            kind,
            alphas_cumprod: vec![0.5; 100],
            prediction: PredictionType::Epsilon,
            clip: Some(1.0),
            spacing,
            steps_offset: 0,
            variance: VarianceType::FixedSmall,
            set_alpha_to_one: true,
            eta: 0.0,
        }
    }

    fn ts(s: &SchedulerSettings, n: usize) -> Vec<usize> {
        let mut out = vec![0; n];
        s.timesteps_into(n, &mut out);
        out
    }

    /// The lists diffusers' `set_timesteps` gives (T = 100), as printed by diffusers 0.39.
    #[test]
    fn timesteps_match_diffusers_set_timesteps() {
        let lead = settings(SchedulerType::Ddpm, TimestepSpacing::Leading);
        assert_eq!(ts(&lead, 10), vec![90, 80, 70, 60, 50, 40, 30, 20, 10, 0]);
        assert_eq!(ts(&lead, 7), vec![84, 70, 56, 42, 28, 14, 0]);
        let trail = settings(SchedulerType::Ddpm, TimestepSpacing::Trailing);
        assert_eq!(ts(&trail, 10), vec![99, 89, 79, 69, 59, 49, 39, 29, 19, 9]);
        let lin = settings(SchedulerType::Ddpm, TimestepSpacing::Linspace);
        assert_eq!(ts(&lin, 10), vec![99, 88, 77, 66, 55, 44, 33, 22, 11, 0]);
        assert_eq!(ts(&lead, 100), (0..100).rev().collect::<Vec<_>>());
    }
}
