//! The object dictionary of one drive: SDO access rules (with CiA 301 abort codes), PDO mapping
//! and assignment objects (remappable in PRE-OP only), and packing of the process image.

pub use crate::catalogue::abort;
use crate::catalogue::{describe, mappable, Access};
use crate::cia402::{Drive, MODE_CSP};
use crate::pdo::{self, PdoMap, DEFAULT_RX, DEFAULT_TX, MAX_ENTRIES};

/// Largest process image per direction in bytes (fits the SM buffers at 0x1100/0x1180).
pub const MAX_PDO_BYTES: usize = 64;

/// An SDO value: up to 4 bytes, or a visible string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// Little-endian bytes and length (1, 2 or 4).
    Num([u8; 4], usize),
    /// VISIBLE_STRING.
    Str(&'static str),
}

impl Value {
    fn u8(v: u8) -> Self {
        Value::Num([v, 0, 0, 0], 1)
    }
    fn u16(v: u16) -> Self {
        let b = v.to_le_bytes();
        Value::Num([b[0], b[1], 0, 0], 2)
    }
    fn u32(v: u32) -> Self {
        Value::Num(v.to_le_bytes(), 4)
    }
    /// Bytes as they go on the wire.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Value::Num(b, n) => &b[..*n],
            Value::Str(s) => s.as_bytes(),
        }
    }
}

/// Identity served in 0x1018.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// 0x1018:01.
    pub vendor_id: u32,
    /// 0x1018:02.
    pub product_code: u32,
    /// 0x1018:03.
    pub revision: u32,
    /// 0x1018:04.
    pub serial: u32,
}

/// The objects of one drive.
#[derive(Clone, Debug)]
pub struct Objects {
    /// The drive behind 0x6xxx.
    pub drive: Drive,
    identity: Identity,
    rx_map: PdoMap,
    tx_map: PdoMap,
    rx_assigned: u8,
    tx_assigned: u8,
    error_register: u8,
    pdo_writable: bool,
}

impl Objects {
    /// Objects with the default mapping and assignment.
    pub fn new(drive: Drive, identity: Identity) -> Self {
        Objects::with_maps(drive, identity, DEFAULT_RX, DEFAULT_TX)
    }

    /// Objects with the given power-up mapping (checked by the config).
    pub fn with_maps(drive: Drive, identity: Identity, rx_map: PdoMap, tx_map: PdoMap) -> Self {
        Objects {
            drive,
            identity,
            rx_map,
            tx_map,
            rx_assigned: 1,
            tx_assigned: 1,
            error_register: 0,
            pdo_writable: true,
        }
    }

    /// Whether SDO writes to 0x1600/0x1A00 and 0x1C12/0x1C13 take effect; when not, they
    /// are acknowledged and ignored (see `DriveParams::pdo_writable`).
    pub fn pdo_writable(mut self, writable: bool) -> Self {
        self.pdo_writable = writable;
        self
    }

    /// Outputs image size in bytes (what SM2 must be configured to).
    pub fn rx_bytes(&self) -> usize {
        if self.rx_assigned == 1 {
            self.rx_map.bytes()
        } else {
            0
        }
    }

    /// Inputs image size in bytes (what SM3 must be configured to).
    pub fn tx_bytes(&self) -> usize {
        if self.tx_assigned == 1 {
            self.tx_map.bytes()
        } else {
            0
        }
    }

    /// SDO upload.
    pub fn read(&self, index: u16, sub: u8) -> Result<Value, u32> {
        describe(index, sub)?;
        let d = &self.drive;
        let v = match (index, sub) {
            (0x1000, _) => Value::u32(0x0002_0192),
            (0x1001, _) => Value::u8(self.error_register | u8::from(d.error_code() != 0)),
            (0x1008, _) => Value::Str("chunkrt simulated CiA 402 servo drive"),
            (0x1009, _) => Value::Str("sim-1"),
            (0x100A, _) => Value::Str(env!("CARGO_PKG_VERSION")),
            (0x1018, 0) => Value::u8(4),
            (0x1018, 1) => Value::u32(self.identity.vendor_id),
            (0x1018, 2) => Value::u32(self.identity.product_code),
            (0x1018, 3) => Value::u32(self.identity.revision),
            (0x1018, _) => Value::u32(self.identity.serial),
            (0x1600, 0) => Value::u8(self.rx_map.len() as u8),
            (0x1A00, 0) => Value::u8(self.tx_map.len() as u8),
            (0x1600, s) => Value::u32(self.rx_map.entry(s).unwrap_or(0)),
            (0x1A00, s) => Value::u32(self.tx_map.entry(s).unwrap_or(0)),
            (0x1C00, 0) => Value::u8(4),
            (0x1C00, s) => Value::u8(s),
            (0x1C12, 0) => Value::u8(self.rx_assigned),
            (0x1C13, 0) => Value::u8(self.tx_assigned),
            (0x1C12, _) => Value::u16(0x1600),
            (0x1C13, _) => Value::u16(0x1A00),
            (0x6502, _) => Value::u32(1 << 7),
            _ => self.process_value(index),
        };
        Ok(v)
    }

    /// Values of mappable 0x6xxx objects.
    fn process_value(&self, index: u16) -> Value {
        let d = &self.drive;
        match index {
            0x603F => Value::u16(d.error_code()),
            0x6040 => Value::u16(d.controlword),
            0x6041 => Value::u16(d.statusword()),
            0x605A => Value::u16(d.quick_stop_option as u16),
            0x6060 => Value::u8(d.mode as u8),
            0x6061 => Value::u8(d.mode_display() as u8),
            0x6064 => Value::u32(d.position() as u32),
            0x6065 => Value::u32(d.fe_window),
            0x6066 => Value::u16(d.fe_timeout_ms),
            0x606C => Value::u32(d.velocity() as u32),
            0x6077 => Value::u16(d.torque() as u16),
            0x607A => Value::u32(d.target as u32),
            0x6085 => Value::u32(d.quick_stop_decel),
            0x60F4 => Value::u32(d.following_error() as u32),
            0x60FD => Value::u32(d.digital_inputs),
            _ => Value::u32(0),
        }
    }

    /// SDO download of `data` (exactly the object's size) in AL state `al_state`.
    pub fn write(&mut self, index: u16, sub: u8, data: &[u8], al_state: u8) -> Result<(), u32> {
        let (len, access, _) = describe(index, sub)?;
        match access {
            Access::Ro => return Err(abort::READ_ONLY),
            Access::RwPreOp if al_state != 2 => return Err(abort::DEVICE_STATE),
            _ => {}
        }
        if data.len() > len {
            return Err(abort::TOO_LONG);
        }
        if data.len() < len {
            return Err(abort::TOO_SHORT);
        }
        let mut raw = [0u8; 4];
        raw[..len].copy_from_slice(data);
        let v = u32::from_le_bytes(raw);
        if !self.pdo_writable && matches!(index, 0x1600 | 0x1A00 | 0x1C12 | 0x1C13) {
            return Ok(());
        }
        match (index, sub) {
            (0x1600 | 0x1A00, 0) => self.set_map_count(index, v as u8),
            (0x1600 | 0x1A00, s) => self.set_map_entry(index, s, v),
            (0x1C12 | 0x1C13, 0) => {
                if v > 1 {
                    return Err(abort::VALUE_TOO_HIGH);
                }
                if index == 0x1C12 {
                    self.rx_assigned = v as u8;
                } else {
                    self.tx_assigned = v as u8;
                }
                Ok(())
            }
            (0x1C12 | 0x1C13, _) => {
                let assigned = if index == 0x1C12 {
                    self.rx_assigned
                } else {
                    self.tx_assigned
                };
                let pdo = if index == 0x1C12 { 0x1600 } else { 0x1A00 };
                if assigned != 0 {
                    Err(abort::SI0_NOT_ZERO)
                } else if v != pdo {
                    Err(abort::VALUE_RANGE)
                } else {
                    Ok(())
                }
            }
            _ => self.write_process(index, v),
        }
    }

    fn write_process(&mut self, index: u16, v: u32) -> Result<(), u32> {
        let d = &mut self.drive;
        match index {
            0x6040 => d.controlword = v as u16,
            0x6060 => {
                let mode = v as u8 as i8;
                if mode != MODE_CSP && mode != 0 {
                    return Err(abort::VALUE_RANGE);
                }
                d.mode = mode;
            }
            0x607A => d.target = v as i32,
            0x6065 => d.fe_window = v,
            0x6066 => d.fe_timeout_ms = v as u16,
            0x6085 => d.quick_stop_decel = v,
            0x605A => {
                let o = v as u16 as i16;
                if ![1, 2, 5, 6].contains(&o) {
                    return Err(abort::VALUE_RANGE);
                }
                d.quick_stop_option = o;
            }
            _ => return Err(abort::READ_ONLY),
        }
        Ok(())
    }

    fn map_mut(&mut self, index: u16) -> &mut PdoMap {
        if index == 0x1600 {
            &mut self.rx_map
        } else {
            &mut self.tx_map
        }
    }

    fn set_map_entry(&mut self, index: u16, sub: u8, v: u32) -> Result<(), u32> {
        if !self.map_mut(index).is_empty() {
            return Err(abort::SI0_NOT_ZERO);
        }
        if !mappable(v, index == 0x1600) {
            return Err(abort::NOT_MAPPABLE);
        }
        self.map_mut(index).set_entry(sub, v);
        Ok(())
    }

    fn set_map_count(&mut self, index: u16, count: u8) -> Result<(), u32> {
        if usize::from(count) > MAX_ENTRIES {
            return Err(abort::VALUE_TOO_HIGH);
        }
        let mut candidate = *self.map_mut(index);
        candidate.set_count(count);
        for e in candidate.iter() {
            if e == 0 {
                return Err(abort::NOT_MAPPABLE);
            }
        }
        if candidate.misaligned().is_some() {
            return Err(abort::NOT_MAPPABLE);
        }
        if candidate.bytes() > MAX_PDO_BYTES {
            return Err(abort::PDO_TOO_LONG);
        }
        self.map_mut(index).set_count(count);
        Ok(())
    }

    /// Take the master's outputs (the RxPDO image) into the objects.
    pub fn unpack_outputs(&mut self, image: &[u8]) {
        if self.rx_assigned == 0 {
            return;
        }
        let map = self.rx_map;
        for (e, bit) in map.with_offsets() {
            // Padding carries nothing; objects sit on byte boundaries (checked when mapped).
            if pdo::is_padding(e) {
                continue;
            }
            let (index, _, bits) = pdo::split(e);
            let (at, n) = (bit / 8, usize::from(bits) / 8);
            let Some(bytes) = image.get(at..at + n) else {
                return;
            };
            let mut raw = [0u8; 4];
            raw[..n].copy_from_slice(bytes);
            let _ = self.write_process(index, u32::from_le_bytes(raw));
        }
    }

    /// Write the TxPDO image (the master's inputs) into `image`.
    pub fn pack_inputs(&self, image: &mut [u8]) {
        if self.tx_assigned == 0 {
            return;
        }
        for (e, bit) in self.tx_map.with_offsets() {
            // Padding carries no data, but not necessarily zeros: its whole bytes are
            // filled with 0xA5, so a master that reads them as an object shows it.
            if pdo::is_padding(e) {
                let bits = usize::from(pdo::split(e).2);
                let (from, to) = (bit.div_ceil(8), (bit + bits) / 8);
                if let Some(dst) = image.get_mut(from..to.max(from)) {
                    dst.fill(0xA5);
                }
                continue;
            }
            let (index, _, bits) = pdo::split(e);
            let (at, n) = (bit / 8, usize::from(bits) / 8);
            let v = self.process_value(index);
            if let Some(dst) = image.get_mut(at..at + n) {
                dst.copy_from_slice(&v.bytes()[..n]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DriveParams;

    fn objs() -> Objects {
        let id = Identity {
            vendor_id: 1,
            product_code: 2,
            revision: 3,
            serial: 4,
        };
        Objects::new(Drive::new(&DriveParams::default(), 0), id)
    }

    #[test]
    fn abort_codes() {
        let mut o = objs();
        assert_eq!(o.read(0x2000, 0), Err(abort::NO_OBJECT));
        assert_eq!(o.read(0x1018, 9), Err(abort::NO_SUBINDEX));
        assert_eq!(o.write(0x6041, 0, &[0, 0], 2), Err(abort::READ_ONLY));
        assert_eq!(o.write(0x6040, 0, &[0, 0, 0, 0], 2), Err(abort::TOO_LONG));
        assert_eq!(o.write(0x6040, 0, &[0], 2), Err(abort::TOO_SHORT));
        assert_eq!(o.write(0x6060, 0, &[3], 2), Err(abort::VALUE_RANGE));
        assert_eq!(o.write(0x1600, 0, &[0], 4), Err(abort::DEVICE_STATE));
        assert_eq!(
            o.write(0x1600, 1, &0x6060_0008u32.to_le_bytes(), 2),
            Err(abort::SI0_NOT_ZERO)
        );
    }

    #[test]
    fn remap_rx_pdo() {
        let mut o = objs();
        o.write(0x1600, 0, &[0], 2).unwrap();
        assert_eq!(
            o.write(0x1600, 1, &0x6041_0010u32.to_le_bytes(), 2),
            Err(abort::NOT_MAPPABLE)
        );
        assert_eq!(
            o.write(0x1600, 1, &0x6040_0020u32.to_le_bytes(), 2),
            Err(abort::NOT_MAPPABLE)
        );
        o.write(0x1600, 1, &0x6040_0010u32.to_le_bytes(), 2)
            .unwrap();
        o.write(0x1600, 2, &0x607A_0020u32.to_le_bytes(), 2)
            .unwrap();
        o.write(0x1600, 3, &0x6060_0008u32.to_le_bytes(), 2)
            .unwrap();
        o.write(0x1600, 0, &[3], 2).unwrap();
        assert_eq!(o.rx_bytes(), 7);
        o.unpack_outputs(&[0x06, 0, 0x10, 0x27, 0, 0, 8]);
        assert_eq!(o.drive.controlword, 6);
        assert_eq!(o.drive.target, 10_000);
        assert_eq!(o.drive.mode, 8);
    }

    #[test]
    fn a_drive_that_ignores_mapping_writes_acknowledges_them_and_keeps_its_mapping() {
        let mut o = objs().pdo_writable(false);
        o.write(0x1C12, 0, &[0], 2).unwrap();
        o.write(0x1600, 0, &[0], 2).unwrap();
        o.write(0x1600, 1, &0x607A_0020u32.to_le_bytes(), 2)
            .unwrap();
        o.write(0x1600, 0, &[1], 2).unwrap();
        assert_eq!(o.read(0x1C12, 0), Ok(Value::u8(1)));
        assert_eq!(o.read(0x1600, 0), Ok(Value::u8(2)));
        assert_eq!(o.read(0x1600, 1), Ok(Value::u32(0x6040_0010)));
        assert_eq!(o.rx_bytes(), 6);
        // Still refused where any drive refuses: outside PRE-OP, read-only objects.
        assert_eq!(o.write(0x1600, 0, &[0], 4), Err(abort::DEVICE_STATE));
    }

    #[test]
    fn padding_is_mapped_skipped_in_both_images_and_filled_on_the_way_out() {
        let mut o = objs();
        // Remapped in PRE-OP with a byte of padding after the controlword and statusword.
        for (pdo, list) in [
            (0x1600u16, [0x6040_0010u32, 0x0000_0008, 0x607A_0020]),
            (0x1A00, [0x6041_0010, 0x0000_0008, 0x6064_0020]),
        ] {
            o.write(pdo, 0, &[0], 2).unwrap();
            for (k, e) in list.iter().enumerate() {
                o.write(pdo, k as u8 + 1, &e.to_le_bytes(), 2).unwrap();
            }
            o.write(pdo, 0, &[3], 2).unwrap();
        }
        assert_eq!((o.rx_bytes(), o.tx_bytes()), (7, 7));
        o.unpack_outputs(&[0x06, 0, 0xEE, 0x10, 0x27, 0, 0]);
        assert_eq!((o.drive.controlword, o.drive.target), (6, 10_000));
        let mut img = [0u8; 7];
        o.pack_inputs(&mut img);
        assert_eq!(u16::from_le_bytes([img[0], img[1]]), o.drive.statusword());
        assert_eq!(img[2], 0xA5, "padding is not zero on the wire");
        let pos = i32::from_le_bytes([img[3], img[4], img[5], img[6]]);
        assert_eq!(pos, o.drive.position());
        // An object after padding that is not a whole byte is refused.
        o.write(0x1600, 0, &[0], 2).unwrap();
        o.write(0x1600, 1, &0x0000_0004u32.to_le_bytes(), 2)
            .unwrap();
        o.write(0x1600, 2, &0x6040_0010u32.to_le_bytes(), 2)
            .unwrap();
        assert_eq!(o.write(0x1600, 0, &[2], 2), Err(abort::NOT_MAPPABLE));
    }

    #[test]
    fn inputs_image_layout() {
        let o = objs();
        let mut img = [0u8; 14];
        o.pack_inputs(&mut img);
        assert_eq!(u16::from_le_bytes([img[0], img[1]]), o.drive.statusword());
    }
}
