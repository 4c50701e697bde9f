//! The repository's structure checks, run by `scripts/structure.sh` (and so by
//! `scripts/test.sh`):
//!
//! - `fn-length`: no function longer than [`fnlen::LIMIT`] lines in any crate of the
//!   workspace ([`fnlen::limited`]); tests are exempt.
//! - `imports`: no import circle between the files of any crate (file A uses an item
//!   defined in file B, and B, through any chain, uses one in A).
//! - `crates`: no dependency cycle between the workspace's crates, counting
//!   dev-dependencies, and none of the banned normal edges ([`crates::BANNED`]).
//!
//! `cargo run -p xtask -- structure` runs all three and exits 1 on any finding;
//! `cargo run -p xtask -- fn-table [N]` prints the N longest functions of the limited
//! crates (the before/after table of a refactor).

mod crates;
mod fnlen;
mod imports;
mod modtree;

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The repository checked: `XTASK_ROOT` when set (e.g. an older checkout, for a
/// before/after table), else the one this xtask is built in.
fn repo_root() -> PathBuf {
    if let Some(root) = std::env::var_os("XTASK_ROOT") {
        return PathBuf::from(root);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the repository root")
        .to_path_buf()
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = repo_root();
    match args.first().map(String::as_str) {
        Some("structure") | None => structure(&root),
        Some("fn-table") => {
            let n = match args.get(1) {
                Some(n) => n
                    .parse()
                    .with_context(|| format!("fn-table {n}: not a count"))?,
                None => 25,
            };
            for f in fnlen::longest(&root, n)? {
                println!("{:>4}  {}  {}:{}", f.lines, f.name, f.file, f.line);
            }
            Ok(())
        }
        Some(other) => bail!("unknown command {other:?}: use `structure` or `fn-table [N]`"),
    }
}

fn structure(root: &Path) -> Result<()> {
    let mut findings = Vec::new();
    findings.extend(fnlen::check(root)?);
    findings.extend(imports::check(root)?);
    findings.extend(crates::check(root)?);
    if findings.is_empty() {
        println!(
            "structure: no function over {} lines in {} crates ({}); no import circle between files; no crate cycle or banned edge",
            fnlen::LIMIT,
            fnlen::limited(root)?.len(),
            fnlen::limited(root)?.join(", ")
        );
        return Ok(());
    }
    for f in &findings {
        println!("{f}");
    }
    bail!("structure: {} finding(s)", findings.len())
}
