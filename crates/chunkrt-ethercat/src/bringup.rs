//! Bring-up (INIT -> OP -> Operation Enabled) and the way back down (quick stop, disable,
//! OP -> INIT). Runs outside the control loop: may block, allocate and log.

mod rejoin_snapshot;

use crate::backend::EthercatBackend;
use crate::bus::{step, Io};
use crate::cia402::PowerState;
use crate::error::{BringUpError, DriveId};
use crate::group::{OpGroup, PreOpGroup, MAX_PDI};
use crate::mapping::{
    check_coe_mapping, check_fixed_mapping, coe_assigned, layout, sii_pdo_entries, Assigned,
    SII_RXPDO, SII_TXPDO,
};
use crate::params::{EthercatParams, PdoLayout, MAX_DRIVES};
use chunkrt_config::PdoEntry;
use chunkrt_core::DriveRequest;
use ethercrab::error::{Error, MailboxError};
use ethercrab::std::ethercat_now;
use ethercrab::subdevice_group::DcConfiguration;
use ethercrab::{
    Command, DcSync, EtherCrabWireWrite, MainDevice, RegisterAddress, SubDevice, SubDeviceRef,
};
use std::future::Future;
use std::time::Duration;

/// CSP, for 0x6060.
const MODE_CSP: i8 = 8;

/// Whether an SDO error means "this drive has no CoE mailbox".
fn no_mailbox(e: &Error) -> bool {
    matches!(
        e,
        Error::Mailbox(MailboxError::NoReadMailbox | MailboxError::NoWriteMailbox)
    )
}

impl EthercatBackend {
    fn id(&self, position: usize) -> DriveId {
        DriveId {
            position,
            joint: self.p.drives.get(position).map_or(position, |d| d.joint),
        }
    }

    /// The whole bring-up; on error the caller runs `abort`. Stages: the bus scan, the
    /// chain checked (count, identity) before anything is written to a drive, each drive
    /// configured in PRE-OP (PDO mapping and CSP over CoE; what it read back is kept for
    /// a rejoin), PRE-OP -> SAFE-OP -> OP, the process image checked, process data run
    /// until every drive is in OP, the fixed-mapping drives' mode checked, the rejoin
    /// snapshot taken, no drive in fault.
    pub(crate) fn bring_up(&mut self) -> Result<(), BringUpError> {
        let n = self.p.dof();
        let group = self.scan()?;
        self.check_chain(&group)?;
        self.identities = group
            .iter(&self.md)
            .map(|sd| {
                let id = sd.identity();
                [id.vendor_id, id.product_id, id.revision, id.serial]
            })
            .collect();
        let mut readback = Vec::with_capacity(n);
        for i in 0..n {
            readback.push(self.configure_drive(&group, i)?);
        }
        let op = self.enter_op(group)?;
        self.expected_wkc = self.check_image(&op)?;
        self.group = Some(op);

        // Cycle with every drive disabled until all are in OP.
        self.run_until(self.p.state_timeout, DriveRequest::Disable, |_| true)
            .map_err(|last| BringUpError::State {
                step: "SAFE-OP -> OP",
                timeout: self.p.state_timeout,
                report: format!("process data never ran clean (last: {last})"),
            })?;
        self.check_fixed_mode()?;

        // What a drive that leaves OP later needs to be brought back (see `rejoin`).
        self.snapshot_for_rejoin(&readback)?;
        for (i, s) in self.snapshots.iter().enumerate() {
            if s.unsupported {
                tracing::warn!(
                    "{}: its mailbox or SDO list is larger than the rejoin holds: if it \
                     leaves OP it is lost (the run stops)",
                    self.id(i)
                );
            }
        }
        self.check_no_fault()?;
        tracing::info!("ethercat: {n} drive(s) in OP, power stage off");
        Ok(())
    }

    /// The bus scan: every drive found, in PRE-OP.
    fn scan(&mut self) -> Result<PreOpGroup, BringUpError> {
        let wire = self.io.describe();
        let scan_timeout = self.p.state_timeout * 2 + Duration::from_secs(10);
        let scan = step(
            &mut self.io,
            "bus scan",
            scan_timeout,
            self.md
                .init_single_group::<MAX_DRIVES, MAX_PDI>(ethercat_now),
        )?;
        match scan {
            Ok(g) => {
                tracing::info!("ethercat: {} drive(s) on {wire}", g.len());
                Ok(g)
            }
            Err(_) if self.md.num_subdevices() == 0 => Err(BringUpError::DriveCount {
                wire,
                expected: self.p.dof(),
                found: 0,
                hint: "no drive answered: check that the cable is in this port and the \
                       drives are powered"
                    .into(),
            }),
            Err(e) => Err(BringUpError::Scan {
                wire,
                reason: e.to_string(),
            }),
        }
    }

    /// Count, then identity, of the drives found against `[[ethercat.drive]]`, in bus
    /// order: both before anything is written to a drive.
    fn check_chain(&self, group: &PreOpGroup) -> Result<(), BringUpError> {
        let n = self.p.dof();
        if group.len() != n {
            let found = group.len();
            let hint = if found < n {
                let d = &self.p.drives[found];
                format!(
                    "nothing answers from bus position {found} on (expected joint {}, vendor \
                     {:#010x} product {:#010x}): check that drive's power and the cable into it",
                    d.joint, d.vendor_id, d.product_code
                )
            } else {
                "more devices than [[ethercat.drive]] entries: list every drive, in bus order"
                    .into()
            };
            return Err(BringUpError::DriveCount {
                wire: self.io.describe(),
                expected: n,
                found,
                hint,
            });
        }
        for (i, sd) in group.iter(&self.md).enumerate() {
            let id = sd.identity();
            let want = &self.p.drives[i];
            if id.vendor_id != want.vendor_id || id.product_id != want.product_code {
                return Err(BringUpError::Identity {
                    drive: self.id(i),
                    expected_vendor: want.vendor_id,
                    expected_product: want.product_code,
                    found_vendor: id.vendor_id,
                    found_product: id.product_id,
                    name: sd.name().to_string(),
                });
            }
        }
        Ok(())
    }

    /// PRE-OP -> SAFE-OP -> OP (requested; process data runs while drives get there),
    /// with DC SYNC0 set up on the way when `ethercat.dc_sync0`.
    fn enter_op(&mut self, mut group: PreOpGroup) -> Result<OpGroup, BringUpError> {
        let ids: Vec<(DriveId, u16)> = group
            .iter(&self.md)
            .enumerate()
            .map(|(i, sd)| (self.id(i), sd.configured_address()))
            .collect();
        let t = self.p.state_timeout;
        let (io, md) = (&mut self.io, &self.md);
        if !self.p.dc_sync0 {
            let g = transition(io, md, &ids, "PRE-OP -> SAFE-OP", t, group.into_safe_op(md))?;
            let g = transition(
                io,
                md,
                &ids,
                "SAFE-OP -> OP request",
                t,
                g.request_into_op(md),
            )?;
            return Ok(OpGroup::Plain(g));
        }
        for mut sd in group.iter_mut(md) {
            sd.set_dc_sync(DcSync::Sync0);
        }
        let g = transition(
            io,
            md,
            &ids,
            "PRE-OP: FMMU set-up",
            t,
            group.into_pre_op_pdi(md),
        )?;
        let dc = DcConfiguration {
            start_delay: Duration::from_millis(100),
            sync0_period: self.p.period,
            sync0_shift: self.p.sync0_shift,
        };
        let g = transition(
            io,
            md,
            &ids,
            "DC SYNC0 set-up",
            t,
            g.configure_dc_sync(md, dc),
        )?;
        let g = transition(io, md, &ids, "PRE-OP -> SAFE-OP", t, g.into_safe_op(md))?;
        let g = transition(
            io,
            md,
            &ids,
            "SAFE-OP -> OP request",
            t,
            g.request_into_op(md),
        )?;
        Ok(OpGroup::Dc(g))
    }

    /// The process image must hold what we decode; returns the LRW's expected working
    /// counter.
    fn check_image(&self, op: &OpGroup) -> Result<u16, BringUpError> {
        let mut wkc = 0u16;
        for i in 0..self.p.dof() {
            let l = self.layouts[i];
            let (inp, out) = op.io_len(&self.md, i);
            if inp < l.in_len || out < l.out_len {
                return Err(BringUpError::Mapping {
                    drive: self.id(i),
                    found_in: inp,
                    found_out: out,
                    need_in: l.in_len,
                    need_out: l.out_len,
                    hint: if self.no_coe & (1 << i) != 0 {
                        "the drive has no CoE mailbox, so nothing was written to it: its SII \
                         mapping is what it runs; make ethercat.pdo.rx/tx match it, with \
                         ethercat.pdo.write = false"
                    } else if self.p.write_pdo {
                        "the drive did not take the mapping written to 0x1600/0x1A00"
                    } else {
                        "set ethercat.pdo.write = true, or make ethercat.pdo.rx/tx match the \
                         drive's fixed mapping"
                    },
                });
            }
            wkc += u16::from(inp > 0) + 2 * u16::from(out > 0);
        }
        Ok(wkc)
    }

    /// A drive in fault is not reset at start-up: its cause is for a person to see.
    fn check_no_fault(&self) -> Result<(), BringUpError> {
        let n = self.p.dof();
        let Some(i) = self.drv[..n].iter().position(|d| d.power.is_fault()) else {
            return Ok(());
        };
        Err(BringUpError::Enable {
            timeout: Duration::ZERO,
            report: format!(
                "{} is in fault (0x603F = {:#06x}, statusword {:#06x}); clear the cause \
                 on the drive (chunkrt does not reset faults at start-up)",
                self.id(i),
                self.drv[i].error_code,
                self.drv[i].statusword
            ),
        })
    }

    /// CiA 402 shutdown, switch on, enable operation, with target = actual throughout,
    /// cycling process data at the bus period (the runtime calls it on the control
    /// thread, right before the loop). On failure the caller runs `abort`.
    pub(crate) fn enable_all(&mut self) -> Result<(), BringUpError> {
        let n = self.p.dof();
        let enabled = self.run_until(self.p.enable_timeout, DriveRequest::Track, |b| {
            b.drv[..n]
                .iter()
                .all(|d| d.power == PowerState::OperationEnabled)
        });
        if enabled.is_err() {
            let report = (0..n)
                .filter(|&i| self.drv[i].power != PowerState::OperationEnabled)
                .map(|i| {
                    format!(
                        "{}: {:?} (statusword {:#06x}, 0x603F {:#06x})",
                        self.id(i),
                        self.drv[i].power,
                        self.drv[i].statusword,
                        self.drv[i].error_code
                    )
                })
                .collect::<Vec<_>>()
                .join("; ");
            return Err(BringUpError::Enable {
                timeout: self.p.enable_timeout,
                report,
            });
        }
        tracing::info!("ethercat: {n} drive(s) operation enabled, holding position");
        Ok(())
    }

    /// Drives without CoE: mode 8 travels in the process data (0x6060), so 0x6061 must show
    /// it before any drive is enabled; a drive whose mode cannot be read is refused.
    fn check_fixed_mode(&mut self) -> Result<(), BringUpError> {
        let n = self.p.dof();
        let fixed: Vec<usize> = (0..n).filter(|&i| self.no_coe & (1 << i) != 0).collect();
        let Some(&first) = fixed.first() else {
            return Ok(());
        };
        if self.p.layout.mode_display.is_none() {
            return Err(BringUpError::Mode {
                drive: self.id(first),
                what: "the drive has no CoE mailbox and ethercat.pdo.tx has no `mode_display` \
                       (0x6061): whether it runs CSP cannot be read"
                    .into(),
                hint: "use a drive whose fixed mapping has 0x6061 in its TxPDO (and 0x6060 in \
                       its RxPDO), or a drive with CoE",
            });
        }
        let shown = self.run_until(self.p.state_timeout, DriveRequest::Disable, |b| {
            fixed.iter().all(|&i| b.drv[i].mode_display == MODE_CSP)
        });
        if shown.is_ok() {
            return Ok(());
        }
        let i = fixed
            .iter()
            .copied()
            .find(|&i| self.drv[i].mode_display != MODE_CSP)
            .unwrap_or(first);
        Err(BringUpError::Mode {
            drive: self.id(i),
            what: format!(
                "modes of operation display (0x6061) shows {}, not 8 (CSP)",
                self.drv[i].mode_display
            ),
            hint: if self.p.layout.mode_of_operation.is_none() {
                "the drive has no CoE mailbox and its fixed RxPDO has no `mode_of_operation` \
                 (0x6060), so nothing can set CSP: use a drive that maps it, or one with CoE"
            } else {
                "the drive did not take mode 8 written to 0x6060 in the process data: check \
                 that it supports Cyclic Synchronous Position"
            },
        })
    }

    /// Configures drive `i` in PRE-OP: its PDO mapping (when `ethercat.pdo.write`), CSP
    /// and its following-error window written over CoE, then what it runs read back and
    /// checked (`check_coe`); a drive without a CoE mailbox is judged by its fixed SII
    /// mapping instead (`check_fixed`). Returns the read-back mapping (None: no CoE).
    fn configure_drive(
        &mut self,
        group: &PreOpGroup,
        i: usize,
    ) -> Result<Option<(Assigned, Assigned)>, BringUpError> {
        let drive = self.id(i);
        let Ok(sd) = group.subdevice(&self.md, i) else {
            return Err(BringUpError::DriveCount {
                wire: self.io.describe(),
                expected: self.p.dof(),
                found: group.len(),
                hint: format!("{drive} vanished during set-up"),
            });
        };
        let t = self.p.sdo_timeout * 2;
        let p = &self.p;
        let window = p.drives[i]
            .following_error_window_rad
            .map(|rad| p.drives[i].scale.window_counts(rad));
        match write_drive_sdos(&mut self.io, &sd, t, p, window) {
            Ok(()) => {
                let (rx, tx, l) = check_coe(&mut self.io, &sd, t, drive, &self.p)?;
                self.layouts[i] = l;
                Ok(Some((rx, tx)))
            }
            Err(SdoFail::Bus(e)) => Err(e),
            Err(SdoFail::Sdo { error, .. }) if no_mailbox(&error) => {
                let has_window = window.is_some();
                let l = check_fixed(&mut self.io, &self.md, &sd, drive, &self.p, has_window)?;
                self.layouts[i] = l;
                self.no_coe |= 1 << i;
                Ok(None)
            }
            Err(SdoFail::Sdo {
                error,
                step,
                index,
                sub,
            }) => Err(BringUpError::Sdo {
                drive,
                step,
                index,
                sub,
                reason: error.to_string(),
            }),
        }
    }
}

/// Runs an AL transition; on failure reads every drive's AL state and status code.
fn transition<T, F: Future<Output = Result<T, Error>>>(
    io: &mut Io,
    md: &MainDevice<'_>,
    ids: &[(DriveId, u16)],
    name: &'static str,
    timeout: Duration,
    fut: F,
) -> Result<T, BringUpError> {
    let r = step(io, name, timeout + Duration::from_secs(1), fut)?;
    r.map_err(|e| {
        let mut report = Vec::new();
        for &(id, a) in ids {
            let st = step(
                io,
                "AL status",
                Duration::from_millis(200),
                Command::fprd(a, RegisterAddress::AlStatus.into()).receive::<u16>(md),
            );
            let code = step(
                io,
                "AL status code",
                Duration::from_millis(200),
                Command::fprd(a, RegisterAddress::AlStatusCode.into()).receive::<u16>(md),
            );
            let text = match (st, code) {
                (Ok(Ok(s)), Ok(Ok(c))) => format!(
                    "AL state {}{} code {c:#06x}",
                    al_name(s),
                    if s & 0x10 != 0 { " + ERROR" } else { "" }
                ),
                _ => "no answer".to_string(),
            };
            report.push(format!("{id}: {text}"));
        }
        BringUpError::State {
            step: name,
            timeout,
            report: format!("{e}; {}", report.join("; ")),
        }
    })
}

/// A drive without a CoE mailbox: nothing can be written, so the SII mapping is what
/// it runs and must be the configured one, entry for entry and in order. The mode is
/// checked in OP, before enabling (0x6061 in the process data).
fn check_fixed(
    io: &mut Io,
    md: &MainDevice<'_>,
    sd: &SubDeviceRef<'_, &SubDevice>,
    drive: DriveId,
    p: &EthercatParams,
    has_window: bool,
) -> Result<PdoLayout, BringUpError> {
    let mut found = [Vec::new(), Vec::new()];
    for (k, cat) in [(0, SII_RXPDO), (1, SII_TXPDO)] {
        found[k] = sii_pdo_entries(io, md, sd, cat)?;
    }
    check_fixed_mapping(drive, &p.rx, &p.tx, &found[0], &found[1])?;
    let l = layout(drive, &found[0], &found[1])?;
    tracing::info!("{drive}: no CoE mailbox; its fixed SII mapping matches ethercat.pdo");
    if has_window {
        tracing::warn!(
            "{drive}: no CoE mailbox, so its following error window (0x6065) \
             cannot be set from limits.max_following_error_rad: only the host \
             checks that limit"
        );
    }
    Ok(l)
}

/// What a CoE drive runs, whether written or not: its mapping by content and order
/// (byte lengths alone would let another order or other objects of the same size be
/// decoded as the configured ones), then its mode.
fn check_coe(
    io: &mut Io,
    sd: &SubDeviceRef<'_, &SubDevice>,
    t: Duration,
    drive: DriveId,
    p: &EthercatParams,
) -> Result<(Assigned, Assigned, PdoLayout), BringUpError> {
    let coe_rx = coe_assigned(io, sd, t, drive, 0x1C12)?;
    let coe_tx = coe_assigned(io, sd, t, drive, 0x1C13)?;
    check_coe_mapping(drive, p.write_pdo, &p.rx, &p.tx, &coe_rx, &coe_tx)?;
    let l = layout(drive, &coe_rx.entries, &coe_tx.entries)?;
    let shown = step(io, "mode display", t, sd.sdo_read::<i8>(0x6061, 0))?;
    match shown {
        Ok(MODE_CSP) => Ok((coe_rx, coe_tx, l)),
        Ok(m) => Err(BringUpError::Mode {
            drive,
            what: format!(
                "modes of operation display (0x6061) reads {m} over CoE, not 8 (CSP), \
                 after 8 was written to 0x6060"
            ),
            hint: "the drive did not take Cyclic Synchronous Position: check that it \
                   supports it (0x6502 bit 7) and what its manual needs before it switches \
                   mode",
        }),
        Err(e) => Err(BringUpError::Sdo {
            drive,
            step: "mode of operation display (0x6061, must read 8: CSP)",
            index: 0x6061,
            sub: 0,
            reason: e.to_string(),
        }),
    }
}

/// The SDOs of one drive: the PDO mapping (when `ethercat.pdo.write`), mode 8 (CSP) and,
/// with a window, the drive's own following-error supervision from the host's limit (it
/// stops the joint, 0x8611, even when the host cannot).
fn write_drive_sdos(
    io: &mut Io,
    sd: &SubDeviceRef<'_, &SubDevice>,
    t: Duration,
    p: &EthercatParams,
    window: Option<u32>,
) -> Result<(), SdoFail> {
    if p.write_pdo {
        write_pdo_mapping(io, sd, t, 0x1C12, 0x1600, &p.rx)?;
        write_pdo_mapping(io, sd, t, 0x1C13, 0x1A00, &p.tx)?;
    }
    let mode = "mode of operation = 8 (CSP)";
    sdo_w(io, sd, t, mode, 0x6060, 0, MODE_CSP)?;
    if let Some(w) = window {
        let what = "following error window (from limits.max_following_error_rad)";
        sdo_w(io, sd, t, what, 0x6065, 0, w)?;
        let what = "following error time out (ethercat.following_error_timeout_ms)";
        sdo_w(io, sd, t, what, 0x6066, 0, p.following_error_timeout_ms)?;
    }
    Ok(())
}

/// One direction's PDO mapping: the assignment `assign` cleared, PDO `pdo`'s entries
/// cleared, written and counted, then `pdo` assigned.
fn write_pdo_mapping(
    io: &mut Io,
    sd: &SubDeviceRef<'_, &SubDevice>,
    t: Duration,
    assign: u16,
    pdo: u16,
    entries: &[PdoEntry],
) -> Result<(), SdoFail> {
    sdo_w(
        io,
        sd,
        t,
        "PDO mapping: clear the assignment",
        assign,
        0,
        0u8,
    )?;
    sdo_w(io, sd, t, "PDO mapping: clear the entries", pdo, 0, 0u8)?;
    for (k, e) in entries.iter().enumerate() {
        let word = PdoEntry::mapping_word(*e);
        sdo_w(
            io,
            sd,
            t,
            "PDO mapping: write an entry",
            pdo,
            k as u8 + 1,
            word,
        )?;
    }
    sdo_w(
        io,
        sd,
        t,
        "PDO mapping: entry count",
        pdo,
        0,
        entries.len() as u8,
    )?;
    sdo_w(io, sd, t, "PDO mapping: assign", assign, 1, pdo)?;
    sdo_w(io, sd, t, "PDO mapping: assignment count", assign, 0, 1u8)
}

/// Why an SDO write failed.
enum SdoFail {
    /// The bus stalled.
    Bus(BringUpError),
    /// The drive refused (abort code) or has no mailbox.
    Sdo {
        error: Error,
        step: &'static str,
        index: u16,
        sub: u8,
    },
}

#[allow(clippy::too_many_arguments)]
fn sdo_w<T: EtherCrabWireWrite>(
    io: &mut Io,
    sd: &SubDeviceRef<'_, &SubDevice>,
    t: Duration,
    step_name: &'static str,
    index: u16,
    sub: u8,
    v: T,
) -> Result<(), SdoFail> {
    match step(io, step_name, t, sd.sdo_write(index, sub, v)) {
        Err(b) => Err(SdoFail::Bus(b)),
        Ok(Err(error)) => Err(SdoFail::Sdo {
            error,
            step: step_name,
            index,
            sub,
        }),
        Ok(Ok(())) => Ok(()),
    }
}

fn al_name(s: u16) -> &'static str {
    match s & 0x0F {
        1 => "INIT",
        2 => "PRE-OP",
        3 => "BOOT",
        4 => "SAFE-OP",
        8 => "OP",
        _ => "unknown",
    }
}
