//! Why chunkrt runs generative policies: at an observation where the demonstrations split
//! (half pass the obstacle on one side, half on the other), the flow and DDIM policies
//! sample one side or the other, while the squared-error regression baseline, trained on the
//! same data, averages the two and drives straight into the obstacle.
//!
//! The sampling is random, so the claim is statistical and stated as one: over
//! [`SEEDS`] x [`SAMPLES`] chunks per policy, a sample lands near the midpoint with
//! probability at most [`P_NEAR_MID`], and fails to commit to a side with probability
//! at most [`P_UNCOMMITTED`]. The test rejects a policy when the count it sees is
//! above the binomial (1 - [`ALPHA`]) quantile for that probability: a policy that
//! meets the claim fails by chance at most once in 1/ALPHA runs; one that averages
//! (the regression baseline: every sample at the midpoint) fails at once.

mod common;

use chunkrt_policy::ortlib::ort_environment;
use chunkrt_policy::{GaussianNoise, Manifest, PolicyModel, SessionOptions};
use common::{ambiguous_obs, policies};

/// Samples per seed.
const SAMPLES: usize = 200;
/// Noise seeds: "none near the midpoint" held at one seed, while others gave 1-4 of 200.
const SEEDS: [u64; 5] = [2026, 1, 7, 42, 31337];
/// Claimed largest probability that a sample lands within a quarter of the half-gap
/// of the midpoint. Measured on the bundled models: flow 1 of 1000, ddim 0 of 1000
/// over these seeds (an earlier model gave 1-4 of 200 per seed, about 1 %). With
/// n = 1000 the limit is 21: at the measured rate a chance failure is far below
/// ALPHA, and a policy with 3 % of its samples at the obstacle fails 95 % of runs.
const P_NEAR_MID: f64 = 0.01;
/// Claimed largest probability that a sample is not committed (within half the
/// half-gap of the midpoint): measured 2 of 1000 (flow) and 0 of 1000 (ddim); limit 48.
const P_UNCOMMITTED: f64 = 0.03;
/// Smallest half-distance between the two modes' centres, rad.
const MIN_HALF_GAP_RAD: f64 = 0.15;
/// Chance that a policy meeting the claims fails this test.
const ALPHA: f64 = 1e-3;

/// The smallest `k` with P(X > k) <= `alpha` for X ~ Binomial(`n`, `p`): counts
/// above it refute "probability at most `p`" at level `alpha`.
fn binomial_limit(n: usize, p: f64, alpha: f64) -> usize {
    // log C(n, k) by lgamma-free summation (n is small).
    let ln_pmf = |k: usize| {
        let ln_choose: f64 = (0..k)
            .map(|i| ((n - i) as f64).ln() - ((i + 1) as f64).ln())
            .sum();
        ln_choose + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()
    };
    let mut tail: f64 = (0..=n).map(|k| ln_pmf(k).exp()).sum();
    for k in 0..=n {
        tail -= ln_pmf(k).exp();
        if tail <= alpha {
            return k;
        }
    }
    n
}

/// Lateral offset of a chunk's last setpoint: its component orthogonal to the straight line
/// to the goal, projected on `u`.
fn residual(delta: &[f64], dir: &[f64]) -> Vec<f64> {
    let along: f64 = delta.iter().zip(dir).map(|(a, b)| a * b).sum();
    delta.iter().zip(dir).map(|(a, b)| a - along * b).collect()
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Principal direction of a set of vectors (power iteration on their scatter matrix).
fn principal(vs: &[Vec<f64>]) -> Vec<f64> {
    let n = vs[0].len();
    let mut u = vec![1.0 / (n as f64).sqrt(); n];
    for _ in 0..200 {
        let mut next = vec![0.0; n];
        for v in vs {
            let p = dot(v, &u);
            for (o, x) in next.iter_mut().zip(v) {
                *o += p * x;
            }
        }
        let norm = dot(&next, &next).sqrt();
        u = next.into_iter().map(|x| x / norm).collect();
    }
    u
}

/// Last-setpoint deltas from the observed position, [`SAMPLES`] per seed.
fn sample_deltas(name: &str, obs: &[f64], seed: u64) -> Vec<Vec<f64>> {
    let manifest = policies().join(format!("{name}.toml"));
    let mut model = PolicyModel::load(&manifest, &SessionOptions::default()).unwrap();
    let m = model.manifest().clone();
    let mut noise = GaussianNoise::new(seed);
    let mut z = vec![0.0f32; m.chunk_len()];
    let mut pos = vec![0.0; m.chunk_len()];
    (0..SAMPLES)
        .map(|_| {
            noise.fill(&mut z);
            model
                .sample(obs, &z, m.sampler.method, m.sampler.steps, &mut |_| {})
                .unwrap();
            model.positions_into(obs, &mut pos);
            let last = &pos[(m.horizon - 1) * m.d_a..];
            last.iter().zip(&obs[..m.d_a]).map(|(p, q)| p - q).collect()
        })
        .collect()
}

/// The regression baseline's last-setpoint delta (regression.onnx: obs_n -> normalised
/// chunk, with flow.toml's normalisation).
fn regression_delta(obs: &[f64]) -> Vec<f64> {
    let m = Manifest::load(&policies().join("flow.toml")).unwrap();
    let (env, _) = ort_environment(None).unwrap();
    let mut session = ort::session::Session::builder(&env)
        .unwrap()
        .commit_from_file(policies().join("regression.onnx"))
        .unwrap();
    let n = &m.normalisation;
    let obs_n: Vec<f32> = (0..m.d_obs)
        .map(|i| ((obs[i] - n.obs_mean[i]) / n.obs_std[i]) as f32)
        .collect();
    let input = ort::value::Tensor::from_array(([1usize, m.d_obs], obs_n)).unwrap();
    let outputs = session.run(ort::inputs!["obs" => input]).unwrap();
    let (_, out) = outputs["out"].try_extract_tensor::<f32>().unwrap();
    let k0 = (m.horizon - 1) * m.d_a;
    (0..m.d_a)
        .map(|j| out[k0 + j] as f64 * n.act_std[k0 + j] + n.act_mean[k0 + j])
        .collect()
}

#[test]
fn generative_policies_pick_a_side_and_regression_averages() {
    let manifest = policies().join("flow.toml");
    let obs = ambiguous_obs(&manifest);
    let d_a = 7;
    let mut dir: Vec<f64> = (0..d_a).map(|j| obs[d_a + j] - obs[j]).collect();
    let norm = dot(&dir, &dir).sqrt();
    dir.iter_mut().for_each(|x| *x /= norm);

    let reg = residual(&regression_delta(&obs), &dir);
    let n = SEEDS.len() * SAMPLES;
    let near_mid_limit = binomial_limit(n, P_NEAR_MID, ALPHA);
    let uncommitted_limit = binomial_limit(n, P_UNCOMMITTED, ALPHA);
    for name in ["flow", "ddim"] {
        let res: Vec<Vec<f64>> = SEEDS
            .iter()
            .flat_map(|&seed| sample_deltas(name, &obs, seed))
            .map(|d| residual(&d, &dir))
            .collect();
        let u = principal(&res);
        let lat: Vec<f64> = res.iter().map(|r| dot(r, &u)).collect();
        let pos: Vec<f64> = lat.iter().copied().filter(|l| *l > 0.0).collect();
        let neg: Vec<f64> = lat.iter().copied().filter(|l| *l <= 0.0).collect();
        let c_pos = pos.iter().sum::<f64>() / pos.len().max(1) as f64;
        let c_neg = neg.iter().sum::<f64>() / neg.len().max(1) as f64;
        let mid = 0.5 * (c_pos + c_neg);
        let half = 0.5 * (c_pos - c_neg);
        let within = |c: f64| lat.iter().filter(|l| (*l - c).abs() < 0.25 * half).count();
        let (near_mid, near_pos, near_neg) = (within(mid), within(c_pos), within(c_neg));
        let committed = lat.iter().filter(|l| (*l - mid).abs() > 0.5 * half).count();
        let per_seed: Vec<usize> = lat
            .chunks(SAMPLES)
            .map(|c| c.iter().filter(|l| (*l - mid).abs() < 0.25 * half).count())
            .collect();
        let reg_lat = dot(&reg, &u);
        eprintln!(
            "{name}: {} samples at {c_pos:+.3} rad, {} at {c_neg:+.3} rad (mean lateral offset of \
             the last setpoint, each side; {} seeds x {SAMPLES}); {committed} of {n} farther than \
             half the half-gap from the midpoint {mid:+.3}; within a quarter of the half-gap: \
             {near_pos} and {near_neg} around the two modes, {near_mid} around the midpoint \
             (per seed {per_seed:?}; limit {near_mid_limit}); regression baseline {reg_lat:+.3} rad",
            pos.len(),
            neg.len(),
            SEEDS.len(),
        );
        // The demonstrations from rest are 0.39 rad apart at the last setpoint (both
        // sides of the detour, scripts/train_policy.py).
        assert!(
            half > MIN_HALF_GAP_RAD,
            "{name}: modes only {:.3} rad apart",
            2.0 * half
        );
        assert!(
            pos.len() >= n / 5 && neg.len() >= n / 5,
            "{name}: one mode is missing"
        );
        // Samples commit to a side: few near the midpoint (the obstacle) ...
        assert!(
            near_mid <= near_mid_limit,
            "{name}: {near_mid} of {n} samples near the midpoint {mid:+.3}: more than \
             {near_mid_limit}, the binomial bound for p <= {P_NEAR_MID} at alpha {ALPHA}"
        );
        assert!(
            n - committed <= uncommitted_limit,
            "{name}: {} of {n} samples not committed to a side: more than {uncommitted_limit}, \
             the binomial bound for p <= {P_UNCOMMITTED} at alpha {ALPHA}",
            n - committed
        );
        // ... while the regression baseline averages the two: it lands in the gap between
        // them, where the generative policy almost never goes (as close to the midpoint as
        // the regression's output: at most P_UNCOMMITTED of its samples).
        let reg_off = (reg_lat - mid).abs();
        let as_close = lat.iter().filter(|l| (*l - mid).abs() <= reg_off).count();
        assert!(
            reg_off < 0.5 * half && as_close <= uncommitted_limit,
            "regression lands at {reg_lat:+.3}, not between the modes around the midpoint \
             {mid:+.3} ({as_close} of {n} {name} samples as close to the midpoint)"
        );
    }
}

#[test]
fn the_binomial_limits_are_the_quantiles_they_claim() {
    // Known answers: Binomial(10, 0.5): P(X > 8) = 11/1024 > 0.01 >= P(X > 9) = 1/1024.
    assert_eq!(binomial_limit(10, 0.5, 0.01), 9);
    assert_eq!(binomial_limit(10, 0.5, 0.02), 8);
    // The limits this test uses, computed independently with exact integer binomial
    // coefficients (Python: the smallest k with 1 - sum(comb(1000, i) p^i (1-p)^(1000-i)
    // for i <= k) <= 1e-3): 21 for p = 0.01, 48 for p = 0.03.
    let n = SEEDS.len() * SAMPLES;
    assert_eq!(binomial_limit(n, P_NEAR_MID, ALPHA), 21);
    assert_eq!(binomial_limit(n, P_UNCOMMITTED, ALPHA), 48);
}
