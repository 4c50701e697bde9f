//! Where the default configuration lives.

use std::path::{Path, PathBuf};

/// The default configuration: `rt-config/sim.toml` in the current directory or in
/// the repository the executable was built in (found by walking up from it).
pub fn default_config() -> anyhow::Result<PathBuf> {
    let rel = Path::new("rt-config/sim.toml");
    let mut candidates = vec![];
    if let Ok(cwd) = std::env::current_dir() {
        candidates.extend(cwd.ancestors().map(|d| d.join(rel)));
    }
    if let Ok(exe) = std::env::current_exe() {
        candidates.extend(exe.ancestors().skip(1).map(|d| d.join(rel)));
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        anyhow::anyhow!(
            "no --config given and rt-config/sim.toml was not found from the current \
                 directory or the executable's; pass --config FILE"
        )
    })
}
