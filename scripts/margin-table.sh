#!/usr/bin/env bash
# Re-measures the runtime loop's margin tables of docs/measurements/margin.md (both of them;
# the chapter is docs/margin.md): every loop against injected delay, with and without compensation.
# Each point is a 20 s real-time run; the whole table takes about 35 minutes.
#
# Usage: scripts/margin-table.sh [OUT]   (default runs/margin-table; prints the tables)
# Binary: $CHUNKRT_BIN or target/release/chunkrt (built if missing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out="${1:-runs/margin-table}"
bin="${CHUNKRT_BIN:-target/release/chunkrt}"
[ -x "$bin" ] || cargo build --release -q -p chunkrt-cli
mkdir -p "$out"
sed 's#policies/flow.toml#policies/ddim.toml#' rt-config/sim.toml >rt-config/.sim-ddim.tmp.toml
trap 'rm -f rt-config/.sim-ddim.tmp.toml' EXIT
w=(--window-s 10 --settle-s 3 --free-s 6)
run() { local name=$1; shift; echo "== $name" >&2; "$bin" margin "$@" "${w[@]}" --out "$out/$name" >"$out/$name.txt" 2>&1; }
servo=(--config rt-config/sim-servo.toml)
run servo-transport "${servo[@]}" --servo-gain 3.1416 --delays 0:100:20ms --compensate none,lookahead
run servo-observation "${servo[@]}" --servo-gain 3.1416 --delays 0:100:20ms --inject-at observation --compensate none,extrapolate
run servo-seed "${servo[@]}" --servo-gain 3.1416 --delays 35ms --inject-at inference --jitter-ms 6.2 --compensate none,extrapolate
run servo-1ms "${servo[@]}" --servo-gain 3.1416 --bus-period-ms 1 --delays 0,50,100ms
run servo2hz-transport "${servo[@]}" --servo-gain 12.566 --delays 0:100:20ms --compensate none,lookahead
run servo2hz-observation "${servo[@]}" --servo-gain 12.566 --delays 0:100:20ms --inject-at observation --compensate none,extrapolate
run servo2hz-seed "${servo[@]}" --servo-gain 12.566 --delays 35ms --inject-at inference --jitter-ms 6.2 --compensate none,extrapolate
run servo-approach "${servo[@]}" --delays 0,100,200,300,400ms
run scripted --config rt-config/sim-scripted.toml --hold --delays 0,50,100ms
run flow-planned --config rt-config/sim.toml --hold --delays 0,50,100ms
run flow-measured --config rt-config/sim.toml --hold --state-source measured --delays 0,40,80ms --compensate none,lookahead,extrapolate
run flow-measured-1ms --config rt-config/sim.toml --hold --state-source measured --bus-period-ms 1 --delays 0,50,100ms
run ddim-measured --config rt-config/.sim-ddim.tmp.toml --hold --state-source measured --delays 0,50,100ms
python3 scripts/margin_table.py "$out"
python3 scripts/margin_table.py "$out" full
