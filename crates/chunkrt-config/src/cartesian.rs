//! `[cartesian]`: the tool point's limits in the base frame — a tool-speed limit and the
//! approach envelope toward declared planes — enforced by the gate's Cartesian stage
//! (`chunkrt_core::cartesian`) with the arm's kinematics read from its model file.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The Cartesian stage of the gate (`[cartesian]`; absent: joint space only).
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CartesianConfig {
    /// The arm's MJCF file, relative to this file: its kinematic chain from the world
    /// body to `tool` (bodies placed by `pos`/`quat`, hinge joints).
    pub model: PathBuf,
    /// Its SHA-256 (hex): a different file is refused.
    pub model_sha256: String,
    /// The `<site>` or `<body>` of the model whose frame carries the tool point.
    pub tool: String,
    /// The tool point in that frame (m; default its origin): e.g. the fingertips'
    /// centre from a flange body.
    #[serde(default)]
    pub tool_offset_m: [f64; 3],
    /// The tool point's speed limit (m/s; absent: none). ISO 10218's reduced speed
    /// is 0.25 m/s.
    #[serde(default)]
    pub max_tool_speed_m_s: Option<f64>,
    /// The deceleration the approach envelope assumes along a plane's normal
    /// (m/s²): the tool's speed toward a plane at distance `z` is bounded by
    /// `√(touch² + 2·brake·z)`. At most what the joints' braking delivers at the tool.
    pub brake_m_s2: f64,
    /// The declared planes (at most 8).
    #[serde(default)]
    pub plane: Vec<PlaneConfig>,
}

/// One declared plane (`[[cartesian.plane]]`), in the base frame.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaneConfig {
    /// Its name in reports and errors.
    pub name: String,
    /// A point on it (m).
    pub point_m: [f64; 3],
    /// Its normal, toward the side the tool works on (normalised on load).
    pub normal: [f64; 3],
    /// The speed toward it at which the tool may touch it (m/s; 0: a keep-out plane the
    /// commanded tool point never crosses).
    #[serde(default)]
    pub touch_speed_m_s: f64,
}

/// Most planes (`chunkrt_core::MAX_PLANES`).
pub const MAX_CARTESIAN_PLANES: usize = chunkrt_core::MAX_PLANES;

impl CartesianConfig {
    /// The core's limits (the config checked first).
    pub fn limits(&self) -> Option<chunkrt_core::CartesianLimits> {
        let planes: Vec<chunkrt_core::Plane> = self
            .plane
            .iter()
            .map(|p| {
                chunkrt_core::Plane::new(p.point_m, p.normal)
                    .and_then(|pl| pl.touched_at(p.touch_speed_m_s))
            })
            .collect::<Option<_>>()?;
        chunkrt_core::CartesianLimits::new(self.max_tool_speed_m_s, self.brake_m_s2, &planes)
    }
}
