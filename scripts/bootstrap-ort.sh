#!/usr/bin/env bash
# Places the ONNX Runtime shared library that chunkrt loads at run time (ort, load-dynamic).
#
# Source: the official onnxruntime==1.31.1 wheel on PyPI (fetched with pip, never built),
# checked against a pinned SHA-256, unpacked to .ort/lib/libonnxruntime.so.1.31.1 under the
# repository root. Idempotent: a present library with the right digest returns at once.
#
# Usage: ./scripts/bootstrap-ort.sh            (from anywhere inside the repository)
# Env:   CHUNKRT_PYTHON  python interpreter whose pip to use (default: python3)
set -euo pipefail

ORT_VERSION=1.31.1
# cp311 manylinux_2_28 x86_64 wheel of onnxruntime 1.31.1, as published on PyPI.
WHEEL_SHA256=5752bd508126ae7c49894d3b9d2e83f0c3d487319246d04c444b393308d7ad7f
LIB_NAME="libonnxruntime.so.${ORT_VERSION}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lib_dir="${root}/.ort/lib"
lib="${lib_dir}/${LIB_NAME}"
stamp="${lib_dir}/${LIB_NAME}.sha256"
whl_dir="${root}/.whl"
py="${CHUNKRT_PYTHON:-python3}"

if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
    echo "bootstrap-ort: only Linux x86_64 is supported by this script (got $(uname -s)-$(uname -m))" >&2
    exit 1
fi

# Fast path: library present and matching the digest recorded when it was extracted.
if [[ -f "$lib" && -f "$stamp" ]] && (cd "$lib_dir" && sha256sum --status -c "$(basename "$stamp")") 2>/dev/null; then
    echo "bootstrap-ort: ${lib} present"
    exit 0
fi

mkdir -p "$lib_dir" "$whl_dir"
wheel="$(ls "$whl_dir"/onnxruntime-${ORT_VERSION}-cp311-cp311-*manylinux_2_28_x86_64*.whl 2>/dev/null | head -n1 || true)"
if [[ -z "$wheel" ]]; then
    echo "bootstrap-ort: fetching onnxruntime==${ORT_VERSION} wheel from PyPI"
    if ! "$py" -m pip --version >/dev/null 2>&1; then
        echo "bootstrap-ort: '$py -m pip' is not available; install pip (apt-get install python3-pip) or set CHUNKRT_PYTHON" >&2
        exit 1
    fi
    "$py" -m pip download --quiet --no-deps "onnxruntime==${ORT_VERSION}" \
        --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 \
        --implementation cp --abi cp311 --dest "$whl_dir"
    wheel="$(ls "$whl_dir"/onnxruntime-${ORT_VERSION}-cp311-cp311-*manylinux_2_28_x86_64*.whl | head -n1)"
fi

got="$(sha256sum "$wheel" | cut -d' ' -f1)"
if [[ "$got" != "$WHEEL_SHA256" ]]; then
    echo "bootstrap-ort: SHA-256 mismatch for $(basename "$wheel")" >&2
    echo "  expected ${WHEEL_SHA256}" >&2
    echo "  got      ${got}" >&2
    rm -f "$wheel"
    exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" - "$wheel" "$tmp" "onnxruntime/capi/${LIB_NAME}" <<'PY'
import sys, zipfile
wheel, dest, member = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    z.extract(member, dest)
PY
install -m 0755 "$tmp/onnxruntime/capi/${LIB_NAME}" "$lib"
(cd "$lib_dir" && sha256sum "$LIB_NAME" > "$(basename "$stamp")")
echo "bootstrap-ort: installed ${lib}"
