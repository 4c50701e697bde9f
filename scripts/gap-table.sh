#!/usr/bin/env bash
# The reality-gap table of docs/measurements/gap.md: `chunkrt gap` from the simulated arm to the MuJoCo arm
# (rt-config/sim.toml -> rt-config/sim-mujoco.toml, 20 ms bus) and to EtherCAT over a veth
# pair (the simulated arm at 1 ms -> rt-config/arm-ethercat-veth.toml against
# `chunkrt ecsim` in a network namespace), every joint excited, then summarised per
# channel by scripts/gap_table.py as a markdown table. Needs root for the veth pair.
#
#   sudo ./scripts/gap-table.sh         OUT (runs/gap-table)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out="${OUT:-runs/gap-table}"
source scripts/lib/cargo-bin.sh
bin="${CHUNKRT_BIN:-$(cargo_bin chunkrt-cli chunkrt)}"
mkdir -p "$out"

# Exit status 1 is a gap over tolerance, which these comparisons are expected to find.
gap() { # reference plant dir
    local status=0
    "$bin" gap --reference "$1" --plant "$2" --joints all --out "$3" >"$3.log" 2>&1 || status=$?
    if ((status > 1)); then
        echo "gap-table: chunkrt gap $1 -> $2 failed (exit $status):" >&2
        cat "$3.log" >&2
        exit "$status"
    fi
}

echo "gap-table: sim -> MuJoCo" >&2
gap rt-config/sim.toml rt-config/sim-mujoco.toml "$out/mujoco"

ns="gap-ns-$$"
host_if="gap$$"
dev_if="gapd$$"
sim_pid=""
cleanup() {
    if [[ -n "$sim_pid" ]]; then kill -TERM "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
    ip link del "$host_if" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$ns"
ip link add "$host_if" type veth peer name "$dev_if"
ip link set "$dev_if" netns "$ns"
ip link set "$host_if" up
ip netns exec "$ns" ip link set "$dev_if" up
sysctl -qw "net.ipv6.conf.$host_if.disable_ipv6=1" 2>/dev/null || true
ip netns exec "$ns" chrt -f 70 "$bin" ecsim --iface "$dev_if" --drives 7 \
    --config rt-config/ecsim-nominal.toml >"$out/ecsim.log" 2>&1 &
sim_pid=$!
sleep 0.5
sed "s/^interface = \"ecsim0\"/interface = \"$host_if\"/" rt-config/arm-ethercat-veth.toml >"$out/veth.toml"
sed -e 's/^period_ms = 20.0 /period_ms = 1.0 /' \
    -e "s#manifest = \"policies/#manifest = \"$root/rt-config/policies/#" rt-config/sim.toml >"$out/sim-1ms.toml"
grep -q '^period_ms = 1.0 ' "$out/sim-1ms.toml"
echo "gap-table: sim at 1 ms -> EtherCAT over veth" >&2
gap "$out/sim-1ms.toml" "$out/veth.toml" "$out/ethercat"

python3 scripts/gap_table.py "$out/mujoco/gap.json" "$out/ethercat/gap.json"
