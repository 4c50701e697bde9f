//! Pixel-format conversion of camera frames to RGB8, into a caller's reusable buffer.
//!
//! * [`yuyv_to_rgb`]: YUYV (YUY2, packed 4:2:2, `Y0 U Y1 V` per pixel pair), the
//!   uncompressed format of UVC cameras. Colour: ITU-R BT.601, limited ("video")
//!   range, Y in 16..=235 and Cb/Cr in 16..=240 — what V4L2 UVC cameras deliver by
//!   default (`V4L2_COLORSPACE_SRGB`/`SMPTE170M`, `V4L2_QUANTIZATION_LIM_RANGE`
//!   for YUV). Both pixels of a pair take the pair's chroma (no chroma
//!   interpolation).
//! * [`MjpegDecoder`]: MJPEG, one baseline JPEG per frame, decoded by `zune-jpeg`
//!   (JFIF: BT.601 full range, as the JPEG standard has it). Frames without Huffman
//!   tables (no DHT segment, as many UVC cameras send them: the tables are fixed by
//!   the USB video class spec) get the standard tables of JPEG Annex K inserted
//!   before decoding.
//!
//! A frame that is short, truncated or corrupt is a [`CameraError::BadFrame`] that
//! says what was wrong; no input makes these functions panic (the JPEG decoder runs
//! under `catch_unwind` as a second line of defence).

use crate::CameraError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

fn bad(seq: u64, what: impl Into<String>) -> CameraError {
    CameraError::BadFrame {
        seq,
        what: what.into(),
    }
}

/// Resizes `rgb` to `width * height * 3` bytes; allocates only when the buffer has
/// never been that large.
fn size_rgb(seq: u64, rgb: &mut Vec<u8>, width: u32, height: u32) -> Result<usize, CameraError> {
    let n = (width as usize)
        .checked_mul(height as usize)
        .and_then(|p| p.checked_mul(3))
        .ok_or_else(|| bad(seq, format!("{width}x{height}: too large")))?;
    rgb.resize(n, 0);
    Ok(n)
}

// BT.601 YCbCr to RGB, 16-bit fixed point (coefficient * 65536, rounded). Limited range:
//   R = 255/219 (Y - 16)                                  + 255/224 * 1.402 (Cr - 128)
//   G = 255/219 (Y - 16) - 255/224 * 0.344136 (Cb - 128) - 255/224 * 0.714136 (Cr - 128)
//   B = 255/219 (Y - 16) + 255/224 * 1.772 (Cb - 128)
// Full range: the same without the 255/219, 255/224 gains and without Y's offset.
/// 255/219 = 1.164383..., Y's gain, * 65536.
const K_Y: i32 = 76_309;
/// 1.596027..., Cr's weight in R, * 65536.
const K_RV: i32 = 104_597;
/// 0.391762..., Cb's weight in G (subtracted), * 65536.
const K_GU: i32 = 25_675;
/// 0.812968..., Cr's weight in G (subtracted), * 65536.
const K_GV: i32 = 53_279;
/// 2.017232..., Cb's weight in B, * 65536.
const K_BU: i32 = 132_201;
/// One half in 16-bit fixed point: added before the shift, so results round half up.
const HALF: i32 = 1 << 15;

/// The quantization range of YCbCr codes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum YuvRange {
    /// Limited ("video", "studio") range: Y 16..=235, Cb/Cr 16..=240. What V4L2
    /// drivers mean by default for YUV formats, and what UVC cameras send.
    #[default]
    Limited,
    /// Full range: Y, Cb, Cr in 0..=255 (JFIF; a driver reporting
    /// `V4L2_QUANTIZATION_FULL_RANGE`).
    Full,
}

/// (Y offset, Y gain, Cr in R, Cb in G, Cr in G, Cb in B), * 65536.
const fn coefficients(range: YuvRange) -> (i32, i32, i32, i32, i32, i32) {
    match range {
        YuvRange::Limited => (16, K_Y, K_RV, K_GU, K_GV, K_BU),
        // 1.402, 0.344136, 0.714136, 1.772 * 65536, rounded.
        YuvRange::Full => (0, 65_536, 91_881, 22_553, 46_802, 116_130),
    }
}

#[inline(always)]
fn clamp_u8(v: i32) -> u8 {
    v.clamp(0, 255) as u8
}

/// Converts one YUYV frame to RGB8 in `rgb` (resized to `width * height * 3`, so a
/// buffer reused from frame to frame is allocated once).
///
/// `stride` is the driver's bytes per line (`bytesperline`, at least `2 * width`);
/// `src` must hold `height` lines of it (the last may end after its `2 * width` bytes).
///
/// `range`: the codes' quantization ([`YuvRange::Limited`] unless the driver says
/// otherwise).
///
/// Arithmetic: integers, the BT.601 matrix in 16-bit fixed point; each
/// channel is rounded half up (`(x + 2^15) >> 16`) and clamped to 0..=255, so a
/// result is within 0.5 (plus 0.003 from the coefficients' rounding) of the exact
/// real-valued formula. Out-of-range codes (Y < 16 or > 235, footroom/headroom) are
/// converted as they are and clamped.
///
/// Errors: an odd width (YUYV carries pixel pairs), a stride shorter than a line, or
/// a buffer shorter than the image are [`CameraError::BadFrame`] for frame `seq`.
pub fn yuyv_to_rgb(
    seq: u64,
    src: &[u8],
    width: u32,
    height: u32,
    stride: usize,
    range: YuvRange,
    rgb: &mut Vec<u8>,
) -> Result<(), CameraError> {
    let (y_off, k_y, k_rv, k_gu, k_gv, k_bu) = coefficients(range);
    if width == 0 || height == 0 {
        return Err(bad(seq, format!("YUYV frame of {width}x{height} pixels")));
    }
    if !width.is_multiple_of(2) {
        return Err(bad(
            seq,
            format!("YUYV width {width} is odd (YUYV carries pixel pairs)"),
        ));
    }
    let line = width as usize * 2;
    if stride < line {
        return Err(bad(
            seq,
            format!("YUYV stride {stride} bytes is shorter than a line of {width} pixels ({line} bytes)"),
        ));
    }
    let need = stride * (height as usize - 1) + line;
    if src.len() < need {
        return Err(bad(
            seq,
            format!(
                "YUYV frame of {} bytes, {width}x{height} needs {need} (truncated)",
                src.len()
            ),
        ));
    }
    size_rgb(seq, rgb, width, height)?;
    let out_line = width as usize * 3;
    for (row, out) in rgb.chunks_exact_mut(out_line).enumerate() {
        let start = row * stride;
        let input = &src[start..start + line];
        for (pair, px) in input.chunks_exact(4).zip(out.chunks_exact_mut(6)) {
            let u = pair[1] as i32 - 128;
            let v = pair[3] as i32 - 128;
            let r = k_rv * v + HALF;
            let g = -k_gu * u - k_gv * v + HALF;
            let b = k_bu * u + HALF;
            for (k, y) in [pair[0], pair[2]].into_iter().enumerate() {
                let y = k_y * (y as i32 - y_off);
                px[3 * k] = clamp_u8((y + r) >> 16);
                px[3 * k + 1] = clamp_u8((y + g) >> 16);
                px[3 * k + 2] = clamp_u8((y + b) >> 16);
            }
        }
    }
    Ok(())
}

/// The standard Huffman tables of JPEG (ITU-T T.81, Annex K.3, tables K.3 to K.6) as
/// one DHT segment: luminance DC (class 0, id 0), chrominance DC (0, 1), luminance AC
/// (1, 0), chrominance AC (1, 1). The tables the USB video class prescribes for
/// MJPEG frames that carry none (UVC payload spec, "MJPEG payload": DHT omitted).
pub const ANNEX_K_DHT: [u8; 4 + 4 * 17 + 12 + 12 + 162 + 162] = annex_k_dht();

const DC_LUMA_BITS: [u8; 16] = [0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
const DC_CHROMA_BITS: [u8; 16] = [0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0];
const DC_VALUES: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
const AC_LUMA_BITS: [u8; 16] = [0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d];
#[rustfmt::skip]
const AC_LUMA_VALUES: [u8; 162] = [
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
    0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
];
const AC_CHROMA_BITS: [u8; 16] = [0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77];
#[rustfmt::skip]
const AC_CHROMA_VALUES: [u8; 162] = [
    0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21, 0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
    0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91, 0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
    0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34, 0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
    0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
    0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
    0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
    0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
    0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
    0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
    0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa,
];

const fn annex_k_dht() -> [u8; 4 + 4 * 17 + 12 + 12 + 162 + 162] {
    const N: usize = 4 + 4 * 17 + 12 + 12 + 162 + 162;
    let mut s = [0u8; N];
    s[0] = 0xFF;
    s[1] = 0xC4;
    // The length counts itself but not the marker.
    s[2] = ((N - 2) >> 8) as u8;
    s[3] = ((N - 2) & 0xFF) as u8;
    let mut i = 4;
    // (class << 4 | id, code counts per length, values)
    let tables: [(u8, &[u8; 16], &[u8]); 4] = [
        (0x00, &DC_LUMA_BITS, &DC_VALUES),
        (0x01, &DC_CHROMA_BITS, &DC_VALUES),
        (0x10, &AC_LUMA_BITS, &AC_LUMA_VALUES),
        (0x11, &AC_CHROMA_BITS, &AC_CHROMA_VALUES),
    ];
    let mut t = 0;
    while t < 4 {
        let (tc_th, bits, values) = tables[t];
        s[i] = tc_th;
        i += 1;
        let mut k = 0;
        while k < 16 {
            s[i] = bits[k];
            i += 1;
            k += 1;
        }
        k = 0;
        while k < values.len() {
            s[i] = values[k];
            i += 1;
            k += 1;
        }
        t += 1;
    }
    s
}

/// Where a JPEG's header says its Huffman tables are.
struct JpegLayout {
    /// Offset of the SOS marker.
    sos: usize,
    /// Whether a DHT segment precedes SOS.
    has_dht: bool,
    /// Offset just past the EOI marker.
    end: usize,
}

/// Walks the marker segments of a JPEG up to SOS and finds the EOI. Checks only the
/// framing; the decoder checks the rest.
fn layout(seq: u64, jpeg: &[u8]) -> Result<JpegLayout, CameraError> {
    if jpeg.len() < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8 {
        return Err(bad(
            seq,
            format!(
                "MJPEG frame of {} bytes does not start with a JPEG SOI marker (FF D8)",
                jpeg.len()
            ),
        ));
    }
    let mut i = 2;
    let mut has_dht = false;
    let sos = loop {
        // Fill bytes (FF FF ...) may precede a marker.
        while i + 1 < jpeg.len() && jpeg[i] == 0xFF && jpeg[i + 1] == 0xFF {
            i += 1;
        }
        if i + 4 > jpeg.len() {
            return Err(bad(
                seq,
                format!(
                    "MJPEG frame of {} bytes ends inside its header (truncated, no SOS)",
                    jpeg.len()
                ),
            ));
        }
        if jpeg[i] != 0xFF {
            return Err(bad(
                seq,
                format!(
                    "MJPEG header: expected a marker at byte {i}, found {:#04x}",
                    jpeg[i]
                ),
            ));
        }
        let marker = jpeg[i + 1];
        if marker == 0xDA {
            break i;
        }
        if marker == 0xD9 {
            return Err(bad(
                seq,
                format!("MJPEG frame: EOI at byte {i} before any image data"),
            ));
        }
        let len = u16::from_be_bytes([jpeg[i + 2], jpeg[i + 3]]) as usize;
        if len < 2 || i + 2 + len > jpeg.len() {
            return Err(bad(
                seq,
                format!(
                    "MJPEG header: segment FF {marker:02X} at byte {i} of length {len} runs past the frame's {} bytes (truncated)",
                    jpeg.len()
                ),
            ));
        }
        has_dht |= marker == 0xC4;
        i += 2 + len;
    };
    // EOI: entropy-coded data never holds FF D9 (an FF there is followed by 00 or a
    // restart marker), so the last FF D9 is the EOI; UVC drivers may pad after it.
    let end = jpeg[sos..]
        .windows(2)
        .rposition(|w| w == [0xFF, 0xD9])
        .map(|p| sos + p + 2)
        .ok_or_else(|| {
            bad(
                seq,
                format!(
                    "MJPEG frame of {} bytes has no EOI marker after its image data (truncated)",
                    jpeg.len()
                ),
            )
        })?;
    Ok(JpegLayout { sos, has_dht, end })
}

/// Decodes MJPEG frames to RGB8. Holds a scratch buffer for frames that need the
/// standard Huffman tables inserted, reused from frame to frame.
#[derive(Debug, Default)]
pub struct MjpegDecoder {
    scratch: Vec<u8>,
    inserted_dht: u64,
}

impl MjpegDecoder {
    /// A decoder with an empty scratch buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many frames so far carried no Huffman tables and were decoded with the
    /// Annex K tables.
    pub fn frames_without_dht(&self) -> u64 {
        self.inserted_dht
    }

    /// Decodes one JPEG frame into `rgb` (resized to `width * height * 3`). The
    /// frame must be `width` x `height` pixels (the negotiated size).
    ///
    /// Colour: YCbCr to RGB as JFIF has it (BT.601, full range), chroma upsampled and
    /// rounded by `zune-jpeg`. The decoder allocates its own working memory per frame
    /// (component planes); `rgb` and the scratch buffer are reused.
    ///
    /// Errors ([`CameraError::BadFrame`] for frame `seq`): no SOI, a header segment
    /// running past the end, no EOI (a truncated frame), a size other than the
    /// negotiated one, anything the decoder rejects (it runs in strict mode).
    pub fn decode(
        &mut self,
        seq: u64,
        jpeg: &[u8],
        width: u32,
        height: u32,
        rgb: &mut Vec<u8>,
    ) -> Result<(), CameraError> {
        let l = layout(seq, jpeg)?;
        let data: &[u8] = if l.has_dht {
            &jpeg[..l.end]
        } else {
            self.inserted_dht += 1;
            self.scratch.clear();
            self.scratch.extend_from_slice(&jpeg[..l.sos]);
            self.scratch.extend_from_slice(&ANNEX_K_DHT);
            self.scratch.extend_from_slice(&jpeg[l.sos..l.end]);
            &self.scratch
        };
        let n = size_rgb(seq, rgb, width, height)?;
        let options = DecoderOptions::default()
            .jpeg_set_out_colorspace(ColorSpace::RGB)
            .set_strict_mode(true)
            .set_max_width(width as usize)
            .set_max_height(height as usize);
        let decoded = catch_unwind(AssertUnwindSafe(|| {
            let mut decoder = JpegDecoder::new_with_options(ZCursor::new(data), options);
            decoder
                .decode_headers()
                .map_err(|e| format!("MJPEG header: {e:?}"))?;
            let (w, h) = decoder
                .dimensions()
                .ok_or_else(|| "MJPEG header: no frame size".to_string())?;
            if (w, h) != (width as usize, height as usize) {
                return Err(format!(
                    "MJPEG frame is {w}x{h}, the camera was set to {width}x{height}"
                ));
            }
            match decoder.output_colorspace() {
                Some(ColorSpace::RGB) => {}
                other => {
                    return Err(format!(
                        "MJPEG frame decodes to {other:?}, not RGB (input {:?})",
                        decoder.input_colorspace()
                    ))
                }
            }
            match decoder.output_buffer_size() {
                Some(s) if s == n => {}
                other => {
                    return Err(format!(
                        "MJPEG decoder wants {other:?} output bytes, {width}x{height} RGB is {n}"
                    ))
                }
            }
            decoder
                .decode_into(&mut rgb[..n])
                .map_err(|e| format!("MJPEG data: {e:?}"))
        }));
        match decoded {
            Ok(Ok(())) => Ok(()),
            Ok(Err(what)) => Err(bad(seq, what)),
            Err(_) => Err(bad(seq, "MJPEG decoder panicked on this frame")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed-point coefficients are the rounded real ones.
    #[test]
    fn coefficients_are_bt601_limited_range() {
        let (kr, kb) = (0.299f64, 0.114f64);
        let kg = 1.0 - kr - kb;
        let cs = 255.0 / 224.0;
        let q = |x: f64| (x * 65536.0).round() as i32;
        assert_eq!(K_Y, q(255.0 / 219.0));
        assert_eq!(K_RV, q(2.0 * (1.0 - kr) * cs));
        assert_eq!(K_GU, q(2.0 * (1.0 - kb) * kb / kg * cs));
        assert_eq!(K_GV, q(2.0 * (1.0 - kr) * kr / kg * cs));
        assert_eq!(K_BU, q(2.0 * (1.0 - kb) * cs));
        assert_eq!(
            coefficients(YuvRange::Full),
            (
                0,
                65536,
                q(2.0 * (1.0 - kr)),
                q(2.0 * (1.0 - kb) * kb / kg),
                q(2.0 * (1.0 - kr) * kr / kg),
                q(2.0 * (1.0 - kb))
            )
        );
    }

    /// Against the real-valued formula over a grid of codes: within 0.5 + 0.01.
    #[test]
    fn yuyv_matches_the_exact_formula() {
        let mut worst = 0.0f64;
        let mut rgb = Vec::new();
        for y in (0..=255u8).step_by(3) {
            for u in (0..=255u8).step_by(5) {
                for v in (0..=255u8).step_by(7) {
                    yuyv_to_rgb(1, &[y, u, y, v], 2, 1, 4, YuvRange::Limited, &mut rgb).unwrap();
                    let (yf, uf, vf) = (y as f64 - 16.0, u as f64 - 128.0, v as f64 - 128.0);
                    let exact = [
                        255.0 / 219.0 * yf + 1.596027 * vf,
                        255.0 / 219.0 * yf - 0.391762 * uf - 0.812968 * vf,
                        255.0 / 219.0 * yf + 2.017232 * uf,
                    ];
                    for c in 0..3 {
                        let e = exact[c].clamp(0.0, 255.0);
                        worst = worst.max((rgb[c] as f64 - e).abs());
                        assert_eq!(rgb[c], rgb[3 + c]);
                    }
                }
            }
        }
        assert!(worst <= 0.51, "worst {worst}");
    }

    #[test]
    fn yuyv_reference_colours() {
        let mut rgb = Vec::new();
        // Black, white and the limited-range primaries.
        for (yuv, want) in [
            ([16, 128, 128], [0, 0, 0]),
            ([235, 128, 128], [255, 255, 255]),
            ([81, 90, 240], [255, 0, 0]),
            ([145, 54, 34], [0, 255, 0]),
            ([41, 240, 110], [0, 0, 255]),
        ] {
            yuyv_to_rgb(
                1,
                &[yuv[0], yuv[1], yuv[0], yuv[2]],
                2,
                1,
                4,
                YuvRange::Limited,
                &mut rgb,
            )
            .unwrap();
            for c in 0..3 {
                assert!(
                    (rgb[c] as i32 - want[c]).abs() <= 1,
                    "{yuv:?} -> {:?}, want {want:?}",
                    &rgb[..3]
                );
            }
        }
    }

    #[test]
    fn yuyv_with_stride_skips_padding() {
        let mut rgb = Vec::new();
        // 2x2, stride 6: two padding bytes per line that must not be read as pixels.
        let src = [16, 128, 16, 128, 99, 99, 235, 128, 235, 128];
        yuyv_to_rgb(1, &src, 2, 2, 6, YuvRange::Limited, &mut rgb).unwrap();
        assert_eq!(rgb, [0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255]);
    }

    #[test]
    fn yuyv_rejects_bad_shapes() {
        let mut rgb = Vec::new();
        for (src, w, h, stride) in [
            (&[0u8; 8][..], 2u32, 3u32, 4usize),
            (&[0u8; 8][..], 3, 1, 6),
            (&[0u8; 8][..], 2, 1, 2),
            (&[0u8; 8][..], 0, 1, 4),
            (&[][..], 2, 1, 4),
        ] {
            let e = yuyv_to_rgb(7, src, w, h, stride, YuvRange::Limited, &mut rgb).unwrap_err();
            assert!(
                matches!(e, CameraError::BadFrame { seq: 7, .. }),
                "{w}x{h}/{stride}: {e}"
            );
        }
    }

    #[test]
    fn annex_k_table_sizes() {
        for (bits, n) in [
            (DC_LUMA_BITS, DC_VALUES.len()),
            (DC_CHROMA_BITS, DC_VALUES.len()),
            (AC_LUMA_BITS, AC_LUMA_VALUES.len()),
            (AC_CHROMA_BITS, AC_CHROMA_VALUES.len()),
        ] {
            assert_eq!(bits.iter().map(|&b| b as usize).sum::<usize>(), n);
        }
        assert_eq!(ANNEX_K_DHT.len(), 420);
        assert_eq!(&ANNEX_K_DHT[..4], &[0xFF, 0xC4, 0x01, 0xA2]);
    }

    #[test]
    fn mjpeg_framing_errors_never_panic() {
        let mut d = MjpegDecoder::new();
        let mut rgb = Vec::new();
        for junk in [
            &[][..],
            &[0xFF][..],
            &[0xFF, 0xD8][..],
            &[0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xFF][..],
            &[0xFF, 0xD8, 0x00, 0x00, 0x00][..],
            &[0xFF, 0xD8, 0xFF, 0xD9][..],
            &[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02, 0x00][..],
            &[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02, 0xFF, 0xD9][..],
            &[0xFF; 64][..],
        ] {
            let e = d.decode(3, junk, 16, 16, &mut rgb).unwrap_err();
            assert!(matches!(e, CameraError::BadFrame { seq: 3, .. }), "{e}");
        }
    }
}
