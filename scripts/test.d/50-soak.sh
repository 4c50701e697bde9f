#!/usr/bin/env bash
# Two-minute soak of the simulated arm at a 1 ms bus period with injected faults
# (see scripts/soak.sh for what it checks).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
./scripts/soak.sh 2m
