//! The checked configuration as the core's typed settings: limits, executor, episode
//! plan, residual limits and budget, thermal limits, support box.

use crate::schema::{BackendKind, Config, ResumeMode, SeamKind};
use crate::PerJoint;
use chunkrt_core::{
    ms_to_ns, DomainBox, ExecutorConfig, JointLimit, JointLimits, Resume, SeamMode, MAX_DOF,
};

impl Config {
    /// The episode plan of `[episodes]` (none without one).
    pub fn episode_plan(&self) -> Option<chunkrt_core::EpisodePlan> {
        let e = self.episodes.as_ref()?;
        let max = chunkrt_core::episodes::MAX_POSES;
        let mut plan = chunkrt_core::EpisodePlan {
            dof: self.control.joints.min(MAX_DOF),
            count: e.count.unwrap_or(e.starts_rad.len() as u32),
            starts: [[0.0; MAX_DOF]; chunkrt_core::episodes::MAX_POSES],
            n_starts: e.starts_rad.len().min(max),
            held_out: [false; chunkrt_core::episodes::MAX_POSES],
            goals: [[0.0; MAX_DOF]; chunkrt_core::episodes::MAX_POSES],
            n_goals: e.goals_rad.len().min(max),
            time_limit_ns: (e.time_limit_s * 1e9) as u64,
            reset_limit_ns: (e.reset_limit_s * 1e9) as u64,
            tolerance_rad: e.tolerance_rad,
            reset_tolerance_rad: e.reset_tolerance_rad.unwrap_or(e.tolerance_rad),
            settle_vel_rad_s: e.settle_vel_rad_s,
            settle_ns: (e.settle_ms * 1e6) as u64,
        };
        for (k, p) in e.starts_rad.iter().take(max).enumerate() {
            plan.starts[k][..p.len().min(MAX_DOF)].copy_from_slice(&p[..p.len().min(MAX_DOF)]);
            plan.held_out[k] = e.held_out.get(k).copied().unwrap_or(false);
        }
        for (k, p) in e.goals_rad.iter().take(max).enumerate() {
            plan.goals[k][..p.len().min(MAX_DOF)].copy_from_slice(&p[..p.len().min(MAX_DOF)]);
        }
        Some(plan)
    }

    /// The residual's budget of `[policy.residual.budget]` (an unlimited one without).
    pub fn residual_budget(&self) -> chunkrt_core::Budget {
        let b = self
            .policy
            .residual
            .as_ref()
            .and_then(|r| r.budget.as_ref());
        b.map_or(chunkrt_core::Budget::default(), |b| chunkrt_core::Budget {
            max_gate_cycles: b.max_gate_interventions,
            max_operator_stops: b.max_operator_stops,
            window_episodes: b.window_episodes,
            max_track_p99_rad: b.max_tracking_error_p99_rad,
        })
    }

    /// The enable switch of `[ethercat.enable_input]` on an EtherCAT run: the joint whose
    /// drive's digital inputs carry it and its bit (none otherwise).
    pub fn enable_input(&self) -> Option<(usize, u8)> {
        self.ethercat
            .as_ref()
            .filter(|_| self.backend.kind == BackendKind::Ethercat)
            .and_then(|e| e.enable_input.as_ref())
            .map(|e| (e.joint, e.bit))
    }

    /// The residual gate's limits from `[policy.residual]` (none without one).
    pub fn residual_limits(&self) -> Option<chunkrt_core::ResidualLimits> {
        let r = self.policy.residual.as_ref()?;
        let n = self.control.joints.min(MAX_DOF);
        let mut out = chunkrt_core::ResidualLimits {
            dof: n,
            bound_rad: [0.0; MAX_DOF],
            rate_rad_s: [0.0; MAX_DOF],
            acc_rad_s2: [0.0; MAX_DOF],
            jerk_rad_s3: [0.0; MAX_DOF],
            region: None,
        };
        let or_tenth = |v: &Option<PerJoint>, limit: &PerJoint, j: usize| {
            v.as_ref().map_or(0.1 * limit.get(j), |v| v.get(j))
        };
        for j in 0..n {
            out.bound_rad[j] = r.bound_rad.get(j);
            out.rate_rad_s[j] = r.rate_rad_s.get(j);
            out.acc_rad_s2[j] = or_tenth(&r.acc_rad_s2, &self.limits.max_acc_rad_s2, j);
            out.jerk_rad_s3[j] = or_tenth(&r.jerk_rad_s3, &self.limits.max_jerk_rad_s3, j);
        }
        out.region = r.region.as_ref().map(|g| {
            let mut region = chunkrt_core::ActivityRegion {
                lo_rad: [0.0; MAX_DOF],
                hi_rad: [0.0; MAX_DOF],
                fade_rad: g.fade_rad,
            };
            for j in 0..n {
                region.lo_rad[j] = g.lo_rad.get(j);
                region.hi_rad[j] = g.hi_rad.get(j);
            }
            region
        });
        Some(out)
    }

    /// The joint limits for the gate and the fallback.
    pub fn joint_limits(&self) -> JointLimits {
        let l = &self.limits;
        let mut out = JointLimits::uniform(self.control.joints, JointLimit::default());
        for j in 0..self.control.joints {
            out.joint[j] = JointLimit {
                pos_min_rad: l.pos_min_rad.get(j),
                pos_max_rad: l.pos_max_rad.get(j),
                pos_margin_rad: l.pos_margin_rad.get(j),
                max_vel_rad_s: l.max_vel_rad_s.get(j),
                max_acc_rad_s2: l.max_acc_rad_s2.get(j),
                max_jerk_rad_s3: l.max_jerk_rad_s3.get(j),
                brake_acc_rad_s2: l.brake_acc_rad_s2.get(j),
            };
        }
        out
    }

    /// The executor settings.
    pub fn executor_config(&self) -> ExecutorConfig {
        let e = &self.executor;
        ExecutorConfig {
            dof: self.control.joints,
            max_chunk_age_ns: ms_to_ns(e.max_chunk_age_ms),
            blend_ns: ms_to_ns(e.blend_ms),
            seam: match e.seam {
                SeamKind::Crossfade => SeamMode::Crossfade,
                SeamKind::Transition => SeamMode::Transition,
                SeamKind::Ensemble => SeamMode::Ensemble,
            },
            lookahead_ns: ms_to_ns(e.lookahead_ms),
            safe_stop_after_ns: ms_to_ns(e.safe_stop_after_ms),
            resume: match e.resume {
                ResumeMode::Auto => Resume::Auto,
                ResumeMode::Manual => Resume::Manual,
            },
            dt_min_ns: ms_to_ns(e.dt_min_ms),
            dt_max_ns: ms_to_ns(e.dt_max_ms),
            min_len: e.min_len,
            max_time_offset_ns: ms_to_ns(e.max_time_offset_ms),
            ensemble_coeff: e.ensemble_coeff,
            ensemble_chunks: e.ensemble_chunks,
        }
    }

    /// Per-joint following-error limits (`limits.max_following_error_rad`), when set.
    pub fn following_error_limits(&self) -> Option<[f64; MAX_DOF]> {
        let f = self.limits.max_following_error_rad.as_ref()?;
        let mut out = [f64::INFINITY; MAX_DOF];
        for (j, v) in out
            .iter_mut()
            .enumerate()
            .take(self.control.joints.min(MAX_DOF))
        {
            *v = f.get(j);
        }
        Some(out)
    }

    /// The action filter's cutoff (`limits.action_filter_hz`), when set.
    pub fn action_filter_hz(&self) -> Option<f64> {
        self.limits.action_filter_hz
    }

    /// The jerk per joint that keeps `[limits.torque_slew]`, when set (rad/s^3;
    /// infinite past the arm's joints).
    pub fn torque_slew_jerk(&self) -> Option<[f64; MAX_DOF]> {
        let s = self.limits.torque_slew.as_ref()?;
        let mut out = [f64::INFINITY; MAX_DOF];
        let rise_s = s.rise_time_ms * 1e-3;
        for (j, v) in out
            .iter_mut()
            .enumerate()
            .take(self.control.joints.min(MAX_DOF))
        {
            *v = s.max_torque_nm.get(j) / (rise_s * s.inertia_kg_m2.get(j));
        }
        Some(out)
    }

    /// Each joint's declared worst-case starting load (`limits.thermal.initial_load`),
    /// when the thermal monitor is on.
    pub fn thermal_initial_load(&self) -> Option<chunkrt_core::JointVec> {
        let t = self.limits.thermal.as_ref()?;
        let mut out = [0.0; MAX_DOF];
        for (j, o) in out
            .iter_mut()
            .enumerate()
            .take(self.control.joints.min(MAX_DOF))
        {
            *o = t.initial_load.get(j);
        }
        Some(out)
    }

    /// The thermal monitor's limits (`limits.thermal`), when set.
    pub fn thermal_limits(&self) -> Option<chunkrt_core::ThermalLimits> {
        let t = self.limits.thermal.as_ref()?;
        let n = self.control.joints.min(MAX_DOF);
        let mut l = chunkrt_core::ThermalLimits {
            dof: n,
            continuous_nm: [f64::INFINITY; MAX_DOF],
            time_constant_s: [1.0; MAX_DOF],
            derate_at: t.derate_at,
            withdraw_at: t.withdraw_at,
            min_derate: t.min_derate,
        };
        for j in 0..n {
            l.continuous_nm[j] = t.continuous_torque_nm.get(j);
            l.time_constant_s[j] = t.time_constant_s.get(j);
        }
        Some(l)
    }

    /// `(event, fallback)` thresholds of gate saturation in control cycles (see
    /// `executor.gate_saturated_*_ms`), at least one cycle each.
    pub fn gate_saturation_cycles(&self) -> (u32, u32) {
        let cycles = |ms: f64| {
            let n = (ms / self.control.period_ms).ceil();
            if n.is_finite() {
                n.clamp(1.0, u32::MAX as f64) as u32
            } else {
                u32::MAX
            }
        };
        (
            cycles(self.executor.gate_saturated_event_ms),
            cycles(self.executor.gate_saturated_fallback_ms),
        )
    }

    /// Control period in nanoseconds.
    pub fn period_ns(&self) -> u64 {
        ms_to_ns(self.control.period_ms)
    }

    /// The support monitor's box on observed positions, when configured.
    pub fn domain_box(&self) -> Option<DomainBox> {
        self.domain.as_ref().map(|d| {
            let mut b = DomainBox {
                dof: self.control.joints,
                lo_rad: [f64::NEG_INFINITY; MAX_DOF],
                hi_rad: [f64::INFINITY; MAX_DOF],
            };
            for j in 0..self.control.joints {
                b.lo_rad[j] = d.pos_min_rad.get(j);
                b.hi_rad[j] = d.pos_max_rad.get(j);
            }
            b
        })
    }
}
