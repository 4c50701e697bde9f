//! chunkrt-fuzz: fuzzing of chunkrt's untrusted inputs on the stable toolchain.
//!
//! * [`targets`]: the config parser (`Config::parse_str`), the policy manifest
//!   loader (`Manifest::parse`) and chunk ingestion (`Executor::offer` + `tick`
//!   + the gate, driven by a byte script). None may panic on any input.
//! * [`runner`]: a corpus-replaying mutation fuzzer with bounded iterations and
//!   time, used by `scripts/test.d/60-fuzz.sh` through the `chunkrt-fuzz` binary.
//!   The committed corpus is in `fuzz/corpus/<target>/`.
//! * `tests/properties.rs`: proptest strategies over the same targets.
//!
//! The EtherCAT simulator's frame parser has its own proptest fuzzing in
//! `crates/chunkrt-ecsim/tests/frame_fuzz.rs`.

pub mod runner;
pub mod targets;
