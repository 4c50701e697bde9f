//! Quintic (minimum-jerk style) joint-space segments with velocity and acceleration bounds.
//!
//! A segment joins a start state (position, velocity, acceleration per joint) to a goal at
//! rest. The quintic matches all three boundary values, so a new segment planned from the
//! state of the previous one continues it with C2 continuity: consecutive chunks agree.

use chunkrt_core::{JointVec, MAX_DOF};

/// Shortest segment duration: keeps tiny moves from becoming needlessly violent.
const MIN_DURATION_S: f64 = 0.1;
/// Velocity/acceleration peaks are checked at this many interior points.
const PEAK_SAMPLES: usize = 64;
/// Duration growth per iteration when a peak exceeds its bound.
const GROWTH: f64 = 1.1;
/// Upper bound on duration growth iterations (1.1^200 is astronomically long).
const MAX_ITERATIONS: usize = 200;

/// Position, velocity and acceleration of every joint at one instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JointState {
    /// Positions in rad.
    pub pos_rad: JointVec,
    /// Velocities in rad/s.
    pub vel_rad_s: JointVec,
    /// Accelerations in rad/s².
    pub acc_rad_s2: JointVec,
}

impl JointState {
    /// At rest at `pos_rad`.
    pub fn at_rest(pos_rad: JointVec) -> Self {
        JointState {
            pos_rad,
            vel_rad_s: [0.0; MAX_DOF],
            acc_rad_s2: [0.0; MAX_DOF],
        }
    }
}

/// One quintic per joint from a start state to a goal at rest over `duration_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Segment {
    dof: usize,
    duration_s: f64,
    /// `coeff[j][k]`: coefficient of `tau^k` for joint `j`.
    coeff: [[f64; 6]; MAX_DOF],
    goal_rad: JointVec,
}

impl Segment {
    /// Plans the shortest segment (growing from the minimum-jerk estimate in 10 % steps)
    /// whose sampled speed and acceleration stay within the bounds on every joint.
    ///
    /// Bounds must be positive and finite (checked by the caller where they are born).
    pub fn plan(
        dof: usize,
        start: &JointState,
        goal_rad: &JointVec,
        max_vel_rad_s: f64,
        max_acc_rad_s2: f64,
    ) -> Segment {
        // Minimum-jerk rest-to-rest peaks: v = 1.875 d / T, a = 5.7735 d / T².
        let mut duration_s = MIN_DURATION_S;
        for (g, p) in goal_rad.iter().zip(&start.pos_rad).take(dof) {
            let d = (g - p).abs();
            duration_s = duration_s
                .max(1.875 * d / max_vel_rad_s)
                .max((5.7735 * d / max_acc_rad_s2).sqrt());
        }
        let mut seg = Segment::with_duration(dof, start, goal_rad, duration_s);
        for _ in 0..MAX_ITERATIONS {
            let (v_peak, a_peak) = seg.peaks();
            // A start velocity above the bound cannot be undone by stretching; accept
            // the segment once stretching no longer helps the start.
            let v_start = (0..dof).fold(0.0f64, |m, j| m.max(start.vel_rad_s[j].abs()));
            let a_start = (0..dof).fold(0.0f64, |m, j| m.max(start.acc_rad_s2[j].abs()));
            let v_ok = v_peak <= max_vel_rad_s.max(v_start) * (1.0 + 1e-9);
            let a_ok = a_peak <= max_acc_rad_s2.max(a_start) * (1.0 + 1e-9);
            if v_ok && a_ok {
                break;
            }
            duration_s *= GROWTH;
            seg = Segment::with_duration(dof, start, goal_rad, duration_s);
        }
        seg
    }

    /// The quintic with the given duration (no bound check).
    pub fn with_duration(
        dof: usize,
        start: &JointState,
        goal_rad: &JointVec,
        duration_s: f64,
    ) -> Segment {
        let t = duration_s;
        let (t2, t3, t4, t5) = (t * t, t * t * t, t.powi(4), t.powi(5));
        let mut coeff = [[0.0; 6]; MAX_DOF];
        for j in 0..dof {
            let (p0, v0, a0) = (start.pos_rad[j], start.vel_rad_s[j], start.acc_rad_s2[j]);
            let d = goal_rad[j] - p0;
            coeff[j] = [
                p0,
                v0,
                0.5 * a0,
                (20.0 * d - 12.0 * v0 * t - 3.0 * a0 * t2) / (2.0 * t3),
                (-30.0 * d + 16.0 * v0 * t + 3.0 * a0 * t2) / (2.0 * t4),
                (12.0 * d - 6.0 * v0 * t - a0 * t2) / (2.0 * t5),
            ];
        }
        Segment {
            dof,
            duration_s,
            coeff,
            goal_rad: *goal_rad,
        }
    }

    /// Duration in seconds.
    pub fn duration_s(&self) -> f64 {
        self.duration_s
    }

    /// The goal the segment ends at.
    pub fn goal_rad(&self) -> &JointVec {
        &self.goal_rad
    }

    /// State `tau` seconds after the segment's start; before it the start, after it the
    /// goal at rest.
    pub fn state_at(&self, tau_s: f64) -> JointState {
        if tau_s >= self.duration_s {
            return JointState::at_rest(self.goal_rad);
        }
        let tau = tau_s.max(0.0);
        let mut s = JointState::at_rest([0.0; MAX_DOF]);
        for j in 0..self.dof {
            let c = &self.coeff[j];
            s.pos_rad[j] =
                c[0] + tau * (c[1] + tau * (c[2] + tau * (c[3] + tau * (c[4] + tau * c[5]))));
            s.vel_rad_s[j] = c[1]
                + tau * (2.0 * c[2] + tau * (3.0 * c[3] + tau * (4.0 * c[4] + tau * 5.0 * c[5])));
            s.acc_rad_s2[j] =
                2.0 * c[2] + tau * (6.0 * c[3] + tau * (12.0 * c[4] + tau * 20.0 * c[5]));
        }
        s
    }

    /// Largest sampled |velocity| and |acceleration| over all joints.
    fn peaks(&self) -> (f64, f64) {
        let mut v_peak = 0.0f64;
        let mut a_peak = 0.0f64;
        for k in 0..=PEAK_SAMPLES {
            let s = self.state_at(self.duration_s * k as f64 / PEAK_SAMPLES as f64 * 0.999_999);
            for j in 0..self.dof {
                v_peak = v_peak.max(s.vel_rad_s[j].abs());
                a_peak = a_peak.max(s.acc_rad_s2[j].abs());
            }
        }
        (v_peak, a_peak)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vec(v: &[f64]) -> JointVec {
        let mut out = [0.0; MAX_DOF];
        out[..v.len()].copy_from_slice(v);
        out
    }

    #[test]
    fn matches_boundary_conditions() {
        let start = JointState {
            pos_rad: vec(&[0.1, -0.2]),
            vel_rad_s: vec(&[0.3, 0.0]),
            acc_rad_s2: vec(&[-1.0, 0.5]),
        };
        let seg = Segment::with_duration(2, &start, &vec(&[1.0, 0.4]), 1.3);
        let s0 = seg.state_at(0.0);
        let s1 = seg.state_at(1.3 - 1e-12);
        for j in 0..2 {
            assert!((s0.pos_rad[j] - start.pos_rad[j]).abs() < 1e-12);
            assert!((s0.vel_rad_s[j] - start.vel_rad_s[j]).abs() < 1e-12);
            assert!((s0.acc_rad_s2[j] - start.acc_rad_s2[j]).abs() < 1e-12);
            assert!((s1.pos_rad[j] - [1.0, 0.4][j]).abs() < 1e-9);
            assert!(s1.vel_rad_s[j].abs() < 1e-9);
            assert!(s1.acc_rad_s2[j].abs() < 1e-8);
        }
    }

    #[test]
    fn plan_respects_bounds() {
        let start = JointState::at_rest(vec(&[0.0, 0.0, 0.0]));
        let goal = vec(&[2.0, -1.0, 0.5]);
        let seg = Segment::plan(3, &start, &goal, 1.0, 4.0);
        let (v, a) = seg.peaks();
        assert!(v <= 1.0 + 1e-9, "peak speed {v}");
        assert!(a <= 4.0 + 1e-9, "peak acc {a}");
        // Minimum-jerk: 2 rad at 1 rad/s needs 3.75 s; no more than one growth step beyond.
        assert!(seg.duration_s() >= 3.75 - 1e-9 && seg.duration_s() < 3.75 * 1.1 + 1e-9);
    }
}
