//! The drive's object dictionary as a catalogue: which objects and subindices exist, their
//! length, who may write them and whether they may be mapped into a PDO, and the CiA 301
//! abort codes an SDO access is refused with. Knowledge only: the objects' values live in
//! `od::Objects`; the ecsim config checks a configured mapping against it.

use crate::pdo;

/// SDO abort codes (ETG.1000.6 table 41).
pub mod abort {
    /// Client/server command specifier not valid or unknown.
    pub const BAD_COMMAND: u32 = 0x0504_0001;
    /// Unsupported access to an object (e.g. complete access).
    pub const UNSUPPORTED_ACCESS: u32 = 0x0601_0000;
    /// Attempt to write a read only object.
    pub const READ_ONLY: u32 = 0x0601_0002;
    /// Sub-index cannot be written, SI0 must be 0 for write access.
    pub const SI0_NOT_ZERO: u32 = 0x0601_0003;
    /// The object does not exist in the object dictionary.
    pub const NO_OBJECT: u32 = 0x0602_0000;
    /// The object cannot be mapped into the PDO.
    pub const NOT_MAPPABLE: u32 = 0x0604_0041;
    /// The number and length of the objects to be mapped would exceed the PDO length.
    pub const PDO_TOO_LONG: u32 = 0x0604_0042;
    /// Data type does not match, length of service parameter too high.
    pub const TOO_LONG: u32 = 0x0607_0012;
    /// Data type does not match, length of service parameter too low.
    pub const TOO_SHORT: u32 = 0x0607_0013;
    /// Sub-index does not exist.
    pub const NO_SUBINDEX: u32 = 0x0609_0011;
    /// Value range of parameter exceeded (write access).
    pub const VALUE_RANGE: u32 = 0x0609_0030;
    /// Value of parameter written too high.
    pub const VALUE_TOO_HIGH: u32 = 0x0609_0031;
    /// Data cannot be transferred or stored because of the present device state.
    pub const DEVICE_STATE: u32 = 0x0800_0022;
}

/// Who may write an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Ro,
    Rw,
    /// Writable in PRE-OP only (PDO mapping and assignment).
    RwPreOp,
}

/// Whether and where an entry may be mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Map {
    No,
    Rx,
    Tx,
}

/// Length, access and mappability of an entry.
pub(crate) fn describe(index: u16, sub: u8) -> Result<(usize, Access, Map), u32> {
    use Access::*;
    let e = match (index, sub) {
        (0x1000, 0) | (0x6502, 0) => (4, Ro, Map::No),
        (0x1001, 0) => (1, Ro, Map::No),
        (0x1008, 0) | (0x1009, 0) | (0x100A, 0) => (0, Ro, Map::No),
        (0x1018, 0) => (1, Ro, Map::No),
        (0x1018, 1..=4) => (4, Ro, Map::No),
        (0x1600 | 0x1A00, 0) => (1, RwPreOp, Map::No),
        (0x1600 | 0x1A00, 1..=8) => (4, RwPreOp, Map::No),
        (0x1C00, 0) => (1, Ro, Map::No),
        (0x1C00, 1..=4) => (1, Ro, Map::No),
        (0x1C12 | 0x1C13, 0) => (1, RwPreOp, Map::No),
        (0x1C12 | 0x1C13, 1) => (2, RwPreOp, Map::No),
        (0x603F, 0) => (2, Ro, Map::Tx),
        (0x6040, 0) => (2, Rw, Map::Rx),
        (0x6041, 0) => (2, Ro, Map::Tx),
        (0x605A, 0) => (2, Rw, Map::No),
        (0x6060, 0) => (1, Rw, Map::Rx),
        (0x6061, 0) => (1, Ro, Map::Tx),
        (0x6064, 0) | (0x606C, 0) | (0x60F4, 0) => (4, Ro, Map::Tx),
        (0x6065, 0) => (4, Rw, Map::No),
        (0x6066, 0) => (2, Rw, Map::No),
        (0x6077, 0) => (2, Ro, Map::Tx),
        (0x607A, 0) => (4, Rw, Map::Rx),
        (0x6085, 0) => (4, Rw, Map::No),
        (0x60FD, 0) => (4, Ro, Map::Tx),
        (i, _) if object_exists(i) => return Err(abort::NO_SUBINDEX),
        _ => return Err(abort::NO_OBJECT),
    };
    Ok(e)
}

fn object_exists(index: u16) -> bool {
    matches!(
        index,
        0x1000
            | 0x1001
            | 0x1008
            | 0x1009
            | 0x100A
            | 0x1018
            | 0x1600
            | 0x1A00
            | 0x1C00
            | 0x1C12
            | 0x1C13
            | 0x603F
            | 0x6040
            | 0x6041
            | 0x605A
            | 0x6060
            | 0x6061
            | 0x6064
            | 0x6065
            | 0x6066
            | 0x606C
            | 0x6077
            | 0x607A
            | 0x6085
            | 0x60F4
            | 0x60FD
            | 0x6502
    )
}

/// Whether `entry` (`index << 16 | sub << 8 | bits`) may be mapped into the RxPDO (`rx`) or
/// the TxPDO with its true size.
pub(crate) fn mappable(entry: u32, rx: bool) -> bool {
    if pdo::is_padding(entry) {
        return true;
    }
    let (oi, os, bits) = pdo::split(entry);
    let want = if rx { Map::Rx } else { Map::Tx };
    matches!(describe(oi, os), Ok((len, _, m)) if m == want && usize::from(bits) == len * 8)
}
