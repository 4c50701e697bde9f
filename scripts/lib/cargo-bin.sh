# Sourced by the scripts that run a binary of this workspace.
#
#   cargo_bin PACKAGE BIN   builds BIN of PACKAGE (release) and prints the path of
#                           the executable cargo reports
#
# The path comes from cargo itself (`--message-format=json`), so it is right
# wherever the target directory is: CARGO_TARGET_DIR (developer machines, CI
# caches), build.target-dir in a .cargo/config.toml, or the default target/.
# Assuming ./target/release/ made the demo fail with "No such file or directory"
# after a successful build.

cargo_bin() {
    local pkg="$1" bin="$2" json exe
    json="$(cargo build --release --quiet -p "$pkg" --bin "$bin" \
        --message-format=json-render-diagnostics)" || return 1
    exe="$(printf '%s\n' "$json" | python3 -c '
import json, sys
bin = sys.argv[1]
exe = None
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == bin:
        exe = m.get("executable") or exe
if exe:
    print(exe)
' "$bin")"
    if [[ -z "$exe" || ! -x "$exe" ]]; then
        echo "cargo_bin: cargo built ${pkg} but reported no executable for ${bin}" >&2
        return 1
    fi
    printf '%s\n' "$exe"
}
