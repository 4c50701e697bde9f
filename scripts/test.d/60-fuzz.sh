#!/usr/bin/env bash
# Bounded fuzzing of chunkrt's untrusted inputs on the stable toolchain: each target
# replays its committed corpus (fuzz/corpus/<target>/) and then runs mutated inputs
# for FUZZ_SECONDS (default 20) or FUZZ_ITERATIONS (default 1 000 000), whichever
# ends first. Built with the dev profile so that integer overflow panics are caught
# too. A panic fails the script; the input is saved under fuzz/crashes/<target>/.
# (The proptest side runs with the unit tests: cargo test -p chunkrt-fuzz.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
seconds="${FUZZ_SECONDS:-20}"
iterations="${FUZZ_ITERATIONS:-1000000}"
seed="${FUZZ_SEED:-$(date +%s)}"
cargo build --quiet -p chunkrt-fuzz
echo "fuzz: seed ${seed}, ${seconds} s or ${iterations} inputs per target"
for target in config manifest chunks; do
    ./target/debug/chunkrt-fuzz "$target" --seconds "$seconds" --iterations "$iterations" --seed "$seed"
done
