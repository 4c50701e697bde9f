//! `[force]`: the wrist force/torque sensor on the permission path — the contact force
//! tripwire.

use serde::{Deserialize, Serialize};

/// What the runtime does with the measured wrench (`[force]`).
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForceConfig {
    /// The contact force tripwire (N): a measured |F| above it (or a reading that is not
    /// finite) withdraws the policy's authority in the next cycle — the braking stop, a
    /// `ForceTripwire` event, an intervention record — and holds it off until `rearm`.
    pub tripwire_n: f64,
}
