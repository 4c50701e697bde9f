#!/usr/bin/env bash
# Installs mdBook (the Rust project's book tool; the manual under docs/ is an mdBook) into
# .tools/mdbook-$version when it is not there yet, from crates.io with its locked
# dependencies and without the serve/watch/search features (about 120 crates, 1-3 minutes
# on 2 cores). Prints the binary's path.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=0.5.4
root="$(pwd)/.tools/mdbook-${version}"
if [[ ! -x "${root}/bin/mdbook" ]]; then
    cargo install mdbook --version "$version" --locked --no-default-features --quiet \
        --root "$root" --target-dir "$(pwd)/target/tools" >&2
fi
echo "${root}/bin/mdbook"
