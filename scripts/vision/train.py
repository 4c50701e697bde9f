#!/usr/bin/env python3
"""Trains the image-conditioned flow-matching policy (rectified flow, noise at t = 0) on the
expert demonstrations of common.make_dataset, images rendered on the fly.

  train.py [--minutes 20] [--out out/vision/ckpt.pt]

The graph's velocity is the rectified-flow field toward the network's predicted sequence,
v(x, t) = (a_hat - x) / (1 - t) (x1-prediction); the loss is the flow-matching loss on that
parametrisation weighted by (1 - t)^2, i.e. MSE(a_hat, a_norm) (the expert is deterministic,
so the data given an observation is a point). Plus an auxiliary MSE of the target's (u, v)
read from the image keypoints (a training-only head, not exported). EMA weights (0.999).
"""

import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import DA, H, build_model, data_digest, make_dataset, normalise_image, render_batch  # noqa: E402

SEED = 20261201


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--out", default="out/vision/ckpt.pt")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--init", default=None, help="a checkpoint whose image encoder (enc, aux) starts the run")
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)

    state, uv, act, kinds, info = make_dataset(SEED)
    N = len(state)
    print("data", info, flush=True)
    st_mean = state.astype(np.float64).mean(0).astype(np.float32)
    st_std = state.astype(np.float64).std(0).astype(np.float32)
    a_min = act.reshape(-1, DA).min(0)
    a_max = act.reshape(-1, DA).max(0)
    j = rng.integers(0, N, 8192)
    px = render_batch(state[j, :7].astype(np.float64), uv[j]).reshape(-1, 3).astype(np.float64) / 255.0
    img_mean = px.mean(0).astype(np.float32)
    img_std = px.std(0).astype(np.float32)
    stats = {"st_mean": st_mean, "st_std": st_std, "a_min": a_min, "a_max": a_max,
             "img_mean": img_mean, "img_std": img_std}
    model = build_model(torch, img_mean, img_std, st_mean, st_std, a_min, a_max)
    if args.init:
        prev = torch.load(args.init, weights_only=False)["ema"]
        enc = {k: v for k, v in prev.items() if k.startswith(("enc.", "aux."))}
        model.load_state_dict(enc, strict=False)
        print(f"image encoder from {args.init} ({len(enc)} tensors)", flush=True)
    ema = copy.deepcopy(model).eval()
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)

    state_n = torch.from_numpy((state - st_mean) / (st_std + np.float32(1e-8)))
    act_n = torch.from_numpy(2.0 * (act - a_min) / (a_max - a_min) - 1.0).float()
    uv_t = torch.from_numpy(((uv - 0.5) * 2.0).astype(np.float32))
    B = args.batch
    budget = args.minutes * 60.0
    t0 = time.time()
    step, run, run_aux, last_save = 0, None, None, t0
    log = []

    def save(final=False):
        torch.save({"ema": ema.state_dict(), "stats": stats, "info": info, "step": step,
                    "loss": run, "aux": run_aux, "seconds": time.time() - t0,
                    "data_sha256": data_digest(state, uv, act), "seed": SEED, "log": log}, args.out)

    while True:
        el = time.time() - t0
        if el > budget:
            break
        frac = el / budget
        lr = args.lr * min(1.0, (step + 1) / 200) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        idx = rng.integers(0, N, B)
        img = torch.from_numpy(normalise_image(render_batch(state[idx, :7].astype(np.float64), uv[idx]),
                                               img_mean, img_std))
        feat = model.features(img)
        aux = ((model.aux(feat) - uv_t[idx]) ** 2).mean()
        a_hat = model.predict(feat, state_n[idx])
        loss = ((a_hat - act_n[idx]) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        (loss + aux).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            d = min(0.999, (1 + step) / (10 + step))
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.mul_(d).add_(pm.detach(), alpha=1 - d)
            for be, bm in zip(ema.buffers(), model.buffers()):
                be.copy_(bm)
        lv, la = float(loss.detach()), float(aux.detach())
        run = lv if run is None else 0.99 * run + 0.01 * lv
        run_aux = la if run_aux is None else 0.99 * run_aux + 0.01 * la
        step += 1
        if step % 200 == 0:
            log.append([step, round(time.time() - t0, 1), run, run_aux])
            print(f"step {step} {time.time() - t0:.0f}s lr {lr:.2e} loss {run:.5f} aux {run_aux:.6f} "
                  f"(uv px err ~{math.sqrt(run_aux / 2) / 2 * 48:.2f})", flush=True)
        if time.time() - last_save > 120:
            save()
            last_save = time.time()
    save(True)
    print(json.dumps({"steps": step, "seconds": round(time.time() - t0, 1), "final_loss": run, "aux": run_aux}))


if __name__ == "__main__":
    main()
