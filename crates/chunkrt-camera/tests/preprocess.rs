//! Crop and resize on synthetic images whose right answer is computable by hand.

use chunkrt_alloc_count::{count_allocations, CountingAllocator};
use chunkrt_camera::convert::{yuyv_to_rgb, YuvRange};
use chunkrt_camera::preprocess::{preprocess, Crop, PreprocessSpec};
use chunkrt_camera::{CameraError, Frame, RawFrame, MAX_FRAME_BYTES};
use chunkrt_core::MonoTime;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// A `width` x `height` image with pixel (x, y) = `f(x, y)`.
fn image(width: u32, height: u32, f: impl Fn(u32, u32) -> [u8; 3]) -> RawFrame {
    let mut rgb = Vec::new();
    for y in 0..height {
        for x in 0..width {
            rgb.extend_from_slice(&f(x, y));
        }
    }
    RawFrame {
        seq: 17,
        t_capture: MonoTime::from_ms(1234),
        height,
        width,
        rgb,
    }
}

fn spec(width: u16, height: u16, crop: Option<[u32; 4]>) -> PreprocessSpec {
    PreprocessSpec {
        height,
        width,
        crop: crop.map(Crop::from_array),
    }
}

fn px(f: &Frame, x: usize, y: usize) -> [u8; 3] {
    let i = (y * f.width as usize + x) * 3;
    [f.data[i], f.data[i + 1], f.data[i + 2]]
}

/// Halving a gradient: each output pixel is the mean of a 2 x 2 block.
/// R = 10 x, G = 20 y, B = 7: out R = (20 ox + 20 ox + 10) / 2 = 20 ox + 5,
/// G = 40 oy + 10.
#[test]
fn halving_a_gradient_averages_2x2_blocks() {
    let raw = image(8, 4, |x, y| [(10 * x) as u8, (20 * y) as u8, 7]);
    let mut out = Frame::default();
    preprocess(&raw, &spec(4, 2, None), &mut out).unwrap();
    assert_eq!((out.width, out.height, out.seq), (4, 2, 17));
    assert_eq!(out.t_capture, MonoTime::from_ms(1234));
    assert_eq!(out.t_ready, MonoTime::ZERO, "t_ready is the caller's");
    for oy in 0..2 {
        for ox in 0..4 {
            assert_eq!(
                px(&out, ox, oy),
                [(20 * ox + 5) as u8, (40 * oy + 10) as u8, 7],
                "({ox}, {oy})"
            );
        }
    }
}

/// A factor of 1.5: 6 columns to 4. Output o covers [1.5 o, 1.5 o + 1.5): with
/// v = 6 x the means are (0 + 6/2) / 1.5 = 2, (6/2 + 12) / 1.5 = 10,
/// (18 + 24/2) / 1.5 = 20, (24/2 + 30) / 1.5 = 28.
#[test]
fn a_fractional_factor_weights_partly_covered_pixels() {
    let raw = image(6, 3, |x, _| [(6 * x) as u8, 100, (6 * x) as u8]);
    let mut out = Frame::default();
    // Explicit crop: all of it (3 rows to 2: 1.5 too, constant so unchanged).
    preprocess(&raw, &spec(4, 2, Some([0, 0, 6, 3])), &mut out).unwrap();
    for oy in 0..2 {
        let row: Vec<[u8; 3]> = (0..4).map(|ox| px(&out, ox, oy)).collect();
        assert_eq!(
            row,
            [[2, 100, 2], [10, 100, 10], [20, 100, 20], [28, 100, 28]]
        );
    }
}

/// A wide image to a square model: the centred square, copied 1:1.
#[test]
fn centre_crop_to_the_output_aspect() {
    let raw = image(12, 4, |x, y| [(10 * x) as u8, (10 * y) as u8, 0]);
    let mut out = Frame::default();
    preprocess(&raw, &spec(4, 4, None), &mut out).unwrap();
    for y in 0..4 {
        for x in 0..4 {
            assert_eq!(px(&out, x, y), [(10 * (x + 4)) as u8, (10 * y) as u8, 0]);
        }
    }
    // A tall one: rows 3..7 of 10.
    let raw = image(4, 10, |x, y| [(10 * x) as u8, (10 * y) as u8, 0]);
    preprocess(&raw, &spec(2, 2, None), &mut out).unwrap();
    // Columns 0-1 -> mean 5, 2-3 -> 25; rows 3-4 -> 35, 5-6 -> 55.
    assert_eq!(
        [
            px(&out, 0, 0),
            px(&out, 1, 0),
            px(&out, 0, 1),
            px(&out, 1, 1)
        ],
        [[5, 35, 0], [25, 35, 0], [5, 55, 0], [25, 55, 0]]
    );
    let s = spec(2, 2, None);
    assert_eq!(
        s.crop_for(1, 4, 10).unwrap(),
        Crop {
            x: 0,
            y: 3,
            width: 4,
            height: 4
        }
    );
    // 640 x 480 to 128 x 96 is the same aspect: no crop; to 128 x 128, 480 x 480.
    assert_eq!(
        spec(128, 96, None).crop_for(1, 640, 480).unwrap(),
        Crop {
            x: 0,
            y: 0,
            width: 640,
            height: 480
        }
    );
    assert_eq!(
        spec(128, 128, None).crop_for(1, 640, 480).unwrap(),
        Crop {
            x: 80,
            y: 0,
            width: 480,
            height: 480
        }
    );
}

/// An explicit crop picks exactly its rectangle.
#[test]
fn explicit_crop() {
    let raw = image(10, 10, |x, y| [x as u8, y as u8, 0]);
    let mut out = Frame::default();
    preprocess(&raw, &spec(3, 2, Some([5, 7, 3, 2])), &mut out).unwrap();
    assert_eq!(
        out.pixels(),
        [5, 7, 0, 6, 7, 0, 7, 7, 0, 5, 8, 0, 6, 8, 0, 7, 8, 0]
    );
}

/// Enlarging: bilinear between pixel centres, edges repeated. 0 and 100 on 2
/// columns to 4: samples at -0.25 (clamped: 0), 0.25, 0.75, 1.25 (clamped: 1).
#[test]
fn enlarging_is_bilinear() {
    let raw = image(2, 1, |x, _| [(100 * x) as u8, 50, 200]);
    let mut out = Frame::default();
    preprocess(&raw, &spec(4, 1, Some([0, 0, 2, 1])), &mut out).unwrap();
    assert_eq!(
        out.pixels(),
        [0, 50, 200, 25, 50, 200, 75, 50, 200, 100, 50, 200]
    );
    // Mixed: 2 columns to 4 (enlarge) while 4 rows go to 2 (shrink).
    let raw = image(2, 4, |x, y| [(100 * x) as u8, (40 * y) as u8, 0]);
    preprocess(&raw, &spec(4, 2, Some([0, 0, 2, 4])), &mut out).unwrap();
    let r: Vec<u8> = (0..4).map(|x| px(&out, x, 1)[0]).collect();
    let g: Vec<u8> = (0..2).map(|y| px(&out, 0, y)[1]).collect();
    assert_eq!(r, [0, 25, 75, 100]);
    assert_eq!(g, [20, 100]);
}

/// A constant image stays constant at any size (weights sum to one).
#[test]
fn constant_stays_constant() {
    let raw = image(640, 480, |_, _| [13, 200, 255]);
    let mut out = Frame::default();
    for (w, h) in [(128, 128), (96, 72), (100, 37), (7, 128), (1, 1)] {
        preprocess(&raw, &spec(w, h, None), &mut out).unwrap();
        assert!(
            out.pixels().chunks(3).all(|p| p == [13, 200, 255]),
            "{w}x{h}"
        );
    }
}

#[test]
fn errors() {
    let raw = image(16, 16, |_, _| [0, 0, 0]);
    let mut out = Frame::default();
    let bad = |s: PreprocessSpec, raw: &RawFrame, out: &mut Frame| {
        let e = preprocess(raw, &s, out).unwrap_err();
        assert!(matches!(e, CameraError::BadFrame { seq: 17, .. }), "{e}");
        e.to_string()
    };
    // Output larger than a Frame holds.
    assert!(bad(spec(129, 128, None), &raw, &mut out).contains(&MAX_FRAME_BYTES.to_string()));
    bad(spec(0, 8, None), &raw, &mut out);
    // Crops not inside the image.
    for c in [
        [10, 0, 7, 4],
        [0, 13, 4, 4],
        [0, 0, 0, 4],
        [u32::MAX, 0, 2, 2],
        [0, 0, 17, 16],
    ] {
        assert!(bad(spec(8, 8, Some(c)), &raw, &mut out).contains("not inside"));
    }
    // A raw frame shorter than its size says.
    let mut short = raw.clone();
    short.rgb.truncate(100);
    bad(spec(8, 8, None), &short, &mut out);
    let mut empty = raw.clone();
    empty.width = 0;
    bad(spec(8, 8, None), &empty, &mut out);
}

/// Per frame, neither the YUYV conversion (into a buffer of the right size) nor the
/// preprocessing allocates.
#[test]
fn no_allocation_per_frame() {
    let yuyv = vec![128u8; 640 * 480 * 2];
    let mut raw = RawFrame::default();
    yuyv_to_rgb(1, &yuyv, 640, 480, 1280, YuvRange::Limited, &mut raw.rgb).unwrap();
    raw.width = 640;
    raw.height = 480;
    let mut out = Box::<Frame>::default();
    let s = spec(128, 128, None);
    let (r, allocations) = count_allocations(|| {
        yuyv_to_rgb(2, &yuyv, 640, 480, 1280, YuvRange::Limited, &mut raw.rgb)?;
        preprocess(&raw, &s, &mut out)
    });
    r.unwrap();
    assert_eq!(allocations, 0);
}
