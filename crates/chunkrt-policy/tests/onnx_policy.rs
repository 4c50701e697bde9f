//! OnnxPolicy behind the `Policy` trait: closed loop on an ideal arm, anytime step
//! reduction, the domain verdict.

mod common;

use chunkrt_core::{Chunk, MonoTime, Observation, Policy};
use chunkrt_policy::{DomainVerdict, OnnxPolicy, OnnxPolicyConfig};
use common::policies;

fn obs_at(t_ns: u64, q: &[f64]) -> Observation {
    let mut o = Observation {
        t_capture: MonoTime::from_ns(t_ns),
        dof: q.len() as u16,
        ..Observation::default()
    };
    // An arm at rest where it was commanded (and planned) to be: every state agrees.
    o.pos_rad[..q.len()].copy_from_slice(q);
    o.cmd_pos_rad[..q.len()].copy_from_slice(q);
    o.plan_pos_rad[..q.len()].copy_from_slice(q);
    o
}

/// An arm moving at `v` where it was commanded and planned to be (every state agrees).
fn moving_obs_at(t_ns: u64, q: &[f64], v: &[f64]) -> Observation {
    let mut o = obs_at(t_ns, q);
    o.vel_rad_s[..v.len()].copy_from_slice(v);
    o.cmd_vel_rad_s[..v.len()].copy_from_slice(v);
    o.plan_vel_rad_s[..v.len()].copy_from_slice(v);
    o
}

/// Where the chunk says the arm is `t_ns` after its observation (linear between setpoints),
/// and how fast it moves there (the slope of that segment).
fn chunk_at(c: &Chunk, t_ns: u64, dof: usize) -> (Vec<f64>, Vec<f64>) {
    let f = t_ns as f64 / c.dt_ns as f64;
    let i = (f.floor() as usize).min(c.len as usize - 2);
    let w = f - i as f64;
    let dt_s = c.dt_ns as f64 * 1e-9;
    (0..dof)
        .map(|j| {
            let (a, b) = (c.pos_rad[i][j], c.pos_rad[i + 1][j]);
            (a * (1.0 - w) + b * w, (b - a) / dt_s)
        })
        .unzip()
}

#[test]
fn drives_an_ideal_arm_through_its_goals() {
    for name in ["flow", "ddim"] {
        let mut policy = OnnxPolicy::new(&OnnxPolicyConfig::new(
            policies().join(format!("{name}.toml")),
        ))
        .unwrap();
        let spec = policy.spec();
        assert_eq!((spec.dof, spec.horizon, spec.dt_ns), (7, 32, 20_000_000));
        let mut q = policy.manifest().encoding.goals[0].clone();
        let mut v = vec![0.0; 7];
        let period_ns = 50_000_000;
        let mut chunk = Chunk::default();
        let mut goals_reached = 0;
        let mut last_goal = policy.goal_index();
        let mut max_speed = 0.0f64;
        let mut outside = 0;
        let chunks = 400; // 20 s
        for k in 0..chunks {
            let info = policy
                .infer(&moving_obs_at(k * period_ns, &q, &v), &mut chunk)
                .unwrap();
            assert!(chunk.all_finite());
            assert_eq!(info.steps, info.steps_nominal);
            outside += info.out_of_domain as usize;
            for i in 1..chunk.len as usize {
                for j in 0..7 {
                    max_speed =
                        max_speed.max((chunk.pos_rad[i][j] - chunk.pos_rad[i - 1][j]).abs() / 0.02);
                }
            }
            (q, v) = chunk_at(&chunk, period_ns, 7);
            if policy.goal_index() != last_goal {
                goals_reached += 1;
                last_goal = policy.goal_index();
            }
        }
        eprintln!(
            "{name}: {goals_reached} goals reached in {} s; largest setpoint speed {max_speed:.2} rad/s; \
             {outside} of {chunks} observations outside the declared domain",
            chunks * period_ns / 1_000_000_000
        );
        assert!(
            goals_reached >= 3,
            "{name}: only {goals_reached} goals reached"
        );
        // docs/policy/onnx.md "Why generative": no observation outside the declared domain.
        assert_eq!(
            outside, 0,
            "{name}: observations outside the declared domain"
        );
        assert_eq!(policy.stats().chunks, chunks);
        assert_eq!(policy.stats().reduced, 0);
    }
}

#[test]
fn anytime_sampler_runs_fewer_steps_when_the_deadline_is_short() {
    let mut cfg = OnnxPolicyConfig::new(policies().join("flow.toml"));
    cfg.steps = Some(8);
    cfg.min_steps = Some(2);
    // No machine runs a graph call in a picosecond: every chunk must fall back to min_steps.
    cfg.deadline_ms = Some(1e-9);
    let mut policy = OnnxPolicy::new(&cfg).unwrap();
    let q = policy.manifest().encoding.goals[0].clone();
    let mut chunk = Chunk::default();
    for k in 0..5 {
        let info = policy
            .infer(&obs_at(k * 50_000_000, &q), &mut chunk)
            .unwrap();
        assert_eq!((info.steps, info.steps_nominal), (2, 8));
        assert_eq!(chunk.sampler_steps, 2);
        assert!(info.step_ns > 0);
    }
    assert_eq!(policy.stats().reduced, 5);

    // A deadline no machine misses: the nominal steps, never reduced.
    cfg.deadline_ms = Some(1e9);
    let mut policy = OnnxPolicy::new(&cfg).unwrap();
    let info = policy.infer(&obs_at(0, &q), &mut chunk).unwrap();
    assert_eq!((info.steps, info.steps_nominal), (8, 8));
    assert_eq!(policy.stats().reduced, 0);
}

#[test]
fn flags_observations_outside_the_declared_domain() {
    let mut policy = OnnxPolicy::new(&OnnxPolicyConfig::new(policies().join("flow.toml"))).unwrap();
    let mut q = policy.manifest().encoding.goals[0].clone();
    let mut chunk = Chunk::default();
    let info = policy.infer(&obs_at(0, &q), &mut chunk).unwrap();
    assert!(!info.out_of_domain, "{:?}", policy.last_verdict());
    q[0] += 2.5; // far outside anything demonstrated
    let info = policy.infer(&obs_at(50_000_000, &q), &mut chunk).unwrap();
    assert!(info.out_of_domain);
    assert!(matches!(
        policy.last_verdict(),
        Some(DomainVerdict::OutOfBounds { dim: 0, .. })
    ));
    assert_eq!(policy.stats().out_of_domain, 1);
    // The vector the gate would check agrees with the policy's own verdict.
    let mut v = vec![0.0; policy.manifest().d_obs];
    let mut pos = [0.0; chunkrt_core::MAX_DOF];
    pos[..7].copy_from_slice(&q);
    policy.observation_vector(&pos, &[0.0; chunkrt_core::MAX_DOF], &mut v);
    assert!(!policy.domain().check(&v).is_inside());
}

#[test]
fn refuses_bad_configs_and_observations() {
    let mut cfg = OnnxPolicyConfig::new(policies().join("flow.toml"));
    cfg.method = Some(chunkrt_policy::SamplerMethod::Ddim);
    let e = OnnxPolicy::new(&cfg).unwrap_err().to_string();
    assert!(
        e.ends_with("policy config: sampler `ddim` does not fit a Flow model"),
        "{e}"
    );
    let mut cfg = OnnxPolicyConfig::new(policies().join("ddim.toml"));
    cfg.steps = Some(101);
    let e = OnnxPolicy::new(&cfg).unwrap_err().to_string();
    assert!(
        e.ends_with("policy config: steps = 101 is outside 1..=100 for `ddim`"),
        "{e}"
    );
    let mut cfg = OnnxPolicyConfig::new(policies().join("flow.toml"));
    cfg.goals = Some(vec![vec![0.0; 6]]);
    let e = OnnxPolicy::new(&cfg).unwrap_err().to_string();
    assert!(
        e.ends_with("policy goals: goal 0 has 6 joint values, expected 7"),
        "{e}"
    );

    let mut policy = OnnxPolicy::new(&OnnxPolicyConfig::new(policies().join("flow.toml"))).unwrap();
    let mut chunk = Chunk::default();
    let e = policy.infer(&obs_at(0, &[0.0; 6]), &mut chunk).unwrap_err();
    assert_eq!(
        e.0,
        "onnx policy: observation has 6 joints, model expects 7"
    );
}

#[test]
fn commanded_state_source_anchors_the_chunk_at_the_command() {
    let mut cfg = OnnxPolicyConfig::new(policies().join("flow.toml"));
    cfg.state = Some(chunkrt_policy::StateSource::Commanded);
    cfg.smoothing_modes = 0;
    let mut policy = OnnxPolicy::new(&cfg).unwrap();
    let goal0 = policy.manifest().encoding.goals[0].clone();
    let mut obs = obs_at(0, &[9.0; 7]); // measurement ignored
    obs.cmd_pos_rad[..7].copy_from_slice(&goal0);
    let mut chunk = Chunk::default();
    let info = policy.infer(&obs, &mut chunk).unwrap();
    assert!(!info.out_of_domain, "{:?}", policy.last_verdict());
    for (j, g) in goal0.iter().enumerate() {
        assert!(
            (chunk.pos_rad[0][j] - g).abs() < 0.05,
            "joint {j}: {}",
            chunk.pos_rad[0][j]
        );
    }
}
