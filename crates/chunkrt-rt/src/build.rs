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
        if let Some(v) = &sim.backlash_rad {
            p.backlash_rad[j] = v.get(j);
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
    p.model_files_sha256 = m.model_files_sha256.clone();
    p.joints = n;
    p.bandwidth_hz = m.bandwidth_hz;
    p.encoder_counts_per_rev = m.encoder_counts_per_rev;
    p.velocity_filter_hz = m.velocity_filter_hz;
    p.transport_delay_ns = ms_to_ns(m.transport_delay_ms);
    p.gravity = m.gravity;
    p.brakes = m.brakes;
    p.ft_site = m.ft_site.clone();
    let per_joint = |v: &chunkrt_config::PerJoint| {
        let mut out = [0.0; chunkrt_core::MAX_DOF];
        for (j, x) in out.iter_mut().enumerate().take(n) {
            *x = v.get(j);
        }
        out
    };
    p.inertia_kg_m2 = m.inertia_kg_m2.as_ref().map(per_joint);
    p.max_torque_nm = m.max_torque_nm.as_ref().map(per_joint);
    let gear = |v: &Option<chunkrt_config::PerJoint>| v.as_ref().map(per_joint).unwrap_or_default();
    let (k, c, b, jm) = (
        gear(&m.joint_stiffness_nm_rad),
        gear(&m.joint_damping_nm_s_rad),
        gear(&m.backlash_rad),
        gear(&m.motor_inertia_kg_m2),
    );
    for j in 0..n {
        p.gears[j] = chunkrt_mujoco::GearParams {
            stiffness_nm_rad: k[j],
            damping_nm_s_rad: c[j],
            backlash_rad: b[j],
            motor_inertia_kg_m2: jm[j],
        };
    }
    if let Some(v) = &m.initial_pos_rad {
        p.initial_pos_rad = per_joint(v);
    }
    Some(p)
}

/// The arm that `chunkrt ecsim --arm CONFIG` puts behind its simulated drives: the
/// `[mujoco]` arm of a run configuration, each joint mounted on its drive as the
/// configuration's `[[ethercat.drive]]` says (counts per radian, offset, direction, rated
/// torque), so the master reads back the arm it commands. Refused, with what is missing,
/// without both sections or without a drive for every joint.
pub fn ecsim_arm(cfg: &Config) -> Result<chunkrt_mujoco::MujocoChain, RunError> {
    let params = mujoco_params(cfg).ok_or_else(|| {
        RunError::Backend(
            "no [mujoco] section: the arm to simulate behind the drives is the \
             configuration's [mujoco] (see rt-config/arm-ethercat-mujoco.toml)"
                .into(),
        )
    })?;
    let ec = cfg.ethercat.as_ref().ok_or_else(|| {
        RunError::Backend(
            "no [ethercat] section: its [[ethercat.drive]] entries say how each joint sits \
             on its drive (counts_per_rad, offset_counts, direction, rated_torque_nm)"
                .into(),
        )
    })?;
    let n = cfg.control.joints;
    let mut mounts = vec![None; n];
    for d in &ec.drive {
        if let Some(m) = mounts.get_mut(d.joint) {
            *m = Some(chunkrt_mujoco::ShaftMount {
                counts_per_rad: d.counts_per_rad,
                offset_counts: d.offset_counts as f64,
                direction: if d.direction < 0 { -1.0 } else { 1.0 },
                rated_torque_nm: d.rated_torque_nm,
            });
        }
    }
    let mounts = mounts
        .into_iter()
        .enumerate()
        .map(|(j, m)| {
            m.ok_or_else(|| {
                RunError::Backend(format!(
                    "joint {j} has no [[ethercat.drive]]: every joint of the arm sits on a drive"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let arm =
        chunkrt_mujoco::MujocoArm::new(params).map_err(|e| RunError::Backend(e.to_string()))?;
    chunkrt_mujoco::MujocoChain::new(arm, &mounts).map_err(|e| RunError::Backend(e.to_string()))
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
            let oc = onnx_config(cfg, manifest)?;
            let policy = chunkrt_policy::OnnxPolicy::new(&oc)
                .map_err(|e| RunError::Policy(e.to_string()))?;
            Ok(Box::new(policy))
        }
        PolicyKind::Remote => {
            let manifest = p
                .manifest
                .as_ref()
                .map(|m| cfg.resolve(m))
                .ok_or_else(|| RunError::Policy("policy.manifest is not set".into()))?;
            let oc = onnx_config(cfg, manifest)?;
            let m = chunkrt_policy::Manifest::load(&oc.manifest)
                .map_err(|e| RunError::Policy(e.to_string()))?;
            let server = remote_config(cfg)?.connect(m.horizon, m.d_a, &m.model_sha256)?;
            let policy = chunkrt_policy::OnnxPolicy::remote(&oc, server)
                .map_err(|e| RunError::Policy(e.to_string()))?;
            Ok(Box::new(policy))
        }
    }
}

/// The sampler settings of an `onnx` (or `remote`) policy.
fn onnx_config(
    cfg: &Config,
    manifest: std::path::PathBuf,
) -> Result<chunkrt_policy::OnnxPolicyConfig, RunError> {
    let p = &cfg.policy;
    let mut oc = chunkrt_policy::OnnxPolicyConfig::new(manifest);
    if p.kind == PolicyKind::Onnx {
        oc.session = session_options(cfg)?;
    }
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
    Ok(oc)
}

/// The policy server of `[policy.remote]`, checked but not contacted.
#[derive(Clone, Debug)]
pub struct RemoteServer {
    /// Its protocol, and for OIP the model's name.
    pub protocol: RemoteProtocol,
    /// Where and how (token from its environment variable, CA file, timeouts, sizes).
    pub server: chunkrt_remote::ServerConfig,
    /// The message keys (openpi) or tensor names (OIP).
    pub keys: chunkrt_remote::MessageKeys,
    /// How the reply's actions are read.
    pub actions: chunkrt_remote::ActionsAre,
}

/// The protocols a policy server speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RemoteProtocol {
    /// openpi's WebSocket protocol.
    Openpi,
    /// The Open Inference Protocol v2 over gRPC, and the model's name on the server.
    Oip {
        /// The model's name.
        model: String,
    },
}

impl RemoteServer {
    /// Connects, as the sampler of chunks of `horizon` x `d_a` of the model with SHA-256
    /// `model_sha256`: a server that cannot be reached, or serves another model, is
    /// refused with the reason.
    pub fn connect(
        self,
        horizon: usize,
        d_a: usize,
        model_sha256: &str,
    ) -> Result<Box<dyn chunkrt_policy::RemoteSampler>, RunError> {
        let sha = Some(model_sha256.to_string());
        let refused = |e: chunkrt_remote::RemoteError| RunError::Policy(e.to_string());
        Ok(match self.protocol {
            RemoteProtocol::Openpi => Box::new(
                chunkrt_remote::OpenpiSampler::connect(
                    self.server,
                    self.keys,
                    self.actions,
                    horizon,
                    d_a,
                    sha,
                )
                .map_err(refused)?,
            ),
            RemoteProtocol::Oip { model } => Box::new(
                chunkrt_remote::OipSampler::connect(
                    chunkrt_remote::OipConfig {
                        server: self.server,
                        model,
                    },
                    self.keys,
                    self.actions,
                    horizon,
                    d_a,
                    sha,
                )
                .map_err(refused)?,
            ),
        })
    }
}

/// The policy server of `[policy.remote]`: its protocol, where, how (token from its
/// environment variable, CA file, timeouts, sizes), the message keys and how to read the
/// actions; the URL is checked against the protocol, the server is not contacted.
pub fn remote_config(cfg: &Config) -> Result<RemoteServer, RunError> {
    let r = cfg
        .policy
        .remote
        .as_ref()
        .ok_or_else(|| RunError::Policy("policy.remote is not set".into()))?;
    let mut server = chunkrt_remote::ServerConfig::new(r.url.clone());
    if let Some(var) = &r.token_env {
        let token = std::env::var(var).map_err(|_| {
            RunError::Policy(format!(
                "policy.remote.token_env names {var}, which is not set: export the server's \
                 token in it"
            ))
        })?;
        server.token = Some(token);
    }
    server.ca_file = r.ca_file.as_ref().map(|f| cfg.resolve(f));
    if let Some(ca) = &server.ca_file {
        // Read with a bound and checked now, whatever the scheme (a CA file that names
        // /dev/zero, a FIFO or a huge file is refused here, by `validate` and `run` alike).
        chunkrt_remote::check_ca_file(ca)
            .map_err(|e| RunError::Policy(format!("policy.remote.ca_file: {e}")))?;
    }
    server.verify_model = r.verify_model;
    server.allow_plaintext_remote = r.allow_plaintext_remote;
    server.connect_timeout = std::time::Duration::from_secs_f64(r.connect_timeout_ms * 1e-3);
    server.reply_timeout = std::time::Duration::from_secs_f64(r.reply_timeout_ms * 1e-3);
    server.max_message_bytes = (r.max_message_mb * 1024.0 * 1024.0) as usize;
    let protocol = match r.protocol.as_str() {
        "oip" => {
            let model = r.model.clone().ok_or_else(|| {
                RunError::Policy("policy.remote.model: an OIP server needs the model's name".into())
            })?;
            chunkrt_remote::OipClient::check(&chunkrt_remote::OipConfig {
                server: server.clone(),
                model: model.clone(),
            })
            .map_err(|e| RunError::Policy(e.to_string()))?;
            RemoteProtocol::Oip { model }
        }
        _ => {
            chunkrt_remote::OpenpiClient::check(&server)
                .map_err(|e| RunError::Policy(e.to_string()))?;
            RemoteProtocol::Openpi
        }
    };
    let keys = chunkrt_remote::MessageKeys {
        state: r.state_key.clone(),
        noise: r.noise_key.clone(),
        actions: r.actions_key.clone(),
    };
    let actions = if r.actions == "delta" {
        chunkrt_remote::ActionsAre::DeltaFromObserved
    } else {
        chunkrt_remote::ActionsAre::Absolute
    };
    Ok(RemoteServer {
        protocol,
        server,
        keys,
        actions,
    })
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
/// The residual policy of `[policy.residual]` (none without one): a format-2 manifest
/// with a `[residual]` binding whose `base_sha256` is the base's model digest (a
/// residual trained on another base is refused), loaded as any format-2 policy.
pub fn residual(cfg: &Config) -> Result<Option<Box<dyn Policy>>, RunError> {
    let Some(r) = &cfg.policy.residual else {
        return Ok(None);
    };
    let base = cfg
        .policy
        .manifest
        .as_ref()
        .map(|m| cfg.resolve(m))
        .ok_or_else(|| RunError::Policy("policy.manifest is not set".into()))?;
    let path = cfg.resolve(&r.manifest);
    let bound = residual_binding(&path)?;
    let base_sha256 = model_sha256(&base)?;
    if bound != base_sha256 {
        return Err(RunError::Policy(format!(
            "policy.residual: {} was trained on the base model {bound} ([residual] \
             base_sha256); this run's base {} is the model {base_sha256}: refused (train \
             the residual on this base, or run the base alone with --frozen)",
            path.display(),
            base.display()
        )));
    }
    imported(cfg, path).map(Some)
}

/// The base digest a residual manifest is bound to (`[residual] base_sha256`).
fn residual_binding(path: &std::path::Path) -> Result<String, RunError> {
    let text = chunkrt_policy::manifest::read_manifest_text(path)
        .map_err(|e| RunError::Policy(e.to_string()))?;
    let format = chunkrt_policy::manifest2::manifest_format(path, &text)
        .map_err(|e| RunError::Policy(e.to_string()))?;
    if format != 2 {
        return Err(RunError::Policy(format!(
            "policy.residual: {} is a format-{format} manifest; a residual's is format 2 with \
             a [residual] table",
            path.display()
        )));
    }
    let m = chunkrt_policy::CheckedManifest2::parse(path, &text)
        .map_err(|e| RunError::Policy(e.to_string()))?;
    match m.raw.residual {
        Some(b) => Ok(b.base_sha256),
        None => Err(RunError::Policy(format!(
            "policy.residual: {} has no [residual] table: it is not a residual policy \
             (no base_sha256 binds it to a base)",
            path.display()
        ))),
    }
}

/// The model digest a policy manifest (format 1 or 2) declares.
pub(crate) fn model_sha256(path: &std::path::Path) -> Result<String, RunError> {
    let text = chunkrt_policy::manifest::read_manifest_text(path)
        .map_err(|e| RunError::Policy(e.to_string()))?;
    let format = chunkrt_policy::manifest2::manifest_format(path, &text)
        .map_err(|e| RunError::Policy(e.to_string()))?;
    if format == 2 {
        let m = chunkrt_policy::CheckedManifest2::parse(path, &text)
            .map_err(|e| RunError::Policy(e.to_string()))?;
        Ok(m.raw.model_sha256)
    } else {
        let m =
            chunkrt_policy::Manifest::load(path).map_err(|e| RunError::Policy(e.to_string()))?;
        Ok(m.model_sha256)
    }
}

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

/// The gate's Cartesian stage (`[cartesian]`): the arm's chain read from its model
/// (digest and joint count checked), the tool offset applied, the planes and speeds of
/// the config. Read before anything moves.
pub fn cartesian(cfg: &Config) -> Result<Option<chunkrt_core::CartesianFilter>, RunError> {
    let Some(c) = &cfg.cartesian else {
        return Ok(None);
    };
    let path = cfg.resolve(&c.model);
    let bad = |m: String| RunError::Config(format!("[cartesian] model {}: {m}", path.display()));
    let arm = chunkrt_mujoco::chain_from_mjcf(&path, &c.tool).map_err(|e| bad(e.to_string()))?;
    if !arm.sha256.eq_ignore_ascii_case(&c.model_sha256) {
        return Err(bad(format!(
            "its SHA-256 is {}, cartesian.model_sha256 says {}: a different file",
            arm.sha256, c.model_sha256
        )));
    }
    if arm.dof != cfg.control.joints {
        return Err(bad(format!(
            "{} hinge joints from the world body to {:?}; control.joints is {}",
            arm.dof, c.tool, cfg.control.joints
        )));
    }
    let chain = arm
        .chain
        .with_tool_offset(c.tool_offset_m)
        .ok_or_else(|| bad("cartesian.tool_offset_m is not finite".into()))?;
    let limits = c
        .limits()
        .ok_or_else(|| bad("a plane or a speed the config check should have refused".into()))?;
    Ok(Some(chunkrt_core::CartesianFilter::new(chain, limits)))
}
