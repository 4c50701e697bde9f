#!/usr/bin/env bash
# Places the ONNX Runtime shared library that chunkrt loads at run time (ort, load-dynamic).
#
# Source: the official onnxruntime==1.31.1 wheel on PyPI (fetched with pip, never built),
# checked against a pinned SHA-256, unpacked to .ort/lib/libonnxruntime.so.1.31.1 under the
# repository root (scripts/lib/wheel-lib.sh). Idempotent: a present library with the right
# digest returns at once.
#
# Usage: ./scripts/bootstrap-ort.sh            (from anywhere inside the repository)
# Env:   CHUNKRT_PYTHON  python interpreter whose pip to use (default: python3)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "${root}/scripts/lib/wheel-lib.sh"

# cp311 manylinux_2_28 x86_64 wheel of onnxruntime 1.31.1, as published on PyPI.
wheel_lib bootstrap-ort onnxruntime 1.31.1 \
    5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f \
    onnxruntime/capi/libonnxruntime.so.1.31.1 "${root}/.ort/lib"
