#!/usr/bin/env bash
# What the gate's Cartesian stage costs the control cycle (issue 57): `chunkrt run` on
# the simulated arm with the bundled flow policy at a 1 ms bus, without `[cartesian]`,
# with it and its plane far below the tool (the stage checks but does not act), and with
# the plane 5 cm under the flange's start (the motion drives into it), ROUNDS times in
# turn in one sitting. Writes each run's cycle time P50 / P99 / max and the approach and
# tool-speed counts to docs/measurements/cartesian.md (OUT/table.md with OUT set).
#
#   ./scripts/cartesian-cost.sh        ROUNDS (2), DURATION per run (20s), OUT (runs/cartesian-cost)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/cargo-bin.sh
bin="${CHUNKRT_BIN:-$(cargo_bin chunkrt-cli chunkrt)}"
py="${CHUNKRT_PYTHON:-.venv/bin/python}"
rounds="${ROUNDS:-2}"
duration="${DURATION:-20s}"
out="${OUT:-runs/cartesian-cost}"
page="docs/measurements/cartesian.md"
[[ -n "${OUT:-}" ]] && page="$out/table.md"
mkdir -p "$out"
repo="$(pwd)"
sed -e "s#manifest = \"policies/flow.toml\"#manifest = \"${repo}/rt-config/policies/flow.toml\"#" \
    rt-config/sim.toml >"$out/without.toml"
section() { # PLANE_Z
    cat <<TOML

[cartesian]
model = "${repo}/models/franka_panda/panda.xml"
model_sha256 = "2eb1f4a236a2c1795d1bc4491e1b083a739179e640a09739bad16749bc2f07ab"
tool = "link7"
tool_offset_m = [0.0, 0.0, 0.107]
brake_m_s2 = 2.0
max_tool_speed_m_s = 0.5

[[cartesian.plane]]
name = "table"
point_m = [0.0, 0.0, $1]
normal = [0.0, 0.0, 1.0]
TOML
}
# The flange starts at z 0.765 m (the bundled policy's start pose).
{ cat "$out/without.toml"; section -5.0; } >"$out/far.toml"
{ cat "$out/without.toml"; section 0.714; } >"$out/near.toml"

rows=()
for i in $(seq 1 "$rounds"); do
    for case in without far near; do
        "$bin" run --duration "$duration" --bus-period-ms 1 --config "$out/$case.toml" \
            --out "$out/$case-$i" --overwrite >"$out/$case-$i.log" 2>&1
        rows+=("$("$py" - "$out/$case-$i/report.json" "$case" "$i" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m, g = r["metrics"]["cycle_time"], r["gate"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {m['p50']/1e3:.1f} | {m['p99']/1e3:.1f} | "
      f"{m['max']/1e3:.1f} | {g.get('approach', 0)} | {g.get('tool_speed', 0)} |")
PY
)")
    done
done
{
    echo "# The Cartesian stage's cost to the control cycle"
    echo
    echo "Produced by \`./scripts/cartesian-cost.sh\` (${rounds} rounds of ${duration} each, in turn):"
    echo "\`chunkrt run\` on the simulated arm with the bundled flow policy at a 1 ms bus, the"
    echo "cycle time from \`report.json\` (\`metrics.cycle_time\`: wake to the command handed"
    echo "to the backend). *far*: \`[cartesian]\` with a plane 5.8 m below the flange and a"
    echo "0.5 m/s tool-speed limit the policy never reaches; *near*: the plane 5 cm under the"
    echo "flange's start, so the motion drives into it. One machine's figures (the project's"
    echo "2-vCPU VM, not real-time); see [Cartesian limits](../cartesian.md)."
    echo
    echo "| case | round | cycle P50 µs | cycle P99 µs | cycle max µs | approach | tool_speed |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
} >"$page"
echo "$page"
