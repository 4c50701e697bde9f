#!/usr/bin/env python3
"""Reference samplers for chunkrt policies: onnxruntime + numpy, the same algorithm as the Rust
samplers in crates/chunkrt-policy (float32 state, same step order), so the two can be compared.

The noise is not drawn here: the caller passes the initial noise (Rust draws it from its seeded
ChaCha stream), which makes the comparison independent of the two languages' RNGs.

  policy_reference.py sample --manifest M --input in.json --output out.json
      in.json:  {"cases": [{"obs": [...d_obs], "noise": [...H*d_a], "steps": K,
                            "method": "euler"|"heun"|"ddim"}, ...]}
      out.json: {"cases": [{"x": [...H*d_a normalised], "chunk": [[...d_a] * H]}, ...]}
  policy_reference.py time --manifest M --calls N [--threads T]
      prints one JSON line {"per_call_ns": [...]} timing single denoiser calls (benchmarks).
"""

import argparse
import json
import os
import sys
import time
import tomllib

import numpy as np
import onnxruntime as ort


class Reference:
    def __init__(self, manifest_path, threads=1):
        with open(manifest_path, "rb") as f:
            self.m = tomllib.load(f)
        model = os.path.join(os.path.dirname(os.path.abspath(manifest_path)), self.m["model_file"])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        self.h, self.d_a, self.d_obs = self.m["horizon"], self.m["d_a"], self.m["d_obs"]
        norm = self.m["normalisation"]
        self.obs_mean = np.array(norm["obs_mean"], dtype=np.float64)
        self.obs_std = np.array(norm["obs_std"], dtype=np.float64)
        self.act_mean = np.array(norm["act_mean"], dtype=np.float64)
        self.act_std = np.array(norm["act_std"], dtype=np.float64)

    def denoise(self, obs_n, x, t):
        io = self.m["io"]
        feeds = {
            io["obs"]: obs_n.reshape(1, self.d_obs),
            io["x"]: x.reshape(1, self.h, self.d_a),
            io["t"]: np.array([t], dtype=np.float32),
        }
        return self.sess.run([io["out"]], feeds)[0].reshape(-1).astype(np.float32)

    def sample(self, obs, noise, steps, method):
        obs = np.asarray(obs, dtype=np.float64)
        obs_n = ((obs - self.obs_mean) / self.obs_std).astype(np.float32)
        x = np.asarray(noise, dtype=np.float32).copy()
        k_steps = int(steps)
        if method == "euler":
            dt = np.float32(1.0 / k_steps)
            for k in range(k_steps):
                v = self.denoise(obs_n, x, np.float32(k / k_steps))
                x = x + dt * v
        elif method == "heun":
            dt = np.float32(1.0 / k_steps)
            half = np.float32(0.5 / k_steps)
            for k in range(k_steps):
                v1 = self.denoise(obs_n, x, np.float32(k / k_steps))
                xp = x + dt * v1
                v2 = self.denoise(obs_n, xp, np.float32((k + 1) / k_steps))
                x = x + half * (v1 + v2)
        elif method == "ddim":
            sch = self.m["schedule"]
            alphas = np.array(sch["alphas_cumprod"], dtype=np.float64)
            n = sch["train_timesteps"]
            clip = np.float32(sch["clip_x0"])
            ts = np.round(np.linspace(n - 1, 0, k_steps)).astype(np.int64)
            for i, t in enumerate(ts):
                a_t = alphas[t]
                a_prev = alphas[ts[i + 1]] if i + 1 < len(ts) else 1.0
                eps = self.denoise(obs_n, x, np.float32(t))
                x0 = (x - np.float32(np.sqrt(1.0 - a_t)) * eps) / np.float32(np.sqrt(a_t))
                x0 = np.clip(x0, -clip, clip)
                x = np.float32(np.sqrt(a_prev)) * x0 + np.float32(np.sqrt(1.0 - a_prev)) * eps
        else:
            raise SystemExit(f"unknown method {method!r}")
        act = x.astype(np.float64) * self.act_std + self.act_mean
        q = obs[: self.d_a]
        chunk = q[None, :] + act.reshape(self.h, self.d_a)
        return x, chunk


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--manifest", required=True)
    s.add_argument("--input", required=True)
    s.add_argument("--output", required=True)
    t = sub.add_parser("time")
    t.add_argument("--manifest", required=True)
    t.add_argument("--calls", type=int, default=1000)
    t.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    if args.cmd == "sample":
        ref = Reference(args.manifest)
        with open(args.input) as f:
            cases = json.load(f)["cases"]
        out = []
        for c in cases:
            x, chunk = ref.sample(c["obs"], c["noise"], c["steps"], c["method"])
            out.append({"x": [float(v) for v in x], "chunk": chunk.tolist()})
        with open(args.output, "w") as f:
            json.dump({"cases": out}, f)
        return 0

    ref = Reference(args.manifest, threads=args.threads)
    rng = np.random.default_rng(0)
    obs_n = rng.standard_normal(ref.d_obs).astype(np.float32)
    x = rng.standard_normal(ref.h * ref.d_a).astype(np.float32)
    for _ in range(50):
        ref.denoise(obs_n, x, np.float32(0.5))
    per_call = []
    for _ in range(args.calls):
        t0 = time.perf_counter_ns()
        ref.denoise(obs_n, x, np.float32(0.5))
        per_call.append(time.perf_counter_ns() - t0)
    print(json.dumps({"per_call_ns": per_call}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
