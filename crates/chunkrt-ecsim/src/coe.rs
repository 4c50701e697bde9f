//! The mailbox and CoE SDO server: expedited and normal (single-frame) upload and download,
//! abort codes, and mailbox error replies for protocols the drive does not speak.

use crate::od::{abort, Objects, Value};

/// Mailbox header length.
const HDR: usize = 6;
/// Mailbox type: error reply.
const TYPE_ERR: u8 = 0x00;
/// Mailbox type: CANopen over EtherCAT.
const TYPE_COE: u8 = 0x03;
/// CoE service: SDO request (also used for an abort from the server).
const SVC_SDO_REQ: u8 = 0x02;
/// CoE service: SDO response.
const SVC_SDO_RESP: u8 = 0x03;

/// Mailbox error codes (ETG.1000.4 table 30).
mod mbx_err {
    pub const UNSUPPORTED_PROTOCOL: u16 = 0x0002;
    pub const SERVICE_NOT_SUPPORTED: u16 = 0x0004;
    pub const INVALID_HEADER: u16 = 0x0005;
    pub const SIZE_TOO_SHORT: u16 = 0x0006;
}

/// The mailbox side of one drive: its reply counter.
#[derive(Clone, Debug, Default)]
pub struct MailboxServer {
    counter: u8,
}

impl MailboxServer {
    fn next_counter(&mut self) -> u8 {
        self.counter = if self.counter >= 7 {
            1
        } else {
            self.counter + 1
        };
        self.counter
    }

    fn header(&mut self, resp: &mut [u8], len: usize, ty: u8) {
        resp[0..2].copy_from_slice(&(len as u16).to_le_bytes());
        resp[2..5].fill(0);
        resp[5] = ty | (self.next_counter() << 4);
    }

    fn mailbox_error(&mut self, resp: &mut [u8], code: u16) -> usize {
        self.header(resp, 4, TYPE_ERR);
        resp[6..8].copy_from_slice(&0x0001u16.to_le_bytes()); // command: mailbox error
        resp[8..10].copy_from_slice(&code.to_le_bytes());
        HDR + 4
    }

    fn sdo_abort(&mut self, resp: &mut [u8], index: u16, sub: u8, code: u32) -> usize {
        self.header(resp, 10, TYPE_COE);
        resp[6..8].copy_from_slice(&(u16::from(SVC_SDO_REQ) << 12).to_le_bytes());
        resp[8] = 0x80;
        resp[9..11].copy_from_slice(&index.to_le_bytes());
        resp[11] = sub;
        resp[12..16].copy_from_slice(&code.to_le_bytes());
        HDR + 10
    }

    /// Serve one request from the output mailbox; writes the reply into `resp` (the input
    /// mailbox, at least 16 bytes) and returns its length, or `None` when no reply is due (an
    /// abort from the master, or an empty mailbox).
    pub fn serve(
        &mut self,
        req: &[u8],
        objs: &mut Objects,
        al_state: u8,
        resp: &mut [u8],
    ) -> Option<usize> {
        if req.len() < HDR || resp.len() < HDR + 16 {
            return None;
        }
        let len = usize::from(u16::from_le_bytes([req[0], req[1]]));
        if len == 0 {
            return None;
        }
        if HDR + len > req.len() {
            return Some(self.mailbox_error(resp, mbx_err::INVALID_HEADER));
        }
        if req[5] & 0x0F != TYPE_COE {
            return Some(self.mailbox_error(resp, mbx_err::UNSUPPORTED_PROTOCOL));
        }
        if len < 10 {
            return Some(self.mailbox_error(resp, mbx_err::SIZE_TOO_SHORT));
        }
        let service = req[7] >> 4;
        if service != SVC_SDO_REQ {
            return Some(self.mailbox_error(resp, mbx_err::SERVICE_NOT_SUPPORTED));
        }
        let command = req[8];
        let index = u16::from_le_bytes([req[9], req[10]]);
        let sub = req[11];
        let ccs = command >> 5;
        if ccs == 4 {
            return None; // the master aborted; nothing to answer
        }
        if command & 0x10 != 0 {
            return Some(self.sdo_abort(resp, index, sub, abort::UNSUPPORTED_ACCESS));
        }
        let body = &req[HDR + 6..HDR + len]; // bytes after index/sub-index
        let result = match ccs {
            1 => self.download(command, index, sub, body, objs, al_state, resp),
            2 => self.upload(index, sub, objs, resp),
            _ => Err(abort::BAD_COMMAND),
        };
        Some(result.unwrap_or_else(|code| self.sdo_abort(resp, index, sub, code)))
    }

    #[allow(clippy::too_many_arguments)]
    fn download(
        &mut self,
        command: u8,
        index: u16,
        sub: u8,
        body: &[u8],
        objs: &mut Objects,
        al_state: u8,
        resp: &mut [u8],
    ) -> Result<usize, u32> {
        let data = if command & 0x02 != 0 {
            let n = if command & 0x01 != 0 {
                4 - usize::from((command >> 2) & 0x03)
            } else {
                // Size not indicated: the object's own size decides (CiA 301).
                match objs.read(index, sub)? {
                    Value::Num(_, n) => n,
                    Value::Str(_) => 4,
                }
            };
            body.get(..n).ok_or(abort::TOO_SHORT)?
        } else {
            let size = body.get(..4).ok_or(abort::TOO_SHORT)?;
            let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]) as usize;
            // Data that does not fit this mailbox would need segmented transfer.
            body.get(4..4 + size).ok_or(abort::UNSUPPORTED_ACCESS)?
        };
        objs.write(index, sub, data, al_state)?;
        self.header(resp, 10, TYPE_COE);
        resp[6..8].copy_from_slice(&(u16::from(SVC_SDO_RESP) << 12).to_le_bytes());
        resp[8] = 0x60;
        resp[9..11].copy_from_slice(&index.to_le_bytes());
        resp[11] = sub;
        resp[12..16].fill(0);
        Ok(HDR + 10)
    }

    fn upload(
        &mut self,
        index: u16,
        sub: u8,
        objs: &Objects,
        resp: &mut [u8],
    ) -> Result<usize, u32> {
        let value = objs.read(index, sub)?;
        let bytes = value.bytes();
        let n = bytes.len();
        let (command, len) = if n <= 4 && matches!(value, Value::Num(..)) {
            (0x43 | (((4 - n) as u8) << 2), 10)
        } else {
            if HDR + 10 + n > resp.len() {
                return Err(abort::UNSUPPORTED_ACCESS);
            }
            (0x41, 10 + n)
        };
        self.header(resp, len, TYPE_COE);
        resp[6..8].copy_from_slice(&(u16::from(SVC_SDO_RESP) << 12).to_le_bytes());
        resp[8] = command;
        resp[9..11].copy_from_slice(&index.to_le_bytes());
        resp[11] = sub;
        resp[12..16].fill(0);
        if command == 0x41 {
            resp[12..16].copy_from_slice(&(n as u32).to_le_bytes());
            resp[16..16 + n].copy_from_slice(bytes);
        } else {
            resp[12..12 + n].copy_from_slice(bytes);
        }
        Ok(HDR + len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cia402::Drive;
    use crate::config::DriveParams;
    use crate::od::Identity;

    fn objs() -> Objects {
        let id = Identity {
            vendor_id: 0xCE5,
            product_code: 2,
            revision: 3,
            serial: 4,
        };
        Objects::new(Drive::new(&DriveParams::default(), 0), id)
    }

    fn request(command: u8, index: u16, sub: u8, data: [u8; 4]) -> [u8; 16] {
        let mut r = [0u8; 16];
        r[0] = 10;
        r[5] = 0x13;
        r[7] = 0x20;
        r[8] = command;
        r[9..11].copy_from_slice(&index.to_le_bytes());
        r[11] = sub;
        r[12..16].copy_from_slice(&data);
        r
    }

    #[test]
    fn expedited_upload_of_vendor_id() {
        let mut s = MailboxServer::default();
        let mut o = objs();
        let mut resp = [0u8; 128];
        let n = s
            .serve(&request(0x40, 0x1018, 1, [0; 4]), &mut o, 2, &mut resp)
            .unwrap();
        assert_eq!(n, 16);
        assert_eq!(resp[8], 0x43);
        assert_eq!(
            u32::from_le_bytes([resp[12], resp[13], resp[14], resp[15]]),
            0xCE5
        );
    }

    #[test]
    fn missing_object_aborts() {
        let mut s = MailboxServer::default();
        let mut o = objs();
        let mut resp = [0u8; 128];
        s.serve(&request(0x40, 0x2000, 0, [0; 4]), &mut o, 2, &mut resp)
            .unwrap();
        assert_eq!(resp[8], 0x80);
        assert_eq!(
            u32::from_le_bytes([resp[12], resp[13], resp[14], resp[15]]),
            abort::NO_OBJECT
        );
    }

    #[test]
    fn wrong_size_download_aborts() {
        let mut s = MailboxServer::default();
        let mut o = objs();
        let mut resp = [0u8; 128];
        // 4-byte write to the 1-byte 0x6060.
        s.serve(
            &request(0x23, 0x6060, 0, [8, 0, 0, 0]),
            &mut o,
            2,
            &mut resp,
        )
        .unwrap();
        assert_eq!(
            u32::from_le_bytes([resp[12], resp[13], resp[14], resp[15]]),
            abort::TOO_LONG
        );
        // 1-byte write succeeds.
        s.serve(
            &request(0x2F, 0x6060, 0, [8, 0, 0, 0]),
            &mut o,
            2,
            &mut resp,
        )
        .unwrap();
        assert_eq!(resp[8], 0x60);
        assert_eq!(o.drive.mode, 8);
    }

    #[test]
    fn string_upload_is_normal_transfer() {
        let mut s = MailboxServer::default();
        let mut o = objs();
        let mut resp = [0u8; 128];
        let n = s
            .serve(&request(0x40, 0x1008, 0, [0; 4]), &mut o, 2, &mut resp)
            .unwrap();
        assert_eq!(resp[8], 0x41);
        let size = u32::from_le_bytes([resp[12], resp[13], resp[14], resp[15]]) as usize;
        assert_eq!(
            &resp[16..16 + size],
            b"chunkrt simulated CiA 402 servo drive"
        );
        assert_eq!(n, 16 + size);
    }

    #[test]
    fn non_coe_gets_mailbox_error() {
        let mut s = MailboxServer::default();
        let mut o = objs();
        let mut resp = [0u8; 128];
        let mut r = request(0x40, 0x1018, 1, [0; 4]);
        r[5] = 0x14; // FoE
        s.serve(&r, &mut o, 2, &mut resp).unwrap();
        assert_eq!(resp[5] & 0x0F, 0);
        assert_eq!(u16::from_le_bytes([resp[8], resp[9]]), 0x0002);
    }
}
