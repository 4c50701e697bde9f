#!/usr/bin/env bash
# Soak: the simulated arm at a 1 ms bus period, driven by the bundled flow-matching
# policy (ONNX Runtime), with a mix of injected faults, for DURATION (default 2m).
#
#   ./scripts/soak.sh 10m
#
# Passes when the run exits 0 without a panic; resident memory after warm-up grows
# by less than 1 MiB (VmRSS sampled from /proc/PID/status every second; warm-up is
# the first fifth of the run, at most 60 s); and the report's counts reconcile:
#   cycles_run       = cycles + ring_drops_cycle
#   chunks_published = chunks_offered + chunks_overwritten_in_handoff
#                      + chunks_ignored_stopping + chunks_unread_at_end
#   chunks_offered   = chunks_rejected + chunks_accepted
#   chunks_accepted  = chunks_used + chunks_superseded + chunks_discarded + chunks_pending
#
# Faults injected ([inject], deterministic from the seed): inference delay spikes
# (300 ms, p = 0.03: chunks expire and the fallback ladder runs), dropped chunks
# (p = 0.05), observation delay (10 ms), transport delay (2 ms), feedback delay (1 ms).
#
# Environment: CHUNKRT_BIN (default: builds chunkrt, wherever cargo's target dir is), SOAK_OUT
# (default: runs/soak), SOAK_MAX_RSS_GROWTH_KIB (default 1024).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

duration="${1:-2m}"
out="${SOAK_OUT:-${root}/runs/soak}"
max_growth_kib="${SOAK_MAX_RSS_GROWTH_KIB:-1024}"

seconds() {
    local d="$1"
    case "$d" in
        *ms) echo $(( ${d%ms} / 1000 )) ;;
        *s) echo "${d%s}" ;;
        *m) echo $(( ${d%m} * 60 )) ;;
        *h) echo $(( ${d%h} * 3600 )) ;;
        *) echo "soak: DURATION must look like 120s, 2m or 1h (got '$d')" >&2; exit 2 ;;
    esac
}
total_s="$(seconds "$duration")"
if (( total_s < 10 )); then
    echo "soak: DURATION must be at least 10s" >&2
    exit 2
fi
warmup_s=$(( total_s / 5 ))
(( warmup_s > 60 )) && warmup_s=60

if [[ -z "${CHUNKRT_BIN:-}" ]]; then
    source scripts/lib/cargo-bin.sh
    CHUNKRT_BIN="$(cargo_bin chunkrt-cli chunkrt)"
fi
if [[ ! -e "${root}/.ort/lib/libonnxruntime.so" ]] && ! ls "${root}"/.ort/lib/libonnxruntime.so* >/dev/null 2>&1; then
    ./scripts/bootstrap-ort.sh
fi

rm -rf "$out"
mkdir -p "$out"
# The default config with absolute paths (the config is written elsewhere) and the
# fault mix appended.
config="${out}/soak.toml"
sed -e "s|^manifest = \"policies/|manifest = \"${root}/rt-config/policies/|" \
    rt-config/sim.toml >"$config"
cat >>"$config" <<'EOF'

[inject]
seed = 9
observation_delay_ms = 10.0
transport_delay_ms = 2.0
feedback_delay_ms = 1.0
drop_chunk_probability = 0.05
inference_delay = { kind = "spikes", base_ms = 0.0, spike_ms = 300.0, probability = 0.03 }
EOF
"$CHUNKRT_BIN" validate "$config" >/dev/null

echo "soak: ${total_s} s at a 1 ms bus period, bundled policy, injected faults; warm-up ${warmup_s} s; output ${out}"
"$CHUNKRT_BIN" run --config "$config" --bus-period-ms 1 --duration "${total_s}s" \
    --quiet --out "${out}/run" >"${out}/stdout.txt" 2>"${out}/stderr.txt" &
pid=$!

# VmRSS (KiB) once a second, with the seconds since start.
rss_log="${out}/rss.tsv"
: >"$rss_log"
t=0
while kill -0 "$pid" 2>/dev/null; do
    rss="$(awk '/^VmRSS:/ {print $2}' "/proc/${pid}/status" 2>/dev/null || true)"
    [[ -n "$rss" ]] && printf '%s\t%s\n' "$t" "$rss" >>"$rss_log"
    sleep 1
    t=$(( t + 1 ))
done
set +e
wait "$pid"
status=$?
set -e

# The gate log is large at a 1 ms period (each gate intervention of the policy's
# trajectory is a line): keep its size and its first 10 000 lines.
gate_log="${out}/run/gate.jsonl"
if [[ -f "$gate_log" ]]; then
    gate_bytes="$(stat -c %s "$gate_log")"
    echo "soak: gate.jsonl ${gate_bytes} bytes (kept: the first 10000 lines)"
    head -n 10000 "$gate_log" >"${gate_log}.head" && mv "${gate_log}.head" "$gate_log"
fi
# The recording is larger still (every cycle, event and chunk, about 1 MB/s here):
# say its size and drop it, as the soak judges the report and the memory.
for rec in "${out}"/run/recording*.mcap; do
    [[ -f "$rec" ]] || continue
    echo "soak: $(basename "$rec") $(stat -c %s "$rec") bytes (removed)"
    rm -f "$rec"
done

python3 - "$out" "$status" "$warmup_s" "$max_growth_kib" <<'EOF'
import json, sys
out, status, warmup_s, max_growth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
failures = []
stderr = open(f"{out}/stderr.txt", errors="replace").read()
if status != 0:
    failures.append(f"exit status {status}")
if "panicked" in stderr:
    failures.append("a thread panicked (see stderr.txt)")
try:
    report = json.load(open(f"{out}/run/report.json"))
except Exception as e:
    print(f"soak: FAIL: no report ({e})\n--- stderr ---\n{stderr[-3000:]}")
    sys.exit(1)
if "inference_panic" in report:
    failures.append(f"inference panic: {report['inference_panic']}")
c = report["counters"]
g = lambda k: c.get(k, 0)
identities = [
    ("cycles_run = cycles + ring_drops_cycle",
     g("cycles_run"), g("cycles") + g("ring_drops_cycle")),
    ("chunks_published = offered + overwritten_in_handoff + ignored_stopping + unread_at_end",
     g("chunks_published"),
     g("chunks_offered") + g("chunks_overwritten_in_handoff") + g("chunks_ignored_stopping")
     + g("chunks_unread_at_end")),
    ("chunks_offered = rejected + accepted",
     g("chunks_offered"), g("chunks_rejected") + g("chunks_accepted")),
    ("chunks_accepted = used + superseded + discarded + pending",
     g("chunks_accepted"),
     g("chunks_used") + g("chunks_superseded") + g("chunks_discarded") + g("chunks_pending")),
]
for name, lhs, rhs in identities:
    ok = "ok" if lhs == rhs else "MISMATCH"
    print(f"soak: {name}: {lhs} vs {rhs} {ok}")
    if lhs != rhs:
        failures.append(f"does not reconcile: {name} ({lhs} != {rhs})")
if "cycles_run" not in c:
    failures.append("the report has no cycles_run counter")

samples = []
for line in open(f"{out}/rss.tsv"):
    t, kib = line.split()
    samples.append((int(t), int(kib)))
after = [kib for t, kib in samples if t >= warmup_s]
if len(after) < 3:
    failures.append(f"too few memory samples after warm-up ({len(after)})")
    growth = None
else:
    base = after[0]
    growth = max(after) - base
    print(f"soak: VmRSS after warm-up: start {base} KiB, max {max(after)} KiB, "
          f"end {after[-1]} KiB, growth {growth} KiB (limit {max_growth} KiB); "
          f"first sample {samples[0][1]} KiB")
    if growth >= max_growth:
        failures.append(f"resident memory grew by {growth} KiB after warm-up")

m = report.get("metrics", {})
def us(name, q):
    v = m.get(name, {}).get(q)
    return "-" if v is None else f"{v / 1000:.0f} us"
print(f"soak: duration {report['duration_s']:.1f} s, cycles_run {g('cycles_run')}, "
      f"overruns {g('deadline_overruns')}, missed {g('missed_cycles')}, ring drops {g('ring_drops')}")
print(f"soak: chunks published {g('chunks_published')}, used {g('chunks_used')}, "
      f"rejected {g('chunks_rejected')}, expired {g('chunks_expired')}, "
      f"dropped (injected) {g('chunks_dropped_injected')}, fallback entries {g('fallback_entries')}, "
      f"backend errors {g('backend_errors')}")
print(f"soak: wake latency p99 {us('wake_latency', 'p99')}, max {us('wake_latency', 'max')}; "
      f"cycle time p99 {us('cycle_time', 'p99')}; inference p99 {us('inference_latency', 'p99')}")
json.dump({"status": status, "rss_growth_kib": growth, "counters": c,
           "failures": failures}, open(f"{out}/soak.json", "w"), indent=2)
if failures:
    print("soak: FAIL: " + "; ".join(failures))
    sys.exit(1)
print("soak: PASS")
EOF
