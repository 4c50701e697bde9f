//! The PDO mapping a drive runs, read from the drive and compared with `ethercat.pdo` entry
//! for entry and in order: from its SII PDO categories when it has no CoE mailbox, over CoE
//! (0x1C12/0x1C13 assignment, 0x16xx/0x1Axx entries) in PRE-OP when it has one. Byte
//! lengths alone would let a mapping in another order, or with other objects of the same
//! size, be decoded as if it were the configured one.
//!
//! Padding entries (index 0x0000, any bit length: what drives map to align their objects)
//! are not compared: the objects around them are, in order, and the drive's own entries,
//! padding included, give the byte offsets the backend packs and unpacks at
//! ([`layout`]).

use crate::bus::step;
use crate::bus::Io;
use crate::error::{BringUpError, DriveId, PdoDir};
use crate::params::PdoLayout;
use chunkrt_config::PdoEntry;
use ethercrab::{EtherCrabWireReadSized, MainDevice, SubDevice, SubDeviceRef};
use std::time::Duration;

/// SII category of the RxPDOs (host to drive).
pub(crate) const SII_RXPDO: u16 = 51;
/// SII category of the TxPDOs (drive to host).
pub(crate) const SII_TXPDO: u16 = 50;

/// One mapped object: index, subindex, bits (a CiA 301 mapping word
/// `index << 16 | sub << 8 | bits`, split; the SII declares the same three).
pub(crate) type Mapped = (u16, u8, u8);

/// Most PDOs per assignment and entries per PDO read back: CiA 301 allows 64 entries per
/// PDO; the config holds at most 8, so anything longer is a mismatch either way.
const MAX_READ: u8 = 64;

/// The entries of every PDO in SII category `cat` that is assigned to a sync manager, in
/// order (ETG.2010: categories from word 0x40, each a type and a size in words; a PDO is 8
/// bytes of header, then 8 bytes per entry).
pub(crate) fn sii_pdo_entries(
    io: &mut Io,
    md: &MainDevice<'_>,
    sd: &SubDevice,
    cat: u16,
) -> Result<Vec<Mapped>, BringUpError> {
    let t = Duration::from_secs(2);
    let read = |io: &mut Io, word: u16, buf: &mut [u8]| -> Result<(), BringUpError> {
        match step(
            io,
            "SII PDO categories",
            t,
            sd.eeprom_read_raw(md, word, buf),
        )? {
            Ok(n) if n >= buf.len() => Ok(()),
            Ok(n) => Err(BringUpError::Bus {
                step: "SII PDO categories",
                wire: io.describe(),
                reason: format!("{n} bytes read at word {word:#06x}, {} asked", buf.len()),
            }),
            Err(e) => Err(BringUpError::Bus {
                step: "SII PDO categories",
                wire: io.describe(),
                reason: e.to_string(),
            }),
        }
    };
    let mut entries = Vec::new();
    let mut word: u16 = 0x40;
    // At most 64 categories: a corrupt EEPROM cannot loop forever.
    for _ in 0..64 {
        let mut head = [0u8; 4];
        read(io, word, &mut head)?;
        let kind = u16::from_le_bytes([head[0], head[1]]);
        let words = u16::from_le_bytes([head[2], head[3]]);
        if kind == 0xFFFF || kind == 0 {
            break;
        }
        if kind == cat && words > 0 {
            let mut data = vec![0u8; usize::from(words) * 2];
            read(io, word + 2, &mut data)?;
            let mut o = 0;
            while o + 8 <= data.len() {
                let count = usize::from(data[o + 2]);
                let sm = data[o + 3];
                o += 8;
                for _ in 0..count {
                    let Some(e) = data.get(o..o + 8) else { break };
                    if sm != 0xFF {
                        entries.push((u16::from_le_bytes([e[0], e[1]]), e[2], e[5]));
                    }
                    o += 8;
                }
            }
        }
        word = word.saturating_add(2 + words);
    }
    Ok(entries)
}

/// One direction of a CoE drive's process data as it reads back: the PDOs its sync
/// manager assignment lists, and their entries in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Assigned {
    /// 0x1C12:01.. (rx) or 0x1C13:01.. (tx).
    pub pdos: Vec<u16>,
    /// How many entries each of those PDOs holds (its subindex 0).
    pub counts: Vec<u8>,
    /// The entries of those PDOs, one after the other (the order of the process image).
    pub entries: Vec<Mapped>,
}

/// Reads back the assignment `assign` (0x1C12 or 0x1C13) and every assigned PDO's entries.
pub(crate) fn coe_assigned(
    io: &mut Io,
    sd: &SubDeviceRef<'_, &SubDevice>,
    t: Duration,
    drive: DriveId,
    assign: u16,
) -> Result<Assigned, BringUpError> {
    let mut out = Assigned::default();
    let n: u8 = sdo_r(io, sd, t, drive, assign, 0)?;
    for k in 1..=n.min(MAX_READ) {
        out.pdos.push(sdo_r(io, sd, t, drive, assign, k)?);
    }
    for &pdo in &out.pdos {
        let n: u8 = sdo_r(io, sd, t, drive, pdo, 0)?;
        out.counts.push(n.min(MAX_READ));
        for k in 1..=n.min(MAX_READ) {
            let word: u32 = sdo_r(io, sd, t, drive, pdo, k)?;
            out.entries
                .push(((word >> 16) as u16, (word >> 8) as u8, word as u8));
        }
    }
    Ok(out)
}

fn sdo_r<T: EtherCrabWireReadSized>(
    io: &mut Io,
    sd: &SubDeviceRef<'_, &SubDevice>,
    t: Duration,
    drive: DriveId,
    index: u16,
    sub: u8,
) -> Result<T, BringUpError> {
    step(io, "PDO mapping read-back", t, sd.sdo_read::<T>(index, sub))?.map_err(|e| {
        BringUpError::Sdo {
            drive,
            step: "PDO mapping read-back",
            index,
            sub,
            reason: e.to_string(),
        }
    })
}

/// Whether a mapped entry is padding: index 0x0000, any bit length.
fn is_padding(&(index, _, bits): &Mapped) -> bool {
    index == 0 && bits > 0
}

/// How a mapped entry reads in a message: the config's name where it has one.
fn mapped_name(&(index, sub, bits): &Mapped) -> String {
    match PdoEntry::from_object(index, sub, bits) {
        Some(e) => format!("\"{}\"", chunkrt_config::entry_name(e)),
        None if index == 0 => format!("{bits} bits of padding"),
        None => format!("{index:#06x}:{sub:02x} ({bits} bits)"),
    }
}

/// Whether the drive's entries, padding left out, are the config's, in the same order.
fn same(want: &[PdoEntry], found: &[Mapped]) -> bool {
    let objects = || found.iter().filter(|m| !is_padding(m));
    want.len() == objects().count()
        && want
            .iter()
            .zip(objects())
            .all(|(w, &(i, s, b))| PdoEntry::from_object(i, s, b) == Some(*w))
}

/// The drive's entries, padding included, as a message names them.
fn list(v: &[Mapped]) -> String {
    v.iter().map(mapped_name).collect::<Vec<_>>().join(", ")
}

/// The drive's entries as `ethercat.pdo` can name them: padding left out.
fn config_list(v: &[Mapped]) -> String {
    let objects: Vec<Mapped> = v.iter().copied().filter(|m| !is_padding(m)).collect();
    list(&objects)
}

fn want_list(v: &[PdoEntry]) -> String {
    v.iter()
        .map(|e| format!("\"{}\"", chunkrt_config::entry_name(*e)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The drive's entries (both directions) that the config has no name for.
fn unknown(rx: &[Mapped], tx: &[Mapped]) -> Vec<String> {
    rx.iter()
        .chain(tx)
        .filter(|&&(i, s, b)| !is_padding(&(i, s, b)) && PdoEntry::from_object(i, s, b).is_none())
        .map(mapped_name)
        .collect()
}

/// Where each object of a drive's mapping sits in its process image, from the drive's own
/// entries (padding included), checked against the config by [`check_fixed_mapping`] or
/// [`check_coe_mapping`] first. An object that does not start on a byte boundary (padding
/// that is not a whole number of bytes before it) is refused: the backend reads and
/// writes whole bytes.
pub(crate) fn layout(
    drive: DriveId,
    rx: &[Mapped],
    tx: &[Mapped],
) -> Result<PdoLayout, BringUpError> {
    let mut l = PdoLayout::default();
    for (dir, entries) in [(PdoDir::Rx, rx), (PdoDir::Tx, tx)] {
        let mut bit = 0usize;
        for m in entries {
            let &(index, sub, bits) = m;
            let at = bit / 8;
            if !is_padding(m) {
                if !bit.is_multiple_of(8) {
                    return Err(BringUpError::Misaligned {
                        drive,
                        dir,
                        found: list(entries),
                        entry: mapped_name(m),
                        bit,
                    });
                }
                // Compared with the config before: an unknown entry is not reached.
                if let Some(e) = PdoEntry::from_object(index, sub, bits) {
                    l.place(e, at);
                }
            }
            bit += usize::from(bits);
        }
        match dir {
            PdoDir::Rx => l.out_len = bit.div_ceil(8),
            PdoDir::Tx => l.in_len = bit.div_ceil(8),
        }
    }
    Ok(l)
}

/// The fixed (SII) mapping of a drive without CoE against the config's lists.
pub(crate) fn check_fixed_mapping(
    drive: DriveId,
    rx: &[PdoEntry],
    tx: &[PdoEntry],
    sii_rx: &[Mapped],
    sii_tx: &[Mapped],
) -> Result<(), BringUpError> {
    for (dir, want, found) in [("rx", rx, sii_rx), ("tx", tx, sii_tx)] {
        if same(want, found) {
            continue;
        }
        let unknown = unknown(sii_rx, sii_tx);
        let hint = if unknown.is_empty() {
            format!(
                "set ethercat.pdo.write = false, rx = [{}] and tx = [{}] (the drive's fixed lists{})",
                config_list(sii_rx),
                config_list(sii_tx),
                if sii_rx.iter().chain(sii_tx).any(is_padding) {
                    ", its padding left out: it is skipped"
                } else {
                    ""
                }
            )
        } else {
            format!(
                "the drive's fixed mapping holds objects chunkrt does not decode ({}): use a \
                 drive with CoE, or one whose fixed mapping holds only the entries \
                 ethercat.pdo knows",
                unknown.join(", ")
            )
        };
        return Err(BringUpError::FixedMapping {
            drive,
            dir,
            found: list(found),
            want: want_list(want),
            hint,
        });
    }
    Ok(())
}

/// The mapping a CoE drive reads back in PRE-OP (after the writes, when `written`) against
/// the config's lists.
pub(crate) fn check_coe_mapping(
    drive: DriveId,
    written: bool,
    rx: &[PdoEntry],
    tx: &[PdoEntry],
    coe_rx: &Assigned,
    coe_tx: &Assigned,
) -> Result<(), BringUpError> {
    for (dir, want, found) in [(PdoDir::Rx, rx, coe_rx), (PdoDir::Tx, tx, coe_tx)] {
        if same(want, &found.entries) {
            continue;
        }
        let (drive_rx, drive_tx) = (config_list(&coe_rx.entries), config_list(&coe_tx.entries));
        let unknown = unknown(&coe_rx.entries, &coe_tx.entries);
        let hint = if written {
            format!(
                "the drive did not take the mapping written to 0x1600/0x1A00 (it reads back \
                 rx = [{drive_rx}], tx = [{drive_tx}]): check in its manual whether its PDO \
                 mapping is fixed or set elsewhere"
            )
        } else if unknown.is_empty() {
            format!(
                "set ethercat.pdo.write = true, or set ethercat.pdo.rx/tx to the drive's \
                 lists: rx = [{drive_rx}], tx = [{drive_tx}]"
            )
        } else {
            format!(
                "set ethercat.pdo.write = true: the drive's mapping holds objects chunkrt \
                 does not decode ({}), so ethercat.pdo.rx/tx cannot name it",
                unknown.join(", ")
            )
        };
        return Err(BringUpError::CoeMapping {
            drive,
            dir,
            pdos: found
                .pdos
                .iter()
                .map(|p| format!("0x{p:04X}"))
                .collect::<Vec<_>>()
                .join(", "),
            found: list(&found.entries),
            want: want_list(want),
            hint,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use PdoEntry::*;

    const DRIVE: DriveId = DriveId {
        position: 2,
        joint: 5,
    };

    fn assigned(pdo: u16, words: &[u32]) -> Assigned {
        Assigned {
            pdos: vec![pdo],
            counts: vec![words.len() as u8],
            entries: words
                .iter()
                .map(|w| ((w >> 16) as u16, (w >> 8) as u8, *w as u8))
                .collect(),
        }
    }

    #[test]
    fn the_configured_words_read_back_are_accepted() {
        let rx = [Controlword, TargetPosition];
        let tx = [Statusword, PositionActual];
        let words = |v: &[PdoEntry]| v.iter().map(|e| e.mapping_word()).collect::<Vec<_>>();
        let r = check_coe_mapping(
            DRIVE,
            true,
            &rx,
            &tx,
            &assigned(0x1600, &words(&rx)),
            &assigned(0x1A00, &words(&tx)),
        );
        assert!(r.is_ok(), "{r:?}");
    }

    #[test]
    fn a_subindex_or_a_size_that_differs_is_not_the_configured_entry() {
        assert_eq!(PdoEntry::from_object(0x6041, 0, 16), Some(Statusword));
        assert_eq!(PdoEntry::from_object(0x6041, 1, 16), None);
        assert_eq!(PdoEntry::from_object(0x6041, 0, 32), None);
        assert_eq!(mapped_name(&(0x1234, 5, 16)), "0x1234:05 (16 bits)");
        assert_eq!(mapped_name(&(0, 0, 8)), "8 bits of padding");
    }

    #[test]
    fn padding_is_skipped_in_the_comparison_and_moves_the_objects_after_it() {
        let rx = [(0x6040, 0, 16), (0, 0, 16), (0x607A, 0, 32), (0, 0, 8)];
        let tx = [(0, 0, 8), (0x6041, 0, 16), (0, 0, 8), (0x6064, 0, 32)];
        let r = check_fixed_mapping(
            DRIVE,
            &[Controlword, TargetPosition],
            &[Statusword, PositionActual],
            &rx,
            &tx,
        );
        assert!(r.is_ok(), "{r:?}");
        let l = layout(DRIVE, &rx, &tx).unwrap();
        assert_eq!((l.controlword, l.target_position, l.out_len), (0, 4, 9));
        assert_eq!((l.statusword, l.position_actual, l.in_len), (1, 4, 8));
        // Padding is not an object the config could list, nor one it does not decode.
        assert!(unknown(&rx, &tx).is_empty());
    }

    #[test]
    fn an_object_after_padding_that_is_not_whole_bytes_is_refused_by_name_and_bit() {
        let rx = [(0, 0, 4), (0x6040, 0, 16), (0, 0, 4), (0x607A, 0, 32)];
        let e = layout(DRIVE, &rx, &[(0x6041, 0, 16), (0x6064, 0, 32)])
            .unwrap_err()
            .to_string();
        for part in [
            "bus position 2 (joint 5",
            "rx mapping is [4 bits of padding, \"controlword\"",
            "\"controlword\" starts at bit 4",
            "not on a byte boundary",
        ] {
            assert!(e.contains(part), "`{part}` missing from: {e}");
        }
    }

    #[test]
    fn a_mismatch_names_the_assignment_both_lists_and_the_fix() {
        let e = check_coe_mapping(
            DRIVE,
            false,
            &[Controlword, TargetPosition],
            &[Statusword, PositionActual],
            &assigned(0x1601, &[0x607A_0020, 0x6040_0010]),
            &assigned(0x1A00, &[0x6041_0010, 0x6064_0020]),
        )
        .unwrap_err()
        .to_string();
        for part in [
            "bus position 2 (joint 5",
            "rx process data",
            "0x1C12 assigns [0x1601]",
            "is [\"target_position\", \"controlword\"]",
            "ethercat.pdo.rx asks for [\"controlword\", \"target_position\"]",
            "set ethercat.pdo.write = true, or set ethercat.pdo.rx/tx to the drive's lists: \
             rx = [\"target_position\", \"controlword\"], tx = [\"statusword\", \
             \"position_actual\"]",
        ] {
            assert!(e.contains(part), "`{part}` missing from: {e}");
        }
    }
}
