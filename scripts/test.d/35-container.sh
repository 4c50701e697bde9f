#!/usr/bin/env bash
# The latency container (docker/Dockerfile, docker/compose.yaml) built and run on this
# machine with podman, `chunkrt check` and `chunkrt bench` inside it against the CI
# budget, the host's bench beside it: see scripts/container-test.sh. SKIPs visibly
# where podman cannot run; fails then under CI=true.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
exec ./scripts/container-test.sh
