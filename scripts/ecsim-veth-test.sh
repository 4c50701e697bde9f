#!/usr/bin/env bash
# EtherCAT over a real raw socket: the simulated drive chain runs inside a network namespace at
# one end of a veth pair, a real ethercrab master drives it from the other end at a 1 ms cycle,
# and the run passes only with zero working-counter errors.
#
# Usage: scripts/ecsim-veth-test.sh [SECONDS]            (default 30, or $ECSIM_SECONDS)
# Environment:
#   ECSIM_DRIVES   drives in the chain (default 7)
#   ECSIM_CONFIG   simulator TOML config (e.g. rt-config/ecsim-nominal.toml), optional
#   ECSIM_CMD      simulator command; gets "--iface IF --drives N [--config FILE]" appended
#                  (default: the crate's release example; later: "target/release/chunkrt ecsim")
#   MASTER_CMD     master command; gets "--iface IF --seconds S --period-us 1000 --drives N"
#                  (default: the crate's master_veth release example)
# Needs root (netns, veth, AF_PACKET). Without it: a SKIP (scripts/lib/skip.sh; exit 0,
# a failure under CI=true).
set -euo pipefail

SECONDS_TO_RUN="${1:-${ECSIM_SECONDS:-30}}"
DRIVES="${ECSIM_DRIVES:-7}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/lib/skip.sh"

if [ "$(id -u)" -ne 0 ]; then
    skip ecsim-veth-test "needs root (network namespace, veth pair, raw socket)"
fi
if ! command -v ip >/dev/null 2>&1; then
    skip ecsim-veth-test "needs iproute2 ('ip' not found)"
fi

if [ -z "${ECSIM_CMD:-}" ] || [ -z "${MASTER_CMD:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p chunkrt-ecsim --example ecsim_afpacket --example master_veth)
fi
ECSIM_CMD="${ECSIM_CMD:-$ROOT/target/release/examples/ecsim_afpacket}"
MASTER_CMD="${MASTER_CMD:-$ROOT/target/release/examples/master_veth}"

NS="ecsim-ns-$$"
HOST_IF="ecsh$$"
DEV_IF="ecsd$$"
SIM_PID=""

cleanup() {
    if [ -n "$SIM_PID" ] && kill -0 "$SIM_PID" 2>/dev/null; then
        kill -TERM "$SIM_PID" 2>/dev/null || true
        wait "$SIM_PID" 2>/dev/null || true
    fi
    ip link del "$HOST_IF" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT

if ! ip netns add "$NS" 2>/dev/null; then
    skip ecsim-veth-test "cannot create a network namespace here (no CAP_NET_ADMIN?)"
fi
ip link add "$HOST_IF" type veth peer name "$DEV_IF"
ip link set "$DEV_IF" netns "$NS"
for cmd in "ip link set $HOST_IF up" "ip netns exec $NS ip link set $DEV_IF up" "ip netns exec $NS ip link set lo up"; do
    $cmd
done
# Keep IPv6 chatter off the wire; EtherCAT does not need an IP stack.
sysctl -qw "net.ipv6.conf.$HOST_IF.disable_ipv6=1" 2>/dev/null || true

CONFIG_ARGS=()
if [ -n "${ECSIM_CONFIG:-}" ]; then
    CONFIG_ARGS=(--config "$ECSIM_CONFIG")
fi
# Real-time priority where available, as a deployment would run both ends.
RT=()
if command -v chrt >/dev/null 2>&1 && chrt -f 10 true 2>/dev/null; then
    RT=(chrt -f 10)
fi
# shellcheck disable=SC2086
ip netns exec "$NS" "${RT[@]}" $ECSIM_CMD --iface "$DEV_IF" --drives "$DRIVES" "${CONFIG_ARGS[@]}" &
SIM_PID=$!
sleep 0.5
if ! kill -0 "$SIM_PID" 2>/dev/null; then
    echo "FAIL: simulator exited at start"
    exit 1
fi

echo "ecsim veth test: $DRIVES drives, 1 ms cycle, ${SECONDS_TO_RUN} s ($HOST_IF <-> $NS/$DEV_IF)"
# shellcheck disable=SC2086
if "${RT[@]}" $MASTER_CMD --iface "$HOST_IF" --seconds "$SECONDS_TO_RUN" --period-us 1000 --drives "$DRIVES"; then
    echo "PASS: ecsim veth test, zero working-counter errors"
else
    echo "FAIL: ecsim veth test (see master output above)"
    exit 1
fi
