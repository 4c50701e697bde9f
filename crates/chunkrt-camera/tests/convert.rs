//! Our YUYV and MJPEG conversion against ffmpeg's, on recorded frames
//! (tests/fixtures, made by scripts/camera/make_fixtures.sh).
//!
//! Measured on the committed fixtures (ffmpeg 5.1, Debian 12; zune-jpeg 0.5.15),
//! absolute difference per channel over 160 x 120 x 3 values:
//! * YUYV (BT.601 limited range; ffmpeg: swscale, nearest chroma, accurate
//!   rounding): max 1, mean 0.0006 (35 of 57600 values differ by 1: rounding).
//! * MJPEG (zune-jpeg vs ffmpeg's decoder + swscale with bilinear chroma
//!   interpolation, accurate rounding): max 3, mean 0.162 (48563 equal, 8778 off
//!   by 1, 248 by 2, 11 by 3: the two interpolate 4:2:2 chroma differently, which
//!   shows at the test pattern's sharp colour edges). Against swscale's default
//!   path (chroma not interpolated) the difference at those edges reaches 113: the
//!   oracle's flags matter.
//!
//! The tolerances are set a little above what was measured.

use chunkrt_camera::convert::{yuyv_to_rgb, MjpegDecoder, YuvRange, ANNEX_K_DHT};
use chunkrt_camera::CameraError;
use std::path::PathBuf;

const W: u32 = 160;
const H: u32 = 120;

/// Largest per-channel difference allowed, YUYV.
const MAX_DIFF_YUYV: u8 = 1;
/// Mean per-channel difference allowed, YUYV.
const MEAN_DIFF_YUYV: f64 = 0.002;
/// Largest per-channel difference allowed, MJPEG.
const MAX_DIFF_MJPEG: u8 = 3;
/// Mean per-channel difference allowed, MJPEG.
const MEAN_DIFF_MJPEG: f64 = 0.18;

fn fixture(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// (max, mean) absolute per-channel difference.
fn diff(ours: &[u8], theirs: &[u8]) -> (u8, f64) {
    assert_eq!(ours.len(), theirs.len());
    let mut max = 0u8;
    let mut sum = 0u64;
    for (a, b) in ours.iter().zip(theirs) {
        let d = a.abs_diff(*b);
        max = max.max(d);
        sum += d as u64;
    }
    (max, sum as f64 / ours.len() as f64)
}

fn report(what: &str, (max, mean): (u8, f64)) {
    use std::io::Write;
    // Straight to stderr: visible with --nocapture and in the CI log of a failure.
    let _ = writeln!(
        std::io::stderr(),
        "{what}: ours vs ffmpeg: max {max}, mean {mean:.4}"
    );
}

#[test]
fn yuyv_matches_ffmpeg() {
    let src = fixture("frame.yuyv");
    let want = fixture("frame.yuyv.rgb");
    let mut rgb = Vec::new();
    yuyv_to_rgb(1, &src, W, H, W as usize * 2, YuvRange::Limited, &mut rgb).unwrap();
    let d = diff(&rgb, &want);
    report("YUYV", d);
    assert!(d.0 <= MAX_DIFF_YUYV && d.1 <= MEAN_DIFF_YUYV, "{d:?}");
}

#[test]
fn mjpeg_matches_ffmpeg() {
    let src = fixture("frame.mjpg");
    let want = fixture("frame.mjpg.rgb");
    let mut dec = MjpegDecoder::new();
    let mut rgb = Vec::new();
    dec.decode(1, &src, W, H, &mut rgb).unwrap();
    let d = diff(&rgb, &want);
    report("MJPEG", d);
    assert!(d.0 <= MAX_DIFF_MJPEG && d.1 <= MEAN_DIFF_MJPEG, "{d:?}");
    assert_eq!(dec.frames_without_dht(), 0);
}

/// As many UVC cameras send it: no DHT. Decoded with the Annex K tables, the image
/// is the one with its tables (ffmpeg wrote the standard tables, `-huffman default`).
#[test]
fn mjpeg_without_dht_decodes_with_the_standard_tables() {
    let src = fixture("frame_nodht.mjpg");
    let want = fixture("frame.mjpg.rgb");
    let mut dec = MjpegDecoder::new();
    let mut rgb = Vec::new();
    dec.decode(1, &src, W, H, &mut rgb).unwrap();
    assert_eq!(dec.frames_without_dht(), 1);
    let d = diff(&rgb, &want);
    report("MJPEG without DHT", d);
    assert!(d.0 <= MAX_DIFF_MJPEG && d.1 <= MEAN_DIFF_MJPEG, "{d:?}");
    // And bit for bit what the frame with its tables gives.
    let mut with = Vec::new();
    dec.decode(2, &fixture("frame.mjpg"), W, H, &mut with)
        .unwrap();
    assert!(rgb == with);
}

/// The DHT ffmpeg writes with `-huffman default` is Annex K's: our constant matches it
/// table by table.
#[test]
fn annex_k_tables_are_the_ones_ffmpeg_writes() {
    let src = fixture("frame.mjpg");
    // All tables of all DHT segments, in order.
    let mut tables = Vec::new();
    let mut i = 2;
    while src[i + 1] != 0xDA {
        let len = u16::from_be_bytes([src[i + 2], src[i + 3]]) as usize;
        if src[i + 1] == 0xC4 {
            tables.extend_from_slice(&src[i + 4..i + 2 + len]);
        }
        i += 2 + len;
    }
    // Compare as a set of (class/id, table) since the order may differ.
    let split = |mut b: &[u8]| {
        let mut v = Vec::new();
        while !b.is_empty() {
            let n: usize = b[1..17].iter().map(|&c| c as usize).sum();
            v.push(b[..17 + n].to_vec());
            b = &b[17 + n..];
        }
        v.sort();
        v
    };
    assert_eq!(split(&tables), split(&ANNEX_K_DHT[4..]));
}

#[test]
fn truncated_mjpeg_is_a_bad_frame() {
    let src = fixture("frame.mjpg");
    let mut dec = MjpegDecoder::new();
    let mut rgb = Vec::new();
    // Cut in the header, in the entropy-coded data, just before EOI.
    for cut in [
        1,
        10,
        100,
        300,
        src.len() / 2,
        src.len() - 10,
        src.len() - 1,
    ] {
        match dec.decode(5, &src[..cut], W, H, &mut rgb) {
            Err(CameraError::BadFrame { seq: 5, what }) => {
                assert!(!what.is_empty());
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // The same for the DHT-less frame.
    let src = fixture("frame_nodht.mjpg");
    for cut in [50, src.len() / 2, src.len() - 1] {
        assert!(
            matches!(
                dec.decode(6, &src[..cut], W, H, &mut rgb),
                Err(CameraError::BadFrame { seq: 6, .. })
            ),
            "cut at {cut}"
        );
    }
}

#[test]
fn corrupt_mjpeg_never_panics() {
    let src = fixture("frame.mjpg");
    let mut dec = MjpegDecoder::new();
    let mut rgb = Vec::new();
    // Flip bytes all over the frame (header and data); each decode either works
    // (a flip in the data may still decode) or is a BadFrame, never a panic.
    let mut bad = 0;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..300 {
        let mut f = src.clone();
        for _ in 0..4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = (state % f.len() as u64) as usize;
            f[at] ^= (state >> 32) as u8 | 1;
        }
        match dec.decode(9, &f, W, H, &mut rgb) {
            Ok(()) => {}
            Err(CameraError::BadFrame { seq: 9, .. }) => bad += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(bad > 0);
}

#[test]
fn mjpeg_of_another_size_is_a_bad_frame() {
    let src = fixture("frame.mjpg");
    let mut dec = MjpegDecoder::new();
    let mut rgb = Vec::new();
    let e = dec.decode(4, &src, 320, 240, &mut rgb).unwrap_err();
    assert!(e.to_string().contains("160x120"), "{e}");
}

#[test]
fn short_yuyv_is_a_bad_frame() {
    let src = fixture("frame.yuyv");
    let mut rgb = Vec::new();
    let e = yuyv_to_rgb(
        3,
        &src[..src.len() - 1],
        W,
        H,
        W as usize * 2,
        YuvRange::Limited,
        &mut rgb,
    )
    .unwrap_err();
    assert!(matches!(e, CameraError::BadFrame { seq: 3, .. }), "{e}");
}

/// The output buffer is allocated once: a second frame reuses it.
#[test]
fn buffers_are_reused() {
    let src = fixture("frame.yuyv");
    let mut rgb = Vec::new();
    yuyv_to_rgb(1, &src, W, H, W as usize * 2, YuvRange::Limited, &mut rgb).unwrap();
    let p = rgb.as_ptr();
    yuyv_to_rgb(2, &src, W, H, W as usize * 2, YuvRange::Limited, &mut rgb).unwrap();
    assert_eq!(p, rgb.as_ptr());
    let mut dec = MjpegDecoder::new();
    let jpeg = fixture("frame.mjpg");
    dec.decode(1, &jpeg, W, H, &mut rgb).unwrap();
    dec.decode(2, &jpeg, W, H, &mut rgb).unwrap();
    assert_eq!(p, rgb.as_ptr());
}
