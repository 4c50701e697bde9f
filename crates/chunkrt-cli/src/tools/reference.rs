//! `chunkrt reference`: what is generated from the code rather than written beside it —
//! the exit statuses page (from `exit.rs`'s one table), the JSON Schemas of the records
//! (`schemars`, from the types `report.json`, `margin.json` and `gap.json` are
//! serialized from), the man pages (`clap_mangen`) and the shell completions
//! (`clap_complete`), both from the command line's own definition, so that a renamed
//! flag is renamed in them too.

use clap::{Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

/// `chunkrt reference ...`.
#[derive(Subcommand, Debug, Clone)]
pub enum ReferenceCommand {
    /// The exit statuses as a Markdown page (docs/reference/exit-statuses.md).
    ExitStatuses,
    /// The configuration reference as a Markdown page (docs/reference/config.md): every
    /// key from the configuration's types, every number's range in the validator's own
    /// words, probed on the run configurations in `--configs`.
    Config {
        /// Run configurations to probe the validator in, in order: files, or
        /// directories (every run configuration there, in name order).
        #[arg(
            long,
            num_args = 1..,
            default_values = ["rt-config", "docs/reference/every-section.toml"]
        )]
        configs: Vec<PathBuf>,
    },
    /// The JSON Schema (2020-12) of a record, generated from the type it is written from
    /// (docs/reference/report.schema.json, margin.schema.json, gap.schema.json).
    Schema {
        /// The record: `report` (report.json), `margin` (margin.json) or `gap`
        /// (gap.json).
        record: Record,
    },
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

/// A record whose schema `chunkrt reference schema` prints.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum Record {
    /// `report.json` (`chunkrt run`, `chunkrt bench`).
    Report,
    /// `margin.json` (`chunkrt margin`, either loop).
    Margin,
    /// `gap.json` (`chunkrt gap`).
    Gap,
    /// A run configuration (`rt-config/*.toml`, as JSON: what `chunkrt validate` parses
    /// before its ranges and cross-checks).
    Config,
    /// A timing-gap budget file (`rt-config/budget*.toml`, as JSON).
    Budget,
    /// A `chunkrt ecsim` configuration (`rt-config/ecsim-*.toml`, as JSON).
    Ecsim,
}

/// The JSON Schema (2020-12) of `T` as it is serialized: a field left out when it is
/// absent is not required, one written as `null` is.
fn schema_of<T: schemars::JsonSchema>() -> serde_json::Value {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

/// The schema of `record`, as pretty JSON with a final newline.
pub fn schema(record: Record) -> String {
    let schema = match record {
        Record::Report => schema_of::<chunkrt_telemetry::Report>(),
        Record::Margin => schema_of::<crate::margin::MarginJson>(),
        Record::Gap => schema_of::<crate::gap::GapJson<'static>>(),
        Record::Config => chunkrt_config::reference::schema(),
        Record::Budget => chunkrt_telemetry::budget::schema(),
        Record::Ecsim => chunkrt_ecsim::config::schema(),
    };
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

/// Runs `chunkrt reference`; `cli` is the whole command line's definition (the man
/// pages and completions are made from it). Returns the exit status.
pub fn reference(cmd: &ReferenceCommand, mut cli: clap::Command) -> anyhow::Result<u8> {
    match cmd {
        ReferenceCommand::ExitStatuses => out!("{}", crate::exit::reference_page()),
        ReferenceCommand::Config { configs } => {
            let mut samples = Vec::new();
            for path in configs {
                samples.extend(run_configs(path)?);
            }
            out!("{}", chunkrt_config::reference::reference_page(&samples));
        }
        ReferenceCommand::Schema { record } => out!("{}", schema(*record)),
        ReferenceCommand::Man { dir } => {
            let n = write_man_pages(dir, cli)?;
            outln!("{n} man pages in {}", dir.display());
        }
        ReferenceCommand::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut cli, "chunkrt", &mut script);
            out!("{}", String::from_utf8_lossy(&script));
        }
    }
    Ok(0)
}

/// Writes every command's man page into `dir`; returns how many.
fn write_man_pages(dir: &Path, cmd: clap::Command) -> anyhow::Result<usize> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("writing the man pages into {}", dir.display()))?;
    let pages = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".1"))
        .count();
    Ok(pages)
}

/// The run configurations at `path` (path, text): the file, or those in the directory
/// in name order; each read with the bound every configuration is read with.
fn run_configs(path: &Path) -> anyhow::Result<Vec<(PathBuf, String)>> {
    use anyhow::Context;
    if !path.is_dir() {
        return Ok(vec![(path.to_path_buf(), chunkrt_config::read_file(path)?)]);
    }
    let dir = path;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let text = chunkrt_config::read_file(&path)?;
        if chunkrt_config::FileKind::detect(&path, &text) == chunkrt_config::FileKind::Run {
            out.push((path, text));
        }
    }
    Ok(out)
}
