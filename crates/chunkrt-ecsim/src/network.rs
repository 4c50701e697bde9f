//! The chain of drives on one wire: frame parsing, the order in which devices see a frame,
//! the simulated clock, and seeded fault injection.

use crate::config::{ClockMode, DriveParams, SimConfig};
use crate::device::{al, Device};
use crate::error::EcsimError;
use crate::esc::{cmd, Hop};
use crate::plant::{ChainPlant, ShaftCommand};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

/// EtherCAT's EtherType (one constant, the socket's).
pub use chunkrt_afpacket::ETHERTYPE_ECAT;
/// Time a frame needs from one device's port 0 to the next (cable plus forwarding), in ns.
const HOP_NS: u64 = 1_000;
/// Virtual-clock advance for frames without process data, in ns.
const NON_PD_FRAME_NS: u64 = 20_000;

/// What became of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameOutcome {
    /// A reply is in the caller's buffer; deliver it after `delay_ns` of wall time.
    Reply {
        /// Injected delay (0 for normal frames).
        delay_ns: u64,
    },
    /// No reply: not an EtherCAT frame, or lost/corrupted on the wire.
    NoReply,
}

/// Counters of what the wire did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireStats {
    /// EtherCAT frames received.
    pub frames: u64,
    /// Frames answered.
    pub replies: u64,
    /// Frames lost by injection.
    pub dropped: u64,
    /// Frames delayed by injection.
    pub delayed: u64,
    /// Frames corrupted by injection.
    pub corrupted: u64,
    /// Process-data replies sent back malformed by injection.
    pub garbled: u64,
    /// Frames ignored (not EtherCAT, or already processed).
    pub ignored: u64,
    /// Drives that lost power (each outage once, however it was injected).
    pub power_cycles: u64,
}

/// How an injected fault makes a reply malformed (see [`SimNetwork::garble_replies`]).
/// The drives process the frame as usual; only what comes back to the master is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Garble {
    /// The first PDU's length field says more data than the frame holds (2047 bytes), as a
    /// device or switch that mangles a datagram header would leave it.
    PduLength,
    /// The EtherCAT frame header's length says more than the frame holds.
    FrameLength,
    /// The first PDU's index is changed: the reply matches no frame the master sent.
    Index,
}

impl Garble {
    /// Applies the fault to `reply`, an Ethernet frame holding an EtherCAT frame.
    fn apply(self, reply: &mut [u8]) {
        if reply.len() < 16 + 12 {
            return;
        }
        match self {
            Garble::PduLength => {
                let flags = u16::from_le_bytes([reply[22], reply[23]]);
                reply[22..24].copy_from_slice(&((flags & !0x07FF) | 0x07FF).to_le_bytes());
            }
            Garble::FrameLength => {
                let header = u16::from_le_bytes([reply[14], reply[15]]);
                reply[14..16].copy_from_slice(&((header & !0x07FF) | 0x07FF).to_le_bytes());
            }
            Garble::Index => reply[17] ^= 0x80,
        }
    }
}

/// A simulated EtherCAT segment: a line of drives.
pub struct SimNetwork {
    devices: Vec<Device>,
    cfg: SimConfig,
    rng: ChaCha8Rng,
    start: Instant,
    now_ns: u64,
    op_epoch_ns: Option<u64>,
    reachable: usize,
    /// Drives the cable reaches: a cut in front of drive `cable_reach` (`len()`: none).
    cable_reach: usize,
    /// Per drive: simulated time at which its power returns, while it is off.
    off_until: Vec<Option<u64>>,
    /// Per drive: another drive put in its place, powered up at its next power-up.
    swapped: Vec<Option<Box<DriveParams>>>,
    fired: Vec<bool>,
    power_fired: Vec<bool>,
    stats: WireStats,
    /// Where each process-data frame reached the first drive within its SYNC0 period.
    sync_phases: Vec<u32>,
    /// Process-data replies still to garble, and how (`garble_replies`).
    garble_next: (u32, Garble),
    /// Replies to other frames (no logical command) still to garble (`garble_other_replies`).
    garble_other: (u32, Garble),
    /// The plant that moves every drive's shaft, when not their own motor models
    /// ([`SimNetwork::set_plant`]).
    plant: Option<Box<dyn ChainPlant>>,
    /// When the plant was last stepped (simulated time).
    plant_stepped_ns: Option<u64>,
    /// Each drive's command to the plant for the frame being processed.
    shaft_commands: Vec<ShaftCommand>,
}

/// Process-data frames whose SYNC0 phase is kept (about 17 minutes at 1 ms).
const MAX_SYNC_PHASES: usize = 1 << 20;

impl SimNetwork {
    /// Build the chain described by `cfg` (validated here).
    pub fn new(cfg: SimConfig) -> Result<Self, EcsimError> {
        cfg.validate()?;
        let devices = (0..cfg.drives)
            .map(|i| Device::new(&cfg.drive, i, &cfg.refuse_transition))
            .collect();
        let mut net = SimNetwork {
            devices,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            start: Instant::now(),
            now_ns: 0,
            op_epoch_ns: None,
            reachable: cfg.drives,
            cable_reach: cfg.drives,
            off_until: vec![None; cfg.drives],
            swapped: vec![None; cfg.drives],
            fired: vec![false; cfg.drive_fault.len()],
            power_fired: vec![false; cfg.power_cycle.len()],
            stats: WireStats::default(),
            sync_phases: Vec::new(),
            garble_next: (0, Garble::PduLength),
            garble_other: (0, Garble::PduLength),
            plant: None,
            plant_stepped_ns: None,
            shaft_commands: vec![ShaftCommand::Off; cfg.drives],
            cfg,
        };
        for d in &mut net.devices {
            d.esc.set_drift_ppm(net.cfg.dc_drift_ppm);
        }
        net.update_reach();
        Ok(net)
    }

    /// Every drive's shaft is moved by `plant` from now on (one model of the whole arm:
    /// coupled inertia, gravity, torque limits), stepped once per process-data frame over
    /// the time since the previous one, after every drive has taken its outputs. The
    /// drives' positions start where the plant's shafts are. Refused unless it moves
    /// exactly one shaft per drive.
    pub fn set_plant(&mut self, plant: Box<dyn ChainPlant>) -> Result<(), EcsimError> {
        if plant.shafts() != self.devices.len() {
            return Err(EcsimError::ConfigValue(format!(
                "the plant ({}) moves {} joint(s), the chain has {} drive(s): give one drive \
                 per joint (--drives {})",
                plant.describe(),
                plant.shafts(),
                self.devices.len(),
                plant.shafts()
            )));
        }
        for (i, d) in self.devices.iter_mut().enumerate() {
            d.attach_shaft(plant.shaft(i));
        }
        self.plant = Some(plant);
        self.plant_stepped_ns = None;
        Ok(())
    }

    /// The plant behind the drives, if one was set.
    pub fn plant(&self) -> Option<&dyn ChainPlant> {
        self.plant.as_deref()
    }

    /// Steps the plant (if there is one) to now with every drive's command, and ends each
    /// drive's cycle on its shaft's measurement. A drive without power asks for nothing.
    fn step_plant(&mut self) {
        let Some(plant) = self.plant.as_mut() else {
            return;
        };
        let dt_ns = self
            .plant_stepped_ns
            .map_or(0, |t| self.now_ns.saturating_sub(t));
        self.plant_stepped_ns = Some(self.now_ns);
        let drives = self.devices.iter().zip(&self.off_until);
        for (c, (d, off)) in self.shaft_commands.iter_mut().zip(drives) {
            *c = match off {
                Some(_) => ShaftCommand::Off,
                None => d.drive().shaft_command(),
            };
        }
        plant.step(dt_ns, &self.shaft_commands);
        for (i, d) in self.devices.iter_mut().enumerate() {
            d.finish_cycle(plant.shaft(i));
        }
    }

    /// Number of drives (reachable or not).
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Always false: a network has at least one drive.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// Drive `i` (0-based chain position).
    pub fn device(&self, i: usize) -> Option<&Device> {
        self.devices.get(i)
    }

    /// Mutable drive `i`, for tests that poke at a drive directly.
    pub fn device_mut(&mut self, i: usize) -> Option<&mut Device> {
        self.devices.get_mut(i)
    }

    /// Simulated time in ns.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Simulated time when the first drive entered OP.
    pub fn op_epoch_ns(&self) -> Option<u64> {
        self.op_epoch_ns
    }

    /// Wire counters.
    pub fn stats(&self) -> WireStats {
        self.stats
    }

    /// Drives the master can currently reach.
    pub fn reachable(&self) -> usize {
        self.reachable
    }

    /// For every process-data frame that reached the first drive with SYNC0 running:
    /// how far into the SYNC0 period it arrived, ns, by that drive's own clock (the
    /// reference clock). Independent of the master's view of it.
    pub fn sync_phases_ns(&self) -> &[u32] {
        &self.sync_phases
    }

    /// Put drive `i` into fault now (takes effect on its next cycle). Returns false if there is
    /// no such drive.
    pub fn inject_drive_fault(&mut self, i: usize, code: u16) -> bool {
        match self.devices.get_mut(i) {
            Some(d) => {
                d.objs.drive.raise_fault(code);
                true
            }
            None => false,
        }
    }

    /// Sets drive `i`'s digital inputs (0x60FD: a switch pressed or released); its
    /// next process-data frame carries them. Returns false if there is no such drive.
    pub fn set_digital_inputs(&mut self, i: usize, bits: u32) -> bool {
        match self.devices.get_mut(i) {
            Some(d) => {
                d.objs.drive.digital_inputs = bits;
                true
            }
            None => false,
        }
    }

    /// The replies to the next `n` process-data frames (those with a logical command)
    /// come back malformed as `how` says; other frames are untouched. The drives process
    /// those frames as usual: their outputs are taken, their inputs written.
    pub fn garble_replies(&mut self, n: u32, how: Garble) {
        self.garble_next = (n, how);
    }

    /// The replies to the next `n` frames without a logical command (register and
    /// mailbox accesses, AL state changes: bring-up, rejoin, shutdown) come back
    /// malformed as `how` says; process-data frames are untouched. The drives process
    /// those frames as usual.
    pub fn garble_other_replies(&mut self, n: u32, how: Garble) {
        self.garble_other = (n, how);
    }

    /// The master is silent for `ns`: simulated time passes with no frame on the wire (the
    /// virtual clock only moves with frames; with the wall clock, time passes anyway).
    pub fn silence(&mut self, ns: u64) {
        if self.cfg.clock == ClockMode::Virtual {
            self.now_ns += ns;
        }
    }

    /// Cut the cable in front of drive `before` (it and all behind it disappear);
    /// `before >= len()` restores the full chain.
    pub fn cut_link(&mut self, before: usize) {
        self.cable_reach = before.min(self.devices.len());
        self.update_reach();
    }

    /// Drive `i` loses power now and gets it back `off_ns` of simulated time later (at the
    /// first frame from then on). Returns false if there is no such drive.
    ///
    /// In a line each device forwards the frame to the next one, so a powered-off device
    /// breaks the line where it stands: the device in front of it loses the link on its port
    /// 1 and closes that port (the frame turns back there), and every device behind it is cut
    /// off, still powered, as by [`SimNetwork::cut_link`] in front of `i` (their SM watchdogs
    /// expire: SAFE-OP + error 0x001B, configuration kept). For the last device that simply
    /// means it does not answer.
    ///
    /// When power returns, the link comes up again and the drive starts as at power-on (see
    /// [`Device::restart_after_power_loss`]): INIT, station address 0, no SM, FMMU or DC
    /// configuration, the object dictionary at its power-up values, the motor where it stood.
    /// A real ESC needs tens of ms to boot and load its SII, and its PHY up to a few hundred
    /// ms to bring the link up: `off_ns` stands for all of it. A drive already off stays off
    /// until the later of the two ends (one outage in [`WireStats::power_cycles`]).
    pub fn power_cycle(&mut self, i: usize, off_ns: u64) -> bool {
        let Some(slot) = self.off_until.get_mut(i) else {
            return false;
        };
        let until = self.now_ns.saturating_add(off_ns);
        match slot {
            Some(t) => *t = (*t).max(until),
            None => {
                *slot = Some(until);
                self.stats.power_cycles += 1;
            }
        }
        self.update_reach();
        true
    }

    /// Another drive, described by `params`, takes bus position `i` while it is off: when
    /// power returns (see [`SimNetwork::power_cycle`]) that one starts there, with its own
    /// SII (identity, mailbox, PDOs) and object dictionary, as when someone swaps a drive
    /// during an outage. Returns false if there is no such position.
    pub fn swap_drive(&mut self, i: usize, params: DriveParams) -> bool {
        match self.swapped.get_mut(i) {
            Some(slot) => {
                *slot = Some(Box::new(params));
                true
            }
            None => false,
        }
    }

    /// Whether drive `i` has power (false while a power cycle holds it off, or no such drive).
    pub fn powered(&self, i: usize) -> bool {
        self.off_until.get(i).is_some_and(|t| t.is_none())
    }

    /// Drives whose outage is over get their power back (before the frame that finds them
    /// on again).
    fn restore_power(&mut self) {
        let mut changed = false;
        let devices = self.devices.iter_mut().zip(self.off_until.iter_mut());
        for (i, (d, off)) in devices.enumerate() {
            if off.is_some_and(|t| self.now_ns >= t) {
                *off = None;
                match self.swapped[i].take() {
                    Some(p) => *d = Device::new(&p, i, &self.cfg.refuse_transition),
                    None => d.restart_after_power_loss(&self.cfg.drive, i, self.now_ns),
                }
                if let Some(plant) = &self.plant {
                    // The shaft did not go anywhere: the new drive reads it where it is.
                    d.attach_shaft(plant.shaft(i));
                }
                d.esc.set_drift_ppm(self.cfg.dc_drift_ppm);
                changed = true;
            }
        }
        if changed {
            self.update_reach();
        }
    }

    /// The frame reaches the drives in front of the first cut cable or unpowered drive.
    fn update_reach(&mut self) {
        let off = self.off_until.iter().position(Option::is_some);
        let n = off.map_or(self.cable_reach, |i| i.min(self.cable_reach));
        self.reachable = n;
        for (i, d) in self.devices.iter_mut().enumerate() {
            d.esc.port1_link = i + 1 < n;
        }
    }

    fn advance_clock(&mut self, has_process_data: bool) {
        self.now_ns = match self.cfg.clock {
            ClockMode::Wall => (self.start.elapsed().as_nanos() as u64).max(self.now_ns),
            ClockMode::Virtual => {
                let step = if has_process_data {
                    self.devices
                        .first()
                        .and_then(|d| d.esc.sync0_cycle_ns())
                        .map_or(self.cfg.cycle_us * 1000, u64::from)
                } else {
                    NON_PD_FRAME_NS
                };
                self.now_ns + step
            }
        };
    }

    fn apply_timed_faults(&mut self) {
        let Some(epoch) = self.op_epoch_ns else {
            return;
        };
        let t = self.now_ns.saturating_sub(epoch) as f64 * 1e-9;
        for (k, f) in self.cfg.drive_fault.iter().enumerate() {
            if !self.fired[k] && t >= f.at_s {
                self.fired[k] = true;
                if let Some(d) = self.devices.get_mut(f.drive) {
                    d.objs.drive.raise_fault(f.code);
                }
            }
        }
        if !self.cfg.link_cut.is_empty() {
            let mut reach = self.devices.len();
            for c in &self.cfg.link_cut {
                if t >= c.at_s && c.restore_s.is_none_or(|r| t < r) {
                    reach = reach.min(c.before_drive);
                }
            }
            if reach != self.cable_reach {
                self.cable_reach = reach;
                self.update_reach();
            }
        }
        let due = |net: &Self| {
            (0..net.power_fired.len())
                .find(|&k| !net.power_fired[k] && t >= net.cfg.power_cycle[k].at_s)
        };
        while let Some(k) = due(self) {
            self.power_fired[k] = true;
            let c = &self.cfg.power_cycle[k];
            let (drive, off_ns) = (c.drive, c.off_ms.saturating_mul(1_000_000));
            self.power_cycle(drive, off_ns);
        }
    }

    /// Pass one Ethernet frame along the chain. The reply (if any) is written to `reply`.
    pub fn process_frame(&mut self, frame: &[u8], reply: &mut Vec<u8>) -> FrameOutcome {
        if frame.len() < 16
            || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_ECAT
            || frame[6] & 0x02 != 0
        {
            // Not EtherCAT, or a frame a device already processed (our own reply).
            self.stats.ignored += 1;
            return FrameOutcome::NoReply;
        }
        self.stats.frames += 1;
        let header = u16::from_le_bytes([frame[14], frame[15]]);
        let end = (16 + usize::from(header & 0x07FF)).min(frame.len());
        let dlpdu = header >> 12 == 1;
        let process_data = dlpdu && has_logical(&frame[16..end]);
        self.advance_clock(process_data);
        self.apply_timed_faults();
        self.restore_power();

        reply.clear();
        reply.extend_from_slice(frame);
        reply[6] |= 0x02; // the first ESC sets the U/L bit of the source address

        let faults = self.draw_frame_faults();
        let (processed, lost) = self.lose_frame(faults);
        let chain = ChainPass {
            end,
            dlpdu,
            process_data,
            processed,
        };
        self.pass_along(reply, chain);
        if process_data {
            self.step_plant();
        }
        if self.op_epoch_ns.is_none() && self.devices.iter().any(|d| d.al_state() == al::OP) {
            self.op_epoch_ns = Some(self.now_ns);
        }
        if lost || self.reachable == 0 {
            return FrameOutcome::NoReply;
        }
        self.garble_reply(reply, process_data, faults.on);
        self.stats.replies += 1;
        if faults.delay {
            self.stats.delayed += 1;
            return FrameOutcome::Reply {
                delay_ns: self.cfg.frames.delay_us * 1000,
            };
        }
        FrameOutcome::Reply { delay_ns: 0 }
    }

    /// Whether frame faults are on yet, and this frame's draws: dropped, corrupted,
    /// delayed (in that order, so the seeded sequence is the same run after run).
    fn draw_frame_faults(&mut self) -> FrameDraw {
        let on = self.cfg.frames.from_start
            || self.op_epoch_ns.is_some_and(|e| {
                self.now_ns.saturating_sub(e) as f64 * 1e-9 >= self.cfg.frames.start_s
            });
        let f = self.cfg.frames;
        let (drop, corrupt, delay) = if on {
            (
                self.rng.random_bool(f.drop),
                self.rng.random_bool(f.corrupt),
                self.rng.random_bool(f.delay),
            )
        } else {
            (false, false, false)
        };
        FrameDraw {
            on,
            drop,
            corrupt,
            delay,
        }
    }

    /// A dropped or corrupted frame: how many devices still process it, and whether it
    /// is lost (no reply reaches the master). A corrupted frame counts CRC errors at the
    /// device where it broke and on the ports behind it.
    fn lose_frame(&mut self, faults: FrameDraw) -> (usize, bool) {
        let mut processed = self.reachable;
        let mut lost = false;
        if faults.drop {
            self.stats.dropped += 1;
            lost = true;
            if self.rng.random_bool(0.5) {
                processed = 0; // lost on the way out
            }
        } else if faults.corrupt {
            self.stats.corrupted += 1;
            lost = true;
            processed = self.rng.random_range(0..=self.reachable);
            for (i, d) in self.devices.iter_mut().enumerate().take(self.reachable) {
                if i >= processed {
                    d.esc.count_crc_error(0);
                } else if d.esc.port1_link {
                    d.esc.count_crc_error(1);
                }
            }
        }
        (processed, lost)
    }

    /// The frame through the powered devices: their watchdogs, the PDUs of the first
    /// `processed` devices (and the SYNC0 phase of a process-data frame), then each
    /// device's after-frame work.
    fn pass_along(&mut self, reply: &mut [u8], chain: ChainPass) {
        // Watchdogs that expired during the gap before this frame fire before it is
        // processed (see `Device::check_watchdog`). A drive without power does nothing.
        for (d, off) in self.devices.iter_mut().zip(&self.off_until) {
            if off.is_none() {
                d.check_watchdog(self.now_ns);
            }
        }
        if chain.dlpdu && self.reachable > 0 {
            self.run_chain(reply, chain.end, chain.processed);
            if chain.processed > 0 && chain.process_data {
                let phase = self.devices[0].esc.sync0_phase_ns(self.now_ns);
                if let Some(p) = phase.filter(|_| self.sync_phases.len() < MAX_SYNC_PHASES) {
                    self.sync_phases.push(p as u32);
                }
            }
        }
        for (d, off) in self.devices.iter_mut().zip(&self.off_until) {
            if off.is_none() {
                d.after_frame(self.now_ns);
            }
        }
    }

    /// A garbled reply: a process-data reply when one is asked for (`garble_next`) or
    /// drawn, another reply when `garble_other` asks.
    fn garble_reply(&mut self, reply: &mut [u8], process_data: bool, faults_on: bool) {
        let f = self.cfg.frames;
        if process_data {
            let garble = if self.garble_next.0 > 0 {
                self.garble_next.0 -= 1;
                Some(self.garble_next.1)
            } else {
                // Drawn only when asked for: the other faults' seeded sequence is unchanged.
                (faults_on && f.garble > 0.0 && self.rng.random_bool(f.garble))
                    .then_some(Garble::PduLength)
            };
            if let Some(how) = garble {
                how.apply(reply);
                self.stats.garbled += 1;
            }
        } else if self.garble_other.0 > 0 {
            self.garble_other.0 -= 1;
            self.garble_other.1.apply(reply);
            self.stats.garbled += 1;
        }
    }

    /// Let devices `0..count` process every PDU of the frame in turn, as the frame streams
    /// through each of them.
    fn run_chain(&mut self, buf: &mut [u8], end: usize, count: usize) {
        let last = self.reachable.saturating_sub(1) as u64;
        for (i, dev) in self.devices.iter_mut().enumerate().take(count) {
            let pos = i as u64;
            let hop = Hop {
                arrival_ns: self.now_ns + pos * HOP_NS,
                return_ns: dev
                    .esc
                    .port1_link
                    .then(|| self.now_ns + (2 * last - pos) * HOP_NS + HOP_NS / 2),
            };
            let mut o = 16usize;
            while o + 12 <= end {
                let command = buf[o];
                let flags = u16::from_le_bytes([buf[o + 6], buf[o + 7]]);
                let dlen = usize::from(flags & 0x07FF);
                let data_end = o + 10 + dlen;
                if data_end + 2 > end {
                    break; // truncated PDU: the ESC stops processing
                }
                let mut addr = [buf[o + 2], buf[o + 3], buf[o + 4], buf[o + 5]];
                let mut wkc = u16::from_le_bytes([buf[data_end], buf[data_end + 1]]);
                dev.esc.handle_pdu(
                    command,
                    &mut addr,
                    &mut buf[o + 10..data_end],
                    &mut wkc,
                    &hop,
                );
                buf[o + 2..o + 6].copy_from_slice(&addr);
                buf[data_end..data_end + 2].copy_from_slice(&wkc.to_le_bytes());
                o = data_end + 2;
                if flags & 0x8000 == 0 {
                    break;
                }
            }
        }
    }
}

/// One frame's fault draws (`SimNetwork::draw_frame_faults`).
#[derive(Clone, Copy)]
struct FrameDraw {
    /// Frame faults have begun (`frames.from_start` or `frames.start_s` after OP).
    on: bool,
    drop: bool,
    corrupt: bool,
    delay: bool,
}

/// How a frame passes the chain (`SimNetwork::pass_along`): where its PDUs end, whether
/// it is a DLPDU and carries process data, and how many devices process it.
#[derive(Clone, Copy)]
struct ChainPass {
    end: usize,
    dlpdu: bool,
    process_data: bool,
    processed: usize,
}

/// Whether the PDUs in `payload` include a logical command (process data).
fn has_logical(payload: &[u8]) -> bool {
    let mut o = 0usize;
    while o + 12 <= payload.len() {
        if matches!(payload[o], cmd::LRD | cmd::LWR | cmd::LRW) {
            return true;
        }
        let flags = u16::from_le_bytes([payload[o + 6], payload[o + 7]]);
        o += 12 + usize::from(flags & 0x07FF);
        if flags & 0x8000 == 0 {
            break;
        }
    }
    false
}

/// Build an EtherCAT frame from `(command, address, data)` PDUs, as a master sends it.
#[doc(hidden)]
pub fn build_frame(pdus: &[(u8, [u8; 4], &[u8])]) -> Vec<u8> {
    let mut f = vec![0xFF; 6];
    f.extend_from_slice(&[0x10; 6]);
    f.extend_from_slice(&ETHERTYPE_ECAT.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    for (k, (command, addr, data)) in pdus.iter().enumerate() {
        let more = if k + 1 < pdus.len() { 0x8000u16 } else { 0 };
        f.extend_from_slice(&[*command, k as u8]);
        f.extend_from_slice(addr);
        f.extend_from_slice(&(data.len() as u16 & 0x07FF | more).to_le_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(data);
        f.extend_from_slice(&[0, 0]);
    }
    let len = (f.len() - 16) as u16;
    f[14..16].copy_from_slice(&(len | 0x1000).to_le_bytes());
    f
}

/// Decode the PDUs of a reply into `(data, wkc)` pairs.
#[doc(hidden)]
pub fn parse_reply(f: &[u8]) -> Vec<(Vec<u8>, u16)> {
    let mut out = Vec::new();
    let mut o = 16usize;
    while o + 12 <= f.len() {
        let flags = u16::from_le_bytes([f[o + 6], f[o + 7]]);
        let n = usize::from(flags & 0x07FF);
        if o + 12 + n > f.len() {
            break;
        }
        let wkc = u16::from_le_bytes([f[o + 10 + n], f[o + 11 + n]]);
        out.push((f[o + 10..o + 10 + n].to_vec(), wkc));
        o += 12 + n;
        if flags & 0x8000 == 0 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(n: usize) -> SimNetwork {
        SimNetwork::new(SimConfig::virtual_chain(n)).unwrap()
    }

    fn exchange(net: &mut SimNetwork, pdus: &[(u8, [u8; 4], &[u8])]) -> Vec<(Vec<u8>, u16)> {
        let mut reply = Vec::new();
        let out = net.process_frame(&build_frame(pdus), &mut reply);
        assert_eq!(out, FrameOutcome::Reply { delay_ns: 0 });
        assert_eq!(reply[6] & 0x02, 0x02, "U/L bit set on the reply");
        parse_reply(&reply)
    }

    fn fp(station: u16, reg: u16) -> [u8; 4] {
        let (a, r) = (station.to_le_bytes(), reg.to_le_bytes());
        [a[0], a[1], r[0], r[1]]
    }

    #[test]
    fn broadcast_and_auto_increment_addressing_in_one_frame() {
        let mut n = net(3);
        let r = exchange(
            &mut n,
            &[
                (cmd::BRD, [0, 0, 0, 0], &[0]),
                (cmd::APWR, fp(0, 0x10), &[0x00, 0x10]),
                (cmd::APWR, fp(0xFFFF, 0x10), &[0x01, 0x10]),
                (cmd::APWR, fp(0xFFFE, 0x10), &[0x02, 0x10]),
                (cmd::FPRD, fp(0x1002, 0x10), &[0, 0]),
            ],
        );
        assert_eq!(r[0], (vec![0x11], 3), "BRD counted by every device");
        assert_eq!((r[1].1, r[2].1, r[3].1), (1, 1, 1));
        assert_eq!(
            r[4],
            (vec![0x02, 0x10], 1),
            "FPRD to the last device in the same frame"
        );
    }

    #[test]
    fn dc_latch_and_frmw_working_counters() {
        let mut n = net(3);
        exchange(
            &mut n,
            &[
                (cmd::APWR, fp(0, 0x10), &[0x00, 0x10]),
                (cmd::APWR, fp(0xFFFF, 0x10), &[0x01, 0x10]),
                (cmd::APWR, fp(0xFFFE, 0x10), &[0x02, 0x10]),
            ],
        );
        let r = exchange(&mut n, &[(cmd::BWR, fp(0, 0x0900), &[0; 4])]);
        assert_eq!(r[0].1, 3);
        let r = exchange(&mut n, &[(cmd::FPRD, fp(0x1000, 0x0900), &[0; 16])]);
        let p0 = u32::from_le_bytes(r[0].0[0..4].try_into().unwrap());
        let p1 = u32::from_le_bytes(r[0].0[4..8].try_into().unwrap());
        assert_eq!(
            p1.wrapping_sub(p0),
            4 * HOP_NS as u32 + HOP_NS as u32 / 2,
            "loop time to the end and back"
        );
        let r = exchange(&mut n, &[(cmd::FPRD, fp(0x1002, 0x0110), &[0; 2])]);
        assert_eq!(r[0].0[0] & 0x20, 0, "last device: no link on port 1");
        let r = exchange(&mut n, &[(cmd::FRMW, fp(0x1000, 0x0910), &[0; 8])]);
        assert_eq!(r[0].1, 3, "reference reads, the two others write");
        assert_ne!(r[0].0, vec![0; 8], "system time read");
    }

    #[test]
    fn non_ethercat_and_own_frames_are_ignored() {
        let mut n = net(2);
        let mut reply = Vec::new();
        let mut f = build_frame(&[(cmd::BRD, [0; 4], &[0])]);
        f[12] = 0x08;
        assert_eq!(n.process_frame(&f, &mut reply), FrameOutcome::NoReply);
        let mut f = build_frame(&[(cmd::BRD, [0; 4], &[0])]);
        f[6] |= 0x02;
        assert_eq!(n.process_frame(&f, &mut reply), FrameOutcome::NoReply);
        assert_eq!(n.stats().ignored, 2);
    }

    #[test]
    fn mailbox_needs_configured_sync_managers_and_pre_op() {
        let mut n = net(1);
        exchange(&mut n, &[(cmd::APWR, fp(0, 0x10), &[0x00, 0x10])]);
        // SM0/SM1 as the SII declares them, then PRE-OP.
        let sm = [
            0x00, 0x10, 0x80, 0x00, 0x26, 0x00, 0x01, 0x00, 0x80, 0x10, 0x80, 0x00, 0x22, 0x00,
            0x01, 0x00,
        ];
        exchange(&mut n, &[(cmd::FPWR, fp(0x1000, 0x0800), &sm)]);
        // In INIT the mailbox is closed: the write does not count.
        let r = exchange(&mut n, &[(cmd::FPWR, fp(0x1000, 0x1000), &[0; 128])]);
        assert_eq!(r[0].1, 0);
        exchange(&mut n, &[(cmd::FPWR, fp(0x1000, 0x0120), &[0x02, 0x00])]);
        let r = exchange(&mut n, &[(cmd::FPRD, fp(0x1000, 0x0130), &[0, 0])]);
        assert_eq!(r[0].0, vec![0x02, 0x00], "PRE-OP");
        // SDO upload 0x1018:02 (product code).
        let mut req = [0u8; 128];
        req[..16].copy_from_slice(&[
            10, 0, 0, 0, 0, 0x13, 0, 0x20, 0x40, 0x18, 0x10, 0x02, 0, 0, 0, 0,
        ]);
        let r = exchange(&mut n, &[(cmd::FPWR, fp(0x1000, 0x1000), &req)]);
        assert_eq!(r[0].1, 1);
        let r = exchange(&mut n, &[(cmd::FPRD, fp(0x1000, 0x080D), &[0])]);
        assert_eq!(r[0].0[0] & 0x08, 0x08, "reply waiting in SM1");
        let r = exchange(&mut n, &[(cmd::FPRD, fp(0x1000, 0x1080), &[0; 128])]);
        assert_eq!(r[0].1, 1);
        let code = u32::from_le_bytes(r[0].0[12..16].try_into().unwrap());
        assert_eq!(code, DriveParamsDefault::product_code());
        // The mailbox is now empty: reading again does not count.
        let r = exchange(&mut n, &[(cmd::FPRD, fp(0x1000, 0x1080), &[0; 128])]);
        assert_eq!(r[0].1, 0);
    }

    #[test]
    fn sync_managers_at_the_end_of_memory_do_not_panic() {
        let mut n = net(1);
        exchange(&mut n, &[(cmd::APWR, fp(0, 0x10), &[0x00, 0x10])]);
        let sm = [
            0x00, 0x10, 0x80, 0x00, 0x26, 0x00, 0x01, 0x00, 0x80, 0x10, 0x80, 0x00, 0x22, 0x00,
            0x01, 0x00,
        ];
        exchange(&mut n, &[(cmd::FPWR, fp(0x1000, 0x0800), &sm)]);
        exchange(&mut n, &[(cmd::FPWR, fp(0x1000, 0x0120), &[0x02, 0x00])]);
        // Move the mailboxes to the end of the ESC memory (SM0 straddles it), then fill SM0.
        let sm = [
            0xF0, 0x1F, 0x80, 0x00, 0x26, 0x00, 0x01, 0x00, 0xC0, 0x1F, 0x30, 0x00, 0x22, 0x00,
            0x01, 0x00,
        ];
        exchange(&mut n, &[(cmd::FPWR, fp(0x1000, 0x0800), &sm)]);
        let mut req = [0u8; 128];
        req[..16].copy_from_slice(&[
            10, 0, 0, 0, 0, 0x13, 0, 0x20, 0x40, 0x18, 0x10, 0x02, 0, 0, 0, 0,
        ]);
        let r = exchange(&mut n, &[(cmd::FPWR, fp(0x1000, 0x1FF0), &req)]);
        assert_eq!(r[0].1, 1);
        let r = exchange(&mut n, &[(cmd::FPRD, fp(0x1000, 0x1FC0), &[0; 0x30])]);
        assert_eq!(
            (r[0].1, r[0].0[8]),
            (1, 0x43),
            "the SDO reply arrived in SM1"
        );
    }

    #[test]
    fn garbled_replies_are_process_data_replies_only_and_as_many_as_asked() {
        let mut n = net(2);
        n.garble_replies(1, Garble::PduLength);
        let mut reply = Vec::new();
        // A register read is not process data: untouched.
        n.process_frame(&build_frame(&[(cmd::BRD, [0; 4], &[0])]), &mut reply);
        assert_eq!(u16::from_le_bytes([reply[22], reply[23]]) & 0x07FF, 1);
        let lrw = build_frame(&[(cmd::LRW, [0; 4], &[0; 8]), (cmd::BRD, [0; 4], &[0])]);
        n.process_frame(&lrw, &mut reply);
        let flags = u16::from_le_bytes([reply[22], reply[23]]);
        assert_eq!(
            flags,
            0x8000 | 0x07FF,
            "length past the frame, more-follows kept"
        );
        n.process_frame(&lrw, &mut reply);
        assert_eq!(parse_reply(&reply).len(), 2, "the next reply is whole");
        n.garble_replies(1, Garble::FrameLength);
        n.process_frame(&lrw, &mut reply);
        assert_eq!(u16::from_le_bytes([reply[14], reply[15]]), 0x1000 | 0x07FF);
        n.garble_replies(1, Garble::Index);
        n.process_frame(&lrw, &mut reply);
        assert_eq!(reply[17], 0x80, "first PDU index 0 -> 0x80");
        assert_eq!(n.stats().garbled, 3);
    }

    struct DriveParamsDefault;
    impl DriveParamsDefault {
        fn product_code() -> u32 {
            crate::config::DriveParams::default().product_code
        }
    }
}
