//! Builds the backend and the policy that a config names.

use crate::error::RunError;
use chunkrt_config::{BackendKind, Config, PolicyKind};
use chunkrt_core::{ms_to_ns, Backend, Policy};

/// The simulated arm's parameters from `[sim]`, with the limits from `[limits]`.
pub fn sim_params(cfg: &Config) -> chunkrt_sim::SimArmParams {
    let n = cfg.control.joints;
    let sim = cfg.sim.clone().unwrap_or_default();
    let mut p = chunkrt_sim::SimArmParams::with_joints(n);
    p.substep_ns = (sim.substep_us * 1000.0).round() as u64;
    p.bandwidth_hz = sim.bandwidth_hz;
    for j in 0..n {
        if let Some(v) = &sim.inertia_kg_m2 {
            p.inertia_kg_m2[j] = v.get(j);
        }
        if let Some(v) = &sim.viscous_nm_s_rad {
            p.viscous_nm_s_rad[j] = v.get(j);
        }
        if let Some(v) = &sim.coulomb_nm {
            p.coulomb_nm[j] = v.get(j);
        }
        if let Some(v) = &sim.max_torque_nm {
            p.max_torque_nm[j] = v.get(j);
        }
        if let Some(v) = &sim.initial_pos_rad {
            p.initial_pos_rad[j] = v.get(j);
        }
        p.pos_min_rad[j] = cfg.limits.pos_min_rad.get(j);
        p.pos_max_rad[j] = cfg.limits.pos_max_rad.get(j);
    }
    p
}

/// The MuJoCo arm's parameters from `[mujoco]` (its model path resolved against the
/// config's directory); `None` without the section.
pub fn mujoco_params(cfg: &Config) -> Option<chunkrt_mujoco::MujocoParams> {
    let m = cfg.mujoco.as_ref()?;
    let n = cfg.control.joints;
    let mut p = chunkrt_mujoco::MujocoParams::panda(cfg.resolve(&m.model));
    p.model_sha256 = Some(m.model_sha256.clone());
    p.joints = n;
    p.bandwidth_hz = m.bandwidth_hz;
    p.encoder_counts_per_rev = m.encoder_counts_per_rev;
    p.velocity_filter_hz = m.velocity_filter_hz;
    p.transport_delay_ns = ms_to_ns(m.transport_delay_ms);
    p.gravity = m.gravity;
    p.brakes = m.brakes;
    let per_joint = |v: &chunkrt_config::PerJoint| {
        let mut out = [0.0; chunkrt_core::MAX_DOF];
        for (j, x) in out.iter_mut().enumerate().take(n) {
            *x = v.get(j);
        }
        out
    };
    p.inertia_kg_m2 = m.inertia_kg_m2.as_ref().map(per_joint);
    p.max_torque_nm = m.max_torque_nm.as_ref().map(per_joint);
    if let Some(v) = &m.initial_pos_rad {
        p.initial_pos_rad = per_joint(v);
    }
    Some(p)
}

/// The backend the config names.
pub fn backend(cfg: &Config) -> Result<Box<dyn Backend>, RunError> {
    match cfg.backend.kind {
        BackendKind::Sim => {
            let arm = chunkrt_sim::SimArm::new(sim_params(cfg))
                .map_err(|e| RunError::Backend(e.to_string()))?;
            Ok(Box::new(arm))
        }
        BackendKind::Ethercat => {
            // Opens the raw socket now (a wrong interface or missing CAP_NET_RAW fails
            // here); bring-up runs in `Backend::start`.
            let params = chunkrt_ethercat::EthercatParams::from_config(cfg)
                .map_err(|e| RunError::Backend(e.to_string()))?;
            let bus = chunkrt_ethercat::EthercatBackend::open(params)
                .map_err(|e| RunError::Backend(e.to_string()))?;
            Ok(Box::new(bus))
        }
        BackendKind::Mujoco => {
            let params = mujoco_params(cfg).ok_or_else(|| {
                RunError::Backend("backend.kind = \"mujoco\" needs a [mujoco] section".into())
            })?;
            let arm = chunkrt_mujoco::MujocoArm::new(params)
                .map_err(|e| RunError::Backend(e.to_string()))?;
            Ok(Box::new(arm))
        }
    }
}

/// The policy the config names.
pub fn policy(cfg: &Config) -> Result<Box<dyn Policy>, RunError> {
    let p = &cfg.policy;
    match p.kind {
        PolicyKind::Scripted => {
            let mut params =
                chunkrt_policy::ScriptedParams::new(cfg.control.joints, p.goals_rad.clone());
            params.horizon = p.horizon;
            params.dt_ns = ms_to_ns(p.dt_ms);
            params.max_vel_rad_s = p.max_vel_rad_s;
            let policy = chunkrt_policy::ScriptedPolicy::new(params)
                .map_err(|e| RunError::Policy(e.to_string()))?;
            Ok(Box::new(policy))
        }
        PolicyKind::Servo => {
            let policy = chunkrt_policy::ServoPolicy::new(chunkrt_policy::ServoParams {
                dof: cfg.control.joints,
                horizon: p.horizon,
                dt_ns: ms_to_ns(p.dt_ms),
                goal_rad: p.goals_rad.first().cloned().unwrap_or_default(),
                gain_per_s: p.gain_per_s,
            })
            .map_err(|e| RunError::Policy(e.to_string()))?;
            Ok(Box::new(policy))
        }
        PolicyKind::Onnx => {
            let manifest = p
                .manifest
                .as_ref()
                .map(|m| cfg.resolve(m))
                .ok_or_else(|| RunError::Policy("policy.manifest is not set".into()))?;
            // Read with the manifest's bound (a FIFO, a device, a huge file refused).
            let text = chunkrt_policy::manifest::read_manifest_text(&manifest)
                .map_err(|e| RunError::Policy(e.to_string()))?;
            let format = chunkrt_policy::manifest2::manifest_format(&manifest, &text)
                .map_err(|e| RunError::Policy(e.to_string()))?;
            if format == 2 {
                return imported(cfg, manifest);
            }
            let mut oc = chunkrt_policy::OnnxPolicyConfig::new(manifest);
            oc.session = session_options(cfg)?;
            oc.method = p
                .sampler
                .as_deref()
                .map(|s| {
                    chunkrt_policy::SamplerMethod::parse(s)
                        .ok_or_else(|| RunError::Policy(format!("policy.sampler: unknown `{s}`")))
                })
                .transpose()?;
            oc.steps = p.steps;
            oc.min_steps = p.min_steps;
            oc.deadline_ms = (p.deadline_ms > 0.0).then_some(p.deadline_ms);
            oc.seed = Some(p.seed);
            oc.state = state_source(&p.state_source);
            oc.smoothing_modes = p.smoothing_modes;
            if !p.goals_rad.is_empty() {
                oc.goals = Some(p.goals_rad.clone());
            }
            oc.goal_schedule = goal_schedule(p);
            let policy = chunkrt_policy::OnnxPolicy::new(&oc)
                .map_err(|e| RunError::Policy(e.to_string()))?;
            Ok(Box::new(policy))
        }
    }
}

/// `policy.goal_schedule` as the policies take it: (observation, goal index).
fn goal_schedule(p: &chunkrt_config::PolicyConfig) -> Vec<(u64, usize)> {
    p.goal_schedule
        .iter()
        .map(|&[seq, goal]| (seq, goal as usize))
        .collect()
}

/// ONNX Runtime's library, provider and threads from `[policy]`.
fn session_options(cfg: &Config) -> Result<chunkrt_policy::SessionOptions, RunError> {
    let p = &cfg.policy;
    Ok(chunkrt_policy::SessionOptions {
        ort_library: p.ort_library.as_ref().map(|l| cfg.resolve(l)),
        execution_provider: p
            .execution_provider
            .parse()
            .map_err(|e| RunError::Policy(format!("policy.execution_provider: {e}")))?,
        intra_threads: p.threads,
    })
}

fn state_source(name: &str) -> Option<chunkrt_policy::StateSource> {
    match name {
        "commanded" => Some(chunkrt_policy::StateSource::Commanded),
        "measured" => Some(chunkrt_policy::StateSource::Measured),
        "planned" => Some(chunkrt_policy::StateSource::Planned),
        _ => None,
    }
}

/// A format-2 manifest: a policy brought from elsewhere (LeRobot exports).
fn imported(cfg: &Config, manifest: std::path::PathBuf) -> Result<Box<dyn Policy>, RunError> {
    let p = &cfg.policy;
    if let Some(s) = &p.sampler {
        return Err(RunError::Policy(format!(
            "policy.sampler = \"{s}\" does not apply to {}: a format-2 manifest's \
             [scheduler] is the one the model was trained with (set policy.steps for fewer steps)",
            manifest.display()
        )));
    }
    let m = chunkrt_policy::CheckedManifest2::load(&manifest)
        .map_err(|e| RunError::Policy(e.to_string()))?;
    let history = m.raw.observation.history;
    let period = cfg.inference.chunk_period_ms;
    if history > 1 && (period - m.raw.dt_ms).abs() > 1e-9 {
        return Err(RunError::Policy(format!(
            "{}: the model takes a history of {history} observations {} ms apart \
             (dt_ms); inference.chunk_period_ms = {period} would space them differently: \
             set it to {}",
            manifest.display(),
            m.raw.dt_ms,
            m.raw.dt_ms
        )));
    }
    let mut ic = chunkrt_policy::ImportedPolicyConfig::new(manifest);
    ic.session = session_options(cfg)?;
    ic.steps = p.steps;
    ic.min_steps = p.min_steps;
    ic.deadline_ms = (p.deadline_ms > 0.0).then_some(p.deadline_ms);
    ic.seed = Some(p.seed);
    ic.state = state_source(&p.state_source);
    ic.smoothing_modes = p.smoothing_modes;
    if !p.goals_rad.is_empty() {
        ic.goals = Some(p.goals_rad.clone());
    }
    ic.goal_schedule = goal_schedule(p);
    let policy =
        chunkrt_policy::ImportedPolicy::new(&ic).map_err(|e| RunError::Policy(e.to_string()))?;
    Ok(Box::new(policy))
}
