//! The synthetic camera of the simulated arm: a top view of a reaching task rendered
//! from the arm's measured pose, deterministic, so the whole visuomotor pipeline runs
//! (and is tested) on a machine without a camera.
//!
//! Frames are taken on the camera's own schedule (`fps`, absolute times); each shows the
//! arm's latest measurement carried on to the frame's time by its measured velocity, and
//! is delivered `latency` after it.
//!
//! The scene: a target, a red disc, somewhere in a square workspace, and the arm, a
//! green disc where its pose projects into that square. A target `(u, v)` in
//! `[0, 1]^2` stands for the joint pose `G0 + u D1 + v D2`; the arm's pose `q` is drawn
//! at its projection onto that plane (`D1` and `D2` are orthogonal). The goal pose is
//! nowhere but in the image: a policy must read it there. When the arm has held the
//! target's pose (every joint within `tolerance_rad`, every speed below
//! `settle_speed_rad_s`) for `settle_s`, the scene draws the next target from its
//! seeded sequence.
//!
//! The rendering rule is written once here and once in `scripts/vision/scene.py`
//! (which made the bundled policy's training images); `tests/synthetic.rs` compares
//! the two pixel by pixel on committed cases.

use crate::{Camera, CameraError, RawFrame};
use chunkrt_core::{MonoTime, MAX_DOF};

/// Joints the scene is defined for.
pub const SCENE_DOF: usize = 7;
/// The pose of target `(0, 0)`.
pub const G0: [f64; SCENE_DOF] = [-0.5, -0.6, -0.3, -2.0, -0.3, 0.9, 0.8];
/// The pose change from `u = 0` to `u = 1`.
pub const D1: [f64; SCENE_DOF] = [1.0, 0.0, 0.6, 0.0, 0.6, 0.0, 0.0];
/// The pose change from `v = 0` to `v = 1` (orthogonal to `D1`).
pub const D2: [f64; SCENE_DOF] = [0.0, 0.8, 0.0, 0.8, 0.0, 0.6, 0.0];

const BACKGROUND: [u8; 3] = [40, 44, 52];
const GRID: [u8; 3] = [60, 66, 78];
const TARGET: [u8; 3] = [220, 40, 40];
const ARM: [u8; 3] = [40, 200, 80];
/// The arm's drawn projection is clamped to this range (it stays in the picture).
const ARM_UV_RANGE: (f64, f64) = (-0.15, 1.15);
/// Targets are drawn from this range of `u` and `v`.
const TARGET_RANGE: (f64, f64) = (0.1, 0.9);
/// Successive targets are at least this far apart in `(u, v)`.
const MIN_TARGET_STEP: f64 = 0.35;

/// The joint pose a target stands for.
pub fn target_pose(u: f64, v: f64) -> [f64; SCENE_DOF] {
    std::array::from_fn(|j| G0[j] + u * D1[j] + v * D2[j])
}

/// Where pose `q` is drawn: its projection onto the targets' plane, clamped.
pub fn project(q: &[f64]) -> (f64, f64) {
    let coord = |d: &[f64; SCENE_DOF]| {
        let (mut num, mut den) = (0.0, 0.0);
        for j in 0..SCENE_DOF {
            num += d[j] * (q.get(j).copied().unwrap_or(G0[j]) - G0[j]);
            den += d[j] * d[j];
        }
        (num / den).clamp(ARM_UV_RANGE.0, ARM_UV_RANGE.1)
    };
    (coord(&D1), coord(&D2))
}

/// Renders the scene into `rgb` (`size * size * 3` bytes, row-major, RGB): the
/// background and its grid, the target at `(u, v)`, the arm at the projection of `q`.
pub fn render(q: &[f64], u: f64, v: f64, size: usize, rgb: &mut [u8]) {
    let s = size as f64;
    let (m, w) = (s / 8.0, 3.0 * s / 4.0);
    let grid = (size / 4).max(1);
    for y in 0..size {
        for x in 0..size {
            let c = if x % grid == 0 || y % grid == 0 {
                GRID
            } else {
                BACKGROUND
            };
            let i = (y * size + x) * 3;
            rgb[i..i + 3].copy_from_slice(&c);
        }
    }
    let (ua, va) = project(q);
    disc(rgb, size, m + u * w, m + v * w, 5.0 * s / 64.0, TARGET);
    disc(rgb, size, m + ua * w, m + va * w, 3.0 * s / 64.0, ARM);
}

fn disc(rgb: &mut [u8], size: usize, px: f64, py: f64, r: f64, c: [u8; 3]) {
    let y0 = (py - r - 1.0).floor().max(0.0) as usize;
    let y1 = ((py + r + 1.0).ceil().max(0.0) as usize).min(size);
    let x0 = (px - r - 1.0).floor().max(0.0) as usize;
    let x1 = ((px + r + 1.0).ceil().max(0.0) as usize).min(size);
    for y in y0..y1 {
        for x in x0..x1 {
            let (dx, dy) = (x as f64 + 0.5 - px, y as f64 + 0.5 - py);
            if dx * dx + dy * dy <= r * r {
                let i = (y * size + x) * 3;
                rgb[i..i + 3].copy_from_slice(&c);
            }
        }
    }
}

/// The seeded sequence of targets (splitmix64; each at least `MIN_TARGET_STEP` from
/// the one before).
#[derive(Clone, Debug)]
pub struct Targets {
    state: u64,
    current: (f64, f64),
    index: u64,
}

impl Targets {
    /// The sequence of `seed`; its first target is drawn away from `(0.5, 0.5)`, the
    /// pose a run starts at.
    pub fn new(seed: u64) -> Self {
        let mut t = Targets {
            state: seed,
            current: (0.5, 0.5),
            index: 0,
        };
        t.advance();
        t.index = 0;
        t
    }

    fn next_unit(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Moves to the next target.
    pub fn advance(&mut self) {
        let (lo, hi) = TARGET_RANGE;
        loop {
            let u = lo + (hi - lo) * self.next_unit();
            let v = lo + (hi - lo) * self.next_unit();
            let (du, dv) = (u - self.current.0, v - self.current.1);
            if (du * du + dv * dv).sqrt() >= MIN_TARGET_STEP {
                self.current = (u, v);
                self.index += 1;
                return;
            }
        }
    }

    /// The current target `(u, v)`.
    pub fn current(&self) -> (f64, f64) {
        self.current
    }

    /// How many targets came before the current one.
    pub fn index(&self) -> u64 {
        self.index
    }
}

/// What the synthetic camera sees of the world: the arm's measured state and when it
/// was measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct ArmPose {
    /// When measured (monotonic); unset: no measurement yet.
    pub t: MonoTime,
    /// Joint positions (rad).
    pub pos_rad: [f64; MAX_DOF],
    /// Joint velocities (rad/s).
    pub vel_rad_s: [f64; MAX_DOF],
}

/// How the synthetic camera behaves.
#[derive(Clone, Debug)]
pub struct SyntheticConfig {
    /// Image side (pixels).
    pub size: usize,
    /// Frame rate.
    pub fps: f64,
    /// Exposure and transport: a frame is delivered this long after the pose it shows
    /// was measured (ns).
    pub latency_ns: u64,
    /// Seed of the target sequence.
    pub seed: u64,
    /// A target counts as reached within this distance on every joint.
    pub tolerance_rad: f64,
    /// ... and every joint slower than this ...
    pub settle_speed_rad_s: f64,
    /// ... for this long (s).
    pub settle_s: f64,
}

/// The world as the synthetic camera reads it and the clock it sleeps on (the runtime
/// passes the arm's latest measurement and `clock_nanosleep`).
pub trait World: Send {
    /// The arm's latest measured state.
    fn pose(&mut self) -> ArmPose;
    /// Now, monotonic.
    fn now(&self) -> MonoTime;
    /// Sleeps until `t` (monotonic, absolute).
    fn sleep_until(&self, t: MonoTime);
}

/// The synthetic camera (see the module docs).
pub struct SyntheticCamera {
    cfg: SyntheticConfig,
    world: Box<dyn World>,
    targets: Targets,
    settled_since: Option<MonoTime>,
    next: MonoTime,
    period_ns: u64,
    seq: u64,
}

impl SyntheticCamera {
    /// A camera on `world`; frames from the first frame period on.
    pub fn new(cfg: SyntheticConfig, world: Box<dyn World>) -> Result<Self, CameraError> {
        if cfg.size == 0 || cfg.size * cfg.size * 3 > crate::MAX_FRAME_BYTES {
            return Err(CameraError::Open {
                device: "synthetic".into(),
                what: format!("size {} does not fit a frame (at most 128 x 128)", cfg.size),
            });
        }
        if !(cfg.fps.is_finite() && cfg.fps > 0.0) {
            return Err(CameraError::Open {
                device: "synthetic".into(),
                what: format!("fps {} must be positive", cfg.fps),
            });
        }
        let period_ns = (1e9 / cfg.fps) as u64;
        let next = world.now().add_ns(period_ns);
        Ok(SyntheticCamera {
            targets: Targets::new(cfg.seed),
            cfg,
            world,
            settled_since: None,
            next,
            period_ns,
            seq: 0,
        })
    }

    /// The current target `(u, v)` and how many were reached before it.
    pub fn target(&self) -> ((f64, f64), u64) {
        (self.targets.current(), self.targets.index())
    }

    /// Advances the scene: a target held long enough is replaced by the next one.
    fn update_scene(&mut self, pose: &ArmPose) {
        let (u, v) = self.targets.current();
        let g = target_pose(u, v);
        let held = (0..SCENE_DOF).all(|j| {
            (pose.pos_rad[j] - g[j]).abs() < self.cfg.tolerance_rad
                && pose.vel_rad_s[j].abs() < self.cfg.settle_speed_rad_s
        });
        if !held {
            self.settled_since = None;
            return;
        }
        let since = *self.settled_since.get_or_insert(pose.t);
        if pose.t.saturating_since(since) as f64 * 1e-9 >= self.cfg.settle_s {
            self.targets.advance();
            self.settled_since = None;
        }
    }
}

impl Camera for SyntheticCamera {
    fn capture(&mut self, out: &mut RawFrame) -> Result<(), CameraError> {
        // Absolute frame schedule; frames that could not be taken in time are skipped.
        let now = self.world.now();
        if now > self.next {
            self.next = self.next.grid_at_or_after(self.period_ns, now);
        }
        self.world.sleep_until(self.next);
        self.next = self.next.add_ns(self.period_ns);
        // The camera may start before the arm's first measurement: it waits for one
        // (up to 2 s), as a real camera shows nothing of an arm not yet there.
        let mut pose = self.world.pose();
        let give_up = self.next.add_ns(2_000_000_000);
        while !pose.t.is_set() {
            if self.next >= give_up {
                return Err(CameraError::Capture(
                    "the arm has not been measured within 2 s".into(),
                ));
            }
            self.world.sleep_until(self.next);
            self.next = self.next.add_ns(self.period_ns);
            pose = self.world.pose();
        }
        // The exposure is now, on the camera's own clock; the arm was measured at the
        // last control cycle: its pose is carried on to now by its measured velocity.
        let t_capture = self.world.now().max(pose.t);
        let dt = t_capture.saturating_since(pose.t) as f64 * 1e-9;
        for j in 0..SCENE_DOF {
            if pose.vel_rad_s[j].is_finite() {
                pose.pos_rad[j] += pose.vel_rad_s[j] * dt;
            }
        }
        pose.t = t_capture;
        self.update_scene(&pose);
        let size = self.cfg.size;
        out.rgb.resize(size * size * 3, 0);
        let (u, v) = self.targets.current();
        render(&pose.pos_rad[..SCENE_DOF], u, v, size, &mut out.rgb);
        self.seq += 1;
        out.seq = self.seq;
        out.t_capture = t_capture;
        out.height = size as u32;
        out.width = size as u32;
        // Exposure and transport.
        self.world
            .sleep_until(t_capture.add_ns(self.cfg.latency_ns));
        Ok(())
    }

    fn target(&self) -> Option<(u64, [f64; 2])> {
        let ((u, v), index) = SyntheticCamera::target(self);
        Some((index, [u, v]))
    }

    fn describe(&self) -> String {
        format!(
            "synthetic camera {}x{} at {} fps, {:.1} ms latency, targets seeded {}",
            self.cfg.size,
            self.cfg.size,
            self.cfg.fps,
            self.cfg.latency_ns as f64 * 1e-6,
            self.cfg.seed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_seeded_and_apart() {
        let mut a = Targets::new(3);
        let mut b = Targets::new(3);
        let mut prev = (0.5, 0.5);
        for _ in 0..50 {
            assert_eq!(a.current(), b.current());
            let (u, v) = a.current();
            assert!((0.1..=0.9).contains(&u) && (0.1..=0.9).contains(&v));
            assert!(((u - prev.0).powi(2) + (v - prev.1).powi(2)).sqrt() >= 0.35);
            prev = (u, v);
            a.advance();
            b.advance();
        }
        assert_ne!(Targets::new(4).current(), Targets::new(3).current());
    }

    /// A world on a fake clock whose arm jumps to wherever `goto` says.
    struct Fake {
        t: std::sync::Arc<std::sync::atomic::AtomicU64>,
        pose: std::sync::Arc<std::sync::Mutex<[f64; SCENE_DOF]>>,
    }

    impl World for Fake {
        fn pose(&mut self) -> ArmPose {
            let mut p = ArmPose {
                t: self.now(),
                ..ArmPose::default()
            };
            p.pos_rad[..SCENE_DOF].copy_from_slice(&*self.pose.lock().unwrap());
            p
        }
        fn now(&self) -> MonoTime {
            MonoTime(self.t.load(std::sync::atomic::Ordering::Relaxed))
        }
        fn sleep_until(&self, t: MonoTime) {
            self.t
                .fetch_max(t.as_ns(), std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn the_scene_moves_on_once_the_arm_has_held_the_target() {
        let t = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1_000_000_000));
        let pose = std::sync::Arc::new(std::sync::Mutex::new(target_pose(0.5, 0.5)));
        let world = Fake {
            t: t.clone(),
            pose: pose.clone(),
        };
        let cfg = SyntheticConfig {
            size: 64,
            fps: 30.0,
            latency_ns: 8_000_000,
            seed: 1,
            tolerance_rad: 0.05,
            settle_speed_rad_s: 0.1,
            settle_s: 0.3,
        };
        let mut cam = SyntheticCamera::new(cfg, Box::new(world)).unwrap();
        let mut raw = RawFrame::default();
        let ((u, v), i0) = cam.target();
        // Away from the target: it stays.
        for _ in 0..30 {
            cam.capture(&mut raw).unwrap();
        }
        assert_eq!(cam.target(), ((u, v), i0));
        // Frames are stamped with the measurement's time and delivered after the latency.
        assert_eq!(raw.height, 64);
        let delivered = MonoTime(t.load(std::sync::atomic::Ordering::Relaxed));
        assert_eq!(delivered.saturating_since(raw.t_capture), 8_000_000);
        // At the target: it is replaced after 0.3 s of frames (9-10 at 30 fps), not before.
        *pose.lock().unwrap() = target_pose(u, v);
        let mut frames = 0;
        while cam.target().1 == i0 {
            cam.capture(&mut raw).unwrap();
            frames += 1;
            assert!(frames < 20, "the target was never replaced");
        }
        assert!(
            (10..=12).contains(&frames),
            "replaced after {frames} frames"
        );
        assert_ne!(cam.target().0, (u, v));
    }

    #[test]
    fn a_target_pose_projects_onto_its_own_coordinates() {
        let g = target_pose(0.3, 0.7);
        let (u, v) = project(&g);
        assert!((u - 0.3).abs() < 1e-12 && (v - 0.7).abs() < 1e-12);
    }
}
