//! The samplers: flow matching (Euler, Heun) and DDIM, run in Rust around a denoiser.
//!
//! The state is float32 throughout and the operations are in the same order as in
//! `scripts/policy_reference.py`, so the Rust and Python samplers agree to float rounding.
//! Buffers are allocated once ([`SamplerBuffers`]); a sampler run allocates nothing.

use chunkrt_core::PolicyError;

use crate::manifest::{SamplerMethod, Schedule};

/// One call of the graph: `out = f(obs_n, x, t)`.
pub trait Denoiser {
    /// Evaluates the denoiser; `x` and `out` have `horizon * d_a` values.
    fn denoise(
        &mut self,
        obs_n: &[f32],
        x: &[f32],
        t: f32,
        out: &mut [f32],
    ) -> Result<(), PolicyError>;
}

/// The DDIM noise schedule (from the manifest).
#[derive(Clone, Debug, PartialEq)]
pub struct DdimSchedule {
    alphas_cumprod: Vec<f64>,
    clip_x0: f32,
}

impl DdimSchedule {
    /// From a checked manifest schedule.
    pub fn new(s: &Schedule) -> Self {
        DdimSchedule {
            alphas_cumprod: s.alphas_cumprod.clone(),
            clip_x0: s.clip_x0 as f32,
        }
    }

    /// Training timesteps N.
    pub fn train_timesteps(&self) -> usize {
        self.alphas_cumprod.len()
    }

    /// Timestep of step `i` of `k`: `round(linspace(N - 1, 0, k))[i]`, computed the way
    /// numpy computes it (start + i * step, last point exact, round half to even).
    pub fn timestep(&self, i: usize, k: usize) -> usize {
        let start = (self.alphas_cumprod.len() - 1) as f64;
        if k <= 1 {
            return start as usize;
        }
        if i + 1 == k {
            return 0;
        }
        let step = (0.0 - start) / (k - 1) as f64;
        (i as f64 * step + start).round_ties_even().max(0.0) as usize
    }
}

/// Buffers of one sampler, sized once for a chunk of `len` values.
#[derive(Clone, Debug)]
pub struct SamplerBuffers {
    /// The state: initial noise on entry, the normalised sample on return.
    pub x: Vec<f32>,
    v1: Vec<f32>,
    v2: Vec<f32>,
    xp: Vec<f32>,
}

impl SamplerBuffers {
    /// Buffers for chunks of `len` values.
    pub fn new(len: usize) -> Self {
        SamplerBuffers {
            x: vec![0.0; len],
            v1: vec![0.0; len],
            v2: vec![0.0; len],
            xp: vec![0.0; len],
        }
    }
}

/// Runs `steps` steps of `method` from the noise in `buf.x`; the sample is left in `buf.x`.
///
/// `after_step` is called after each step (the policy and the benchmark time steps with it).
/// DDIM needs `schedule` and `steps <= N` (checked where the configuration is born).
pub fn run_sampler(
    method: SamplerMethod,
    steps: usize,
    schedule: Option<&DdimSchedule>,
    den: &mut dyn Denoiser,
    obs_n: &[f32],
    buf: &mut SamplerBuffers,
    after_step: &mut dyn FnMut(usize),
) -> Result<(), PolicyError> {
    let k = steps.max(1);
    match method {
        SamplerMethod::Euler => flow(false, k, 0.0, 1.0, den, obs_n, buf, after_step)?,
        SamplerMethod::Heun => flow(true, k, 0.0, 1.0, den, obs_n, buf, after_step)?,
        SamplerMethod::Ddim => {
            let sch = schedule
                .ok_or_else(|| PolicyError("DDIM sampler without a noise schedule".into()))?;
            for s in 0..k {
                let t = sch.timestep(s, k);
                let a_t = sch.alphas_cumprod[t];
                let a_prev = if s + 1 < k {
                    sch.alphas_cumprod[sch.timestep(s + 1, k)]
                } else {
                    1.0
                };
                den.denoise(obs_n, &buf.x, t as f32, &mut buf.v1)?;
                let s1 = (1.0 - a_t).sqrt() as f32;
                let s0 = a_t.sqrt() as f32;
                let p0 = a_prev.sqrt() as f32;
                let p1 = (1.0 - a_prev).sqrt() as f32;
                let c = sch.clip_x0;
                for (x, eps) in buf.x.iter_mut().zip(&buf.v1) {
                    let x0 = ((*x - s1 * eps) / s0).clamp(-c, c);
                    *x = p0 * x0 + p1 * eps;
                }
                after_step(s);
            }
        }
    }
    Ok(())
}

/// Integrates a flow-matching velocity field `dx/dt = f(obs, x, t)` from `t = from` to
/// `t = to` in `k` equal steps, explicit Euler or Heun (trapezoidal predictor-corrector,
/// two calls a step), from the state in `buf.x`. chunkrt's own models run 0 -> 1 (t = 1
/// is data); models trained the other way round (noise at t = 1, as pi0's) run 1 -> 0.
/// The times are computed in f64 and rounded once, so 0 -> 1 is the Python reference's
/// arithmetic exactly.
#[allow(clippy::too_many_arguments)]
pub fn flow(
    heun: bool,
    k: usize,
    from: f64,
    to: f64,
    den: &mut dyn Denoiser,
    obs_n: &[f32],
    buf: &mut SamplerBuffers,
    after_step: &mut dyn FnMut(usize),
) -> Result<(), PolicyError> {
    let k = k.max(1);
    let span = to - from;
    let dt = (span / k as f64) as f32;
    let time = |s: usize| (from + span * (s as f64 / k as f64)) as f32;
    if !heun {
        for s in 0..k {
            den.denoise(obs_n, &buf.x, time(s), &mut buf.v1)?;
            for (x, v) in buf.x.iter_mut().zip(&buf.v1) {
                *x += dt * v;
            }
            after_step(s);
        }
        return Ok(());
    }
    let half = (0.5 * span / k as f64) as f32;
    for s in 0..k {
        den.denoise(obs_n, &buf.x, time(s), &mut buf.v1)?;
        for ((xp, x), v) in buf.xp.iter_mut().zip(&buf.x).zip(&buf.v1) {
            *xp = x + dt * v;
        }
        den.denoise(obs_n, &buf.xp, time(s + 1), &mut buf.v2)?;
        for ((x, a), b) in buf.x.iter_mut().zip(&buf.v1).zip(&buf.v2) {
            *x += half * (a + b);
        }
        after_step(s);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact velocity field of flow matching toward a single point `target`:
    /// v(x, t) = (target - x) / (1 - t).
    struct ToPoint(Vec<f32>);
    impl Denoiser for ToPoint {
        fn denoise(
            &mut self,
            _: &[f32],
            x: &[f32],
            t: f32,
            out: &mut [f32],
        ) -> Result<(), PolicyError> {
            for ((o, x), c) in out.iter_mut().zip(x).zip(&self.0) {
                *o = (c - x) / (1.0 - t).max(1e-6);
            }
            Ok(())
        }
    }

    #[test]
    fn flow_samplers_reach_the_target_of_an_exact_field() {
        for method in [SamplerMethod::Euler, SamplerMethod::Heun] {
            for k in [1, 2, 8] {
                let mut buf = SamplerBuffers::new(3);
                buf.x.copy_from_slice(&[1.0, -2.0, 0.5]);
                let mut den = ToPoint(vec![0.3, 0.1, -0.7]);
                let mut calls = 0;
                run_sampler(method, k, None, &mut den, &[], &mut buf, &mut |_| {
                    calls += 1
                })
                .unwrap();
                assert_eq!(calls, k);
                if method == SamplerMethod::Euler {
                    for (x, c) in buf.x.iter().zip(&den.0) {
                        assert!((x - c).abs() < 1e-5, "{method:?} K={k}: {x} vs {c}");
                    }
                }
            }
        }
    }

    /// DDIM with the exact noise predictor for a point mass at `target`.
    struct Eps(Vec<f32>, Vec<f64>);
    impl Denoiser for Eps {
        fn denoise(
            &mut self,
            _: &[f32],
            x: &[f32],
            t: f32,
            out: &mut [f32],
        ) -> Result<(), PolicyError> {
            let a = self.1[t as usize];
            for ((o, x), c) in out.iter_mut().zip(x).zip(&self.0) {
                *o = ((*x as f64 - a.sqrt() * *c as f64) / (1.0 - a).sqrt()) as f32;
            }
            Ok(())
        }
    }

    #[test]
    fn ddim_reaches_the_target_of_an_exact_predictor() {
        let alphas: Vec<f64> = (0..100).map(|i| 1.0 - (i as f64 + 1.0) / 101.0).collect();
        let sch = DdimSchedule {
            alphas_cumprod: alphas.clone(),
            clip_x0: 5.0,
        };
        for k in [1, 10, 100] {
            let mut buf = SamplerBuffers::new(2);
            buf.x.copy_from_slice(&[0.8, -1.1]);
            let mut den = Eps(vec![0.25, -0.5], alphas.clone());
            run_sampler(
                SamplerMethod::Ddim,
                k,
                Some(&sch),
                &mut den,
                &[],
                &mut buf,
                &mut |_| {},
            )
            .unwrap();
            assert!(
                (buf.x[0] - 0.25).abs() < 1e-4 && (buf.x[1] + 0.5).abs() < 1e-4,
                "K={k}: {:?}",
                buf.x
            );
        }
    }

    #[test]
    fn ddim_timesteps_follow_numpy_linspace() {
        let sch = DdimSchedule {
            alphas_cumprod: vec![0.5; 100],
            clip_x0: 1.0,
        };
        // numpy: np.round(np.linspace(99, 0, 10)) = [99, 88, 77, 66, 55, 44, 33, 22, 11, 0]
        let ts: Vec<usize> = (0..10).map(|i| sch.timestep(i, 10)).collect();
        assert_eq!(ts, vec![99, 88, 77, 66, 55, 44, 33, 22, 11, 0]);
        // np.round(np.linspace(99, 0, 4)) = [99, 66, 33, 0]; linspace(99, 0, 8) has 28.285.. etc.
        assert_eq!(
            (0..4).map(|i| sch.timestep(i, 4)).collect::<Vec<_>>(),
            vec![99, 66, 33, 0]
        );
        assert_eq!(sch.timestep(0, 1), 99);
        let ts: Vec<usize> = (0..100).map(|i| sch.timestep(i, 100)).collect();
        assert_eq!(ts, (0..100).rev().collect::<Vec<_>>());
    }
}
