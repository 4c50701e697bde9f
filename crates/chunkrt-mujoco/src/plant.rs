//! The physics: the MJCF model loaded (read once with a bound, its digests checked,
//! loaded from those bytes: `mjcf.rs`), its hinge joints mapped to drives, one MuJoCo
//! step with the drives' torques applied, and the measurement an encoder gives back.

use std::path::Path;
use std::sync::Arc;

use chunkrt_core::{JointVec, MAX_DOF};
use mujoco_rs::mujoco_c::mjtJoint;
use mujoco_rs::prelude::{MjData, MjModel};

use crate::ft::FtSensor;
use crate::mjcf::{ModelFiles, XML_LIMIT_BYTES};
use crate::params::{MujocoError, MujocoParams};

/// The model, its state, and where each driven joint sits in it.
pub(crate) struct Plant {
    data: MjData<Arc<MjModel>>,
    qpos_adr: [usize; MAX_DOF],
    dof_adr: [usize; MAX_DOF],
    joints: usize,
    /// The model's physics step (ns and s).
    pub(crate) step_ns: u64,
    pub(crate) dt_s: f64,
    /// The SHA-256 of the model file (hex).
    pub(crate) sha256: String,
    /// The digest over the files the model names (none: it names none).
    pub(crate) files_sha256: Option<String>,
    /// The wrist force/torque sensor (`ft_site`).
    ft: Option<FtSensor>,
}

impl Plant {
    /// Reads the model file and every file it names (each with its bound), checks
    /// their digests, loads the model from those bytes, maps its hinge joints, and puts
    /// the arm at rest at `params.initial_pos_rad`.
    pub(crate) fn load(params: &MujocoParams) -> Result<Plant, MujocoError> {
        let path = &params.model_path;
        let files = ModelFiles::read(path)?;
        let sha256 = files.main_sha256.clone();
        let files_sha256 = files.files_sha256();
        if let Some(expected) = &params.model_sha256 {
            if !expected.eq_ignore_ascii_case(&sha256) {
                return Err(MujocoError::Digest {
                    path: path.clone(),
                    expected: expected.clone(),
                    got: sha256,
                });
            }
            check_files_digest(params, &files)?;
        }
        let mut model = files.load()?;
        drop(files);
        if !params.gravity {
            model.opt_mut().gravity = [0.0; 3];
        }
        let (qpos_adr, dof_adr) = map_joints(&model, params)?;
        let ft = params
            .ft_site
            .as_deref()
            .map(|site| FtSensor::find(&model, site))
            .transpose()
            .map_err(|why| model_error(params, why))?;
        let step_ns = (model.opt().timestep * 1e9).round() as u64;
        if step_ns == 0 {
            return Err(model_error(params, "has a timestep under 1 ns".into()));
        }
        let mut data = MjData::new(Arc::new(model));
        for (adr, q) in qpos_adr
            .iter()
            .zip(&params.initial_pos_rad[..params.joints])
        {
            data.qpos_mut()[*adr] = *q;
        }
        data.forward();
        Ok(Plant {
            data,
            qpos_adr,
            dof_adr,
            joints: params.joints,
            step_ns,
            dt_s: step_ns as f64 * 1e-9,
            sha256,
            files_sha256,
            ft,
        })
    }

    /// The model's torque limit of each joint (`actuatorfrcrange`), where it has one.
    pub(crate) fn torque_limits(&self) -> [Option<f64>; MAX_DOF] {
        let model = self.data.model();
        let mut out = [None; MAX_DOF];
        for (j, limit) in out.iter_mut().enumerate().take(self.joints) {
            if model.jnt_actfrclimited()[j] {
                let [lo, hi] = model.jnt_actfrcrange()[j];
                *limit = Some(hi.min(-lo));
            }
        }
        out
    }

    /// The diagonal of the joint-space inertia at the current pose (armature included).
    pub(crate) fn inertia_diagonal(&self) -> JointVec {
        let nv = self.data.model().nv() as usize;
        let mut m = vec![0.0; nv * nv];
        // The buffer is nv x nv by construction.
        let _ = self.data.full_m(&mut m);
        let mut out = [0.0; MAX_DOF];
        for (j, o) in out.iter_mut().enumerate().take(self.joints) {
            let d = self.dof_adr[j];
            *o = m[d * nv + d];
        }
        out
    }

    /// Position and velocity of joint `j`, exact (what the physics holds).
    pub(crate) fn joint(&self, j: usize) -> (f64, f64) {
        (
            self.data.qpos()[self.qpos_adr[j]],
            self.data.qvel()[self.dof_adr[j]],
        )
    }

    /// The gravity (and Coriolis) torque on joint `j` at the current state (MuJoCo's
    /// `qfrc_bias`), for diagnostics.
    pub(crate) fn bias_torque(&self, j: usize) -> f64 {
        self.data.qfrc_bias()[self.dof_adr[j]]
    }

    /// The wrist sensor's wrench (force N, torque N m, base frame), as of the last
    /// step; none without `ft_site`.
    pub(crate) fn wrench(&self) -> Option<([f64; 3], [f64; 3])> {
        self.ft.map(|ft| ft.read(&self.data))
    }

    /// One physics step with `torque_nm` applied at the joints. Never allocates.
    pub(crate) fn step(&mut self, torque_nm: &JointVec) {
        let applied = self.data.qfrc_applied_mut();
        for j in 0..self.joints {
            applied[self.dof_adr[j]] = torque_nm[j];
        }
        self.data.step();
    }
}

fn model_error(params: &MujocoParams, why: String) -> MujocoError {
    MujocoError::Model {
        path: params.model_path.clone(),
        why,
    }
}

/// Each driven joint's address in `qpos` and `qvel`: the model's joints, in order, must
/// be exactly `params.joints` hinges.
fn map_joints(
    model: &MjModel,
    params: &MujocoParams,
) -> Result<([usize; MAX_DOF], [usize; MAX_DOF]), MujocoError> {
    let njnt = model.njnt() as usize;
    if njnt != params.joints {
        return Err(model_error(
            params,
            format!(
                "has {njnt} joints, the configuration drives {}",
                params.joints
            ),
        ));
    }
    let mut qpos_adr = [0; MAX_DOF];
    let mut dof_adr = [0; MAX_DOF];
    for j in 0..njnt {
        if model.jnt_type()[j] != mjtJoint::mjJNT_HINGE {
            return Err(model_error(
                params,
                format!("joint {j} is not a hinge (a revolute joint): only hinges are driven"),
            ));
        }
        qpos_adr[j] = model.jnt_qposadr()[j] as usize;
        dof_adr[j] = model.jnt_dofadr()[j] as usize;
    }
    Ok((qpos_adr, dof_adr))
}

/// The files the model names against `params.model_files_sha256` (checked where the
/// main file's digest is: a configured run).
fn check_files_digest(params: &MujocoParams, files: &ModelFiles) -> Result<(), MujocoError> {
    let why = match (&params.model_files_sha256, files.files_sha256()) {
        (None, None) => return Ok(()),
        (Some(e), Some(got)) if e.eq_ignore_ascii_case(&got) => return Ok(()),
        (Some(e), Some(got)) => format!(
            "names {} file(s) whose digest is {got}, the configuration says {e}: a \
             different included file or asset than the one configured",
            files.count()
        ),
        (None, Some(got)) => format!(
            "names {} other file(s) (includes, meshes, textures) and the configuration \
             pins none: set [mujoco] model_files_sha256 = \"{got}\"",
            files.count()
        ),
        (Some(e), None) => {
            format!("names no other file, and the configuration pins model_files_sha256 = \"{e}\"")
        }
    };
    Err(MujocoError::FilesDigest {
        path: params.model_path.clone(),
        why,
    })
}

/// The SHA-256 of the model file at `path`, hex, read as the arm reads it (a regular
/// file of at most 64 MiB, streamed).
pub fn file_sha256(path: &Path) -> Result<String, MujocoError> {
    Ok(chunkrt_files::sha256_streaming(path, XML_LIMIT_BYTES, "MuJoCo model")?.1)
}
