#!/usr/bin/env bash
# Installs what a fresh machine lacks for chunkrt's demo and tests. Idempotent.
#   - the ONNX Runtime library (scripts/bootstrap-ort.sh, from the PyPI wheel)
#   - a Python venv (.venv) with numpy + onnxruntime for the reference sampler test,
#     and mcap for the independent reader of the recording
#   - rt-tests (cyclictest), iproute2 and ethtool, when apt is available and we are root
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/bootstrap-ort.sh

if [[ -f scripts/requirements-test.txt ]]; then
    if [[ ! -x .venv/bin/python ]]; then
        python3 -m venv .venv
    fi
    if ! .venv/bin/python -c 'import numpy, onnxruntime, mcap' 2>/dev/null; then
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
    fi
fi

missing=()
command -v cyclictest >/dev/null 2>&1 || missing+=(rt-tests)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v ethtool >/dev/null 2>&1 || missing+=(ethtool)
if (( ${#missing[@]} )); then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "setup: installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    else
        echo "setup: NOTICE: ${missing[*]} missing and cannot be installed (not root or no apt); the tests that need them will skip"
    fi
fi
