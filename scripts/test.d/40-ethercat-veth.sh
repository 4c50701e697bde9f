#!/usr/bin/env bash
# The EtherCAT backend over a real raw socket: `chunkrt ecsim` (7 simulated CiA 402 drives)
# runs inside a network namespace at one end of a veth pair; `chunkrt run` drives them from
# the other end with rt-config/arm-ethercat-veth.toml at a 1 ms bus period.
#
# Checks:
#   1. wrong interface name       -> exit 2, message names the interface and what exists
#      no CAP_NET_RAW (as nobody)  -> exit 2, message names the capability and setcap
#   2. a drive missing (6 of 7)   -> exit 2, message names the bus position to check
#   3. identity mismatch          -> exit 2, message names drive, expected and found
#   3b. drives without CoE, default PDO lists -> exit 2, the drive's fixed lists and the fix
#   3c. the same drives, write = false, rx without mode_of_operation
#                                 -> exit 2, the drive's rx list and the config's
#   3d. the same drives, write = false, their own lists -> a 5 s run in CSP, the drives
#                                    follow (the checks of 4)
#   3e. drives without CoE whose fixed mapping ends each PDO with 8 bits of padding (index
#       0x0000), the same lists, write = true -> a 5 s run in CSP (padding skipped)
#   4. nominal run (60 s)         -> exit 0, bring-up, zero working-counter / drive errors,
#                                    every exchange reconciled (a round trip or a lost
#                                    frame; every lost frame ridden through or
#                                    reported); timing (bus_rtt, lost / late frames,
#                                    fallbacks) printed, not judged: it is the host's
#   4b. 2 % frame faults (10 s)   -> the same checks; how many were ridden through printed
#   5. SIGTERM during a run          -> exit 0, drives quick-stopped, disabled, bus to INIT
#   6. the drives die mid-run (simulator killed), then SIGTERM
#                                 -> exit 4, "shutdown failed" on stderr, shutdown_error
#   7. chunkrt margin over the wire -> the runtime's loop (servo policy, k = 2 pi) measured
#                                    on the EtherCAT backend: margin.json names the backend;
#                                    a crossover, when the loop kept authority, near 1 Hz
#   8. a drive power-cycled mid-run, DC on, drive clocks 50 ppm fast
#                                 -> exit 0, every rejoin completed, no working-counter
#                                    error, DrivesRecovered then Playing; fallbacks/min,
#                                    longest ride-through, rejoin time, SYNC0 phase printed
#   9. a drive that never comes back -> the run ends early, exit 6 (or 4), said on stderr
#  10. the master silent for 150 ms (chunkrt stopped with SIGSTOP, the drives' SM watchdog
#      is 100 ms)                -> every drive found in SAFE-OP and acknowledged back to OP
#                                    (7 rejoins, none failed), playback resumes, exit 0
#  11. drives that cannot follow (ecsim's velocity limit), max_following_error_rad set
#                                 -> following_error events naming joints past the limit,
#                                    the policy's authority taken (FollowingError), exit 0
#  12. the MuJoCo arm behind the drives (`ecsim --arm rt-config/arm-ethercat-mujoco.toml`)
#                                 -> a 15 s run at 1 ms: the checks of 4, the tracking
#                                    error, and the torques the master read back (0x6077)
#                                    hold the arm against gravity (shoulder and elbow),
#                                    read from the recording by scripts/plant_figures.py;
#                                    then chunkrt margin (servo, k = 2 pi) over it
#
# Timing gates only where a budget file says so (scripts/test.d/30-bench.sh); this test
# judges correctness, so a noisy moment on a shared 2-core host cannot fail it.
#
# Usage: scripts/test.d/40-ethercat-veth.sh        ($ETHERCAT_VETH_SECONDS, default 60)
# Binary: $CHUNKRT_BIN or target/release/chunkrt (built if missing).
# Needs root (netns, veth, AF_PACKET); otherwise a SKIP (scripts/lib/skip.sh; exit 0, a
# failure under CI=true).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$(pwd)"
source scripts/lib/skip.sh
secs="${ETHERCAT_VETH_SECONDS:-60}"

if [ "$(id -u)" -ne 0 ]; then
    skip 40-ethercat-veth "needs root (network namespace, veth pair, raw socket)"
fi
if ! command -v ip >/dev/null 2>&1; then
    skip 40-ethercat-veth "needs iproute2 ('ip' not found)"
fi
bin="${CHUNKRT_BIN:-$root/target/release/chunkrt}"
if [[ ! -x "$bin" ]]; then
    cargo build --release --quiet -p chunkrt-cli
fi
if "$bin" ecsim --help >/dev/null 2>&1; then
    sim_cmd=("$bin" ecsim)
else
    echo "NOTE: '$bin ecsim' not available; using the chunkrt-ecsim example binary"
    cargo build --release --quiet -p chunkrt-ecsim --example ecsim_afpacket
    sim_cmd=("$root/target/release/examples/ecsim_afpacket")
fi

ns="ecat-ns-$$"
host_if="ecat$$"
dev_if="ecsd$$"
work="$(mktemp -d)"
sim_pid=""

stop_sim() {
    if [ -n "$sim_pid" ] && kill -0 "$sim_pid" 2>/dev/null; then
        kill -TERM "$sim_pid" 2>/dev/null || true
        wait "$sim_pid" 2>/dev/null || true
    fi
    sim_pid=""
}
cleanup() {
    stop_sim
    ip link del "$host_if" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

if ! ip netns add "$ns" 2>/dev/null; then
    skip 40-ethercat-veth "cannot create a network namespace here (no CAP_NET_ADMIN?)"
fi
ip link add "$host_if" type veth peer name "$dev_if"
ip link set "$dev_if" netns "$ns"
ip link set "$host_if" up
ip netns exec "$ns" ip link set "$dev_if" up
ip netns exec "$ns" ip link set lo up
sysctl -qw "net.ipv6.conf.$host_if.disable_ipv6=1" 2>/dev/null || true

# The committed config names `ecsim0`; this run's host end has a per-run name.
config_for() { # interface, output file
    sed "s/^interface = \"ecsim0\"/interface = \"$1\"/" rt-config/arm-ethercat-veth.toml >"$2"
}
config_for "$host_if" "$work/veth.toml"
grep -q "interface = \"$host_if\"" "$work/veth.toml"

# The simulated drives answer at real-time priority, below the control thread's 80, as the
# ESCs of a real bus answer in hardware; without it a busy host delays their replies.
rt=()
if command -v chrt >/dev/null 2>&1 && chrt -f 70 true 2>/dev/null; then
    rt=(chrt -f 70)
fi
start_sim() { # drives [simulator config]
    ip netns exec "$ns" "${rt[@]}" "${sim_cmd[@]}" --iface "$dev_if" --drives "$1" \
        --config "${2:-rt-config/ecsim-nominal.toml}" >"$work/ecsim.log" 2>&1 &
    sim_pid=$!
    sleep 0.5
    if ! kill -0 "$sim_pid" 2>/dev/null; then
        echo "FAIL: simulator exited at start:"; cat "$work/ecsim.log"; exit 1
    fi
}

# expect_refusal NAME CONFIG TEXT...: exit status 2 and every TEXT in the message.
expect_refusal() {
    local name="$1" cfg="$2"; shift 2
    local status=0
    "$bin" run --config "$cfg" --bus-period-ms 1 --duration 5s --quiet \
        --out "$work/out-$name" >"$work/$name.log" 2>&1 || status=$?
    if [ "$status" -ne 2 ]; then
        echo "FAIL: $name: exit status $status, expected 2"; cat "$work/$name.log"; exit 1
    fi
    for text in "$@"; do
        if ! grep -qF -- "$text" "$work/$name.log"; then
            echo "FAIL: $name: message lacks '$text':"; cat "$work/$name.log"; exit 1
        fi
    done
    # chunkrt's own message; ethercrab's log lines may come before it.
    local said
    said="$(grep -m1 'chunkrt: error' "$work/$name.log" || grep -m1 -i error "$work/$name.log")"
    echo "ok: $name refused with exit 2: $(cut -c1-260 <<<"$said")"
}

# 1. Wrong interface name.
config_for "nosuchif0" "$work/wrong-if.toml"
expect_refusal wrong-interface "$work/wrong-if.toml" "nosuchif0" "does not exist" "ethercat.interface"

# 1b. No CAP_NET_RAW: the same config as an unprivileged user names the capability.
if command -v setpriv >/dev/null 2>&1; then
    chmod 755 "$work"; chmod 644 "$work/veth.toml"
    mkdir -p "$work/out-noperm"; chmod 777 "$work/out-noperm"
    status=0
    setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all \
        "$bin" run --config "$work/veth.toml" --duration 5s --quiet --out "$work/out-noperm" \
        >"$work/noperm.log" 2>&1 || status=$?
    if [ "$status" -ne 2 ] || ! grep -q "CAP_NET_RAW" "$work/noperm.log"; then
        echo "FAIL: unprivileged run: exit $status, expected 2 naming CAP_NET_RAW:"
        cat "$work/noperm.log"; exit 1
    fi
    echo "ok: no-permission refused with exit 2: $(grep -m1 -i error "$work/noperm.log" | cut -c1-200)"
fi

# 2. A drive missing: the chain has 6 drives, the config 7.
start_sim 6
expect_refusal missing-drive "$work/veth.toml" "6 drive(s) answered" "bus position 6"
stop_sim

# 3. Identity mismatch: drive 3 is not the product the config expects.
start_sim 7
awk 'BEGIN{n=-1} /^\[\[ethercat.drive\]\]/{n++} {if (n==3 && $1=="product_code") print "product_code = 0x04029999"; else print}' \
    "$work/veth.toml" >"$work/identity.toml"
expect_refusal identity-mismatch "$work/identity.toml" "bus position 3" "expected vendor" "found vendor"

# check_run REPORT SECONDS MIN_RIDDEN: correctness of a run, timing printed.
check_run() {
python3 - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
min_ridden = int(sys.argv[3])
c = r["counters"]
kinds = {}
for e in r.get("events", []):
    if e.get("event") == "backend_error":
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
rtt = r["metrics"].get("bus_rtt")
us = lambda ns: f"{ns / 1000:.1f}"
g = lambda k: c.get(k, 0)
print(f"cycles {c['cycles']}, backend errors {c['backend_errors']} {kinds}, "
      f"chunks used {c['chunks_used']}, fallbacks {g('fallback_entries')}, "
      f"max tracking error {r['tracking']['max_err_rad']:.5f} rad")
print(f"frames: lost {g('bus_frames_lost')}, late {g('bus_frames_late')}, ridden through "
      f"{g('bus_frames_ridden_through')}, reported {g('bus_frames_reported')}, longest run "
      f"{g('bus_longest_loss_run')}")
if rtt:
    print(f"bus_rtt (us): p50 {us(rtt['p50'])}  p90 {us(rtt['p90'])}  p99 {us(rtt['p99'])}  "
          f"p99.9 {us(rtt['p999'])}  max {us(rtt['max'])}  (n={rtt['count']})")
fails = []
if r["config"].get("backend") != "ethercat":
    fails.append("the run did not use the ethercat backend")
# Zero working-counter errors and no drive trouble. Lost and late frames are timing on a
# shared host (a userspace simulator behind a veth pair): reconciled, not judged.
for kind in ("working_counter", "drive_missing", "drive_fault", "invalid_command", "io"):
    if kinds.get(kind, 0):
        fails.append(f"{kinds[kind]} {kind} error(s)")
need = ("bus_exchanges", "bus_frames_lost", "bus_frames_late", "bus_frames_ridden_through",
        "bus_frames_reported")
missing = [k for k in need if k not in c]
if missing:
    fails.append(f"the report lacks the bus counters {missing}")
elif not rtt or rtt["count"] == 0:
    fails.append("no bus_rtt samples: no frame came back")
else:
    # Every exchange is in the records (or counted as dropped from the ring), and every
    # recorded exchange either measured a round trip or lost its frame.
    drops = g("ring_drops_cycle")
    if c["bus_exchanges"] != c["cycles"] + drops:
        fails.append(f"{c['bus_exchanges']} exchanges, {c['cycles']} cycle records + "
                     f"{drops} dropped")
    measured = rtt["count"] + c["bus_frames_lost"]
    if not (c["cycles"] <= measured <= c["cycles"] + drops):
        fails.append(f"{rtt['count']} round trips + {c['bus_frames_lost']} lost frames do "
                     f"not account for {c['cycles']} cycles ({drops} records dropped)")
    # A late frame was answered (its command applied, its data used): only lost frames
    # pass the loss policy.
    lost = c["bus_frames_lost"]
    if c["bus_frames_ridden_through"] + c["bus_frames_reported"] != lost:
        fails.append(f"{lost} lost frames, {c['bus_frames_ridden_through']} ridden "
                     f"through + {c['bus_frames_reported']} reported")
    if kinds.get("frame_late", 0):
        fails.append(f"{kinds['frame_late']} frame_late error(s): a late frame is counted, "
                     f"never reported")
    reported = kinds.get("frame_lost", 0)
    if c["backend_errors"] == len(r.get("events", [])) and reported != c["bus_frames_reported"]:
        fails.append(f"{reported} frame errors in the events, {c['bus_frames_reported']} "
                     f"reported by the bus")
    # How many injected losses are ridden through depends on the host: frames it loses
    # itself (a stalled VM misses the timeout) fill the same success-rate window. The rule
    # itself is judged on the virtual clock (crates/chunkrt-ethercat/tests/frame_loss.rs);
    # here it is printed.
    if c["bus_frames_ridden_through"] < min_ridden:
        print(f"NOTE: {c['bus_frames_ridden_through']} frames ridden through (at least "
              f"{min_ridden} with the injected losses alone): {lost} lost in all, the "
              f"longest run {g('bus_longest_loss_run')}: the host's own losses kept the "
              f"success rate below its minimum")
for f in fails:
    print(f"FAIL: {f}")
sys.exit(1 if fails else 0)
PY
}

# run_ok NAME CONFIG SECONDS OUT SIM_CONFIG: `chunkrt run` at 1 ms against freshly started
# drives; it must exit 0.
run_ok() {
    local name="$1" cfg="$2" secs="$3" out="$4"
    stop_sim
    start_sim 7 "$5"
    rm -rf "$out"
    local status=0
    "$bin" run --config "$cfg" --bus-period-ms 1 --duration "${secs}s" --quiet \
        --out "$out" >"$work/$name.log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
        echo "FAIL: $name run exited $status:"; tail -30 "$work/$name.log"; exit 1
    fi
}

# run_checked NAME SECONDS SIM_CONFIG MIN_RIDDEN: a run against freshly started drives.
run_checked() {
    local name="$1" secs="$2" sim_cfg="$3" min_ridden="$4" out="$root/runs/ethercat-veth${5:-}"
    run_ok "$name" "$work/veth.toml" "$secs" "$out" "$sim_cfg"
    if ! check_run "$out/report.json" "$secs" "$min_ridden"; then
        echo "FAIL: $name run (report in $out/report.json)"; exit 1
    fi
    echo "ok: $name ${secs} s run at 1 ms: report in $out/report.json"
}

# 3b. Drives without CoE (fixed SII mapping with the mode entry) against the default
#     [ethercat.pdo] lists: refused with the drive's lists and the fix; nothing was written.
stop_sim
start_sim 7 rt-config/ecsim-no-coe.toml
expect_refusal no-coe "$work/veth.toml" "no CoE mailbox" "\"mode_of_operation\"" \
    "ethercat.pdo.write = false"
if grep -q "did not take the mapping written" "$work/no-coe.log"; then
    echo "FAIL: no-coe: the message says a mapping was written"; exit 1
fi

# The veth config with `[ethercat.pdo]` set: pdo_config WRITE RX TX OUTPUT (TOML lists).
pdo_config() {
    sed -e "/^\[ethercat.pdo\]$/,/^\[/{s/^write = .*/write = $1/;s/^rx = .*/rx = $2/;s/^tx = .*/tx = $3/}" \
        "$work/veth.toml" >"$4"
    grep -q "^write = $1$" "$4"
}
fixed_tx='["statusword", "position_actual", "velocity_actual", "torque_actual", "error_code", "mode_display"]'

# 3c. The same drives, `write = false` (nothing to write without a mailbox) and an rx list
#     without the mode entry: the drives would never be put in CSP. Refused, with the
#     drive's rx list and the config's.
pdo_config false '["controlword", "target_position"]' "$fixed_tx" "$work/nomode.toml"
expect_refusal no-mode "$work/nomode.toml" "no CoE mailbox" \
    'rx mapping is ["controlword", "target_position", "mode_of_operation"]' \
    'ethercat.pdo.rx asks for ["controlword", "target_position"]'

# 3d. The same drives with their own lists in the config: they come up in CSP (0x6061 read
#     through process data) and follow the policy, with the checks of a nominal run.
pdo_config false '["controlword", "target_position", "mode_of_operation"]' "$fixed_tx" \
    "$work/fixed.toml"
fout="$root/runs/ethercat-veth-fixed"
run_ok fixed-mapping "$work/fixed.toml" 5 "$fout" rt-config/ecsim-no-coe.toml
if ! check_run "$fout/report.json" 5 0 || ! python3 - "$fout/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["counters"]
# The drives moved with the policy: chunks were played and the arm tracked them.
if c["chunks_used"] < 20 or r["tracking"]["max_err_rad"] > 0.05:
    sys.exit(f"chunks used {c['chunks_used']}, max tracking error "
             f"{r['tracking']['max_err_rad']} rad")
PY
then
    echo "FAIL: fixed-mapping run (report in $fout/report.json)"; exit 1
fi
echo "ok: drives without CoE, their own lists: 5 s in CSP, report in $fout/report.json"

# 3e. Drives without CoE whose fixed mapping aligns each PDO with 8 bits of padding, as
#     real drives do; the config lists the objects (padding cannot be, and need not be,
#     listed). write = true: nothing can be written without a mailbox, the SII mapping
#     stands. Before issue 36 this was refused ("objects chunkrt does not decode (8 bits
#     of padding, 8 bits of padding)").
cat >"$work/ecsim-padded.toml" <<'TOML'
[drive]
coe = false
rx_pdo = [0x60400010, 0x607A0020, 0x60600008, 0x00000008]
tx_pdo = [0x60410010, 0x60640020, 0x606C0020, 0x60770010, 0x603F0010, 0x60610008, 0x00000008]
TOML
pdo_config true '["controlword", "target_position", "mode_of_operation"]' "$fixed_tx" \
    "$work/padded.toml"
pout="$root/runs/ethercat-veth-padded"
run_ok padded-mapping "$work/padded.toml" 5 "$pout" "$work/ecsim-padded.toml"
if ! check_run "$pout/report.json" 5 0 || ! python3 - "$pout/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["counters"]
if c["chunks_used"] < 20 or r["tracking"]["max_err_rad"] > 0.05:
    sys.exit(f"chunks used {c['chunks_used']}, max tracking error "
             f"{r['tracking']['max_err_rad']} rad")
PY
then
    echo "FAIL: padded-mapping run (report in $pout/report.json)"; exit 1
fi
echo "ok: drives without CoE, padded fixed mapping: 5 s in CSP, report in $pout/report.json"

# 4. Nominal run. The simulator is restarted so its drives start from rest.
run_checked nominal "$secs" rt-config/ecsim-nominal.toml 0

# 4b. Isolated frame faults: 1 % dropped, 1 % answered after the frame timeout. About 200
#     lost frames in 10 s; every one is ridden through unless a run of them passes the loss
#     policy (reconciled above), so at least half of them must have been.
lossy_secs="${ETHERCAT_VETH_LOSSY_SECONDS:-10}"
run_checked lossy "$lossy_secs" rt-config/ecsim-lossy.toml $((lossy_secs * 1000 * 2 / 100 / 2)) -lossy

# 5. SIGTERM: the run stops the arm, quick-stops and disables the drives, leaves OP, and
#    exits 0 with its report (a shutdown that could not disable every drive is recorded
#    as shutdown_error).
stop_sim
start_sim 7
"$bin" run --config "$work/veth.toml" --bus-period-ms 1 --duration inf --quiet \
    --out "$work/out-sigterm" >"$work/sigterm.log" 2>&1 &
run_pid=$!
sleep 4
kill -TERM "$run_pid"
status=0
wait "$run_pid" || status=$?
if [ "$status" -ne 0 ] || ! python3 -c "
import json, sys
r = json.load(open('$work/out-sigterm/report.json'))
sys.exit(1 if 'shutdown_error' in r or r['counters']['cycles'] < 1000 else 0)"; then
    echo "FAIL: SIGTERM: exit $status or unclean shutdown:"; tail -20 "$work/sigterm.log"
    cat "$work/out-sigterm/report.json" 2>/dev/null | grep -i shutdown || true
    exit 1
fi
echo "ok: SIGTERM: drives stopped and disabled, bus back to INIT, exit 0"

# 6. The drives die mid-run (the simulator is killed): the shutdown cannot disable them or
#    take the bus to INIT. That is said on stderr and gives exit status 4, not 0.
stop_sim
start_sim 7
"$bin" run --config "$work/veth.toml" --bus-period-ms 1 --duration inf --quiet \
    --out "$work/out-dead" >"$work/dead.log" 2>&1 &
run_pid=$!
sleep 3
kill -KILL "$sim_pid"; wait "$sim_pid" 2>/dev/null || true; sim_pid=""
sleep 0.5
kill -TERM "$run_pid"
status=0
wait "$run_pid" || status=$?
if [ "$status" -ne 4 ] || ! grep -q "shutdown failed" "$work/dead.log" \
    || ! grep -q '"shutdown_error"' "$work/out-dead/report.json"; then
    echo "FAIL: dead drives: exit $status (expected 4 and 'shutdown failed' on stderr):"
    tail -20 "$work/dead.log"; exit 1
fi
echo "ok: drives gone at shutdown: exit 4: $(grep -m1 "shutdown failed" "$work/dead.log" | cut -c1-200)"

# 7. The phase margin of the runtime's loop over the wire: the servo policy (an integral law
#    of known crossover, k / 2 pi = 1 Hz) through the EtherCAT backend and ecsim's drives.
stop_sim
start_sim 7
mout="$root/runs/margin-veth"
rm -rf "$mout"
status=0
"$bin" margin --config "$work/veth.toml" --servo-gain 6.2832 --delays 0ms --window-s 10 \
    --settle-s 2 --free-s 5 --out "$mout" >"$work/margin.log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    echo "FAIL: margin over veth exited $status:"; tail -20 "$work/margin.log"; exit 1
fi
if ! python3 - "$mout/margin.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
row = m["rows"][0]
assert "EtherCAT on" in m["loop"]["description"], m["loop"]["description"]
assert row["backend"] == "ethercat", row["backend"]
fc = row["crossover_hz"]
print(f"margin over veth: {row['status']}, f_c {fc} Hz, fallbacks {row['fallbacks']} (run in {row['run_dir']})")
# A loop that lost authority to a burst of late frames (timing on a shared host) has no
# margin to judge; one that kept it must show the policy's crossover.
if fc is not None:
    assert abs(fc - 1.0) < 0.25, f"crossover {fc} Hz, expected near 1 Hz"
else:
    assert row["status"].startswith(("lost authority", "undetermined")), row["status"]
PY
then
    echo "FAIL: margin over veth (see $mout/margin.json)"; tail -5 "$work/margin.log"; exit 1
fi
echo "ok: margin of the runtime loop over veth: $(tail -2 "$work/margin.log" | head -1 | tr -s ' ')"

# events_check REPORT EVENTS [ARG...]: runs the Python on stdin with the run's counters as
# `c` (`g` reads one), its whole event log as `events` (the report keeps only the first
# events), the backend errors by kind as `kinds`, the mode changes as `modes`, and `fails`
# already holding any working-counter, lost-drive, refused-command or I/O error.
events_check() {
    python3 - "$@" <<PY
import json, sys
r = json.load(open(sys.argv[1]))
c = r["counters"]
g = lambda k: c.get(k, 0)
events = [json.loads(line) for line in open(sys.argv[2])]
kinds = {}
for e in events:
    if e.get("event") == "backend_error":
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
modes = [(e["to"], e["reason"]) for e in events if e.get("event") == "mode"]


def resumed_after_recovery(modes, fails):
    rec = [i for i, m in enumerate(modes) if m[1] == "DrivesRecovered"]
    if not rec:
        fails.append(f"no DrivesRecovered mode change in {len(modes)}: the last {modes[-6:]}")
    elif not any(m[0] == "Playing" for m in modes[rec[-1]:]):
        fails.append(f"playback did not resume after the drives were back: "
                     f"{modes[rec[-1]:][:6]}")


fails = []
for kind in ("working_counter", "drive_lost", "invalid_command", "io"):
    if kinds.get(kind, 0):
        fails.append(f"{kinds[kind]} {kind} error(s)")
$(cat)
for f in fails:
    print(f"FAIL: {f}")
sys.exit(1 if fails else 0)
PY
}

# 8. A drive power-cycled mid-run, with DC SYNC0 on and the drives' clocks 50 ppm fast
#    against the host's: drive 3 loses power (the drives behind it lose the line and fall
#    to SAFE-OP + 0x001B by their watchdogs) and is brought back without a restart, the
#    others holding; playback resumes (resume = auto). Correctness judged (exit 0, every
#    rejoin completed, none failed, no working-counter error, DrivesRecovered then
#    Playing); the figures printed: fallbacks per minute, the longest ride-through, the
#    rejoin time, the SYNC0 phase error. ETHERCAT_VETH_REJOIN_SECONDS (default 15) and
#    ETHERCAT_VETH_POWER_CYCLE_AT_S (default 5) make it the 10-minute measurement.
rejoin_secs="${ETHERCAT_VETH_REJOIN_SECONDS:-15}"
cycle_at="${ETHERCAT_VETH_POWER_CYCLE_AT_S:-5}"
# The drift is a top-level key: it goes before the file's [[power_cycle]] table.
{ printf 'dc_drift_ppm = 50.0\n'; sed -e "s/^at_s = .*/at_s = $cycle_at/" rt-config/ecsim-power-cycle.toml; } \
    >"$work/ecsim-rejoin.toml"
sed -e 's/^dc_sync0 = false.*/dc_sync0 = true/' "$work/veth.toml" >"$work/veth-dc.toml"
grep -q "^dc_sync0 = true" "$work/veth-dc.toml"
rout="$root/runs/ethercat-veth-rejoin"
run_ok power-cycle "$work/veth-dc.toml" "$rejoin_secs" "$rout" "$work/ecsim-rejoin.toml"
if ! events_check "$rout/report.json" "$rout/events.jsonl" "$rejoin_secs" <<'PY'
secs = float(sys.argv[3])
ph = r["metrics"].get("sync0_phase") or {}
us = lambda ns: f"{ns / 1000:.1f}"
# The fallbacks the power cycle caused (the drives gone, then re-enabled) are not the bus's;
# the rest per minute is the figure of the frame-loss policy.
print(f"power cycle over veth, {secs:.0f} s at 1 ms, DC on: rejoins started "
      f"{g('bus_rejoins_started')}, completed {g('bus_rejoins_completed')}, failed "
      f"{g('bus_rejoins_failed')}, longest {g('bus_longest_rejoin_ns') / 1e6:.1f} ms; "
      f"fallbacks {g('fallback_entries')} ({g('fallback_entries') / secs * 60:.2f}/min), "
      f"backend errors {kinds}")
print(f"frames: lost {g('bus_frames_lost')}, late {g('bus_frames_late')}, ridden through "
      f"{g('bus_frames_ridden_through')}, reported {g('bus_frames_reported')}, longest "
      f"run of lost frames {g('bus_longest_loss_run')}")
gone = [e["t_s"] for e in events if e.get("kind") == "drive_missing"]
back = [e["t_s"] for e in events if e.get("event") == "mode" and e["reason"] == "DrivesRecovered"]
if gone and back:
    again = [e["t_s"] for e in events
             if e.get("event") == "mode" and e["to"] == "Playing" and e["t_s"] > back[-1]]
    print(f"drives missing {gone[0]:.3f}-{gone[-1]:.3f} s ({(gone[-1] - gone[0]) * 1e3:.0f} ms), "
          f"re-enabled at {back[-1]:.3f} s, playing again at "
          f"{again[0] if again else float('nan'):.3f} s")
if ph:
    print(f"sync0_phase (us): p50 {us(ph['p50'])}  p99 {us(ph['p99'])}  p99.9 {us(ph['p999'])}  "
          f"max {us(ph['max'])}  (n={ph['count']})")
if g("bus_rejoins_started") < 1:
    fails.append("no rejoin started: the power cycle was not seen")
if g("bus_rejoins_completed") != g("bus_rejoins_started") or g("bus_rejoins_failed"):
    fails.append("a rejoin did not complete")
resumed_after_recovery(modes, fails)
if not ph or ph.get("count", 0) == 0:
    fails.append("no sync0_phase samples with DC on")
PY
then
    echo "FAIL: power-cycle run (report in $rout/report.json)"; exit 1
fi
echo "ok: a drive power-cycled mid-run was brought back and playback resumed"

# 9. A drive that does not come back (power off for 10 min; rejoin_timeout_ms 2000): the
#    run ends by itself with a controlled stop, says which drive on stderr and exits non-zero
#    (6; 4 when the shutdown, missing that drive, could not take the bus to INIT either).
sed -e "s/^at_s = .*/at_s = 3/" -e "s/^off_ms = .*/off_ms = 600000/" -e "s/^drive = .*/drive = 6/" \
    rt-config/ecsim-power-cycle.toml >"$work/ecsim-gone.toml"
sed -e 's/^\[ethercat\]$/[ethercat]\nrejoin_timeout_ms = 2000.0/' "$work/veth.toml" >"$work/veth-gone.toml"
stop_sim
start_sim 7 "$work/ecsim-gone.toml"
status=0
timeout 60 "$bin" run --config "$work/veth-gone.toml" --bus-period-ms 1 --duration 40s --quiet \
    --out "$work/out-gone" >"$work/gone.log" 2>&1 || status=$?
if [ "$status" -ne 6 ] && [ "$status" -ne 4 ]; then
    echo "FAIL: a drive that never came back: exit $status, expected 6 (or 4)"; tail -20 "$work/gone.log"; exit 1
fi
if ! grep -q "joint 6 left the bus or OP and could not be brought back" "$work/gone.log" \
    || ! grep -q '"drive_lost"' "$work/out-gone/report.json"; then
    echo "FAIL: a drive that never came back: not said on stderr and in the report"
    tail -20 "$work/gone.log"; exit 1
fi
if ! python3 -c "
import json, sys
r = json.load(open('$work/out-gone/report.json'))
sys.exit(0 if r['duration_s'] < 20 else 1)" 2>/dev/null; then
    echo "FAIL: a drive that never came back: the run did not end early"; exit 1
fi
echo "ok: a drive that never came back: exit $status: $(grep -m1 "could not be brought back" "$work/gone.log" | cut -c1-200)"

# 10. The master silent for 150 ms, the drives' SM watchdog being 100 ms: chunkrt (every
#     thread) is stopped with SIGSTOP. The first frame after the gap finds every drive in
#     SAFE-OP with AL status 0x001B (the state a real ESC leaves on its watchdog), so each
#     one is acknowledged back to OP; the drives are reset, re-enabled where they stand and
#     playback resumes.
stop_sim
start_sim 7
sout="$root/runs/ethercat-veth-silent"
rm -rf "$sout"
"$bin" run --config "$work/veth.toml" --bus-period-ms 1 --duration 10s --quiet \
    --out "$sout" >"$work/silent.log" 2>&1 &
run_pid=$!
sleep 4
kill -STOP "$run_pid"
sleep 0.15
kill -CONT "$run_pid"
status=0
wait "$run_pid" || status=$?
if [ "$status" -ne 0 ]; then
    echo "FAIL: silent master run exited $status:"; tail -30 "$work/silent.log"; exit 1
fi
if ! events_check "$sout/report.json" "$sout/events.jsonl" <<'PY'
print(f"master silent 150 ms: rejoins started {g('bus_rejoins_started')}, completed "
      f"{g('bus_rejoins_completed')}, failed {g('bus_rejoins_failed')}, longest "
      f"{g('bus_longest_rejoin_ns') / 1e6:.1f} ms; backend errors {kinds}")
# Every drive left OP on its own watchdog (a rejoin each) and was brought back.
if g("bus_rejoins_started") < 7:
    fails.append(f"{g('bus_rejoins_started')} rejoins for 7 drives out of OP")
if g("bus_rejoins_completed") != g("bus_rejoins_started") or g("bus_rejoins_failed"):
    fails.append("a rejoin did not complete")
if not kinds.get("drive_missing"):
    fails.append("no drive_missing: the drives did not leave OP")
resumed_after_recovery(modes, fails)
PY
then
    echo "FAIL: silent master run (report in $sout/report.json)"; exit 1
fi
echo "ok: the master silent for 150 ms: every drive out of OP on its watchdog, back, playing again"

# 11. Drives that cannot follow: ecsim's velocity limit (0.03 rad/s) far below what the
#     policy asks, and a following-error limit in the config. The control loop names the
#     joints past it and takes the policy's authority (FollowingError); the same limit is
#     each drive's own window (0x6065), so drive faults (0x8611) may come with it.
printf '[drive]\nmax_velocity_counts_s = 5000.0\n' >"$work/ecsim-slow.toml"
sed -e 's/^\[limits\]$/[limits]\nmax_following_error_rad = 0.02/' "$work/veth.toml" \
    >"$work/veth-fe.toml"
grep -q "^max_following_error_rad = 0.02" "$work/veth-fe.toml"
feout="$root/runs/ethercat-veth-following"
run_ok following-error "$work/veth-fe.toml" 8 "$feout" "$work/ecsim-slow.toml"
if ! events_check "$feout/report.json" "$feout/events.jsonl" <<'PY'
fe = [e for e in events if e.get("event") == "following_error"]
print(f"following error over veth: {len(fe)} event(s), joints "
      f"{sorted({e['joint'] for e in fe})}, largest "
      f"{max((e['error_rad'] for e in fe), default=0):.4f} rad (limit 0.02); "
      f"modes {[m for m in modes if m[1] != 'FreshChunk'][:4]}; backend errors {kinds}")
if not fe:
    fails.append("no following_error event")
elif not all(e["error_rad"] > 0.02 and e["limit_rad"] == 0.02 for e in fe):
    fails.append(f"an event within the limit: {fe[:3]}")
if g("following_errors") != len(fe):
    fails.append(f"following_errors {g('following_errors')}, {len(fe)} events")
if not any(m == ("Decelerating", "FollowingError") for m in modes):
    fails.append(f"the policy kept authority: {modes[:6]}")
PY
then
    echo "FAIL: following-error run (report in $feout/report.json)"; exit 1
fi
echo "ok: drives that cannot follow: named, the policy's authority taken"

# 12. The MuJoCo arm behind the drives: one physics model of the Panda moves all seven
#     (gravity, coupled inertia, torque limits), the mounts from the run's own config. The
#     run is judged as 4's, plus its goals and the torques the master read back: a drive
#     model without the arm holds nothing against gravity, and a reversed drive
#     (direction = -1, the shoulder and elbow) read without its direction turns the sign.
sed "s/^interface = \"ecsim0\"/interface = \"$host_if\"/" rt-config/arm-ethercat-mujoco.toml \
    >"$work/mujoco.toml"
grep -q "interface = \"$host_if\"" "$work/mujoco.toml"
# The model path is relative to the config: the copy points at the repository's.
sed -i "s|^model = \"../models/|model = \"$root/models/|" "$work/mujoco.toml"
grep -q "^model = \"$root/models/" "$work/mujoco.toml"
start_arm() {
    stop_sim
    ip netns exec "$ns" "${rt[@]}" "${sim_cmd[@]}" --iface "$dev_if" --drives 7 \
        --config rt-config/ecsim-nominal.toml --arm "$work/mujoco.toml" >"$work/ecsim.log" 2>&1 &
    sim_pid=$!
    sleep 1
    if ! kill -0 "$sim_pid" 2>/dev/null || ! grep -q "the drives move MuJoCo arm" "$work/ecsim.log"; then
        echo "FAIL: simulator with the MuJoCo arm:"; cat "$work/ecsim.log"; exit 1
    fi
}
start_arm
aout="$root/runs/ethercat-veth-mujoco"
rm -rf "$aout"
status=0
"$bin" run --config "$work/mujoco.toml" --bus-period-ms 1 --duration 15s --quiet \
    --out "$aout" >"$work/mujoco-run.log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    echo "FAIL: run on the MuJoCo arm exited $status:"; tail -30 "$work/mujoco-run.log"; exit 1
fi
py="${CHUNKRT_PYTHON:-$root/.venv/bin/python}"
if ! check_run "$aout/report.json" 15 0 || ! "$py" scripts/plant_figures.py "$aout" >"$work/mujoco-figures.json" \
    || ! python3 - "$work/mujoco-figures.json" <<'PY'
import json, sys
f = json.loads(open(sys.argv[1]).read().splitlines()[-1])
te = f["track_err_rad"]
print(f"MuJoCo over veth: goals {f['goals_moved_on_to']}, expired {f['chunks_expired']}, "
      f"tracking P50/P99 {te['p50']:.5f}/{te['p99']:.5f} rad, mean torque (N m) "
      f"{[round(t, 2) for t in f['torque_mean_nm']]}, peak of limit "
      f"{[round(s, 3) for s in f['torque_peak_of_limit']]}")
fails = []
# The scripted policy records no goal index: its tracking is judged instead (measured
# 2026-12-05: P50 0.92 mrad, P99 1.66 mrad).
if te["p99"] > 0.005:
    fails.append(f"tracking error P99 {te['p99']} rad")
if f["chunks_expired"]:
    fails.append(f"{f['chunks_expired']} chunks expired")
mean = f["torque_mean_nm"]
# The Panda held against gravity at these poses: the shoulder pulls back, the elbow up
# (as on the MuJoCo backend; the simulated drives' own motors read about 0 at rest).
if not (mean[1] < -5.0 and mean[3] > 5.0):
    fails.append(f"mean torques {mean}: no gravity load on the shoulder and the elbow")
if any(not 0.0 < s <= 1.0 for s in f["torque_peak_of_limit"]):
    fails.append(f"peak torques {f['torque_peak_of_limit']} of the limits")
for m in fails:
    print(f"FAIL: {m}")
sys.exit(1 if fails else 0)
PY
then
    echo "FAIL: run on the MuJoCo arm over veth (report in $aout/report.json)"; exit 1
fi
echo "ok: the MuJoCo arm behind the drives: 15 s at 1 ms, tracked, gravity held"

# The servo loop's margin over the wire with the arm behind the drives.
start_arm
mmout="$root/runs/margin-veth-mujoco"
rm -rf "$mmout"
status=0
"$bin" margin --config "$work/mujoco.toml" --servo-gain 6.2832 --delays 0ms --window-s 10 \
    --settle-s 2 --free-s 5 --out "$mmout" >"$work/margin-mujoco.log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    echo "FAIL: margin on the MuJoCo arm over veth exited $status:"; tail -20 "$work/margin-mujoco.log"; exit 1
fi
if ! python3 - "$mmout/margin.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
row = m["rows"][0]
assert row["backend"] == "ethercat", row["backend"]
fc = row["crossover_hz"]
print(f"margin over veth, MuJoCo arm: {row['status']}, f_c {fc} Hz, phase margin "
      f"{row['pm_deg']} deg, fallbacks {row['fallbacks']}")
if fc is not None:
    assert abs(fc - 1.0) < 0.5, f"crossover {fc} Hz, expected near 1 Hz"
else:
    assert row["status"].startswith(("lost authority", "undetermined")), row["status"]
PY
then
    echo "FAIL: margin on the MuJoCo arm over veth (see $mmout/margin.json)"; exit 1
fi
echo "ok: margin of the runtime loop over veth with the MuJoCo arm: $(tail -2 "$work/margin-mujoco.log" | head -1 | tr -s ' ')"
stop_sim
