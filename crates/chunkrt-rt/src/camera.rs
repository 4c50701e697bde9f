//! The camera thread: frames from a [`Camera`], preprocessed to the model's size off
//! the control thread, handed to the inference thread through a triple buffer.
//!
//! The inference thread takes the newest frame without a lock and judges its age
//! ([`CameraFeed`]); the control thread never touches an image. Each frame leaves a
//! [`CameraRecord`] for telemetry (camera latency, frame interval, the synthetic
//! scene's targets). `[inject]` can delay frames (`camera_delay`) or stall the camera
//! for a while (`camera_stall_after_s`, `camera_stall_s`).

use crate::os;
use chunkrt_buffer::{Publisher, Subscriber};
use chunkrt_camera::preprocess::{preprocess, Crop, PreprocessSpec};
use chunkrt_camera::synthetic::{ArmPose, SyntheticCamera, SyntheticConfig, World};
use chunkrt_camera::v4l2::{PixelFormat, V4l2Camera, V4l2Config};
use chunkrt_camera::{Camera, Frame, RawFrame};
use chunkrt_config::{CameraConfig, CameraKind, InjectConfig};
use chunkrt_core::{ms_to_ns, stream_seed, MonoTime, Observation};
use chunkrt_telemetry::{CameraProducer, CameraRecord, CameraStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What the inference thread holds of the camera: the newest frame and how old it may
/// be when inference starts.
pub struct CameraFeed {
    /// Frames from the camera thread.
    pub frames: Subscriber<Frame>,
    /// An older image makes the observation stale (ns).
    pub max_age_ns: u64,
}

/// What the camera thread needs.
pub struct CameraParts {
    /// The source.
    pub camera: Box<dyn Camera>,
    /// Frames to the inference thread.
    pub frames: Publisher<Frame>,
    /// Records to telemetry.
    pub records: CameraProducer,
    /// The model's size and the crop.
    pub spec: PreprocessSpec,
    /// Set by the runtime to end the loop.
    pub stop: Arc<AtomicBool>,
    /// Injected delay and stall.
    pub inject: CameraInjection,
}

/// `[inject]`'s camera delay and stall.
pub struct CameraInjection {
    delay: chunkrt_core::DelaySampler,
    delay_active: bool,
    stall_after_ns: u64,
    stall_ns: u64,
    /// `inject.panic` in the camera thread.
    panic: Option<crate::supervise::PanicPoint>,
}

/// Stream number of the camera delay (see `chunkrt_core::stream_seed`).
const STREAM_CAMERA_DELAY: u64 = 5;

impl CameraInjection {
    /// What `cfg` asks for (nothing when it asks for nothing).
    pub fn new(cfg: &InjectConfig) -> Self {
        let model = cfg.camera_delay.model();
        CameraInjection {
            delay: chunkrt_core::DelaySampler::new(
                model,
                stream_seed(cfg.seed, STREAM_CAMERA_DELAY),
            ),
            delay_active: !model.is_zero(),
            stall_after_ns: ms_to_ns(cfg.camera_stall_after_s * 1e3),
            stall_ns: ms_to_ns(cfg.camera_stall_s * 1e3),
            panic: crate::supervise::PanicPoint::for_thread(
                cfg,
                chunkrt_config::PanicThread::Camera,
            ),
        }
    }

    fn delay_ns(&mut self) -> u64 {
        if self.delay_active {
            self.delay.sample_ns()
        } else {
            0
        }
    }

    /// Whether a frame captured `since_first_ns` after the camera's first is withheld.
    fn withheld(&self, since_first_ns: u64) -> bool {
        self.stall_ns > 0
            && since_first_ns >= self.stall_after_ns
            && since_first_ns < self.stall_after_ns + self.stall_ns
    }
}

/// After a capture error the thread waits this long before it tries again.
const RETRY_NS: u64 = 20_000_000;

/// Runs until `stop`: capture, (injected delay or stall), preprocess, publish.
pub fn run(mut p: CameraParts) {
    let mut raw = RawFrame::default();
    let mut frame = Box::<Frame>::default();
    let mut image = Box::<chunkrt_telemetry::ImageRecord>::default();
    let mut first: Option<MonoTime> = None;
    let mut errors_said = 0u32;
    while !p.stop.load(Ordering::Relaxed) {
        crate::supervise::check_panic(&mut p.inject.panic, os::now());
        let target = p.camera.target();
        let mut rec = CameraRecord {
            target_index: target.map_or(0, |t| t.0),
            target_uv: target.map_or([f32::NAN; 2], |t| [t.1[0] as f32, t.1[1] as f32]),
            ..CameraRecord::default()
        };
        if let Err(e) = p.camera.capture(&mut raw) {
            rec.status = CameraStatus::Error;
            rec.t_ready = os::now();
            p.records.push(rec);
            if errors_said < 3 {
                tracing::warn!("{e}");
                errors_said += 1;
            }
            os::sleep_until(os::now().add_ns(RETRY_NS));
            continue;
        }
        // The scene may have moved on while the frame was taken.
        if let Some((i, [u, v])) = p.camera.target() {
            rec.target_index = i;
            rec.target_uv = [u as f32, v as f32];
        }
        rec.seq = raw.seq;
        rec.t_capture = raw.t_capture;
        let t_first = *first.get_or_insert(raw.t_capture);
        let delay = p.inject.delay_ns();
        if delay > 0 {
            os::sleep_until(os::now().add_ns(delay));
        }
        if p.inject.withheld(raw.t_capture.saturating_since(t_first)) {
            rec.status = CameraStatus::Withheld;
            rec.t_ready = os::now();
            p.records.push(rec);
            continue;
        }
        if let Err(e) = preprocess(&raw, &p.spec, &mut frame) {
            rec.status = CameraStatus::Error;
            rec.t_ready = os::now();
            p.records.push(rec);
            if errors_said < 3 {
                tracing::warn!("{e}");
                errors_said += 1;
            }
            continue;
        }
        frame.t_ready = os::now();
        p.frames.publish(&frame);
        if p.records.records_images() {
            image.seq = frame.seq;
            image.t_capture = frame.t_capture;
            image.t_ready = frame.t_ready;
            image.height = frame.height;
            image.width = frame.width;
            image.rgb.copy_from_slice(&frame.data);
            p.records.push_image(&image);
        }
        rec.status = CameraStatus::Published;
        rec.t_ready = frame.t_ready;
        p.records.push(rec);
    }
}

/// The world as the synthetic camera sees it: the arm's latest measurement, which the
/// control thread publishes for it (undelayed, whatever `[inject]` does to the
/// inference thread's observations), and the real clock.
struct MeasuredArm {
    obs: Subscriber<Observation>,
}

impl World for MeasuredArm {
    fn pose(&mut self) -> ArmPose {
        self.obs.update();
        let o = self.obs.peek();
        ArmPose {
            t: o.t_capture,
            pos_rad: o.pos_rad,
            vel_rad_s: o.vel_rad_s,
        }
    }

    fn now(&self) -> MonoTime {
        os::now()
    }

    fn sleep_until(&self, t: MonoTime) {
        os::sleep_until(t);
    }
}

/// Opens the camera `cfg` names; the synthetic one reads the arm through `arm`.
pub fn open(
    cfg: &CameraConfig,
    arm: Subscriber<Observation>,
) -> Result<Box<dyn Camera>, chunkrt_camera::CameraError> {
    Ok(match cfg.kind {
        CameraKind::Synthetic => Box::new(SyntheticCamera::new(
            SyntheticConfig {
                size: cfg.size,
                fps: cfg.fps,
                latency_ns: ms_to_ns(cfg.latency_ms),
                seed: cfg.seed,
                tolerance_rad: cfg.tolerance_rad,
                settle_speed_rad_s: cfg.settle_speed_rad_s,
                settle_s: cfg.settle_s,
            },
            Box::new(MeasuredArm { obs: arm }),
        )?),
        CameraKind::V4l2 => {
            let format = cfg
                .pixel_format
                .as_deref()
                .and_then(PixelFormat::from_fourcc)
                .unwrap_or_default();
            let mut v = V4l2Config::new(cfg.device.clone().unwrap_or_default(), format, cfg.fps);
            v.width = cfg.width;
            v.height = cfg.height;
            Box::new(V4l2Camera::open(&v)?)
        }
    })
}

/// The preprocessing for a model of `(height, width)`.
pub fn spec(cfg: &CameraConfig, (height, width): (usize, usize)) -> PreprocessSpec {
    PreprocessSpec {
        height: height as u16,
        width: width as u16,
        crop: cfg.crop.map(Crop::from_array),
    }
}
