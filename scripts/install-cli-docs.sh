#!/usr/bin/env bash
# Installs chunkrt's man pages and shell completions (bash, zsh, fish), generated from the
# binary's own command-line definition (`chunkrt reference man|completions`), so they
# always match the binary installed beside them.
#   scripts/install-cli-docs.sh [PREFIX]     PREFIX defaults to /usr/local
#   CHUNKRT_BIN=path/to/chunkrt scripts/install-cli-docs.sh ...   a given binary (else built)
# Then: `man chunkrt-run`; a new bash completes `chunkrt <TAB>` (bash-completion loads
# PREFIX/share/bash-completion/completions/chunkrt on demand).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prefix="${1:-/usr/local}"
bin="${CHUNKRT_BIN:-}"
if [[ -z "$bin" ]]; then
    ./scripts/setup.sh >/dev/null
    cargo build --release --quiet -p chunkrt-cli
    bin="$(pwd)/target/release/chunkrt"
fi
"$bin" reference man "$prefix/share/man/man1"
install -d "$prefix/share/bash-completion/completions" "$prefix/share/zsh/site-functions" \
    "$prefix/share/fish/vendor_completions.d"
"$bin" reference completions bash >"$prefix/share/bash-completion/completions/chunkrt"
"$bin" reference completions zsh >"$prefix/share/zsh/site-functions/_chunkrt"
"$bin" reference completions fish >"$prefix/share/fish/vendor_completions.d/chunkrt.fish"
echo "completions for bash, zsh and fish under $prefix/share"
