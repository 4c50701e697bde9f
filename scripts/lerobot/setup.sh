#!/usr/bin/env bash
# Creates .venv-lerobot (Python 3.12) in the repository root with the packages of
# scripts/lerobot/requirements.txt. Not run by CI: the exported policies and the goldens are
# committed; this documents how to regenerate them. Idempotent.
#
# Then, from the repository root (2 CPU cores: ~35 minutes in all; training stops on a
# wall-clock budget, so a retrained model differs from the committed one):
#   .venv-lerobot/bin/python scripts/lerobot/golden_schedulers.py
#   .venv-lerobot/bin/python scripts/lerobot/train_lerobot.py --policy diffusion --out CKPT/diffusion --minutes 13
#   .venv-lerobot/bin/python scripts/lerobot/train_lerobot.py --policy act --out CKPT/act --minutes 20
#   .venv-lerobot/bin/python scripts/lerobot/export_lerobot.py CKPT/diffusion --name lerobot-diffusion --out rt-config/policies
#   .venv-lerobot/bin/python scripts/lerobot/export_lerobot.py CKPT/act --name lerobot-act --out rt-config/policies
#   .venv-lerobot/bin/python scripts/lerobot/golden_lerobot.py --diffusion CKPT/diffusion --act CKPT/act
#   .venv-lerobot/bin/python scripts/lerobot/closed_loop.py
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

PY=""
for cand in python3.12 /root/.pyenv/versions/3.12.1/bin/python "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.12.1/bin/python"; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
        PY=$cand
        break
    fi
done
if [[ -z "$PY" ]]; then
    echo "setup: no Python 3.12 found (python3.12 or pyenv 3.12.1); LeRobot 0.6.1 needs 3.12" >&2
    exit 1
fi

if [[ ! -x .venv-lerobot/bin/python ]]; then
    "$PY" -m venv .venv-lerobot
fi
if ! .venv-lerobot/bin/python -c 'import lerobot, diffusers, torch, onnx, onnxruntime, onnxscript' 2>/dev/null; then
    .venv-lerobot/bin/python -m pip install --disable-pip-version-check --upgrade pip
    .venv-lerobot/bin/python -m pip install --disable-pip-version-check -r scripts/lerobot/requirements.txt
fi
.venv-lerobot/bin/python -c 'import lerobot, torch; print("setup: lerobot", lerobot.__version__, "torch", torch.__version__)'
