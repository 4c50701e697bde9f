//! A V4L2 camera (`/dev/videoN`): YUYV or MJPEG, memory-mapped streaming, frames
//! converted to RGB8 and stamped with the start of their exposure on
//! `CLOCK_MONOTONIC`.
//!
//! Built on the `v4l` crate's plain ioctl backend (no libv4l: no format emulation,
//! the driver's own formats only).
//!
//! # Capture time
//!
//! [`capture_time`] maps a dequeued buffer's flags and timestamp to the monotonic
//! time the exposure started (the oldest moment the image shows):
//!
//! | timestamp type (`flags & 0xe000`) | source (`flags & 0x70000`) | capture time |
//! |---|---|---|
//! | `TIMESTAMP_MONOTONIC` (0x2000) | `TSTAMP_SRC_SOE` (0x10000) | the buffer's timestamp |
//! | `TIMESTAMP_MONOTONIC` | `TSTAMP_SRC_EOF` (0, the default) | timestamp - one frame interval |
//! | `TIMESTAMP_COPY` (0x4000), `UNKNOWN` (0), other | any | dequeue time - one frame interval |
//!
//! A monotonic timestamp that is zero, malformed or later than the dequeue time is
//! not believed: the dequeue time is used as for `COPY`.
//!
//! Subtracting one frame interval from an end-of-frame time is an approximation: the
//! exposure may be shorter than the frame interval (then the start is later than
//! computed) and readout takes time too (UVC cameras stamp at the first USB packet of
//! a frame, roughly the end of exposure). For the dequeue-time fallback the
//! transfer's latency adds an unknown delay on top.
//!
//! # Frame numbers and drops
//!
//! A frame's `seq` is the driver's `sequence` + 1 (the first frame is 1). A jump in
//! the driver's sequence means the driver dropped frames (no free buffer): they are
//! counted in [`V4l2Camera::dropped`].

use crate::convert::{yuyv_to_rgb, MjpegDecoder, YuvRange};
use crate::{Camera, CameraError, RawFrame};
use chunkrt_core::time::NS_PER_S;
use chunkrt_core::MonoTime;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;
use v4l::buffer::Type;
use v4l::capability::Capabilities;
use v4l::format::Quantization;
use v4l::io::mmap::Stream;
use v4l::io::traits::CaptureStream;
use v4l::video::Capture;
use v4l::{Device, Format, FourCC, Fraction};

/// `V4L2_BUF_FLAG_TIMESTAMP_MASK`.
pub const TIMESTAMP_MASK: u32 = 0x0000_e000;
/// `V4L2_BUF_FLAG_TIMESTAMP_UNKNOWN`.
pub const TIMESTAMP_UNKNOWN: u32 = 0x0000_0000;
/// `V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC`: the timestamp is on `CLOCK_MONOTONIC`.
pub const TIMESTAMP_MONOTONIC: u32 = 0x0000_2000;
/// `V4L2_BUF_FLAG_TIMESTAMP_COPY`: the timestamp was copied from elsewhere (an
/// output buffer); not a capture time.
pub const TIMESTAMP_COPY: u32 = 0x0000_4000;
/// `V4L2_BUF_FLAG_TSTAMP_SRC_MASK`.
pub const TSTAMP_SRC_MASK: u32 = 0x0007_0000;
/// `V4L2_BUF_FLAG_TSTAMP_SRC_EOF`: taken at the end of the frame (the default).
pub const TSTAMP_SRC_EOF: u32 = 0x0000_0000;
/// `V4L2_BUF_FLAG_TSTAMP_SRC_SOE`: taken at the start of exposure.
pub const TSTAMP_SRC_SOE: u32 = 0x0001_0000;
/// `V4L2_BUF_FLAG_ERROR`: the driver says the buffer's data is corrupt.
pub const BUF_FLAG_ERROR: u32 = 0x0000_0040;

/// A buffer's `struct timeval`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeval {
    /// Seconds.
    pub sec: i64,
    /// Microseconds (0..1_000_000).
    pub usec: i64,
}

impl Timeval {
    /// As a point on the clock, `None` when negative, zero or malformed.
    pub fn to_mono(self) -> Option<MonoTime> {
        if self.sec < 0 || !(0..1_000_000).contains(&self.usec) || (self.sec, self.usec) == (0, 0) {
            return None;
        }
        (self.sec as u64)
            .checked_mul(NS_PER_S)
            .and_then(|ns| ns.checked_add(self.usec as u64 * 1000))
            .map(MonoTime::from_ns)
    }
}

/// Where a capture time came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampSource {
    /// The driver's monotonic timestamp of the start of exposure.
    DriverStartOfExposure,
    /// The driver's monotonic timestamp of the end of the frame, minus one frame
    /// interval.
    DriverEndOfFrame,
    /// The driver's timestamp is not a monotonic capture time (`COPY`, `UNKNOWN`,
    /// or unbelievable): the dequeue time minus one frame interval.
    DequeueTime,
}

impl TimestampSource {
    /// A phrase for the log.
    pub fn describe(self) -> &'static str {
        match self {
            TimestampSource::DriverStartOfExposure => {
                "driver's CLOCK_MONOTONIC timestamp, start of exposure"
            }
            TimestampSource::DriverEndOfFrame => {
                "driver's CLOCK_MONOTONIC timestamp, end of frame, minus one frame interval"
            }
            TimestampSource::DequeueTime => {
                "FALLBACK: the driver's timestamp is not CLOCK_MONOTONIC; dequeue time minus one frame interval (late by the transfer)"
            }
        }
    }
}

/// The start of a frame's exposure on `CLOCK_MONOTONIC`, from the dequeued buffer's
/// `flags` and `timestamp`, the time it was dequeued (`CLOCK_MONOTONIC`) and the
/// frame interval in nanoseconds. See the module's table. Never earlier than zero.
pub fn capture_time(
    flags: u32,
    timestamp: Timeval,
    dequeued: MonoTime,
    frame_interval_ns: u64,
) -> (MonoTime, TimestampSource) {
    let back = |t: MonoTime| MonoTime::from_ns(t.as_ns().saturating_sub(frame_interval_ns));
    if flags & TIMESTAMP_MASK == TIMESTAMP_MONOTONIC {
        if let Some(t) = timestamp.to_mono().filter(|&t| t <= dequeued) {
            return match flags & TSTAMP_SRC_MASK {
                TSTAMP_SRC_SOE => (t, TimestampSource::DriverStartOfExposure),
                // EOF and sources this code does not know: the conservative
                // reading, the end of the frame.
                _ => (back(t), TimestampSource::DriverEndOfFrame),
            };
        }
    }
    (back(dequeued), TimestampSource::DequeueTime)
}

/// Reads `CLOCK_MONOTONIC`.
pub fn monotonic_now() -> MonoTime {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    MonoTime::from_ns(ts.tv_sec as u64 * NS_PER_S + ts.tv_nsec as u64)
}

/// Numbers frames from the driver's sequence numbers and counts the dropped ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SequenceTracker {
    /// The driver's last sequence number and the frame number given to it.
    last: Option<(u32, u64)>,
    dropped: u64,
}

impl SequenceTracker {
    /// The frame number of a buffer with driver sequence `sequence`: `sequence + 1`
    /// for the first frame, then advancing with the driver's sequence, a jump of
    /// more than one counted as dropped frames. A sequence that does not increase
    /// (the driver restarted streaming, e.g. after a capture error) continues the
    /// numbering at the previous frame's + 1 and drops nothing: frame numbers
    /// always increase.
    pub fn next(&mut self, sequence: u32) -> u64 {
        let seq = match self.last {
            None => sequence as u64 + 1,
            Some((last, last_seq)) if sequence > last => {
                self.dropped += (sequence - last - 1) as u64;
                last_seq + (sequence - last) as u64
            }
            Some((_, last_seq)) => last_seq + 1,
        };
        self.last = Some((sequence, seq));
        seq
    }

    /// Frames dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// The pixel formats [`V4l2Camera`] takes from a camera.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PixelFormat {
    /// `YUYV`: packed YUV 4:2:2, uncompressed.
    #[default]
    Yuyv,
    /// `MJPG`: one JPEG per frame.
    Mjpg,
}

impl PixelFormat {
    /// From the config's fourcc: `"YUYV"` or `"MJPG"`.
    pub fn from_fourcc(s: &str) -> Option<Self> {
        match s {
            "YUYV" => Some(PixelFormat::Yuyv),
            "MJPG" => Some(PixelFormat::Mjpg),
            _ => None,
        }
    }

    /// The fourcc.
    pub fn fourcc(self) -> &'static [u8; 4] {
        match self {
            PixelFormat::Yuyv => b"YUYV",
            PixelFormat::Mjpg => b"MJPG",
        }
    }
}

/// What to ask a V4L2 camera for.
#[derive(Clone, Debug, PartialEq)]
pub struct V4l2Config {
    /// The device, e.g. `/dev/video0`.
    pub device: PathBuf,
    /// The pixel format.
    pub pixel_format: PixelFormat,
    /// Capture width; `None`: the driver's current width.
    pub width: Option<u32>,
    /// Capture height; `None`: the driver's current height.
    pub height: Option<u32>,
    /// Frames per second.
    pub fps: f64,
    /// Memory-mapped buffers to ask for (the driver may give more).
    pub buffers: u32,
}

impl V4l2Config {
    /// `device` in `pixel_format` at the driver's current size, `fps`, 4 buffers.
    pub fn new(device: impl Into<PathBuf>, pixel_format: PixelFormat, fps: f64) -> Self {
        V4l2Config {
            device: device.into(),
            pixel_format,
            width: None,
            height: None,
            fps,
            buffers: 4,
        }
    }
}

/// The camera asks for this much more than the frame interval before a capture
/// gives up.
const CAPTURE_TIMEOUT_SLACK: Duration = Duration::from_secs(2);

/// A V4L2 capture device streaming YUYV or MJPEG through memory-mapped buffers.
pub struct V4l2Camera {
    device: PathBuf,
    card: String,
    driver: String,
    format: PixelFormat,
    width: u32,
    height: u32,
    stride: usize,
    range: YuvRange,
    frame_interval_ns: u64,
    buffers: usize,
    // Declared before `dev`: the stream (its buffers) goes first. `None` after a
    // capture error: the next capture maps the buffers afresh and restarts streaming.
    stream: Option<Stream<'static>>,
    dev: Device,
    restarts: u64,
    mjpeg: MjpegDecoder,
    seq: SequenceTracker,
    timestamps: Option<TimestampSource>,
}

impl std::fmt::Debug for V4l2Camera {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

fn open_err(device: &Path, what: impl Into<String>) -> CameraError {
    CameraError::Open {
        device: device.display().to_string(),
        what: what.into(),
    }
}

fn fourcc_str(f: &FourCC) -> String {
    f.repr
        .iter()
        .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
        .collect()
}

fn fps_of(interval: Fraction) -> f64 {
    if interval.numerator == 0 {
        0.0
    } else {
        interval.denominator as f64 / interval.numerator as f64
    }
}

/// Requests and maps `buffers` buffers; a dequeue waits at most a few frame
/// intervals plus [`CAPTURE_TIMEOUT_SLACK`].
fn map_buffers(
    dev: &Device,
    buffers: u32,
    frame_interval_ns: u64,
) -> std::io::Result<Stream<'static>> {
    let mut stream = Stream::with_buffers(dev, Type::VideoCapture, buffers)?;
    stream.set_timeout(
        CAPTURE_TIMEOUT_SLACK + Duration::from_nanos(frame_interval_ns.saturating_mul(4)),
    );
    Ok(stream)
}

/// The device's capabilities, once they show a single-planar capture device that
/// can stream.
fn capture_caps(dev: &Device, path: &Path) -> Result<Capabilities, CameraError> {
    let caps = dev
        .query_caps()
        .map_err(|e| open_err(path, format!("VIDIOC_QUERYCAP: {e}")))?;
    use v4l::capability::Flags as Cap;
    if !caps.capabilities.contains(Cap::VIDEO_CAPTURE) {
        return Err(open_err(
            path,
            format!(
                "{} ({}) is not a single-planar video capture device (capabilities {})",
                caps.card, caps.driver, caps.capabilities
            ),
        ));
    }
    if !caps.capabilities.contains(Cap::STREAMING) {
        return Err(open_err(
            path,
            format!(
                "{} ({}) cannot stream (no V4L2_CAP_STREAMING)",
                caps.card, caps.driver
            ),
        ));
    }
    Ok(caps)
}

/// Sets the configured pixel format and size (the current size where none is
/// configured); the format the driver gave, which must be the one asked for.
fn set_format(dev: &Device, config: &V4l2Config) -> Result<Format, CameraError> {
    let path = config.device.as_path();
    let current = dev
        .format()
        .map_err(|e| open_err(path, format!("VIDIOC_G_FMT: {e}")))?;
    let want = Format::new(
        config.width.unwrap_or(current.width),
        config.height.unwrap_or(current.height),
        FourCC::new(config.pixel_format.fourcc()),
    );
    let got = dev
        .set_format(&want)
        .map_err(|e| open_err(path, format!("VIDIOC_S_FMT: {e}")))?;
    if got.fourcc != want.fourcc || got.width != want.width || got.height != want.height {
        return Err(open_err(
            path,
            format!(
                "asked for {} {}x{}, the driver gave {} {}x{}",
                fourcc_str(&want.fourcc),
                want.width,
                want.height,
                fourcc_str(&got.fourcc),
                got.width,
                got.height
            ),
        ));
    }
    if config.pixel_format == PixelFormat::Yuyv && !got.width.is_multiple_of(2) {
        return Err(open_err(path, format!("YUYV at odd width {}", got.width)));
    }
    Ok(got)
}

/// Sets the configured frame rate; the rate the driver gave (fps), which must be
/// within 1% of it.
fn set_frame_rate(dev: &Device, config: &V4l2Config) -> Result<f64, CameraError> {
    let path = config.device.as_path();
    // The interval as a fraction of seconds, in milliseconds of a frame.
    let want_interval = Fraction::new(1000, (config.fps * 1000.0).round().max(1.0) as u32);
    let params = dev
        .set_params(&v4l::video::capture::Parameters::new(want_interval))
        .map_err(|e| open_err(path, format!("VIDIOC_S_PARM ({} fps): {e}", config.fps)))?;
    let got_fps = fps_of(params.interval);
    if (got_fps - config.fps).abs() > 0.01 * config.fps {
        return Err(open_err(
            path,
            format!(
                "asked for {} fps, the driver gave {got_fps:.3} fps ({}/{} s per frame){}",
                config.fps,
                params.interval.numerator,
                params.interval.denominator,
                if params
                    .capabilities
                    .contains(v4l::parameters::Capabilities::TIME_PER_FRAME)
                {
                    ""
                } else {
                    "; the driver cannot set the frame rate"
                }
            ),
        ));
    }
    Ok(got_fps)
}

impl V4l2Camera {
    /// Opens `config.device`, sets the format and frame rate, and maps the buffers.
    /// Streaming starts with the first [`capture`](Camera::capture).
    ///
    /// Errors ([`CameraError::Open`]): the device cannot be opened or is no
    /// streaming capture device; the driver answers the format or the frame rate
    /// (more than 1% off) with something else than asked (the error says both); the
    /// buffers cannot be mapped.
    pub fn open(config: &V4l2Config) -> Result<Self, CameraError> {
        let path = config.device.as_path();
        // The `v4l` crate panics (`expect`) on enum values it does not know in the
        // driver's answers; a panic while opening is an open error, not a crash.
        match catch_unwind(AssertUnwindSafe(|| Self::open_inner(config))) {
            Ok(r) => r,
            Err(p) => {
                let why = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown".into());
                Err(open_err(
                    path,
                    format!("the v4l crate panicked on the driver's answer: {why}"),
                ))
            }
        }
    }

    fn open_inner(config: &V4l2Config) -> Result<Self, CameraError> {
        let path = config.device.as_path();
        if !(config.fps.is_finite() && config.fps > 0.0) {
            return Err(open_err(path, format!("frame rate {} fps", config.fps)));
        }
        let dev = Device::with_path(path).map_err(|e| open_err(path, format!("open: {e}")))?;
        let caps = capture_caps(&dev, path)?;
        let got = set_format(&dev, config)?;
        let got_fps = set_frame_rate(&dev, config)?;
        let frame_interval_ns = (NS_PER_S as f64 / got_fps).round() as u64;

        let stream = map_buffers(&dev, config.buffers.max(2), frame_interval_ns)
            .map_err(|e| open_err(path, format!("mmap buffers: {e}")))?;

        let stride = match config.pixel_format {
            PixelFormat::Yuyv => (got.stride as usize).max(got.width as usize * 2),
            PixelFormat::Mjpg => 0,
        };
        let range = match got.quantization {
            Quantization::FullRange => YuvRange::Full,
            _ => YuvRange::Limited,
        };
        Ok(V4l2Camera {
            device: config.device.clone(),
            card: caps.card,
            driver: caps.driver,
            format: config.pixel_format,
            width: got.width,
            height: got.height,
            stride,
            range,
            frame_interval_ns,
            buffers: config.buffers.max(2) as usize,
            stream: Some(stream),
            dev,
            restarts: 0,
            mjpeg: MjpegDecoder::new(),
            seq: SequenceTracker::default(),
            timestamps: None,
        })
    }

    /// Frames the driver dropped (gaps in its sequence numbers) since opening.
    pub fn dropped(&self) -> u64 {
        self.seq.dropped()
    }

    /// The negotiated size, `(width, height)`.
    pub fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// The negotiated frame interval, nanoseconds.
    pub fn frame_interval_ns(&self) -> u64 {
        self.frame_interval_ns
    }

    /// How often streaming was restarted after a capture error.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Where the capture times come from (known after the first frame).
    pub fn timestamp_source(&self) -> Option<TimestampSource> {
        self.timestamps
    }
}

impl Camera for V4l2Camera {
    fn capture(&mut self, out: &mut RawFrame) -> Result<(), CameraError> {
        if self.stream.is_none() {
            // After a capture error: the `v4l` stream cannot resume (it would queue a
            // buffer the driver still holds), so map the buffers afresh.
            self.restarts += 1;
            let s = map_buffers(&self.dev, self.buffers as u32, self.frame_interval_ns).map_err(
                |e| {
                    CameraError::Capture(format!(
                        "{}: restarting the stream: mmap buffers: {e}",
                        self.device.display()
                    ))
                },
            )?;
            self.stream = Some(s);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(CameraError::Capture("no stream".into()));
        };
        let (buf, meta) = match CaptureStream::next(stream) {
            Ok(x) => x,
            Err(e) => {
                // Dropping the stream stops it and unmaps and frees its buffers.
                self.stream = None;
                return Err(CameraError::Capture(format!(
                    "{}: {e} (the stream restarts on the next capture)",
                    self.device.display()
                )));
            }
        };
        let dequeued = monotonic_now();
        let flags: u32 = meta.flags.into();
        let seq = self.seq.next(meta.sequence);
        let (t, source) = capture_time(
            flags,
            // `time_t` is i64 on 64-bit targets, i32 on some 32-bit ones.
            #[allow(clippy::useless_conversion)]
            Timeval {
                sec: i64::from(meta.timestamp.sec),
                usec: i64::from(meta.timestamp.usec),
            },
            dequeued,
            self.frame_interval_ns,
        );
        self.timestamps = Some(source);
        let used = (meta.bytesused as usize).min(buf.len());
        let data = &buf[..used];
        if flags & BUF_FLAG_ERROR != 0 {
            return Err(CameraError::BadFrame {
                seq,
                what: format!(
                    "the driver flagged the buffer as corrupt (V4L2_BUF_FLAG_ERROR, {used} bytes)"
                ),
            });
        }
        match self.format {
            PixelFormat::Yuyv => yuyv_to_rgb(
                seq,
                data,
                self.width,
                self.height,
                self.stride,
                self.range,
                &mut out.rgb,
            )?,
            PixelFormat::Mjpg => {
                self.mjpeg
                    .decode(seq, data, self.width, self.height, &mut out.rgb)?
            }
        }
        out.seq = seq;
        out.t_capture = t;
        out.width = self.width;
        out.height = self.height;
        Ok(())
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "v4l2 {} ({}, driver {}): {} {}x{} @ {:.2} fps, {} mmap buffers",
            self.device.display(),
            self.card,
            self.driver,
            std::str::from_utf8(self.format.fourcc()).unwrap_or("?"),
            self.width,
            self.height,
            NS_PER_S as f64 / self.frame_interval_ns.max(1) as f64,
            self.buffers,
        );
        if self.restarts > 0 {
            s.push_str(&format!(", {} stream restarts", self.restarts));
        }
        if self.format == PixelFormat::Yuyv {
            s.push_str(match self.range {
                YuvRange::Limited => ", BT.601 limited range",
                YuvRange::Full => ", BT.601 full range",
            });
        }
        s.push_str("; capture time: ");
        s.push_str(match self.timestamps {
            Some(t) => t.describe(),
            None => "not known before the first frame",
        });
        if self.mjpeg.frames_without_dht() > 0 {
            s.push_str("; MJPEG without Huffman tables (Annex K tables used)");
        }
        s
    }
}
