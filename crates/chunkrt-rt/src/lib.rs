//! chunkrt-rt: the operating system's real-time facilities and the runtime.
//!
//! `os` wraps SCHED_FIFO, CPU affinity, `mlockall`, stack prefaulting and
//! `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`; `control` is the per-cycle
//! work of the control loop; `schedule` the control thread's loop around it
//! (deadlines, re-arm, stop); `inference` the chunk producer's schedule; `runtime`
//! wires the three threads together and returns the report.

pub mod build;
pub mod camera;
pub mod control;
pub mod error;
pub mod inference;
pub mod ingest;
pub mod inject;
pub mod live_view;
pub mod liveness;
pub mod operator;
pub mod os;
pub mod runtime;
pub mod schedule;
pub mod select;
pub mod signals;
pub mod supervise;
pub mod wear;

pub use control::{ControlLoop, ControlParts};
pub use runtime::{Ending, QuickStopOutcome, RunError, RunOptions, RunOutcome, Runtime};
