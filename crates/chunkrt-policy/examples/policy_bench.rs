//! Sampler latency on this machine: per step and per chunk, P50 and P99, for flow matching
//! (Euler, K in {1, 2, 4, 8, 16}; Heun K = 4) and DDIM (K in {10, 25, 50, 100}) on the
//! bundled models, the imported LeRobot models beside them (Diffusion Policy under its
//! diffusers scheduler at K in {1, 2, 5, 10, 25, 50, 100}, ACT in one call), plus the
//! per-call cost of one graph evaluation through Rust `ort` against Python onnxruntime on
//! the same model, in the same run.
//!
//!   cargo run --release -p chunkrt-policy --example policy_bench [-- --chunks N]
//!
//! With `--anytime MANIFEST --deadline-ms D [--min-steps K]` it runs a format-2 policy (a larger model, say)
//! through `ImportedPolicy::infer` with that anytime budget instead, and reports the chunk
//! latency and the steps it ran.
//!
//! Needs the ONNX Runtime library (./scripts/bootstrap-ort.sh); the Python column needs a
//! python3 with onnxruntime + numpy (CHUNKRT_PYTHON, <repo>/.venv/bin/python3 or python3),
//! and is left out with a notice otherwise. Both sides use one intra-op thread.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use chunkrt_core::{Chunk, MonoTime, Observation, Policy};
use chunkrt_policy::{
    GaussianNoise, ImportedModel, ImportedPolicy, ImportedPolicyConfig, PolicyModel, SamplerMethod,
    SessionOptions,
};

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

/// Per-step and per-chunk latencies of a format-2 model at `steps` (its manifest's
/// scheduler; chunk models: one call).
fn bench_imported(model: &mut ImportedModel, steps: usize, chunks: usize) -> (Vec<u64>, Vec<u64>) {
    let obs = model.domain().mean().to_vec();
    let mut noise = GaussianNoise::new(1);
    let mut z = vec![0.0f32; model.manifest().raw.sequence_len()];
    let mut step_ns = Vec::with_capacity(chunks * steps);
    let mut chunk_ns = Vec::with_capacity(chunks);
    model.reset_history();
    model.push_observation(&obs);
    for warm in [true, false] {
        for _ in 0..if warm { 5 } else { chunks } {
            noise.fill(&mut z);
            let mut step_noise = GaussianNoise::new(2);
            let start = Instant::now();
            let mut last = start;
            let mut seen = Vec::with_capacity(steps);
            model
                .run(&z, steps, &mut |n| step_noise.fill(n), &mut |_| {
                    let now = Instant::now();
                    seen.push((now - last).as_nanos() as u64);
                    last = now;
                })
                .expect("run");
            if !warm {
                chunk_ns.push(start.elapsed().as_nanos() as u64);
                step_ns.extend(seen);
            }
        }
    }
    (step_ns, chunk_ns)
}

/// The imported models' rows: every `lerobot-*.toml` beside the bundled ones.
fn imported_rows(policies: &Path, opts: &SessionOptions, chunks: usize) {
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(policies)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    manifests.retain(|p| {
        p.extension().is_some_and(|e| e == "toml")
            && p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("lerobot-"))
    });
    manifests.sort();
    println!();
    println!("| imported model | K | step P50 ms | step P99 ms | chunk P50 ms | chunk P99 ms | fits 50 ms |");
    println!("|---|---|---|---|---|---|---|");
    for path in manifests {
        let mut model = match ImportedModel::load(&path, opts) {
            Ok(m) => m,
            Err(e) => {
                println!("| {} | load failed: {e} | | | | | |", path.display());
                continue;
            }
        };
        let max = model.max_steps();
        let ks: Vec<usize> = [1, 2, 5, 10, 25, 50, 100]
            .into_iter()
            .filter(|k| *k <= max)
            .collect();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        for k in ks {
            if let Some(s) = &model.manifest().scheduler {
                if s.check(k).is_err() {
                    continue;
                }
            }
            let n = (chunks * 8 / k).clamp(30, chunks * 4);
            let (mut s, mut c) = bench_imported(&mut model, k, n);
            let c99 = percentile(&mut c, 99.0);
            println!(
                "| {name} | {k} | {:.3} | {:.3} | {:.3} | {c99:.3} | {} |",
                percentile(&mut s, 50.0),
                percentile(&mut s, 99.0),
                percentile(&mut c, 50.0),
                if c99 <= 50.0 { "yes" } else { "no" },
            );
        }
    }
}

/// `--anytime MANIFEST --deadline-ms D`: chunk latency and steps through `ImportedPolicy`.
fn anytime(manifest: &Path, deadline_ms: Option<f64>, min_steps: Option<usize>, chunks: usize) {
    let mut cfg = ImportedPolicyConfig::new(manifest);
    cfg.deadline_ms = deadline_ms;
    cfg.min_steps = min_steps;
    let mut policy = ImportedPolicy::new(&cfg).unwrap_or_else(|e| {
        eprintln!("policy_bench: {e}");
        std::process::exit(1)
    });
    let mean = policy.model().domain().mean().to_vec();
    let d_a = policy.model().manifest().raw.d_a;
    let mut obs = Observation {
        dof: d_a as u16,
        ..Observation::default()
    };
    obs.pos_rad[..d_a].copy_from_slice(&mean[..d_a]);
    obs.plan_pos_rad[..d_a].copy_from_slice(&mean[..d_a]);
    obs.cmd_pos_rad[..d_a].copy_from_slice(&mean[..d_a]);
    let dt = policy.spec().dt_ns;
    let mut out = Chunk::default();
    let mut chunk_ns = Vec::with_capacity(chunks);
    let mut steps = Vec::with_capacity(chunks);
    for i in 0..chunks {
        obs.seq = i as u64;
        obs.t_capture = MonoTime::from_ns(i as u64 * dt);
        let t = Instant::now();
        let info = policy.infer(&obs, &mut out).expect("infer");
        chunk_ns.push(t.elapsed().as_nanos() as u64);
        steps.push(info.steps);
    }
    let max = *chunk_ns.iter().max().unwrap() as f64 / 1e6;
    println!(
        "{}: deadline {:?} ms, {chunks} chunks: chunk P50 {:.1} ms, P99 {:.1} ms, max {max:.1} ms; \
         steps min {} max {} (nominal {}), reduced {} of {chunks}",
        manifest.display(),
        deadline_ms,
        percentile(&mut chunk_ns.clone(), 50.0),
        percentile(&mut chunk_ns, 99.0),
        steps.iter().min().unwrap(),
        steps.iter().max().unwrap(),
        policy.model().manifest().raw.sampler.steps,
        policy.stats().reduced,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let chunks = value("--chunks")
        .and_then(|v| v.parse().ok())
        .unwrap_or(100usize);
    if let Some(m) = value("--anytime") {
        let deadline = value("--deadline-ms").and_then(|v| v.parse().ok());
        let min_steps = value("--min-steps").and_then(|v| v.parse().ok());
        anytime(Path::new(&m), None, min_steps, chunks);
        anytime(Path::new(&m), deadline, min_steps, chunks);
        return;
    }
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

    imported_rows(&policies, &opts, chunks);

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
