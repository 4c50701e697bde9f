//! What a drive needs to be brought back, taken once right after bring-up: the registers
//! ethercrab wrote (sync managers, FMMUs, DC), read back from the drive itself, and the
//! SDOs of `configure_drive` with the read-back of the mapping, as a fixed list. Nothing
//! here runs on the control thread's cycle; the rejoin only reads it.

use super::mailbox::Sdo;
use crate::mapping::Assigned;
use crate::params::EthercatParams;
use chunkrt_config::PdoEntry;

/// Most SDOs (writes and read-back checks) the rejoin sends to one drive: the mapping of
/// 8 + 8 entries written and read back, the mode and the following error window fit.
pub(crate) const MAX_SDOS: usize = 64;
/// Largest mailbox (sync manager 0 or 1) the rejoin handles: one PDU carries a whole one.
pub(crate) const MAX_MAILBOX: usize = 512;

/// One drive's registers and SDO list.
#[derive(Clone, Debug)]
pub(crate) struct DriveSnapshot {
    /// Configured station address.
    pub addr: u16,
    /// SM0..SM3 (0x0800..0x081F).
    pub sm: [u8; 32],
    /// FMMU0..FMMU3 (0x0600..0x063F).
    pub fmmu: [u8; 64],
    /// Whether the drive has a DC unit (offset and delay are restored).
    pub dc: bool,
    /// 0x0928, the propagation delay from the reference clock.
    pub dc_delay: u32,
    /// 0x0980..0x09A7: SYNC activation (byte 1), start time, SYNC0/1 cycle times.
    pub sync: [u8; 40],
    /// What the drive adds to the LRW's working counter in SAFE-OP and OP.
    pub contribution: u16,
    /// Whether the drive has a CoE mailbox (the SDOs are sent).
    pub coe: bool,
    /// SDOs in order: the PRE-OP writes, then the read-back checks.
    pub sdos: [Sdo; MAX_SDOS],
    /// Used entries of `sdos`.
    pub n_sdos: usize,
    /// Why the rejoin cannot handle this drive (mailbox too large, too many SDOs).
    pub unsupported: bool,
}

impl DriveSnapshot {
    /// Sync manager `i`'s start address and length.
    pub fn sm_area(&self, i: usize) -> (u16, u16) {
        let b = 8 * i;
        (
            u16::from_le_bytes([self.sm[b], self.sm[b + 1]]),
            u16::from_le_bytes([self.sm[b + 2], self.sm[b + 3]]),
        )
    }

    /// SYNC activation (0x0981) as bring-up left it.
    pub fn sync_active(&self) -> u8 {
        self.sync[1]
    }

    /// SYNC0 cycle time (0x09A0), ns.
    pub fn sync0_cycle_ns(&self) -> u32 {
        u32::from_le_bytes([
            self.sync[0x20],
            self.sync[0x21],
            self.sync[0x22],
            self.sync[0x23],
        ])
    }
}

/// The SDO list for drive `i`: what `configure_drive` writes, then the checks of what it
/// read back (`readback`: rx and tx assignments), then the mode display. None if it does
/// not fit.
pub(crate) fn sdo_plan(
    p: &EthercatParams,
    i: usize,
    readback: &(Assigned, Assigned),
) -> Option<([Sdo; MAX_SDOS], usize)> {
    let mut list = [Sdo::default(); MAX_SDOS];
    let mut n = 0usize;
    let mut push = |index: u16, sub: u8, size: u8, value: u32, check: bool| -> Option<()> {
        *list.get_mut(n)? = Sdo {
            index,
            sub,
            size,
            value,
            check,
        };
        n += 1;
        Some(())
    };
    if p.write_pdo {
        for (assign, pdo, entries) in [(0x1C12u16, 0x1600u16, &p.rx), (0x1C13, 0x1A00, &p.tx)] {
            push(assign, 0, 1, 0, false)?;
            push(pdo, 0, 1, 0, false)?;
            for (k, e) in entries.iter().enumerate() {
                push(pdo, k as u8 + 1, 4, PdoEntry::mapping_word(*e), false)?;
            }
            push(pdo, 0, 1, entries.len() as u32, false)?;
            push(assign, 1, 2, u32::from(pdo), false)?;
            push(assign, 0, 1, 1, false)?;
        }
    }
    push(0x6060, 0, 1, 8, false)?;
    if let Some(rad) = p.drives[i].following_error_window_rad {
        push(0x6065, 0, 4, p.drives[i].scale.window_counts(rad), false)?;
        push(0x6066, 0, 2, u32::from(p.following_error_timeout_ms), false)?;
    }
    // The mapping must read back as it did at bring-up (checked against the config then):
    // a drive that comes back with another one, and does not take the writes, is refused.
    for (assign, a) in [(0x1C12u16, &readback.0), (0x1C13, &readback.1)] {
        push(assign, 0, 1, a.pdos.len() as u32, true)?;
        for (k, pdo) in a.pdos.iter().enumerate() {
            push(assign, k as u8 + 1, 2, u32::from(*pdo), true)?;
        }
        let mut e = a.entries.iter();
        for (pdo, count) in a.pdos.iter().zip(&a.counts) {
            push(*pdo, 0, 1, u32::from(*count), true)?;
            for k in 0..*count {
                let &(index, sub, bits) = e.next()?;
                let word = (u32::from(index) << 16) | (u32::from(sub) << 8) | u32::from(bits);
                push(*pdo, k + 1, 4, word, true)?;
            }
        }
    }
    push(0x6061, 0, 1, 8, true)?;
    Some((list, n))
}
