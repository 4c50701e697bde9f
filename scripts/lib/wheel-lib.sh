# shellcheck shell=bash
# wheel_lib TAG PACKAGE VERSION WHEEL_SHA256 MEMBER LIB_DIR
#
# Places the shared library MEMBER (a path inside the wheel) of PACKAGE==VERSION's cp311
# manylinux_2_28 x86_64 wheel from PyPI in LIB_DIR, under its own file name. The wheel is
# fetched with pip (never built), checked against WHEEL_SHA256 (a mismatch deletes it and
# fails), and kept in .whl/ under the repository root. Idempotent: a library present with
# the digest recorded when it was extracted returns at once. TAG prefixes every message.
# Env: CHUNKRT_PYTHON, the python whose pip to use (default: python3).
wheel_lib() {
    local tag="$1" package="$2" version="$3" want="$4" member="$5" lib_dir="$6"
    local root name lib stamp whl_dir py wheel got tmp
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
    name="$(basename "$member")"
    lib="${lib_dir}/${name}"
    stamp="${lib}.sha256"
    whl_dir="${root}/.whl"
    py="${CHUNKRT_PYTHON:-python3}"

    if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
        echo "${tag}: only Linux x86_64 is supported (got $(uname -s)-$(uname -m))" >&2
        return 1
    fi
    if [[ -f "$lib" && -f "$stamp" ]] \
        && (cd "$lib_dir" && sha256sum --status -c "$(basename "$stamp")") 2>/dev/null; then
        echo "${tag}: ${lib} present"
        return 0
    fi
    mkdir -p "$lib_dir" "$whl_dir"
    wheel="$(ls "$whl_dir"/"${package}-${version}"-cp311-cp311-*manylinux_2_28_x86_64*.whl 2>/dev/null | head -n1 || true)"
    if [[ -z "$wheel" ]]; then
        echo "${tag}: fetching ${package}==${version} wheel from PyPI"
        if ! "$py" -m pip --version >/dev/null 2>&1; then
            echo "${tag}: '$py -m pip' is not available; install pip (apt-get install python3-pip) or set CHUNKRT_PYTHON" >&2
            return 1
        fi
        "$py" -m pip download --quiet --no-deps "${package}==${version}" \
            --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 \
            --implementation cp --abi cp311 --dest "$whl_dir"
        wheel="$(ls "$whl_dir"/"${package}-${version}"-cp311-cp311-*manylinux_2_28_x86_64*.whl | head -n1)"
    fi
    got="$(sha256sum "$wheel" | cut -d' ' -f1)"
    if [[ "$got" != "$want" ]]; then
        echo "${tag}: SHA-256 mismatch for $(basename "$wheel")" >&2
        echo "  expected ${want}" >&2
        echo "  got      ${got}" >&2
        rm -f "$wheel"
        return 1
    fi
    tmp="$(mktemp -d)"
    "$py" - "$wheel" "$tmp" "$member" <<'PY'
import sys, zipfile
wheel, dest, member = sys.argv[1:4]
with zipfile.ZipFile(wheel) as z:
    z.extract(member, dest)
PY
    install -m 0755 "$tmp/$member" "$lib"
    rm -rf "$tmp"
    (cd "$lib_dir" && sha256sum "$name" > "$(basename "$stamp")")
    echo "${tag}: installed ${lib}"
}
