//! `[cartesian]`: the model's digest, a tool, a braking deceleration and speeds of an
//! arm's magnitude, planes with names and normals.

use super::{fail, range, sha256_hex, Check};
use crate::cartesian::{CartesianConfig, MAX_CARTESIAN_PLANES};
use crate::schema::Config;

impl Config {
    /// `[cartesian]`, when present.
    pub(super) fn validate_cartesian(&self) -> Check {
        self.cartesian
            .as_ref()
            .map_or(Ok(()), CartesianConfig::validate)
    }
}

impl CartesianConfig {
    fn validate(&self) -> Check {
        sha256_hex(
            "cartesian.model_sha256",
            &self.model_sha256,
            "`sha256sum` of the model file gives it",
        )?;
        if self.tool.trim().is_empty() {
            return fail(
                "cartesian.tool",
                "expected the name of a <site> or <body> of the model",
            );
        }
        for (k, v) in self.tool_offset_m.iter().enumerate() {
            range(&format!("cartesian.tool_offset_m[{k}]"), *v, -2.0, 2.0)?;
        }
        range("cartesian.brake_m_s2", self.brake_m_s2, 0.01, 100.0)?;
        if let Some(v) = self.max_tool_speed_m_s {
            range("cartesian.max_tool_speed_m_s", v, 0.001, 10.0)?;
        }
        if self.plane.is_empty() && self.max_tool_speed_m_s.is_none() {
            return fail(
                "cartesian",
                "nothing to bound: give max_tool_speed_m_s or at least one [[cartesian.plane]]",
            );
        }
        self.validate_planes()
    }

    fn validate_planes(&self) -> Check {
        if self.plane.len() > MAX_CARTESIAN_PLANES {
            return fail(
                "cartesian.plane",
                format!(
                    "{} planes: at most {MAX_CARTESIAN_PLANES}",
                    self.plane.len()
                ),
            );
        }
        for (i, p) in self.plane.iter().enumerate() {
            let key = |k: &str| format!("cartesian.plane[{i}].{k}");
            if p.name.trim().is_empty() {
                return fail(&key("name"), "expected a name");
            }
            if self.plane[..i].iter().any(|q| q.name == p.name) {
                return fail(&key("name"), format!("{:?} names two planes", p.name));
            }
            for (k, v) in p.point_m.iter().enumerate() {
                range(&format!("{}[{k}]", key("point_m")), *v, -10.0, 10.0)?;
            }
            let n2: f64 = p.normal.iter().map(|v| v * v).sum();
            if !(n2.is_finite() && n2 > 1e-12) {
                return fail(
                    &key("normal"),
                    format!("{:?}: expected a non-zero direction", p.normal),
                );
            }
            range(&key("touch_speed_m_s"), p.touch_speed_m_s, 0.0, 1.0)?;
        }
        Ok(())
    }
}
