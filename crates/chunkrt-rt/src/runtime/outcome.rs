//! What a run is asked to do and what it returns: the options, the outcome, how it
//! ended.

use chunkrt_telemetry::{MetricSet, Report};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Stop after this long (None: until stopped).
    pub duration: Option<Duration>,
    /// Where to write `report.json`, `gate.jsonl`, `events.jsonl`.
    pub out_dir: Option<PathBuf>,
    /// Print the live status line.
    pub live_status: bool,
    /// External stop request (signals, tests).
    pub stop: Arc<AtomicBool>,
    /// Name of the config file, for the report.
    pub config_name: String,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: Some(Duration::from_secs(10)),
            out_dir: None,
            live_status: false,
            stop: Arc::new(AtomicBool::new(false)),
            config_name: String::new(),
        }
    }
}

/// The result of a run.
#[derive(Debug)]
pub struct RunOutcome {
    /// The report (also written as `report.json` when an output directory is set).
    pub report: Report,
    /// Whether the inference thread panicked.
    pub inference_panicked: Option<String>,
    /// Why the backend's shutdown failed (drives not disabled, bus not back in INIT):
    /// the arm may still be powered; also in the report as `shutdown_error`.
    pub shutdown_error: Option<String>,
    /// A drive left the bus mid-run and the backend could not bring it back: the arm
    /// was brought to a controlled stop and the run ended early; also in the report as
    /// `drive_lost`.
    pub drive_lost: Option<String>,
    /// The histograms behind the report's percentiles (for `.hgrm` files and plots).
    pub metrics: MetricSet,
    /// Why the records in the output directory are incomplete (a log or the report
    /// could not be written, e.g. the disk filled); the run itself went on.
    pub records_error: Option<String>,
    /// The runtime threads that panicked (control with its backend, inference outside
    /// the policy, camera, telemetry): the run ended with the quick stop; also in the
    /// report as `thread_panics`.
    pub thread_panics: Vec<crate::supervise::ThreadPanic>,
    /// The stop became a quick stop (a second stop request, or a panic): how it ended;
    /// also in the report as `quick_stop`.
    pub quick_stop: Option<QuickStopOutcome>,
    /// The policy was asked for chunks and produced none that could be published (every
    /// call failed, or every chunk was refused at ingestion): why; also in the report as
    /// `policy_unusable`.
    pub policy_unusable: Option<String>,
}

/// How a quick stop ended.
#[derive(Clone, Debug, PartialEq)]
pub struct QuickStopOutcome {
    /// A second stop request (SIGINT, SIGTERM, SIGHUP) asked for it.
    pub by_signal: bool,
    /// A third one ended the wait for standstill at once.
    pub third_signal: bool,
    /// The drives reported standstill before they were disabled.
    pub standstill: bool,
    /// From the quick stop's start to the disable (ms).
    pub after_ms: f64,
    /// The backend's shutdown (disable, INIT) succeeded.
    pub disabled: bool,
}

impl std::fmt::Display for QuickStopOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = if self.by_signal {
            "a second stop request"
        } else {
            "a thread's panic"
        };
        write!(f, "{why} switched to the drives' quick stop; ")?;
        if self.third_signal {
            write!(
                f,
                "a third one ended the wait after {:.0} ms; ",
                self.after_ms
            )?;
        } else if self.standstill {
            write!(f, "standstill after {:.0} ms; ", self.after_ms)?;
        } else {
            write!(f, "no standstill within {:.0} ms; ", self.after_ms)?;
        }
        f.write_str(if self.disabled {
            "drives disabled"
        } else {
            "the shutdown failed (see shutdown_error)"
        })
    }
}

/// How a run ended, most serious first: what `chunkrt` turns into its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ending {
    /// The backend's shutdown failed: drives may still be enabled.
    ShutdownFailed,
    /// A runtime thread panicked; the arm was brought to a quick stop.
    ThreadPanicked,
    /// A drive left the bus and could not be brought back.
    DriveLost,
    /// The policy failed (panicked); the arm was brought to rest.
    PolicyFailed,
    /// The policy produced no usable chunk in the whole run (every call failed or every
    /// chunk was refused at ingestion); the arm never left its hold.
    PolicyUnusable,
    /// A second stop request made the stop a quick stop.
    QuickStopped,
    /// The run ended normally but its records are incomplete.
    RecordsIncomplete,
    /// The run ended normally.
    Normal,
}

impl RunOutcome {
    /// What went wrong, one clause per item, most serious first (empty when the run
    /// ended normally).
    pub fn describe_ending(&self) -> String {
        let mut parts = Vec::new();
        if let Some(e) = &self.shutdown_error {
            parts.push(format!(
                "the shutdown failed: {e}; drives may still be enabled or the bus not in \
                 INIT: check the drives before going near the arm"
            ));
        }
        for p in &self.thread_panics {
            parts.push(p.to_string());
        }
        if let Some(msg) = &self.drive_lost {
            parts.push(msg.clone());
        }
        if let Some(msg) = &self.inference_panicked {
            parts.push(format!(
                "the policy failed during the run ({msg}); the arm was brought to rest"
            ));
        }
        if let Some(msg) = &self.policy_unusable {
            parts.push(msg.clone());
        }
        if let Some(q) = &self.quick_stop {
            parts.push(q.to_string());
        }
        if let Some(e) = &self.records_error {
            parts.push(format!("the records are incomplete: {e}"));
        }
        parts.join("; ")
    }

    /// How the run ended (the most serious of what happened).
    pub fn ending(&self) -> Ending {
        if self.shutdown_error.is_some() {
            Ending::ShutdownFailed
        } else if !self.thread_panics.is_empty() {
            Ending::ThreadPanicked
        } else if self.drive_lost.is_some() {
            Ending::DriveLost
        } else if self.inference_panicked.is_some() {
            Ending::PolicyFailed
        } else if self.policy_unusable.is_some() {
            Ending::PolicyUnusable
        } else if self.quick_stop.as_ref().is_some_and(|q| q.by_signal) {
            Ending::QuickStopped
        } else if self.records_error.is_some() {
            Ending::RecordsIncomplete
        } else {
            Ending::Normal
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervise;

    fn outcome() -> RunOutcome {
        RunOutcome {
            report: Report::default(),
            inference_panicked: None,
            shutdown_error: None,
            drive_lost: None,
            metrics: MetricSet::default(),
            records_error: None,
            thread_panics: Vec::new(),
            quick_stop: None,
            policy_unusable: None,
        }
    }

    /// The most serious of what happened decides, in the documented order
    /// (docs/reliability.md: 4, 7, 6, 3, 9, 8, 5), each added on top of the less serious.
    #[test]
    fn the_most_serious_ending_wins() {
        let mut o = outcome();
        assert_eq!(o.ending(), Ending::Normal);
        assert_eq!(o.describe_ending(), "");
        o.records_error = Some("disk full".into());
        assert_eq!(o.ending(), Ending::RecordsIncomplete);
        o.quick_stop = Some(QuickStopOutcome {
            by_signal: true,
            third_signal: false,
            standstill: true,
            after_ms: 40.0,
            disabled: true,
        });
        assert_eq!(o.ending(), Ending::QuickStopped);
        o.policy_unusable = Some("no usable chunk".into());
        assert_eq!(o.ending(), Ending::PolicyUnusable);
        o.inference_panicked = Some("policy".into());
        assert_eq!(o.ending(), Ending::PolicyFailed);
        o.drive_lost = Some("joint 3".into());
        assert_eq!(o.ending(), Ending::DriveLost);
        o.thread_panics.push(supervise::ThreadPanic {
            thread: "chunkrt-telemetry".into(),
            message: "boom".into(),
        });
        assert_eq!(o.ending(), Ending::ThreadPanicked);
        o.shutdown_error = Some("drive 2 still enabled".into());
        assert_eq!(o.ending(), Ending::ShutdownFailed);
        // Every item is said, the shutdown first.
        let d = o.describe_ending();
        assert!(
            d.starts_with("the shutdown failed: drive 2 still enabled"),
            "{d}"
        );
        for part in [
            "chunkrt-telemetry panicked: boom",
            "joint 3",
            "policy",
            "no usable chunk",
            "disk full",
        ] {
            assert!(d.contains(part), "{part} missing from {d}");
        }
        // A quick stop a panic caused is not a quick stop by signal.
        let mut o = outcome();
        o.quick_stop = Some(QuickStopOutcome {
            by_signal: false,
            third_signal: false,
            standstill: false,
            after_ms: 1000.0,
            disabled: true,
        });
        assert_eq!(o.ending(), Ending::Normal);
        assert!(o.describe_ending().contains("no standstill within 1000 ms"));
    }
}
