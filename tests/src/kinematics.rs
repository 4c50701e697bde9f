//! MuJoCo as the oracle of the gate's Cartesian stage: the tool point of recorded
//! commands computed by MuJoCo's own forward kinematics (`mj_forward` on the model
//! file), independent of `chunkrt_mujoco::chain_from_mjcf` and `chunkrt_core::Chain`.

use mujoco_rs::prelude::{MjData, MjModel, MjtObjBase};
use std::path::Path;

/// The point at `offset` (m, in the body's frame) of body `body` for each joint vector
/// in `poses` (joint `j` of a pose is the model's joint `joint_names[j]`).
pub fn body_points(
    model_path: &Path,
    body: &str,
    offset: [f64; 3],
    joint_names: &[&str],
    poses: &[Vec<f64>],
) -> Result<Vec<[f64; 3]>, String> {
    let model = MjModel::from_xml(model_path).map_err(|e| format!("{e:?}"))?;
    let body_id = model
        .name_to_id(MjtObjBase::mjOBJ_BODY, body)
        .ok_or_else(|| format!("no body {body:?}"))?;
    let adr: Vec<usize> = joint_names
        .iter()
        .map(|n| {
            model
                .name_to_id(MjtObjBase::mjOBJ_JOINT, n)
                .map(|j| model.jnt_qposadr()[j] as usize)
                .ok_or_else(|| format!("no joint {n:?}"))
        })
        .collect::<Result<_, _>>()?;
    let mut data = MjData::new(&model);
    let mut out = Vec::with_capacity(poses.len());
    for q in poses {
        for (a, v) in adr.iter().zip(q) {
            data.qpos_mut()[*a] = *v;
        }
        data.forward();
        let p = data.xpos()[body_id];
        let r = data.xmat()[body_id];
        let mut x = p;
        for (i, xi) in x.iter_mut().enumerate() {
            *xi += (0..3).map(|k| r[3 * i + k] * offset[k]).sum::<f64>();
        }
        out.push(x);
    }
    Ok(out)
}
