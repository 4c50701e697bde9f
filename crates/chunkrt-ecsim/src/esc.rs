//! The EtherCAT SubDevice Controller model: register file and process RAM, physical and logical
//! (FMMU) access with sync-manager gating, working-counter rules, the SII interface, and the
//! distributed-clock registers.
//!
//! Register side effects that the ESC hardware performs itself (SII reads, DC latches, mailbox
//! full/empty flags) happen while the frame passes; what the drive's application does (AL state
//! changes, mailbox protocols, process data) is flagged in [`Events`] and done after the frame.

/// Size of the modelled address space: registers 0x0000..0x0FFF and 4 KiB process RAM.
pub const MEM_SIZE: usize = 0x2000;
/// Start of process memory (mailboxes and process-data buffers).
pub const PROCESS_RAM: usize = 0x1000;
/// Sync managers modelled.
pub const NUM_SM: usize = 8;
/// FMMUs modelled.
pub const NUM_FMMU: usize = 8;

/// Register addresses used by the model.
pub mod reg {
    /// Configured station address.
    pub const STATION_ADDR: usize = 0x0010;
    /// DL status.
    pub const DL_STATUS: usize = 0x0110;
    /// AL control.
    pub const AL_CONTROL: usize = 0x0120;
    /// AL status.
    pub const AL_STATUS: usize = 0x0130;
    /// AL status code.
    pub const AL_STATUS_CODE: usize = 0x0134;
    /// RX error counters (invalid frame / RX error per port), 0x0300..0x0307.
    pub const RX_ERRORS: usize = 0x0300;
    /// SII owner.
    pub const SII_CONFIG: usize = 0x0500;
    /// SII control/status.
    pub const SII_CONTROL: usize = 0x0502;
    /// SII word address.
    pub const SII_ADDRESS: usize = 0x0504;
    /// SII data.
    pub const SII_DATA: usize = 0x0508;
    /// FMMU 0.
    pub const FMMU0: usize = 0x0600;
    /// Sync manager 0.
    pub const SM0: usize = 0x0800;
    /// DC receive time port 0 (write latches all ports).
    pub const DC_RX_TIME_P0: usize = 0x0900;
    /// DC system time.
    pub const DC_SYSTEM_TIME: usize = 0x0910;
    /// DC receive time of the ECAT processing unit.
    pub const DC_RX_TIME_EPU: usize = 0x0918;
    /// DC system time offset.
    pub const DC_OFFSET: usize = 0x0920;
    /// DC system time delay.
    pub const DC_DELAY: usize = 0x0928;
    /// DC system time difference.
    pub const DC_DIFF: usize = 0x092C;
    /// DC sync activation.
    pub const DC_SYNC_ACT: usize = 0x0981;
    /// DC SYNC0 cycle time.
    pub const DC_SYNC0_CYCLE: usize = 0x09A0;
    /// DC start time of the first SYNC0 pulse (system time).
    pub const DC_SYNC0_START: usize = 0x0990;
}

/// Where and when the frame passes this device (simulated nanoseconds).
#[derive(Clone, Copy, Debug, Default)]
pub struct Hop {
    /// Arrival at port 0.
    pub arrival_ns: u64,
    /// Return through port 1, if port 1 has a link.
    pub return_ns: Option<u64>,
}

/// Things the application must react to after the frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// AL control was written.
    pub al_control: bool,
    /// The master filled the output mailbox (SM0).
    pub mailbox_written: bool,
    /// The master wrote the whole outputs buffer (SM2).
    pub outputs_written: bool,
    /// The master read the whole inputs buffer (SM3).
    pub inputs_read: bool,
}

/// Command codes (ETG.1000.4 table 12).
pub mod cmd {
    /// No operation.
    pub const NOP: u8 = 0x00;
    /// Auto-increment physical read.
    pub const APRD: u8 = 0x01;
    /// Auto-increment physical write.
    pub const APWR: u8 = 0x02;
    /// Auto-increment physical read-write.
    pub const APRW: u8 = 0x03;
    /// Configured address physical read.
    pub const FPRD: u8 = 0x04;
    /// Configured address physical write.
    pub const FPWR: u8 = 0x05;
    /// Configured address physical read-write.
    pub const FPRW: u8 = 0x06;
    /// Broadcast read.
    pub const BRD: u8 = 0x07;
    /// Broadcast write.
    pub const BWR: u8 = 0x08;
    /// Broadcast read-write.
    pub const BRW: u8 = 0x09;
    /// Logical read.
    pub const LRD: u8 = 0x0A;
    /// Logical write.
    pub const LWR: u8 = 0x0B;
    /// Logical read-write.
    pub const LRW: u8 = 0x0C;
    /// Auto-increment read, multiple write.
    pub const ARMW: u8 = 0x0D;
    /// Configured address read, multiple write.
    pub const FRMW: u8 = 0x0E;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Read,
    Write,
}

/// One ESC.
#[derive(Clone, Debug)]
pub struct Esc {
    mem: Box<[u8]>,
    sii: Vec<u16>,
    sm_full: [bool; NUM_SM],
    /// Sync managers the application keeps closed (0x0807 bit 0), e.g. process data below SAFE-OP.
    pub sm_pdi_disabled: [bool; NUM_SM],
    /// Port 1 has a link to a next device.
    pub port1_link: bool,
    /// Pending application events.
    pub events: Events,
    clock_offset_ns: u64,
    /// How fast the local clock runs against simulated time, in parts per million.
    drift_ppm: f64,
    scratch: Vec<u8>,
}

impl Esc {
    /// A powered-up ESC with the given SII image; its local clock runs `clock_offset_ns` ahead
    /// of simulated time (so DC offset compensation has something to do).
    pub fn new(sii: Vec<u16>, clock_offset_ns: u64) -> Self {
        let mut esc = Esc {
            mem: vec![0u8; MEM_SIZE].into_boxed_slice(),
            sii,
            sm_full: [false; NUM_SM],
            sm_pdi_disabled: [true; NUM_SM],
            port1_link: false,
            events: Events::default(),
            clock_offset_ns,
            drift_ppm: 0.0,
            scratch: Vec::with_capacity(2048),
        };
        // Identification registers: an ET1100-like ESC with 8 FMMUs, 8 SMs, 8 KiB RAM, two MII
        // ports and 64-bit DC with SYNC support.
        esc.mem[0x0000] = 0x11;
        esc.mem[0x0001] = 0x01;
        esc.mem[0x0004] = NUM_FMMU as u8;
        esc.mem[0x0005] = NUM_SM as u8;
        esc.mem[0x0006] = 8;
        esc.mem[0x0007] = 0x0F;
        esc.mem[0x0008] = 0xFC;
        esc.mem[0x0009] = 0x01;
        let alias = esc.sii.get(4).copied().unwrap_or(0);
        esc.put16(0x0012, alias);
        esc.put16(reg::AL_STATUS, 0x0001);
        esc
    }

    /// The SII EEPROM image (it survives a power cycle: [`Esc::new`] takes it back).
    pub(crate) fn take_sii(&mut self) -> Vec<u16> {
        std::mem::take(&mut self.sii)
    }

    /// Read a little-endian u16 register.
    pub fn get16(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.mem[at], self.mem[at + 1]])
    }

    /// Read a little-endian u32 register.
    pub fn get32(&self, at: usize) -> u32 {
        u32::from_le_bytes([
            self.mem[at],
            self.mem[at + 1],
            self.mem[at + 2],
            self.mem[at + 3],
        ])
    }

    fn get64(&self, at: usize) -> u64 {
        u64::from(self.get32(at)) | (u64::from(self.get32(at + 4)) << 32)
    }

    /// Write a u16 register from the application side.
    pub fn put16(&mut self, at: usize, v: u16) {
        self.mem[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }

    fn put32(&mut self, at: usize, v: u32) {
        self.mem[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }

    fn put64(&mut self, at: usize, v: u64) {
        self.mem[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// Application access to process RAM (mailbox and process-data buffers).
    pub fn ram(&self, at: usize, len: usize) -> &[u8] {
        &self.mem[at.min(MEM_SIZE)..(at + len).min(MEM_SIZE)]
    }

    /// Mutable application access to process RAM.
    pub fn ram_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        &mut self.mem[at.min(MEM_SIZE)..(at + len).min(MEM_SIZE)]
    }

    /// Configured station address.
    pub fn station_address(&self) -> u16 {
        self.get16(reg::STATION_ADDR)
    }

    /// Sync manager `i` configuration: (start, length, control, enabled).
    pub fn sm(&self, i: usize) -> (u16, u16, u8, bool) {
        let b = reg::SM0 + 8 * i;
        (
            self.get16(b),
            self.get16(b + 2),
            self.mem[b + 4],
            self.mem[b + 6] & 1 != 0,
        )
    }

    /// Whether mailbox SM `i` holds data.
    pub fn sm_full(&self, i: usize) -> bool {
        self.sm_full[i]
    }

    /// Application side: mark mailbox SM `i` full (response written) or empty (request taken).
    pub fn set_sm_full(&mut self, i: usize, full: bool) {
        self.sm_full[i] = full;
    }

    /// SYNC0 cycle time if SYNC0 is active (0x0981 bits 0 and 1).
    pub fn sync0_cycle_ns(&self) -> Option<u32> {
        let cycle = self.get32(reg::DC_SYNC0_CYCLE);
        (self.mem[reg::DC_SYNC_ACT] & 0x03 == 0x03 && cycle > 0).then_some(cycle)
    }

    /// Count a frame that arrived with a bad FCS at `port` (0 or 1), as the ESC's RX error
    /// counters do (invalid frame counter, saturating at 0xFF).
    pub fn count_crc_error(&mut self, port: usize) {
        let at = reg::RX_ERRORS + 2 * port.min(3);
        self.mem[at] = self.mem[at].saturating_add(1);
    }

    /// Lets the local clock run `ppm` parts per million fast (negative: slow) against
    /// simulated time, as a drive's crystal does against the host's.
    pub fn set_drift_ppm(&mut self, ppm: f64) {
        self.drift_ppm = ppm;
    }

    fn local_time(&self, sim_ns: u64) -> u64 {
        let drift = (sim_ns as f64 * self.drift_ppm * 1e-6) as i64;
        sim_ns
            .wrapping_add_signed(drift)
            .wrapping_add(self.clock_offset_ns)
    }

    /// With SYNC0 active: how far into its SYNC0 period the system time is at simulated
    /// time `sim_ns` (None before the first pulse or without SYNC0).
    pub fn sync0_phase_ns(&self, sim_ns: u64) -> Option<u64> {
        let cycle = u64::from(self.sync0_cycle_ns()?);
        let start = self.get64(reg::DC_SYNC0_START);
        let st = self.system_time(sim_ns);
        (st >= start).then(|| (st - start) % cycle)
    }

    fn system_time(&self, sim_ns: u64) -> u64 {
        self.local_time(sim_ns)
            .wrapping_add(self.get64(reg::DC_OFFSET))
    }

    /// Update the registers the hardware computes, as seen by a frame at `hop`.
    fn refresh(&mut self, hop: &Hop) {
        let mut dl = 0x0003u16 | 0x0010 | 0x0200 | 0x5000;
        dl |= if self.port1_link {
            0x0020 | 0x0800
        } else {
            0x0400
        };
        self.put16(reg::DL_STATUS, dl);
        for i in 0..NUM_SM {
            let b = reg::SM0 + 8 * i;
            self.mem[b + 5] = if self.sm_full[i] { 0x08 } else { 0x00 };
            self.mem[b + 7] = u8::from(self.sm_pdi_disabled[i]);
        }
        let st = self.system_time(hop.arrival_ns);
        self.put64(reg::DC_SYSTEM_TIME, st);
    }

    /// Whether the master may write byte `a` (read-only and computed registers are skipped).
    fn writable(a: usize) -> bool {
        if (reg::SM0..reg::SM0 + 8 * NUM_SM).contains(&a) {
            // Status (byte 5) and PDI control (byte 7) belong to the ESC and the application.
            return !matches!((a - reg::SM0) % 8, 5 | 7);
        }
        !matches!(
            a,
            0x0000..=0x000F
                | 0x0012..=0x0013
                | 0x0110..=0x0111
                | 0x0130..=0x0135
                | 0x0501
                | 0x0900..=0x091F
                | 0x092C..=0x092F
        )
    }

    /// Check sync-manager rules for an access; on success apply the buffer side effects.
    fn sm_gate(&mut self, start: usize, len: usize, dir: Dir) -> bool {
        let end = start + len;
        let mut effects = [None::<(usize, bool)>; NUM_SM];
        for (i, effect) in effects.iter_mut().enumerate() {
            let (s, l, control, enabled) = self.sm(i);
            let (s, l) = (usize::from(s), usize::from(l));
            // Sync managers only work on process memory; one pointed at the registers is ignored.
            if !enabled || l == 0 || s < PROCESS_RAM || end <= s || start >= s + l {
                continue;
            }
            if self.sm_pdi_disabled[i] {
                return false;
            }
            let sm_writes = (control >> 2) & 0x03 == 1;
            if sm_writes != (dir == Dir::Write) {
                return false;
            }
            let mailbox = control & 0x03 == 0x02;
            let covers_last = end >= s + l;
            if mailbox {
                match dir {
                    Dir::Write if self.sm_full[i] => return false,
                    Dir::Read if !self.sm_full[i] => return false,
                    _ => {}
                }
            }
            if covers_last {
                *effect = Some((i, mailbox));
            }
        }
        for (i, mailbox) in effects.into_iter().flatten() {
            match (dir, mailbox) {
                (Dir::Write, true) => {
                    self.sm_full[i] = true;
                    self.events.mailbox_written = true;
                }
                (Dir::Read, true) => self.sm_full[i] = false,
                (Dir::Write, false) => self.events.outputs_written = true,
                (Dir::Read, false) => self.events.inputs_read = true,
            }
        }
        true
    }

    /// Physical read into `data` (OR-ed for broadcasts). Returns whether the access counted.
    fn phys_read(&mut self, ado: usize, data: &mut [u8], or: bool) -> bool {
        if !self.sm_gate(ado, data.len(), Dir::Read) {
            return false;
        }
        for (k, d) in data.iter_mut().enumerate() {
            let v = self.mem.get(ado + k).copied().unwrap_or(0);
            *d = if or { *d | v } else { v };
        }
        true
    }

    /// Physical write from `data`. Returns whether the access counted.
    fn phys_write(&mut self, ado: usize, data: &[u8], hop: &Hop) -> bool {
        if !self.sm_gate(ado, data.len(), Dir::Write) {
            return false;
        }
        let end = ado + data.len();
        for (k, &v) in data.iter().enumerate() {
            let a = ado + k;
            if a < MEM_SIZE && Self::writable(a) {
                self.mem[a] = v;
            }
        }
        let touches = |lo: usize, hi: usize| ado < hi && end > lo;
        if touches(reg::AL_CONTROL, reg::AL_CONTROL + 2) {
            self.events.al_control = true;
        }
        if touches(reg::RX_ERRORS, reg::RX_ERRORS + 0x14) {
            // Writing any error counter clears it.
            for a in ado.max(reg::RX_ERRORS)..end.min(reg::RX_ERRORS + 0x14) {
                self.mem[a] = 0;
            }
        }
        if touches(reg::SII_CONTROL, reg::SII_CONTROL + 2) {
            self.sii_command();
        }
        if touches(reg::DC_RX_TIME_P0, reg::DC_RX_TIME_P0 + 4) {
            self.latch_receive_times(hop);
        }
        if ado <= reg::DC_SYSTEM_TIME && end >= reg::DC_SYSTEM_TIME + 4 {
            let off = reg::DC_SYSTEM_TIME - ado;
            let mut raw = [0u8; 8];
            let n = (end - reg::DC_SYSTEM_TIME).min(8);
            raw[..n].copy_from_slice(&data[off..off + n]);
            self.compare_system_time(u64::from_le_bytes(raw), n, hop);
        }
        true
    }

    fn latch_receive_times(&mut self, hop: &Hop) {
        let t0 = self.local_time(hop.arrival_ns);
        self.put32(reg::DC_RX_TIME_P0, t0 as u32);
        let t1 = hop
            .return_ns
            .map(|t| self.local_time(t) as u32)
            .unwrap_or(0);
        self.put32(reg::DC_RX_TIME_P0 + 4, t1);
        self.put32(reg::DC_RX_TIME_P0 + 8, 0);
        self.put32(reg::DC_RX_TIME_P0 + 12, 0);
        self.put64(reg::DC_RX_TIME_EPU, t0);
    }

    /// A write to the system time register feeds the drift controller; we model a drift-free
    /// clock, so only the difference register (sign-magnitude) is updated.
    fn compare_system_time(&mut self, written: u64, bytes: usize, hop: &Hop) {
        let own = self
            .system_time(hop.arrival_ns)
            .wrapping_sub(u64::from(self.get32(reg::DC_DELAY)));
        let diff = if bytes >= 8 {
            written.wrapping_sub(own) as i64
        } else {
            i64::from((written as u32).wrapping_sub(own as u32) as i32)
        };
        let mag = diff.unsigned_abs().min(0x7FFF_FFFF) as u32;
        let v = if diff < 0 { mag | 0x8000_0000 } else { mag };
        self.put32(reg::DC_DIFF, v);
    }

    /// Execute an SII command written to 0x0502 (the EEPROM is instant: busy never shows).
    fn sii_command(&mut self) {
        let ctrl = self.get16(reg::SII_CONTROL);
        let addr = self.get32(reg::SII_ADDRESS) as usize;
        let mut status = 0x0040 | (ctrl & 0x0081); // 8-byte reads, keep write enable/address bits
        let master_owns = self.mem[reg::SII_CONFIG] & 0x01 == 0;
        if master_owns {
            if ctrl & 0x0100 != 0 {
                for k in 0..4 {
                    let w = self.sii.get(addr + k).copied().unwrap_or(0xFFFF);
                    self.put16(reg::SII_DATA + 2 * k, w);
                }
            } else if ctrl & 0x0200 != 0 {
                if ctrl & 0x0001 != 0 && addr < self.sii.len() {
                    self.sii[addr] = self.get16(reg::SII_DATA);
                } else {
                    status |= 0x2000; // command error: write without write enable
                }
            }
        }
        self.put16(reg::SII_CONTROL, status);
    }

    /// Process one PDU as it passes: addressing, access, working counter. `addr` is the PDU's
    /// 4-byte address field (auto-increment positions are incremented in place).
    pub fn handle_pdu(
        &mut self,
        command: u8,
        addr: &mut [u8; 4],
        data: &mut [u8],
        wkc: &mut u16,
        hop: &Hop,
    ) {
        self.refresh(hop);
        let adp = u16::from_le_bytes([addr[0], addr[1]]);
        let ado = usize::from(u16::from_le_bytes([addr[2], addr[3]]));
        let mut inc = 0u16;
        match command {
            cmd::APRD | cmd::APWR | cmd::APRW | cmd::ARMW => {
                let hit = adp == 0;
                inc = self.physical(command, hit, ado, data, hop);
                addr[..2].copy_from_slice(&adp.wrapping_add(1).to_le_bytes());
            }
            cmd::FPRD | cmd::FPWR | cmd::FPRW | cmd::FRMW => {
                let hit = adp == self.station_address();
                inc = self.physical(command, hit, ado, data, hop);
            }
            cmd::BRD | cmd::BWR | cmd::BRW => {
                if matches!(command, cmd::BRD | cmd::BRW) && self.phys_read(ado, data, true) {
                    inc += 1;
                }
                if matches!(command, cmd::BWR | cmd::BRW) && self.phys_write(ado, data, hop) {
                    inc += 2 - u16::from(command == cmd::BWR);
                }
                addr[..2].copy_from_slice(&adp.wrapping_add(1).to_le_bytes());
            }
            cmd::LRD | cmd::LWR | cmd::LRW => {
                inc = self.logical(command, u32::from_le_bytes(*addr), data, hop);
            }
            _ => {}
        }
        *wkc = wkc.wrapping_add(inc);
    }

    /// Physical (auto-increment or configured-address) access; returns the WKC increment.
    fn physical(&mut self, command: u8, hit: bool, ado: usize, data: &mut [u8], hop: &Hop) -> u16 {
        match command {
            cmd::APRD | cmd::FPRD if hit => u16::from(self.phys_read(ado, data, false)),
            cmd::APWR | cmd::FPWR if hit => u16::from(self.phys_write(ado, data, hop)),
            cmd::APRW | cmd::FPRW if hit => {
                // Read and write happen together: the memory gets the frame's data, the frame
                // the memory's old data.
                let mut scratch = std::mem::take(&mut self.scratch);
                scratch.clear();
                scratch.extend_from_slice(data);
                let r = self.phys_read(ado, data, false);
                let w = self.phys_write(ado, &scratch, hop);
                self.scratch = scratch;
                u16::from(r) + 2 * u16::from(w)
            }
            cmd::ARMW | cmd::FRMW if hit => u16::from(self.phys_read(ado, data, false)),
            cmd::ARMW | cmd::FRMW => u16::from(self.phys_write(ado, data, hop)),
            _ => 0,
        }
    }

    /// Logical access through the FMMUs; returns the WKC increment.
    fn logical(&mut self, command: u8, laddr: u32, data: &mut [u8], hop: &Hop) -> u16 {
        let (mut did_read, mut did_write) = (false, false);
        let pdu_start = u64::from(laddr);
        let pdu_end = pdu_start + data.len() as u64;
        // Writes first so an LRW writes the frame's data as the master sent it.
        for pass in [Dir::Write, Dir::Read] {
            for f in 0..NUM_FMMU {
                let b = reg::FMMU0 + 16 * f;
                if self.mem[b + 12] & 0x01 == 0 {
                    continue;
                }
                let ls = u64::from(self.get32(b));
                let len = u64::from(self.get16(b + 4));
                let phys = usize::from(self.get16(b + 8));
                let ty = self.mem[b + 11];
                let lo = ls.max(pdu_start);
                let hi = (ls + len).min(pdu_end);
                if lo >= hi {
                    continue;
                }
                let (off, n) = ((lo - pdu_start) as usize, (hi - lo) as usize);
                let p = phys + (lo - ls) as usize;
                match pass {
                    Dir::Write if ty & 0x02 != 0 && matches!(command, cmd::LWR | cmd::LRW) => {
                        let mut scratch = std::mem::take(&mut self.scratch);
                        scratch.clear();
                        scratch.extend_from_slice(&data[off..off + n]);
                        did_write |= self.phys_write(p, &scratch, hop);
                        self.scratch = scratch;
                    }
                    Dir::Read if ty & 0x01 != 0 && matches!(command, cmd::LRD | cmd::LRW) => {
                        did_read |= self.phys_read(p, &mut data[off..off + n], false);
                    }
                    _ => {}
                }
            }
        }
        u16::from(did_read) + 2 * u16::from(did_write) - u16::from(did_write && command == cmd::LWR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esc() -> Esc {
        let mut sii = vec![0xFFFFu16; 64];
        sii[8] = 0x1234;
        Esc::new(sii, 0)
    }

    #[test]
    fn configured_address_and_wkc() {
        let mut e = esc();
        let hop = Hop::default();
        let mut wkc = 0;
        let mut a = [0u8, 0, 0x10, 0x00];
        e.handle_pdu(cmd::APWR, &mut a, &mut [0x01, 0x10], &mut wkc, &hop);
        assert_eq!((wkc, e.station_address()), (1, 0x1001));
        assert_eq!(u16::from_le_bytes([a[0], a[1]]), 1, "position incremented");
        let mut a = [0x01, 0x10, 0x30, 0x01];
        let mut d = [0u8; 2];
        e.handle_pdu(cmd::FPRD, &mut a, &mut d, &mut wkc, &hop);
        assert_eq!((wkc, d), (2, [0x01, 0x00]), "INIT");
        let mut a = [0x02, 0x10, 0x30, 0x01];
        e.handle_pdu(cmd::FPRD, &mut a, &mut d, &mut wkc, &hop);
        assert_eq!(wkc, 2, "other station address does not count");
    }

    #[test]
    fn sii_read_returns_eight_bytes() {
        let mut e = esc();
        let hop = Hop::default();
        let mut wkc = 0;
        let mut a = [0u8, 0, 0x02, 0x05];
        e.handle_pdu(
            cmd::APWR,
            &mut a,
            &mut [0x00, 0x01, 0x08, 0x00, 0, 0],
            &mut wkc,
            &hop,
        );
        let mut a = [0u8, 0, 0x08, 0x05];
        let mut d = [0u8; 8];
        e.handle_pdu(cmd::APRD, &mut a, &mut d, &mut wkc, &hop);
        assert_eq!(&d[..2], &[0x34, 0x12]);
        assert_eq!(e.get16(reg::SII_CONTROL) & 0x8000, 0, "not busy");
    }

    #[test]
    fn read_only_registers_ignore_writes_but_count() {
        let mut e = esc();
        let mut wkc = 0;
        let mut a = [0u8, 0, 0x30, 0x01];
        e.handle_pdu(cmd::BWR, &mut a, &mut [0x08, 0], &mut wkc, &Hop::default());
        assert_eq!(wkc, 1);
        assert_eq!(e.get16(reg::AL_STATUS), 1);
    }
}
