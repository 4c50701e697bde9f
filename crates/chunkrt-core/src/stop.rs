//! Jerk-limited stop: the `Decelerating` rung of the fallback ladder.
//!
//! From the current position, velocity and acceleration of each joint, plan the
//! quickest stop (velocity and acceleration both zero) whose acceleration stays
//! within `max_acc` and whose jerk stays within `max_jerk`. Each joint gets up to
//! three constant-jerk phases: swing the acceleration to a braking peak, hold it,
//! swing it back to zero exactly as the velocity reaches zero. Joints stop
//! independently (a category-2 style stop, not path-synchronised).
//!
//! The start state is taken as is, so the stop is continuous in position, velocity
//! and acceleration with whatever the arm was commanded before.

use crate::chunk::{JointVec, MAX_DOF};
use crate::limits::JointLimits;
use crate::spline::Pva;

/// Smallest jerk / acceleration used, so a zero limit cannot divide by zero.
const MIN_LIMIT: f64 = 1e-9;

/// A planned jerk-limited stop for every joint, evaluated in O(dof).
#[derive(Clone, Copy, Debug)]
pub struct StopProfile {
    dof: usize,
    start: Pva,
    /// Jerk of each of the three phases, per joint.
    jerk: [[f64; 3]; MAX_DOF],
    /// Duration of each phase in seconds, per joint.
    dur_s: [[f64; 3]; MAX_DOF],
    /// Longest joint's stop, seconds.
    total_s: f64,
    /// Where each joint comes to rest.
    rest_pos: JointVec,
}

impl Default for StopProfile {
    fn default() -> Self {
        StopProfile {
            dof: 0,
            start: Pva::default(),
            jerk: [[0.0; 3]; MAX_DOF],
            dur_s: [[0.0; 3]; MAX_DOF],
            total_s: 0.0,
            rest_pos: [0.0; MAX_DOF],
        }
    }
}

/// State after running constant jerk `j` for `t` seconds from `(p, v, a)`.
fn integrate(p: f64, v: f64, a: f64, j: f64, t: f64) -> (f64, f64, f64) {
    (
        p + t * (v + t * (0.5 * a + t * j / 6.0)),
        v + t * (a + 0.5 * t * j),
        a + t * j,
    )
}

/// The three phases `(jerk, duration)` of the quickest jerk-limited stop from `(v0, a0)`.
fn plan_joint(v0: f64, a0: f64, max_acc: f64, max_jerk: f64) -> [(f64, f64); 3] {
    let jm = max_jerk.max(MIN_LIMIT);
    let am = max_acc.max(MIN_LIMIT);
    // Velocity reached if the acceleration is swung to zero right away.
    let v_ramp = v0 + a0 * a0.abs() / (2.0 * jm);
    if v_ramp == 0.0 || !v_ramp.is_finite() {
        return [(-a0.signum() * jm, a0.abs() / jm), (0.0, 0.0), (0.0, 0.0)];
    }
    // Work in coordinates where the remaining velocity is positive (brake with a < 0).
    let s = v_ramp.signum();
    let (v, a) = (s * v0, s * a0);
    // Peak braking acceleration -x of the triangular profile (no constant phase):
    // v + (a^2 - 2 x^2) / (2 J) = 0. Positive because v_ramp > 0.
    let x = (v * jm + 0.5 * a * a).max(0.0).sqrt();
    let peak = x.min(am);
    let a1 = -peak;
    let j1 = if a1 < a { -jm } else { jm };
    let t1 = (a1 - a).abs() / jm;
    let dv1 = (a1 * a1 - a * a) / (2.0 * j1);
    let t3 = peak / jm;
    let dv3 = -peak * peak / (2.0 * jm);
    let t2 = if peak > 0.0 {
        ((v + dv1 + dv3) / peak).max(0.0)
    } else {
        0.0
    };
    [(s * j1, t1), (0.0, t2), (s * jm, t3)]
}

impl StopProfile {
    /// Plans the stop from `start` (its `dof` first joints) within `limits`.
    pub fn plan(start: &Pva, dof: usize, limits: &JointLimits) -> Self {
        let dof = dof.min(MAX_DOF);
        let mut s = StopProfile {
            dof,
            start: *start,
            ..StopProfile::default()
        };
        for j in 0..dof {
            let lim = &limits.joint[j];
            let phases = plan_joint(
                start.vel_rad_s[j],
                start.acc_rad_s2[j],
                lim.max_acc_rad_s2,
                lim.max_jerk_rad_s3,
            );
            let (mut p, mut v, mut a) = (start.pos_rad[j], start.vel_rad_s[j], start.acc_rad_s2[j]);
            let mut total = 0.0;
            for (k, (jk, tk)) in phases.iter().enumerate() {
                s.jerk[j][k] = *jk;
                s.dur_s[j][k] = *tk;
                (p, v, a) = integrate(p, v, a, *jk, *tk);
                total += tk;
            }
            let _ = (v, a); // zero up to rounding; the rest state is exactly at rest.
            s.rest_pos[j] = p;
            s.total_s = s.total_s.max(total);
        }
        s
    }

    /// Seconds until every joint is at rest.
    pub fn duration_s(&self) -> f64 {
        self.total_s
    }

    /// Where the joints come to rest.
    pub fn rest_pos(&self) -> &JointVec {
        &self.rest_pos
    }

    /// State `t_s` seconds after the start (at rest after the end).
    pub fn eval(&self, t_s: f64, out: &mut Pva) {
        let t_s = t_s.max(0.0);
        for j in 0..self.dof {
            let (mut p, mut v, mut a) = (
                self.start.pos_rad[j],
                self.start.vel_rad_s[j],
                self.start.acc_rad_s2[j],
            );
            let mut left = t_s;
            let mut done = true;
            for k in 0..3 {
                let d = self.dur_s[j][k];
                if left < d {
                    (p, v, a) = integrate(p, v, a, self.jerk[j][k], left);
                    done = false;
                    break;
                }
                (p, v, a) = integrate(p, v, a, self.jerk[j][k], d);
                left -= d;
            }
            if done {
                (p, v, a) = (self.rest_pos[j], 0.0, 0.0);
            }
            out.pos_rad[j] = p;
            out.vel_rad_s[j] = v;
            out.acc_rad_s2[j] = a;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::JointLimit;

    fn limits() -> JointLimits {
        JointLimits::uniform(1, JointLimit::default())
    }

    fn check(v0: f64, a0: f64) {
        let lim = limits();
        let mut start = Pva::default();
        start.pos_rad[0] = 0.5;
        start.vel_rad_s[0] = v0;
        start.acc_rad_s2[0] = a0;
        let s = StopProfile::plan(&start, 1, &lim);
        let mut p = Pva::default();
        s.eval(0.0, &mut p);
        assert!((p.pos_rad[0] - 0.5).abs() < 1e-12);
        assert!((p.vel_rad_s[0] - v0).abs() < 1e-12);
        assert!((p.acc_rad_s2[0] - a0).abs() < 1e-12);
        // Velocity reaches zero at the end, continuously; acceleration within limits
        // (or moving toward them when it started outside).
        let end = s.duration_s();
        s.eval(end - 1e-9, &mut p);
        assert!(
            p.vel_rad_s[0].abs() < 1e-6,
            "v0 {v0} a0 {a0}: {}",
            p.vel_rad_s[0]
        );
        assert!(p.acc_rad_s2[0].abs() < 1e-5);
        let mut t = 0.0;
        let mut prev = p;
        s.eval(0.0, &mut prev);
        while t < end + 0.01 {
            t += 1e-4;
            s.eval(t, &mut p);
            let jerk = (p.acc_rad_s2[0] - prev.acc_rad_s2[0]) / 1e-4;
            assert!(jerk.abs() <= 500.0 + 1e-6, "jerk {jerk}");
            if a0.abs() <= 10.0 {
                assert!(p.acc_rad_s2[0].abs() <= 10.0 + 1e-9);
            }
            assert!((p.pos_rad[0] - prev.pos_rad[0]).abs() < 3e-4);
            prev = p;
        }
    }

    #[test]
    fn stops_from_every_kind_of_state() {
        for &(v, a) in &[
            (0.0, 0.0),
            (1.5, 0.0),
            (-1.5, 0.0),
            (1.5, 8.0),
            (1.5, -9.0),
            (0.01, -9.0),
            (-0.01, 9.0),
            (0.0, 5.0),
            (2.0, 12.0),
            (0.05, 0.0),
        ] {
            check(v, a);
        }
    }
}
