//! Cameras for chunkrt's observations.
//!
//! A [`Camera`] delivers [`RawFrame`]s: RGB8 at the camera's own size, stamped with the
//! time of capture on the monotonic clock (`CLOCK_MONOTONIC`, the clock every other
//! chunkrt timestamp uses). The camera thread turns each into a [`Frame`] of the
//! model's size ([`preprocess`]) and publishes it through a triple buffer: the
//! inference thread takes the newest without a lock, and nothing on the control
//! thread touches images.
//!
//! Sources: [`synthetic`] (the simulated arm's scene rendered from the arm's measured
//! pose, deterministic, for machines without a camera) and [`v4l2`] (a real camera).

pub mod convert;
pub mod preprocess;
pub mod synthetic;
pub mod v4l2;

use chunkrt_core::MonoTime;

/// Largest image a [`Frame`] holds after preprocessing: 128 x 128 RGB.
pub const MAX_FRAME_BYTES: usize = chunkrt_core::MAX_IMAGE_BYTES;

/// A preprocessed frame: RGB8, row-major, `height` x `width` x 3 in `data`, the size
/// the model takes. Fixed size, no heap: it travels through the triple buffer by copy.
#[derive(Clone, Copy)]
pub struct Frame {
    /// The camera's frame counter (1 for the first frame; 0: no frame yet).
    pub seq: u64,
    /// When the image was captured (the middle of the exposure where the source
    /// tells it, else the driver's timestamp), monotonic clock.
    pub t_capture: MonoTime,
    /// When the frame was ready for the inference thread (after transfer, decoding
    /// and preprocessing).
    pub t_ready: MonoTime,
    /// Rows.
    pub height: u16,
    /// Columns.
    pub width: u16,
    /// Pixels.
    pub data: [u8; MAX_FRAME_BYTES],
}

impl Default for Frame {
    fn default() -> Self {
        Frame {
            seq: 0,
            t_capture: MonoTime::ZERO,
            t_ready: MonoTime::ZERO,
            height: 0,
            width: 0,
            data: [0; MAX_FRAME_BYTES],
        }
    }
}

impl Frame {
    /// The pixels in use.
    pub fn pixels(&self) -> &[u8] {
        &self.data[..self.len()]
    }

    /// The pixels in use, writable.
    pub fn pixels_mut(&mut self) -> &mut [u8] {
        let n = self.len();
        &mut self.data[..n]
    }

    /// Bytes in use.
    pub fn len(&self) -> usize {
        (self.height as usize * self.width as usize * 3).min(MAX_FRAME_BYTES)
    }

    /// No pixels.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame")
            .field("seq", &self.seq)
            .field("t_capture", &self.t_capture)
            .field("t_ready", &self.t_ready)
            .field("height", &self.height)
            .field("width", &self.width)
            .finish_non_exhaustive()
    }
}

/// A frame as the camera delivers it: RGB8 at the camera's size. The buffer is
/// reused from frame to frame (allocated once for the negotiated size).
#[derive(Clone, Debug, Default)]
pub struct RawFrame {
    /// Camera frame counter (from 1).
    pub seq: u64,
    /// Capture time, monotonic clock.
    pub t_capture: MonoTime,
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
    /// `height * width * 3` bytes, RGB.
    pub rgb: Vec<u8>,
}

/// Why a camera could not deliver.
#[derive(Debug, thiserror::Error)]
pub enum CameraError {
    /// The device could not be opened or configured.
    #[error("camera {device}: {what}")]
    Open {
        /// Device path or name.
        device: String,
        /// What failed.
        what: String,
    },
    /// A frame could not be taken (the device went away, a driver error).
    #[error("camera capture: {0}")]
    Capture(String),
    /// A frame arrived that cannot be decoded (a corrupt MJPEG frame, a short buffer).
    #[error("camera frame {seq}: {what}")]
    BadFrame {
        /// The camera's frame counter.
        seq: u64,
        /// What was wrong.
        what: String,
    },
}

/// A source of frames.
pub trait Camera: Send {
    /// Waits for the next frame and writes it into `out` (reusing its buffer).
    fn capture(&mut self, out: &mut RawFrame) -> Result<(), CameraError>;

    /// A line describing the source (device, format, size, rate) for the run's log.
    fn describe(&self) -> String;

    /// A synthetic scene's current target: how many came before it and its `(u, v)`
    /// (`None`: a real camera).
    fn target(&self) -> Option<(u64, [f64; 2])> {
        None
    }
}
