//! Everything the backend needs, taken from the `[ethercat]` section once, before bring-up.

use crate::units::JointScale;
use chunkrt_config::{Config, EthercatConfig, PdoEntry};
use std::time::Duration;

/// Most drives (and PDO entries per direction) the backend handles.
pub const MAX_DRIVES: usize = chunkrt_core::MAX_DOF;

/// One drive in bus order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DriveParams {
    /// The joint it moves.
    pub joint: usize,
    /// Counts <-> radians.
    pub scale: JointScale,
    /// Expected vendor ID.
    pub vendor_id: u32,
    /// Expected product code.
    pub product_code: u32,
    /// Nm per 1000 per mille of 0x6077.
    pub rated_torque_nm: f64,
    /// The drive's own following error window (0x6065) in joint radians, written at
    /// bring-up when the drive has CoE (`limits.max_following_error_rad`; None: the drive
    /// keeps its own).
    pub following_error_window_rad: Option<f64>,
}

/// Byte offsets of the mapped objects inside one drive's inputs / outputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PdoLayout {
    /// 0x6040.
    pub controlword: usize,
    /// 0x607A.
    pub target_position: usize,
    /// 0x60B1, when mapped.
    pub velocity_offset: Option<usize>,
    /// 0x6060, when mapped.
    pub mode_of_operation: Option<usize>,
    /// Bytes of outputs.
    pub out_len: usize,
    /// 0x6041.
    pub statusword: usize,
    /// 0x6064.
    pub position_actual: usize,
    /// 0x606C, when mapped.
    pub velocity_actual: Option<usize>,
    /// 0x6077, when mapped.
    pub torque_actual: Option<usize>,
    /// 0x603F, when mapped.
    pub error_code: Option<usize>,
    /// 0x6061, when mapped.
    pub mode_display: Option<usize>,
    /// 0x60FD, when mapped.
    pub digital_inputs: Option<usize>,
    /// Bytes of inputs.
    pub in_len: usize,
}

impl PdoLayout {
    /// Offsets of the entries, packed in the order given (as a drive packs its PDO).
    pub fn new(rx: &[PdoEntry], tx: &[PdoEntry]) -> PdoLayout {
        let mut l = PdoLayout::default();
        let mut o = 0;
        for e in rx {
            l.place(*e, o);
            o += usize::from(e.bits() / 8);
        }
        l.out_len = o;
        o = 0;
        for e in tx {
            l.place(*e, o);
            o += usize::from(e.bits() / 8);
        }
        l.in_len = o;
        l
    }

    /// Records that `e` is at byte `at` of its direction's image.
    pub fn place(&mut self, e: PdoEntry, at: usize) {
        match e {
            PdoEntry::Controlword => self.controlword = at,
            PdoEntry::TargetPosition => self.target_position = at,
            PdoEntry::VelocityOffset => self.velocity_offset = Some(at),
            PdoEntry::ModeOfOperation => self.mode_of_operation = Some(at),
            PdoEntry::Statusword => self.statusword = at,
            PdoEntry::PositionActual => self.position_actual = at,
            PdoEntry::VelocityActual => self.velocity_actual = Some(at),
            PdoEntry::TorqueActual => self.torque_actual = Some(at),
            PdoEntry::ErrorCode => self.error_code = Some(at),
            PdoEntry::ModeDisplay => self.mode_display = Some(at),
            PdoEntry::DigitalInputs => self.digital_inputs = Some(at),
        }
    }
}

/// The backend's settings.
#[derive(Clone, Debug)]
pub struct EthercatParams {
    /// Network interface.
    pub interface: String,
    /// Bus period (= control period).
    pub period: Duration,
    /// Configure DC SYNC0.
    pub dc_sync0: bool,
    /// Where in the SYNC0 period a cycle's frame is to reach the reference drive.
    pub sync0_shift: Duration,
    /// No reply after this long: frame lost.
    pub frame_timeout: Duration,
    /// Reply after this long (within `frame_timeout`): frame late, counted, data used.
    pub frame_late: Duration,
    /// Lost frames in a row ridden through before one is reported.
    pub max_consecutive_lost: u32,
    /// Lowest share of answered frames over `success_window` frames before lost frames
    /// are reported.
    pub min_success_rate: f64,
    /// Frames the success rate is measured over (1 to 1024).
    pub success_window: u32,
    /// Each AL state transition.
    pub state_timeout: Duration,
    /// The CiA 402 enable sequence at bring-up (and at shutdown, the stop).
    pub enable_timeout: Duration,
    /// One SDO.
    pub sdo_timeout: Duration,
    /// A drive that left OP and is not back in OP after this long is lost.
    pub rejoin_timeout: Duration,
    /// The drives' following error time out (0x6066, ms), written with the window.
    pub following_error_timeout_ms: u16,
    /// Largest accepted distance between a resumed command and the held position.
    pub resume_window_rad: f64,
    /// Write the PDO mapping over CoE.
    pub write_pdo: bool,
    /// RxPDO entries.
    pub rx: Vec<PdoEntry>,
    /// TxPDO entries.
    pub tx: Vec<PdoEntry>,
    /// Where each entry sits.
    pub layout: PdoLayout,
    /// Drives in bus order.
    pub drives: Vec<DriveParams>,
    /// Bus DC static-sync iterations at init (ethercrab's default is 10 000).
    pub dc_static_sync_iterations: u32,
}

/// A config whose backend is EtherCAT has no `[ethercat]` section (a validated file
/// always has one; a config changed in code may not).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("backend.kind = \"ethercat\" needs an [ethercat] section")]
pub struct MissingSection;

impl EthercatParams {
    /// From a validated config (its `[ethercat]` section must be present).
    pub fn from_config(cfg: &Config) -> Result<EthercatParams, MissingSection> {
        let ec = cfg.ethercat.as_ref().ok_or(MissingSection)?;
        let mut p = EthercatParams::from_section(ec, cfg.control.period_ms);
        if let Some(limit) = cfg.following_error_limits() {
            for d in &mut p.drives {
                d.following_error_window_rad = limit.get(d.joint).copied();
            }
        }
        Ok(p)
    }

    /// From the `[ethercat]` section (validated) and the bus period; no drive gets a
    /// following error window (that comes from `[limits]`, see `from_config`).
    pub fn from_section(ec: &EthercatConfig, period_ms: f64) -> EthercatParams {
        let ms = |v: f64| Duration::from_nanos(chunkrt_core::ms_to_ns(v));
        EthercatParams {
            interface: ec.interface.trim().to_string(),
            period: ms(period_ms),
            dc_sync0: ec.dc_sync0,
            sync0_shift: Duration::from_nanos((ec.sync0_shift_us(period_ms) * 1e3) as u64),
            frame_timeout: ms(ec.frame_timeout_ms(period_ms)),
            frame_late: ms(ec.frame_late_ms(period_ms)),
            max_consecutive_lost: ec.max_consecutive_lost(period_ms),
            min_success_rate: ec.min_success_rate,
            success_window: ec.success_window,
            state_timeout: ms(ec.state_timeout_ms),
            enable_timeout: ms(ec.enable_timeout_ms),
            sdo_timeout: ms(ec.sdo_timeout_ms),
            rejoin_timeout: ms(ec.rejoin_timeout_ms),
            following_error_timeout_ms: ec.following_error_timeout_ms(period_ms) as u16,
            resume_window_rad: ec.resume_window_rad,
            write_pdo: ec.pdo.write,
            rx: ec.pdo.rx.clone(),
            tx: ec.pdo.tx.clone(),
            layout: PdoLayout::new(&ec.pdo.rx, &ec.pdo.tx),
            drives: ec
                .drive
                .iter()
                .map(|d| DriveParams {
                    joint: d.joint,
                    scale: JointScale::new(d.counts_per_rad, d.offset_counts as i32, d.direction),
                    vendor_id: d.vendor_id,
                    product_code: d.product_code,
                    rated_torque_nm: d.rated_torque_nm,
                    following_error_window_rad: None,
                })
                .collect(),
            dc_static_sync_iterations: 1000,
        }
    }

    /// Number of joints (= drives).
    pub fn dof(&self) -> usize {
        self.drives.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_mapping_matches_the_usual_csp_layout() {
        use PdoEntry::*;
        let l = PdoLayout::new(
            &[Controlword, TargetPosition],
            &[
                Statusword,
                PositionActual,
                VelocityActual,
                TorqueActual,
                ErrorCode,
            ],
        );
        assert_eq!((l.controlword, l.target_position, l.out_len), (0, 2, 6));
        assert_eq!((l.statusword, l.position_actual), (0, 2));
        assert_eq!(
            (l.velocity_actual, l.torque_actual, l.error_code, l.in_len),
            (Some(6), Some(10), Some(12), 14)
        );
        let l = PdoLayout::new(
            &[TargetPosition, ModeOfOperation, Controlword],
            &[PositionActual, Statusword],
        );
        assert_eq!(
            (l.target_position, l.mode_of_operation, l.controlword),
            (0, Some(4), 5)
        );
        assert_eq!((l.position_actual, l.statusword, l.in_len), (0, 4, 6));
    }
}
