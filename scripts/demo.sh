#!/usr/bin/env bash
# Runs chunkrt on the simulated arm with the bundled policy for 10 s and prints the
# latency table. Installs what a fresh machine lacks first.
# Extra arguments go to `chunkrt run` (e.g. --duration 30s, --bus-period-ms 1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
./scripts/setup.sh >/dev/null
cargo build --release --quiet -p chunkrt-cli
exec ./target/release/chunkrt run --config rt-config/sim.toml --duration 10s --out runs/demo --overwrite "$@"
