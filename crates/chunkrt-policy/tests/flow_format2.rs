//! A flow-matching model under manifest format 2 (`[flow]`): the bundled flow model's
//! graph, described as an imported model (one observation input, mean/std normalisation,
//! Euler or Heun from t = 0), samples what the format-1 path samples from the same
//! observation and noise; that path agrees with the Python reference
//! (`tests/python_reference.rs`). Integrating the other way (`noise_at = 1`) does not.

mod common;

use chunkrt_policy::{ImportedModel, Manifest, PolicyModel, SamplerMethod, SessionOptions};
use common::{policies, temp_dir};

fn list(v: &[f64]) -> String {
    format!(
        "[{}]",
        v.iter()
            .map(|x| format!("{x:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The format-2 manifest of `flow.onnx` with `[flow]` `method` and `noise_at`.
fn manifest2(dir: &std::path::Path, method: &str, noise_at: f64) -> std::path::PathBuf {
    let src = policies().join("flow.toml");
    let m = Manifest::load(&src).unwrap();
    let n = &m.normalisation;
    let d = &m.domain;
    let text = format!(
        r#"format = 2
kind = "diffusion"
model_file = "{model}"
model_sha256 = "{sha}"
d_a = {d_a}
dt_ms = {dt}

[origin]
framework = "chunkrt"
policy = "flow"
checkpoint = "rt-config/policies/flow.toml"

[observation]
history = 1
state = "planned"

[[observation.inputs]]
name = "obs"
sources = ["joint_pos", "goal", "joint_vel"]
normalisation = "mean_std"
mean = {obs_mean}
std = {obs_std}

[action]
encoding = "delta_from_observed"
normalisation = "identity"
horizon = {h}
start = 0
len = {h}

[io]
x = "x"
t = "t"
out = "out"

[flow]
method = "{method}"
noise_at = {noise_at:?}

[sampler]
steps = 8
min_steps = 1
seed = 0

[task]
goal_tolerance_rad = 0.05
goals = [{goal}]

[training]
data_sha256 = "{data}"
samples = 1
demonstrations = 1
seed = 0
script = "scripts/train_policy.py"
final_loss = 0.0

[domain]
obs_min = {omin}
obs_max = {omax}
mean = {dmean}
ridge = {ridge:?}
mahalanobis_max = {mmax:?}
covariance = [{cov}]
"#,
        model = policies().join(&m.model_file).display(),
        sha = m.model_sha256,
        d_a = m.d_a,
        dt = m.dt_ms,
        obs_mean = list(&n.obs_mean),
        // Format 2 normalises with LeRobot's (std + 1e-8); take it back out.
        obs_std = list(&n.obs_std.iter().map(|s| s - 1e-8).collect::<Vec<_>>()),
        h = m.horizon,
        goal = list(&m.encoding.goals[0]),
        data = m.training.data_sha256,
        omin = list(&d.obs_min),
        omax = list(&d.obs_max),
        dmean = list(&d.mean),
        ridge = d.ridge,
        mmax = d.mahalanobis_max,
        cov = d
            .covariance
            .iter()
            .map(|r| list(r))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let path = dir.join(format!("flow-{method}-{noise_at}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// Largest difference between the format-2 and format-1 samples at the domain mean.
fn compare(method: &str, noise_at: f64, sampler: SamplerMethod) -> f32 {
    let dir = temp_dir(&format!("flow2-{method}-{noise_at}"));
    let opts = SessionOptions::default();
    let mut v1 = PolicyModel::load(&policies().join("flow.toml"), &opts).unwrap();
    let mut v2 = ImportedModel::load(&manifest2(&dir, method, noise_at), &opts)
        .unwrap_or_else(|e| panic!("{e}"));
    let obs = v1.manifest().domain.mean.clone();
    let mut noise = vec![0.0f32; v1.manifest().chunk_len()];
    chunkrt_policy::GaussianNoise::new(5).fill(&mut noise);
    v1.sample(&obs, &noise, sampler, 8, &mut |_| {}).unwrap();
    v2.push_observation(&obs);
    v2.run(
        &noise,
        8,
        &mut |_| unreachable!("flow draws no step noise"),
        &mut |_| {},
    )
    .unwrap();
    v1.last_sample()
        .iter()
        .zip(v2.sequence())
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()))
}

#[test]
fn a_flow_model_under_format_2_samples_what_format_1_samples() {
    for (method, sampler) in [
        ("euler", SamplerMethod::Euler),
        ("heun", SamplerMethod::Heun),
    ] {
        let d = compare(method, 0.0, sampler);
        eprintln!("{method}: format 2 within {d:.2e} of format 1");
        assert!(d <= 1e-6, "{method}: {d}");
    }
    // Integrated from the wrong end, the same graph gives another sample.
    let d = compare("euler", 1.0, SamplerMethod::Euler);
    assert!(d > 0.1, "noise_at = 1 is within {d} of noise_at = 0");
}
