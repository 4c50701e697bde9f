//! Sampler latency on this machine: per step and per chunk, P50 and P99, for flow matching
//! (Euler, K in {1, 2, 4, 8, 16}; Heun K = 4) and DDIM (K in {10, 25, 50, 100}) on the
//! bundled models, plus the per-call cost of one graph evaluation through Rust `ort` against
//! Python onnxruntime on the same model, in the same run.
//!
//!   cargo run --release -p chunkrt-policy --example policy_bench [-- --chunks N] [--json]
//!
//! Needs the ONNX Runtime library (./scripts/bootstrap-ort.sh); the Python column needs a
//! python3 with onnxruntime + numpy (CHUNKRT_PYTHON, <repo>/.venv/bin/python3 or python3),
//! and is left out with a notice otherwise. Both sides use one intra-op thread.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use chunkrt_policy::{GaussianNoise, PolicyModel, SamplerMethod, SessionOptions};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn percentile(v: &mut [u64], p: f64) -> f64 {
    v.sort_unstable();
    let idx = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[idx] as f64 / 1e6
}

struct Row {
    model: &'static str,
    method: SamplerMethod,
    steps: usize,
    step_p50: f64,
    step_p99: f64,
    chunk_p50: f64,
    chunk_p99: f64,
}

fn bench(
    model: &mut PolicyModel,
    method: SamplerMethod,
    steps: usize,
    chunks: usize,
) -> (Vec<u64>, Vec<u64>) {
    let m = model.manifest().clone();
    let obs = m.domain.mean.clone();
    let mut noise = GaussianNoise::new(1);
    let mut z = vec![0.0f32; m.chunk_len()];
    let mut step_ns = Vec::with_capacity(chunks * steps);
    let mut chunk_ns = Vec::with_capacity(chunks);
    for warm in [true, false] {
        let n = if warm { 5 } else { chunks };
        for _ in 0..n {
            noise.fill(&mut z);
            let start = Instant::now();
            let mut last = start;
            let mut steps_seen = Vec::with_capacity(steps);
            model
                .sample(&obs, &z, method, steps, &mut |_| {
                    let now = Instant::now();
                    steps_seen.push((now - last).as_nanos() as u64);
                    last = now;
                })
                .expect("sample");
            if !warm {
                chunk_ns.push(start.elapsed().as_nanos() as u64);
                step_ns.extend(steps_seen);
            }
        }
    }
    (step_ns, chunk_ns)
}

fn python() -> Option<PathBuf> {
    let mut c = Vec::new();
    if let Some(p) = std::env::var_os("CHUNKRT_PYTHON") {
        c.push(PathBuf::from(p));
    }
    c.push(repo_root().join(".venv/bin/python3"));
    c.push(PathBuf::from("python3"));
    c.into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import onnxruntime, numpy"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let chunks = args
        .iter()
        .position(|a| a == "--chunks")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(100usize);
    let policies = repo_root().join("rt-config/policies");
    let opts = SessionOptions::default();
    let mut flow = PolicyModel::load(&policies.join("flow.toml"), &opts).unwrap_or_else(|e| {
        eprintln!("policy_bench: {e}");
        std::process::exit(1)
    });
    let mut ddim = PolicyModel::load(&policies.join("ddim.toml"), &opts).unwrap_or_else(|e| {
        eprintln!("policy_bench: {e}");
        std::process::exit(1)
    });

    let mut rows = Vec::new();
    let configs: Vec<(&'static str, SamplerMethod, usize)> = [1, 2, 4, 8, 16]
        .iter()
        .map(|&k| ("flow", SamplerMethod::Euler, k))
        .chain(std::iter::once(("flow", SamplerMethod::Heun, 4)))
        .chain(
            [10, 25, 50, 100]
                .iter()
                .map(|&k| ("ddim", SamplerMethod::Ddim, k)),
        )
        .collect();
    for (name, method, steps) in configs {
        let model = if name == "flow" { &mut flow } else { &mut ddim };
        // Fewer chunks for long samplers keeps the run short; at least 30 chunks each.
        let n = (chunks * 8 / steps).clamp(30, chunks * 4);
        let (mut s, mut c) = bench(model, method, steps, n);
        rows.push(Row {
            model: name,
            method,
            steps,
            step_p50: percentile(&mut s, 50.0),
            step_p99: percentile(&mut s, 99.0),
            chunk_p50: percentile(&mut c, 50.0),
            chunk_p99: percentile(&mut c, 99.0),
        });
    }

    println!("| model | sampler | K | step P50 ms | step P99 ms | chunk P50 ms | chunk P99 ms | fits 20 ms | fits 50 ms |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} |",
            r.model,
            r.method.name(),
            r.steps,
            r.step_p50,
            r.step_p99,
            r.chunk_p50,
            r.chunk_p99,
            if r.chunk_p99 <= 20.0 { "yes" } else { "no" },
            if r.chunk_p99 <= 50.0 { "yes" } else { "no" },
        );
    }

    // One graph call, Rust ort vs Python onnxruntime, same model (flow.onnx), same run.
    let calls = 2000;
    let m = flow.manifest().clone();
    let mut z = vec![0.0f32; m.chunk_len()];
    GaussianNoise::new(3).fill(&mut z);
    let obs_n = vec![0.1f32; m.d_obs];
    let mut out = vec![0.0f32; m.chunk_len()];
    for _ in 0..50 {
        flow.denoise_once(&obs_n, &z, 0.5, &mut out)
            .expect("denoise");
    }
    let mut rust_ns: Vec<u64> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            flow.denoise_once(&obs_n, &z, 0.5, &mut out)
                .expect("denoise");
            t.elapsed().as_nanos() as u64
        })
        .collect();
    let (r50, r99) = (
        percentile(&mut rust_ns, 50.0),
        percentile(&mut rust_ns, 99.0),
    );
    println!();
    println!("| graph call (flow.onnx) | P50 us | P99 us |");
    println!("|---|---|---|");
    println!("| Rust ort | {:.1} | {:.1} |", r50 * 1e3, r99 * 1e3);
    match python() {
        None => println!(
            "\n(Python onnxruntime column left out: no python3 with onnxruntime and numpy)"
        ),
        Some(py) => {
            let out = Command::new(py)
                .arg(repo_root().join("scripts/policy_reference.py"))
                .args(["time", "--manifest"])
                .arg(policies.join("flow.toml"))
                .args(["--calls", &calls.to_string()])
                .output()
                .expect("run python");
            let text = String::from_utf8_lossy(&out.stdout);
            let parsed: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_default();
            let mut py_ns: Vec<u64> = parsed["per_call_ns"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_u64()).collect())
                .unwrap_or_default();
            if py_ns.is_empty() {
                println!(
                    "\n(Python timing failed: {})",
                    String::from_utf8_lossy(&out.stderr)
                );
            } else {
                let (p50, p99) = (percentile(&mut py_ns, 50.0), percentile(&mut py_ns, 99.0));
                println!(
                    "| Python onnxruntime | {:.1} | {:.1} |",
                    p50 * 1e3,
                    p99 * 1e3
                );
                println!(
                    "\nPython / Rust per-call ratio: P50 {:.2}x, P99 {:.2}x",
                    p50 / r50,
                    p99 / r99
                );
            }
        }
    }
}
