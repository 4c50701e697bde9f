//! `ServoPolicy`: an integral position servo written as a policy, the loop whose
//! crossover `chunkrt margin` can predict.
//!
//! It holds one goal pose by integrating the measured error: each call it takes the
//! observed position `y`, sets the slope `k (goal - y)` and returns a chunk that
//! continues its own output from where the previous chunk's slope had taken it. The
//! command the arm gets therefore moves as `du/dt = k e`, sampled once per chunk:
//! with a drive that tracks well below its bandwidth, `L(s) ~ (k / s) e^(-s tau)`,
//! a gain crossover at `f_c ~ k / 2 pi` and a phase margin of about
//! `90 - 360 f_c tau_eff` degrees. Doubling the gain doubles the crossover: the
//! margin instrument's test that the policy is inside the loop it measures.

use chunkrt_core::{
    Chunk, InferInfo, JointVec, MonoTime, Observation, Policy, PolicyError, PolicySpec, MAX_DOF,
    MAX_HORIZON,
};

/// Configuration of a [`ServoPolicy`].
#[derive(Clone, Debug, PartialEq)]
pub struct ServoParams {
    /// Joints of the arm.
    pub dof: usize,
    /// Setpoints per chunk.
    pub horizon: usize,
    /// Setpoint period in ns.
    pub dt_ns: u64,
    /// The pose held (empty: the position first observed).
    pub goal_rad: Vec<f64>,
    /// Integral gain `k` (1/s): the output moves `k e` per second.
    pub gain_per_s: f64,
}

/// An integral servo as a policy (see the module docs).
pub struct ServoPolicy {
    params: ServoParams,
    goal: Option<JointVec>,
    /// (time, output, slope) of the last chunk.
    last: Option<(MonoTime, JointVec, JointVec)>,
}

impl ServoPolicy {
    /// Checks the parameters (the message names the one that is wrong).
    pub fn new(params: ServoParams) -> Result<Self, PolicyError> {
        let bad = |m: String| Err(PolicyError(format!("servo policy: {m}")));
        if params.dof == 0 || params.dof > MAX_DOF {
            return bad(format!("dof {} outside 1..={MAX_DOF}", params.dof));
        }
        if params.horizon < 2 || params.horizon > MAX_HORIZON {
            return bad(format!(
                "horizon {} outside 2..={MAX_HORIZON}",
                params.horizon
            ));
        }
        if params.dt_ns == 0 {
            return bad("dt must be positive".into());
        }
        if !(params.gain_per_s.is_finite() && params.gain_per_s > 0.0) {
            return bad(format!(
                "gain_per_s must be positive, got {}",
                params.gain_per_s
            ));
        }
        let given = !params.goal_rad.is_empty();
        if given
            && (params.goal_rad.len() != params.dof
                || params.goal_rad.iter().any(|g| !g.is_finite()))
        {
            return bad(format!(
                "the goal needs {} finite positions (or none: hold where the arm starts), got {:?}",
                params.dof, params.goal_rad
            ));
        }
        let goal = given.then(|| {
            let mut g = [0.0; MAX_DOF];
            g[..params.dof].copy_from_slice(&params.goal_rad);
            g
        });
        Ok(ServoPolicy {
            params,
            goal,
            last: None,
        })
    }
}

impl Policy for ServoPolicy {
    fn begin_episode(&mut self, goal: &chunkrt_core::JointVec) {
        let mut g = [0.0; MAX_DOF];
        g[..self.params.dof].copy_from_slice(&goal[..self.params.dof]);
        self.goal = Some(g);
    }

    fn spec(&self) -> PolicySpec {
        PolicySpec {
            dof: self.params.dof,
            horizon: self.params.horizon,
            dt_ns: self.params.dt_ns,
        }
    }

    /// Setpoint `i` is for `obs.t_capture + i * dt`.
    fn infer(&mut self, obs: &Observation, out: &mut Chunk) -> Result<InferInfo, PolicyError> {
        let dof = self.params.dof;
        crate::scripted::check_observation("servo policy", dof, obs)?;
        let t = obs.t_capture;
        let k = self.params.gain_per_s;
        // The integrator's output now: the last chunk's line continued to `t`, or the
        // command being sent when there was no last chunk (nothing jumps).
        let mut u = [0.0; MAX_DOF];
        match self.last {
            Some((t0, u0, s0)) if t >= t0 => {
                let dt = t.saturating_since(t0) as f64 * 1e-9;
                for j in 0..dof {
                    u[j] = u0[j] + s0[j] * dt;
                }
            }
            _ => u[..dof].copy_from_slice(&obs.cmd_pos_rad[..dof]),
        }
        let goal = *self.goal.get_or_insert(obs.pos_rad);
        let mut slope = [0.0; MAX_DOF];
        for j in 0..dof {
            slope[j] = k * (goal[j] - obs.pos_rad[j]);
        }
        out.len = self.params.horizon as u16;
        out.dof = dof as u16;
        out.dt_ns = self.params.dt_ns;
        out.sampler_steps = 0;
        let dt_s = self.params.dt_ns as f64 * 1e-9;
        for i in 0..self.params.horizon {
            for j in 0..dof {
                out.pos_rad[i][j] = u[j] + slope[j] * dt_s * i as f64;
            }
        }
        self.last = Some((t, u, slope));
        Ok(InferInfo::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(t_ms: u64, y: f64, cmd: f64) -> Observation {
        let mut o = Observation {
            t_capture: MonoTime::from_ns(t_ms * 1_000_000),
            dof: 1,
            ..Observation::default()
        };
        o.pos_rad[0] = y;
        o.cmd_pos_rad[0] = cmd;
        o
    }

    #[test]
    fn integrates_the_error_and_continues_its_own_output() {
        let mut p = ServoPolicy::new(ServoParams {
            dof: 1,
            horizon: 10,
            dt_ns: 20_000_000,
            goal_rad: vec![1.0],
            gain_per_s: 2.0,
        })
        .unwrap();
        let mut c = Chunk::default();
        p.infer(&obs(0, 0.0, 0.25), &mut c).unwrap();
        // Starts at the command, slope k e = 2 rad/s: 0.04 rad per 20 ms setpoint.
        assert_eq!(c.pos_rad[0][0], 0.25);
        assert!((c.pos_rad[9][0] - (0.25 + 9.0 * 0.04)).abs() < 1e-12);
        // 50 ms later with the arm at 0.5: the output continued (0.25 + 0.1), new
        // slope 1 rad/s; the command in the observation is not used any more.
        p.infer(&obs(50, 0.5, 9.0), &mut c).unwrap();
        assert!((c.pos_rad[0][0] - 0.35).abs() < 1e-12);
        assert!((c.pos_rad[1][0] - 0.37).abs() < 1e-12);
        // A closed loop on a perfect drive converges on the goal.
        let mut y = 0.35;
        for n in 2..400u64 {
            p.infer(&obs(50 * n, y, 0.0), &mut c).unwrap();
            y = c.pos_rad[0][0];
        }
        assert!((y - 1.0).abs() < 1e-6, "{y}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        let ok = ServoParams {
            dof: 1,
            horizon: 10,
            dt_ns: 20_000_000,
            goal_rad: vec![0.0],
            gain_per_s: 1.0,
        };
        for (p, word) in [
            (
                ServoParams {
                    gain_per_s: 0.0,
                    ..ok.clone()
                },
                "gain_per_s",
            ),
            (
                ServoParams {
                    goal_rad: vec![0.0, 1.0],
                    ..ok.clone()
                },
                "goal",
            ),
            (ServoParams { horizon: 1, ..ok }, "horizon"),
        ] {
            let e = ServoPolicy::new(p).err().unwrap();
            assert!(e.0.contains(word), "{e:?}");
        }
    }
}
