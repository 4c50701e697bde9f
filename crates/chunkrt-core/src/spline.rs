//! C2 cubic spline over a chunk's setpoints.
//!
//! A natural cubic spline (second derivative zero at both ends) through the
//! setpoints of one chunk, on the chunk's uniform time grid. It is built once when
//! the chunk arrives (O(len * dof), tridiagonal solve, no allocation) and evaluated
//! in O(dof) at any time, which is also what upsamples the 20 ms setpoint grid to
//! any bus period.
//!
//! Outside the horizon the spline is continued as a straight line with the end
//! velocity. Because the natural end conditions make the acceleration zero at both
//! ends, that continuation is itself C2: the executor relies on it when it blends
//! out of a chunk whose horizon ends inside the blend window.

use crate::chunk::{Chunk, JointVec, MAX_DOF, MAX_HORIZON};
use crate::time::MonoTime;

/// Position, velocity and acceleration of every joint at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Pva {
    /// Positions.
    pub pos_rad: JointVec,
    /// Velocities.
    pub vel_rad_s: JointVec,
    /// Accelerations.
    pub acc_rad_s2: JointVec,
}

impl Pva {
    /// At rest at `pos`.
    pub fn at_rest(pos: &JointVec) -> Self {
        Pva {
            pos_rad: *pos,
            ..Pva::default()
        }
    }
}

/// A C2 cubic spline through a chunk's setpoints, built on arrival, evaluated in O(1).
///
/// Fixed-size (knots and second derivatives for `MAX_HORIZON x MAX_DOF`), so it can
/// live inside the executor and be rebuilt in place without touching the heap.
#[derive(Clone, Debug)]
pub struct ChunkSpline {
    /// Sequence number of the chunk.
    pub seq: u64,
    /// Capture time of the chunk's observation.
    pub t_obs: MonoTime,
    /// Time of knot 0.
    pub t_start: MonoTime,
    /// Publication time of the chunk.
    pub t_publish: MonoTime,
    dt_ns: u64,
    len: usize,
    dof: usize,
    /// Knot values `y[i][j]`.
    y: [JointVec; MAX_HORIZON],
    /// Second derivatives at the knots, `m[i][j]`.
    m: [JointVec; MAX_HORIZON],
}

impl Default for ChunkSpline {
    fn default() -> Self {
        ChunkSpline {
            seq: 0,
            t_obs: MonoTime::ZERO,
            t_start: MonoTime::ZERO,
            t_publish: MonoTime::ZERO,
            dt_ns: 0,
            len: 0,
            dof: 0,
            y: [[0.0; MAX_DOF]; MAX_HORIZON],
            m: [[0.0; MAX_DOF]; MAX_HORIZON],
        }
    }
}

impl ChunkSpline {
    /// Builds the spline of `chunk` (no allocation).
    ///
    /// The chunk is expected to have passed the executor's ingestion checks; out of
    /// range `len`/`dof` are clamped rather than trusted, so this never panics.
    pub fn build(chunk: &Chunk) -> Self {
        let mut s = ChunkSpline::default();
        s.rebuild(chunk);
        s
    }

    /// Rebuilds this spline in place from `chunk` (no allocation, no large move).
    pub fn rebuild(&mut self, chunk: &Chunk) {
        let n = (chunk.len as usize).min(MAX_HORIZON);
        let dof = (chunk.dof as usize).min(MAX_DOF);
        self.seq = chunk.seq;
        self.t_obs = chunk.t_obs;
        self.t_start = chunk.t_start;
        self.t_publish = chunk.t_publish;
        self.dt_ns = chunk.dt_ns.max(1);
        self.len = n;
        self.dof = dof;
        self.y[..n].copy_from_slice(&chunk.pos_rad[..n]);
        for row in self.m[..n].iter_mut() {
            row[..dof].fill(0.0);
        }
        if n < 3 {
            return; // 1 knot: constant; 2 knots: straight line. Both have M = 0.
        }
        // Natural spline, uniform spacing h:
        //   M[i-1] + 4 M[i] + M[i+1] = 6 (y[i+1] - 2 y[i] + y[i-1]) / h^2,  M[0] = M[n-1] = 0.
        // Thomas algorithm; the modified diagonal depends only on n, so it is shared
        // by every joint.
        let h = self.dt_ns as f64 * 1e-9;
        let k = 6.0 / (h * h);
        let mut cp = [0.0f64; MAX_HORIZON];
        // Unknowns are M[1..n-1], indices 1..=n-2; sub/super-diagonal 1, diagonal 4.
        cp[1] = 1.0 / 4.0;
        for i in 2..n - 1 {
            cp[i] = 1.0 / (4.0 - cp[i - 1]);
        }
        for j in 0..dof {
            // Forward sweep into m[i][j] (holds d' during the sweep).
            let mut prev = 0.0;
            for i in 1..n - 1 {
                let d = k * (self.y[i + 1][j] - 2.0 * self.y[i][j] + self.y[i - 1][j]);
                let denom = if i == 1 { 4.0 } else { 4.0 - cp[i - 1] };
                prev = (d - prev) / denom;
                self.m[i][j] = prev;
            }
            // Back substitution.
            for i in (1..n - 2).rev() {
                self.m[i][j] -= cp[i] * self.m[i + 1][j];
            }
        }
    }

    /// Time of the last knot (end of the horizon).
    pub fn t_end(&self) -> MonoTime {
        self.t_start
            .add_ns(self.dt_ns.saturating_mul(self.len.saturating_sub(1) as u64))
    }

    /// Number of joints.
    pub fn dof(&self) -> usize {
        self.dof
    }

    /// Number of knots.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the spline has no knots (never built).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Evaluates position, velocity and acceleration at `t`.
    ///
    /// Inside the horizon: the cubic. Outside: the straight-line continuation with
    /// the end velocity and zero acceleration (C2, thanks to the natural ends).
    /// Joints past `dof` are left untouched.
    pub fn eval(&self, t: MonoTime, out: &mut Pva) {
        let dof = self.dof;
        if self.len == 0 {
            return;
        }
        if self.len == 1 {
            for j in 0..dof {
                out.pos_rad[j] = self.y[0][j];
                out.vel_rad_s[j] = 0.0;
                out.acc_rad_s2[j] = 0.0;
            }
            return;
        }
        let h = self.dt_ns as f64 * 1e-9;
        let u = t.diff_ns(self.t_start) as f64 * 1e-9;
        let last_seg = self.len - 2;
        let horizon = (self.len - 1) as f64 * h;
        // Segment and local time; outside the horizon: the end state plus a line.
        let (seg, x, extra) = if u <= 0.0 {
            (0, 0.0, u)
        } else if u >= horizon {
            (last_seg, h, u - horizon)
        } else {
            let seg = ((u / h) as usize).min(last_seg);
            (seg, u - seg as f64 * h, 0.0)
        };
        let inside = extra == 0.0;
        let (y0, y1) = (&self.y[seg], &self.y[seg + 1]);
        let (m0, m1) = (&self.m[seg], &self.m[seg + 1]);
        for j in 0..dof {
            let dm = (m1[j] - m0[j]) / h;
            let b = (y1[j] - y0[j]) / h - h * (2.0 * m0[j] + m1[j]) / 6.0;
            let pos = y0[j] + x * (b + x * (0.5 * m0[j] + x * dm / 6.0));
            let vel = b + x * (m0[j] + 0.5 * x * dm);
            if inside {
                out.pos_rad[j] = pos;
                out.vel_rad_s[j] = vel;
                out.acc_rad_s2[j] = m0[j] + x * dm;
            } else {
                out.pos_rad[j] = pos + vel * extra;
                out.vel_rad_s[j] = vel;
                out.acc_rad_s2[j] = 0.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(rows: &[[f64; 2]], dt_ms: u64) -> Chunk {
        let mut c = Chunk {
            seq: 1,
            t_start: MonoTime::from_ms(1000),
            dt_ns: dt_ms * 1_000_000,
            len: rows.len() as u16,
            dof: 2,
            ..Chunk::default()
        };
        for (i, r) in rows.iter().enumerate() {
            c.pos_rad[i][0] = r[0];
            c.pos_rad[i][1] = r[1];
        }
        c
    }

    #[test]
    fn passes_through_every_knot() {
        let rows = [[0.0, 1.0], [0.3, 0.9], [0.1, 0.5], [-0.4, 0.2], [0.2, 0.0]];
        let c = chunk(&rows, 20);
        let s = ChunkSpline::build(&c);
        let mut p = Pva::default();
        for (i, r) in rows.iter().enumerate() {
            s.eval(c.t_of(i), &mut p);
            assert!((p.pos_rad[0] - r[0]).abs() < 1e-12, "knot {i}");
            assert!((p.pos_rad[1] - r[1]).abs() < 1e-12, "knot {i}");
        }
        // Natural ends.
        s.eval(c.t_start, &mut p);
        assert!(p.acc_rad_s2[0].abs() < 1e-9);
        s.eval(c.t_end(), &mut p);
        assert!(p.acc_rad_s2[0].abs() < 1e-9);
    }

    #[test]
    fn continuous_to_second_order_at_knots() {
        let rows = [[0.0, 1.0], [0.3, 0.9], [0.1, 0.5], [-0.4, 0.2], [0.2, 0.0]];
        let c = chunk(&rows, 20);
        let s = ChunkSpline::build(&c);
        let (mut a, mut b) = (Pva::default(), Pva::default());
        for i in 1..rows.len() - 1 {
            let t = c.t_of(i);
            s.eval(t.add_signed_ns(-1), &mut a);
            s.eval(t.add_ns(1), &mut b);
            for j in 0..2 {
                assert!((a.pos_rad[j] - b.pos_rad[j]).abs() < 1e-6);
                assert!((a.vel_rad_s[j] - b.vel_rad_s[j]).abs() < 1e-4);
                assert!((a.acc_rad_s2[j] - b.acc_rad_s2[j]).abs() < 1e-2);
            }
        }
    }

    #[test]
    fn line_is_reproduced_and_extended() {
        let rows = [[0.0, 0.0], [0.1, -0.2], [0.2, -0.4], [0.3, -0.6]];
        let c = chunk(&rows, 10);
        let s = ChunkSpline::build(&c);
        let mut p = Pva::default();
        s.eval(c.t_start.add_ns(15_000_000), &mut p);
        assert!((p.pos_rad[0] - 0.15).abs() < 1e-12);
        assert!((p.vel_rad_s[0] - 10.0).abs() < 1e-9);
        assert!((p.vel_rad_s[1] + 20.0).abs() < 1e-9);
        // Past the end: straight line with the end velocity.
        s.eval(c.t_end().add_ns(5_000_000), &mut p);
        assert!((p.pos_rad[0] - 0.35).abs() < 1e-12);
        assert_eq!(p.acc_rad_s2[0], 0.0);
    }
}
