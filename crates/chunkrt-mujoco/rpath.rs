//! The build script of every package whose binaries link the MuJoCo library (through
//! chunkrt-mujoco): they find it at run time where it was linked from, and, installed as
//! `<prefix>/bin/<binary>` beside `<prefix>/.mujoco/lib` (the latency container's layout),
//! there.
//!
//! MUJOCO_DYNAMIC_LINK_DIR is the directory mujoco-rs links against: `.mujoco/lib` under
//! the repository root, set by `.cargo/config.toml`, filled by `scripts/bootstrap-mujoco.sh`.
fn main() {
    println!("cargo::rerun-if-env-changed=MUJOCO_DYNAMIC_LINK_DIR");
    if let Ok(dir) = std::env::var("MUJOCO_DYNAMIC_LINK_DIR") {
        println!("cargo::rustc-link-arg=-Wl,-rpath,{dir}");
    }
    println!("cargo::rustc-link-arg=-Wl,-rpath,$ORIGIN/../.mujoco/lib");
}
