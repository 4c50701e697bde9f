#!/usr/bin/env bash
# Latency CI: `chunkrt bench` against a timing-gap budget, cyclictest beside the loop.
#
# The entry point of the latency container (docker/Dockerfile) and runnable directly
# on a host. Builds chunkrt if no binary is given, installs rt-tests when cyclictest
# is missing (root + apt), then runs the benchmark. The exit status is chunkrt's:
# 0 within budget, 1 a limit broken, 2 usage or environment error.
#
# Usage: scripts/ci-latency.sh [chunkrt bench options...]
#   e.g. scripts/ci-latency.sh --budget rt-config/budget-ci.toml --duration 30s
# Env (used when the option is not given):
#   BUDGET    budget file             (default rt-config/budget.toml)
#   CONFIG    configuration file      (default rt-config/sim.toml)
#   DURATION  run length              (default 60s)
#   OUT       output directory        (default runs/latency; the run it holds from
#             a previous CI run is replaced: --overwrite is passed)
#   CHUNKRT_BIN  chunkrt binary       (default: build it, wherever cargo's target dir is)
#   BASELINE  `none` to run without cyclictest (default cyclictest)
# Relative paths are taken from the repository root (the script runs there).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

has() { # has OPTION ARGS... : whether OPTION (or OPTION=...) was given
    local opt="$1"; shift
    local a
    for a in "$@"; do
        [[ "$a" == "$opt" || "$a" == "$opt="* ]] && return 0
    done
    return 1
}

bin="${CHUNKRT_BIN:-}"
if [[ -z "$bin" ]]; then
    if command -v cargo >/dev/null 2>&1 && [[ -f Cargo.toml ]]; then
        echo "ci-latency: building chunkrt (release)" >&2
        source "$root/scripts/lib/cargo-bin.sh"
        bin="$(cargo_bin chunkrt-cli chunkrt)"
    elif command -v chunkrt >/dev/null 2>&1; then
        bin="$(command -v chunkrt)"
    else
        echo "ci-latency: no chunkrt binary: set CHUNKRT_BIN or install cargo" >&2
        exit 2
    fi
fi
if [[ ! -x "$bin" ]]; then
    echo "ci-latency: $bin is not an executable" >&2
    exit 2
fi

args=(bench)
has --config "$@" || args+=(--config "${CONFIG:-rt-config/sim.toml}")
has --budget "$@" || args+=(--budget "${BUDGET:-rt-config/budget.toml}")
has --duration "$@" || args+=(--duration "${DURATION:-60s}")
has --out "$@" || args+=(--out "${OUT:-runs/latency}")
# A CI job's report replaces the last one (the container's runs/ is a volume kept
# between runs); chunkrt bench refuses an --out that holds a run without it.
has --overwrite "$@" || args+=(--overwrite)
if ! has --baseline "$@" && [[ "${BASELINE:-cyclictest}" != none ]]; then
    if ! command -v cyclictest >/dev/null 2>&1; then
        if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
            echo "ci-latency: installing rt-tests (cyclictest)" >&2
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rt-tests >/dev/null
        else
            echo "ci-latency: cyclictest missing: apt-get install rt-tests (as root), or BASELINE=none" >&2
            exit 2
        fi
    fi
    args+=(--baseline cyclictest)
fi

echo "ci-latency: $bin ${args[*]} $*" >&2
set +e
"$bin" "${args[@]}" "$@"
status=$?
set -e
case $status in
    0) echo "ci-latency: within budget" >&2 ;;
    1) echo "ci-latency: BUDGET BROKEN (or the run failed); see the verdict table above" >&2 ;;
    *) echo "ci-latency: usage or environment error (exit $status)" >&2 ;;
esac
exit "$status"
