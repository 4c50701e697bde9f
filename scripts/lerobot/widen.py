#!/usr/bin/env python3
"""A wider copy of a LeRobot DiffusionPolicy checkpoint, for timing only: the same config,
normalisation statistics and chunkrt side information, a U-Net with other `down_dims`, its
weights freshly initialised (untrained: its chunks mean nothing; its latency is that of a
trained model of that size). Used to show the anytime sampler keeping a model too slow
for its nominal steps inside the chunk period (docs/policy/lerobot.md).

  widen.py CHECKPOINT_DIR OUT_DIR --down-dims 256,512,1024
  export_lerobot.py OUT_DIR --name lerobot-diffusion-wide --out /tmp/wide
  cargo run --release -p chunkrt-policy --example policy_bench -- \\
      --anytime /tmp/wide/lerobot-diffusion-wide-ddim.toml --deadline-ms 40 --min-steps 1
"""

import argparse
import shutil
from pathlib import Path

import torch

from lerobot.configs.policies import PreTrainedConfig
from lerobot.policies.factory import get_policy_class


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--down-dims", required=True, help="comma separated, e.g. 256,512,1024")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    cfg = PreTrainedConfig.from_pretrained(args.checkpoint)
    cfg.device = "cpu"
    cfg.down_dims = tuple(int(d) for d in args.down_dims.split(","))
    policy = get_policy_class(cfg.type)(cfg)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out)
    for f in Path(args.checkpoint).iterdir():
        if f.name.startswith("policy_") or f.name == "chunkrt.json":
            shutil.copy(f, out / f.name)
    n = sum(p.numel() for p in policy.parameters())
    print(f"{out}: down_dims {cfg.down_dims}, {n / 1e6:.1f} M parameters (untrained)")


if __name__ == "__main__":
    main()
