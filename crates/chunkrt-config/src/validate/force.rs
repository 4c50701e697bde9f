//! `[force]`: a tripwire of a wrist sensor's magnitude, and a backend that measures
//! force.

use super::{fail, range, Check};
use crate::schema::{BackendKind, Config};

impl Config {
    /// `[force]`, when present: the tripwire's range, and a backend with a force/torque
    /// sensor (today the MuJoCo arm with `[mujoco] ft_site`).
    pub(super) fn validate_force(&self) -> Check {
        let Some(force) = &self.force else {
            return Ok(());
        };
        range("force.tripwire_n", force.tripwire_n, 0.1, 10_000.0)?;
        let sensed = self.backend.kind == BackendKind::Mujoco
            && self.mujoco.as_ref().is_some_and(|m| m.ft_site.is_some());
        if !sensed {
            return fail(
                "force",
                "no force/torque sensor to act on: [force] needs `backend.kind = \"mujoco\"` \
                 with `[mujoco] ft_site` (the simulated arm and the EtherCAT backend measure \
                 no force yet)",
            );
        }
        Ok(())
    }
}
