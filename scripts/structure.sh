#!/usr/bin/env bash
# The repository's structure checks (xtask/src/main.rs): no function over 80 lines in
# any crate under crates/ (tests and #[cfg(test)] modules exempt); no
# import circle between the files of any crate; no dependency cycle between the
# workspace's crates (dev-dependencies counted) and chunkrt-ecsim not a normal
# dependency of chunkrt-ethercat.
#   scripts/structure.sh              all checks, exit 1 on any finding
#   scripts/structure.sh fn-table 25  the 25 longest functions of those crates
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec cargo run --quiet --release -p xtask -- "${@:-structure}"
