#!/usr/bin/env bash
# What the service's listeners cost the control loop: `chunkrt bench` on the simulated
# arm with [metrics] and [live_view] off, then on (scraped every 250 ms and watched by a
# Foxglove protocol client subscribed to every channel, both kept off the control
# thread's CPU as a remote scraper and viewer would be), then off again, PAIRS times in
# turn, in one sitting on one host. Prints each round's cycle time and wake latency P99,
# the ratio on/off and, as the noise it is judged against, off-again/off; then the
# medians (docs/measurements/service.md).
#
#   ./scripts/service-overhead.sh            PAIRS (3), DURATION per run (20s), OUT (runs/service-overhead)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/cargo-bin.sh
bin="${CHUNKRT_BIN:-$(cargo_bin chunkrt-cli chunkrt)}"
py="${CHUNKRT_PYTHON:-.venv/bin/python}"
pairs="${PAIRS:-3}"
duration="${DURATION:-20s}"
out="${OUT:-runs/service-overhead}"
mkdir -p "$out"
# The clients on every CPU but the control thread's (rt-config/sim.toml: control.cpu = 1).
pin=""
if command -v taskset >/dev/null 2>&1 && (( $(nproc) > 1 )); then
    pin="taskset -c 0"
fi
metrics_port=19464
view_port=18765
manifest="$(pwd)/rt-config/policies/flow.toml"
sed "s#manifest = \"policies/flow.toml\"#manifest = \"${manifest}\"#" rt-config/sim.toml >"$out/off.toml"
cp "$out/off.toml" "$out/on.toml"
cat >>"$out/on.toml" <<TOML

[metrics]
listen = "127.0.0.1:${metrics_port}"

[live_view]
listen = "127.0.0.1:${view_port}"
rate_hz = 10.0
TOML

# p99 FILE METRIC: the metric's P99 in microseconds from a report.json.
p99() { "$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["metrics"][sys.argv[2]]["p99"]/1e3)' "$1" "$2"; }

bench() { # NAME CONFIG
    "$bin" bench --config "$2" --budget rt-config/budget.toml --duration "$duration" \
        --out "$out/$1" --overwrite >"$out/$1.log" 2>&1 || true
}

rows=()
for i in $(seq 1 "$pairs"); do
    bench "off-$i" "$out/off.toml"
    # The listeners busy: a scraper and a subscribed client for the whole run.
    ( for _ in $(seq 1 400); do
          # shellcheck disable=SC2086 # pin is split on purpose.
          $pin curl -s -o /dev/null --max-time 1 "http://127.0.0.1:${metrics_port}/metrics" || true
          sleep 0.25
      done ) &
    scraper=$!
    ( sleep 3; $pin "$py" scripts/foxglove_client.py "ws://127.0.0.1:${view_port}" \
          --seconds 600 --keep 0 >/dev/null 2>&1 || true ) &
    viewer=$!
    bench "on-$i" "$out/on.toml"
    kill "$scraper" "$viewer" 2>/dev/null || true
    wait "$scraper" "$viewer" 2>/dev/null || true
    bench "again-$i" "$out/off.toml"
    rows+=("$i $(p99 "$out/off-$i/report.json" cycle_time) $(p99 "$out/on-$i/report.json" cycle_time) $(p99 "$out/again-$i/report.json" cycle_time) $(p99 "$out/off-$i/report.json" wake_latency) $(p99 "$out/on-$i/report.json" wake_latency) $(p99 "$out/again-$i/report.json" wake_latency)")
done
printf '%s\n' "${rows[@]}" | "$py" -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print("| round | cycle time P99 off / on / off again (us) | on/off | again/off | wake latency P99 off / on / off again (us) | on/off | again/off |")
print("|---|---|---|---|---|---|---|")
for i, c0, c1, c2, w0, w1, w2 in rows:
    print(f"| {int(i)} | {c0:.1f} / {c1:.1f} / {c2:.1f} | {c1/c0:.2f} | {c2/c0:.2f} | {w0:.1f} / {w1:.1f} / {w2:.1f} | {w1/w0:.2f} | {w2/w0:.2f} |")
med = lambda k, j: statistics.median(r[k] / r[j] for r in rows)
print(f"| median | | {med(2, 1):.2f} | {med(3, 1):.2f} | | {med(5, 4):.2f} | {med(6, 4):.2f} |")
'
