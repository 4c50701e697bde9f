//! The Cartesian filter: the tool point's speed, and its approach to declared surfaces,
//! bounded in joint space before the permission gate.
//!
//! Each cycle the proposal's step from the last command, `dq = q_proposed - q_commanded`,
//! moves the tool by about `J dq` (the tool's positional Jacobian at the commanded
//! pose). Two constraints bound that motion:
//! - **approach** (per declared plane, `n · (p - p0) = z`): the speed toward the plane
//!   over the period is at most the discrete braking bound
//!   `v_max(z) = −a·T + √((a·T)² + 2·a·z)`, i.e. `v ≤ √(2·a·z')` at the pose it
//!   reaches, `z' = z − v·T` (so it never crosses the plane and can always brake at `a`
//!   before it); at or behind the plane no motion toward it is allowed;
//! - **tcp_speed**: the tool point's speed `|Δp| / T` at most `max_speed_m_s`
//!   (ISO 10218's reduced speed is 0.25 m/s).
//!
//! The approach constraints are half-spaces in `dq`; the smallest change to `dq` (in the
//! joint-space Euclidean norm) that meets them is found by cyclic projection onto each
//! (Hildreth's method, a fixed number of sweeps): a control-barrier-function step with
//! a closed-form solution per surface. The speed bound then scales `dq` (scaling keeps
//! the half-spaces, whose bounds are ≥ 0). The result is checked with the exact forward
//! kinematics, not the linearisation; where that shows a violation the step is halved
//! until it holds, and `dq = 0` (stay at the command) meets every constraint. Fixed
//! iteration counts, fixed-size tables: no allocation on the control thread.

use crate::chunk::{JointVec, MAX_DOF};
use crate::constraint::Constraint;
use crate::kinematics::{dot, Chain, ToolJacobian, Vec3};

/// Most declared planes.
pub const MAX_PLANES: usize = 8;

/// Projection sweeps over the planes.
const SWEEPS: usize = 8;

/// Tries of the exact check before the step is dropped ([`CartesianFilter::settle`]).
const SETTLE_STEPS: usize = 12;

/// A surface: the points `x` with `normal · (x - point) = 0`; the free side is where
/// that is positive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plane {
    /// A point on the plane (m, base frame).
    pub point: Vec3,
    /// Unit normal toward the free side.
    pub normal: Vec3,
    /// The speed toward it at which the tool may touch it (m/s; 0: a keep-out plane,
    /// never crossed).
    pub touch_m_s: f64,
}

impl Plane {
    /// A plane through `point` with `normal` (normalised here; `None` if it is zero
    /// or not finite).
    pub fn new(point: Vec3, normal: Vec3) -> Option<Plane> {
        let n = dot(normal, normal).sqrt();
        if !(n.is_finite() && n > 1e-12 && point.iter().all(|v| v.is_finite())) {
            return None;
        }
        Some(Plane {
            point,
            normal: normal.map(|v| v / n),
            touch_m_s: 0.0,
        })
    }

    /// The same plane, touched at up to `touch_m_s` (`None` if negative or not finite).
    pub fn touched_at(self, touch_m_s: f64) -> Option<Plane> {
        (touch_m_s.is_finite() && touch_m_s >= 0.0).then_some(Plane { touch_m_s, ..self })
    }

    /// Whether the move from `p0` to `p1` over `t` seconds keeps this plane: it does
    /// not end behind it, unless it goes no faster toward it than its touch speed.
    pub fn kept(&self, p0: Vec3, p1: Vec3, t: f64) -> bool {
        let z1 = self.distance(p1);
        if z1 >= 0.0 {
            return true;
        }
        self.touch_m_s > 0.0 && (self.distance(p0) - z1) / t <= self.touch_m_s * (1.0 + 1e-12)
    }

    /// Signed distance of `x` from the plane (positive on the free side).
    pub fn distance(&self, x: Vec3) -> f64 {
        dot(
            self.normal,
            [
                x[0] - self.point[0],
                x[1] - self.point[1],
                x[2] - self.point[2],
            ],
        )
    }
}

/// The largest speed toward a plane at distance `z` over a period `t` with braking
/// deceleration `a` and touch speed `touch` (see the module docs): `v` such that
/// `v² ≤ touch² + 2·a·z'` at the pose it reaches, `z' = z − v·t`; never below `touch`;
/// `touch` at or behind the plane (0 for a keep-out plane).
pub fn approach_bound(z: f64, a: f64, t: f64, touch: f64) -> f64 {
    if z <= 0.0 {
        return touch;
    }
    let at = a * t;
    (-at + (at * at + touch * touch + 2.0 * a * z).sqrt()).max(touch)
}

/// What the Cartesian filter bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CartesianLimits {
    /// The tool point's speed limit (m/s), if any.
    pub max_speed_m_s: Option<f64>,
    /// The deceleration the approach envelope assumes the arm can brake at along a
    /// plane's normal (m/s²).
    pub brake_m_s2: f64,
    planes: [Plane; MAX_PLANES],
    n_planes: usize,
}

impl CartesianLimits {
    /// Limits with a speed bound and the `planes` (at most [`MAX_PLANES`]; `None` if
    /// more, or if a number is not finite and positive).
    pub fn new(
        max_speed_m_s: Option<f64>,
        brake_m_s2: f64,
        planes: &[Plane],
    ) -> Option<CartesianLimits> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if planes.len() > MAX_PLANES
            || !positive(brake_m_s2)
            || max_speed_m_s.is_some_and(|v| !positive(v))
        {
            return None;
        }
        let mut table = [Plane {
            point: [0.0; 3],
            normal: [0.0, 0.0, 1.0],
            touch_m_s: 0.0,
        }; MAX_PLANES];
        table[..planes.len()].copy_from_slice(planes);
        Some(CartesianLimits {
            max_speed_m_s,
            brake_m_s2,
            planes: table,
            n_planes: planes.len(),
        })
    }

    /// The declared planes.
    pub fn planes(&self) -> &[Plane] {
        &self.planes[..self.n_planes]
    }
}

/// Which Cartesian constraints acted on a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CartesianActed {
    /// The approach envelope changed the step.
    pub approach: bool,
    /// The tool-speed limit changed the step.
    pub speed: bool,
}

impl CartesianActed {
    /// The gate's bits for what acted ([`Constraint::Approach`], [`Constraint::ToolSpeed`]).
    pub fn bits(self) -> u32 {
        let mut bits = 0;
        if self.approach {
            bits |= Constraint::Approach.bit();
        }
        if self.speed {
            bits |= Constraint::ToolSpeed.bit();
        }
        bits
    }
}

/// The tool point's chain and its limits; see the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct CartesianFilter {
    chain: Chain,
    limits: CartesianLimits,
}

impl CartesianFilter {
    /// A filter for the tool of `chain`.
    pub fn new(chain: Chain, limits: CartesianLimits) -> CartesianFilter {
        CartesianFilter { chain, limits }
    }

    /// The chain.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// The limits.
    pub fn limits(&self) -> &CartesianLimits {
        &self.limits
    }

    /// Bounds the step from `from` (the last command) to `to` (the proposal, changed
    /// in place) over a period of `t` seconds. No allocation.
    pub fn apply(&self, from: &JointVec, to: &mut JointVec, t: f64) -> CartesianActed {
        self.apply_at(from, &self.chain.tool_jacobian(from), to, t)
    }

    /// [`CartesianFilter::apply`] with the tool's Jacobian at `from` already computed
    /// (the gate bounds several steps from one commanded pose per cycle).
    pub fn apply_at(
        &self,
        from: &JointVec,
        jac: &ToolJacobian,
        to: &mut JointVec,
        t: f64,
    ) -> CartesianActed {
        let dof = self.chain.dof().min(MAX_DOF);
        let mut dq = [0.0; MAX_DOF];
        for j in 0..dof {
            dq[j] = to[j] - from[j];
        }
        let mut acted = CartesianActed::default();
        // Approach half-spaces: g · dq <= b, g = -(n^T J), b = v_max(z) T.
        let mut g = [[0.0; MAX_DOF]; MAX_PLANES];
        let mut b = [0.0; MAX_PLANES];
        let planes = self.limits.planes();
        for (k, plane) in planes.iter().enumerate() {
            for (gj, col) in g[k].iter_mut().zip(&jac.cols).take(dof) {
                *gj = -dot(plane.normal, *col);
            }
            let z = plane.distance(jac.point);
            b[k] = approach_bound(z, self.limits.brake_m_s2, t, plane.touch_m_s) * t;
        }
        for _ in 0..SWEEPS {
            let mut moved = false;
            for k in 0..planes.len() {
                let over = row_dot(&g[k], &dq, dof) - b[k];
                let norm2 = row_dot(&g[k], &g[k], dof);
                if over > 0.0 && norm2 > 0.0 {
                    for j in 0..dof {
                        dq[j] -= over / norm2 * g[k][j];
                    }
                    moved = true;
                    acted.approach = true;
                }
            }
            if !moved {
                break;
            }
        }
        // What the sweeps leave over (they converge, not always in SWEEPS): scale.
        for k in 0..planes.len() {
            let gd = row_dot(&g[k], &dq, dof);
            if gd > b[k] {
                scale(&mut dq, b[k] / gd, dof);
                acted.approach = true;
            }
        }
        if let Some(vmax) = self.limits.max_speed_m_s {
            let v = jac.velocity(&dq, dof);
            let step = dot(v, v).sqrt();
            if step > vmax * t {
                scale(&mut dq, vmax * t / step, dof);
                acted.speed = true;
            }
        }
        self.settle(from, jac.point, &mut dq, t, &mut acted);
        for j in 0..dof {
            to[j] = from[j] + dq[j];
        }
        acted
    }

    /// Whether the move of the tool from `p0` to `p1` over `t` keeps every plane (the
    /// hard check of the gate's stop preview: see `Gate`).
    pub fn keeps_out(&self, p0: Vec3, p1: Vec3, t: f64) -> bool {
        self.limits.planes().iter().all(|pl| pl.kept(p0, p1, t))
    }

    /// The exact check: while the pose `dq` reaches breaks a bound (by the forward
    /// kinematics, not the linearisation), `dq` is halved, or scaled further where the
    /// ratio of what the bound allows to what the step does is smaller; after
    /// [`SETTLE_STEPS`] tries it is dropped. (Scaling by the ratio alone keeps more of
    /// a step the joints then cannot always follow: the envelope's excess in the gate
    /// proptest doubled.)
    fn settle(
        &self,
        from: &JointVec,
        p0: Vec3,
        dq: &mut [f64; MAX_DOF],
        t: f64,
        acted: &mut CartesianActed,
    ) {
        let dof = self.chain.dof().min(MAX_DOF);
        for _ in 0..SETTLE_STEPS {
            let mut q1 = *from;
            for j in 0..dof {
                q1[j] += dq[j];
            }
            match self.violation(p0, self.chain.tool_point(&q1), t) {
                None => return,
                Some(v) => {
                    v.mark(acted);
                    scale(dq, (v.ratio * (1.0 - 1e-6)).clamp(0.0, 0.5), dof);
                }
            }
        }
        *dq = [0.0; MAX_DOF];
    }

    /// The bound the move from `p0` to `p1` over `t` breaks most, if any, with the
    /// ratio of what it allows to what the move does.
    fn violation(&self, p0: Vec3, p1: Vec3, t: f64) -> Option<Violation> {
        let mut worst: Option<Violation> = None;
        let mut note = |v: Violation| {
            if worst.is_none_or(|w| v.ratio < w.ratio) {
                worst = Some(v);
            }
        };
        for plane in self.limits.planes() {
            let z0 = plane.distance(p0);
            let toward = z0 - plane.distance(p1);
            // A relative tolerance for rounding: the bound is met exactly by projection.
            let allowed = approach_bound(z0, self.limits.brake_m_s2, t, plane.touch_m_s) * t;
            if toward > allowed + 1e-12 * (t + allowed) {
                note(Violation {
                    approach: true,
                    ratio: allowed / toward,
                });
            }
        }
        if let Some(vmax) = self.limits.max_speed_m_s {
            let d = [p1[0] - p0[0], p1[1] - p0[1], p1[2] - p0[2]];
            let step = dot(d, d).sqrt();
            if step > vmax * t * (1.0 + 1e-12) {
                note(Violation {
                    approach: false,
                    ratio: vmax * t / step,
                });
            }
        }
        worst
    }
}

/// A bound a step breaks ([`CartesianFilter::settle`]).
#[derive(Clone, Copy)]
struct Violation {
    /// The approach envelope (else the tool-speed limit).
    approach: bool,
    /// What the bound allows over what the step does, in [0, 1).
    ratio: f64,
}

impl Violation {
    fn mark(self, acted: &mut CartesianActed) {
        if self.approach {
            acted.approach = true;
        } else {
            acted.speed = true;
        }
    }
}

fn row_dot(a: &[f64; MAX_DOF], b: &[f64; MAX_DOF], dof: usize) -> f64 {
    a.iter().zip(b).take(dof).map(|(x, y)| x * y).sum()
}

fn scale(dq: &mut [f64; MAX_DOF], s: f64, dof: usize) {
    for v in dq.iter_mut().take(dof) {
        *v *= s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_discrete_bound_is_the_braking_curve_at_the_next_pose() {
        let (a, t) = (5.0, 0.02);
        for &z in &[1e-4, 1e-3, 0.01, 0.1, 1.0] {
            let v = approach_bound(z, a, t, 0.0);
            let z1 = z - v * t;
            assert!(z1 >= 0.0);
            assert!(
                (v * v - 2.0 * a * z1).abs() < 1e-12 * (1.0 + v * v),
                "z {z}"
            );
            assert!(v <= (2.0 * a * z).sqrt());
            // With a touch speed: the curve v² = touch² + 2 a z' where that is above it.
            let touch = 0.03;
            let v = approach_bound(z, a, t, touch);
            let z1 = z - v * t;
            assert!(v >= touch);
            if v > touch {
                assert!(
                    (v * v - touch * touch - 2.0 * a * z1).abs() < 1e-12,
                    "z {z}"
                );
            }
        }
        assert_eq!(approach_bound(0.0, a, t, 0.0), 0.0);
        assert_eq!(approach_bound(-0.01, a, t, 0.0), 0.0);
        assert_eq!(approach_bound(-0.01, a, t, 0.03), 0.03);
    }
}
