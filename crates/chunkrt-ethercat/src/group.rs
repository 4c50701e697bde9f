//! The group of drives in OP, with or without Distributed Clocks, behind one type.

use crate::params::MAX_DRIVES;
use ethercrab::error::Error;
use ethercrab::subdevice_group::{HasDc, NoDc, Op, PreOp};
use ethercrab::{DefaultLock, MainDevice, SubDeviceGroup, SubDeviceState};

/// Bytes of process image for the whole group.
pub const MAX_PDI: usize = 1024;

/// The group as the bus scan returns it.
pub type PreOpGroup = SubDeviceGroup<MAX_DRIVES, MAX_PDI, DefaultLock, PreOp>;

/// What one process-data exchange told about the bus.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CycleResult {
    /// LRW working counter.
    pub wkc: u16,
    /// Drives (bit = bus position) not in OP: gone from the bus, or dropped out of OP
    /// (watchdog, error).
    pub not_op: u32,
    /// Drives (bit = bus position) in SAFE-OP or OP: their sync managers run, so they
    /// count in the LRW's working counter (an error flag does not stop them).
    pub counting: u32,
    /// With DC: ethercrab's wait from this frame's arrival at the reference clock to the
    /// next cycle's start (SYNC0 + shift), `CycleInfo::next_cycle_wait`.
    pub next_cycle_wait: Option<std::time::Duration>,
}

/// The group in OP.
pub enum OpGroup {
    /// Free-running (no DC).
    Plain(SubDeviceGroup<MAX_DRIVES, MAX_PDI, DefaultLock, Op, NoDc>),
    /// DC SYNC0 configured; every exchange also distributes the reference clock (FRMW).
    Dc(SubDeviceGroup<MAX_DRIVES, MAX_PDI, DefaultLock, Op, HasDc>),
}

/// (not in OP, in SAFE-OP or OP) as bit masks by bus position.
fn masks<'a>(states: impl Iterator<Item = &'a SubDeviceState>, n: usize) -> (u32, u32) {
    let mut not_op = if n >= 32 { u32::MAX } else { (1u32 << n) - 1 };
    let mut counting = 0;
    for (i, s) in states.enumerate().take(32) {
        if *s == SubDeviceState::Op {
            not_op &= !(1 << i);
        }
        if matches!(s, SubDeviceState::Op | SubDeviceState::SafeOp) {
            counting |= 1 << i;
        }
    }
    (not_op, counting)
}

impl OpGroup {
    /// Drives in the group.
    pub fn len(&self) -> usize {
        match self {
            OpGroup::Plain(g) => g.len(),
            OpGroup::Dc(g) => g.len(),
        }
    }

    /// Whether the group is empty (never, after bring-up).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// One process-data exchange (one frame: LRW of the whole image plus an AL status read
    /// per drive; with DC also the FRMW of the reference clock).
    pub async fn tx_rx(&self, md: &MainDevice<'_>) -> Result<CycleResult, Error> {
        let n = self.len();
        match self {
            OpGroup::Plain(g) => g.tx_rx(md).await.map(|r| {
                let (not_op, counting) = masks(r.subdevice_states.iter(), n);
                CycleResult {
                    wkc: r.working_counter,
                    not_op,
                    counting,
                    next_cycle_wait: None,
                }
            }),
            OpGroup::Dc(g) => g.tx_rx_dc(md).await.map(|r| {
                let (not_op, counting) = masks(r.subdevice_states.iter(), n);
                CycleResult {
                    wkc: r.working_counter,
                    not_op,
                    counting,
                    next_cycle_wait: Some(r.extra.next_cycle_wait),
                }
            }),
        }
    }

    /// Calls `f` with drive `i`'s inputs (None: no such drive).
    pub fn read_inputs<R>(
        &self,
        md: &MainDevice<'_>,
        i: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        match self {
            OpGroup::Plain(g) => g.subdevice(md, i).ok().map(|sd| f(&sd.inputs_raw())),
            OpGroup::Dc(g) => g.subdevice(md, i).ok().map(|sd| f(&sd.inputs_raw())),
        }
    }

    /// Calls `f` with drive `i`'s outputs (None: no such drive).
    pub fn write_outputs<R>(
        &self,
        md: &MainDevice<'_>,
        i: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Option<R> {
        match self {
            OpGroup::Plain(g) => g
                .subdevice(md, i)
                .ok()
                .map(|sd| f(&mut sd.outputs_raw_mut())),
            OpGroup::Dc(g) => g
                .subdevice(md, i)
                .ok()
                .map(|sd| f(&mut sd.outputs_raw_mut())),
        }
    }

    /// Drive `i`'s configured station address and whether it has a DC unit.
    pub fn address(&self, md: &MainDevice<'_>, i: usize) -> Option<(u16, bool)> {
        let dc = |d: ethercrab::DcSupport| !matches!(d, ethercrab::DcSupport::None);
        match self {
            OpGroup::Plain(g) => g
                .subdevice(md, i)
                .ok()
                .map(|sd| (sd.configured_address(), dc(sd.dc_support()))),
            OpGroup::Dc(g) => g
                .subdevice(md, i)
                .ok()
                .map(|sd| (sd.configured_address(), dc(sd.dc_support()))),
        }
    }

    /// Input and output bytes of drive `i`.
    pub fn io_len(&self, md: &MainDevice<'_>, i: usize) -> (usize, usize) {
        match self {
            OpGroup::Plain(g) => g
                .subdevice(md, i)
                .map(|sd| (sd.inputs_raw().len(), sd.outputs_raw().len()))
                .unwrap_or((0, 0)),
            OpGroup::Dc(g) => g
                .subdevice(md, i)
                .map(|sd| (sd.inputs_raw().len(), sd.outputs_raw().len()))
                .unwrap_or((0, 0)),
        }
    }

    /// OP -> SAFE-OP -> PRE-OP -> INIT.
    pub async fn leave_op(self, md: &MainDevice<'_>) -> Result<(), Error> {
        match self {
            OpGroup::Plain(g) => {
                let g = g.into_safe_op(md).await?;
                let g = g.into_pre_op(md).await?;
                g.into_init(md).await.map(|_| ())
            }
            OpGroup::Dc(g) => {
                let g = g.into_safe_op(md).await?;
                let g = g.into_pre_op(md).await?;
                g.into_init(md).await.map(|_| ())
            }
        }
    }
}
