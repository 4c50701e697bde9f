#!/usr/bin/env bash
# Places the MuJoCo physics library that chunkrt-mujoco links (through mujoco-rs, which is
# built against MuJoCo 3.17.0).
#
# Source: the official mujoco==3.17.0 wheel on PyPI (fetched with pip, never built),
# checked against a pinned SHA-256, unpacked to .mujoco/lib/libmujoco.so.3.17.0 under the
# repository root (scripts/lib/wheel-lib.sh), with the libmujoco.so link the linker looks
# for. .cargo/config.toml points mujoco-rs's build (MUJOCO_DYNAMIC_LINK_DIR) there, and the
# binaries that link it carry that directory as their run path. Idempotent.
#
# Usage: ./scripts/bootstrap-mujoco.sh         (from anywhere inside the repository)
# Env:   CHUNKRT_PYTHON  python interpreter whose pip to use (default: python3)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "${root}/scripts/lib/wheel-lib.sh"

# cp311 manylinux_2_28 x86_64 wheel of mujoco 3.17.0, as published on PyPI.
wheel_lib bootstrap-mujoco mujoco 3.17.0 \
    d66928d86a2d1b601bbaa4dc11db50214d17d5301bb8afd84721313b67ff0874 \
    mujoco/libmujoco.so.3.17.0 "${root}/.mujoco/lib"
ln -sfn libmujoco.so.3.17.0 "${root}/.mujoco/lib/libmujoco.so"
