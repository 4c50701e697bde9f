#!/usr/bin/env bash
# The latency benchmark on the simulated arm with the bundled policy (the default
# configuration), 30 s, judged against the CI budget with cyclictest beside the
# loop. Fails when the budget fails (chunkrt bench exits 1) or the run cannot start.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bin="${CHUNKRT_BIN:-target/release/chunkrt}"
if [[ ! -x "$bin" ]]; then
    cargo build --release --quiet -p chunkrt-cli
fi
CHUNKRT_BIN="$bin" exec ./scripts/ci-latency.sh \
    --budget rt-config/budget-ci.toml --duration 30s --out runs/ci-bench
