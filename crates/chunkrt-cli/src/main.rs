//! `chunkrt`: the real-time dual-rate control runtime's command line.
//!
//! Exit statuses: one table, `exit.rs`'s `STATUSES` (the page
//! `docs/reference/exit-statuses.md` is generated from it). A closed stdout or stderr
//! is not an error: console output is dropped, the run and its files are unaffected,
//! and the status is the command's own (as if the output had been read: `chunkrt check | head -1` still says whether
//! the host passed, a bench piped into `head` still says whether its budget held).

/// `println!` that survives a closed stdout (`| head -1`): the line is dropped (see
/// [`console`]); std's `println!` panics on `EPIPE`.
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::console::out(&format!($($t)*))
    };
}

/// `print!` that survives a closed stdout.
macro_rules! out {
    ($($t:tt)*) => {
        $crate::console::out_raw(&format!($($t)*))
    };
}

/// `eprintln!` that survives a closed stderr.
macro_rules! errln {
    ($($t:tt)*) => {
        $crate::console::err(&format!($($t)*))
    };
}

mod args;
mod bench;
mod check;
mod console;
mod exit;
mod gap;
mod margin;
mod paths;
mod plot;
mod run;
mod runs_dir;
mod service;
mod setup;
mod tools;

pub use exit::{
    exit_status, EXIT_DRIVE_LOST, EXIT_FAIL, EXIT_POLICY_FAILED, EXIT_POLICY_UNUSABLE,
    EXIT_QUICK_STOP, EXIT_RECORDS_INCOMPLETE, EXIT_SHUTDOWN_FAILED, EXIT_THREAD_PANIC, EXIT_USAGE,
};

use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        // Colour only for a person at a terminal: escapes in a log file or a CI
        // capture are noise. NO_COLOR (https://no-color.org) turns it off there too.
        .with_ansi(
            std::io::stderr().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        )
        // Its default answer to a failed write is `eprintln!`, which panics on a
        // closed stderr (`2>&1 | head`, an SSH drop): in whatever thread logged,
        // the control thread included. A lost log line is not worth a stop.
        .log_internal_errors(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CHUNKRT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            errln!("chunkrt: error: {e:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Runs a subcommand; returns the exit status.
fn dispatch(cli: args::Cli) -> anyhow::Result<u8> {
    use args::Command;
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Bench(args) => crate::bench::bench(&args),
        Command::Check(args) => crate::check::check(&args),
        Command::Margin(args) => crate::margin::margin(&args),
        Command::Gap(args) => crate::gap::gap(&args),
        Command::Plot(args) => crate::plot::plot(&args),
        Command::Ecsim(args) => crate::tools::ecsim(&args),
        Command::Policy(cmd) => crate::tools::policy(&cmd),
        Command::Wear(args) => crate::tools::wear::wear(&args),
        Command::Episodes(args) => crate::tools::episodes::episodes(&args),
        Command::Export(cmd) => crate::tools::export::export(&cmd),
        Command::Status(args) => crate::tools::status::status(&args),
        Command::Reference(cmd) => {
            use clap::CommandFactory;
            crate::tools::reference::reference(&cmd, args::Cli::command())
        }
        Command::Validate { file } => crate::tools::validate::validate(&file),
    }
}
