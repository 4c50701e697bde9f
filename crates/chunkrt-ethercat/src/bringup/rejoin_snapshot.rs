//! The register snapshot a rejoin replays, taken once right after bring-up (the group in
//! OP): every drive's sync managers, FMMUs and DC registers read back from the drive, and
//! its SDO list fixed from the mapping read back in PRE-OP. Allocates once, here; the
//! rejoin only reads it.

use crate::backend::EthercatBackend;
use crate::bus::step;
use crate::error::BringUpError;
use crate::mapping::Assigned;
use crate::rejoin::mailbox::Sdo;
use crate::rejoin::snapshot::{sdo_plan, DriveSnapshot, MAX_MAILBOX, MAX_SDOS};
use ethercrab::{Command, EtherCrabWireReadSized};
use std::time::Duration;

/// Deadline of each register read.
const READ_TIMEOUT: Duration = Duration::from_millis(200);

/// A drive's registers as ethercrab wrote them.
struct Registers {
    sm: [u8; 32],
    fmmu: [u8; 64],
    dc_delay: u32,
    sync: [u8; 40],
}

impl EthercatBackend {
    /// Takes every drive's snapshot; `readback[i]` is drive `i`'s mapping as read back
    /// in PRE-OP (None: no CoE).
    pub(crate) fn snapshot_for_rejoin(
        &mut self,
        readback: &[Option<(Assigned, Assigned)>],
    ) -> Result<(), BringUpError> {
        let n = self.p.dof();
        let mut snaps = Vec::with_capacity(n);
        for i in 0..n {
            let Some((addr, dc)) = self.group.as_ref().and_then(|g| g.address(&self.md, i)) else {
                continue;
            };
            let r = self.read_registers(addr, dc)?;
            let (inp, out) = self
                .group
                .as_ref()
                .map_or((0, 0), |g| g.io_len(&self.md, i));
            let coe = self.no_coe & (1 << i) == 0;
            let mut s = DriveSnapshot {
                addr,
                sm: r.sm,
                fmmu: r.fmmu,
                dc,
                dc_delay: r.dc_delay,
                sync: r.sync,
                contribution: u16::from(inp > 0) + 2 * u16::from(out > 0),
                coe,
                sdos: [Sdo::default(); MAX_SDOS],
                n_sdos: 0,
                unsupported: false,
            };
            if coe {
                self.plan_sdos(i, readback, &mut s);
            }
            snaps.push(s);
        }
        self.snapshots = snaps;
        Ok(())
    }

    /// One register block of the drive at station address `addr`.
    fn read_register<T: EtherCrabWireReadSized>(
        &mut self,
        what: &'static str,
        addr: u16,
        reg: u16,
    ) -> Result<T, BringUpError> {
        let md = &self.md;
        step(
            &mut self.io,
            what,
            READ_TIMEOUT,
            Command::fprd(addr, reg).receive::<T>(md),
        )?
        .map_err(|e| BringUpError::Bus {
            step: "rejoin snapshot",
            wire: String::new(),
            reason: e.to_string(),
        })
    }

    /// Sync managers (0x0800), FMMUs (0x0600) and, with DC, the delay (0x0928) and the
    /// SYNC registers (0x0980).
    fn read_registers(&mut self, addr: u16, dc: bool) -> Result<Registers, BringUpError> {
        let sm = self.read_register("rejoin snapshot: sync managers", addr, 0x0800)?;
        let fmmu = self.read_register("rejoin snapshot: FMMUs", addr, 0x0600)?;
        let (dc_delay, sync) = if dc {
            (
                self.read_register("rejoin snapshot: DC delay", addr, 0x0928)?,
                self.read_register("rejoin snapshot: SYNC", addr, 0x0980)?,
            )
        } else {
            (0, [0; 40])
        };
        Ok(Registers {
            sm,
            fmmu,
            dc_delay,
            sync,
        })
    }

    /// Drive `i`'s SDO list from its read-back mapping; `unsupported` when there is no
    /// plan or its mailbox is outside what the rejoin can carry.
    fn plan_sdos(
        &self,
        i: usize,
        readback: &[Option<(Assigned, Assigned)>],
        s: &mut DriveSnapshot,
    ) {
        let plan = readback
            .get(i)
            .and_then(|r| r.as_ref())
            .and_then(|r| sdo_plan(&self.p, i, r));
        let fits = (0..2).all(|k| {
            let len = usize::from(s.sm_area(k).1);
            (16..=MAX_MAILBOX).contains(&len)
        });
        match plan {
            Some((list, len)) if fits => {
                s.sdos = list;
                s.n_sdos = len;
            }
            _ => s.unsupported = true,
        }
    }
}
