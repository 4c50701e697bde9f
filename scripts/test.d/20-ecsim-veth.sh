#!/usr/bin/env bash
# Issue 5: the real ethercrab master against `chunkrt ecsim` (7 simulated CiA 402
# drives) inside a network namespace, over a veth pair and a real raw socket, at a
# 1 ms cycle for 30 s, zero working-counter errors. Skips visibly when not root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin="${CHUNKRT_BIN:-$(pwd)/target/release/chunkrt}"
[[ -x "$bin" ]] || cargo build --release --quiet -p chunkrt-cli
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
ECSIM_CMD="$bin ecsim" ./scripts/ecsim-veth-test.sh "${ECSIM_SECONDS:-30}"
