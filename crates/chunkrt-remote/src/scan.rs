//! msgpack read in place, with bounds: no value tree is built for a reply.
//!
//! A msgpack message of tiny elements inflates when decoded into a tree (`rmpv::Value`
//! is 32 bytes per element, a map entry 64, against one byte on the wire): a 16 MiB
//! reply of nils becomes half a gigabyte, and under `mlockall(MCL_FUTURE)` a failed
//! allocation aborts the process. So a chunk's reply is walked where it lies: the
//! top-level map's keys are compared as they come, `actions` is read straight into an
//! [`NdArray`], `request_id` and `server_timing.infer_ms` into numbers, and everything
//! else is skipped without a byte allocated. Every walk counts the elements it meets
//! (at most [`MAX_ELEMENTS`]) and the nesting (at most [`MAX_DEPTH`]); the bytes are
//! bounded before (the WebSocket's `max_message_size`). The metadata message, read once
//! per connection as a tree, is walked the same way first ([`check_bounded`]).

use rmp::Marker;

use rmpv::Value;

use crate::codec::{CodecError, DType, NdArray, MAX_DEPTH};

/// Most msgpack elements (values and map keys; an array's `data` bytes are one) a
/// message may hold. openpi's replies hold a few dozen; a tree of this many is about
/// 4 MiB.
pub const MAX_ELEMENTS: usize = 1 << 16;

/// Most elements the actions array may have (1024 setpoints of 64 joints): it is made
/// f64 values, up to 8 times its bytes.
pub const MAX_ACTION_ELEMENTS: usize = 1 << 16;

/// The key of the request's sequence number, which the reply must echo (chunkrt's
/// addition to openpi's protocol, which carries none: see `openpi`).
pub const REQUEST_ID: &str = "request_id";

/// What a chunk's reply holds, read in place.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reply {
    /// The actions array.
    pub actions: Option<NdArray>,
    /// The request's sequence number, as the server echoed it.
    pub request_id: Option<u64>,
    /// `server_timing.infer_ms`, the server's own time.
    pub infer_ms: Option<f64>,
}

/// One element's head: its kind, and for scalars, strings and binaries its value.
enum Head<'a> {
    Nil,
    Bool,
    Uint(u64),
    Int(i64),
    Float(f64),
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Ext,
    Array(usize),
    Map(usize),
}

/// A cursor over a message, counting the elements it reads.
struct Scan<'a> {
    rd: &'a [u8],
    left: usize,
}

fn cut() -> CodecError {
    CodecError::Msgpack("the message is cut short".into())
}

impl<'a> Scan<'a> {
    fn new(bytes: &'a [u8]) -> Scan<'a> {
        Scan {
            rd: bytes,
            left: MAX_ELEMENTS,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.rd.len() < n {
            return Err(cut());
        }
        let (head, rest) = self.rd.split_at(n);
        self.rd = rest;
        Ok(head)
    }

    /// A big-endian unsigned integer of `n` bytes (1, 2, 4 or 8).
    fn be(&mut self, n: usize) -> Result<u64, CodecError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |v, &b| (v << 8) | u64::from(b)))
    }

    fn len(&mut self, n: usize) -> Result<usize, CodecError> {
        usize::try_from(self.be(n)?).map_err(|_| cut())
    }

    /// The next element's head (its strings' and binaries' bytes taken).
    fn head(&mut self) -> Result<Head<'a>, CodecError> {
        if self.left == 0 {
            return Err(CodecError::Msgpack(format!(
                "more than {MAX_ELEMENTS} msgpack elements"
            )));
        }
        self.left -= 1;
        let b = self.take(1)?[0];
        Ok(match Marker::from_u8(b) {
            Marker::FixPos(v) => Head::Uint(u64::from(v)),
            Marker::FixNeg(v) => Head::Int(i64::from(v)),
            Marker::Null => Head::Nil,
            Marker::True | Marker::False => Head::Bool,
            Marker::U8 => Head::Uint(self.be(1)?),
            Marker::U16 => Head::Uint(self.be(2)?),
            Marker::U32 => Head::Uint(self.be(4)?),
            Marker::U64 => Head::Uint(self.be(8)?),
            Marker::I8 => Head::Int(i64::from(self.be(1)? as u8 as i8)),
            Marker::I16 => Head::Int(i64::from(self.be(2)? as u16 as i16)),
            Marker::I32 => Head::Int(i64::from(self.be(4)? as u32 as i32)),
            Marker::I64 => Head::Int(self.be(8)? as i64),
            Marker::F32 => Head::Float(f64::from(f32::from_bits(self.be(4)? as u32))),
            Marker::F64 => Head::Float(f64::from_bits(self.be(8)?)),
            Marker::FixStr(n) => Head::Str(self.take(usize::from(n))?),
            Marker::Str8 => Head::Str(self.sized(1)?),
            Marker::Str16 => Head::Str(self.sized(2)?),
            Marker::Str32 => Head::Str(self.sized(4)?),
            Marker::Bin8 => Head::Bin(self.sized(1)?),
            Marker::Bin16 => Head::Bin(self.sized(2)?),
            Marker::Bin32 => Head::Bin(self.sized(4)?),
            Marker::FixArray(n) => Head::Array(usize::from(n)),
            Marker::Array16 => Head::Array(self.len(2)?),
            Marker::Array32 => Head::Array(self.len(4)?),
            Marker::FixMap(n) => Head::Map(usize::from(n)),
            Marker::Map16 => Head::Map(self.len(2)?),
            Marker::Map32 => Head::Map(self.len(4)?),
            Marker::FixExt1 => self.ext(1)?,
            Marker::FixExt2 => self.ext(2)?,
            Marker::FixExt4 => self.ext(4)?,
            Marker::FixExt8 => self.ext(8)?,
            Marker::FixExt16 => self.ext(16)?,
            Marker::Ext8 => self.ext_sized(1)?,
            Marker::Ext16 => self.ext_sized(2)?,
            Marker::Ext32 => self.ext_sized(4)?,
            Marker::Reserved => return Err(CodecError::Msgpack("reserved byte 0xc1".into())),
        })
    }

    /// The bytes of a string or binary whose length takes `n` bytes.
    fn sized(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let len = self.len(n)?;
        self.take(len)
    }

    /// An extension of `len` data bytes (and its type byte), skipped.
    fn ext(&mut self, len: usize) -> Result<Head<'a>, CodecError> {
        self.take(1 + len)?;
        Ok(Head::Ext)
    }

    fn ext_sized(&mut self, n: usize) -> Result<Head<'a>, CodecError> {
        let len = self.len(n)?;
        self.ext(len)
    }

    /// Skips what follows `head` (an array's or a map's elements), `depth` deep.
    fn skip(&mut self, head: Head<'a>, depth: usize) -> Result<(), CodecError> {
        let n = match head {
            Head::Array(n) => n,
            Head::Map(n) => n.checked_mul(2).ok_or_else(cut)?,
            _ => return Ok(()),
        };
        if depth >= MAX_DEPTH {
            return Err(CodecError::Msgpack(format!(
                "nested deeper than {MAX_DEPTH}"
            )));
        }
        for _ in 0..n {
            let h = self.head()?;
            self.skip(h, depth + 1)?;
        }
        Ok(())
    }

    /// A map key's bytes (str or bin), or `None` after skipping a key of another kind.
    fn key(&mut self, depth: usize) -> Result<Option<&'a [u8]>, CodecError> {
        match self.head()? {
            Head::Str(k) | Head::Bin(k) => Ok(Some(k)),
            other => self.skip(other, depth).map(|_| None),
        }
    }

    /// A number (int, float, or a NumPy scalar map), or `None` after skipping anything
    /// else.
    fn number(&mut self, depth: usize) -> Result<Option<f64>, CodecError> {
        match self.head()? {
            Head::Uint(v) => Ok(Some(v as f64)),
            Head::Int(v) => Ok(Some(v as f64)),
            Head::Float(v) => Ok(Some(v)),
            Head::Map(n) => {
                let mut found = None;
                for _ in 0..n {
                    match self.key(depth + 1)? {
                        Some(b"data") => found = self.number(depth + 1)?,
                        _ => self.skip_value(depth + 1)?,
                    }
                }
                Ok(found)
            }
            other => self.skip(other, depth).map(|_| None),
        }
    }

    fn skip_value(&mut self, depth: usize) -> Result<(), CodecError> {
        let h = self.head()?;
        self.skip(h, depth)
    }

    /// `server_timing`'s `infer_ms`, or `None` when it is not there or not a number.
    fn timing(&mut self, depth: usize) -> Result<Option<f64>, CodecError> {
        let n = match self.head()? {
            Head::Map(n) => n,
            other => return self.skip(other, depth).map(|_| None),
        };
        let mut ms = None;
        for _ in 0..n {
            match self.key(depth + 1)? {
                Some(b"infer_ms") => ms = self.number(depth + 1)?,
                _ => self.skip_value(depth + 1)?,
            }
        }
        Ok(ms)
    }

    /// An array in msgpack_numpy's layout, its data copied out (after its shape and
    /// size are checked).
    fn ndarray(&mut self, depth: usize) -> Result<NdArray, CodecError> {
        let Head::Map(n) = self.head()? else {
            return Err(CodecError::Array("not a NumPy array (not a map)".into()));
        };
        let (mut flag, mut data, mut dtype, mut shape) = (false, None, None, None);
        for _ in 0..n {
            match self.key(depth + 1)? {
                Some(b"__ndarray__") => {
                    flag = true;
                    self.skip_value(depth + 1)?;
                }
                Some(b"data") => match self.head()? {
                    Head::Bin(b) => data = Some(b),
                    _ => return Err(CodecError::Array("data is not bytes".into())),
                },
                Some(b"dtype") => match self.head()? {
                    Head::Str(s) => {
                        let s = std::str::from_utf8(s)
                            .map_err(|_| CodecError::Array("dtype is not text".into()))?;
                        dtype = Some(DType::parse(s)?);
                    }
                    _ => return Err(CodecError::Array("dtype is not a string".into())),
                },
                Some(b"shape") => shape = Some(self.shape()?),
                _ => self.skip_value(depth + 1)?,
            }
        }
        if !flag {
            return Err(CodecError::Array(
                "not a NumPy array (no __ndarray__)".into(),
            ));
        }
        let missing = |f: &str| CodecError::Array(format!("no {f:?} field"));
        let (data, dtype, shape) = (
            data.ok_or_else(|| missing("data"))?,
            dtype.ok_or_else(|| missing("dtype"))?,
            shape.ok_or_else(|| missing("shape"))?,
        );
        let elements = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .filter(|&n| n <= MAX_ACTION_ELEMENTS)
            .ok_or_else(|| {
                CodecError::Array(format!(
                    "shape {shape:?} has more than {MAX_ACTION_ELEMENTS} elements"
                ))
            })?;
        if elements * dtype.size() != data.len() {
            return Err(CodecError::Array(format!(
                "shape {shape:?} of {} needs {} bytes, data has {}",
                dtype.name(),
                elements * dtype.size(),
                data.len()
            )));
        }
        Ok(NdArray {
            dtype,
            shape,
            data: data.to_vec(),
        })
    }

    /// An array's shape: a list of at most [`MAX_DEPTH`] sizes.
    fn shape(&mut self) -> Result<Vec<usize>, CodecError> {
        let n = match self.head()? {
            Head::Array(n) if n <= MAX_DEPTH => n,
            _ => {
                return Err(CodecError::Array(format!(
                    "shape is not a list of at most {MAX_DEPTH} sizes"
                )))
            }
        };
        (0..n)
            .map(|_| match self.head()? {
                Head::Uint(d) => usize::try_from(d)
                    .map_err(|_| CodecError::Array(format!("shape entry {d} is not a size"))),
                _ => Err(CodecError::Array("a shape entry is not a size".into())),
            })
            .collect()
    }

    fn end(&self) -> Result<(), CodecError> {
        if self.rd.is_empty() {
            Ok(())
        } else {
            Err(CodecError::Msgpack(format!(
                "{} bytes after the message",
                self.rd.len()
            )))
        }
    }
}

/// Checks that `bytes` is one msgpack value of at most [`MAX_ELEMENTS`] elements and
/// [`MAX_DEPTH`] levels, with nothing after it, without decoding it.
pub fn check_bounded(bytes: &[u8]) -> Result<(), CodecError> {
    let mut s = Scan::new(bytes);
    s.skip_value(0)?;
    s.end()
}

/// The one msgpack value `bytes` holds (trailing bytes are an error), as a tree: for
/// small messages only (the metadata). The message is walked first without a tree, its
/// elements counted ([`check_bounded`]), so the tree is at most
/// [`MAX_ELEMENTS`] values however the bytes are spent.
pub fn decode(bytes: &[u8]) -> Result<Value, CodecError> {
    check_bounded(bytes)?;
    let mut rd = bytes;
    let v = rmpv::decode::read_value_with_max_depth(&mut rd, MAX_DEPTH)
        .map_err(|e| CodecError::Msgpack(e.to_string()))?;
    if !rd.is_empty() {
        return Err(CodecError::Msgpack(format!(
            "{} bytes after the message",
            rd.len()
        )));
    }
    Ok(v)
}

/// A chunk's reply: a map whose `actions_key` is an array in msgpack_numpy's layout,
/// `request_id` the request's echoed sequence number and `server_timing.infer_ms` the
/// server's time; other keys are skipped unread. Two `actions_key` or `request_id`
/// entries are refused (which one would a Python server have meant?).
pub fn read_reply(bytes: &[u8], actions_key: &str) -> Result<Reply, CodecError> {
    let mut s = Scan::new(bytes);
    let Head::Map(n) = s.head()? else {
        return Err(CodecError::Msgpack("the reply is not a map".into()));
    };
    let mut reply = Reply::default();
    let twice = |k: &str| CodecError::Msgpack(format!("the reply has {k:?} twice"));
    for _ in 0..n {
        match s.key(1)? {
            Some(k) if k == actions_key.as_bytes() => {
                if reply.actions.is_some() {
                    return Err(twice(actions_key));
                }
                let a = s
                    .ndarray(1)
                    .map_err(|e| CodecError::Array(format!("{actions_key:?}: {e}")))?;
                reply.actions = Some(a);
            }
            Some(k) if k == REQUEST_ID.as_bytes() => {
                if reply.request_id.is_some() {
                    return Err(twice(REQUEST_ID));
                }
                match s.head()? {
                    Head::Uint(v) => reply.request_id = Some(v),
                    _ => {
                        return Err(CodecError::Msgpack(format!(
                            "{REQUEST_ID:?} is not an unsigned integer"
                        )))
                    }
                }
            }
            Some(b"server_timing") => reply.infer_ms = s.timing(1)?,
            _ => s.skip_value(1)?,
        }
    }
    s.end()?;
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode;

    fn reply(extra: Vec<(Value, Value)>) -> Vec<u8> {
        let a = NdArray::f32(&[2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]);
        let mut m = vec![
            (Value::from("actions"), a.to_value()),
            (Value::from(REQUEST_ID), Value::from(7u64)),
            (
                Value::from("server_timing"),
                Value::Map(vec![(Value::from("infer_ms"), Value::from(2.5))]),
            ),
        ];
        m.extend(extra);
        encode(&Value::Map(m))
    }

    #[test]
    fn a_reply_is_read_in_place_other_keys_skipped() {
        let junk = Value::Array(vec![
            Value::Map(vec![(Value::from("x"), Value::from(-3))]),
            Value::Binary(vec![0; 100]),
            Value::Ext(4, vec![1, 2, 3]),
            Value::F32(1.5),
            Value::Nil,
        ]);
        let r = read_reply(&reply(vec![(Value::from("state"), junk)]), "actions").unwrap();
        let a = r.actions.unwrap();
        assert_eq!(a.shape, [2, 3]);
        assert_eq!(a.to_f64(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]);
        assert_eq!((r.request_id, r.infer_ms), (Some(7), Some(2.5)));
        // The same message as a tree.
        let tree = decode(&reply(vec![])).unwrap();
        assert_eq!(crate::codec::get_f64(&tree, REQUEST_ID), Some(7.0));
        assert!(decode(&[0xc4, 0x05, 1, 2]).is_err(), "a bin cut short");
        assert!(decode(&[0x01, 0x02]).is_err(), "trailing bytes");
    }

    #[test]
    fn a_reply_of_many_tiny_elements_is_refused_by_count() {
        // 16 MiB of nils: one byte each on the wire, 32 in a tree.
        let n = 16 << 20;
        let mut bytes = reply(vec![]);
        bytes[0] += 1; // one more map entry (a fixmap of 3 -> 4)
        bytes.extend_from_slice(&encode(&Value::from("junk")));
        bytes.push(0xdd); // array32
        bytes.extend_from_slice(&(n as u32).to_be_bytes());
        bytes.resize(bytes.len() + n, 0xc0);
        let e = read_reply(&bytes, "actions").unwrap_err().to_string();
        assert!(e.contains("more than 65536 msgpack elements"), "{e}");
        let e = check_bounded(&bytes).unwrap_err().to_string();
        assert!(e.contains("more than 65536 msgpack elements"), "{e}");
        let e = decode(&bytes).unwrap_err().to_string();
        assert!(e.contains("more than 65536 msgpack elements"), "{e}");
    }

    #[test]
    fn malformed_replies_are_refused_by_name() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (reply(vec![])[..20].to_vec(), "cut short"),
            (
                reply(vec![(Value::from("actions"), Value::Nil)]),
                "\"actions\" twice",
            ),
            (
                reply(vec![(Value::from(REQUEST_ID), Value::from(8u64))]),
                "\"request_id\" twice",
            ),
            (encode(&Value::from(3)), "not a map"),
            (
                encode(&Value::Map(vec![(
                    Value::from("actions"),
                    Value::Map(vec![(Value::from("data"), Value::Binary(vec![0; 4]))]),
                )])),
                "no __ndarray__",
            ),
            (
                encode(&Value::Map(vec![(
                    Value::from("actions"),
                    NdArray::f32(&[300, 300], vec![0.0; 90_000]).to_value(),
                )])),
                "more than 65536 elements",
            ),
            ([reply(vec![]), vec![0xc0]].concat(), "1 bytes after"),
        ];
        for (bytes, says) in cases {
            let e = read_reply(&bytes, "actions").unwrap_err().to_string();
            assert!(e.contains(says), "expected {says:?} in {e}");
        }
        // Nested deeper than MAX_DEPTH under a skipped key.
        let mut deep = Value::Nil;
        for _ in 0..40 {
            deep = Value::Array(vec![deep]);
        }
        let e = read_reply(&reply(vec![(Value::from("x"), deep)]), "actions")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nested deeper"), "{e}");
        // A missing request_id or actions is not the codec's to judge.
        let bare = encode(&Value::Map(vec![(Value::from("a"), Value::from(1))]));
        assert_eq!(read_reply(&bare, "actions").unwrap(), Reply::default());
    }
}
