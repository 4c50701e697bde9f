//! `chunkrt`: the real-time dual-rate control runtime's command line.
//!
//! Exit status: 0 success; 1 the run failed or broke its budget; 2 usage,
//! configuration or bring-up error (nothing was moved); 3 the policy failed
//! (panicked) during the run and the arm was brought to rest; 4 the shutdown failed
//! (drives not disabled or the bus not back in INIT: the arm may still be powered);
//! 5 the run ended normally (arm brought to rest) but its records are incomplete: a
//! write to `--out` failed, e.g. the disk filled (stderr and `report.json`'s
//! `log_error` say which). A closed stdout or stderr is not an error: console output
//! is dropped, the run and its files are unaffected, and the status is the command's
//! own (as if the output had been read: `chunkrt check | head -1` still says whether
//! the host passed, a bench piped into `head` still says whether its budget held).

/// `println!` that survives a closed stdout (`| head -1`): the line is dropped (see
/// [`run::console`]); std's `println!` panics on `EPIPE`.
macro_rules! outln {
    ($($t:tt)*) => {
        $crate::run::console::out(&format!($($t)*))
    };
}

/// `print!` that survives a closed stdout.
macro_rules! out {
    ($($t:tt)*) => {
        $crate::run::console::out_raw(&format!($($t)*))
    };
}

/// `eprintln!` that survives a closed stderr.
macro_rules! errln {
    ($($t:tt)*) => {
        $crate::run::console::err(&format!($($t)*))
    };
}

mod args;
mod bench;
mod check;
mod margin;
mod margin_live;
mod paths;
mod plot;
mod run;
mod tools;

use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;

/// Exit status of a usage, configuration or bring-up error.
pub const EXIT_USAGE: u8 = 2;
/// Exit status of a failed run or a broken budget.
pub const EXIT_FAIL: u8 = 1;
/// Exit status when the policy failed during the run (the arm was brought to rest).
pub const EXIT_POLICY_FAILED: u8 = 3;
/// Exit status when the shutdown failed (drives not disabled, bus not in INIT); wins over
/// [`EXIT_POLICY_FAILED`]: the arm may still be powered.
pub const EXIT_SHUTDOWN_FAILED: u8 = 4;
/// Exit status when the run ended normally but its records in `--out` are
/// incomplete (a write failed, e.g. the disk filled).
pub const EXIT_RECORDS_INCOMPLETE: u8 = 5;
/// Exit status when a drive left the bus mid-run and could not be brought back (the arm
/// was brought to a controlled stop); [`EXIT_SHUTDOWN_FAILED`] wins over it.
pub const EXIT_DRIVE_LOST: u8 = 6;
/// Exit status when a runtime thread panicked (control, backend, inference, camera,
/// telemetry): the arm was brought to a quick stop and the drives disabled.
pub const EXIT_THREAD_PANIC: u8 = 7;
/// Exit status when a second stop request (SIGINT, SIGTERM, SIGHUP) made the stop a
/// quick stop: the drives' own quick stop, then disabled.
pub const EXIT_QUICK_STOP: u8 = 8;

/// The exit status of a run that ended as `ending` (the same for `run`, `bench` and
/// `margin`).
pub fn exit_status(ending: chunkrt_rt::Ending) -> u8 {
    use chunkrt_rt::Ending;
    match ending {
        Ending::ShutdownFailed => EXIT_SHUTDOWN_FAILED,
        Ending::ThreadPanicked => EXIT_THREAD_PANIC,
        Ending::DriveLost => EXIT_DRIVE_LOST,
        Ending::PolicyFailed => EXIT_POLICY_FAILED,
        Ending::QuickStopped => EXIT_QUICK_STOP,
        Ending::RecordsIncomplete => EXIT_RECORDS_INCOMPLETE,
        Ending::Normal => 0,
    }
}

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
    match run::dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            errln!("chunkrt: error: {e:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
