//! Bring-up errors: each says which drive, which step, what it reported and what to fix.

use crate::wire::raw::OpenError;
use std::time::Duration;

/// Where a drive sits: its bus position and the joint the config gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DriveId {
    /// Position on the bus (0: the one next to the host).
    pub position: usize,
    /// The joint it drives.
    pub joint: usize,
}

impl std::fmt::Display for DriveId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "drive at bus position {} (joint {}, ethercat.drive[{}])",
            self.position, self.joint, self.position
        )
    }
}

/// A direction of process data, as `ethercat.pdo` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PdoDir {
    /// Host to drive (RxPDO, `ethercat.pdo.rx`).
    Rx,
    /// Drive to host (TxPDO, `ethercat.pdo.tx`).
    Tx,
}

impl PdoDir {
    /// The sync manager PDO assignment object of this direction.
    pub fn assignment(self) -> &'static str {
        match self {
            PdoDir::Rx => "0x1C12",
            PdoDir::Tx => "0x1C13",
        }
    }
}

impl std::fmt::Display for PdoDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PdoDir::Rx => "rx",
            PdoDir::Tx => "tx",
        })
    }
}

/// The bus could not be brought up. No drive is left enabled when this is returned.
#[derive(Debug, thiserror::Error)]
pub enum BringUpError {
    /// The raw socket could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The bus scan failed.
    #[error(
        "bus scan on {wire} failed: {reason}; check that the drives are powered and cabled \
         to this port"
    )]
    Scan {
        /// The wire.
        wire: String,
        /// ethercrab's error.
        reason: String,
    },
    /// Fewer or more drives answered than the config lists.
    #[error("{found} drive(s) answered on {wire}, the config lists {expected}: {hint}")]
    DriveCount {
        /// The wire.
        wire: String,
        /// Drives in the config.
        expected: usize,
        /// Drives that answered.
        found: usize,
        /// What to check.
        hint: String,
    },
    /// A drive is not the one the config expects.
    #[error(
        "{drive}: identity mismatch: expected vendor {expected_vendor:#010x} product \
         {expected_product:#010x}, found vendor {found_vendor:#010x} product \
         {found_product:#010x} (`{name}`); fix the drive order on the bus or \
         ethercat.drive[{}].vendor_id / product_code", drive.position
    )]
    Identity {
        /// The drive.
        drive: DriveId,
        /// Configured vendor.
        expected_vendor: u32,
        /// Configured product.
        expected_product: u32,
        /// Found vendor.
        found_vendor: u32,
        /// Found product.
        found_product: u32,
        /// The drive's SII name.
        name: String,
    },
    /// A CoE (SDO) step failed.
    #[error("{drive}: {step}: SDO {index:#06x}:{sub} failed: {reason}")]
    Sdo {
        /// The drive.
        drive: DriveId,
        /// What was being done.
        step: &'static str,
        /// Object index.
        index: u16,
        /// Subindex.
        sub: u8,
        /// ethercrab's error (an abort code names what the drive refused).
        reason: String,
    },
    /// The drive's process image does not fit the configured mapping.
    #[error(
        "{drive}: process data is {found_in} input / {found_out} output bytes, the mapping in \
         ethercat.pdo needs {need_in} / {need_out}; {hint}"
    )]
    Mapping {
        /// The drive.
        drive: DriveId,
        /// Input bytes found.
        found_in: usize,
        /// Output bytes found.
        found_out: usize,
        /// Input bytes needed.
        need_in: usize,
        /// Output bytes needed.
        need_out: usize,
        /// What to change.
        hint: &'static str,
    },
    /// A drive without CoE has a fixed (SII) mapping that differs from the configured one.
    #[error(
        "{drive}: the drive has no CoE mailbox, so its PDO mapping is fixed (SII) and nothing \
         can be written to it: the drive's {dir} mapping is [{found}], ethercat.pdo.{dir} asks \
         for [{want}]; {hint}"
    )]
    FixedMapping {
        /// The drive.
        drive: DriveId,
        /// `rx` or `tx`.
        dir: &'static str,
        /// What the drive's SII declares, in order.
        found: String,
        /// What the config asks, in order.
        want: String,
        /// The fix.
        hint: String,
    },
    /// A CoE drive's PDO mapping, read back in PRE-OP, differs from the configured one.
    #[error(
        "{drive}: the drive's {dir} process data, read back over CoE in PRE-OP ({} \
         assigns [{pdos}]), is [{found}]; ethercat.pdo.{dir} asks for [{want}]; {hint}",
        dir.assignment()
    )]
    CoeMapping {
        /// The drive.
        drive: DriveId,
        /// Which direction.
        dir: PdoDir,
        /// The PDOs its assignment (0x1C12 for rx, 0x1C13 for tx) lists.
        pdos: String,
        /// Their entries, in order.
        found: String,
        /// What the config asks, in order.
        want: String,
        /// The fix.
        hint: String,
    },
    /// An object in a drive's mapping does not start on a byte boundary.
    #[error(
        "{drive}: the drive's {dir} mapping is [{found}]: {entry} starts at bit {bit} of the \
         process data, not on a byte boundary (the padding before it is not a whole number \
         of bytes); chunkrt reads and writes objects on whole bytes: use a drive, or a \
         mapping, that aligns them"
    )]
    Misaligned {
        /// The drive.
        drive: DriveId,
        /// Which direction.
        dir: PdoDir,
        /// The drive's entries, in order.
        found: String,
        /// The misaligned entry.
        entry: String,
        /// Its bit offset.
        bit: usize,
    },
    /// The drive does not run CSP, or cannot be shown to.
    #[error("{drive}: {what}; {hint}")]
    Mode {
        /// The drive.
        drive: DriveId,
        /// What the drive shows (or why it cannot be read).
        what: String,
        /// The fix.
        hint: &'static str,
    },
    /// An AL state transition did not complete.
    #[error("{step} did not complete within {timeout:?}: {report}")]
    State {
        /// The transition.
        step: &'static str,
        /// Its timeout.
        timeout: Duration,
        /// Per-drive AL state and status code of the drives that did not get there.
        report: String,
    },
    /// The CiA 402 enable sequence did not reach Operation Enabled.
    #[error(
        "CiA 402 enable did not reach Operation Enabled within {timeout:?}: {report}; all \
         drives were disabled again"
    )]
    Enable {
        /// Its timeout.
        timeout: Duration,
        /// Per-drive statusword and error code of the drives that did not get there.
        report: String,
    },
    /// The bus stopped answering during bring-up.
    #[error("{step}: the bus stopped answering on {wire} ({reason})")]
    Bus {
        /// The step.
        step: &'static str,
        /// The wire.
        wire: String,
        /// What happened.
        reason: String,
    },
}
