//! What sits between the drive and the physics: the encoder the drive measures with,
//! and the transport delay its setpoints take. Fixed-size, never allocate.

use chunkrt_core::{JointVec, MAX_DOF};

/// The position a drive reads (quantized to the encoder's counts) and the velocity it
/// estimates from it (backward difference, first-order low-pass).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Encoder {
    /// Counts per radian; 0: exact.
    counts_per_rad: f64,
    /// Weight of a new velocity sample in the filter (`1 - exp(-2 pi f_c dt)`).
    alpha: f64,
    pub(crate) pos_rad: JointVec,
    pub(crate) vel_rad_s: JointVec,
}

impl Encoder {
    pub(crate) fn new(counts_per_rev: u64, filter_hz: f64, dt_s: f64) -> Encoder {
        Encoder {
            counts_per_rad: counts_per_rev as f64 / (2.0 * std::f64::consts::PI),
            alpha: 1.0 - (-2.0 * std::f64::consts::PI * filter_hz * dt_s).exp(),
            pos_rad: [0.0; MAX_DOF],
            vel_rad_s: [0.0; MAX_DOF],
        }
    }

    fn quantize(&self, q: f64) -> f64 {
        if self.counts_per_rad > 0.0 {
            (q * self.counts_per_rad).round() / self.counts_per_rad
        } else {
            q
        }
    }

    /// Sets joint `j`'s reading to `q` at rest (no velocity history).
    pub(crate) fn reset(&mut self, j: usize, q: f64) {
        self.pos_rad[j] = self.quantize(q);
        self.vel_rad_s[j] = 0.0;
    }

    /// Joint `j` read after a step of `dt_s` to the exact position `q` and velocity `v`.
    pub(crate) fn read(&mut self, j: usize, q: f64, v: f64, dt_s: f64) {
        if self.counts_per_rad == 0.0 {
            self.pos_rad[j] = q;
            self.vel_rad_s[j] = v;
            return;
        }
        let p = self.quantize(q);
        let raw = (p - self.pos_rad[j]) / dt_s;
        self.vel_rad_s[j] += self.alpha * (raw - self.vel_rad_s[j]);
        self.pos_rad[j] = p;
    }
}

/// How many setpoints the delay line holds (a 100 ms delay at a 1 kHz bus is 100).
pub(crate) const DELAY_SLOTS: usize = 256;

/// A setpoint on its way to the drives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Setpoint {
    /// When the drives' loops act on it.
    pub(crate) t_due_ns: u64,
    pub(crate) pos_rad: JointVec,
    pub(crate) vel_rad_s: JointVec,
}

/// Setpoints in arrival order, each released when its delay has passed.
pub(crate) struct DelayLine {
    delay_ns: u64,
    slots: Box<[Setpoint; DELAY_SLOTS]>,
    head: usize,
    len: usize,
}

impl DelayLine {
    pub(crate) fn new(delay_ns: u64) -> DelayLine {
        let empty = Setpoint {
            t_due_ns: 0,
            pos_rad: [0.0; MAX_DOF],
            vel_rad_s: [0.0; MAX_DOF],
        };
        DelayLine {
            delay_ns,
            slots: Box::new([empty; DELAY_SLOTS]),
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn delay_ns(&self) -> u64 {
        self.delay_ns
    }

    /// Drops every setpoint in flight (the drive was enabled, stopped or disabled).
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// A setpoint arriving at `t_ns`. When the line is full, the oldest is handed back
    /// to be latched at once (it is the one closest to its due time).
    pub(crate) fn push(
        &mut self,
        t_ns: u64,
        pos_rad: &JointVec,
        vel_rad_s: &JointVec,
    ) -> Option<Setpoint> {
        let overflow = if self.len == DELAY_SLOTS {
            self.pop()
        } else {
            None
        };
        let tail = (self.head + self.len) % DELAY_SLOTS;
        self.slots[tail] = Setpoint {
            t_due_ns: t_ns + self.delay_ns,
            pos_rad: *pos_rad,
            vel_rad_s: *vel_rad_s,
        };
        self.len += 1;
        overflow
    }

    /// The oldest setpoint if it is due at `t_ns`.
    pub(crate) fn pop_due(&mut self, t_ns: u64) -> Option<Setpoint> {
        if self.len > 0 && self.slots[self.head].t_due_ns <= t_ns {
            self.pop()
        } else {
            None
        }
    }

    fn pop(&mut self) -> Option<Setpoint> {
        if self.len == 0 {
            return None;
        }
        let s = self.slots[self.head];
        self.head = (self.head + 1) % DELAY_SLOTS;
        self.len -= 1;
        Some(s)
    }
}

/// Natural frequency of a holding brake on its joint's inertia (Hz): stiff enough that
/// the arm's weight sags it by tens of microradians, slow enough for the physics step.
const BRAKE_HZ: f64 = 100.0;

/// Holding brakes, one per joint: engaged while its drive's power stage is off
/// (disabled, faulted), they hold the joint where it was when they engaged, as a stiff,
/// critically damped spring saturated at the brake's holding torque (a joint loaded past
/// it slips). Released, they apply nothing.
pub(crate) struct Brakes {
    on: bool,
    lock: [Option<f64>; MAX_DOF],
    stiffness: JointVec,
    damping: JointVec,
    holding_nm: JointVec,
    /// The torque each applied in the last step (0 when released).
    torque_nm: JointVec,
}

impl Brakes {
    /// Brakes on joints of `inertia`, holding up to `holding_nm`; `on = false`: none.
    pub(crate) fn new(on: bool, inertia: &JointVec, holding_nm: &JointVec) -> Brakes {
        let w = 2.0 * std::f64::consts::PI * BRAKE_HZ;
        Brakes {
            on,
            lock: [None; MAX_DOF],
            stiffness: inertia.map(|j| j * w * w),
            damping: inertia.map(|j| 2.0 * j * w),
            holding_nm: *holding_nm,
            torque_nm: [0.0; MAX_DOF],
        }
    }

    /// Joint `j`'s brake torque for a step, the joint at `q` moving at `v`: engaged (and
    /// locked where the joint is, if it just engaged) or released.
    pub(crate) fn torque(&mut self, j: usize, engaged: bool, q: f64, v: f64) -> f64 {
        let t = match (self.on && engaged, self.lock[j]) {
            (false, _) => {
                self.lock[j] = None;
                0.0
            }
            (true, None) => {
                self.lock[j] = Some(q);
                -self.damping[j] * v
            }
            (true, Some(at)) => -self.stiffness[j] * (q - at) - self.damping[j] * v,
        };
        let h = self.holding_nm[j];
        self.torque_nm[j] = t.clamp(-h, h);
        self.torque_nm[j]
    }

    /// The torque joint `j`'s brake held in the last step, if it is engaged.
    pub(crate) fn held(&self, j: usize) -> Option<f64> {
        self.lock[j].map(|_| self.torque_nm[j])
    }
}
