#!/usr/bin/env bash
# The whole test suite, as CI runs it (.ci/run calls this script).
#
# Installs what a fresh machine lacks (ONNX Runtime library, Python reference
# packages, rt-tests), then: formatting, clippy -D warnings, the structure checks
# (scripts/structure.sh: function length, file import circles, crate edges), every unit and
# integration test, the loom model, and the system checks that need a release
# build (and root for the veth/netns ones).
#
# Every stage runs, even after one fails; the end lists the stages that failed and
# every skip by name and count: a test or stage that cannot run here (a missing
# prerequisite, not root) says SKIP and is recorded in $CHUNKRT_SKIP_FILE
# (default target/test-skipped.txt, emptied first; chunkrt_testkit::missing_prerequisite,
# scripts/lib/skip.sh); under CI=true a skip is a failure. Exits non-zero if any stage failed.
#
# TEST_STAGES: only the stages whose names contain one of these words (space
# separated; e.g. TEST_STAGES="tests 40-ethercat"); the names are set-up, fmt, clippy,
# structure, book, tests, book-examples, loom and the scripts in scripts/test.d/; book-long
# (the manual's long examples, tens of minutes) runs only when named. NEXTEST_ARGS: extra arguments for
# the tests stage (e.g. NEXTEST_ARGS="-E binary(vision)").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"
started=$(date +%s)

export CHUNKRT_SKIP_FILE="${CHUNKRT_SKIP_FILE:-${root}/target/test-skipped.txt}"
mkdir -p "$(dirname "$CHUNKRT_SKIP_FILE")"
: >"$CHUNKRT_SKIP_FILE"
failed=()
ran=0

wanted() {
    [[ -z "${TEST_STAGES:-}" ]] && return 0
    local w
    for w in $TEST_STAGES; do
        [[ "$1" == *"$w"* ]] && return 0
    done
    return 1
}

# stage NAME COMMAND...: runs COMMAND (a function or a script, with `set -e`) in a
# subshell; a failure is recorded and the next stage runs.
stage() {
    local name="$1"
    shift
    wanted "$name" || return 0
    printf '\n==== %s ====\n' "$name"
    ran=$((ran + 1))
    local status=0 t0
    t0=$(date +%s)
    set +e
    (set -e; "$@")
    status=$?
    set -e
    printf '==== %s: %d s ====\n' "$name" "$(($(date +%s) - t0))"
    if ((status != 0)); then
        printf '==== %s: FAILED (exit %d) ====\n' "$name" "$status"
        failed+=("$name (exit $status)")
    fi
}

unit_and_integration_tests() {
    export CHUNKRT_PYTHON="${root}/.venv/bin/python"
    source scripts/lib/cargo-bin.sh
    CHUNKRT_BIN="$(cargo_bin chunkrt-cli chunkrt)"
    export CHUNKRT_BIN
    # shellcheck disable=SC2086 # NEXTEST_ARGS is split on purpose.
    if cargo nextest --version >/dev/null 2>&1; then
        cargo nextest run --workspace --release --no-fail-fast ${NEXTEST_ARGS:-}
    else
        cargo test --workspace --release --no-fail-fast ${NEXTEST_ARGS:-}
    fi
}

# The manual (docs/, an mdBook): built, and every link in it and in the README followed.
book() {
    local mdbook
    mdbook="$(./scripts/bootstrap-mdbook.sh)"
    "$mdbook" build docs
    python3 scripts/book-links.py target/book
}

# The manual's shell examples, executed as printed (scripts/book-examples.py): the blocks
# tagged `run` in every run of this script; those tagged `long` (minutes each) only when
# TEST_STAGES names book-long. The commands name ./target/release/chunkrt.
book_examples() {
    cargo build --release --quiet -p chunkrt-cli
    python3 scripts/book-examples.py --self-test
    python3 scripts/book-examples.py "$@"
}

loom() {
    CARGO_TARGET_DIR=target/loom RUSTFLAGS="--cfg loom" \
        cargo test -p chunkrt-buffer --release --test loom
}

stage set-up ./scripts/setup.sh
stage "fmt (cargo fmt --check)" cargo fmt --all -- --check
stage "clippy (--all-targets -D warnings)" cargo clippy --workspace --all-targets --quiet -- -D warnings
stage "structure (scripts/structure.sh)" ./scripts/structure.sh
stage "book (mdbook build, links)" book
stage "tests (unit and integration)" unit_and_integration_tests
stage "book-examples (the manual's blocks tagged run)" book_examples
if [[ " ${TEST_STAGES:-} " == *" book-long "* ]]; then
    stage "book-long (the manual's blocks tagged run and long)" book_examples --long
fi
stage "loom (the triple buffer's model)" loom
for extra in scripts/test.d/*.sh; do
    [[ -e "$extra" ]] || continue
    stage "$(basename "$extra" .sh)" bash "$extra"
done

printf '\n==== summary: %d stage(s) in %d s ====\n' "$ran" "$(($(date +%s) - started))"
mapfile -t skipped < <(sort "$CHUNKRT_SKIP_FILE")
if ((${#skipped[@]})); then
    echo "${#skipped[@]} skipped:"
    printf '  %s\n' "${skipped[@]}"
else
    echo "0 skipped"
fi
if ((${#failed[@]})); then
    echo "${#failed[@]} stage(s) failed:"
    printf '  %s\n' "${failed[@]}"
    exit 1
fi
echo "every stage passed"
