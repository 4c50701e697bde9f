//! Why chunkrt runs generative policies: at an observation where the demonstrations split
//! (half pass the obstacle on one side, half on the other), the flow and DDIM policies
//! sample one side or the other, while the squared-error regression baseline, trained on the
//! same data, averages the two and drives straight into the obstacle.

mod common;

use chunkrt_policy::ortlib::ort_environment;
use chunkrt_policy::{GaussianNoise, Manifest, PolicyModel, SessionOptions};
use common::{ambiguous_obs, policies};

const SAMPLES: usize = 200;

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

/// Last-setpoint deltas from the observed position, one per sample.
fn sample_deltas(name: &str, obs: &[f64]) -> Vec<Vec<f64>> {
    let manifest = policies().join(format!("{name}.toml"));
    let mut model = PolicyModel::load(&manifest, &SessionOptions::default()).unwrap();
    let m = model.manifest().clone();
    let mut noise = GaussianNoise::new(2026);
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
    for name in ["flow", "ddim"] {
        let res: Vec<Vec<f64>> = sample_deltas(name, &obs)
            .iter()
            .map(|d| residual(d, &dir))
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
        let reg_lat = dot(&reg, &u);
        eprintln!(
            "{name}: {} samples at {c_pos:+.3} rad, {} at {c_neg:+.3} rad (mean lateral offset of \
             the last setpoint, each side); {committed} of {SAMPLES} farther than half the \
             half-gap from the midpoint {mid:+.3}; within a quarter of the half-gap: {near_pos} \
             and {near_neg} around the two modes, {near_mid} around the midpoint; regression \
             baseline {reg_lat:+.3} rad",
            pos.len(),
            neg.len(),
        );
        assert!(
            half > 0.25,
            "{name}: modes only {:.3} rad apart",
            2.0 * half
        );
        assert!(
            pos.len() >= SAMPLES / 5 && neg.len() >= SAMPLES / 5,
            "{name}: one mode is missing"
        );
        // Every sample commits to a side: none near the midpoint (the obstacle) ...
        assert_eq!(
            near_mid, 0,
            "{name}: {near_mid} of {SAMPLES} samples near the midpoint {mid:+.3}"
        );
        // ... while the regression baseline averages the two: it lands at the midpoint.
        assert!(
            (reg_lat - mid).abs() < 0.25 * half,
            "regression lands at {reg_lat:+.3}, not the midpoint {mid:+.3}"
        );
    }
}
