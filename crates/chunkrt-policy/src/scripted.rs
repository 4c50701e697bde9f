//! `ScriptedPolicy`: an analytic closed-loop policy (no model) that plans smooth chunks toward
//! a cyclic list of goal poses.
//!
//! It serves tests, CI without the ONNX model, and the phase-margin reference loop. Each call
//! reads the observed joint positions; while they follow the current plan it keeps that plan
//! (so consecutive chunks agree exactly at shared times), otherwise it replans from what it
//! observed. Plans are quintic segments bounded in speed and acceleration.

use chunkrt_core::{
    Chunk, InferInfo, JointVec, MonoTime, Observation, Policy, PolicyError, PolicySpec, MAX_DOF,
    MAX_HORIZON, NS_PER_S,
};

use crate::goals::{GoalError, GoalSequence};
use crate::quintic::{JointState, Segment};

/// Configuration of a [`ScriptedPolicy`].
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptedParams {
    /// Joints of the arm (1..=MAX_DOF).
    pub dof: usize,
    /// Setpoints per chunk (2..=MAX_HORIZON).
    pub horizon: usize,
    /// Setpoint period in ns (20 ms by default).
    pub dt_ns: u64,
    /// Goal poses visited in order, wrapping around; each has `dof` values in rad.
    pub goals: Vec<Vec<f64>>,
    /// Speed bound of every joint along a plan.
    pub max_vel_rad_s: f64,
    /// Acceleration bound of every joint along a plan.
    pub max_acc_rad_s2: f64,
    /// A goal is reached when every joint is this close to it.
    pub goal_tolerance_rad: f64,
    /// Time to stay at a reached goal before heading for the next one.
    pub dwell_ns: u64,
    /// When the observed position is further than this from the plan (any joint), the
    /// policy replans from the observation instead of continuing its plan.
    pub replan_tolerance_rad: f64,
}

impl ScriptedParams {
    /// Defaults for everything but the arm and its goals: H = 16 at 20 ms, 1 rad/s,
    /// 4 rad/s², 0.02 rad goal tolerance, 200 ms dwell, 0.1 rad replan tolerance.
    pub fn new(dof: usize, goals: Vec<Vec<f64>>) -> Self {
        ScriptedParams {
            dof,
            horizon: 16,
            dt_ns: 20_000_000,
            goals,
            max_vel_rad_s: 1.0,
            max_acc_rad_s2: 4.0,
            goal_tolerance_rad: 0.02,
            dwell_ns: 200_000_000,
            replan_tolerance_rad: 0.1,
        }
    }
}

/// Why [`ScriptedParams`] were refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScriptedParamsError {
    /// `dof` outside 1..=MAX_DOF.
    #[error("scripted policy: dof {0} outside 1..={MAX_DOF}")]
    Dof(usize),
    /// `horizon` outside 2..=MAX_HORIZON.
    #[error("scripted policy: horizon {0} outside 2..={MAX_HORIZON}")]
    Horizon(usize),
    /// `dt_ns` zero.
    #[error("scripted policy: dt_ns must be positive")]
    Dt,
    /// A bound that must be positive and finite is not.
    #[error("scripted policy: {name} must be positive and finite, got {value}")]
    Bound {
        /// Parameter name.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// The goal list is unusable.
    #[error("scripted policy: {0}")]
    Goals(#[from] GoalError),
}

/// The plan being followed: a segment that started at `t0`.
#[derive(Clone, Copy, Debug)]
struct Plan {
    t0: MonoTime,
    segment: Segment,
}

impl Plan {
    fn state_at(&self, t: MonoTime) -> JointState {
        self.segment
            .state_at(t.diff_ns(self.t0) as f64 / NS_PER_S as f64)
    }
}

/// Analytic closed-loop policy; see the module docs. Deterministic.
#[derive(Clone, Debug)]
pub struct ScriptedPolicy {
    params: ScriptedParams,
    goals: GoalSequence,
    plan: Option<Plan>,
    replans: u64,
}

impl ScriptedPolicy {
    /// Validates the parameters.
    pub fn new(params: ScriptedParams) -> Result<Self, ScriptedParamsError> {
        if params.dof == 0 || params.dof > MAX_DOF {
            return Err(ScriptedParamsError::Dof(params.dof));
        }
        if params.horizon < 2 || params.horizon > MAX_HORIZON {
            return Err(ScriptedParamsError::Horizon(params.horizon));
        }
        if params.dt_ns == 0 {
            return Err(ScriptedParamsError::Dt);
        }
        for (name, value) in [
            ("max_vel_rad_s", params.max_vel_rad_s),
            ("max_acc_rad_s2", params.max_acc_rad_s2),
            ("replan_tolerance_rad", params.replan_tolerance_rad),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ScriptedParamsError::Bound { name, value });
            }
        }
        let goals = GoalSequence::new(
            params.dof,
            &params.goals,
            params.goal_tolerance_rad,
            params.dwell_ns,
        )?;
        Ok(ScriptedPolicy {
            params,
            goals,
            plan: None,
            replans: 0,
        })
    }

    /// Index of the goal currently pursued.
    pub fn goal_index(&self) -> usize {
        self.goals.index()
    }

    /// How often the policy replanned from the observation because the arm was not where
    /// the plan said (the first plan included).
    pub fn replans(&self) -> u64 {
        self.replans
    }

    /// The parameters it runs with.
    pub fn params(&self) -> &ScriptedParams {
        &self.params
    }
}

impl Policy for ScriptedPolicy {
    fn begin_episode(&mut self, goal: &chunkrt_core::JointVec) {
        self.goals.pursue_only(goal);
        self.plan = None;
    }

    fn goals(&self) -> &[chunkrt_core::JointVec] {
        self.goals.all()
    }

    fn spec(&self) -> PolicySpec {
        PolicySpec {
            dof: self.params.dof,
            horizon: self.params.horizon,
            dt_ns: self.params.dt_ns,
        }
    }

    /// Setpoint `i` is for `obs.t_capture + i * dt` (offset 0: setpoint 0 is "now").
    fn infer(&mut self, obs: &Observation, out: &mut Chunk) -> Result<InferInfo, PolicyError> {
        let dof = self.params.dof;
        check_observation("scripted policy", dof, obs)?;
        let t = obs.t_capture;
        let q = &obs.pos_rad;

        // Continue the plan while the arm follows it, so that chunks agree at shared times.
        let planned = self.plan.map(|p| p.state_at(t));
        let on_plan = planned
            .filter(|s| max_abs_diff(dof, &s.pos_rad, q) <= self.params.replan_tolerance_rad);
        let start = match on_plan {
            Some(s) => s,
            None => {
                self.replans += 1;
                let vmax = self.params.max_vel_rad_s;
                let mut vel = [0.0; MAX_DOF];
                for (out, &v) in vel.iter_mut().zip(&obs.vel_rad_s).take(dof) {
                    *out = if v.is_finite() {
                        v.clamp(-vmax, vmax)
                    } else {
                        0.0
                    };
                }
                JointState {
                    pos_rad: *q,
                    vel_rad_s: vel,
                    acc_rad_s2: [0.0; MAX_DOF],
                }
            }
        };
        let goal_changed = self.goals.update(q, t);
        if on_plan.is_none() || goal_changed {
            self.plan = Some(Plan {
                t0: t,
                segment: Segment::plan(
                    dof,
                    &start,
                    self.goals.current(),
                    self.params.max_vel_rad_s,
                    self.params.max_acc_rad_s2,
                ),
            });
        }
        let plan = self
            .plan
            .as_ref()
            .ok_or_else(|| PolicyError("scripted policy: no plan".into()))?;

        out.len = self.params.horizon as u16;
        out.dof = dof as u16;
        out.dt_ns = self.params.dt_ns;
        out.sampler_steps = 0;
        for i in 0..self.params.horizon {
            let s = plan.state_at(t.add_ns(self.params.dt_ns * i as u64));
            out.pos_rad[i][..dof].copy_from_slice(&s.pos_rad[..dof]);
        }
        Ok(InferInfo::default())
    }
}

/// The analytic policies' check of an observation: `dof` joints, every measured
/// position finite (`who` names the policy in the message).
pub(crate) fn check_observation(
    who: &str,
    dof: usize,
    obs: &Observation,
) -> Result<(), PolicyError> {
    if obs.dof as usize != dof {
        return Err(PolicyError(format!(
            "{who}: observation has {} joints, policy expects {dof}",
            obs.dof
        )));
    }
    if let Some(j) = (0..dof).find(|&j| !obs.pos_rad[j].is_finite()) {
        return Err(PolicyError(format!(
            "{who}: observed position of joint {j} is not finite ({})",
            obs.pos_rad[j]
        )));
    }
    Ok(())
}

fn max_abs_diff(dof: usize, a: &JointVec, b: &JointVec) -> f64 {
    (0..dof).fold(0.0f64, |m, j| m.max((a[j] - b[j]).abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DT: u64 = 20_000_000;

    fn obs_at(t_ns: u64, pos: &[f64]) -> Observation {
        let mut o = Observation {
            t_capture: MonoTime::from_ns(t_ns),
            dof: pos.len() as u16,
            ..Observation::default()
        };
        o.pos_rad[..pos.len()].copy_from_slice(pos);
        o
    }

    fn policy() -> ScriptedPolicy {
        let mut p = ScriptedParams::new(3, vec![vec![0.5, -0.3, 0.2], vec![-0.4, 0.6, 0.0]]);
        p.dwell_ns = 0;
        ScriptedPolicy::new(p).unwrap()
    }

    #[test]
    fn first_chunk_starts_at_the_observation() {
        let mut p = policy();
        let mut c = Chunk::default();
        p.infer(&obs_at(1_000_000_000, &[0.1, 0.2, 0.3]), &mut c)
            .unwrap();
        assert_eq!((c.len, c.dof, c.dt_ns), (16, 3, DT));
        assert_eq!(&c.pos_rad[0][..3], &[0.1, 0.2, 0.3]);
        assert!(c.all_finite());
        // Moving toward goal 0 on every joint.
        assert!(c.pos_rad[15][0] > 0.1 && c.pos_rad[15][1] < 0.2 && c.pos_rad[15][2] < 0.3);
    }

    #[test]
    fn consecutive_chunks_agree_when_the_arm_follows() {
        let mut p = policy();
        let mut a = Chunk::default();
        let mut b = Chunk::default();
        p.infer(&obs_at(0, &[0.0, 0.0, 0.0]), &mut a).unwrap();
        // Observation 60 ms later, exactly on setpoint 3 of the first chunk.
        let q = a.pos_rad[3];
        p.infer(&obs_at(3 * DT, &q[..3]), &mut b).unwrap();
        for i in 0..13 {
            for j in 0..3 {
                assert!((b.pos_rad[i][j] - a.pos_rad[i + 3][j]).abs() < 1e-12);
            }
        }
        assert_eq!(p.replans(), 1);
    }

    #[test]
    fn replans_from_the_observation_after_a_disturbance() {
        let mut p = policy();
        let mut c = Chunk::default();
        p.infer(&obs_at(0, &[0.0, 0.0, 0.0]), &mut c).unwrap();
        p.infer(&obs_at(DT, &[0.3, 0.0, 0.0]), &mut c).unwrap();
        assert_eq!(&c.pos_rad[0][..3], &[0.3, 0.0, 0.0]);
        assert_eq!(p.replans(), 2);
    }

    #[test]
    fn closed_loop_visits_every_goal_within_bounds() {
        let mut p = policy();
        let mut c = Chunk::default();
        let mut q = [0.0f64; 3];
        let mut visited = vec![];
        for k in 0..2000u64 {
            p.infer(&obs_at(k * DT, &q), &mut c).unwrap();
            for i in 1..c.len as usize {
                for j in 0..3 {
                    let v = (c.pos_rad[i][j] - c.pos_rad[i - 1][j]) / 0.02;
                    assert!(v.abs() <= 1.0 + 1e-6, "speed {v} at step {k}");
                }
            }
            // Perfect tracking: the arm is where setpoint 1 said, one period later.
            q.copy_from_slice(&c.pos_rad[1][..3]);
            if visited.last() != Some(&p.goal_index()) {
                visited.push(p.goal_index());
            }
        }
        assert!(visited.len() >= 4, "goals visited: {visited:?}");
        assert_eq!(&visited[..4], &[0, 1, 0, 1]);
        assert_eq!(p.replans(), 1, "perfect tracking never needs a replan");
    }

    #[test]
    fn refuses_bad_observations_and_params() {
        let mut p = policy();
        let mut c = Chunk::default();
        let e = p.infer(&obs_at(0, &[0.0, 0.0]), &mut c).unwrap_err();
        assert_eq!(
            e.0,
            "scripted policy: observation has 2 joints, policy expects 3"
        );
        let e = p
            .infer(&obs_at(0, &[0.0, f64::NAN, 0.0]), &mut c)
            .unwrap_err();
        assert_eq!(
            e.0,
            "scripted policy: observed position of joint 1 is not finite (NaN)"
        );

        let mut bad = ScriptedParams::new(3, vec![vec![0.0; 3]]);
        bad.horizon = MAX_HORIZON + 1;
        assert_eq!(
            ScriptedPolicy::new(bad).unwrap_err().to_string(),
            format!(
                "scripted policy: horizon {} outside 2..={MAX_HORIZON}",
                MAX_HORIZON + 1
            )
        );
        let mut bad = ScriptedParams::new(3, vec![vec![0.0; 3]]);
        bad.max_vel_rad_s = f64::INFINITY;
        assert_eq!(
            ScriptedPolicy::new(bad).unwrap_err().to_string(),
            "scripted policy: max_vel_rad_s must be positive and finite, got inf"
        );
        let bad = ScriptedParams::new(3, vec![vec![0.0; 2]]);
        assert_eq!(
            ScriptedPolicy::new(bad).unwrap_err().to_string(),
            "scripted policy: goal 0 has 2 joint values, expected 3"
        );
    }
}
