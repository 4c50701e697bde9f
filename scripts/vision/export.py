#!/usr/bin/env python3
"""Exports the trained vision flow policy to ONNX + a chunkrt format-2 manifest.

  export.py [--ckpt out/vision/ckpt.pt] [--out rt-config/policies] [--name vision-flow]

Graph (opset 17, batch 1): x [1,16,7], t [1] (flow time), observation.state [1,14],
observation.image [1,3,64,64] (normalised) -> out [1,16,7], the velocity field. Checked
against torch with onnxruntime; one call timed on one thread.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import DA, H, S, make_dataset  # noqa: E402
from evaluate import load  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
NAMES = ["x", "t", "observation.state", "observation.image"]


def f32(x):
    s = str(np.float32(x))
    if not any(c in s for c in ".en"):
        s += ".0"
    return s


def f64(x):
    s = repr(float(x))
    if not any(c in s for c in ".en"):
        s += ".0"
    return s


def arr(v, fmt=f32, per_line=8, indent="    "):
    v = list(np.asarray(v).ravel())
    if len(v) <= per_line:
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    lines = [indent + ", ".join(fmt(x) for x in v[i:i + per_line]) + "," for i in range(0, len(v), per_line)]
    return "[\n" + "\n".join(lines) + "\n]"


def example(g, i):
    return (torch.randn(1, H, DA, generator=g), torch.tensor([i / 8.0], dtype=torch.float32),
            torch.randn(1, 2 * DA, generator=g), torch.randn(1, 3, S, S, generator=g))


def export(model, path):
    import onnx
    import onnxruntime as ort
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        torch.onnx.export(model, example(g, 0), path, dynamo=False, opset_version=17, input_names=NAMES,
                          output_names=["out"], do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    worst = 0.0
    with torch.no_grad():
        for i in range(8):
            inp = example(g, i)
            ref = model(*inp).numpy()
            got = sess.run(["out"], {n: v.numpy() for n, v in zip(NAMES, inp)})[0]
            worst = max(worst, float(np.abs(ref - got).max()))
    feed = {n: v.numpy() for n, v in zip(NAMES, example(g, 3))}
    for _ in range(200):
        sess.run(["out"], feed)
    ts = []
    for _ in range(2000):
        t0 = time.perf_counter()
        sess.run(["out"], feed)
        ts.append(time.perf_counter() - t0)
    ts = np.array(ts) * 1e3
    return worst, {"median_ms": float(np.median(ts)), "mean_ms": float(ts.mean()), "p99_ms": float(np.percentile(ts, 99))}


def domain(state):
    """Declared operating domain over the raw state [N, 14] (as scripts/lerobot/lerobot_demos.py)."""
    ridge = 1e-4
    obs = state.astype(np.float64)
    cov = np.cov(obs.T)
    prec = np.linalg.inv(cov + ridge * np.eye(cov.shape[0]))
    c = obs - obs.mean(0)
    d2 = np.einsum("ni,ij,nj->n", c, prec, c)
    span = obs.max(0) - obs.min(0)
    return {"obs_min": obs.min(0) - 0.1 * span - 0.02, "obs_max": obs.max(0) + 0.1 * span + 0.02,
            "mean": obs.mean(0), "cov": cov, "ridge": ridge, "d_max": float(np.sqrt(d2.max()) * 1.5)}


def write_manifest(path, model_file, st, ck, dom):
    with open(os.path.join(os.path.dirname(path), model_file), "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    L = [
        "# chunkrt policy manifest, written by scripts/vision/export.py: an image-conditioned",
        "# flow-matching policy; the goal is seen only in the synthetic camera's image",
        "# (crates/chunkrt-camera, scripts/vision/scene.py).",
        "format = 2",
        'kind = "diffusion"',
        f'model_file = "{model_file}"',
        f'model_sha256 = "{sha}"',
        f"d_a = {DA}",
        "dt_ms = 50.0",
        "",
        "[origin]",
        f'framework = "torch {torch.__version__.split("+")[0]}"',
        'policy = "flow"',
        'checkpoint = "vision-flow"',
        "",
        "[observation]",
        "history = 1",
        'state = "planned"',
        "",
        "[[observation.inputs]]",
        'name = "observation.state"',
        'sources = ["joint_pos", "joint_vel"]',
        'normalisation = "mean_std"',
        f"mean = {arr(st['st_mean'])}",
        f"std = {arr(st['st_std'])}",
        "",
        "[[observation.images]]",
        'name = "observation.image"',
        'camera = "synthetic"',
        f"height = {S}",
        f"width = {S}",
        'normalisation = "mean_std"',
        f"mean = {arr(st['img_mean'])}",
        f"std = {arr(st['img_std'])}",
        "",
        "[action]",
        'encoding = "absolute"',
        'normalisation = "min_max"',
        f"min = {arr(st['a_min'])}",
        f"max = {arr(st['a_max'])}",
        f"horizon = {H}",
        "start = 0",
        f"len = {H}",
        "",
        "[io]",
        'x = "x"',
        't = "t"',
        'out = "out"',
        "",
        "[flow]",
        'method = "euler"',
        "noise_at = 0.0",
        "",
        "[sampler]",
        "steps = 10",
        "min_steps = 2",
        "seed = 7",
        "",
        "[task]",
        "goal_tolerance_rad = 0.05",
        "# the goals are in the image",
        "goals = []",
        "",
        "[training]",
        "# data_sha256: SHA-256 of the demonstration arrays (scripts/vision/common.py data_digest):",
        "# state [N,14] float32, target (u, v) [N,2] float64, action [N,16,7] float32, LE.",
        "# samples = frames, demonstrations = goal-to-goal segments + recovery branches.",
        f'data_sha256 = "{ck["data_sha256"]}"',
        f"samples = {int(ck['info']['frames'])}",
        f"demonstrations = {int(ck['info']['segments'] + ck['info']['branches'])}",
        f"seed = {int(ck['seed'])}",
        'script = "scripts/vision/train.py"',
        f"final_loss = {float(ck['loss']):.6g}",
        "",
        "[domain]",
        "# Declared operating domain of the raw current-step observation, the concatenation of the",
        "# inputs' sources in input order: joint_pos(7), joint_vel(7) (the image is not in it).",
        "# Per-dim bounds, and a Mahalanobis support check d^2 = (o - mean)^T (covariance + ridge I)^-1 (o - mean).",
        f"obs_min = {arr(dom['obs_min'], fmt=f64)}",
        f"obs_max = {arr(dom['obs_max'], fmt=f64)}",
        f"mean = {arr(dom['mean'], fmt=f64)}",
        f"ridge = {f64(dom['ridge'])}",
        f"mahalanobis_max = {f64(dom['d_max'])}",
        "covariance = [",
    ]
    L += ["    " + arr(row, fmt=f64, per_line=999) + "," for row in dom["cov"]]
    L += ["]", ""]
    with open(path, "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="out/vision/ckpt.pt")
    ap.add_argument("--out", default=os.path.join(REPO, "rt-config", "policies"))
    ap.add_argument("--name", default="vision-flow")
    args = ap.parse_args()
    torch.set_num_threads(2)
    model, st, ck = load(args.ckpt)
    onnx_path = os.path.join(args.out, args.name + ".onnx")
    worst, timing = export(model, onnx_path)
    size = os.path.getsize(onnx_path)
    print(f"wrote {onnx_path} ({size / 1e6:.2f} MB); onnxruntime vs torch max abs diff {worst:.3g}; "
          f"one call, 1 thread: median {timing['median_ms']:.3f} ms, mean {timing['mean_ms']:.3f}, p99 {timing['p99_ms']:.3f}")
    state, _, _, _, info = make_dataset(ck["seed"])
    assert info["frames"] == ck["info"]["frames"]
    path = os.path.join(args.out, args.name + ".toml")
    write_manifest(path, args.name + ".onnx", st, ck, domain(state))
    print(f"wrote {path}")
    print(json.dumps({"max_abs_diff": worst, "bytes": size, **timing}))


if __name__ == "__main__":
    main()
