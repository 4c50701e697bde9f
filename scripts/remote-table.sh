#!/usr/bin/env bash
# The table (docs/measurements/remote.md) of the bundled flow policy run in-process against the same policy
# served by scripts/policy_server.py (openpi's protocol): on this host (loopback), and
# from a network namespace behind a veth pair, each way delayed by 20 ms and by 50 ms
# (+-25 %) by scripts/net_delay.py in front of the server (this kernel has no tc netem). One candidate per observation in every run (a served
# candidate is one more round trip). Needs root (netns, tc) for the netem rows.
#
#   sudo ./scripts/remote-table.sh       DURATION per run (60s), OUT (runs/remote-table)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
duration="${DURATION:-60s}"
out="${OUT:-runs/remote-table}"
py="${CHUNKRT_PYTHON:-$root/.venv/bin/python}"
source scripts/lib/cargo-bin.sh
bin="${CHUNKRT_BIN:-$(cargo_bin chunkrt-cli chunkrt)}"
mkdir -p "$out"

ns="chunkrt-remote-table-$$"
host_if="crt$$h"
ns_if="crt$$n"
server=""
cleanup() {
    [[ -n "$server" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    ip link del "$host_if" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT

abs() { sed -e "s#manifest = \"policies/#manifest = \"$root/rt-config/policies/#" "$@"; }

# serve NETNS_OR_EMPTY HOST PORT: the server, its "listening on" awaited.
serve() {
    local prefix=()
    [[ -n "$1" ]] && prefix=(ip netns exec "$1")
    "${prefix[@]}" "$py" scripts/policy_server.py --manifest rt-config/policies/flow.toml \
        --host "$2" --port "$3" >"$out/server.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do
        grep -q "listening on" "$out/server.log" && return 0
        sleep 0.1
    done
    echo "remote-table: the server did not start:" >&2; cat "$out/server.log" >&2; exit 1
}
stop_server() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }

run() { # NAME CONFIG
    echo "remote-table: $1 for $duration" >&2
    "$bin" run --config "$2" --duration "$duration" --out "$out/$1" --overwrite --quiet --no-plots >/dev/null
}

abs -e 's/^candidates = .*/candidates = 1/' rt-config/sim.toml >"$out/local.toml"
run local "$out/local.toml"

abs rt-config/sim-remote.toml >"$out/loopback.toml"
serve "" 127.0.0.1 8765
run loopback "$out/loopback.toml"
stop_server

ip netns add "$ns"
ip link add "$host_if" type veth peer name "$ns_if"
ip link set "$ns_if" netns "$ns"
ip addr add 10.78.0.1/24 dev "$host_if"
ip link set "$host_if" up
ip netns exec "$ns" ip addr add 10.78.0.2/24 dev "$ns_if"
ip netns exec "$ns" ip link set "$ns_if" up
ip netns exec "$ns" ip link set lo up
abs -e 's#^url = "ws://127.0.0.1:8765".*#url = "ws://10.78.0.2:8765"\nallow_plaintext_remote = true#' \
    rt-config/sim-remote.toml >"$out/netem.toml"
grep -q '^allow_plaintext_remote = true' "$out/netem.toml"
serve "$ns" 127.0.0.1 8766
for d in 20 50; do
    echo "$d $((d / 4))" >"$out/delay"
    ip netns exec "$ns" "$py" scripts/net_delay.py --listen 10.78.0.2:8765 --to 127.0.0.1:8766 \
        --delay-file "$out/delay" >"$out/relay.log" 2>&1 &
    relay=$!
    sleep 1
    run "netem-$d" "$out/netem.toml"
    kill "$relay"; wait "$relay" 2>/dev/null || true
done
stop_server

"$py" scripts/remote_table.py "in process=$out/local" "served, loopback=$out/loopback" \
    "served, 20 ms each way=$out/netem-20" "served, 50 ms each way=$out/netem-50"
