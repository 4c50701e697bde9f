//! The exit statuses of `chunkrt` (README "Exit statuses"); see `main.rs`'s
//! documentation for what each means.

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
/// Exit status when the policy produced no usable chunk in the whole run (every call
/// failed, e.g. a policy server that answered none; or every chunk was refused at
/// ingestion for setpoints outside the joints' bounds): the arm held where it was.
pub const EXIT_POLICY_UNUSABLE: u8 = 9;

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
