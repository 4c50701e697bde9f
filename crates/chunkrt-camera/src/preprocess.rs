//! From the camera's image to the model's: crop, then resize.
//!
//! [`preprocess`] takes a [`RawFrame`] (RGB8 at the camera's size), crops it (an
//! explicit rectangle, or the largest centred rectangle of the model's aspect ratio)
//! and resizes the crop to the model's `height` x `width`:
//!
//! * shrinking (an axis with more crop pixels than output pixels): area averaging —
//!   each output pixel is the mean of the crop pixels under it, a pixel partly under
//!   it weighted by the part that is;
//! * enlarging: bilinear interpolation between the centres of the two nearest crop
//!   pixels (pixel centres aligned, `x_in = (x_out + 0.5) * in / out - 0.5`, clamped
//!   to the crop: edge pixels are repeated).
//!
//! The axes are treated separately (one may shrink while the other enlarges). Sums
//! are `f32`; the result is rounded to nearest (`f32::round`, halves away from zero).
//! Nothing is allocated per frame.

use crate::{CameraError, Frame, RawFrame, MAX_FRAME_BYTES};

/// A crop rectangle in the camera's image, pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crop {
    /// Left column.
    pub x: u32,
    /// Top row.
    pub y: u32,
    /// Columns.
    pub width: u32,
    /// Rows.
    pub height: u32,
}

impl Crop {
    /// From the config's `[x, y, width, height]`.
    pub fn from_array([x, y, width, height]: [u32; 4]) -> Self {
        Crop {
            x,
            y,
            width,
            height,
        }
    }
}

/// What the model takes, and which part of the camera's image it sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreprocessSpec {
    /// Output rows.
    pub height: u16,
    /// Output columns.
    pub width: u16,
    /// The part of the image to use; `None`: the largest centred rectangle of the
    /// output's aspect ratio.
    pub crop: Option<Crop>,
}

impl PreprocessSpec {
    /// The crop used for a `width` x `height` camera image: the explicit one, checked
    /// to lie inside the image, or the centred one of the output's aspect ratio (its
    /// size rounded to the nearest pixel, its offset rounded down).
    pub fn crop_for(&self, seq: u64, width: u32, height: u32) -> Result<Crop, CameraError> {
        let bad = |what: String| CameraError::BadFrame { seq, what };
        if self.width == 0 || self.height == 0 {
            return Err(bad(format!(
                "preprocess output {}x{} is empty",
                self.width, self.height
            )));
        }
        let out_bytes = self.width as usize * self.height as usize * 3;
        if out_bytes > MAX_FRAME_BYTES {
            return Err(bad(format!(
                "preprocess output {}x{} RGB is {out_bytes} bytes, a Frame holds {MAX_FRAME_BYTES}",
                self.width, self.height
            )));
        }
        if width == 0 || height == 0 {
            return Err(bad(format!("camera image of {width}x{height} pixels")));
        }
        match self.crop {
            Some(c) => {
                let inside = c.width > 0
                    && c.height > 0
                    && c.x.checked_add(c.width).is_some_and(|r| r <= width)
                    && c.y.checked_add(c.height).is_some_and(|b| b <= height);
                if !inside {
                    return Err(bad(format!(
                        "crop [{}, {}, {}, {}] (x, y, width, height) is not inside the {width}x{height} image",
                        c.x, c.y, c.width, c.height
                    )));
                }
                Ok(c)
            }
            None => {
                let (ow, oh) = (self.width as u64, self.height as u64);
                let (w, h) = (width as u64, height as u64);
                // Wider than the output's aspect (w/h > ow/oh): full height.
                let (cw, ch) = if w * oh > ow * h {
                    (((h * ow * 2 + oh) / (2 * oh)).clamp(1, w), h)
                } else {
                    (w, ((w * oh * 2 + ow) / (2 * ow)).clamp(1, h))
                };
                Ok(Crop {
                    x: ((w - cw) / 2) as u32,
                    y: ((h - ch) / 2) as u32,
                    width: cw as u32,
                    height: ch as u32,
                })
            }
        }
    }
}

/// The crop pixels that make output pixel `o` on one axis, and their weights:
/// `first..=last` and `weight(i)`. `len_in` crop pixels to `len_out` outputs.
#[derive(Clone, Copy)]
struct Axis {
    len_in: u32,
    len_out: u32,
    /// Crop pixels per output pixel.
    scale: f32,
}

impl Axis {
    fn new(len_in: u32, len_out: u32) -> Self {
        Axis {
            len_in,
            len_out,
            scale: len_in as f32 / len_out as f32,
        }
    }

    fn shrinking(&self) -> bool {
        self.len_in >= self.len_out
    }

    /// `(first, last, a, b)`: the taps of output `o`. Area: the source interval
    /// `[a, b)`; bilinear: `a` is the sample position, `b` unused.
    fn taps(&self, o: u32) -> (u32, u32, f32, f32) {
        if self.shrinking() {
            // Exact integer bounds where they are integers (avoids a tap of weight 0
            // from float error at the edges).
            let a = o as f32 * self.scale;
            let b = ((o + 1) as f32 * self.scale).min(self.len_in as f32);
            let first = ((o as u64 * self.len_in as u64) / self.len_out as u64) as u32;
            let end = ((o as u64 + 1) * self.len_in as u64).div_ceil(self.len_out as u64) as u32;
            (first, end.clamp(first + 1, self.len_in) - 1, a, b)
        } else {
            let c = ((o as f32 + 0.5) * self.scale - 0.5).clamp(0.0, (self.len_in - 1) as f32);
            let first = c.floor() as u32;
            (first, (first + 1).min(self.len_in - 1), c, 0.0)
        }
    }

    fn weight(&self, i: u32, a: f32, b: f32) -> f32 {
        if self.shrinking() {
            let lo = (i as f32).max(a);
            let hi = ((i + 1) as f32).min(b);
            (hi - lo).max(0.0) / self.scale
        } else {
            (1.0 - (i as f32 - a).abs()).max(0.0)
        }
    }
}

/// Crops and resizes `raw` into `out` (see the module's description) and sets
/// `out.seq`, `out.t_capture`, `out.height`, `out.width`; `out.t_ready` is the
/// caller's. Allocates nothing.
///
/// Errors ([`CameraError::BadFrame`]): an output larger than [`MAX_FRAME_BYTES`] or
/// empty, a crop not inside the image, a `raw.rgb` shorter than `raw.height *
/// raw.width * 3`.
pub fn preprocess(
    raw: &RawFrame,
    spec: &PreprocessSpec,
    out: &mut Frame,
) -> Result<(), CameraError> {
    let crop = spec.crop_for(raw.seq, raw.width, raw.height)?;
    let need = raw.width as usize * raw.height as usize * 3;
    if raw.rgb.len() < need {
        return Err(CameraError::BadFrame {
            seq: raw.seq,
            what: format!(
                "raw frame of {} bytes, {}x{} RGB needs {need}",
                raw.rgb.len(),
                raw.width,
                raw.height
            ),
        });
    }
    let (ow, oh) = (spec.width as u32, spec.height as u32);
    let ax = Axis::new(crop.width, ow);
    let ay = Axis::new(crop.height, oh);
    let stride = raw.width as usize * 3;
    out.seq = raw.seq;
    out.t_capture = raw.t_capture;
    out.height = spec.height;
    out.width = spec.width;
    let px = out.pixels_mut();
    for oy in 0..oh {
        let (y0, y1, ya, yb) = ay.taps(oy);
        for ox in 0..ow {
            let (x0, x1, xa, xb) = ax.taps(ox);
            let mut acc = [0f32; 3];
            for y in y0..=y1 {
                let wy = ay.weight(y, ya, yb);
                if wy == 0.0 {
                    continue;
                }
                let row = (crop.y + y) as usize * stride;
                for x in x0..=x1 {
                    let w = wy * ax.weight(x, xa, xb);
                    let p = row + (crop.x + x) as usize * 3;
                    let s = &raw.rgb[p..p + 3];
                    acc[0] += w * s[0] as f32;
                    acc[1] += w * s[1] as f32;
                    acc[2] += w * s[2] as f32;
                }
            }
            let o = (oy as usize * ow as usize + ox as usize) * 3;
            for c in 0..3 {
                px[o + c] = acc[c].round().clamp(0.0, 255.0) as u8;
            }
        }
    }
    Ok(())
}
