//! PDO mappings (0x1600 / 0x1A00 contents): which objects travel in the process image.

/// Most entries one PDO mapping object holds.
pub const MAX_ENTRIES: usize = 8;

/// A PDO mapping: entries in CiA 301 form `index << 16 | sub << 8 | bit_length`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdoMap {
    entries: [u32; MAX_ENTRIES],
    count: u8,
}

/// Split a mapping entry into (index, subindex, bit length).
pub fn split(entry: u32) -> (u16, u8, u8) {
    ((entry >> 16) as u16, (entry >> 8) as u8, entry as u8)
}

/// Whether `entry` is padding: index 0x0000 (and subindex 0), any bit length, as drives
/// map it to align their objects. It carries nothing and is skipped when packing.
pub fn is_padding(entry: u32) -> bool {
    let (index, sub, bits) = split(entry);
    index == 0 && sub == 0 && bits > 0
}

/// ETG.2000 data type code for an unsigned/signed entry of `bits` (for the SII PDO category;
/// 0 for padding).
pub fn data_type_code(entry: u32) -> u8 {
    if is_padding(entry) {
        return 0;
    }
    match split(entry).2 {
        8 => 0x05,
        16 => 0x06,
        _ => 0x07,
    }
}

/// RxPDO 0x1600 default: controlword, target position.
pub const DEFAULT_RX: PdoMap = PdoMap::from_entries(&[0x6040_0010, 0x607A_0020]);
/// TxPDO 0x1A00 default: statusword, position actual, velocity actual, torque actual, error code.
pub const DEFAULT_TX: PdoMap = PdoMap::from_entries(&[
    0x6041_0010,
    0x6064_0020,
    0x606C_0020,
    0x6077_0010,
    0x603F_0010,
]);

impl PdoMap {
    /// Build from a list (at most [`MAX_ENTRIES`]; checked at compile time for the constants).
    pub const fn from_entries(list: &[u32]) -> Self {
        assert!(list.len() <= MAX_ENTRIES);
        let mut entries = [0u32; MAX_ENTRIES];
        let mut i = 0;
        while i < list.len() {
            entries[i] = list[i];
            i += 1;
        }
        PdoMap {
            entries,
            count: list.len() as u8,
        }
    }

    /// Number of active entries (sub-index 0).
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// No entries mapped.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Active entries.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries[..self.len()].iter().copied()
    }

    /// Raw entry at sub-index `sub` (1-based), active or not.
    pub fn entry(&self, sub: u8) -> Option<u32> {
        self.entries.get(usize::from(sub).checked_sub(1)?).copied()
    }

    /// Store a raw entry at sub-index `sub` (1-based); the caller validated it.
    pub fn set_entry(&mut self, sub: u8, value: u32) {
        if let Some(slot) = usize::from(sub)
            .checked_sub(1)
            .and_then(|i| self.entries.get_mut(i))
        {
            *slot = value;
        }
    }

    /// Set sub-index 0; the caller validated the entries below it.
    pub fn set_count(&mut self, count: u8) {
        self.count = count.min(MAX_ENTRIES as u8);
    }

    /// Total size in bits of the active entries.
    pub fn bits(&self) -> usize {
        self.iter().map(|e| usize::from(split(e).2)).sum()
    }

    /// Size in bytes, rounded up.
    pub fn bytes(&self) -> usize {
        self.bits().div_ceil(8)
    }

    /// The active entries with the bit offset each starts at in the image.
    pub fn with_offsets(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        self.iter().scan(0usize, |at, e| {
            let start = *at;
            *at += usize::from(split(e).2);
            Some((e, start))
        })
    }

    /// The first object (not padding) that does not start on a byte boundary, if any:
    /// this drive packs objects on byte boundaries only.
    pub fn misaligned(&self) -> Option<u32> {
        self.with_offsets()
            .find(|&(e, at)| !is_padding(e) && !at.is_multiple_of(8))
            .map(|(e, _)| e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_takes_its_bits_and_objects_after_it_must_be_byte_aligned() {
        let m = PdoMap::from_entries(&[0x6040_0010, 0x0000_0008, 0x607A_0020]);
        assert!(is_padding(0x0000_0008) && !is_padding(0x6040_0010));
        assert_eq!(m.bytes(), 7);
        let at: Vec<usize> = m.with_offsets().map(|(_, at)| at).collect();
        assert_eq!(at, [0, 16, 24]);
        assert_eq!(m.misaligned(), None);
        let m = PdoMap::from_entries(&[0x0000_0004, 0x6060_0008, 0x0000_0004]);
        assert_eq!(m.misaligned(), Some(0x6060_0008));
        assert_eq!(m.bytes(), 2);
    }

    #[test]
    fn default_sizes() {
        assert_eq!(DEFAULT_RX.bytes(), 6);
        assert_eq!(DEFAULT_TX.bytes(), 14);
        assert_eq!(split(0x607A_0020), (0x607A, 0, 32));
    }
}
