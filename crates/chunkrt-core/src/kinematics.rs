//! Forward kinematics of a serial arm: the tool point and its positional Jacobian from
//! the joint angles, on the control thread, without allocation.
//!
//! A [`Chain`] is built once at load (from the arm's model file; `chunkrt-mujoco` reads
//! MJCF into one) and is then a fixed table: per hinge joint, the rigid transform from
//! the previous joint's body to this joint's body, the hinge's anchor and axis in that
//! body; then the tool's offset in the last body. This is MuJoCo's own composition
//! (`body pos/quat`, then a rotation about the joint's axis through its anchor), so that
//! MuJoCo can be the oracle in the tests without being a dependency of the permission
//! path. Written here rather than taken from a crate (`k` reads URDF and allocates per
//! call; the arm's model is MJCF): the whole of it is a product of rigid transforms.

use crate::chunk::MAX_DOF;

/// A 3-vector.
pub type Vec3 = [f64; 3];

/// A rigid transform: `x -> r x + p` (row-major rotation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Iso {
    /// Rotation, row-major.
    pub r: [[f64; 3]; 3],
    /// Translation.
    pub p: Vec3,
}

impl Iso {
    /// The identity.
    pub const IDENTITY: Iso = Iso {
        r: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        p: [0.0; 3],
    };

    /// The transform of a MuJoCo body frame: translation `pos`, orientation `quat`
    /// (w, x, y, z; normalised here, as MuJoCo's compiler does).
    pub fn from_pos_quat(pos: Vec3, quat: [f64; 4]) -> Iso {
        let n = quat.iter().map(|v| v * v).sum::<f64>().sqrt();
        let [w, x, y, z] = quat.map(|v| v / n);
        let r = [
            [
                1.0 - 2.0 * (y * y + z * z),
                2.0 * (x * y - w * z),
                2.0 * (x * z + w * y),
            ],
            [
                2.0 * (x * y + w * z),
                1.0 - 2.0 * (x * x + z * z),
                2.0 * (y * z - w * x),
            ],
            [
                2.0 * (x * z - w * y),
                2.0 * (y * z + w * x),
                1.0 - 2.0 * (x * x + y * y),
            ],
        ];
        Iso { r, p: pos }
    }

    /// A rotation by `angle` about the unit `axis` through `anchor`.
    pub fn hinge(axis: Vec3, anchor: Vec3, angle: f64) -> Iso {
        let (s, c) = angle.sin_cos();
        let t = 1.0 - c;
        let [x, y, z] = axis;
        let r = [
            [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
            [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
            [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
        ];
        // anchor + R (x - anchor)
        let ra = mat_vec(&r, anchor);
        let p = [anchor[0] - ra[0], anchor[1] - ra[1], anchor[2] - ra[2]];
        Iso { r, p }
    }

    /// `self ∘ other`: `other` applied first.
    pub fn then(&self, other: &Iso) -> Iso {
        let mut r = [[0.0; 3]; 3];
        for (i, row) in r.iter_mut().enumerate() {
            for (k, v) in row.iter_mut().enumerate() {
                *v = (0..3).map(|m| self.r[i][m] * other.r[m][k]).sum();
            }
        }
        Iso {
            r,
            p: self.apply(other.p),
        }
    }

    /// The image of the point `x`.
    pub fn apply(&self, x: Vec3) -> Vec3 {
        let rx = mat_vec(&self.r, x);
        [rx[0] + self.p[0], rx[1] + self.p[1], rx[2] + self.p[2]]
    }
}

fn mat_vec(r: &[[f64; 3]; 3], x: Vec3) -> Vec3 {
    [
        r[0][0] * x[0] + r[0][1] * x[1] + r[0][2] * x[2],
        r[1][0] * x[0] + r[1][1] * x[1] + r[1][2] * x[2],
        r[2][0] * x[0] + r[2][1] * x[1] + r[2][2] * x[2],
    ]
}

/// `a × b`.
pub fn cross(a: Vec3, b: Vec3) -> Vec3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

/// `a · b`.
pub fn dot(a: Vec3, b: Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// One hinge joint of a [`Chain`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// From the previous joint's body (or the base) to this joint's body, at angle 0.
    pub fixed: Iso,
    /// The hinge's anchor, in this body's frame.
    pub anchor: Vec3,
    /// The hinge's unit axis, in this body's frame.
    pub axis: Vec3,
}

/// Why a chain cannot be built.
#[derive(Clone, Debug, PartialEq)]
pub enum ChainError {
    /// More joints than [`MAX_DOF`], or none.
    Dof(usize),
    /// A joint's axis is zero or not finite.
    Axis(usize),
    /// A transform holds a non-finite number.
    NonFinite(usize),
}

impl std::fmt::Display for ChainError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChainError::Dof(n) => write!(f, "{n} hinge joints: expected 1 to {MAX_DOF}"),
            ChainError::Axis(j) => write!(f, "joint {j}: its axis is zero or not finite"),
            ChainError::NonFinite(j) => {
                write!(f, "joint {j}: a body transform holds a non-finite number")
            }
        }
    }
}

impl std::error::Error for ChainError {}

/// The tool point of a serial arm of hinge joints; see the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    dof: usize,
    links: [Link; MAX_DOF],
    tool: Iso,
    /// Per joint, a bound on the distance from its axis to the tool point in any pose.
    reach: [f64; MAX_DOF],
}

/// The tool point and, per joint, its positional Jacobian column (m/rad).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ToolJacobian {
    /// The tool point in the base frame (m).
    pub point: Vec3,
    /// `cols[j]`: the tool point's velocity per rad/s of joint `j`.
    pub cols: [Vec3; MAX_DOF],
}

impl Chain {
    /// A chain of `links` (base to tool), then `tool` (the tool's frame in the last
    /// joint's body). Normalises the axes.
    pub fn new(links: &[Link], tool: Iso) -> Result<Chain, ChainError> {
        if links.is_empty() || links.len() > MAX_DOF {
            return Err(ChainError::Dof(links.len()));
        }
        let mut table = [Link {
            fixed: Iso::IDENTITY,
            anchor: [0.0; 3],
            axis: [0.0, 0.0, 1.0],
        }; MAX_DOF];
        for (j, (slot, link)) in table.iter_mut().zip(links).enumerate() {
            let n = dot(link.axis, link.axis).sqrt();
            if !(n.is_finite() && n > 1e-12) {
                return Err(ChainError::Axis(j));
            }
            if !finite_iso(&link.fixed) || !link.anchor.iter().all(|v| v.is_finite()) {
                return Err(ChainError::NonFinite(j));
            }
            *slot = Link {
                axis: link.axis.map(|v| v / n),
                ..*link
            };
        }
        if !finite_iso(&tool) {
            return Err(ChainError::NonFinite(links.len()));
        }
        // Rotations keep lengths: from joint j's anchor the tool is at most its own
        // anchor's offset back to the body origin, then every later body's offset (and
        // its anchor there and back), then the tool's.
        let len = |v: Vec3| dot(v, v).sqrt();
        let mut reach = [0.0; MAX_DOF];
        let mut beyond = len(tool.p);
        for j in (0..links.len()).rev() {
            reach[j] = len(table[j].anchor) + beyond;
            beyond += len(table[j].fixed.p) + 2.0 * len(table[j].anchor);
        }
        Ok(Chain {
            dof: links.len(),
            links: table,
            tool,
            reach,
        })
    }

    /// A bound on the tool point's distance from joint `j`'s axis in any pose: how far
    /// the tool can move per radian of that joint.
    pub fn reach(&self, j: usize) -> f64 {
        self.reach.get(j).copied().unwrap_or(0.0)
    }

    /// The same chain with the tool point moved by `offset` in the tool's frame (e.g.
    /// the fingertips' centre from a flange); `None` if the offset is not finite.
    pub fn with_tool_offset(&self, offset: Vec3) -> Option<Chain> {
        if !offset.iter().all(|v| v.is_finite()) {
            return None;
        }
        let shift = Iso {
            p: offset,
            ..Iso::IDENTITY
        };
        Chain::new(&self.links[..self.dof], self.tool.then(&shift)).ok()
    }

    /// Number of joints.
    pub fn dof(&self) -> usize {
        self.dof
    }

    /// The tool point at joint angles `q` (the first [`Chain::dof`] entries are read).
    pub fn tool_point(&self, q: &[f64]) -> Vec3 {
        self.tool_jacobian(q).point
    }

    /// The tool point and its positional Jacobian at `q`. No allocation.
    pub fn tool_jacobian(&self, q: &[f64]) -> ToolJacobian {
        let mut t = Iso::IDENTITY;
        let mut axes = [[0.0; 3]; MAX_DOF];
        let mut anchors = [[0.0; 3]; MAX_DOF];
        for j in 0..self.dof {
            let link = &self.links[j];
            let angle = q.get(j).copied().unwrap_or(0.0);
            t = t
                .then(&link.fixed)
                .then(&Iso::hinge(link.axis, link.anchor, angle));
            axes[j] = mat_vec(&t.r, link.axis);
            anchors[j] = t.apply(link.anchor);
        }
        let point = t.then(&self.tool).p;
        let mut cols = [[0.0; 3]; MAX_DOF];
        for j in 0..self.dof {
            let arm = [
                point[0] - anchors[j][0],
                point[1] - anchors[j][1],
                point[2] - anchors[j][2],
            ];
            cols[j] = cross(axes[j], arm);
        }
        ToolJacobian { point, cols }
    }
}

impl ToolJacobian {
    /// The tool point's velocity for joint velocities `qd` over `dof` joints.
    pub fn velocity(&self, qd: &[f64], dof: usize) -> Vec3 {
        let mut v = [0.0; 3];
        for (col, w) in self.cols.iter().zip(qd).take(dof) {
            for k in 0..3 {
                v[k] += col[k] * w;
            }
        }
        v
    }
}

fn finite_iso(t: &Iso) -> bool {
    t.p.iter().all(|v| v.is_finite()) && t.r.iter().flatten().all(|v| v.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A planar two-link arm (both axes along z, links of 1 m and 0.5 m along x).
    fn planar() -> Chain {
        let link = |x: f64| Link {
            fixed: Iso::from_pos_quat([x, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]),
            anchor: [0.0; 3],
            axis: [0.0, 0.0, 1.0],
        };
        Chain::new(
            &[link(0.0), link(1.0)],
            Iso::from_pos_quat([0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]),
        )
        .unwrap()
    }

    #[test]
    fn a_planar_arm_lands_where_trigonometry_says() {
        let c = planar();
        for &(a, b) in &[(0.0, 0.0), (0.3, -1.1), (2.0, 0.7), (-1.5, 3.0)] {
            let p = c.tool_point(&[a, b]);
            let x = a.cos() + 0.5 * (a + b).cos();
            let y = a.sin() + 0.5 * (a + b).sin();
            assert!(
                (p[0] - x).abs() < 1e-14 && (p[1] - y).abs() < 1e-14,
                "{p:?}"
            );
            assert!(p[2].abs() < 1e-14);
        }
    }

    #[test]
    fn the_jacobian_is_the_derivative_of_the_point() {
        // A 3-D chain with offset anchors and tilted axes.
        let links = [
            Link {
                fixed: Iso::from_pos_quat([0.0, 0.0, 0.3], [1.0, 0.0, 0.0, 0.0]),
                anchor: [0.0, 0.0, 0.0],
                axis: [0.0, 0.0, 1.0],
            },
            Link {
                fixed: Iso::from_pos_quat([0.1, 0.0, 0.2], [1.0, -1.0, 0.0, 0.0]),
                anchor: [0.0, 0.05, 0.0],
                axis: [0.2, 0.0, 1.0],
            },
            Link {
                fixed: Iso::from_pos_quat([0.0, -0.3, 0.0], [0.9, 0.1, 0.4, -0.2]),
                anchor: [0.01, 0.0, 0.02],
                axis: [0.0, 1.0, 0.0],
            },
        ];
        let tool = Iso::from_pos_quat([0.05, 0.1, 0.2], [1.0, 0.0, 0.0, 0.0]);
        let c = Chain::new(&links, tool).unwrap();
        let q = [0.4, -0.7, 1.2];
        let jac = c.tool_jacobian(&q);
        let h = 1e-6;
        for j in 0..3 {
            let mut qp = q;
            let mut qm = q;
            qp[j] += h;
            qm[j] -= h;
            let (pp, pm) = (c.tool_point(&qp), c.tool_point(&qm));
            for k in 0..3 {
                let fd = (pp[k] - pm[k]) / (2.0 * h);
                assert!((fd - jac.cols[j][k]).abs() < 1e-8, "joint {j} axis {k}");
            }
        }
    }

    #[test]
    fn a_tool_offset_moves_the_point_in_the_tool_frame() {
        let c = planar().with_tool_offset([0.0, 0.2, 0.0]).unwrap();
        // At (pi/2, 0) the tool frame's y points along -x.
        let p = c.tool_point(&[std::f64::consts::FRAC_PI_2, 0.0]);
        assert!(
            (p[0] + 0.2).abs() < 1e-12 && (p[1] - 1.5).abs() < 1e-12,
            "{p:?}"
        );
        assert!(planar().with_tool_offset([f64::NAN, 0.0, 0.0]).is_none());
    }

    #[test]
    fn a_bad_chain_is_refused() {
        let link = Link {
            fixed: Iso::IDENTITY,
            anchor: [0.0; 3],
            axis: [0.0; 3],
        };
        assert_eq!(
            Chain::new(&[link], Iso::IDENTITY).unwrap_err(),
            ChainError::Axis(0)
        );
        assert_eq!(
            Chain::new(&[], Iso::IDENTITY).unwrap_err(),
            ChainError::Dof(0)
        );
    }
}
