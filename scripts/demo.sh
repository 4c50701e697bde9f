#!/usr/bin/env bash
# Runs chunkrt on the simulated arm with the bundled policy for 10 s and prints the
# latency table. Installs what a fresh machine lacks first.
# Extra arguments go to `chunkrt run` (e.g. --duration 30s, --bus-period-ms 1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/cargo-bin.sh
./scripts/setup.sh >/dev/null
bin="$(cargo_bin chunkrt-cli chunkrt)"
exec "$bin" run --config rt-config/sim.toml --duration 10s --out runs/demo --overwrite "$@"
