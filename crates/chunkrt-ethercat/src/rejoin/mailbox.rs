//! CoE SDO transfers written into a drive's mailbox by hand: an expedited download or
//! upload request for sync manager 0, and the reading of the reply from sync manager 1
//! (ETG.1000.6 5.6.2). ethercrab's own SDO calls are futures that borrow the MainDevice and
//! the group for the whole transfer; the rejoin spreads a transfer over several cycles, one
//! register access each, so it frames the requests itself.

/// One SDO the rejoin sends: a download of `value`, or an upload whose value must be
/// `value` (`check`), `size` bytes (1, 2 or 4: all expedited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sdo {
    pub index: u16,
    pub sub: u8,
    pub size: u8,
    pub value: u32,
    /// Upload and compare instead of download.
    pub check: bool,
}

/// What a reply in sync manager 1 says about the SDO in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Done: downloaded, or uploaded with the expected value.
    Done,
    /// The reply of another request (a duplicate of an earlier one): wait for ours.
    Other,
    /// Not a CoE SDO reply (a mailbox error, say): send the request again.
    Garbled,
    /// The drive refused it (abort) or holds another value.
    Refused,
}

/// Mailbox type CoE.
const MBX_COE: u8 = 0x03;
/// CoE service: SDO request / SDO response.
const COE_SDO_REQUEST: u16 = 2;
const COE_SDO_RESPONSE: u16 = 3;

fn mask(size: u8) -> u32 {
    match size {
        1 => 0xFF,
        2 => 0xFFFF,
        3 => 0xFF_FFFF,
        _ => u32::MAX,
    }
}

/// Writes the request for `sdo` into `buf` (the whole of sync manager 0: the write must
/// reach its last byte for the drive to take it). `counter` is the mailbox counter, 1..=7.
pub(crate) fn request(sdo: &Sdo, counter: u8, buf: &mut [u8]) {
    buf.fill(0);
    if buf.len() < 16 {
        return; // checked when the plan is made
    }
    buf[0..2].copy_from_slice(&10u16.to_le_bytes());
    buf[5] = MBX_COE | ((counter & 0x07) << 4);
    buf[6..8].copy_from_slice(&(COE_SDO_REQUEST << 12).to_le_bytes());
    buf[8] = if sdo.check {
        0x40 // initiate upload
    } else {
        // Initiate download, expedited, size indicated: 4 - size bytes unused.
        0x23 | ((4 - sdo.size.clamp(1, 4)) << 2)
    };
    buf[9..11].copy_from_slice(&sdo.index.to_le_bytes());
    buf[11] = sdo.sub;
    if !sdo.check {
        buf[12..16].copy_from_slice(&(sdo.value & mask(sdo.size)).to_le_bytes());
    }
}

/// Reads the reply in `buf` (sync manager 1's contents) against the SDO in flight.
pub(crate) fn reply(sdo: &Sdo, buf: &[u8]) -> Reply {
    if buf.len() < 16 {
        return Reply::Garbled;
    }
    let service = u16::from_le_bytes([buf[6], buf[7]]) >> 12;
    if buf[5] & 0x0F != MBX_COE || service != COE_SDO_RESPONSE && service != COE_SDO_REQUEST {
        return Reply::Garbled;
    }
    let (cmd, index, sub) = (buf[8], u16::from_le_bytes([buf[9], buf[10]]), buf[11]);
    if (index, sub) != (sdo.index, sdo.sub) {
        return Reply::Other;
    }
    if cmd == 0x80 {
        return Reply::Refused; // abort, code in bytes 12..16
    }
    let value = u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]);
    match (sdo.check, cmd) {
        (false, 0x60) => Reply::Done,
        (true, c) if c & 0xE0 == 0x40 && c & 0x02 != 0 => {
            let m = mask(sdo.size);
            if value & m == sdo.value & m {
                Reply::Done
            } else {
                Reply::Refused
            }
        }
        // A segmented upload (more than 4 bytes) is not what was asked.
        (true, c) if c & 0xE0 == 0x40 => Reply::Refused,
        _ => Reply::Garbled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_and_upload_requests_are_framed_as_etg_1000_6_says() {
        let mut b = [0u8; 128];
        let d = Sdo {
            index: 0x6060,
            sub: 0,
            size: 1,
            value: 8,
            check: false,
        };
        request(&d, 3, &mut b);
        assert_eq!(
            &b[..16],
            &[10, 0, 0, 0, 0, 0x33, 0, 0x20, 0x2F, 0x60, 0x60, 0, 8, 0, 0, 0]
        );
        let u = Sdo { check: true, ..d };
        request(&u, 1, &mut b);
        assert_eq!(b[8], 0x40);
        assert_eq!(&b[12..16], &[0; 4]);
        let w = Sdo {
            index: 0x1600,
            sub: 1,
            size: 4,
            value: 0x6040_0010,
            check: false,
        };
        request(&w, 1, &mut b);
        assert_eq!(b[8], 0x23);
    }

    #[test]
    fn replies_are_matched_by_object_and_value() {
        let u = Sdo {
            index: 0x1C12,
            sub: 1,
            size: 2,
            value: 0x1600,
            check: true,
        };
        let mut r = [0u8; 128];
        r[5] = 0x03;
        r[6..8].copy_from_slice(&(3u16 << 12).to_le_bytes());
        r[8] = 0x4B;
        r[9..11].copy_from_slice(&0x1C12u16.to_le_bytes());
        r[11] = 1;
        r[12..14].copy_from_slice(&0x1600u16.to_le_bytes());
        assert_eq!(reply(&u, &r), Reply::Done);
        r[12] = 0x01;
        assert_eq!(reply(&u, &r), Reply::Refused, "another PDO assigned");
        r[11] = 2;
        assert_eq!(reply(&u, &r), Reply::Other);
        r[11] = 1;
        r[8] = 0x80;
        assert_eq!(reply(&u, &r), Reply::Refused, "abort");
        r[5] = 0x01;
        assert_eq!(reply(&u, &r), Reply::Garbled);
    }
}
