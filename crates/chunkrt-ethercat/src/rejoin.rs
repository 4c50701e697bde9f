//! Bringing back one drive that left OP or the bus while the others keep exchanging
//! process data (docs: /work/notes/recovery.md section 7).
//!
//! Every cycle the backend starts, for the lowest drive not in OP, a [`Rejoin`]: a state
//! machine of single register accesses (one PDU, two for the DC time pair), each in a
//! frame of its own polled together with the cycle's LRW and dropped, to be redone next
//! cycle, when it is not back by the cycle's frame deadline. Every access is idempotent
//! (a write of a fixed value, or a read) so redoing one is harmless. Two cases:
//!
//! - (a) the drive sits in SAFE-OP with its SM watchdog error (0x001B): its configuration
//!   is intact; acknowledge, then request OP.
//! - (b) it lost power: it answers again in INIT at station address 0 with nothing
//!   configured. Its identity is read from its SII (by bus position) before anything is
//!   written; then station address, mailbox SMs, PRE-OP, the SDOs of `configure_drive`
//!   and the read-back of its mapping by hand through the mailbox, process-data SMs and
//!   FMMUs from the snapshot taken after bring-up, DC (its local clock restarted: every
//!   drive latches its local time as one broadcast frame passes, and the drive's offset
//!   is set so that its system time at the latch is a time source's, as ethercrab's
//!   bring-up sets them; the source is another DC drive that answers at its station
//!   address, so it kept power or was given the bus's time since, those in OP first; so
//!   a power-cycled reference clock takes the bus's time back from the drives behind it,
//!   and only with none left does it keep its own), SAFE-OP, OP.
//!
//! A drive in any other state is sent to INIT and goes the way of (b). Nothing here
//! allocates, locks, logs or formats: the state lives in fixed arrays allocated at start.

pub(crate) mod mailbox;
pub(crate) mod snapshot;

use self::mailbox::Reply;
use self::snapshot::{DriveSnapshot, MAX_MAILBOX};
use chunkrt_core::MonoTime;
use ethercrab::error::Error;
use ethercrab::{Command, MainDevice};

/// Largest payload of one rejoin access: a whole mailbox.
pub(crate) const MAX_PDU: usize = MAX_MAILBOX;

/// AL status codes that no retry fixes: the configuration is refused.
const CONFIG_REFUSED: [u16; 4] = [0x0016, 0x001D, 0x001E, 0x0011];

/// Why a drive was given up (the backend returns `DriveLost` for it from then on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejoinFailure {
    /// Not back in OP within `ethercat.rejoin_timeout_ms`.
    Timeout,
    /// Another drive answers at its bus position (vendor, product from its SII).
    Identity {
        /// Vendor ID found.
        vendor: u32,
        /// Product code found.
        product: u32,
    },
    /// An SDO write was refused, or the mapping read back differs from bring-up's.
    Mapping {
        /// Object index.
        index: u16,
        /// Subindex.
        sub: u8,
    },
    /// The drive refused a state change with a code no retry fixes (AL status code).
    Refused {
        /// AL status code (0x0134).
        code: u16,
    },
    /// The snapshot could not hold what the drive needs (mailbox or SDO list too large).
    Unsupported,
}

/// Who an access goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Configured station address (FPRD/FPWR).
    Station(u16),
    /// Auto-increment bus position (APRD/APWR), before the address is set.
    Position(u16),
    /// Every drive on the bus (BRD/BWR; the working counter is not checked).
    Broadcast,
}

/// One register access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    pub target: Target,
    pub reg: u16,
    pub write: bool,
    pub len: u16,
}

/// One access as a future: the payload from `tx` (writes), the reply into `rx`. The
/// working counter must be 1 (ethercrab's default check), so a write to an absent drive or
/// a full mailbox fails and is redone.
pub(crate) async fn access(
    md: &MainDevice<'_>,
    a: Access,
    tx: &[u8],
    rx: &mut [u8],
) -> Result<(), Error> {
    let data = &tx[..usize::from(a.len).min(tx.len())];
    let got = match (a.target, a.write) {
        (Target::Station(s), false) => Command::fprd(s, a.reg).receive_slice(md, a.len).await?,
        (Target::Position(p), false) => Command::aprd(p, a.reg).receive_slice(md, a.len).await?,
        (Target::Station(s), true) => Command::fpwr(s, a.reg).send_receive_slice(md, data).await?,
        (Target::Position(p), true) => Command::apwr(p, a.reg).send_receive_slice(md, data).await?,
        (Target::Broadcast, false) => {
            Command::brd(a.reg)
                .ignore_wkc()
                .receive_slice(md, a.len)
                .await?
        }
        (Target::Broadcast, true) => {
            Command::bwr(a.reg)
                .ignore_wkc()
                .send_receive_slice(md, data)
                .await?
        }
    };
    let n = got.len().min(rx.len());
    rx[..n].copy_from_slice(&got[..n]);
    Ok(())
}

/// Where a rejoin stands: the access the next cycle makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// AL status and code at the station address: decides the case.
    Status,
    /// Station address by bus position, until the drive answers.
    Probe,
    /// AL control = INIT + acknowledge, then wait for INIT.
    ToInit,
    WaitInit,
    /// SII to the master (0x0500 = 0), read words `sii_word..`, wait for the data.
    SiiOwner,
    SiiRead,
    SiiData,
    Address,
    SiiToPdi,
    MailboxSms,
    ReqPreOp,
    WaitPreOp,
    SiiToMaster,
    SdoRequest,
    SdoPoll,
    SdoReply,
    ProcessSms,
    Fmmus,
    /// Every drive latches its local time as one broadcast frame passes (0x0900), as
    /// ethercrab's bring-up does.
    DcLatch,
    /// The drive's latched local time and offset, and the reference's (two PDUs).
    DcTimes,
    DcOffset,
    DcDelay,
    DcSpeed,
    DcFilter,
    Sync0Off,
    Sync0Start,
    Sync0Cycle,
    Sync0On,
    ReqSafeOp,
    WaitSafeOp,
    /// Case (a): acknowledge the error in SAFE-OP, wait for the flag to clear.
    Ack,
    WaitAck,
    ReqOp,
    WaitOp,
}

/// What the backend tells a step about the bus.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Context {
    /// Vendor and product the config expects at this position.
    pub vendor: u32,
    pub product: u32,
    /// Where the drive takes the bus's system time from: another DC drive that did not
    /// lose power (it answers at its station address, in whatever state) or was given the
    /// bus's time since, in bus order, those in OP first (bus position, station address).
    /// None: no drive left to ask, the drive keeps its own time.
    pub reference: Option<(usize, u16)>,
}

/// One drive being brought back.
pub(crate) struct Rejoin {
    /// Bus position; None: no rejoin running.
    pub drive: Option<usize>,
    pub step: Step,
    pub started: MonoTime,
    /// Next SDO of the drive's list.
    sdo: usize,
    /// Mailbox counter of the last request (1..=7).
    counter: u8,
    /// SII word being read (8: vendor, 10: product when the ESC reads 4 bytes at a time).
    sii_word: u16,
    vendor: u32,
    /// DC: the offset to write and the system time it was computed at.
    dc_offset: u64,
    dc_now: u64,
    /// Bus positions that did not answer as a time source (power-cycled too): skipped.
    pub no_time_source: u32,
    /// The time source asked by this cycle's `DcTimes` (bus position).
    time_source: Option<usize>,
    /// This cycle's accesses and their buffers.
    pub acc: [Option<Access>; 2],
    pub tx: [[u8; MAX_PDU]; 2],
    pub rx: [[u8; MAX_PDU]; 2],
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(v)
}

/// One cycle's outcome of the rejoin's access(es), as the state machine reads it.
struct Outcome {
    /// The first access came back and succeeded.
    ok0: bool,
    /// The second succeeded, or none was made.
    ok1: bool,
    /// The first came back (succeeded or not).
    answered: bool,
    /// The second came back failed.
    second_failed: bool,
    /// The first's reply (its first 24 bytes).
    r: [u8; 24],
}

impl Rejoin {
    /// Idle; allocated once with the backend.
    pub fn new() -> Rejoin {
        Rejoin {
            drive: None,
            step: Step::Status,
            started: MonoTime::default(),
            sdo: 0,
            counter: 0,
            sii_word: 8,
            vendor: 0,
            dc_offset: 0,
            dc_now: 0,
            no_time_source: 0,
            time_source: None,
            acc: [None; 2],
            tx: [[0; MAX_PDU]; 2],
            rx: [[0; MAX_PDU]; 2],
        }
    }

    /// Starts bringing drive `i` back.
    pub fn start(&mut self, i: usize, now: MonoTime) {
        self.drive = Some(i);
        self.step = Step::Status;
        self.started = now;
        self.sdo = 0;
        self.sii_word = 8;
        self.no_time_source = 0;
        self.acc = [None; 2];
    }

    fn read(&mut self, target: Target, reg: u16, len: u16) {
        self.acc = [
            Some(Access {
                target,
                reg,
                write: false,
                len,
            }),
            None,
        ];
    }

    fn write(&mut self, target: Target, reg: u16, data: &[u8]) {
        self.tx[0][..data.len()].copy_from_slice(data);
        self.acc = [
            Some(Access {
                target,
                reg,
                write: true,
                len: data.len() as u16,
            }),
            None,
        ];
    }

    /// The next SDO request of the list, written into the drive's receive mailbox (SM0).
    fn sdo_request(&mut self, s: &DriveSnapshot) {
        let (at, len) = s.sm_area(0);
        let len = usize::from(len).min(MAX_PDU);
        self.counter = self.counter % 7 + 1;
        mailbox::request(&s.sdos[self.sdo], self.counter, &mut self.tx[0][..len]);
        self.acc = [
            Some(Access {
                target: Target::Station(s.addr),
                reg: at,
                write: true,
                len: len as u16,
            }),
            None,
        ];
    }

    /// The drive's local time at the latch (0x0918) and its system time offset (0x0920),
    /// and the same of the reference clock by the same frame when there is one.
    fn dc_times(&mut self, st: Target, cx: &Context) {
        self.read(st, 0x0918, 16);
        self.time_source = cx.reference.map(|(i, _)| i);
        if let Some((_, r)) = cx.reference {
            self.acc[1] = Some(Access {
                target: Target::Station(r),
                reg: 0x0918,
                write: false,
                len: 16,
            });
        }
    }

    /// Fills `acc` (and `tx`) with this cycle's access(es) for drive `s`.
    pub fn prepare(&mut self, s: &DriveSnapshot, cx: &Context) {
        let Some(i) = self.drive else {
            self.acc = [None; 2];
            return;
        };
        let st = Target::Station(s.addr);
        let pos = Target::Position(i as u16);
        match self.step {
            Step::Status | Step::WaitInit | Step::WaitPreOp => self.read(st, 0x0130, 6),
            Step::WaitSafeOp | Step::WaitAck | Step::WaitOp => self.read(st, 0x0130, 6),
            Step::Probe => self.read(pos, 0x0010, 2),
            Step::ToInit => self.write(st, 0x0120, &0x0011u16.to_le_bytes()),
            Step::SiiOwner => self.write(pos, 0x0500, &[0x00]),
            Step::SiiRead => {
                let mut cmd = [0u8; 6];
                cmd[0..2].copy_from_slice(&0x0100u16.to_le_bytes());
                cmd[2..6].copy_from_slice(&u32::from(self.sii_word).to_le_bytes());
                self.write(pos, 0x0502, &cmd);
            }
            Step::SiiData => self.read(pos, 0x0502, 14),
            Step::Address => self.write(pos, 0x0010, &s.addr.to_le_bytes()),
            Step::SiiToPdi => self.write(st, 0x0500, &[0x01]),
            Step::MailboxSms => self.write(st, 0x0800, &s.sm[..16]),
            Step::ReqPreOp => self.write(st, 0x0120, &0x0002u16.to_le_bytes()),
            Step::SiiToMaster => self.write(st, 0x0500, &[0x00]),
            Step::SdoRequest => self.sdo_request(s),
            // SM1's status byte: bit 3, a reply waiting.
            Step::SdoPoll => self.read(st, 0x080D, 1),
            Step::SdoReply => {
                let (at, len) = s.sm_area(1);
                self.read(st, at, len.min(MAX_PDU as u16));
            }
            Step::ProcessSms => self.write(st, 0x0810, &s.sm[16..]),
            Step::Fmmus => self.write(st, 0x0600, &s.fmmu),
            Step::DcLatch => self.write(Target::Broadcast, 0x0900, &[0; 4]),
            Step::DcTimes => self.dc_times(st, cx),
            Step::DcOffset => {
                let v = self.dc_offset.to_le_bytes();
                self.write(st, 0x0920, &v);
            }
            Step::DcDelay => self.write(st, 0x0928, &s.dc_delay.to_le_bytes()),
            // The drift filter's defaults, as ethercrab writes them at init.
            Step::DcSpeed => self.write(st, 0x0930, &0x1000u16.to_le_bytes()),
            Step::DcFilter => self.write(st, 0x0934, &0x0C00u16.to_le_bytes()),
            Step::Sync0Off => self.write(st, 0x0981, &[0x00]),
            Step::Sync0Start => {
                // In the future, on a whole period, as ethercrab computes it (100 ms ahead).
                let period = u64::from(s.sync0_cycle_ns()).max(1);
                let start = (self.dc_now + 100_000_000) / period * period;
                self.write(st, 0x0990, &start.to_le_bytes());
            }
            Step::Sync0Cycle => self.write(st, 0x09A0, &s.sync[0x20..0x28]),
            Step::Sync0On => self.write(st, 0x0981, &[s.sync_active()]),
            Step::ReqSafeOp => self.write(st, 0x0120, &0x0004u16.to_le_bytes()),
            Step::Ack => self.write(st, 0x0120, &0x0014u16.to_le_bytes()),
            Step::ReqOp => self.write(st, 0x0120, &0x0008u16.to_le_bytes()),
        }
    }

    /// Takes this cycle's outcome (`done[k]`: None, access `k` not back in time) and
    /// moves on. Returns the failure that ends the rejoin, if any.
    pub fn advance(
        &mut self,
        done: [Option<Result<(), Error>>; 2],
        s: &DriveSnapshot,
        cx: &Context,
    ) -> Option<RejoinFailure> {
        match self.next_step(done, s, cx) {
            Ok(step) => {
                self.step = step;
                None
            }
            Err(e) => Some(e),
        }
    }

    fn next_step(
        &mut self,
        done: [Option<Result<(), Error>>; 2],
        s: &DriveSnapshot,
        cx: &Context,
    ) -> Result<Step, RejoinFailure> {
        let mut r = [0u8; 24];
        r.copy_from_slice(&self.rx[0][..24]);
        let o = Outcome {
            ok0: matches!(done[0], Some(Ok(()))),
            ok1: self.acc[1].is_none() || matches!(done[1], Some(Ok(()))),
            answered: done[0].is_some(),
            second_failed: matches!(done[1], Some(Err(_))),
            r,
        };
        use Step::*;
        match self.step {
            Status | Probe | ToInit | WaitInit | SiiOwner | SiiRead | SiiData => {
                self.next_find(&o, s, cx)
            }
            Address | SiiToPdi | MailboxSms | ReqPreOp | WaitPreOp | SiiToMaster | SdoRequest
            | SdoPoll | SdoReply => self.next_mailbox(&o, s),
            ProcessSms | Fmmus | DcLatch | DcTimes | DcOffset | DcDelay | DcSpeed | DcFilter
            | Sync0Off | Sync0Start | Sync0Cycle | Sync0On => Ok(self.next_dc(&o, s)),
            ReqSafeOp | WaitSafeOp | Ack | WaitAck | ReqOp | WaitOp => self.next_op(&o),
        }
    }

    /// Finding the drive: its AL status at its address, else a probe at its bus position,
    /// INIT, and its identity from the SII.
    fn next_find(
        &mut self,
        o: &Outcome,
        s: &DriveSnapshot,
        cx: &Context,
    ) -> Result<Step, RejoinFailure> {
        let (ok0, answered, r) = (o.ok0, o.answered, &o.r);
        let al = |r: &[u8]| (u16_at(r, 0), u16_at(r, 4));
        use Step::*;
        Ok(match self.step {
            Status if ok0 => match al(r) {
                (0x0008, _) => WaitOp,
                (0x0014, 0x001B) => Ack,
                (0x0004, _) => ReqOp,
                _ => ToInit,
            },
            // No answer at its address: gone, or back from a power cycle at address 0.
            Status if answered => Probe,
            Probe if ok0 => {
                if u16_at(r, 0) == s.addr {
                    Status
                } else {
                    SiiOwner
                }
            }
            ToInit if ok0 => WaitInit,
            WaitInit if ok0 => match al(r) {
                (st, _) if st & 0x1F == 0x01 => SiiOwner,
                _ => ToInit,
            },
            SiiOwner if ok0 => SiiRead,
            SiiRead if ok0 => SiiData,
            SiiData if ok0 => {
                let ctl = u16_at(r, 0);
                if ctl & 0x8000 != 0 {
                    SiiData // busy
                } else if ctl & 0x6000 != 0 {
                    SiiRead // command error: read again
                } else if self.sii_word == 8 {
                    self.vendor = u32_at(r, 6);
                    if ctl & 0x0040 != 0 {
                        // 8-byte reads: the product code came with it.
                        self.identity(u32_at(r, 10), cx)?
                    } else {
                        self.sii_word = 10;
                        SiiRead
                    }
                } else {
                    self.identity(u32_at(r, 6), cx)?
                }
            }
            // Not back in time, or refused (working counter): the same access again.
            same => same,
        })
    }

    /// Its station address, the mailbox, PRE-OP and the bring-up SDOs through it.
    fn next_mailbox(&mut self, o: &Outcome, s: &DriveSnapshot) -> Result<Step, RejoinFailure> {
        let (ok0, r) = (o.ok0, &o.r);
        use Step::*;
        Ok(match self.step {
            Address if ok0 => SiiToPdi,
            SiiToPdi if ok0 => MailboxSms,
            MailboxSms if ok0 => ReqPreOp,
            ReqPreOp if ok0 => WaitPreOp,
            WaitPreOp if ok0 => self.wait_al(0x0002, SiiToMaster)?,
            SiiToMaster if ok0 => {
                if s.coe && s.n_sdos > 0 {
                    SdoRequest
                } else {
                    ProcessSms
                }
            }
            SdoRequest if ok0 => SdoPoll,
            SdoPoll if ok0 => {
                if r[0] & 0x08 != 0 {
                    SdoReply
                } else {
                    SdoPoll
                }
            }
            SdoReply if ok0 => {
                let sdo = &s.sdos[self.sdo];
                match mailbox::reply(sdo, &self.rx[0]) {
                    Reply::Done if self.sdo + 1 >= s.n_sdos => ProcessSms,
                    Reply::Done => {
                        self.sdo += 1;
                        SdoRequest
                    }
                    Reply::Other => SdoPoll,
                    Reply::Garbled => SdoRequest,
                    Reply::Refused => {
                        return Err(RejoinFailure::Mapping {
                            index: sdo.index,
                            sub: sdo.sub,
                        })
                    }
                }
            }
            // The reply was read (and so taken out of the mailbox) but lost: ask again.
            SdoReply => SdoRequest,
            // Not back in time, or refused (working counter): the same access again.
            same => same,
        })
    }

    /// The process-data sync managers, the FMMUs and, with DC, the drive's clock and SYNC0.
    fn next_dc(&mut self, o: &Outcome, s: &DriveSnapshot) -> Step {
        let (ok0, ok1, r) = (o.ok0, o.ok1, &o.r);
        use Step::*;
        match self.step {
            ProcessSms if ok0 => Fmmus,
            Fmmus if ok0 => {
                if s.dc {
                    DcLatch
                } else {
                    ReqSafeOp
                }
            }
            DcLatch if ok0 => DcTimes,
            // The time source did not answer at its address: it lost power too and has
            // not been brought back yet. Ask the next one (the latch still holds).
            DcTimes if o.second_failed => {
                if let Some(i) = self.time_source {
                    self.no_time_source |= 1 << i;
                }
                DcTimes
            }
            DcTimes if ok0 && ok1 => {
                let (local, old_offset) = (u64_at(r, 0), u64_at(r, 8));
                // The system time the drive should have had at its latch: the reference's at
                // its own latch (local + offset), by the same frame. As at bring-up
                // (ethercrab's offsets), the way between them is left to the drive's time
                // control, which the per-cycle FRMW feeds with its delay (0x0928). Without
                // a reference the drive keeps its own time.
                let want = match self.time_source {
                    Some(_) => u64_at(&self.rx[1], 0).wrapping_add(u64_at(&self.rx[1], 8)),
                    None => local.wrapping_add(old_offset),
                };
                self.dc_offset = want.wrapping_sub(local);
                self.dc_now = want;
                DcOffset
            }
            DcOffset if ok0 => DcDelay,
            DcDelay if ok0 => DcSpeed,
            DcSpeed if ok0 => DcFilter,
            DcFilter if ok0 => {
                if s.sync_active() & 0x01 != 0 {
                    Sync0Off
                } else {
                    ReqSafeOp
                }
            }
            Sync0Off if ok0 => Sync0Start,
            Sync0Start if ok0 => Sync0Cycle,
            Sync0Cycle if ok0 => Sync0On,
            Sync0On if ok0 => ReqSafeOp,
            // Not back in time, or refused (working counter): the same access again.
            same => same,
        }
    }

    /// SAFE-OP (with the watchdog's error acknowledged) and OP.
    fn next_op(&mut self, o: &Outcome) -> Result<Step, RejoinFailure> {
        let (ok0, r) = (o.ok0, &o.r);
        let al = |r: &[u8]| (u16_at(r, 0), u16_at(r, 4));
        use Step::*;
        Ok(match self.step {
            ReqSafeOp if ok0 => WaitSafeOp,
            WaitSafeOp if ok0 => self.wait_al(0x0004, ReqOp)?,
            Ack if ok0 => WaitAck,
            WaitAck if ok0 => match al(r) {
                (0x0004, _) => ReqOp,
                (0x0008, _) => WaitOp,
                _ => Ack,
            },
            ReqOp if ok0 => WaitOp,
            WaitOp if ok0 => self.wait_al(0x0008, WaitOp)?,
            // Not back in time, or refused (working counter): the same access again.
            same => same,
        })
    }

    /// Identity known: the config's drive, or the rejoin ends.
    fn identity(&self, product: u32, cx: &Context) -> Result<Step, RejoinFailure> {
        if (self.vendor, product) == (cx.vendor, cx.product) {
            Ok(Step::Address)
        } else {
            Err(RejoinFailure::Identity {
                vendor: self.vendor,
                product,
            })
        }
    }

    /// Waiting for AL state `want`: there, go on; an error flag with a code no retry
    /// fixes ends the rejoin; any other error starts it over from the status.
    fn wait_al(&self, want: u16, there: Step) -> Result<Step, RejoinFailure> {
        let (st, code) = (u16_at(&self.rx[0], 0), u16_at(&self.rx[0], 4));
        if st & 0x1F == want {
            Ok(there)
        } else if st & 0x10 != 0 {
            if CONFIG_REFUSED.contains(&code) {
                Err(RejoinFailure::Refused { code })
            } else {
                Ok(Step::Status)
            }
        } else {
            // Still on its way: a state change takes a while on a real drive.
            Ok(self.step)
        }
    }
}
