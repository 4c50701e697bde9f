#!/usr/bin/env bash
# The scripts run the binary cargo built, wherever the target directory is
# (CARGO_TARGET_DIR set on developer machines and CI caches). Cheap: nothing is
# rebuilt, the target directory "elsewhere" is a symlink to the one already built.
#   1. cargo_bin (scripts/lib/cargo-bin.sh) with CARGO_TARGET_DIR elsewhere returns
#      the executable under it.
#   2. demo.sh and soak.sh run the executable cargo reports: a `cargo` first on PATH
#      reports a wrapper that records its arguments, then runs the real binary
#      (`run` is stopped at once in the soak, which only has to reach it); it
#      refuses any other build, which would rebuild into the empty target dir.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$(pwd)"
source scripts/lib/cargo-bin.sh

fail() { echo "10-target-dir: FAIL: $*" >&2; exit 1; }

real_bin="$(cargo_bin chunkrt-cli chunkrt)"
real_target="$(cd "$(dirname "$real_bin")/.." && pwd -P)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# 1. The resolution itself, with the real cargo.
ln -s "$real_target" "$tmp/elsewhere"
got="$(CARGO_TARGET_DIR="$tmp/elsewhere" cargo_bin chunkrt-cli chunkrt)"
[[ "$got" == "$tmp/elsewhere/release/chunkrt" ]] \
    || fail "with CARGO_TARGET_DIR=$tmp/elsewhere, cargo_bin gave '$got'"
echo "10-target-dir: cargo_bin follows CARGO_TARGET_DIR: $got"

# 2. The scripts use it. The stand-in cargo answers `build --message-format=json`
#    with the wrapper's path and passes everything else to the real cargo.
real_cargo="$(command -v cargo)"
mkdir -p "$tmp/path" "$tmp/other/release"
cat > "$tmp/other/release/chunkrt" <<WRAP
#!/usr/bin/env bash
echo "\$*" >> "$tmp/ran"
[[ "\${1:-}" == run && -n "\${STOP_AT_RUN:-}" ]] && exit 97
exec "$real_bin" "\$@"
WRAP
chmod +x "$tmp/other/release/chunkrt"
cat > "$tmp/path/cargo" <<STUB
#!/usr/bin/env bash
if [[ "\${1:-}" == build && "\$*" == *--message-format=json* ]]; then
    printf '{"reason":"compiler-artifact","target":{"name":"chunkrt","kind":["bin"]},"executable":"%s","fresh":true}\n' \
        "$tmp/other/release/chunkrt"
    exit 0
fi
if [[ "\${1:-}" == build ]]; then
    # A build that does not ask where its output went would rebuild the whole
    # workspace into the fresh target directory: refuse it.
    echo "stand-in cargo: refusing \\\`cargo \$*\\\` (not --message-format=json)" >&2
    exit 1
fi
exec "$real_cargo" "\$@"
STUB
chmod +x "$tmp/path/cargo"

PATH="$tmp/path:$PATH" CARGO_TARGET_DIR="$tmp/other" ./scripts/demo.sh --help >/dev/null \
    || fail "scripts/demo.sh --help failed with CARGO_TARGET_DIR=$tmp/other"
grep -q '^run .*--help' "$tmp/ran" 2>/dev/null \
    || fail "scripts/demo.sh did not run the binary cargo reported ($tmp/other/release/chunkrt)"
echo "10-target-dir: demo.sh ran $tmp/other/release/chunkrt"

rm -f "$tmp/ran"
set +e
PATH="$tmp/path:$PATH" CARGO_TARGET_DIR="$tmp/other" STOP_AT_RUN=1 SOAK_OUT="$tmp/soak" \
    env -u CHUNKRT_BIN ./scripts/soak.sh 10s >/dev/null 2>&1
set -e
grep -q '^validate ' "$tmp/ran" 2>/dev/null && grep -q '^run ' "$tmp/ran" \
    || fail "scripts/soak.sh did not run the binary cargo reported ($tmp/other/release/chunkrt)"
echo "10-target-dir: soak.sh ran $tmp/other/release/chunkrt"
