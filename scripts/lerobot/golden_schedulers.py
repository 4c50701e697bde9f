#!/usr/bin/env python3
"""Scheduler goldens: diffusers' own DDPMScheduler / DDIMScheduler stepped on a small sample.

Writes crates/chunkrt-policy/tests/golden/lerobot/schedulers.json, a list of cases. Each case:
  name, type ("ddpm" | "ddim"), prediction_type, clip_sample, clip_sample_range,
  timestep_spacing, steps_offset, variance_type (ddpm only), set_alpha_to_one (ddim only),
  eta (ddim only), train_timesteps, steps, beta_schedule (informative),
  alphas_cumprod  [train_timesteps]   the scheduler's own f32 table
  timesteps       [steps]             ints from set_timesteps(steps)
  x_init          [12]                the initial sample (N(0,1), seeded)
  model_outputs   [steps][12]         fed as model_output to step s (N(0,1), seeded)
  noise           [k][12]             what randn_tensor returned, in order (DDPM: every step
                                      with t > 0; DDIM: every step when eta > 0; else [])
  outputs         [steps][12]         prev_sample after each step
All floats are f32 values written as float(np.float32(v)) (exact round trip).
Run: .venv-lerobot/bin/python scripts/lerobot/golden_schedulers.py
"""

import itertools
import json
import os
import sys

import numpy as np
import torch

import diffusers
import diffusers.schedulers.scheduling_ddim as sddim
import diffusers.schedulers.scheduling_ddpm as sddpm
from diffusers import DDIMScheduler, DDPMScheduler

N = 12
TRAIN_T = 100
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "crates", "chunkrt-policy",
                   "tests", "golden", "lerobot", "schedulers.json")


def f32list(a):
    return [float(np.float32(v)) for v in np.asarray(a, dtype=np.float32).ravel()]


def run_case(seed, type_, prediction_type, clip_sample, timestep_spacing, steps=10, variance_type="fixed_small",
             eta=0.0, set_alpha_to_one=True, steps_offset=0, clip_sample_range=1.0):
    common = dict(num_train_timesteps=TRAIN_T, beta_schedule="squaredcos_cap_v2", prediction_type=prediction_type,
                  clip_sample=clip_sample, clip_sample_range=clip_sample_range, timestep_spacing=timestep_spacing,
                  steps_offset=steps_offset)
    if type_ == "ddpm":
        sched = DDPMScheduler(variance_type=variance_type, **common)
    else:
        sched = DDIMScheduler(set_alpha_to_one=set_alpha_to_one, **common)
    sched.set_timesteps(steps)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N).astype(np.float32)
    outs = rng.standard_normal((steps, N)).astype(np.float32)
    noise_rng = np.random.default_rng(seed + 100000)
    drawn = []

    def fake_randn(shape, generator=None, device=None, dtype=None, layout=None):
        z = torch.from_numpy(noise_rng.standard_normal(tuple(shape)).astype(np.float32))
        drawn.append(z.numpy().ravel().copy())
        return z.to(dtype=dtype or torch.float32)

    sddpm.randn_tensor = fake_randn
    sddim.randn_tensor = fake_randn
    sample = torch.from_numpy(x.copy()).reshape(1, N)
    results = []
    for s, t in enumerate(sched.timesteps):
        m = torch.from_numpy(outs[s].copy()).reshape(1, N)
        if type_ == "ddpm":
            sample = sched.step(m, t, sample, generator=None).prev_sample
        else:
            sample = sched.step(m, t, sample, eta=eta, generator=None).prev_sample
        assert sample.dtype == torch.float32
        results.append(f32list(sample.numpy()))
    case = {
        "name": "",
        "type": type_,
        "prediction_type": prediction_type,
        "clip_sample": bool(clip_sample),
        "clip_sample_range": float(clip_sample_range),
        "timestep_spacing": timestep_spacing,
        "steps_offset": int(steps_offset),
    }
    if type_ == "ddpm":
        case["variance_type"] = variance_type
    else:
        case["set_alpha_to_one"] = bool(set_alpha_to_one)
        case["eta"] = float(eta)
    case.update({
        "train_timesteps": TRAIN_T,
        "steps": steps,
        "beta_schedule": "squaredcos_cap_v2",
        "alphas_cumprod": f32list(sched.alphas_cumprod.numpy()),
        "timesteps": [int(v) for v in sched.timesteps.numpy()],
        "x_init": f32list(x),
        "model_outputs": [f32list(o) for o in outs],
        "noise": [f32list(z) for z in drawn],
        "outputs": results,
    })
    parts = [type_, prediction_type, "clip" if clip_sample else "noclip", timestep_spacing, f"n{steps}"]
    if type_ == "ddpm" and variance_type != "fixed_small":
        parts.append(variance_type)
    if type_ == "ddim" and eta:
        parts.append(f"eta{eta}")
    if type_ == "ddim" and not set_alpha_to_one:
        parts.append("alpha1false")
    if steps_offset:
        parts.append(f"offset{steps_offset}")
    case["name"] = "-".join(parts)
    return case


def np_step(c, s, x, m, noise_iter):
    """Reference step in plain f32 numpy (IEEE sqrt): what a reimplementation computes."""
    f = np.float32
    acp = np.array(c["alphas_cumprod"], np.float32)
    ts = c["timesteps"]
    T, n = c["train_timesteps"], c["steps"]
    t = ts[s]
    if c["type"] == "ddpm":
        prev = ts[s + 1] if s + 1 < n else -1
        one = f(1)
    else:
        prev = t - T // n
        one = f(1) if c["set_alpha_to_one"] else acp[0]
    a_t = acp[t]
    a_p = acp[prev] if prev >= 0 else one
    b_t = f(1) - a_t
    b_p = f(1) - a_p
    sa, sb = np.sqrt(a_t), np.sqrt(b_t)
    pt = c["prediction_type"]
    if pt == "epsilon":
        x0 = (x - sb * m) / sa
        e = m
    elif pt == "sample":
        x0 = m
        e = (x - sa * x0) / sb
    else:
        x0 = sa * x - sb * m
        e = sa * m + sb * x
    if c["clip_sample"]:
        r = f(c["clip_sample_range"])
        x0 = np.clip(x0, -r, r)
    if c["type"] == "ddpm":
        ca = a_t / a_p
        cb = f(1) - ca
        out = ((np.sqrt(a_p) * cb) / b_t) * x0 + ((np.sqrt(ca) * b_p) / b_t) * x
        if t > 0:
            z = next(noise_iter)
            var = max((f(1) - a_p) / (f(1) - a_t) * cb, f(1e-20))
            vt = c["variance_type"]
            if vt == "fixed_small":
                out = out + np.sqrt(var) * z
            elif vt == "fixed_small_log":
                out = out + np.exp(f(0.5) * np.log(var)) * z
            else:  # fixed_large
                out = out + np.sqrt(cb) * z
        return out
    var = (b_p / b_t) * (f(1) - a_t / a_p)
    std = f(c["eta"]) * np.sqrt(var)
    out = np.sqrt(a_p) * x0 + np.sqrt(f(1) - a_p - std * std) * e
    if c["eta"] > 0:
        out = out + std * next(noise_iter)
    return out


def verify(cases):
    worst = 0.0
    for c in cases:
        x = np.array(c["x_init"], np.float32)
        noise_iter = iter(np.array(z, np.float32) for z in c["noise"])
        for s in range(c["steps"]):
            x = np_step(c, s, x, np.array(c["model_outputs"][s], np.float32), noise_iter)
            ref = np.array(c["outputs"][s], np.float32)
            # relative to max(1, |ref|): t = 99 (acp ~2.4e-7) without clipping makes values ~1e3
            d = float((np.abs(x - ref) / np.maximum(1.0, np.abs(ref))).max())
            worst = max(worst, d)
        assert next(noise_iter, None) is None, c["name"]
        c["_check"] = d
    return worst


def main():
    torch.set_num_threads(2)
    cases = []
    seed = 1000
    for type_, pred, clip, spacing in itertools.product(("ddpm", "ddim"), ("epsilon", "sample", "v_prediction"),
                                                        (True, False), ("leading", "trailing", "linspace")):
        seed += 1
        cases.append(run_case(seed, type_, pred, clip, spacing))
    extras = [
        dict(type_="ddpm", prediction_type="epsilon", clip_sample=True, timestep_spacing="leading",
             variance_type="fixed_small_log"),
        dict(type_="ddpm", prediction_type="epsilon", clip_sample=True, timestep_spacing="leading",
             variance_type="fixed_large"),
        dict(type_="ddim", prediction_type="epsilon", clip_sample=True, timestep_spacing="leading", eta=0.5),
        dict(type_="ddim", prediction_type="epsilon", clip_sample=True, timestep_spacing="leading",
             set_alpha_to_one=False, steps_offset=1),
    ]
    for type_ in ("ddpm", "ddim"):
        for steps in (7, 100):
            extras.append(dict(type_=type_, prediction_type="epsilon", clip_sample=True,
                               timestep_spacing="leading", steps=steps))
    for kw in extras:
        seed += 1
        cases.append(run_case(seed, **kw))
    names = [c["name"] for c in cases]
    assert len(set(names)) == len(names), names
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(cases, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(cases)} cases to {os.path.normpath(OUT)} (diffusers {diffusers.__version__}, torch {torch.__version__})")
    worst = verify(cases)
    for c in cases:
        print(f"  {c['name']:50s} timesteps {c['timesteps'][:10]} noise draws {len(c['noise'])}"
              f"  numpy-vs-diffusers rel {c.pop('_check'):.2e}")
    print(f"numpy f32 reimplementation (IEEE sqrt) vs diffusers: max |diff| / max(1, |ref|) {worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
