//! The Rust samplers against the Python reference (scripts/policy_reference.py, which runs
//! onnxruntime and numpy) on the bundled models with the same noise (drawn here, handed over
//! in a file): every chunk value agrees to 1e-9. When no Python with onnxruntime and numpy
//! is found (CHUNKRT_PYTHON, then .venv/bin/python3 in the repository, then python3): a
//! visible SKIP, and a failure under CI=true.

mod common;

use std::path::PathBuf;
use std::process::Command;

use chunkrt_policy::{GaussianNoise, PolicyModel, SamplerMethod, SessionOptions};
use common::{ambiguous_obs, policies, repo_root, temp_dir};

fn python() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("CHUNKRT_PYTHON") {
        candidates.push(PathBuf::from(p));
    }
    candidates.push(repo_root().join(".venv/bin/python3"));
    candidates.push(PathBuf::from("python3"));
    candidates.into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import onnxruntime, numpy"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

#[test]
fn rust_samplers_match_the_python_reference() {
    let Some(py) = python() else {
        chunkrt_testkit::missing_prerequisite(
            "rust_samplers_match_the_python_reference",
            "no python3 with onnxruntime and numpy (./scripts/setup.sh, or set CHUNKRT_PYTHON)",
        );
        return;
    };
    let dir = temp_dir("reference");
    let mut compared = 0;
    let mut overall = 0.0f64;
    for (name, method, steps) in [
        ("flow", SamplerMethod::Euler, 1),
        ("flow", SamplerMethod::Euler, 8),
        ("flow", SamplerMethod::Heun, 4),
        ("ddim", SamplerMethod::Ddim, 10),
        ("ddim", SamplerMethod::Ddim, 25),
    ] {
        let manifest = policies().join(format!("{name}.toml"));
        let mut model = PolicyModel::load(&manifest, &SessionOptions::default()).unwrap();
        let len = model.manifest().chunk_len();
        // Three observations: the ambiguous start, and two points along the way.
        let base = ambiguous_obs(&manifest);
        let mut cases = Vec::new();
        let mut rust = Vec::new();
        let mut noise = GaussianNoise::new(42);
        for k in 0..3 {
            let mut obs = base.clone();
            for (j, o) in obs.iter_mut().enumerate().take(7) {
                *o += 0.1 * k as f64 * ((j as f64) * 0.7).sin();
            }
            let mut z = vec![0.0f32; len];
            noise.fill(&mut z);
            model.sample(&obs, &z, method, steps, &mut |_| {}).unwrap();
            let x = model.last_sample().to_vec();
            let mut pos = vec![0.0; len];
            model.positions_into(&obs, &mut pos);
            rust.push((x, pos));
            cases.push(serde_json::json!({
                "obs": obs, "noise": z, "steps": steps, "method": method.name()
            }));
        }
        let input = dir.join(format!("{name}-{}-{steps}.in.json", method.name()));
        let output = dir.join(format!("{name}-{}-{steps}.out.json", method.name()));
        std::fs::write(&input, serde_json::json!({ "cases": cases }).to_string()).unwrap();
        let status = Command::new(&py)
            .arg(repo_root().join("scripts/policy_reference.py"))
            .args(["sample", "--manifest"])
            .arg(&manifest)
            .arg("--input")
            .arg(&input)
            .arg("--output")
            .arg(&output)
            .status()
            .unwrap();
        assert!(status.success(), "policy_reference.py failed for {name}");
        let out: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
        for (k, ((x, pos), case)) in rust
            .iter()
            .zip(out["cases"].as_array().unwrap())
            .enumerate()
        {
            let px: Vec<f64> = serde_json::from_value(case["x"].clone()).unwrap();
            let pchunk: Vec<Vec<f64>> = serde_json::from_value(case["chunk"].clone()).unwrap();
            let mut worst = 0.0f64;
            for (a, b) in x.iter().zip(&px) {
                worst = worst.max((*a as f64 - b).abs());
            }
            for (a, b) in pos.iter().zip(pchunk.iter().flatten()) {
                worst = worst.max((a - b).abs());
            }
            assert_eq!(px.len(), len);
            // Same ONNX Runtime build on both sides (requirements-test.txt pins the wheel
            // the .ort library comes from), so only f64 rounding in the samplers remains:
            // measured 2.2e-16 (docs/policy/onnx.md). 1e-9 is far below one f32 ulp of an action
            // (6e-8 at 1 rad): a sampler step done in f32, or one that diverges, fails.
            assert!(
                worst < 1e-9,
                "{name} {} K={steps} case {k}: Rust and Python differ by {worst:e}",
                method.name()
            );
            compared += 1;
            overall = overall.max(worst);
        }
    }
    eprintln!("largest Rust/Python difference over {compared} chunks: {overall:e}");
    assert_eq!(compared, 15);
}
