#!/usr/bin/env bash
# The latency container, built and run here: the runtime image of docker/Dockerfile
# without a registry, `chunkrt bench` inside it with the flags of docker/compose.yaml,
# and the same bench on the host just before, for the container/host wake-latency ratio.
#
#   1. installs podman, runc, mmdebstrap and python3-yaml when missing (root, apt);
#   2. gives podman's parent cgroup an RT budget on kernels with RT group scheduling
#      (cgroup v1 cpu.rt_runtime_us), without which no container gets SCHED_FIFO;
#   3. builds the image: a Debian bookworm base made by mmdebstrap from Debian's own
#      packages (cached under target/container), then the Dockerfile's runtime stage
#      as written, fed with the chunkrt binary and the ONNX Runtime and MuJoCo libraries built on this
#      host in place of the build stage's /out;
#   4. `chunkrt check` in the container: once as compose runs it (the RT group budget,
#      SCHED_FIFO, mlockall, capabilities and devices must PASS), once without the RT
#      budget, the capabilities and the device (each must be reported, with its fix);
#   5. `chunkrt bench` (scripts/ci-latency.sh, cyclictest beside the loop) on the host,
#      then in the container, SEGMENTS times in turn: each must run and pass the budget
#      (BENCH_GATE=rt: a broken budget is reported, not gated), and the container's
#      reports must show SCHED_FIFO and mlockall in effect. Prints the
#      wake-latency P99 ratio container/host (medians over the segments; target <= 1.2:
#      reported, not gated, these are shared machines) and writes it to OUT/ratio.txt.
#
# Where podman cannot run here, prints SKIP and why; under CI=true that is a failure.
# Env: BUDGET (rt-config/budget-ci.toml), DURATION per segment (10s), SEGMENTS (1 pair
# of host and container runs), BENCH_GATE (budget: a broken budget fails; rt: only
# SCHED_FIFO, mlockall and a complete run do), OUT (runs/container-test; under runs/),
# CHUNKRT_BIN (default: build target/release/chunkrt), PARENT_RT_RUNTIME_US (900000,
# the RT budget given to podman's parent cgroup).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

budget="${BUDGET:-rt-config/budget-ci.toml}"
duration="${DURATION:-10s}"
segments="${SEGMENTS:-1}"
gate="${BENCH_GATE:-budget}"
out="${OUT:-runs/container-test}"
parent_rt="${PARENT_RT_RUNTIME_US:-900000}"
cache="$root/target/container"
image=localhost/chunkrt-latency:test
# runc, not podman's default crun: crun refuses hybrid cgroup hierarchies ("cgroups
# in hybrid mode not supported"), runc runs on v1, hybrid and v2.
podman=(podman --runtime runc)

usage() { echo "container-test: $*" >&2; exit 2; }
[[ "$segments" =~ ^[1-9][0-9]*$ ]] || usage "SEGMENTS must be a positive integer: $segments"
[[ "$gate" == budget || "$gate" == rt ]] || usage "BENCH_GATE must be budget or rt: $gate"
# The compose file's volume maps runs/ to /opt/chunkrt/runs, the container's tree.
[[ "$out" =~ ^runs/[^.][^/]* && "$out" != *..* ]] \
    || usage "OUT must be a directory under runs/ (the compose file's volume): $out"
say() { echo "container-test: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
source scripts/lib/skip.sh

# ---- 1. tools --------------------------------------------------------------
[[ $(id -u) -eq 0 ]] || skip container-test "not root: a rootless container cannot get SCHED_FIFO"
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
python3 -c 'import yaml' >/dev/null 2>&1 || missing+=(python3-yaml)
if ((${#missing[@]})); then
    command -v apt-get >/dev/null 2>&1 || skip container-test "${missing[*]} missing and no apt-get to install them"
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi
mkdir -p "$cache"
"${podman[@]}" info >/dev/null 2>"$cache/info.err" \
    || skip container-test "podman cannot run here: $(tail -1 "$cache/info.err")"

# ---- 2. the parent cgroup's RT budget ----------------------------------------
# A container engine can give a container an RT budget (--cpu-rt-runtime) only out of
# its parent cgroup's, and a new parent starts with 0.
rt_group=false
if [[ -f /sys/fs/cgroup/cpu/cpu.rt_runtime_us ]]; then
    rt_group=true
    case "$("${podman[@]}" info --format '{{.Host.CgroupManager}}')" in
        systemd) parent=/sys/fs/cgroup/cpu/machine.slice ;;
        *) parent=/sys/fs/cgroup/cpu/libpod_parent ;;
    esac
    mkdir -p "$parent"
    have="$(cat "$parent/cpu.rt_runtime_us")"
    if ((have < parent_rt)); then
        say "RT group scheduling: giving $parent ${parent_rt} us of RT time per second (had $have)"
        echo "$parent_rt" > "$parent/cpu.rt_runtime_us" \
            || die "cannot give $parent an RT budget of $parent_rt us: its siblings under \
/sys/fs/cgroup/cpu hold the rest of the root's $(cat /sys/fs/cgroup/cpu/cpu.rt_runtime_us) us"
    fi
fi

# ---- 3. the image -------------------------------------------------------------
bin="${CHUNKRT_BIN:-}"
if [[ -z "$bin" ]]; then
    cargo build --release --quiet -p chunkrt-cli
    bin="$root/target/release/chunkrt"
fi
[[ -x "$bin" ]] || die "$bin is not an executable"
ort="$root/.ort/lib"
[[ -d "$ort" ]] || ./scripts/bootstrap-ort.sh
mujoco="$root/.mujoco/lib"
[[ -d "$mujoco" ]] || ./scripts/bootstrap-mujoco.sh

# The runtime stage: from its FROM to the end of the Dockerfile.
stage="$(awk '/^FROM /{n=NR} {l[NR]=$0} END{for(i=n;i<=NR;i++) print l[i]}' docker/Dockerfile)"
# Its packages go into the base, so that its `apt-get install` has nothing to fetch.
packages="$(grep -oE 'apt-get install [^&]*' <<<"$stage" | tr ' ' '\n' \
    | grep -vE '^(apt-get|install|-.*|\\)?$' | sort -u | paste -sd, -)"
[[ -n "$packages" ]] || die "no apt-get install line in the runtime stage of docker/Dockerfile"
suite="$(sed -nE '1s/^FROM debian:([a-z]+)(-slim)?.*/\1/p' <<<"$stage")"
[[ -n "$suite" ]] || die "the runtime stage of docker/Dockerfile is not FROM debian:<suite>: \
$(head -1 <<<"$stage")"
key="$(printf '%s %s' "$suite" "$packages" | sha256sum | cut -c1-12)"
base="localhost/chunkrt-base:$suite-$key"
if ! "${podman[@]}" image exists "$base"; then
    tar="$cache/base-$suite-$key.tar"
    if [[ ! -s "$tar" ]]; then
        say "mmdebstrap $suite with $packages (once; cached in $tar)"
        rm -rf "$tar.part"
        mmdebstrap --quiet --variant=minbase --format=tar --include="$packages" \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
            "$suite" "$tar.part"
        mv "$tar.part" "$tar"
    fi
    # What the debian images set: an imported tarball has no environment at all.
    "${podman[@]}" import --quiet \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        "$tar" "$base" >/dev/null
fi

ctx="$cache/context"
rm -rf "$ctx"
mkdir -p "$ctx/out/bin" "$ctx/out/ort" "$ctx/out/mujoco" "$ctx/scripts"
cp -L "$bin" "$ctx/out/bin/chunkrt"
cp -rL "$ort" "$ctx/out/ort/lib"
cp -a "$mujoco" "$ctx/out/mujoco/lib"
cp -r rt-config "$ctx/rt-config"
cp scripts/ci-latency.sh "$ctx/scripts/ci-latency.sh"
# The build stage's /out is this context's out/.
sed -e "1s#^FROM .*#FROM $base#" -e 's#^COPY --from=build /out/#COPY out/#' \
    <<<"$stage" > "$ctx/Containerfile"
if grep -n -- '--from=' "$ctx/Containerfile"; then
    die "the runtime stage copies from the build stage outside /out; teach this script"
fi
say "building $image (the runtime stage of docker/Dockerfile on $base)"
"${podman[@]}" build --quiet --network host -t "$image" -f "$ctx/Containerfile" "$ctx" >/dev/null

# ---- 4. chunkrt check in the container ---------------------------------------------
mapfile -t compose < <(python3 scripts/compose_podman.py docker/compose.yaml latency)
((${#compose[@]})) || die "no podman options from docker/compose.yaml"
if ! $rt_group; then
    # No RT group scheduling: there is no budget to give, and runc refuses one.
    mapfile -t compose < <(printf '%s\n' "${compose[@]}" | grep -v '^--cpu-rt-')
fi
# Podman's defaults for these (1048576) fail where podman may not raise limits (no
# CAP_SYS_RESOURCE): give the container what this host's podman has.
nproc_max="$(ulimit -Hu)"
pid_max="$(cat /proc/sys/kernel/pid_max)"
if [[ "$nproc_max" == unlimited ]] || ((nproc_max > pid_max)); then nproc_max=$pid_max; fi
limits=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit "nproc=$nproc_max:$nproc_max")
run=("${podman[@]}" run --rm "${limits[@]}")
printf 'container-test: podman options from docker/compose.yaml: %s\n' "${compose[*]}" >&2

rm -rf "$out"
mkdir -p "$out"
"${run[@]}" "${compose[@]}" --entrypoint chunkrt "$image" check > "$out/check.txt" || true
cat "$out/check.txt"
rows=("SCHED_FIFO" "mlockall" "capabilities" "container devices" "RT group budget")
for row in "${rows[@]}"; do
    grep -Eq "^PASS  $row " "$out/check.txt" \
        || die "chunkrt check in the container as compose runs it: $row did not PASS"
done

# Without the RT budget, the capabilities and the device, check must say so.
bare=(--network=host)
"${run[@]}" "${bare[@]}" --entrypoint chunkrt "$image" check > "$out/check-bare.txt" || true
expect=("FAIL  capabilities .*CAP_SYS_NICE missing" "WARN  container devices .*missing"
    "FAIL  SCHED_FIFO")
if $rt_group; then
    expect+=("FAIL  RT group budget .*cpu.rt_runtime_us = 0")
    # Capabilities alone are not enough: the budget is what the kernel asks for.
    "${run[@]}" --network=host --cap-add=SYS_NICE --cap-add=IPC_LOCK \
        --entrypoint chunkrt "$image" check > "$out/check-nobudget.txt" || true
    grep -Eq "^FAIL  RT group budget " "$out/check-nobudget.txt" \
        && grep -Eq "^FAIL  SCHED_FIFO " "$out/check-nobudget.txt" \
        || { cat "$out/check-nobudget.txt"; die "with SYS_NICE but no RT budget, check should FAIL the RT group budget and SCHED_FIFO"; }
fi
for e in "${expect[@]}"; do
    grep -Eq "^$e" "$out/check-bare.txt" \
        || { cat "$out/check-bare.txt"; die "a bare container: check should report: $e"; }
done
say "a bare container is reported as it must be:"
grep -E '^(FAIL|WARN)  (RT group budget|capabilities|container devices|SCHED_FIFO)' \
    "$out/check-bare.txt" >&2

# ---- 5. bench: host, then container, SEGMENTS times -----------------------------
verdict() { # verdict WHERE STATUS: judge one bench's exit status
    case "$2" in
        0) ;;
        1) if [[ "$gate" == budget ]]; then
               die "the bench $1 broke the budget $budget (or the run failed): see its table above"
           fi
           say "NOTE: the bench $1 broke the budget $budget (not gated: BENCH_GATE=rt)"
           broken+=("$1") ;;
        *) die "the bench $1 could not run (exit $2)" ;;
    esac
}
broken=()
for ((i = 1; i <= segments; i++)); do
    say "segment $i/$segments: bench on the host ($duration)"
    status=0
    CHUNKRT_BIN="$bin" ./scripts/ci-latency.sh --budget "$budget" --duration "$duration" \
        --out "$out/host-$i" --quiet || status=$?
    verdict "on the host (segment $i)" "$status"
    say "segment $i/$segments: bench in the container ($duration)"
    status=0
    "${run[@]}" "${compose[@]}" "$image" --budget "$budget" --duration "$duration" \
        --out "$out/container-$i" --quiet || status=$?
    verdict "in the container (segment $i)" "$status"
done
((${#broken[@]} == 0)) || say "budget broken, not gated: ${broken[*]}"

python3 - "$out" "$segments" <<'EOF'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
def load(kind, i):
    try:
        return json.load(open(f"{out}/{kind}-{i}/report.json"))
    except (OSError, ValueError) as e:
        sys.exit(f"container-test: FAIL: no report of the bench {kind}-{i}: {e}")
p99 = lambda r: r["metrics"]["wake_latency"]["p99"] / 1e3
# cyclictest beside the loop, in the same place: the kernel's own share of the ratio.
ct99 = lambda r: (r.get("baseline") or {}).get("cyclictest", {}).get("p99_ns", 0) / 1e3
host, cont, host_ct, cont_ct = [], [], [], []
for i in range(1, n + 1):
    h, c = load("host", i), load("container", i)
    ch = c["host"]
    if not (ch.get("sched_fifo") and ch.get("mlockall")):
        sys.exit("container-test: FAIL: segment %d in the container: SCHED_FIFO %s, mlockall %s "
                 "(%s)" % (i, ch.get("sched_fifo"), ch.get("mlockall"),
                           ch.get("sched_fifo_error") or ch.get("mlockall_error")))
    host.append(p99(h))
    cont.append(p99(c))
    host_ct.append(ct99(h))
    cont_ct.append(ct99(c))
    print("container-test: segment %d: in the container SCHED_FIFO %d and mlockall in effect; "
          "wake P99 host %.1f us, container %.1f us" % (i, ch["priority"], host[-1], cont[-1]))
hm, cm = statistics.median(host), statistics.median(cont)
text = ("wake_latency P99 (median of %d segment(s)): container %.1f us, host %.1f us, "
        "container/host %.2f (target <= 1.2; reported, not gated)\n" % (n, cm, hm, cm / max(hm, 1e-3)))
hc, cc = statistics.median(host_ct), statistics.median(cont_ct)
if hc > 0 and cc > 0:
    text += ("cyclictest P99 beside it: container %.1f us, host %.1f us, container/host %.2f\n"
             % (cc, hc, cc / hc))
open(f"{out}/ratio.txt", "w").write(text)
print("".join("container-test: " + line + "\n" for line in text.splitlines()), end="")
EOF
