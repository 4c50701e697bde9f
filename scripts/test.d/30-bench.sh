#!/usr/bin/env bash
# The latency benchmark on the simulated arm with the bundled policy (the default
# configuration), 30 s, judged against the CI budget (limits derived from measured
# runs, see rt-config/budget-ci.toml), then cyclictest in alternating segments with
# the loop: fails when the budget fails (chunkrt bench exits 1) or cannot run.
# Then the MuJoCo arm's exchange (its physics per 1 ms bus period) against
# rt-config/budget-ci-mujoco.toml, 20 s. Then proves the budget can fail: the same pipeline with a 60 ms inference delay
# injected (longer than the 50 ms chunk period) must exit 1 with a FAIL row.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$(pwd)"
source scripts/lib/skip.sh
bin="${CHUNKRT_BIN:-target/release/chunkrt}"
if [[ ! -x "$bin" ]]; then
    cargo build --release --quiet -p chunkrt-cli
fi

if [[ $(id -u) -ne 0 ]]; then
    # cyclictest needs SCHED_FIFO, and budget-ci.toml requires its baseline (the wake
    # latency is judged as a ratio to it).
    # The broken-pipeline check below runs without root.
    record_skip "30-bench (the CI benchmark)" "not root (cyclictest needs SCHED_FIFO)"
else
    CHUNKRT_BIN="$bin" ./scripts/ci-latency.sh \
        --budget rt-config/budget-ci.toml --duration 30s --out runs/ci-bench
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# The MuJoCo arm's physics on the control thread, per 1 ms bus period (8 steps of the
# Panda and the drives' loops in each cycle's exchange), against its CI budget.
sed -e 's/^period_ms = 20.0 /period_ms = 1.0 /' \
    -e "s#manifest = \"policies/#manifest = \"${root}/rt-config/policies/#" \
    -e "s#model = \"../models/#model = \"${root}/models/#" rt-config/sim-mujoco.toml > "$tmp/mujoco-1ms.toml"
grep -q '^period_ms = 1.0 ' "$tmp/mujoco-1ms.toml"
"$bin" bench --config "$tmp/mujoco-1ms.toml" --budget rt-config/budget-ci-mujoco.toml \
    --duration 20s --out runs/ci-bench-mujoco --overwrite --quiet
sed "s#^manifest = \"policies/#manifest = \"${root}/rt-config/policies/#" rt-config/sim.toml > "$tmp/broken.toml"
printf '\n[inject]\ninference_delay = { kind = "fixed", ms = 60.0 }\n' >> "$tmp/broken.toml"
set +e
"$bin" bench --config "$tmp/broken.toml" --budget rt-config/budget-ci.toml \
    --duration 5s --out runs/ci-bench-broken --overwrite --quiet > "$tmp/out.txt" 2>&1
status=$?
set -e
if [[ $status -ne 1 ]] || ! grep -Eq '^inference_latency .* FAIL$' "$tmp/out.txt"; then
    cat "$tmp/out.txt"
    echo "30-bench: a 60 ms inference delay should break budget-ci.toml (exit 1, FAIL row); got exit $status" >&2
    exit 1
fi
echo "30-bench: the broken pipeline fails the budget as it must:"
grep -E 'FAIL' "$tmp/out.txt"
