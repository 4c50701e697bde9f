#!/usr/bin/env python3
"""Model goldens for chunkrt's LeRobot support, produced by LeRobot's OWN inference path.

  golden_lerobot.py --diffusion CKPT_DIR --act CKPT_DIR [--policies rt-config/policies]

writes crates/chunkrt-policy/tests/golden/lerobot/:
  diffusion-ddpm.json, diffusion-ddim.json, act.json   lists of cases:
    manifest         repo-relative path of the manifest the case is for
    observations     [{joint_pos, joint_vel, goal}] x history, oldest first, raw values
                     (frames of the demonstrations in CKPT_DIR/demonstrations.npz)
    initial_noise    [horizon * d_a]        diffusion: the noise= passed to LeRobot
    step_noise       [[horizon * d_a], ...] DDPM: what scheduler.step drew (randn_tensor
                     replaced by a seeded source; t > 0 steps, in order)
    sequence         [horizon * d_a]        the normalised sequence (diffusion: the output of
                     DiffusionModel.conditional_sample; ACT: the chunk)
    actions          [[d_a]] x len          the manifest's setpoints [start, start + len) of
                     `sequence`, unnormalised by LeRobot's postprocessor
    lerobot_actions  [[d_a]] x n_action_steps  what predict_action_chunk + the postprocessor
                     return
  act-ensemble.json  {"coeff", "chunks": [[chunk_size * d_a]] (normalised ACT chunks of
                     consecutive demo frames, as select_action feeds them),
                     "actions": [[d_a]] (ACTTemporalEnsembler.update's returns, normalised)}
Path: raw frame -> preprocessor (per frame, as select_action queues them) -> stacked history
-> policy.predict_action_chunk(batch, noise=...) -> postprocessor. The diffusion checkpoint's
config is switched to the manifest's scheduler type and step count.

Then (always, or alone with --check) a fresh interpreter without torch re-derives every
golden from the exported ONNX and the manifests (scripts/lerobot/chunkrt_ref.py: numpy +
onnxruntime) and reports the largest difference.
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
OUT = os.path.join(REPO, "crates", "chunkrt-policy", "tests", "golden", "lerobot")
sys.path.insert(0, HERE)


def f32list(a):
    return [float(np.float32(v)) for v in np.asarray(a, dtype=np.float32).ravel()]


def rows(a):
    a = np.asarray(a, np.float32)
    return [f32list(r) for r in a.reshape(-1, a.shape[-1])]


def pick_frames(d, n_hist):
    """Anchor frames for the cases: the start of a cycle from rest, mid-segment, right after a
    goal switch (history = last frame of the previous segment, old goal), a perturbed
    recovery branch, and settling at a goal."""
    ep_from, ep_to, anchor = d["ep_from"], d["ep_to"], d["anchor"]
    lens = ep_to - ep_from
    nominal = [e for e in range(len(ep_from)) if lens[e] > 40]
    lead = [e for e in nominal if not anchor[ep_from[e]]]
    branch = [e for e in range(len(ep_from)) if lens[e] <= 40]
    frames = [
        ("cycle start", int(ep_from[nominal[0]] + 1)),
        ("mid segment", int(ep_from[nominal[3]] + 20)),
        ("after goal switch", int(ep_from[lead[1]] + 1)),
        ("recovery branch", int(ep_from[branch[5]] + 3)),
        ("settling at goal", int(ep_to[nominal[4]] - 10)),
    ]
    out = []
    for name, i in frames:
        lo = ep_from[d["episode_index"][i]]
        hist = [max(lo, i - k) for k in range(n_hist - 1, -1, -1)]
        out.append((name, i, hist))
    return out


def raw_obs(d, i):
    s = d["state"][i]
    return {"joint_pos": f32list(s[:7]), "joint_vel": f32list(s[7:]), "goal": f32list(d["env"][i])}


def generate(args):
    import torch

    torch.set_num_threads(2)
    import diffusers.schedulers.scheduling_ddpm as sddpm
    from lerobot.policies.act.modeling_act import ACTTemporalEnsembler
    from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_STATE

    from chunkrt_ref import Manifest
    from export_lerobot import load

    def manifest(name):
        path = os.path.join(args.policies, name)
        return Manifest(path), os.path.relpath(os.path.abspath(path), REPO)

    def pre_frame(pre, d, i):
        b = pre({OBS_STATE: torch.from_numpy(d["state"][i].copy()), OBS_ENV_STATE: torch.from_numpy(d["env"][i].copy())})
        return b[OBS_STATE], b[OBS_ENV_STATE]

    os.makedirs(OUT, exist_ok=True)
    # ------------------------------------------------------------ diffusion
    d = dict(np.load(os.path.join(args.diffusion, "demonstrations.npz")))
    for sched in ("ddpm", "ddim"):
        man, rel = manifest(f"{args.diffusion_name}-{sched}.toml")
        policy, pre, post = load(args.diffusion, scheduler=sched, steps=man.steps)
        cfg = policy.config
        H, A = cfg.horizon, cfg.output_features[ACTION].shape[0]
        assert (man.horizon, man.start, man.history) == (H, cfg.n_obs_steps - 1, cfg.n_obs_steps)
        captured = {}
        orig_cs = policy.diffusion.conditional_sample

        def cs(*a, **k):
            out = orig_cs(*a, **k)
            captured["seq"] = out.detach().clone()
            return out

        policy.diffusion.conditional_sample = cs
        cases = []
        for ci, (name, i, hist) in enumerate(pick_frames(d, cfg.n_obs_steps)):
            g = np.random.default_rng(7000 + ci)
            init = g.standard_normal((1, H, A)).astype(np.float32)
            drawn = []

            def fake_randn(shape, generator=None, device=None, dtype=None, layout=None):
                z = g.standard_normal(tuple(shape)).astype(np.float32)
                drawn.append(z.ravel().copy())
                return torch.from_numpy(z)

            sddpm.randn_tensor = fake_randn
            frames = [pre_frame(pre, d, j) for j in hist]
            batch = {OBS_STATE: torch.stack([s for s, _ in frames], dim=1),
                     OBS_ENV_STATE: torch.stack([e for _, e in frames], dim=1)}
            policy.reset()
            with torch.no_grad():
                chunk = policy.predict_action_chunk(batch, noise=torch.from_numpy(init.copy()))
                lerobot_actions = post(chunk)
                seq = captured["seq"]
                acts = post(seq[:, man.start:man.start + man.len])
            assert chunk.shape == (1, cfg.n_action_steps, A)
            assert torch.equal(chunk, seq[:, cfg.n_obs_steps - 1:cfg.n_obs_steps - 1 + cfg.n_action_steps])
            case = {"manifest": rel, "observations": [raw_obs(d, j) for j in hist], "initial_noise": f32list(init)}
            if sched == "ddpm":
                case["step_noise"] = [f32list(z) for z in drawn]
            else:
                assert not drawn
            case.update({"sequence": f32list(seq.numpy()), "actions": rows(acts.numpy()),
                         "lerobot_actions": rows(lerobot_actions.numpy())})
            cases.append(case)
            print(f"  {sched} case {ci} ({name}, frame {i}, history {hist}): {len(drawn)} step noises, "
                  f"first action {np.round(acts.numpy()[0, 0], 3).tolist()}")
        path = os.path.join(OUT, f"diffusion-{sched}.json")
        with open(path, "w") as fh:
            json.dump(cases, fh, separators=(",", ":"))
            fh.write("\n")
        print(f"wrote {os.path.relpath(path, REPO)} ({len(cases)} cases)")
    # ------------------------------------------------------------ ACT
    d = dict(np.load(os.path.join(args.act, "demonstrations.npz")))
    man, rel = manifest(f"{args.act_name}.toml")
    policy, pre, post = load(args.act)
    cfg = policy.config
    cases = []
    for ci, (name, i, hist) in enumerate(pick_frames(d, 1)):
        s, e = pre_frame(pre, d, i)
        policy.reset()
        with torch.no_grad():
            chunk = policy.predict_action_chunk({OBS_STATE: s, OBS_ENV_STATE: e})
            acts = post(chunk[:, man.start:man.start + man.len])
            lerobot_actions = post(chunk[:, :cfg.n_action_steps])
        cases.append({"manifest": rel, "observations": [raw_obs(d, i)], "sequence": f32list(chunk.numpy()),
                      "actions": rows(acts.numpy()), "lerobot_actions": rows(lerobot_actions.numpy())})
        print(f"  act case {ci} ({name}, frame {i}): first action {np.round(acts.numpy()[0, 0], 3).tolist()}")
    path = os.path.join(OUT, "act.json")
    with open(path, "w") as fh:
        json.dump(cases, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {os.path.relpath(path, REPO)} ({len(cases)} cases)")
    # Temporal ensembling: 6 consecutive frames of a nominal episode.
    coeff = 0.01
    ens = ACTTemporalEnsembler(coeff, cfg.chunk_size)
    ens.reset()
    i0 = pick_frames(d, 1)[1][1]
    chunks, outs = [], []
    for i in range(i0, i0 + 6):
        s, e = pre_frame(pre, d, i)
        with torch.no_grad():
            c = policy.predict_action_chunk({OBS_STATE: s, OBS_ENV_STATE: e})
            a = ens.update(c.clone())
        chunks.append(f32list(c.numpy()))
        outs.append(f32list(a.numpy()))
    path = os.path.join(OUT, "act-ensemble.json")
    with open(path, "w") as fh:
        json.dump({"coeff": coeff, "chunks": chunks, "actions": outs}, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"wrote {os.path.relpath(path, REPO)} (6 chunks)")


def check():
    """numpy + onnxruntime only: every golden re-derived from the ONNX and the manifests."""
    assert "torch" not in sys.modules
    from chunkrt_ref import Ensembler, Manifest, infer

    worst_all = 0.0
    for name in ("diffusion-ddpm", "diffusion-ddim", "act"):
        with open(os.path.join(OUT, f"{name}.json")) as fh:
            cases = json.load(fh)
        mans = {}
        worst = {"sequence": 0.0, "actions": 0.0, "lerobot_actions": 0.0}
        for c in cases:
            man = mans.setdefault(c["manifest"], Manifest(os.path.join(REPO, c["manifest"])))
            seq, acts = infer(man, c["observations"], initial_noise=c.get("initial_noise"),
                              step_noise=c.get("step_noise", [] if man.kind == "diffusion" else None))
            worst["sequence"] = max(worst["sequence"], float(np.abs(seq.ravel() - np.array(c["sequence"], np.float32)).max()))
            worst["actions"] = max(worst["actions"], float(np.abs(acts - np.array(c["actions"], np.float32)).max()))
            n = len(c["lerobot_actions"])
            la = np.array(c["lerobot_actions"], np.float32)
            off = 0 if man.kind == "chunk" else 0  # lerobot_actions start at the current step = start
            worst["lerobot_actions"] = max(worst["lerobot_actions"], float(np.abs(acts[off:off + n] - la).max()))
        print(f"check {name}: {len(cases)} cases, max abs diff " + ", ".join(f"{k} {v:.3g}" for k, v in worst.items()))
        worst_all = max(worst_all, *worst.values())
    with open(os.path.join(OUT, "act-ensemble.json")) as fh:
        g = json.load(fh)
    ens = None
    w = 0.0
    for c, a in zip(g["chunks"], g["actions"]):
        c = np.array(c, np.float32).reshape(-1, len(a))
        ens = ens or Ensembler(g["coeff"], len(c))
        w = max(w, float(np.abs(ens.update(c) - np.array(a, np.float32)).max()))
    print(f"check act-ensemble: max abs diff {w:.3g}")
    worst_all = max(worst_all, w)
    print(f"golden self-check (numpy + onnxruntime, no torch): max abs diff {worst_all:.3g}")
    return 0 if worst_all <= 1e-5 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--diffusion", help="diffusion checkpoint directory")
    ap.add_argument("--act", help="ACT checkpoint directory")
    ap.add_argument("--policies", default=os.path.join(REPO, "rt-config", "policies"))
    ap.add_argument("--diffusion-name", default="lerobot-diffusion")
    ap.add_argument("--act-name", default="lerobot-act")
    ap.add_argument("--check", action="store_true", help="only re-derive the goldens from the ONNX (no torch)")
    args = ap.parse_args()
    if args.check:
        return check()
    if not (args.diffusion and args.act):
        ap.error("--diffusion and --act are required (or --check)")
    generate(args)
    return subprocess.call([sys.executable, os.path.abspath(__file__), "--check"])


if __name__ == "__main__":
    sys.exit(main())
