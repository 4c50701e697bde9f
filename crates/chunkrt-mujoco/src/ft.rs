//! The wrist force/torque sensor (`[mujoco] ft_site`): MuJoCo's `<force>` and `<torque>`
//! sensors on one site, read after each step and turned into the wrench the world exerts
//! on the bodies beyond the site, in the base frame.
//!
//! MuJoCo's sensors give the interaction between the site's body and its parent in the
//! site's frame, as the parent holds the child: with the bodies beyond the sensor
//! massless (the bundled model's tool), that is minus what the world exerts on them, so
//! the reading is `−R·f` (and `−R·τ`) with `R` the site's orientation.

use std::sync::Arc;

use mujoco_rs::mujoco_c::mjtSensor;
use mujoco_rs::prelude::{MjData, MjModel};
use mujoco_rs::wrappers::mj_model::MjtObjBase;

/// Where one site's force and torque sensors sit in `sensordata`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FtSensor {
    site: usize,
    force_adr: usize,
    torque_adr: usize,
}

impl FtSensor {
    /// The site named `name` and its `<force>` and `<torque>` sensors; what is missing,
    /// named, otherwise.
    pub(crate) fn find(model: &MjModel, name: &str) -> Result<FtSensor, String> {
        let site = model
            .name_to_id(MjtObjBase::mjOBJ_SITE, name)
            .ok_or_else(|| format!("has no <site> named {name:?} (mujoco.ft_site)"))?;
        let adr = |kind: mjtSensor| {
            (0..model.sensor_type().len()).find_map(|i| {
                let on_site = model.sensor_objtype()[i] as u32 == MjtObjBase::mjOBJ_SITE as u32
                    && model.sensor_objid()[i] as usize == site;
                (on_site && model.sensor_type()[i] == kind).then(|| model.sensor_adr()[i] as usize)
            })
        };
        let missing = |what: &str| {
            format!("has no <{what}> sensor on the site {name:?} (mujoco.ft_site): a wrist force/torque sensor needs <force site=\"{name}\"/> and <torque site=\"{name}\"/>")
        };
        Ok(FtSensor {
            site,
            force_adr: adr(mjtSensor::mjSENS_FORCE).ok_or_else(|| missing("force"))?,
            torque_adr: adr(mjtSensor::mjSENS_TORQUE).ok_or_else(|| missing("torque"))?,
        })
    }

    /// The wrench the world exerts beyond the site, base frame: (force N, torque N m).
    /// Never allocates.
    pub(crate) fn read(&self, data: &MjData<Arc<MjModel>>) -> ([f64; 3], [f64; 3]) {
        let r = &data.site_xmat()[self.site];
        let s = data.sensordata();
        let world = |a: usize| {
            let v = [s[a], s[a + 1], s[a + 2]];
            let mut out = [0.0; 3];
            for (i, o) in out.iter_mut().enumerate() {
                *o = -(r[3 * i] * v[0] + r[3 * i + 1] * v[1] + r[3 * i + 2] * v[2]);
            }
            out
        };
        (world(self.force_adr), world(self.torque_adr))
    }
}
