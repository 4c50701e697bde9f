#!/usr/bin/env python3
"""Closed-loop evaluation of the vision flow policy with the numpy renderer.

  evaluate.py [--ckpt out/vision/ckpt.pt] [--onnx rt-config/policies/vision-flow.onnx] [--n 20]

Every 50 ms the policy sees the planned state (the position of the chunk it plays, one frame
on, and the chunk's central-difference velocity there) and the image rendered from that
position with the current target; it samples a chunk (x0 ~ N(0, I), 10 Euler steps of the
flow, t = s / 10, float32) that replaces the plan. Success: every joint within 0.05 rad of the
goal and every |qdot| < 0.1 rad/s at some frame within 4 s.
  nominal   from rest at a previous target's pose, to a new target >= 0.35 away
  moved     the same, but at 1 s the image's target disc jumps to another target (>= 0.35
            from the first); judged on the new goal, within 4 s of the jump
With --onnx the policy runs through onnxruntime (one call per step, batch 1), else torch.
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import DA, DT, H, build_model, draw_target, normalise_image, render_batch  # noqa: E402
from scene import target_pose  # noqa: E402


def load(ckpt):
    ck = torch.load(ckpt, weights_only=False)
    st = ck["stats"]
    m = build_model(torch, st["img_mean"], st["img_std"], st["st_mean"], st["st_std"], st["a_min"], st["a_max"])
    m.load_state_dict(ck["ema"])
    return m.eval(), st, ck


class TorchPolicy:
    def __init__(self, model):
        self.m = model

    def __call__(self, x, t, s, img):
        with torch.no_grad():
            return self.m(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(s), torch.from_numpy(img)).numpy()


class OrtPolicy:
    def __init__(self, path):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    def __call__(self, x, t, s, img):
        out = []
        for i in range(len(x)):
            out.append(self.sess.run(["out"], {"x": x[i:i + 1], "t": t[i:i + 1], "observation.state": s[i:i + 1],
                                               "observation.image": img[i:i + 1]})[0])
        return np.concatenate(out)


def sample(policy, st, q, qd, uv, rng, steps=10):
    """Chunks [B, H, 7] (float32, de-normalised) for planned states (q, qd) and shown targets."""
    B = len(q)
    s = np.concatenate([q, qd], 1).astype(np.float32)
    s = (s - st["st_mean"]) / (st["st_std"] + np.float32(1e-8))
    img = normalise_image(render_batch(q.astype(np.float64), uv), st["img_mean"], st["img_std"])
    x = rng.standard_normal((B, H, DA)).astype(np.float32)
    dt = np.float32(1.0 / steps)
    for k in range(steps):
        t = np.full(B, np.float32(k / steps), np.float32)
        x = x + dt * policy(x, t, s.astype(np.float32), img)
    den = (st["a_max"] - st["a_min"]).astype(np.float32)
    return (x + np.float32(1)) / np.float32(2) * den + st["a_min"]


def rollout(policy, st, starts, targets, rng, seconds=4.0, switch=None):
    """starts, targets [B, 2] (u, v); switch: (time s, new targets [B, 2]). Returns per-run
    (success, time to success, final max error, final max speed)."""
    B = len(starts)
    q = np.stack([target_pose(*s) for s in starts]).astype(np.float64)
    qd = np.zeros_like(q)
    uv = np.array(targets, np.float64)
    t_sw = 0.0
    if switch is not None:
        t_sw = switch[0]
    n = int(round((seconds + t_sw) / DT))
    ok = np.zeros(B, bool)
    t_ok = np.full(B, np.nan)
    for k in range(n + 1):
        now = k * DT
        if switch is not None and abs(now - switch[0]) < 1e-9:
            uv = np.array(switch[1], np.float64)
        g = np.stack([target_pose(*u) for u in uv])
        if switch is None or now >= switch[0] - 1e-9:
            good = (np.abs(q - g).max(1) < 0.05) & (np.abs(qd).max(1) < 0.1)
            new = good & ~ok
            t_ok[new] = now - t_sw
            ok |= good
        if k == n:
            break
        a = sample(policy, st, q, qd, uv, rng).astype(np.float64)
        q = a[:, 1]
        qd = (a[:, 2] - a[:, 0]) / (2 * DT)
    err = np.abs(q - g).max(1)
    return ok, t_ok, err, np.abs(qd).max(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="out/vision/ckpt.pt")
    ap.add_argument("--onnx", default=None)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(2)
    model, st, ck = load(args.ckpt)
    policy = OrtPolicy(args.onnx) if args.onnx else TorchPolicy(model)
    rng = np.random.default_rng(args.seed)
    starts, targets, moved = [], [], []
    for _ in range(args.n):
        s = np.array([0.5, 0.5]) if rng.random() < 0.3 else rng.uniform(0.1, 0.9, 2)
        t = draw_target(rng, s)
        starts.append(s)
        targets.append(t)
        moved.append(draw_target(rng, t))
    res = {}
    for name, sw in (("nominal", None), ("moved", (1.0, moved))):
        ok, t_ok, err, spd = rollout(policy, st, starts, targets, rng, switch=sw)
        res[name] = {"success": float(ok.mean()), "n": args.n, "mean_final_err_rad": float(err.mean()),
                     "max_final_err_rad": float(err.max()), "mean_time_to_success_s": float(np.nanmean(t_ok)) if ok.any() else None,
                     "final_speed_max": float(spd.max())}
        print(f"{name}: success {ok.sum()}/{args.n}, final max-joint error mean {err.mean():.4f} rad "
              f"(worst {err.max():.4f}), time to success {np.nanmean(t_ok) if ok.any() else float('nan'):.2f} s, "
              f"final speed max {spd.max():.3f}", flush=True)
        for i in np.where(~ok)[0]:
            print(f"   failed: start {starts[i]}, target {targets[i]}{'' if sw is None else ' -> ' + str(moved[i])}, final err {err[i]:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
