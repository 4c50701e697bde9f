#!/usr/bin/env python3
"""Trains a LeRobot 0.6.1 DiffusionPolicy or ACTPolicy on the simulated arm's demonstrations
(scripts/lerobot/lerobot_demos.py), in memory (no LeRobotDataset, no hub), on the CPU, and
saves a LeRobot checkpoint directory: policy.save_pretrained + the pre/post processors, plus
  chunkrt.json         what a chunkrt manifest needs that LeRobot does not store: the frame
                       period, the task (goals), which arm state the observation is, the data
                       digest/counts/final loss, and the operating domain of the raw
                       current-step observation [state, environment_state]
  demonstrations.npz   the demonstration arrays (used by golden_lerobot.py / closed_loop.py)

Windows are built as LeRobotDataset builds them (delta indices from the config, clamped to
the episode, action_is_pad), normalised by the checkpoint's own preprocessor.

  .venv-lerobot/bin/python scripts/lerobot/train_lerobot.py --policy diffusion --out DIR
  .venv-lerobot/bin/python scripts/lerobot/train_lerobot.py --policy act --out DIR
"""

import argparse
import copy
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lerobot_demos as demos  # noqa: E402

warnings.filterwarnings("ignore")

from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature  # noqa: E402
from lerobot.utils.constants import ACTION, OBS_ENV_STATE, OBS_STATE  # noqa: E402

SEED = 20260201
DOF = demos.DOF


def build_config(kind, steps):
    feats = {
        OBS_STATE: PolicyFeature(FeatureType.STATE, (2 * DOF,)),
        OBS_ENV_STATE: PolicyFeature(FeatureType.ENV, (DOF,)),
    }
    outs = {ACTION: PolicyFeature(FeatureType.ACTION, (DOF,))}
    if kind == "diffusion":
        from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig

        return DiffusionConfig(
            input_features=feats,
            output_features=outs,
            n_obs_steps=2,
            horizon=16,
            n_action_steps=8,
            down_dims=(64, 128),
            diffusion_step_embed_dim=64,
            noise_scheduler_type="DDPM",
            num_train_timesteps=100,
            beta_schedule="squaredcos_cap_v2",
            prediction_type="epsilon",
            clip_sample=True,
            clip_sample_range=1.0,
            num_inference_steps=steps,
            normalization_mapping={
                "STATE": NormalizationMode.MIN_MAX,
                "ENV": NormalizationMode.MIN_MAX,
                "ACTION": NormalizationMode.MIN_MAX,
            },
            pretrained_backbone_weights=None,
            device="cpu",
        )
    from lerobot.policies.act.configuration_act import ACTConfig

    return ACTConfig(
        input_features=feats,
        output_features=outs,
        n_obs_steps=1,
        chunk_size=16,
        n_action_steps=16,
        dim_model=128,
        n_heads=4,
        dim_feedforward=512,
        n_encoder_layers=2,
        n_decoder_layers=1,
        n_vae_encoder_layers=2,
        latent_dim=16,
        use_vae=True,
        pretrained_backbone_weights=None,
        normalization_mapping={
            "STATE": NormalizationMode.MEAN_STD,
            "ENV": NormalizationMode.MEAN_STD,
            "ACTION": NormalizationMode.MEAN_STD,
        },
        device="cpu",
    )


def feature_stats(x):
    x64 = x.astype(np.float64)
    return {
        "min": torch.from_numpy(x.min(0).astype(np.float32)),
        "max": torch.from_numpy(x.max(0).astype(np.float32)),
        "mean": torch.from_numpy(x64.mean(0).astype(np.float32)),
        "std": torch.from_numpy(x64.std(0).astype(np.float32)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", choices=["diffusion", "act"], required=True)
    ap.add_argument("--out", required=True, help="checkpoint directory to write")
    ap.add_argument("--minutes", type=float, default=10.0, help="wall-clock training budget")
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--cycles", type=int, default=120)
    ap.add_argument("--branches", type=int, default=8, help="recovery branches per nominal segment")
    ap.add_argument("--inference-steps", type=int, default=10, help="diffusion: num_inference_steps")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)

    t0 = time.time()
    d = demos.make_episodes(rng, cycles=args.cycles, branches_per_segment=args.branches)
    digest = demos.data_digest(d)
    anchors = np.nonzero(d["anchor"])[0]
    n_eps = len(d["ep_from"])
    print(f"demonstrations: {n_eps} episodes, {len(d['state'])} frames, {len(anchors)} anchors, "
          f"sha256 {digest} ({time.time() - t0:.1f}s)")

    cfg = build_config(args.policy, args.inference_steps)
    stats = {OBS_STATE: feature_stats(d["state"]), OBS_ENV_STATE: feature_stats(d["env"]),
             ACTION: feature_stats(d["action"])}
    if args.policy == "diffusion":
        from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
        from lerobot.policies.diffusion.processor_diffusion import make_diffusion_pre_post_processors

        policy = DiffusionPolicy(cfg)
        pre, post = make_diffusion_pre_post_processors(cfg, dataset_stats=stats)
        lr = args.lr or 1e-3
        opt = torch.optim.AdamW(policy.parameters(), lr=lr, betas=(0.95, 0.999), eps=1e-8, weight_decay=1e-6)
        ema = copy.deepcopy(policy)
        ema_decay = 0.999
    else:
        from lerobot.policies.act.modeling_act import ACTPolicy
        from lerobot.policies.act.processor_act import make_act_pre_post_processors

        policy = ACTPolicy(cfg)
        pre, post = make_act_pre_post_processors(cfg, dataset_stats=stats)
        lr = args.lr or 3e-4
        opt = torch.optim.AdamW(policy.get_optim_params(), lr=lr, weight_decay=1e-4)
        ema = None
    n_params = sum(p.numel() for p in policy.parameters())
    print(f"{args.policy}: {n_params} parameters, lr {lr}, batch {args.batch}, budget {args.minutes} min")

    obs_d = list(cfg.observation_delta_indices) if cfg.observation_delta_indices is not None else [0]
    act_d = list(cfg.action_delta_indices)
    hist = args.policy == "diffusion"

    # The checkpoint's own preprocessor normalises every frame once (its normaliser is
    # per-feature element-wise, so normalising frames and then gathering windows is the same
    # as normalising each window); windows are then gathered as LeRobotDataset does.
    nd = pre({OBS_STATE: torch.from_numpy(d["state"]), OBS_ENV_STATE: torch.from_numpy(d["env"]),
              ACTION: torch.from_numpy(d["action"])})
    n_state, n_env, n_act = (nd[k].numpy() for k in (OBS_STATE, OBS_ENV_STATE, ACTION))
    assert n_state.shape == d["state"].shape and n_act.shape == d["action"].shape

    def batch_at(frames):
        oi, _ = demos.window_indices(d, frames, obs_d)
        ai, apad = demos.window_indices(d, frames, act_d)
        if hist:
            st, en = n_state[oi], n_env[oi]  # (B, n_obs, D)
        else:
            st, en = n_state[oi[:, 0]], n_env[oi[:, 0]]  # (B, D)
        return {OBS_STATE: torch.from_numpy(st), OBS_ENV_STATE: torch.from_numpy(en),
                ACTION: torch.from_numpy(n_act[ai]), "action_is_pad": torch.from_numpy(apad)}

    policy.train()
    budget = args.minutes * 60.0
    warmup = 300
    losses = []
    t_start = time.time()
    step = 0
    while step < args.max_steps:
        el = time.time() - t_start
        if el > budget:
            break
        if step == 200:
            print(f"  {el / 200 * 1e3:.1f} ms/step -> about {int(budget / (el / 200))} steps in the budget", flush=True)
        # Cosine decay over the wall-clock budget (the machine's speed varies), or the steps.
        frac = min(1.0, max(el / budget, step / max(1, args.max_steps)))
        cur_lr = lr * min(1.0, (step + 1) / warmup) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = cur_lr
        frames = anchors[rng.integers(0, len(anchors), args.batch)]
        batch = batch_at(frames)
        loss, info = policy.forward(batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
        opt.step()
        if ema is not None:
            with torch.no_grad():
                dec = min(ema_decay, (1 + step) / (10 + step))
                for pe, p in zip(ema.parameters(), policy.parameters()):
                    pe.mul_(dec).add_(p.detach(), alpha=1 - dec)
        losses.append(float(loss.item()))
        step += 1
        if step % 500 == 0:
            extra = ""
            if info:
                extra = " " + " ".join(f"{k} {float(v):.4f}" for k, v in info.items() if np.ndim(v) == 0)
            print(f"  step {step} loss {np.mean(losses[-500:]):.5f}{extra} lr {cur_lr:.2e} ({time.time() - t_start:.0f}s)",
                  flush=True)
    final_loss = float(np.mean(losses[-200:]))
    train_s = time.time() - t_start
    print(f"trained {step} steps in {train_s:.0f}s, final loss (mean of last 200) {final_loss:.5f}")

    out_policy = ema if ema is not None else policy
    out_policy.eval()
    if ema is not None:
        # Held-out-style check of the EMA weights on fresh windows (same loss, eval noise draw).
        with torch.no_grad():
            frames = anchors[np.random.default_rng(1).integers(0, len(anchors), 1024)]
            b = batch_at(frames)
            ema.train()
            l_ema = float(ema.forward(b)[0])
            ema.eval()
        print(f"EMA weights: loss {l_ema:.5f} on 1024 random windows")
    os.makedirs(args.out, exist_ok=True)
    out_policy.save_pretrained(args.out)
    pre.save_pretrained(args.out)
    post.save_pretrained(args.out)

    obs_raw = np.concatenate([d["state"], d["env"]], axis=1)
    dom = demos.domain_block(obs_raw)
    side = {
        "dt_ms": demos.DT_S * 1000.0,
        "state": "planned",
        "sources": {OBS_STATE: ["joint_pos", "joint_vel"], OBS_ENV_STATE: ["goal"]},
        "action_encoding": "absolute",
        "goal_tolerance_rad": demos.GOAL_TOLERANCE_RAD,
        "goals": demos.GOALS.tolist(),
        "training": {
            "data_sha256": digest,
            "samples": int(len(d["state"])),
            "demonstrations": int(n_eps),
            "seed": SEED,
            "script": "scripts/lerobot/train_lerobot.py",
            "final_loss": final_loss,
            "steps": step,
            "train_seconds": round(train_s, 1),
        },
        "domain": {
            "obs_min": dom["min"].tolist(),
            "obs_max": dom["max"].tolist(),
            "mean": dom["mean"].tolist(),
            "ridge": dom["ridge"],
            "mahalanobis_max": dom["d_max"],
            "covariance": dom["cov"].tolist(),
        },
    }
    with open(os.path.join(args.out, "chunkrt.json"), "w") as f:
        json.dump(side, f, indent=1)
    np.savez_compressed(os.path.join(args.out, "demonstrations.npz"), **d)
    print(f"wrote {args.out}: {sorted(os.listdir(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
