#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script).
#
# Installs what a fresh machine lacks (ONNX Runtime library, Python reference
# packages, rt-tests), then: formatting, clippy -D warnings, every unit and
# integration test, the loom model, and the system checks that need a release
# build (and root for the veth/netns ones, which skip visibly otherwise).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

stage() { printf '\n==== %s ====\n' "$*"; }
started=$(date +%s)

stage "set-up"
./scripts/setup.sh

stage "cargo fmt --check"
cargo fmt --all -- --check

stage "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

stage "unit and integration tests"
export CHUNKRT_PYTHON="${root}/.venv/bin/python"
source scripts/lib/cargo-bin.sh
CHUNKRT_BIN="$(cargo_bin chunkrt-cli chunkrt)"
export CHUNKRT_BIN
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --release --no-fail-fast
else
    cargo test --workspace --release --no-fail-fast
fi

stage "loom model of the triple buffer"
CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" \
    cargo test -p chunkrt-buffer --release --test loom

for extra in scripts/test.d/*.sh; do
    [[ -e "$extra" ]] || continue
    stage "$(basename "$extra")"
    bash "$extra"
done

stage "done in $(( $(date +%s) - started )) s"
