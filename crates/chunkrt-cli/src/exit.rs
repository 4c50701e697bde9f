//! The exit statuses of `chunkrt`: one table ([`STATUSES`]) that the code's constants
//! name and the reference page (`docs/reference/exit-statuses.md`, written by
//! `chunkrt reference exit-statuses`) is generated from.

/// Exit status of a failed run or a broken budget.
pub const EXIT_FAIL: u8 = 1;
/// Exit status of a usage, configuration or bring-up error.
pub const EXIT_USAGE: u8 = 2;
/// Exit status when the policy failed during the run (the arm was brought to rest).
pub const EXIT_POLICY_FAILED: u8 = 3;
/// Exit status when the shutdown failed; wins over [`EXIT_POLICY_FAILED`].
pub const EXIT_SHUTDOWN_FAILED: u8 = 4;
/// Exit status when the run ended normally but its records are incomplete.
pub const EXIT_RECORDS_INCOMPLETE: u8 = 5;
/// Exit status when a drive was lost mid-run; [`EXIT_SHUTDOWN_FAILED`] wins over it.
pub const EXIT_DRIVE_LOST: u8 = 6;
/// Exit status when a runtime thread panicked.
pub const EXIT_THREAD_PANIC: u8 = 7;
/// Exit status when a second stop request made the stop a quick stop.
pub const EXIT_QUICK_STOP: u8 = 8;
/// Exit status when the policy produced no usable chunk in the whole run.
pub const EXIT_POLICY_UNUSABLE: u8 = 9;

/// One exit status: its number, a short name, and what it tells the caller.
pub struct Status {
    /// The process's exit status.
    pub code: u8,
    /// A short name (the constant's, without `EXIT_`).
    pub name: &'static str,
    /// What happened, and what state the arm was left in.
    pub meaning: &'static str,
}

/// Every exit status `chunkrt` gives, in ascending order.
pub const STATUSES: &[Status] = &[
    Status {
        code: 0,
        name: "OK",
        meaning: "the command did what it was asked: a run ended normally (arm brought to \
                  rest, drives disabled, records complete), a bench within its budget, a \
                  file valid, no channel over its tolerance",
    },
    Status {
        code: EXIT_FAIL,
        name: "FAIL",
        meaning: "the run failed or broke its budget (`bench`: a limit broken; `gap`: a \
                  channel over its tolerance; `check`: a FAIL; `status`: nothing answers; \
                  `validate`: the graph could not be checked, `NOT CHECKED`)",
    },
    Status {
        code: EXIT_USAGE,
        name: "USAGE",
        meaning: "a usage, configuration or bring-up error, or an `--out` holding a run: \
                  nothing was moved; stderr names the file, the key and what was expected",
    },
    Status {
        code: EXIT_POLICY_FAILED,
        name: "POLICY_FAILED",
        meaning: "the policy failed (panicked) during the run; the arm was brought to rest",
    },
    Status {
        code: EXIT_SHUTDOWN_FAILED,
        name: "SHUTDOWN_FAILED",
        meaning: "the shutdown failed: drives not disabled or the bus not back in INIT, so \
                  the arm may still be powered (said on stderr); wins over 3 and 6",
    },
    Status {
        code: EXIT_RECORDS_INCOMPLETE,
        name: "RECORDS_INCOMPLETE",
        meaning: "the run ended normally (arm brought to rest) but its records are \
                  incomplete: a write to `--out` failed, e.g. the disk filled (stderr and \
                  `report.json`'s `log_error` say which); `export`: episodes left out",
    },
    Status {
        code: EXIT_DRIVE_LOST,
        name: "DRIVE_LOST",
        meaning: "a drive left the bus mid-run and could not be brought back; the arm was \
                  brought to a controlled stop",
    },
    Status {
        code: EXIT_THREAD_PANIC,
        name: "THREAD_PANIC",
        meaning: "a runtime thread panicked (control, backend, inference, camera, \
                  telemetry): the arm was brought to a quick stop and the drives disabled",
    },
    Status {
        code: EXIT_QUICK_STOP,
        name: "QUICK_STOP",
        meaning: "a second stop request (SIGINT, SIGTERM, SIGHUP) made the stop the drives' \
                  quick stop; the drives were then disabled",
    },
    Status {
        code: EXIT_POLICY_UNUSABLE,
        name: "POLICY_UNUSABLE",
        meaning: "the policy produced no usable chunk in the whole run (every call failed, \
                  e.g. a server that answered none, or every chunk was refused at ingestion \
                  for setpoints outside the joints' bounds): the arm held where it was",
    },
    Status {
        code: chunkrt_rt::signals::EXIT_STOPPED_WHILE_LOADING as u8,
        name: "STOPPED_WHILE_LOADING",
        meaning: "a stop request while loading, before anything was brought up: the process \
                  ended at once and nothing was moved",
    },
];

/// The exit status of a run that ended as `ending` (the same for `run`, `bench` and
/// `margin`).
pub fn exit_status(ending: chunkrt_rt::Ending) -> u8 {
    use chunkrt_rt::Ending;
    match ending {
        Ending::ShutdownFailed => EXIT_SHUTDOWN_FAILED,
        Ending::ThreadPanicked => EXIT_THREAD_PANIC,
        Ending::DriveLost => EXIT_DRIVE_LOST,
        Ending::PolicyFailed => EXIT_POLICY_FAILED,
        Ending::PolicyUnusable => EXIT_POLICY_UNUSABLE,
        Ending::QuickStopped => EXIT_QUICK_STOP,
        Ending::RecordsIncomplete => EXIT_RECORDS_INCOMPLETE,
        Ending::Normal => 0,
    }
}

/// The reference page of the exit statuses, Markdown (`chunkrt reference
/// exit-statuses`).
pub fn reference_page() -> String {
    let mut out = String::from(
        "# Exit statuses\n\n<!-- Generated by `chunkrt reference exit-statuses` from \
         crates/chunkrt-cli/src/exit.rs; do not edit (scripts/gen-reference.sh). -->\n\n\
         Every `chunkrt` command ends with one of these.\n\n\
         | status | name | meaning |\n|---|---|---|\n",
    );
    for s in STATUSES {
        out.push_str(&format!("| {} | `{}` | {} |\n", s.code, s.name, s.meaning));
    }
    out
}
