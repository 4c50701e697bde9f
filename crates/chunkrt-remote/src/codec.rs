//! msgpack with NumPy arrays, in the layout of `openpi_client.msgpack_numpy` (adapted from
//! `msgpack-numpy` without its pickle fallback): an array is a map
//! `{b"__ndarray__": True, b"data": <raw bytes>, b"dtype": "<f4", b"shape": [..]}`, its
//! keys msgpack *bin* strings, its `dtype` NumPy's `dtype.str`; a NumPy scalar is
//! `{b"__npgeneric__": True, b"data": <value>, b"dtype": ..}`. Nothing but plain values
//! and arrays of numbers crosses the wire: no object arrays, no pickle.

use rmpv::Value;

/// Deepest nesting a message may have (openpi's messages are two or three deep).
pub const MAX_DEPTH: usize = 16;

/// Why a message could not be read or an array could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    /// Not msgpack (or cut short, or nested deeper than [`MAX_DEPTH`]).
    #[error("not a msgpack message: {0}")]
    Msgpack(String),
    /// An array map that lacks a field or holds one of the wrong type.
    #[error("NumPy array: {0}")]
    Array(String),
    /// A dtype this client does not read (object, void, complex, big-endian...).
    #[error(
        "NumPy dtype {0:?} is not one this client reads (<f4, <f8, <i4, <i8, |u1, |i1, <f2 aside)"
    )]
    DType(String),
    /// A field the message must have.
    #[error("the message has no {0:?}")]
    Missing(String),
}

/// The element types this client reads and writes (little-endian, as NumPy on x86 and
/// ARM writes them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    /// `<f4`.
    F32,
    /// `<f8`.
    F64,
    /// `<i4`.
    I32,
    /// `<i8`.
    I64,
    /// `|u1` (images).
    U8,
    /// `|i1`.
    I8,
}

impl DType {
    /// Parses NumPy's `dtype.str`.
    pub fn parse(s: &str) -> Result<DType, CodecError> {
        Ok(match s {
            "<f4" => DType::F32,
            "<f8" => DType::F64,
            "<i4" => DType::I32,
            "<i8" => DType::I64,
            "|u1" => DType::U8,
            "|i1" => DType::I8,
            _ => return Err(CodecError::DType(s.to_string())),
        })
    }

    /// NumPy's `dtype.str`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::I32 => "<i4",
            DType::I64 => "<i8",
            DType::U8 => "|u1",
            DType::I8 => "|i1",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 => 1,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }
}

/// A NumPy array as it crosses the wire: C order, little-endian elements.
#[derive(Clone, Debug, PartialEq)]
pub struct NdArray {
    /// Element type.
    pub dtype: DType,
    /// Shape (C order).
    pub shape: Vec<usize>,
    /// The elements' bytes (`product(shape) * dtype.size()` of them).
    pub data: Vec<u8>,
}

impl NdArray {
    /// A float32 array of `shape` from `values` (which must hold `product(shape)`).
    pub fn f32(shape: &[usize], values: impl IntoIterator<Item = f32>) -> NdArray {
        let data: Vec<u8> = values.into_iter().flat_map(f32::to_le_bytes).collect();
        debug_assert_eq!(data.len(), shape.iter().product::<usize>() * 4);
        NdArray {
            dtype: DType::F32,
            shape: shape.to_vec(),
            data,
        }
    }

    /// A uint8 array of `shape` (an RGB image: `[height, width, 3]`).
    pub fn u8(shape: &[usize], values: &[u8]) -> NdArray {
        NdArray {
            dtype: DType::U8,
            shape: shape.to_vec(),
            data: values.to_vec(),
        }
    }

    /// Elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The array as msgpack_numpy packs it.
    pub fn to_value(&self) -> Value {
        let key = |k: &[u8]| Value::Binary(k.to_vec());
        Value::Map(vec![
            (key(b"__ndarray__"), Value::Boolean(true)),
            (key(b"data"), Value::Binary(self.data.clone())),
            (key(b"dtype"), Value::from(self.dtype.name())),
            (
                key(b"shape"),
                Value::Array(self.shape.iter().map(|&d| Value::from(d as u64)).collect()),
            ),
        ])
    }

    /// The array `v` holds, if it is one (`Ok(None)`: `v` is not an array map); a map
    /// that says it is an array but is malformed (its data not `product(shape)` elements
    /// long, an unknown dtype) is an error.
    pub fn from_value(v: &Value) -> Result<Option<NdArray>, CodecError> {
        if get(v, "__ndarray__").is_none() {
            return Ok(None);
        }
        let field = |name: &str| {
            get(v, name).ok_or_else(|| CodecError::Array(format!("no {name:?} field")))
        };
        let dtype = field("dtype")?
            .as_str()
            .ok_or_else(|| CodecError::Array("dtype is not a string".into()))
            .and_then(DType::parse)?;
        let shape = field("shape")?
            .as_array()
            .ok_or_else(|| CodecError::Array("shape is not a list".into()))?
            .iter()
            .map(|d| {
                d.as_u64()
                    .and_then(|d| usize::try_from(d).ok())
                    .ok_or_else(|| CodecError::Array(format!("shape entry {d} is not a size")))
            })
            .collect::<Result<Vec<usize>, _>>()?;
        let data = field("data")?
            .as_slice()
            .ok_or_else(|| CodecError::Array("data is not bytes".into()))?;
        let elements = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| CodecError::Array(format!("shape {shape:?} overflows")))?;
        if elements.checked_mul(dtype.size()) != Some(data.len()) {
            return Err(CodecError::Array(format!(
                "shape {shape:?} of {} needs {} bytes, data has {}",
                dtype.name(),
                elements.saturating_mul(dtype.size()),
                data.len()
            )));
        }
        Ok(Some(NdArray {
            dtype,
            shape,
            data: data.to_vec(),
        }))
    }

    /// Its elements as f64, whatever their type.
    pub fn to_f64(&self) -> Vec<f64> {
        let c = self.data.chunks_exact(self.dtype.size());
        match self.dtype {
            DType::F32 => c
                .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .collect(),
            DType::F64 => c
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect(),
            DType::I32 => c
                .map(|b| f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .collect(),
            DType::I64 => c
                .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")) as f64)
                .collect(),
            DType::U8 => self.data.iter().map(|&b| f64::from(b)).collect(),
            DType::I8 => self.data.iter().map(|&b| f64::from(b as i8)).collect(),
        }
    }
}

/// The value under `key` in map `v`, the key a msgpack str or bin (Python's `str` and
/// `bytes` keys); `None` if `v` is not a map or lacks it.
pub fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_map()?.iter().find_map(|(k, val)| {
        let matches = match k {
            Value::String(s) => s.as_str() == Some(key),
            Value::Binary(b) => b.as_slice() == key.as_bytes(),
            _ => false,
        };
        matches.then_some(val)
    })
}

/// A number under `key` (int or float, or a NumPy scalar map), as f64.
pub fn get_f64(v: &Value, key: &str) -> Option<f64> {
    let x = get(v, key)?;
    x.as_f64()
        .or_else(|| x.as_i64().map(|i| i as f64))
        .or_else(|| {
            get(x, "__npgeneric__")?;
            let d = get(x, "data")?;
            d.as_f64().or_else(|| d.as_i64().map(|i| i as f64))
        })
}

/// `v` as msgpack bytes.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = rmpv::encode::write_value(&mut out, v);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_array_goes_round_the_codec_with_bin_keys() {
        let a = NdArray::f32(&[2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]);
        let bytes = encode(&a.to_value());
        let v = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
        // The keys are bin, as Python's bytes keys pack.
        let keys: Vec<_> = v.as_map().unwrap().iter().map(|(k, _)| k.clone()).collect();
        assert!(
            keys.iter().all(|k| matches!(k, Value::Binary(_))),
            "{keys:?}"
        );
        let back = NdArray::from_value(&v).unwrap().unwrap();
        assert_eq!(back, a);
        assert_eq!(back.to_f64(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.5]);
    }

    #[test]
    fn malformed_arrays_and_dtypes_are_refused_by_name() {
        let mut a = NdArray::f32(&[2, 2], [0.0; 4]).to_value();
        if let Value::Map(m) = &mut a {
            m[1].1 = Value::Binary(vec![0; 12]); // 3 floats for a 2x2 shape
        }
        let e = NdArray::from_value(&a).unwrap_err().to_string();
        assert!(e.contains("needs 16 bytes, data has 12"), "{e}");
        let mut o = NdArray::f32(&[1], [0.0]).to_value();
        if let Value::Map(m) = &mut o {
            m[2].1 = Value::from("|O");
        }
        let e = NdArray::from_value(&o).unwrap_err().to_string();
        assert!(e.contains("\"|O\""), "{e}");
        assert!(NdArray::from_value(&Value::from(3)).unwrap().is_none());
    }
}
