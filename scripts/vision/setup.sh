#!/usr/bin/env bash
# Creates .venv-vision in the repository root with scripts/vision/requirements.txt. Not run by
# CI (the policy, its manifest and the goldens are committed). Idempotent. Then, from the
# repository root (see scripts/vision/README.md):
#   .venv-vision/bin/python scripts/vision/golden_camera.py
#   .venv-vision/bin/python scripts/vision/train.py --minutes 16 [--init CKPT]
#   .venv-vision/bin/python scripts/vision/export.py
#   .venv-vision/bin/python scripts/vision/evaluate.py
#   .venv-vision/bin/python scripts/vision/golden_policy.py
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if [[ ! -x .venv-vision/bin/python ]]; then
    python3 -m venv .venv-vision
fi
if ! .venv-vision/bin/python -c 'import torch, numpy, onnx, onnxruntime' 2>/dev/null; then
    .venv-vision/bin/python -m pip install --disable-pip-version-check --upgrade pip
    .venv-vision/bin/python -m pip install --disable-pip-version-check -r scripts/vision/requirements.txt
fi
.venv-vision/bin/python -c 'import torch, onnxruntime; print("setup: torch", torch.__version__, "onnxruntime", onnxruntime.__version__)'
