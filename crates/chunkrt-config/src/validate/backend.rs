//! `[backend]` and what each backend needs: `[sim]`, `[ethercat]` (its own file,
//! `crate::ethercat`), `[mujoco]`.

use super::{fail, range, sha256_hex, Check};
use crate::schema::{BackendKind, Config, SimConfig};

impl Config {
    /// The backend's own section, then `[mujoco]` whenever present.
    pub(super) fn validate_backend(&self, n: usize) -> Check {
        match self.backend.kind {
            BackendKind::Sim => {
                let sim = self.sim.clone().unwrap_or_default();
                sim.validate(n)?;
                sim.check_start_pose(n, &self.limits)?;
            }
            BackendKind::Ethercat => match &self.ethercat {
                Some(ec) => {
                    if self.limits.thermal.is_some()
                        && !ec.pdo.tx.contains(&crate::ethercat::PdoEntry::TorqueActual)
                    {
                        return fail(
                            "limits.thermal",
                            "the thermal monitor reads the drives' torque: ethercat.pdo.tx \
                             must map torque_actual (0x6077)",
                        );
                    }
                    let l = &self.limits;
                    ec.validate(n, self.control.period_ms, |j| {
                        l.pos_min_rad.get(j).abs().max(l.pos_max_rad.get(j).abs())
                    })?
                }
                None => {
                    return fail(
                        "ethercat",
                        "`backend.kind = \"ethercat\"` needs an [ethercat] section \
                         (interface and one [[ethercat.drive]] per joint)",
                    )
                }
            },
            BackendKind::Mujoco if self.mujoco.is_none() => {
                return fail(
                    "mujoco",
                    "`backend.kind = \"mujoco\"` needs a [mujoco] section (model and \
                     model_sha256 at least)",
                )
            }
            BackendKind::Mujoco => {}
        }
        // Checked whatever the backend: with `kind = "ethercat"` it is the arm that
        // `chunkrt ecsim --arm` puts behind the simulated drives.
        if let Some(m) = &self.mujoco {
            m.validate(n, &self.limits)?;
        }
        Ok(())
    }
}

impl SimConfig {
    fn validate(&self, n: usize) -> Check {
        range("sim.substep_us", self.substep_us, 1.0, 10_000.0)?;
        range("sim.bandwidth_hz", self.bandwidth_hz, 0.1, 1000.0)?;
        let pos = |v: f64| v > 0.0;
        let nonneg = |v: f64| v >= 0.0;
        if let Some(v) = &self.inertia_kg_m2 {
            v.check("sim.inertia_kg_m2", n, pos, "a positive inertia")?;
        }
        if let Some(v) = &self.viscous_nm_s_rad {
            v.check("sim.viscous_nm_s_rad", n, nonneg, "a friction >= 0")?;
        }
        if let Some(v) = &self.coulomb_nm {
            v.check("sim.coulomb_nm", n, nonneg, "a friction >= 0")?;
        }
        if let Some(v) = &self.max_torque_nm {
            v.check("sim.max_torque_nm", n, pos, "a positive torque")?;
        }
        if let Some(v) = &self.initial_pos_rad {
            v.check("sim.initial_pos_rad", n, |_| true, "a finite number")?;
        }
        if let Some(v) = &self.backlash_rad {
            v.check(
                "sim.backlash_rad",
                n,
                |b| (0.0..=0.1).contains(&b),
                "a play in [0, 0.1] rad",
            )?;
        }
        Ok(())
    }

    /// The simulated arm starts at `initial_pos_rad`, between its hard stops (the
    /// position limits); outside them the arm refuses to be built at `run`.
    fn check_start_pose(&self, n: usize, limits: &crate::LimitsConfig) -> Check {
        let Some(v) = &self.initial_pos_rad else {
            return Ok(());
        };
        for j in 0..n {
            let (pos, lo, hi) = (
                v.get(j),
                limits.pos_min_rad.get(j),
                limits.pos_max_rad.get(j),
            );
            if !(lo..=hi).contains(&pos) {
                return Err((
                    "sim.initial_pos_rad".into(),
                    format!(
                        "joint {j}: the start pose {pos} rad is outside the joint's stops \
                         [{lo}, {hi}] rad (limits.pos_min_rad / limits.pos_max_rad): the \
                         simulated arm cannot start there; give a pose inside the stops"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl crate::MujocoConfig {
    pub(super) fn validate(&self, n: usize, limits: &crate::LimitsConfig) -> Check {
        sha256_hex(
            "mujoco.model_sha256",
            &self.model_sha256,
            "`sha256sum` of the model file gives it",
        )?;
        if let Some(d) = &self.model_files_sha256 {
            sha256_hex(
                "mujoco.model_files_sha256",
                d,
                "`validate` names the digest of the files the model names",
            )?;
        }
        range("mujoco.bandwidth_hz", self.bandwidth_hz, 0.1, 1000.0)?;
        range(
            "mujoco.velocity_filter_hz",
            self.velocity_filter_hz,
            1.0,
            100_000.0,
        )?;
        range(
            "mujoco.transport_delay_ms",
            self.transport_delay_ms,
            0.0,
            100.0,
        )?;
        let pos = |v: f64| v > 0.0;
        if let Some(v) = &self.inertia_kg_m2 {
            v.check("mujoco.inertia_kg_m2", n, pos, "a positive inertia")?;
        }
        if let Some(v) = &self.max_torque_nm {
            v.check("mujoco.max_torque_nm", n, pos, "a positive torque")?;
        }
        self.validate_gears(n)?;
        if self.ft_site.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return fail(
                "mujoco.ft_site",
                "expected the name of a <site> of the model",
            );
        }
        if let Some(v) = &self.initial_pos_rad {
            v.check("mujoco.initial_pos_rad", n, |_| true, "a finite number")?;
            for j in 0..n {
                let (q, lo, hi) = (
                    v.get(j),
                    limits.pos_min_rad.get(j),
                    limits.pos_max_rad.get(j),
                );
                if !(lo..=hi).contains(&q) {
                    return fail(
                        "mujoco.initial_pos_rad",
                        format!(
                            "joint {j}: the start pose {q} rad is outside the joint's limits \
                             [{lo}, {hi}] rad (limits.pos_min_rad / limits.pos_max_rad)"
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// The gears: values in range, and a rigid joint (no stiffness) given none of what
    /// only a compliant one has, a compliant one given its motor inertia.
    fn validate_gears(&self, n: usize) -> Check {
        let nonneg = |v: f64| v >= 0.0;
        let gear = [
            (
                "mujoco.joint_stiffness_nm_rad",
                &self.joint_stiffness_nm_rad,
            ),
            (
                "mujoco.joint_damping_nm_s_rad",
                &self.joint_damping_nm_s_rad,
            ),
            ("mujoco.backlash_rad", &self.backlash_rad),
            ("mujoco.motor_inertia_kg_m2", &self.motor_inertia_kg_m2),
        ];
        for (key, v) in gear {
            if let Some(v) = v {
                v.check(key, n, nonneg, "a number >= 0")?;
            }
        }
        let at = |v: &Option<crate::PerJoint>, j: usize| v.as_ref().map_or(0.0, |v| v.get(j));
        for j in 0..n {
            let stiffness = at(&self.joint_stiffness_nm_rad, j);
            if stiffness == 0.0 {
                for (key, v) in &gear[1..] {
                    if at(v, j) != 0.0 {
                        return fail(
                            key,
                            format!(
                                "joint {j}: {} on a rigid joint (mujoco.joint_stiffness_nm_rad \
                                 absent or 0): a gear's damping, backlash and motor inertia act \
                                 through its stiffness; give the stiffness too",
                                at(v, j)
                            ),
                        );
                    }
                }
            } else if at(&self.motor_inertia_kg_m2, j) == 0.0 {
                return fail(
                    "mujoco.motor_inertia_kg_m2",
                    format!(
                        "joint {j} is compliant (joint_stiffness_nm_rad = {stiffness}): its \
                         motor side needs an inertia (the rotor's, reflected through the gear)"
                    ),
                );
            }
        }
        Ok(())
    }
}
