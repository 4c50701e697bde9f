//! One simulated drive on the bus: its ESC, its object dictionary and CiA 402 drive, its mailbox
//! server, and the AL state machine the drive's application runs (with the checks a real
//! drive makes before each transition, and the AL status codes it reports when one fails).

use crate::cia402::{Drive, ERR_COMM};
use crate::coe::MailboxServer;
use crate::config::{DriveParams, RefuseTransition};
use crate::esc::{reg, Esc};
use crate::od::{Identity, Objects};
use crate::plant::ShaftState;
use crate::sii::{self, MBX_IN_ADDR, MBX_LEN, MBX_OUT_ADDR, SM_CONTROL};

/// AL states.
pub mod al {
    /// INIT.
    pub const INIT: u8 = 1;
    /// PRE-OP.
    pub const PREOP: u8 = 2;
    /// Bootstrap.
    pub const BOOT: u8 = 3;
    /// SAFE-OP.
    pub const SAFEOP: u8 = 4;
    /// OP.
    pub const OP: u8 = 8;
}

/// AL status codes the model reports (ETG.1000.6 table 11).
pub mod al_code {
    /// Invalid requested state change.
    pub const INVALID_STATE_CHANGE: u16 = 0x0011;
    /// Unknown requested state.
    pub const UNKNOWN_STATE: u16 = 0x0012;
    /// Bootstrap not supported.
    pub const BOOTSTRAP_NOT_SUPPORTED: u16 = 0x0013;
    /// Invalid mailbox configuration (PRE-OP).
    pub const INVALID_MAILBOX_CONFIG: u16 = 0x0016;
    /// Sync manager watchdog.
    pub const SM_WATCHDOG: u16 = 0x001B;
    /// Invalid output configuration.
    pub const INVALID_OUTPUT_CONFIG: u16 = 0x001D;
    /// Invalid input configuration.
    pub const INVALID_INPUT_CONFIG: u16 = 0x001E;
}

/// One drive.
#[derive(Clone, Debug)]
pub struct Device {
    /// The ESC (register file and process RAM).
    pub esc: Esc,
    /// Object dictionary and drive.
    pub objs: Objects,
    mbx: MailboxServer,
    pending_reply: Option<([u8; MBX_LEN as usize], usize)>,
    al_state: u8,
    al_error: bool,
    al_code: u16,
    refuse: Vec<(u8, u16, Option<u32>)>,
    last_cycle_ns: Option<u64>,
    last_outputs_ns: u64,
    watchdog_ns: u64,
    /// Whether the drive has a CoE mailbox (else no mailbox at all).
    coe: bool,
}

impl Device {
    /// Drive number `position` of the chain, powered up in INIT.
    pub fn new(p: &DriveParams, position: usize, refuse: &[RefuseTransition]) -> Self {
        let offset = 1_000_000_000u64
            .wrapping_mul(position as u64 + 1)
            .wrapping_add(12_345);
        let initial = p
            .initial_position_counts
            .saturating_mul(position as i32 + 1);
        let refuse = refuse
            .iter()
            .filter(|r| r.drive == position)
            .map(|r| (r.to.al_code(), r.code, r.count))
            .collect();
        Self::power_up(
            p,
            position,
            sii::build_image(p, position),
            offset,
            initial,
            refuse,
        )
    }

    /// Power returns at simulated time `now_ns` after an outage: everything volatile starts
    /// again as at the first power-up (INIT, no AL error, station address 0, alias loaded from
    /// the SII, sync managers, FMMUs and DC registers zero, the local clock restarting at 0,
    /// the object dictionary at its power-up values, mailbox counter reset, the CiA 402 drive
    /// in Switch On Disabled). What is not volatile stays: the SII EEPROM (with anything the
    /// master wrote to it) and the motor, which stood still, so its absolute encoder reads
    /// the position it had when power went. Refusals configured with a count keep the count
    /// they had left: they model the drive's firmware, not its RAM.
    pub fn restart_after_power_loss(&mut self, p: &DriveParams, position: usize, now_ns: u64) {
        let sii = self.esc.take_sii();
        let motor = self.objs.drive.position();
        let refuse = std::mem::take(&mut self.refuse);
        *self = Self::power_up(p, position, sii, 0u64.wrapping_sub(now_ns), motor, refuse);
    }

    fn power_up(
        p: &DriveParams,
        position: usize,
        image: Vec<u16>,
        clock_offset_ns: u64,
        motor_counts: i32,
        refuse: Vec<(u8, u16, Option<u32>)>,
    ) -> Self {
        let mut drive = Drive::new(p, motor_counts);
        drive.cycle(0, false); // boot: not ready to switch on -> switch on disabled
        let identity = Identity {
            vendor_id: p.vendor_id,
            product_code: p.product_code,
            revision: p.revision,
            serial: p.serial_base.wrapping_add(position as u32),
        };
        Device {
            esc: Esc::new(image, clock_offset_ns),
            objs: Objects::with_maps(
                drive,
                identity,
                crate::pdo::PdoMap::from_entries(&p.rx_pdo),
                crate::pdo::PdoMap::from_entries(&p.tx_pdo),
            )
            .pdo_writable(p.pdo_writable),
            coe: p.coe,
            mbx: MailboxServer::default(),
            pending_reply: None,
            al_state: al::INIT,
            al_error: false,
            al_code: 0,
            refuse,
            last_cycle_ns: None,
            last_outputs_ns: 0,
            watchdog_ns: u64::from(p.sm_watchdog_ms) * 1_000_000,
        }
    }

    /// AL state (1, 2, 4, 8).
    pub fn al_state(&self) -> u8 {
        self.al_state
    }

    /// AL status error flag.
    pub fn al_error(&self) -> bool {
        self.al_error
    }

    /// AL status code (0x0134).
    pub fn al_status_code(&self) -> u16 {
        self.al_code
    }

    /// The drive.
    pub fn drive(&self) -> &Drive {
        &self.objs.drive
    }

    fn publish_al(&mut self) {
        let status = u16::from(self.al_state) | if self.al_error { 0x10 } else { 0 };
        self.esc.put16(reg::AL_STATUS, status);
        self.esc.put16(reg::AL_STATUS_CODE, self.al_code);
    }

    fn fail(&mut self, code: u16) {
        self.al_error = true;
        self.al_code = code;
    }

    /// The application's work after a frame passed: AL requests, mailbox, process data,
    /// watchdog. `now_ns` is simulated time.
    pub fn after_frame(&mut self, now_ns: u64) {
        let ev = std::mem::take(&mut self.esc.events);
        if ev.al_control {
            self.handle_al_request(now_ns);
        }
        if ev.mailbox_written {
            self.handle_mailbox();
        }
        self.deliver_reply();
        if (ev.outputs_written || ev.inputs_read) && self.al_state >= al::SAFEOP {
            self.process_data_cycle(now_ns, ev.outputs_written);
        }
        // A drive that got no outputs in this frame may have run out of time too.
        self.check_watchdog(now_ns);
    }

    /// The SM watchdog: in OP, no outputs for longer than the watchdog time puts the outputs
    /// in a safe state (the drive reacts as to a lost link), drops the device to SAFE-OP and
    /// sets AL status code 0x001B. A real ESC's watchdog is a timer that expires by itself;
    /// the simulator only sees time when a frame arrives, so the network calls this for every
    /// device *before* the frame's PDUs are processed: the first frame after a gap must find
    /// the watchdog expired, not refresh it.
    pub fn check_watchdog(&mut self, now_ns: u64) {
        if self.al_state == al::OP
            && self.watchdog_ns > 0
            && now_ns.saturating_sub(self.last_outputs_ns) > self.watchdog_ns
        {
            self.comm_lost();
            self.leave_op();
            self.al_state = al::SAFEOP;
            self.fail(al_code::SM_WATCHDOG);
        }
        self.publish_al();
    }

    fn handle_al_request(&mut self, now_ns: u64) {
        let ctl = self.esc.get16(reg::AL_CONTROL);
        let req = (ctl & 0x0F) as u8;
        let ack = ctl & 0x10 != 0;
        if self.al_error {
            if !ack {
                return; // an error must be acknowledged before any new request is taken
            }
            self.al_error = false;
            self.al_code = 0;
        }
        let cur = self.al_state;
        if req == cur {
            return;
        }
        if !matches!(req, al::INIT | al::PREOP | al::BOOT | al::SAFEOP | al::OP) {
            return self.fail(al_code::UNKNOWN_STATE);
        }
        if req == al::BOOT {
            let code = if cur == al::INIT {
                al_code::BOOTSTRAP_NOT_SUPPORTED
            } else {
                al_code::INVALID_STATE_CHANGE
            };
            return self.fail(code);
        }
        let upward = matches!(
            (cur, req),
            (al::INIT, al::PREOP) | (al::PREOP, al::SAFEOP) | (al::SAFEOP, al::OP)
        );
        let downward = req < cur;
        if !upward && !downward {
            return self.fail(al_code::INVALID_STATE_CHANGE);
        }
        if upward {
            if let Some(code) = self.refusal(req) {
                return self.fail(code);
            }
            let check = match req {
                al::PREOP if self.coe => self.check_mailbox_sms(),
                al::SAFEOP => self.check_process_data_sms(),
                _ => Ok(()),
            };
            if let Err(code) = check {
                return self.fail(code);
            }
        }
        if cur == al::OP {
            self.leave_op();
        }
        match req {
            al::INIT => {
                self.esc.sm_pdi_disabled = [true; crate::esc::NUM_SM];
                for i in 0..crate::esc::NUM_SM {
                    self.esc.set_sm_full(i, false);
                }
                self.pending_reply = None;
            }
            al::PREOP => {
                self.esc.sm_pdi_disabled[0] = false;
                self.esc.sm_pdi_disabled[1] = false;
                self.esc.sm_pdi_disabled[2] = true;
                self.esc.sm_pdi_disabled[3] = true;
            }
            al::SAFEOP if cur == al::PREOP => {
                self.esc.sm_pdi_disabled[2] = false;
                self.esc.sm_pdi_disabled[3] = false;
                self.write_inputs();
            }
            al::OP => self.last_outputs_ns = now_ns,
            _ => {}
        }
        self.al_state = req;
    }

    fn refusal(&mut self, to: u8) -> Option<u16> {
        for (target, code, remaining) in &mut self.refuse {
            if *target != to {
                continue;
            }
            match remaining {
                Some(0) => continue,
                Some(n) => *n -= 1,
                None => {}
            }
            return Some(*code);
        }
        None
    }

    fn leave_op(&mut self) {
        self.objs.drive.lose_outputs();
    }

    fn check_mailbox_sms(&self) -> Result<(), u16> {
        for (i, addr) in [(0usize, MBX_OUT_ADDR), (1, MBX_IN_ADDR)] {
            let (start, len, control, enabled) = self.esc.sm(i);
            if start != addr || len != MBX_LEN || control & 0x0F != SM_CONTROL[i] & 0x0F || !enabled
            {
                return Err(al_code::INVALID_MAILBOX_CONFIG);
            }
        }
        Ok(())
    }

    fn check_process_data_sms(&self) -> Result<(), u16> {
        for (i, addr, want, code) in [
            (
                2usize,
                sii::OUTPUTS_ADDR,
                self.objs.rx_bytes(),
                al_code::INVALID_OUTPUT_CONFIG,
            ),
            (
                3,
                sii::INPUTS_ADDR,
                self.objs.tx_bytes(),
                al_code::INVALID_INPUT_CONFIG,
            ),
        ] {
            let (start, len, control, enabled) = self.esc.sm(i);
            let ok = usize::from(len) == want
                && (want == 0
                    || (enabled && start == addr && control & 0x0F == SM_CONTROL[i] & 0x0F));
            if !ok {
                return Err(code);
            }
        }
        Ok(())
    }

    fn handle_mailbox(&mut self) {
        let (start, len, _, _) = self.esc.sm(0);
        let mut req = [0u8; MBX_LEN as usize];
        // The master may place a sync manager at the very end of memory: take what exists.
        let src = self
            .esc
            .ram(usize::from(start), usize::from(len).min(req.len()));
        let n = src.len();
        req[..n].copy_from_slice(src);
        self.esc.set_sm_full(0, false);
        let mut resp = [0u8; MBX_LEN as usize];
        if let Some(rn) = self
            .mbx
            .serve(&req[..n], &mut self.objs, self.al_state, &mut resp)
        {
            self.pending_reply = Some((resp, rn));
        }
    }

    fn deliver_reply(&mut self) {
        if self.esc.sm_full(1) {
            return;
        }
        let Some((resp, n)) = self.pending_reply.take() else {
            return;
        };
        let (start, len, _, _) = self.esc.sm(1);
        let len = usize::from(len);
        if n > len {
            return; // the master configured a mailbox too small for the reply
        }
        let dst = self.esc.ram_mut(usize::from(start), len);
        if n > dst.len() {
            return;
        }
        dst.fill(0);
        dst[..n].copy_from_slice(&resp[..n]);
        self.esc.set_sm_full(1, true);
    }

    fn process_data_cycle(&mut self, now_ns: u64, outputs_written: bool) {
        let dt = self.last_cycle_ns.map_or(0, |t| now_ns.saturating_sub(t));
        self.last_cycle_ns = Some(now_ns);
        let op = self.al_state == al::OP;
        if op && outputs_written {
            let (start, _, _, _) = self.esc.sm(2);
            let n = self.objs.rx_bytes();
            let mut image = [0u8; crate::od::MAX_PDO_BYTES];
            let src = self.esc.ram(usize::from(start), n);
            let k = src.len();
            image[..k].copy_from_slice(src);
            self.objs.unpack_outputs(&image[..k]);
            self.last_outputs_ns = now_ns;
        }
        self.objs.drive.cycle(dt, op);
        self.write_inputs();
    }

    fn write_inputs(&mut self) {
        let (start, _, _, _) = self.esc.sm(3);
        let n = self.objs.tx_bytes();
        let mut image = [0u8; crate::od::MAX_PDO_BYTES];
        self.objs.pack_inputs(&mut image[..n]);
        let dst = self.esc.ram_mut(usize::from(start), n);
        let k = dst.len();
        dst.copy_from_slice(&image[..k]);
    }

    /// Its shaft is moved by the chain's plant from now on, starting at `shaft` (see
    /// [`crate::plant`]).
    pub fn attach_shaft(&mut self, shaft: ShaftState) {
        self.objs.drive.attach_shaft(shaft);
    }

    /// The chain's plant moved: the drive ends the cycle this frame began on `shaft`, and
    /// its inputs are written again with what it measured.
    pub fn finish_cycle(&mut self, shaft: ShaftState) {
        if self.objs.drive.finish_cycle(shaft) {
            self.write_inputs();
        }
    }

    /// Communication to this drive was lost while it was enabled (cable cut): the drive faults
    /// as soon as its watchdog notices; exposed so the network can apply it.
    pub fn comm_lost(&mut self) {
        if self.objs.drive.state() == crate::cia402::PowerState::OperationEnabled {
            self.objs.drive.raise_fault(ERR_COMM);
            self.objs.drive.cycle(0, false);
        }
    }
}
