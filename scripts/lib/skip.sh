# One rule for every stage of scripts/test.sh (and the scripts they run) that cannot
# run here: `skip WHO WHY...` prints "SKIP WHO: WHY" to stderr, appends that line to
# $CHUNKRT_SKIP_FILE when set (test.sh counts and names the skips from it, as it does
# for the Rust tests' chunkrt_testkit::missing_prerequisite) and exits 0; under CI
# (CI set, not empty, 0 or false: every prerequisite is installed there) it is a
# failure instead: exit 1.
# Source it: source "$(dirname "${BASH_SOURCE[0]}")/.../scripts/lib/skip.sh"

# Whether this is a CI run (the same test as chunkrt_testkit::in_ci).
in_ci() {
    local v="${CI:-}"
    v="${v//[[:space:]]/}"
    [[ -n "$v" && "$v" != 0 && "$v" != false && "$v" != FALSE && "$v" != False ]]
}

# `record_skip WHO WHY...`: the same, but returns (status 0) instead of exiting 0, for
# a script that skips one part and goes on with the rest.
record_skip() {
    local who="$1"
    shift
    local line="SKIP $who: $*"
    if in_ci; then
        echo "$line; CI=true: every prerequisite must be installed, so this is a failure" >&2
        exit 1
    fi
    echo "$line" >&2
    if [[ -n "${CHUNKRT_SKIP_FILE:-}" ]]; then
        printf '%s\n' "$line" >>"$CHUNKRT_SKIP_FILE"
    fi
}

skip() {
    record_skip "$@"
    exit 0
}
