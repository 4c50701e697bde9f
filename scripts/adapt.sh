#!/usr/bin/env bash
# The adaptation loop end to end (docs/adapt.md "The loop end to end"; its table:
# docs/measurements/adapt.md), on the worn simulated arm (rt-config/sim-worn.toml: 0.06 rad of play per joint,
# which the bundled flow policy was not trained with):
#   1. the frozen base runs the episodes (seen and held-out starts): chunkrt run --frozen
#   2. its record becomes a LeRobot dataset: chunkrt export lerobot
#   3. a residual is trained on the seen starts' episodes (scripts/adapt/train_residual.py:
#      numpy, seconds) and written as ONNX with a manifest bound to the base's digest,
#      its stage appended to the base's regime_sequence
#   4. the base with the residual, under its gate and the permission gate, runs the
#      same episodes
#   5. chunkrt episodes compares them; the held-out starts' rows are the table.
#
#   ./scripts/adapt.sh                      OUT (default runs/adapt)
#
# Writes OUT/{frozen,dataset,residual,adapted}, OUT/adapted.toml, OUT/train.json,
# OUT/episodes.{txt,json,svg,png} and OUT/table.md. Environment: CHUNKRT_BIN, CHUNKRT_PYTHON (a Python with numpy, pyarrow
# and onnx: scripts/setup.sh's .venv), OUT.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-runs/adapt}"
py="${CHUNKRT_PYTHON:-${root}/.venv/bin/python}"
if [[ -z "${CHUNKRT_BIN:-}" ]]; then
    source scripts/lib/cargo-bin.sh
    CHUNKRT_BIN="$(cargo_bin chunkrt-cli chunkrt)"
fi
if ! "$py" -c 'import numpy, pyarrow, onnx' 2>/dev/null; then
    echo "adapt: $py lacks numpy, pyarrow or onnx: run scripts/setup.sh" >&2
    exit 2
fi
config="rt-config/sim-worn.toml"
rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
start=$SECONDS
# A run whose log is shown when it fails.
run() { # LOG ARGS...
    local log="$1" status=0
    shift
    "$CHUNKRT_BIN" run "$@" >"$log" 2>&1 || status=$?
    if ((status != 0)); then
        echo "adapt: chunkrt run $* failed (exit $status):" >&2
        tail -n 20 "$log" >&2
        exit "$status"
    fi
}

echo "adapt: 1/5 the frozen base on the worn arm ($config)" >&2
run "$out/frozen.log" --config "$config" --frozen --duration 0 --quiet --no-plots --out "$out/frozen"

echo "adapt: 2/5 its episodes as a LeRobot dataset" >&2
"$CHUNKRT_BIN" export lerobot "$out/frozen" --out "$out/dataset" >&2

echo "adapt: 3/5 a residual trained on the seen starts' episodes" >&2
"$py" scripts/adapt/train_residual.py "$out/dataset" --base rt-config/policies/flow.toml \
    --out "$out/residual" --plant "chunkrt-sim worn: 0.06 rad of play per joint ($config)" \
    >"$out/train.json"

echo "adapt: 4/5 the base with the residual, the same episodes" >&2
# The worn arm's config, its base manifest absolute, with the residual and its gate.
sed -e "s|^manifest = \"policies/|manifest = \"${root}/rt-config/policies/|" "$config" \
    >"$out/adapted.toml"
cat >>"$out/adapted.toml" <<EOF

[policy.residual]
manifest = "$out/residual/residual.toml"
bound_rad = 0.05               # the correction: at most this per joint
rate_rad_s = 0.2               # changing at most this fast
EOF
"$CHUNKRT_BIN" validate "$out/adapted.toml" >&2
run "$out/adapted.log" --config "$out/adapted.toml" --duration 0 --quiet --no-plots --out "$out/adapted"

echo "adapt: 5/5 frozen against residual" >&2
"$CHUNKRT_BIN" episodes "$out/frozen" "$out/adapted" --plot "$out/episodes" >"$out/episodes.txt"
"$CHUNKRT_BIN" episodes "$out/frozen" "$out/adapted" --json >"$out/episodes.json"
"$py" - "$out/episodes.json" >"$out/table.md" <<'EOF'
import json, sys
rows = [s for s in json.load(open(sys.argv[1]))["summaries"] if s["starts"] == "held_out"]
print("| held-out starts | episodes | success | goal error (rad) | tracking P99 (rad) | gate interventions / episode | operator stops / episode |")
print("|---|---|---|---|---|---|---|")
for s in sorted(rows, key=lambda s: s["policy"] != "frozen"):
    print(f"| {s['policy']} | {s['episodes']} | {round(s['success_rate'] * s['episodes'])}/{s['episodes']} "
          f"| {s['goal_err_rad']:.4f} | {s['tracking_error_p99_rad']:.4f} "
          f"| {s['gate_interventions_per_episode']:.1f} | {s['operator_stops_per_episode']:.2f} |")
EOF
cat "$out/episodes.txt"
cat "$out/table.md"
echo "adapt: the loop took $((SECONDS - start)) s" >&2
