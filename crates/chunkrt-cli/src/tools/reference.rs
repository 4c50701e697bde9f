//! `chunkrt reference`: what is generated from the code rather than written beside it —
//! the exit statuses page (from `exit.rs`'s one table), the man pages (`clap_mangen`)
//! and the shell completions (`clap_complete`), both from the command line's own
//! definition, so that a renamed flag is renamed in them too.

use clap::{CommandFactory, Subcommand};
use std::path::{Path, PathBuf};

/// `chunkrt reference ...`.
#[derive(Subcommand, Debug, Clone)]
pub enum ReferenceCommand {
    /// The exit statuses as a Markdown page (docs/reference/exit-statuses.md).
    ExitStatuses,
    /// The man pages, `chunkrt.1` and one per subcommand (`chunkrt-run.1`, ...), written
    /// into DIR (made if missing).
    Man {
        /// Where to write the pages (e.g. /usr/local/share/man/man1).
        dir: PathBuf,
    },
    /// A shell's completion script, on standard output.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// Runs `chunkrt reference`; returns the exit status.
pub fn reference(cmd: &ReferenceCommand) -> anyhow::Result<u8> {
    match cmd {
        ReferenceCommand::ExitStatuses => out!("{}", crate::exit::reference_page()),
        ReferenceCommand::Man { dir } => {
            let n = write_man_pages(dir)?;
            outln!("{n} man pages in {}", dir.display());
        }
        ReferenceCommand::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(
                *shell,
                &mut crate::args::Cli::command(),
                "chunkrt",
                &mut script,
            );
            out!("{}", String::from_utf8_lossy(&script));
        }
    }
    Ok(0)
}

/// Writes every command's man page into `dir`; returns how many.
fn write_man_pages(dir: &Path) -> anyhow::Result<usize> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    let cmd = crate::args::Cli::command();
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("writing the man pages into {}", dir.display()))?;
    let pages = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".1"))
        .count();
    Ok(pages)
}
