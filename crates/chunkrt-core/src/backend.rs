//! What a backend (simulated arm, EtherCAT drives) must implement.

use crate::io::{Command, Feedback};
use crate::time::MonoTime;

/// An error of one cycle's exchange. Small and `Copy`: creating one never allocates,
/// so the control thread can return, count and report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendError {
    /// The working counter of the process-data exchange was not what the bus should give.
    WorkingCounter {
        /// Expected working counter.
        expected: u16,
        /// Received working counter.
        received: u16,
    },
    /// The cycle's frame did not come back within the frame timeout (and the loss policy
    /// reports it: too many in a row, or too few answered of the last ones).
    FrameLost,
    /// A drive reports a fault.
    DriveFault {
        /// Joint index.
        joint: u16,
        /// CiA 402 error code (0x603F).
        code: u16,
    },
    /// A drive stopped answering.
    DriveMissing {
        /// Joint index.
        joint: u16,
    },
    /// A drive left OP or the bus and the backend gave up bringing it back: the run
    /// must end with a controlled stop (returned every cycle from then on).
    DriveLost {
        /// Joint index.
        joint: u16,
    },
    /// The command was refused before it reached the drives (NaN, wrong dof).
    InvalidCommand {
        /// Joint index.
        joint: u16,
    },
    /// An OS-level I/O error.
    Io {
        /// errno.
        errno: i32,
    },
    /// An error injected by a test or fault-injection configuration.
    Injected,
    /// The bus failed in a way that is not a lost frame: a reply the master could not
    /// read, the master's own frame handling, or a process image it could not write or
    /// read. Never ridden through; the cycle's feedback is held, not fresh.
    Bus {
        /// What failed.
        kind: BusErrorKind,
    },
}

/// What kind of bus failure a [`BackendError::Bus`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusErrorKind {
    /// A reply came back that the master could not parse (a PDU longer than the frame, a
    /// frame header that does not fit, a datagram missing).
    MalformedReply,
    /// A reply's data did not decode (a field too short or with a value it cannot hold).
    Decode,
    /// The frame could not be queued or sent (no free frame slot, a send refused).
    Send,
    /// A mailbox (CoE) error.
    Mailbox,
    /// A drive reported an AL error or a state it may not be in.
    SubDevice,
    /// Any other error of the bus master.
    Master,
    /// A drive's outputs could not be written into the process image: its command did not
    /// go out this cycle.
    OutputImage {
        /// Joint index.
        joint: u16,
    },
    /// A drive's inputs could not be read from the process image: its measurement is not
    /// this cycle's.
    InputImage {
        /// Joint index.
        joint: u16,
    },
}

impl core::fmt::Display for BusErrorKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BusErrorKind::MalformedReply => f.write_str("a reply the master could not parse"),
            BusErrorKind::Decode => f.write_str("a reply whose data did not decode"),
            BusErrorKind::Send => f.write_str("the frame could not be sent"),
            BusErrorKind::Mailbox => f.write_str("a mailbox error"),
            BusErrorKind::SubDevice => f.write_str("a drive reported an AL error"),
            BusErrorKind::Master => f.write_str("an error of the bus master"),
            BusErrorKind::OutputImage { joint } => {
                write!(f, "the outputs of joint {joint} could not be written")
            }
            BusErrorKind::InputImage { joint } => {
                write!(f, "the inputs of joint {joint} could not be read")
            }
        }
    }
}

impl BackendError {
    /// A short stable name (for counters and the report).
    pub fn name(&self) -> &'static str {
        match self {
            BackendError::WorkingCounter { .. } => "working_counter",
            BackendError::FrameLost => "frame_lost",
            BackendError::DriveFault { .. } => "drive_fault",
            BackendError::DriveMissing { .. } => "drive_missing",
            BackendError::DriveLost { .. } => "drive_lost",
            BackendError::InvalidCommand { .. } => "invalid_command",
            BackendError::Io { .. } => "io",
            BackendError::Injected => "injected",
            BackendError::Bus { .. } => "bus",
        }
    }
}

impl core::fmt::Display for BackendError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BackendError::WorkingCounter { expected, received } => {
                write!(f, "working counter {received}, expected {expected}")
            }
            BackendError::FrameLost => write!(f, "frame lost"),
            BackendError::DriveFault { joint, code } => {
                write!(
                    f,
                    "drive of joint {joint} in fault, error code 0x{code:04X}"
                )
            }
            BackendError::DriveMissing { joint } => write!(f, "drive of joint {joint} missing"),
            BackendError::DriveLost { joint } => write!(
                f,
                "drive of joint {joint} left OP and could not be brought back"
            ),
            BackendError::InvalidCommand { joint } => {
                write!(
                    f,
                    "command for joint {joint} refused (not finite or out of range)"
                )
            }
            BackendError::Io { errno } => write!(f, "I/O error (errno {errno})"),
            BackendError::Injected => write!(f, "injected backend error"),
            BackendError::Bus { kind } => write!(f, "bus error: {kind}"),
        }
    }
}

impl std::error::Error for BackendError {}

/// A set of drives the control loop exchanges commands and feedback with once a cycle.
pub trait Backend: Send {
    /// Number of joints this backend drives.
    fn dof(&self) -> usize;

    /// A short name for reports ("sim", "ethercat").
    fn name(&self) -> &'static str;

    /// Brings the drives up with their power stage off (may block, may allocate) and
    /// fills `fb` with the first measurement. The runtime calls it on the control
    /// thread, right before [`Backend::enable`] and the loop, so that drives never
    /// wait without process data.
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;

    /// Enables the drives that [`Backend::start`] brought up, holding each at its
    /// measured position, while process data flows every bus period; fills `fb` with
    /// the last measurement. Called on the control thread right before the first
    /// deadline (may block, may allocate). A backend whose drives need no enabling
    /// keeps the default.
    fn enable(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let _ = (now, fb);
        Ok(())
    }

    /// Whether the drives sample on the control grid: [`Backend::exchange`] is then
    /// given the cycle's deadline, not the time the control thread got there. A
    /// simulated arm is integrated to each deadline, as DC-synchronized drives latch
    /// and sample at SYNC0, so a run of it does not depend on how late the thread
    /// woke (two runs repeat to the bit). Default `false`: the time of the exchange.
    fn samples_at_deadline(&self) -> bool {
        false
    }

    /// One cycle: hand `cmd` to the drives and read their feedback into `fb`.
    /// Called on the control thread: must not allocate, lock or log.
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError>;

    /// Brings the drives to rest and disables them (called once, on the control
    /// thread, right after the loop's controlled stop: nothing else is torn down first).
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;

    /// Disables the drives without waiting for them to come to rest first (an
    /// operator's third stop request, after the quick stop was asked for): the disable
    /// command goes out at once. A backend whose shutdown does not wait keeps the
    /// default, its shutdown.
    fn disable_now(
        &mut self,
        now: MonoTime,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.shutdown(now)
    }

    /// The backend's own counters for the run report (frames lost, ridden through, ...),
    /// each handed to `out` as a stable name and a value. Called after the loop ends;
    /// a backend without any keeps the default.
    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        let _ = out;
    }

    /// The hardware units behind the joints, for the wear ledger: each unit's id (a
    /// drive's identity and serial number) and the joints it drives, handed to `out`.
    /// Called after the loop ends. A backend whose hardware reports no identity keeps
    /// the default (none): the config's `wear.hardware_id` names the whole arm.
    fn hardware(&self, out: &mut dyn FnMut(&str, core::ops::Range<usize>)) {
        let _ = out;
    }
}
