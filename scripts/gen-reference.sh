#!/usr/bin/env bash
# Regenerates the reference pages that are generated from the code (docs/reference/:
# the exit statuses, the configuration reference, the records' JSON Schemas);
# crates/chunkrt-cli/tests/reference.rs fails while a committed page differs from what the
# code generates now.
#   scripts/gen-reference.sh       CHUNKRT_BIN=... to use a given binary (else built)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin="${CHUNKRT_BIN:-}"
if [[ -z "$bin" ]]; then
    cargo build --release --quiet -p chunkrt-cli
    bin="$(pwd)/target/release/chunkrt"
fi
mkdir -p docs/reference
"$bin" reference exit-statuses >docs/reference/exit-statuses.md
echo "docs/reference/exit-statuses.md"
"$bin" reference config >docs/reference/config.md
echo "docs/reference/config.md"
for record in report margin gap config budget ecsim; do
    "$bin" reference schema "$record" >"docs/reference/$record.schema.json"
    echo "docs/reference/$record.schema.json"
done
