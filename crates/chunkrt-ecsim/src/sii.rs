//! The SII EEPROM: an image built in code (ETG.2010 layout) and the ESC's EEPROM interface
//! registers 0x0500..0x050F that the master drives to read it 8 bytes at a time.

use crate::config::DriveParams;
use crate::pdo::PdoMap;

/// Physical address and size of the mailbox the master writes (SM0).
pub const MBX_OUT_ADDR: u16 = 0x1000;
/// Physical address of the mailbox the master reads (SM1).
pub const MBX_IN_ADDR: u16 = 0x1080;
/// Size of each mailbox in bytes.
pub const MBX_LEN: u16 = 128;
/// Physical address of the outputs buffer (SM2, RxPDO).
pub const OUTPUTS_ADDR: u16 = 0x1100;
/// Physical address of the inputs buffer (SM3, TxPDO).
pub const INPUTS_ADDR: u16 = 0x1180;

/// Sync manager control bytes as a servo drive's SII declares them.
pub const SM_CONTROL: [u8; 4] = [0x26, 0x22, 0x64, 0x20];

/// EEPROM size in words (16 kbit).
const EEPROM_WORDS: usize = 1024;

/// CRC-8 (poly 0x07, init 0xFF) over the first 14 bytes, as the ESC checks it at power-up.
fn crc8(data: &[u8]) -> u8 {
    let mut crc = 0xFFu8;
    for &b in data {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x07
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// Strings category (index 1-based): group, image-less order code, device name.
const STRINGS: [&str; 4] = [
    "chunkrt-ecsim",
    "Servo Drives",
    "ECSIM-CSP-1",
    "chunkrt simulated CiA 402 servo drive",
];

/// Build the EEPROM image of drive `position` (serial number differs per drive).
pub fn build_image(p: &DriveParams, position: usize) -> Vec<u16> {
    let mut b = header(p, position);
    category(&mut b, 10, strings());
    category(&mut b, 30, general(p));
    // FMMU usage (40): outputs, inputs, SM status.
    category(&mut b, 40, vec![0x01, 0x02, 0x03, 0xFF]);
    let (rx, tx) = (
        PdoMap::from_entries(&p.rx_pdo),
        PdoMap::from_entries(&p.tx_pdo),
    );
    category(&mut b, 41, sync_managers(&rx, &tx));
    // TxPDO (50) and RxPDO (51): the power-up mappings (fixed without CoE).
    for (kind, map, pdo_index, sm_index) in [(50u16, &tx, 0x1A00u16, 3u8), (51, &rx, 0x1600, 2)] {
        category(&mut b, kind, pdo(map, pdo_index, sm_index));
    }
    b.extend_from_slice(&0xFFFFu16.to_le_bytes());

    let mut words: Vec<u16> = b
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], *c.get(1).unwrap_or(&0)]))
        .collect();
    words.resize(EEPROM_WORDS, 0xFFFF);
    words
}

/// Writes a little-endian word at byte `at`.
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

/// Writes a little-endian double word at byte `at`.
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// The image's first 0x80 bytes: PDI control with its CRC, identity, standard mailbox,
/// size and version.
fn header(p: &DriveParams, position: usize) -> Vec<u8> {
    let mut b: Vec<u8> = vec![0; 0x80];
    // Word 0: PDI control (SPI-like, irrelevant here), word 4: station alias 0.
    put16(&mut b, 0x00, 0x0C08);
    put16(&mut b, 0x02, 0x6E00);
    let crc = crc8(&b[0..14]);
    put16(&mut b, 0x0E, u16::from(crc));
    put32(&mut b, 0x10, p.vendor_id);
    put32(&mut b, 0x14, p.product_code);
    put32(&mut b, 0x18, p.revision);
    put32(&mut b, 0x1C, p.serial_base.wrapping_add(position as u32));
    // Standard mailbox (words 0x18..0x1C): receive = master->slave (SM0), send = SM1, CoE.
    // A drive without CoE has no mailbox: the words stay 0.
    if p.coe {
        put16(&mut b, 0x30, MBX_OUT_ADDR);
        put16(&mut b, 0x32, MBX_LEN);
        put16(&mut b, 0x34, MBX_IN_ADDR);
        put16(&mut b, 0x36, MBX_LEN);
        put16(&mut b, 0x38, 0x0004);
    }
    // Word 0x3E: size in kbit - 1; word 0x3F: version.
    put16(&mut b, 0x7C, (EEPROM_WORDS * 16 / 1024 - 1) as u16);
    put16(&mut b, 0x7E, 1);
    b
}

/// Appends a category: its kind, its size in words and its data (padded to a word).
fn category(b: &mut Vec<u8>, kind: u16, mut data: Vec<u8>) {
    if data.len() % 2 == 1 {
        data.push(0);
    }
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&((data.len() / 2) as u16).to_le_bytes());
    b.extend_from_slice(&data);
}

/// Strings (10): their count, then each with its length.
fn strings() -> Vec<u8> {
    let mut s = vec![STRINGS.len() as u8];
    for st in STRINGS {
        s.push(st.len() as u8);
        s.extend_from_slice(st.as_bytes());
    }
    s
}

/// General (30), 32 bytes, in the layout ethercrab decodes.
fn general(p: &DriveParams) -> Vec<u8> {
    let mut g = vec![0u8; 32];
    g[0] = 2; // group string
    g[1] = 0; // image
    g[2] = 3; // order code string (ethercrab uses it as the name)
    g[3] = 4; // device name string
    g[5] = if p.coe { 0x01 | 0x04 | 0x08 } else { 0 }; // CoE: SDO, PDO assign, PDO config
    g[9] = 1; // one DS402 channel
    g[14] = 0x11; // port 0 and port 1: MII
    g
}

/// Sync managers (41): the two mailboxes, then the outputs and inputs sized by the
/// PDO mappings.
fn sync_managers(rx: &PdoMap, tx: &PdoMap) -> Vec<u8> {
    let mut sm = Vec::new();
    let sizes = [MBX_LEN, MBX_LEN, rx.bytes() as u16, tx.bytes() as u16];
    let addrs = [MBX_OUT_ADDR, MBX_IN_ADDR, OUTPUTS_ADDR, INPUTS_ADDR];
    for i in 0..4 {
        sm.extend_from_slice(&addrs[i].to_le_bytes());
        sm.extend_from_slice(&sizes[i].to_le_bytes());
        sm.extend_from_slice(&[SM_CONTROL[i], 0, 0x01, i as u8 + 1]);
    }
    sm
}

/// A TxPDO or RxPDO category: the PDO's index, entry count and sync manager, then
/// each entry.
fn pdo(map: &PdoMap, pdo_index: u16, sm_index: u8) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(&pdo_index.to_le_bytes());
    d.extend_from_slice(&[map.len() as u8, sm_index, 0, 0, 0, 0]);
    for e in map.iter() {
        let (idx, sub, bits) = crate::pdo::split(e);
        d.extend_from_slice(&idx.to_le_bytes());
        d.extend_from_slice(&[sub, 0, crate::pdo::data_type_code(e), bits, 0, 0]);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_has_identity_mailbox_and_categories() {
        let p = DriveParams::default();
        let w = build_image(&p, 3);
        assert_eq!(u32::from(w[8]) | (u32::from(w[9]) << 16), p.vendor_id);
        assert_eq!(
            u32::from(w[0x0E]) | (u32::from(w[0x0F]) << 16),
            p.serial_base + 3
        );
        assert_eq!(w[0x18], MBX_OUT_ADDR);
        assert_eq!(w[0x1C], 0x0004);
        // Walk the categories as a master does and find them all, then the end marker.
        let mut at = 0x40usize;
        let mut kinds = Vec::new();
        while w[at] != 0xFFFF {
            kinds.push(w[at]);
            at += 2 + usize::from(w[at + 1]);
        }
        assert_eq!(kinds, vec![10, 30, 40, 41, 50, 51]);
    }

    #[test]
    fn crc_matches_known_value() {
        // ETG.2010 example: CRC over 14 bytes of 0x00 with init 0xFF.
        assert_eq!(crc8(&[0u8; 0]), 0xFF);
        assert_ne!(crc8(&[0u8; 14]), crc8(&[1u8; 14]));
    }
}
