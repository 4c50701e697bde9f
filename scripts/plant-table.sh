#!/usr/bin/env bash
# The table of the two plants (docs/measurements/plants.md): the bundled flow policy (rt-config/sim.toml) and
# LeRobot's ACT (rt-config/sim-lerobot-act.toml), each run on the simulated arm as
# configured and on the MuJoCo arm (the same file with `[backend] kind = "mujoco"` and
# the `[mujoco]` section of rt-config/sim-mujoco.toml), then read back by
# scripts/plant_figures.py and printed as a markdown table.
#
#   ./scripts/plant-table.sh            DURATION per run (60s), OUT (runs/plant-table)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
duration="${DURATION:-60s}"
out="${OUT:-runs/plant-table}"
py="${CHUNKRT_PYTHON:-$root/.venv/bin/python}"
source scripts/lib/cargo-bin.sh
bin="${CHUNKRT_BIN:-$(cargo_bin chunkrt-cli chunkrt)}"
mkdir -p "$out"

# The [mujoco] section of sim-mujoco.toml, its model path made absolute.
section="$(sed -n '/^\[mujoco\]/,/^\[telemetry\]/p' rt-config/sim-mujoco.toml | sed '$d' \
    | sed "s#model = \"../models/#model = \"$root/models/#")"

runs=()
for policy in sim sim-lerobot-act; do
    for plant in sim mujoco; do
        cfg="rt-config/$policy.toml"
        if [[ "$plant" == mujoco ]]; then
            cfg="$out/$policy-mujoco.toml"
            sed -e "s#manifest = \"policies/#manifest = \"$root/rt-config/policies/#" \
                -e '/^\[backend\]/{n;s/^kind = "sim"/kind = "mujoco"/}' \
                "rt-config/$policy.toml" > "$cfg"
            printf '\n%s\n' "$section" >> "$cfg"
            grep -q '^kind = "mujoco"' "$cfg" || { echo "plant-table: no [backend] kind = \"sim\" in rt-config/$policy.toml" >&2; exit 1; }
        fi
        run="$out/$policy-$plant"
        echo "plant-table: $cfg on $plant for $duration -> $run" >&2
        "$bin" run --config "$cfg" --duration "$duration" --out "$run" --overwrite --quiet --no-plots >/dev/null
        runs+=("$run")
    done
done

"$py" scripts/plant_figures.py --markdown "${runs[@]}"
