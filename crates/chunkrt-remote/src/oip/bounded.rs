//! OIP replies decoded with bounds: protobuf inflates as msgpack does. An empty
//! `outputs` entry is 2 bytes on the wire and a 100-byte `Tensor` once decoded, a
//! `parameters` entry a map node; a 16 MiB reply of them is gigabytes. So a reply is at
//! most [`REPLY_LIMIT_BYTES`] (tonic refuses a larger one from its length prefix, before
//! buffering it), and its top-level fields are counted on the wire before prost decodes
//! it (at most [`MAX_FIELDS`]). Inside a field the messages this client declares hold
//! only strings and packed numbers (at most 8 bytes decoded per byte on the wire) and
//! prost skips what is not declared without keeping it.

use std::marker::PhantomData;

use bytes::Buf;
use tonic::codec::{Codec, DecodeBuf, Decoder};
use tonic::Status;

/// Largest reply read: a chunk of [`crate::scan::MAX_ACTION_ELEMENTS`] FP64 values is
/// 512 KiB; a model's metadata a few KiB.
pub const REPLY_LIMIT_BYTES: usize = 1 << 20;

/// Most top-level fields a reply may hold (every repeated entry is one).
pub const MAX_FIELDS: usize = 4096;

/// prost's codec for requests, and for replies prost after [`count_fields`].
#[derive(Debug)]
pub struct BoundedCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for BoundedCodec<T, U> {
    fn default() -> Self {
        BoundedCodec(PhantomData)
    }
}

impl<T, U> Codec for BoundedCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = tonic_prost::ProstEncoder<T>;
    type Decoder = BoundedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        BoundedDecoder(PhantomData)
    }
}

/// Counts a reply's fields, then decodes it with prost.
#[derive(Debug)]
pub struct BoundedDecoder<U>(PhantomData<U>);

impl<U: prost::Message + Default> Decoder for BoundedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        count_fields(&bytes, MAX_FIELDS).map_err(Status::data_loss)?;
        U::decode(bytes)
            .map(Some)
            .map_err(|e| Status::data_loss(format!("the reply is not the protocol's: {e}")))
    }
}

/// A varint at the front of `rd`, taken.
fn varint(rd: &mut &[u8]) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = rd.split_first().ok_or("a field cut short")?;
        *rd = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a varint longer than 10 bytes".into())
}

/// The number of top-level fields of protobuf message `bytes`, or why it is refused
/// (more than `max`, or not well formed at the top level).
pub fn count_fields(bytes: &[u8], max: usize) -> Result<usize, String> {
    let mut rd = bytes;
    let mut n = 0;
    while !rd.is_empty() {
        n += 1;
        if n > max {
            return Err(format!("the reply holds more than {max} protobuf fields"));
        }
        let key = varint(&mut rd)?;
        let skip = match key & 7 {
            0 => {
                varint(&mut rd)?;
                0
            }
            1 => 8,
            2 => usize::try_from(varint(&mut rd)?).map_err(|_| "a length past the reply")?,
            5 => 4,
            w => return Err(format!("wire type {w} (groups or worse) in the reply")),
        };
        if rd.len() < skip {
            return Err("a field cut short".into());
        }
        rd = &rd[skip..];
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oip::pb;
    use prost::Message;

    #[test]
    fn a_reply_of_many_empty_entries_is_refused_by_count() {
        let reply = pb::ModelInferResponse {
            model_name: "flow".into(),
            id: "1".into(),
            outputs: vec![pb::Tensor::default(); 5000],
            ..Default::default()
        };
        let bytes = reply.encode_to_vec();
        // 10 kB on the wire: 5000 empty tensors of 2 bytes each.
        assert!(bytes.len() < 10_100, "{}", bytes.len());
        let e = count_fields(&bytes, MAX_FIELDS).unwrap_err();
        assert!(e.contains("more than 4096 protobuf fields"), "{e}");
        let ok = pb::ModelInferResponse {
            outputs: vec![pb::Tensor::default(); 3],
            raw_output_contents: vec![vec![0; 100_000]],
            ..reply
        };
        assert_eq!(count_fields(&ok.encode_to_vec(), MAX_FIELDS), Ok(6));
        let cut = ok.encode_to_vec();
        let e = count_fields(&cut[..cut.len() - 1], MAX_FIELDS).unwrap_err();
        assert!(e.contains("cut short"), "{e}");
    }
}
