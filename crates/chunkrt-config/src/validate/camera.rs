//! `[camera]`: rate, age, latency, settling, size, and the V4L2 keys only a V4L2
//! camera reads.

use super::{fail, range, Check};

impl crate::CameraConfig {
    pub(super) fn validate(&self) -> Check {
        range("camera.fps", self.fps, 0.5, 1000.0)?;
        range("camera.max_age_ms", self.max_age_ms, 1.0, 10_000.0)?;
        range("camera.latency_ms", self.latency_ms, 0.0, 1000.0)?;
        range("camera.tolerance_rad", self.tolerance_rad, 1e-4, 1.0)?;
        range(
            "camera.settle_speed_rad_s",
            self.settle_speed_rad_s,
            1e-4,
            10.0,
        )?;
        range("camera.settle_s", self.settle_s, 0.0, 60.0)?;
        if !(8..=128).contains(&self.size) {
            return fail(
                "camera.size",
                format!("expected 8 to 128 pixels, got {}", self.size),
            );
        }
        if self.cpu < -1 {
            return fail(
                "camera.cpu",
                format!("expected a CPU number or -1, got {}", self.cpu),
            );
        }
        match self.kind {
            crate::CameraKind::Synthetic => {
                for (key, set) in [
                    ("camera.device", self.device.is_some()),
                    ("camera.pixel_format", self.pixel_format.is_some()),
                    ("camera.width", self.width.is_some()),
                    ("camera.height", self.height.is_some()),
                ] {
                    if set {
                        return fail(key, "a V4L2 key, but camera.kind = \"synthetic\"");
                    }
                }
            }
            crate::CameraKind::V4l2 => {
                if self.device.is_none() {
                    return fail(
                        "camera.device",
                        "camera.kind = \"v4l2\" needs a device (e.g. \"/dev/video0\")",
                    );
                }
                match self.pixel_format.as_deref() {
                    None | Some("YUYV") | Some("MJPG") => {}
                    Some(f) => {
                        return fail(
                            "camera.pixel_format",
                            format!("expected \"YUYV\" or \"MJPG\", got \"{f}\""),
                        )
                    }
                }
                for (key, v) in [("camera.width", self.width), ("camera.height", self.height)] {
                    if let Some(v) = v {
                        if !(16..=8192).contains(&v) {
                            return fail(key, format!("expected 16 to 8192 pixels, got {v}"));
                        }
                    }
                }
            }
        }
        if let Some([_, _, w, h]) = self.crop {
            if w == 0 || h == 0 {
                return fail(
                    "camera.crop",
                    "expected a crop of positive width and height",
                );
            }
        }
        Ok(())
    }
}
