#!/usr/bin/env python3
"""Golden of the exported vision flow policy for crates/chunkrt-policy/tests.

  golden_policy.py [--policies rt-config/policies]

writes crates/chunkrt-policy/tests/golden/vision/flow.json: {"manifest", "notes", "cases": [...]},
each case
  q, qdot        [7] raw planned state (float32 values)
  scene          {"q", "u", "v", "size"}: the image is scene.render(q, u, v, size)
  image          [size * size * 3] the same image, uint8, row-major [y][x][RGB]
  x0             [16 * 7] the initial noise (normalised), x at flow time 0
  out_t0         [16 * 7] the graph's output for x0 at t = 0 (one call)
  sequence       [16 * 7] x after 10 Euler steps (x += 0.1 * out at t = s / 10, float32)
  actions        [16][7]  sequence de-normalised ((x + 1) / 2 * (max - min) + min, float32)
All computed with onnxruntime on the exported graph, float32, in chunkrt's operation order
(crates/chunkrt-policy/src/sampler.rs flow; manifest2.rs Normaliser).
"""

import argparse
import json
import os
import sys
import tomllib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import expert  # noqa: E402
from scene import D1, D2, render, target_pose  # noqa: E402

REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(REPO, "crates", "chunkrt-policy", "tests", "golden", "vision")


def f32list(a):
    return [float(v) for v in np.asarray(a, np.float32).ravel()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", default=os.path.join(REPO, "rt-config", "policies"))
    args = ap.parse_args()
    import onnxruntime as ort
    man_path = os.path.join(args.policies, "vision-flow.toml")
    with open(man_path, "rb") as f:
        man = tomllib.load(f)
    sess = ort.InferenceSession(os.path.join(args.policies, man["model_file"]), providers=["CPUExecutionProvider"])
    inp = man["observation"]["inputs"][0]
    smean, sstd = np.float32(inp["mean"]), np.float32(inp["std"])
    im = man["observation"]["images"][0]
    imean, istd = np.float32(im["mean"]), np.float32(im["std"])
    amin, amax = np.float32(man["action"]["min"]), np.float32(man["action"]["max"])
    den = amax - amin
    steps = man["sampler"]["steps"]
    eps = np.float32(1e-8)

    rng = np.random.default_rng(20261202)
    cases_in = []
    g = target_pose(0.2, 0.7)
    cases_in.append((target_pose(0.5, 0.5), np.zeros(7), 0.2, 0.7, "from rest at (0.5, 0.5), target (0.2, 0.7)"))
    qs, qds = expert(target_pose(0.8, 0.3), np.zeros(7), g, [0.4])
    cases_in.append((qs[0], qds[0], 0.2, 0.7, "mid-motion on the expert's way, 0.4 s in"))
    g = target_pose(0.65, 0.35)
    cases_in.append((g + rng.normal(0, 0.004, 7), rng.normal(0, 0.01, 7), 0.65, 0.35, "near rest at the goal, arm over the target"))
    q = target_pose(0.3, 0.4) + rng.normal(0, 0.04, 7) + 0.05 * D1 - 0.03 * D2
    cases_in.append((q, rng.normal(0, 0.2, 7), 0.75, 0.8, "perturbed off the plane, moving"))
    cases = []
    for q, qd, u, v, what in cases_in:
        q = np.asarray(q, np.float32)
        qd = np.asarray(qd, np.float32)
        img = render(q.astype(np.float64), u, v, 64)
        s = (np.concatenate([q, qd]) - smean) / (sstd + eps)
        x_img = (img.astype(np.float32) / np.float32(255.0) - imean) / (istd + eps)
        x_img = np.ascontiguousarray(x_img.transpose(2, 0, 1)[None])
        x0 = rng.standard_normal((1, 16, 7)).astype(np.float32)
        feed = {"observation.state": s[None].astype(np.float32), "observation.image": x_img}
        x = x0.copy()
        dt = np.float32(1.0 / steps)
        out0 = None
        for k in range(steps):
            t = np.array([np.float32(k / steps)], np.float32)
            vel = sess.run(["out"], {"x": x, "t": t, **feed})[0]
            if k == 0:
                out0 = vel.copy()
            x = (x + dt * vel).astype(np.float32)
        acts = (x[0] + np.float32(1.0)) / np.float32(2.0) * den + amin
        ge = np.abs(acts[-1] - target_pose(u, v)).max()
        print(f"{what}: last setpoint vs the goal {ge:.4f} rad; a[0] vs q {np.abs(acts[0] - q).max():.4f}")
        cases.append({"what": what, "q": f32list(q), "qdot": f32list(qd),
                      "scene": {"q": [float(a) for a in q.astype(np.float64)], "u": float(u), "v": float(v), "size": 64},
                      "image": [int(b) for b in img.ravel()], "x0": f32list(x0), "out_t0": f32list(out0),
                      "sequence": f32list(x), "actions": [f32list(r) for r in acts]})
    os.makedirs(OUT, exist_ok=True)
    doc = {"manifest": "rt-config/policies/vision-flow.toml",
           "notes": "state normalised (x - mean) / (std + 1e-8), image pixel as f32 / 255 then (x - mean_c) / (std_c + 1e-8), "
                    "NCHW; Euler: x += 0.1f * out at t = s / 10 (f32); actions = (x + 1) / 2 * (max - min) + min (f32); "
                    "onnxruntime CPU, default threads",
           "cases": cases}
    with open(os.path.join(OUT, "flow.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"wrote {len(cases)} cases to {os.path.relpath(os.path.join(OUT, 'flow.json'), REPO)}")


if __name__ == "__main__":
    main()
