//! A drive that loses power and comes back, seen at the register level: raw frames built by
//! hand, as a master sends them, with no master library in between.

use chunkrt_ecsim::config::PowerCycle;
use chunkrt_ecsim::esc::cmd;
use chunkrt_ecsim::network::{build_frame, parse_reply};
use chunkrt_ecsim::sii::{
    INPUTS_ADDR, MBX_IN_ADDR, MBX_LEN, MBX_OUT_ADDR, OUTPUTS_ADDR, SM_CONTROL,
};
use chunkrt_ecsim::{FrameOutcome, SimConfig, SimNetwork};

/// Bytes of process data per drive in the logical image: outputs, then inputs.
const SLOT: usize = 32;
/// Power-up mapping sizes of the default drive (0x1600: 6 bytes, 0x1A00: 14 bytes).
const RX_BYTES: usize = 6;
const TX_BYTES: usize = 14;

type Pdus = Vec<(Vec<u8>, u16)>;

/// Address field of a configured-address (or broadcast) PDU.
fn fp(station: u16, reg: u16) -> [u8; 4] {
    let (a, r) = (station.to_le_bytes(), reg.to_le_bytes());
    [a[0], a[1], r[0], r[1]]
}

/// Address field of an auto-increment PDU for bus position `pos`.
fn ap(pos: u16, reg: u16) -> [u8; 4] {
    fp(0u16.wrapping_sub(pos), reg)
}

fn station(i: usize) -> u16 {
    0x1000 + i as u16
}

/// The master's end of the wire.
struct Master {
    net: SimNetwork,
    reply: Vec<u8>,
    /// The logical image sent with every LRW.
    image: Vec<u8>,
}

impl Master {
    fn new(cfg: SimConfig) -> Self {
        let n = cfg.drives;
        Master {
            net: SimNetwork::new(cfg).unwrap(),
            reply: Vec::new(),
            image: vec![0; SLOT * n],
        }
    }

    /// One frame; None when nothing came back.
    fn x(&mut self, pdus: &[(u8, [u8; 4], &[u8])]) -> Option<Pdus> {
        match self.net.process_frame(&build_frame(pdus), &mut self.reply) {
            FrameOutcome::Reply { .. } => Some(parse_reply(&self.reply)),
            FrameOutcome::NoReply => None,
        }
    }

    /// One PDU in a frame of its own: (data, wkc); wkc 0 when nothing came back.
    fn one(&mut self, command: u8, addr: [u8; 4], data: &[u8]) -> (Vec<u8>, u16) {
        self.x(&[(command, addr, data)])
            .map_or((data.to_vec(), 0), |mut r| r.remove(0))
    }

    fn fprd(&mut self, st: u16, reg: u16, len: usize) -> (Vec<u8>, u16) {
        self.one(cmd::FPRD, fp(st, reg), &vec![0; len])
    }

    fn fprd16(&mut self, st: u16, reg: u16) -> Option<u16> {
        let (d, wkc) = self.fprd(st, reg, 2);
        (wkc == 1).then(|| u16::from_le_bytes([d[0], d[1]]))
    }

    fn fpwr(&mut self, st: u16, reg: u16, data: &[u8]) {
        assert_eq!(
            self.one(cmd::FPWR, fp(st, reg), data).1,
            1,
            "FPWR {st:#06x} {reg:#06x}"
        );
    }

    /// One process-data cycle: the whole image in one LRW. Returns its working counter (None:
    /// no reply at all).
    fn lrw(&mut self) -> Option<u16> {
        let image = self.image.clone();
        let r = self.x(&[(cmd::LRW, [0, 0, 0, 0], &image)])?;
        Some(r[0].1)
    }

    /// AL control request, then AL status must show `state`.
    fn request(&mut self, st: u16, state: u16) {
        self.fpwr(st, 0x0120, &state.to_le_bytes());
        assert_eq!(
            self.fprd16(st, 0x0130),
            Some(state),
            "{st:#06x} -> {state:#x}"
        );
    }

    /// One SDO transfer through the mailbox (expedited): returns the reply's CoE command byte,
    /// its 4 data bytes and its mailbox counter.
    fn sdo(&mut self, st: u16, command: u8, index: u16, sub: u8, data: u32) -> (u8, u32, u8) {
        let mut req = vec![0u8; usize::from(MBX_LEN)];
        req[0] = 10; // length
        req[5] = 0x03 | (1 << 4); // CoE, counter 1
        req[6..8].copy_from_slice(&(2u16 << 12).to_le_bytes()); // SDO request
        req[8] = command;
        req[9..11].copy_from_slice(&index.to_le_bytes());
        req[11] = sub;
        req[12..16].copy_from_slice(&data.to_le_bytes());
        self.fpwr(st, MBX_OUT_ADDR, &req);
        let (resp, wkc) = self.fprd(st, MBX_IN_ADDR, usize::from(MBX_LEN));
        assert_eq!(wkc, 1, "a reply in the input mailbox");
        let value = u32::from_le_bytes([resp[12], resp[13], resp[14], resp[15]]);
        (resp[8], value, resp[5] >> 4)
    }

    fn sdo_read(&mut self, st: u16, index: u16, sub: u8) -> u32 {
        let (command, value, _) = self.sdo(st, 0x40, index, sub, 0);
        assert_eq!(
            command & 0xE3,
            0x43,
            "expedited upload of {index:#06x}:{sub}"
        );
        value
    }

    fn sdo_write(&mut self, st: u16, index: u16, sub: u8, bytes: u8, value: u32) {
        let command = 0x23 | ((4 - bytes) << 2);
        assert_eq!(self.sdo(st, command, index, sub, value).0, 0x60, "download");
    }

    /// Mailbox sync managers as the SII declares them (what a master writes before PRE-OP).
    fn mailbox_sms(&mut self, st: u16) {
        let mut sms = Vec::new();
        for (k, addr) in [MBX_OUT_ADDR, MBX_IN_ADDR].into_iter().enumerate() {
            sms.extend_from_slice(&addr.to_le_bytes());
            sms.extend_from_slice(&MBX_LEN.to_le_bytes());
            sms.extend_from_slice(&[SM_CONTROL[k], 0, 1, 0]);
        }
        self.fpwr(st, 0x0800, &sms);
    }

    /// Drive `i` from INIT (station address already set) to OP with outputs of `rx` bytes.
    fn bring_up(&mut self, i: usize, rx: usize) {
        let st = station(i);
        self.mailbox_sms(st);
        self.request(st, 2);
        self.sdo_write(st, 0x6060, 0, 1, 8);
        let mut sms = Vec::new();
        for (k, (addr, len)) in [(OUTPUTS_ADDR, rx), (INPUTS_ADDR, TX_BYTES)]
            .into_iter()
            .enumerate()
        {
            sms.extend_from_slice(&addr.to_le_bytes());
            sms.extend_from_slice(&(len as u16).to_le_bytes());
            sms.extend_from_slice(&[SM_CONTROL[2 + k], 0, 1, 0]);
        }
        self.fpwr(st, 0x0810, &sms);
        let mut fmmus = Vec::new();
        for (logical, len, phys, ty) in [
            (SLOT * i, rx, OUTPUTS_ADDR, 0x02u8),
            (SLOT * i + 16, TX_BYTES, INPUTS_ADDR, 0x01),
        ] {
            fmmus.extend_from_slice(&(logical as u32).to_le_bytes());
            fmmus.extend_from_slice(&(len as u16).to_le_bytes());
            fmmus.extend_from_slice(&[0, 7]);
            fmmus.extend_from_slice(&phys.to_le_bytes());
            fmmus.extend_from_slice(&[0, ty, 1, 0, 0, 0]);
        }
        self.fpwr(st, 0x0600, &fmmus);
        self.request(st, 4);
        self.request(st, 8);
    }

    /// Station addresses for every drive, then each one to OP with the power-up mapping.
    fn all_to_op(&mut self) {
        for i in 0..self.net.len() {
            let st = station(i).to_le_bytes();
            assert_eq!(self.one(cmd::APWR, ap(i as u16, 0x0010), &st).1, 1);
        }
        for i in 0..self.net.len() {
            self.bring_up(i, RX_BYTES);
        }
    }

    /// Process-data cycles (1 ms of virtual time each) until `done` or `max` cycles; returns
    /// the cycles run.
    fn cycles_until(&mut self, max: usize, mut done: impl FnMut(&mut Self) -> bool) -> usize {
        for k in 1..=max {
            self.lrw();
            if done(self) {
                return k;
            }
        }
        panic!("not done after {max} cycles");
    }
}

fn chain(n: usize) -> Master {
    Master::new(SimConfig::virtual_chain(n))
}

#[test]
fn a_power_cycled_last_drive_is_silent_then_answers_as_at_power_on() {
    let mut m = chain(3);
    for i in 0..3 {
        let st = station(i).to_le_bytes();
        m.one(cmd::APWR, ap(i as u16, 0x0010), &st);
    }
    m.bring_up(0, RX_BYTES);
    m.bring_up(1, RX_BYTES);
    // Drive 2 runs with a mapping of its own (mode of operation added to 0x1600), a changed
    // following error window, and a new station alias in its EEPROM.
    let st = station(2);
    m.mailbox_sms(st);
    m.request(st, 2);
    m.sdo_write(st, 0x1600, 0, 1, 0);
    m.sdo_write(st, 0x1600, 3, 4, 0x6060_0008);
    m.sdo_write(st, 0x1600, 0, 1, 3);
    m.sdo_write(st, 0x6065, 0, 4, 1234);
    m.fpwr(st, 0x0508, &0x0042u16.to_le_bytes());
    m.fpwr(st, 0x0504, &4u32.to_le_bytes());
    m.fpwr(st, 0x0502, &0x0201u16.to_le_bytes()); // EEPROM write, write enable
    assert_eq!(
        m.fprd16(st, 0x0012),
        Some(0),
        "the alias is loaded at power-up only"
    );
    m.bring_up(2, RX_BYTES + 1);
    assert_eq!(m.lrw(), Some(9), "3 drives x (read + write)");
    let pos = m.net.device(2).unwrap().drive().position();
    let (t_before, _) = m.fprd(st, 0x0910, 8);
    assert!(u64::from_le_bytes(t_before.try_into().unwrap()) > 3_000_000_000);

    assert!(m.net.power_cycle(2, 10_000_000));
    assert!(!m.net.power_cycle(3, 1), "no such drive");
    assert!(!m.net.powered(2));
    assert_eq!(m.net.stats().power_cycles, 1);
    // Off: it does not answer in any addressing mode; the drive in front closed its port 1.
    assert_eq!(m.one(cmd::BRD, fp(0, 0x0130), &[0, 0]).1, 2);
    assert_eq!(m.one(cmd::APRD, ap(2, 0x0010), &[0, 0]).1, 0);
    assert_eq!(m.fprd16(st, 0x0130), None);
    let dl1 = m.fprd16(station(1), 0x0110).unwrap();
    assert_eq!((dl1 & 0x0020, dl1 & 0x0400), (0, 0x0400), "{dl1:#06x}");
    assert_eq!(m.lrw(), Some(6), "the others keep exchanging");

    // 10 ms of 1 ms cycles later it is back (the frame at which it came back counts).
    let k = m.cycles_until(20, |m| m.one(cmd::BRD, fp(0, 0x0130), &[0, 0]).1 == 3);
    assert!((8..=11).contains(&k), "back after {k} cycles");
    assert!(m.net.powered(2));
    assert_ne!(
        m.fprd16(station(1), 0x0110).unwrap() & 0x0020,
        0,
        "link up again"
    );
    let read = |m: &mut Master, reg: u16, len: usize| {
        let (d, wkc) = m.one(cmd::APRD, ap(2, reg), &vec![0; len]);
        assert_eq!(wkc, 1, "APRD {reg:#06x}");
        d
    };
    assert_eq!(read(&mut m, 0x0010, 2), [0, 0], "station address 0");
    assert_eq!(
        read(&mut m, 0x0012, 2),
        [0x42, 0],
        "alias loaded from the SII"
    );
    assert_eq!(read(&mut m, 0x0130, 2), [1, 0], "INIT, no error flag");
    assert_eq!(read(&mut m, 0x0134, 2), [0, 0], "no AL status code");
    assert!(read(&mut m, 0x0600, 128).iter().all(|&b| b == 0), "FMMUs");
    let sms = read(&mut m, 0x0800, 64);
    for (k, sm) in sms.chunks(8).enumerate() {
        // Byte 7 is the application's PDI control (SM deactivated in INIT), not the master's.
        assert!(sm[..7].iter().all(|&b| b == 0), "SM{k}: {sm:?}");
    }
    assert!(
        read(&mut m, 0x0920, 12).iter().all(|&b| b == 0),
        "DC offset, delay"
    );
    assert!(
        read(&mut m, 0x0980, 0x28).iter().all(|&b| b == 0),
        "SYNC0/1"
    );
    let t_after = u64::from_le_bytes(read(&mut m, 0x0910, 8).try_into().unwrap());
    assert!(
        t_after < 1_000_000_000,
        "DC system time restarted: {t_after}"
    );
    let d = m.net.device(2).unwrap();
    assert_eq!(d.drive().position(), pos, "the motor did not move");
    assert_eq!(d.drive().statusword() & 0x4F, 0x40, "switch on disabled");
    for i in 0..2 {
        assert_eq!(
            m.fprd16(station(i), 0x0130),
            Some(8),
            "drive {i} still in OP"
        );
    }
    assert_eq!(m.lrw(), Some(6), "INIT, no FMMU: drive 2 adds nothing");

    // The object dictionary is back at its power-up values; the mailbox counter restarts.
    m.one(cmd::APWR, ap(2, 0x0010), &st.to_le_bytes());
    m.mailbox_sms(st);
    m.request(st, 2);
    let (_, entries, counter) = m.sdo(st, 0x40, 0x1600, 0, 0);
    assert_eq!(
        (entries, counter),
        (2, 1),
        "first reply after power-up has counter 1"
    );
    assert_eq!(m.sdo_read(st, 0x1600, 1), 0x6040_0010);
    assert_eq!(m.sdo_read(st, 0x1600, 2), 0x607A_0020);
    assert_eq!(m.sdo_read(st, 0x6060, 0), 0);
    assert_eq!(m.sdo_read(st, 0x6065, 0), 100_000);
}

#[test]
fn a_power_cycled_middle_drive_breaks_the_line_for_the_drives_behind_it() {
    let mut m = chain(3);
    m.all_to_op();
    assert_eq!(m.lrw(), Some(9));
    m.net.power_cycle(1, 150_000_000);
    assert_eq!(
        m.one(cmd::BRD, fp(0, 0x0130), &[0, 0]).1,
        1,
        "drive 2 is cut off"
    );
    assert_eq!(m.fprd16(station(2), 0x0130), None);
    let dl0 = m.fprd16(station(0), 0x0110).unwrap();
    assert_eq!((dl0 & 0x0020, dl0 & 0x0400), (0, 0x0400), "{dl0:#06x}");
    assert_eq!(m.lrw(), Some(3));
    m.cycles_until(200, |m| m.net.powered(1));
    // Drive 2 stayed powered but got no outputs for 150 ms: its SM watchdog (100 ms) expired.
    // It kept its configuration; the power-cycled drive lost everything.
    assert_eq!(m.fprd16(station(2), 0x0130), Some(0x14), "SAFE-OP + error");
    assert_eq!(m.fprd16(station(2), 0x0134), Some(0x001B), "SM watchdog");
    assert_eq!(m.fprd16(station(2), 0x0810), Some(OUTPUTS_ADDR));
    assert_eq!(m.fprd16(station(1), 0x0130), None, "station address gone");
    assert_eq!(m.one(cmd::APRD, ap(1, 0x0130), &[0, 0]), (vec![1, 0], 1));
    assert_eq!(
        m.lrw(),
        Some(3 + 3),
        "drive 2 counts again (SAFE-OP), drive 1 not"
    );
}

#[test]
fn a_timed_power_cycle_of_the_first_drive_silences_the_whole_line() {
    let mut cfg = SimConfig::virtual_chain(2);
    cfg.power_cycle.push(PowerCycle {
        drive: 0,
        at_s: 0.05,
        off_ms: 150,
    });
    let mut m = Master::new(cfg);
    m.all_to_op();
    let mut silent = Vec::new();
    for k in 0..300 {
        if m.lrw().is_none() {
            silent.push(k);
        }
    }
    // Nothing answers while the first drive is off (the master's own link is down).
    assert!(
        (149..=151).contains(&silent.len()),
        "{} silent cycles",
        silent.len()
    );
    assert!(
        (45..=55).contains(&silent[0]),
        "off from cycle {}",
        silent[0]
    );
    assert!(silent.windows(2).all(|w| w[1] == w[0] + 1), "one outage");
    assert_eq!(m.net.stats().power_cycles, 1);
    assert_eq!(m.one(cmd::APRD, ap(0, 0x0130), &[0, 0]), (vec![1, 0], 1));
    // Drive 1 was cut off for longer than its SM watchdog: SAFE-OP + error until the master
    // acknowledges.
    assert_eq!(m.fprd16(station(1), 0x0130), Some(0x14));
}
