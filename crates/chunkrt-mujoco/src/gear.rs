//! Between the drive's motor and the link: a gear with torsional compliance and backlash,
//! the two mechanisms of a real joint that a rigid arm model leaves out. Fixed-size,
//! never allocates.
//!
//! A compliant joint has a second inertia on the motor side of its gear (the rotor and
//! the gear's input, reflected to the joint: `motor_inertia_kg_m2`), coupled to MuJoCo's
//! link by the torque the gear transmits
//!
//! ```text
//! tau_t = k * dead(theta_m - q, b / 2) + c * (omega_m - qdot)      (teeth in contact)
//! dead(x, h) = 0 for |x| <= h, x - h sign(x) beyond
//! ```
//!
//! Inside the backlash gap `b` the teeth do not touch and nothing is transmitted; in
//! contact they can only push (with backlash, a damping pull that would reverse the
//! contact force is cut to zero). The drive's torque and the holding brake act on the
//! motor side, and the drive's encoder reads it, as a motor encoder does; the link feels
//! `tau_t`. The motor side is integrated semi-implicitly at the physics step, the link
//! by MuJoCo.

use chunkrt_core::{JointVec, MAX_DOF};

/// One joint's gear. `stiffness_nm_rad = 0`: rigid (the drive acts on the link itself,
/// no motor side), and then the other values must be 0 too.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GearParams {
    /// Torsional stiffness between motor and link (N m/rad at the joint).
    pub stiffness_nm_rad: f64,
    /// Damping of the twist (N m s/rad).
    pub damping_nm_s_rad: f64,
    /// Total play between the teeth (rad at the joint).
    pub backlash_rad: f64,
    /// Motor-side inertia reflected to the joint (kg m^2).
    pub motor_inertia_kg_m2: f64,
}

impl GearParams {
    /// Whether the joint is rigid (no gear model).
    pub fn is_rigid(&self) -> bool {
        self.stiffness_nm_rad == 0.0
    }

    /// What is wrong with it, if anything: (field, why).
    pub(crate) fn check(&self) -> Result<(), (&'static str, String)> {
        let fields = [
            ("joint_stiffness_nm_rad", self.stiffness_nm_rad),
            ("joint_damping_nm_s_rad", self.damping_nm_s_rad),
            ("backlash_rad", self.backlash_rad),
            ("motor_inertia_kg_m2", self.motor_inertia_kg_m2),
        ];
        for (field, v) in fields {
            if !(v.is_finite() && v >= 0.0) {
                return Err((field, format!("{v}, expected finite and >= 0")));
            }
        }
        if self.is_rigid() {
            for &(field, v) in &fields[1..] {
                if v != 0.0 {
                    return Err((
                        field,
                        format!(
                            "{v} on a rigid joint (joint_stiffness_nm_rad = 0): a gear's \
                             damping, backlash and motor inertia act through its stiffness; \
                             give the stiffness too"
                        ),
                    ));
                }
            }
        } else if self.motor_inertia_kg_m2 == 0.0 {
            return Err((
                "motor_inertia_kg_m2",
                "0 on a compliant joint: the motor side needs an inertia (the rotor's, \
                 reflected through the gear)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The twist's natural frequency (rad/s) against a link of inertia `link_kg_m2`.
    pub(crate) fn natural_rad_s(&self, link_kg_m2: f64) -> f64 {
        (self.stiffness_nm_rad * (1.0 / self.motor_inertia_kg_m2 + 1.0 / link_kg_m2)).sqrt()
    }
}

/// The motor sides of every compliant joint.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Gears {
    params: [GearParams; MAX_DOF],
    pub(crate) motor_pos_rad: JointVec,
    pub(crate) motor_vel_rad_s: JointVec,
}

impl Gears {
    pub(crate) fn new(params: &[GearParams; MAX_DOF]) -> Gears {
        Gears {
            params: *params,
            motor_pos_rad: [0.0; MAX_DOF],
            motor_vel_rad_s: [0.0; MAX_DOF],
        }
    }

    /// Whether joint `j` has a gear model.
    pub(crate) fn compliant(&self, j: usize) -> bool {
        !self.params[j].is_rigid()
    }

    /// Joint `j`'s motor side at rest at `q`, where a link held at `q` by `load_nm`
    /// puts it: the teeth in contact on the side that carries the load (the twist
    /// `load / k` plus half the play), or centred in the play without a load.
    pub(crate) fn reset(&mut self, j: usize, q: f64, load_nm: f64) {
        let p = &self.params[j];
        let twist = if p.is_rigid() || load_nm == 0.0 {
            0.0
        } else {
            load_nm / p.stiffness_nm_rad + (0.5 * p.backlash_rad).copysign(load_nm)
        };
        self.motor_pos_rad[j] = q + twist;
        self.motor_vel_rad_s[j] = 0.0;
    }

    /// The torque joint `j`'s gear transmits to a link at `q` moving at `v`.
    pub(crate) fn transmitted(&self, j: usize, q: f64, v: f64) -> f64 {
        let p = &self.params[j];
        let x = self.motor_pos_rad[j] - q;
        let h = 0.5 * p.backlash_rad;
        if h > 0.0 && x.abs() <= h {
            return 0.0;
        }
        let twist = x - h.copysign(x);
        let t = p.stiffness_nm_rad * twist + p.damping_nm_s_rad * (self.motor_vel_rad_s[j] - v);
        if h > 0.0 && t * twist < 0.0 {
            0.0 // teeth only push: a separating contact pulls nothing
        } else {
            t
        }
    }

    /// Advances joint `j`'s motor side by `dt_s` under `motor_nm` (the drive's and the
    /// brake's torque) against the gear's `transmitted_nm`.
    pub(crate) fn step_motor(&mut self, j: usize, motor_nm: f64, transmitted_nm: f64, dt_s: f64) {
        let jm = self.params[j].motor_inertia_kg_m2;
        self.motor_vel_rad_s[j] += (motor_nm - transmitted_nm) / jm * dt_s;
        self.motor_pos_rad[j] += self.motor_vel_rad_s[j] * dt_s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gear(backlash_rad: f64) -> Gears {
        let mut p = [GearParams::default(); MAX_DOF];
        p[0] = GearParams {
            stiffness_nm_rad: 1000.0,
            damping_nm_s_rad: 2.0,
            backlash_rad,
            motor_inertia_kg_m2: 0.1,
        };
        Gears::new(&p)
    }

    #[test]
    fn nothing_passes_inside_the_play_and_the_teeth_only_push() {
        let mut g = gear(0.01);
        g.motor_pos_rad[0] = 0.004; // inside the +-5 mrad gap
        g.motor_vel_rad_s[0] = 3.0;
        assert_eq!(g.transmitted(0, 0.0, 0.0), 0.0);
        g.motor_pos_rad[0] = 0.006; // 1 mrad into contact
        g.motor_vel_rad_s[0] = 0.0;
        assert!((g.transmitted(0, 0.0, 0.0) - 1.0).abs() < 1e-9);
        g.motor_vel_rad_s[0] = -10.0; // separating fast: damping would pull
        assert_eq!(g.transmitted(0, 0.0, 0.0), 0.0);
        // Without play the gear is a spring-damper both ways.
        let mut g = gear(0.0);
        g.motor_pos_rad[0] = 0.001;
        g.motor_vel_rad_s[0] = -10.0;
        assert!((g.transmitted(0, 0.0, 0.0) - (1.0 - 20.0)).abs() < 1e-9);
    }

    #[test]
    fn a_loaded_reset_sits_in_contact_on_the_loaded_side() {
        let mut g = gear(0.01);
        g.reset(0, 1.0, -5.0);
        // Twist -5 mrad plus half the play on the same side.
        assert!((g.motor_pos_rad[0] - (1.0 - 0.005 - 0.005)).abs() < 1e-12);
        assert!((g.transmitted(0, 1.0, 0.0) + 5.0).abs() < 1e-9);
    }

    #[test]
    fn gear_values_on_a_rigid_joint_are_refused() {
        let p = GearParams {
            backlash_rad: 0.001,
            ..GearParams::default()
        };
        assert_eq!(p.check().unwrap_err().0, "backlash_rad");
        let p = GearParams {
            stiffness_nm_rad: 100.0,
            ..GearParams::default()
        };
        assert_eq!(p.check().unwrap_err().0, "motor_inertia_kg_m2");
        let p = GearParams {
            stiffness_nm_rad: f64::NAN,
            ..GearParams::default()
        };
        assert_eq!(p.check().unwrap_err().0, "joint_stiffness_nm_rad");
    }
}
