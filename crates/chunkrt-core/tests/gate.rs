//! Permission gate: exact pass-through inside the limits, every limit kept under
//! hostile proposals, convergence after an intervention.

mod common;

use chunkrt_core::{Command, Constraint, Gate, JointLimits, Setpoint, MAX_DOF};
use common::*;

/// Checks consecutive executed positions against the limits by finite differences.
pub struct LimitChecker {
    lim: JointLimits,
    t: f64,
    hist: Vec<[f64; MAX_DOF]>,
}

impl LimitChecker {
    fn new(lim: JointLimits, t: f64, start: [f64; MAX_DOF]) -> Self {
        // Starts at rest: three identical past positions.
        LimitChecker {
            lim,
            t,
            hist: vec![start; 3],
        }
    }
    fn push(&mut self, q: [f64; MAX_DOF]) {
        let n = self.hist.len();
        let (q0, q1, q2) = (self.hist[n - 3], self.hist[n - 2], self.hist[n - 1]);
        let t = self.t;
        for j in 0..self.lim.dof {
            let l = &self.lim.joint[j];
            let tol = 1e-6;
            assert!(q[j].is_finite());
            assert!(
                q[j] <= l.pos_max_rad - l.pos_margin_rad + 1e-9,
                "pos {}",
                q[j]
            );
            assert!(
                q[j] >= l.pos_min_rad + l.pos_margin_rad - 1e-9,
                "pos {}",
                q[j]
            );
            let v = (q[j] - q2[j]) / t;
            let v1 = (q2[j] - q1[j]) / t;
            let v0 = (q1[j] - q0[j]) / t;
            let a = (v - v1) / t;
            let a1 = (v1 - v0) / t;
            let jerk = (a - a1) / t;
            assert!(v.abs() <= l.max_vel_rad_s * (1.0 + tol) + 1e-9, "vel {v}");
            assert!(a.abs() <= l.max_acc_rad_s2 * (1.0 + tol) + 1e-6, "acc {a}");
            assert!(
                jerk.abs() <= l.max_jerk_rad_s3 * (1.0 + tol) + 1e-3 / t,
                "jerk {jerk}"
            );
        }
        self.hist.push(q);
    }
}

fn sp(pos: f64, vel: f64, acc: f64) -> Setpoint {
    let mut s = Setpoint {
        dof: 1,
        ..Setpoint::default()
    };
    s.pos_rad[0] = pos;
    s.vel_rad_s[0] = vel;
    s.acc_rad_s2[0] = acc;
    s
}

#[test]
fn feasible_motion_passes_untouched() {
    let lim = limits(1);
    let t = 1e-3;
    let mut g = Gate::new(lim, 1_000_000, &[0.0; MAX_DOF]);
    let mut cmd = Command::default();
    // 0.5 rad/s^2 ramp... a gentle sine: within every limit.
    for k in 1..2000 {
        let x = k as f64 * t;
        let p = 0.2 * (1.0 - (2.0 * x).cos());
        let mask = g.filter(
            &sp(p, 0.4 * (2.0 * x).sin(), 0.8 * (2.0 * x).cos()),
            &mut cmd,
        );
        assert!(mask.is_empty(), "k {k} mask {mask:?}");
        assert!((cmd.pos_rad[0] - p).abs() < 1e-12);
    }
    assert_eq!(g.counts().iter().sum::<u64>(), 0);
}

#[test]
fn a_step_is_rate_limited_and_converges() {
    let lim = limits(1);
    let t = 1e-3;
    let mut g = Gate::new(lim, 1_000_000, &[0.0; MAX_DOF]);
    let mut chk = LimitChecker::new(lim, t, [0.0; MAX_DOF]);
    let mut cmd = Command::default();
    let mask = g.filter(&sp(1.0, 0.0, 0.0), &mut cmd);
    assert!(mask.contains(Constraint::Jerk));
    assert_eq!(g.interventions().len(), 1);
    assert_eq!(g.interventions()[0].constraint, Constraint::Jerk);
    chk.push(cmd.pos_rad);
    let mut overshoot: f64 = 0.0;
    for _ in 0..3000 {
        g.filter(&sp(1.0, 0.0, 0.0), &mut cmd);
        chk.push(cmd.pos_rad);
        overshoot = overshoot.max(cmd.pos_rad[0] - 1.0);
    }
    assert!(
        (cmd.pos_rad[0] - 1.0).abs() < 1e-4,
        "settled at {}",
        cmd.pos_rad[0]
    );
    assert!(overshoot <= 1e-9, "overshoot {overshoot}");
}

#[test]
fn non_finite_holds_the_previous_command_and_limits_clip() {
    let lim = limits(1);
    let mut g = Gate::new(lim, 1_000_000, &[0.5; MAX_DOF]);
    let mut cmd = Command::default();
    let mask = g.filter(&sp(f64::NAN, 0.0, 0.0), &mut cmd);
    assert!(mask.contains(Constraint::NonFinite));
    assert_eq!(cmd.pos_rad[0], 0.5);
    let mask = g.filter(&sp(0.5, f64::INFINITY, 0.0), &mut cmd);
    assert!(mask.contains(Constraint::NonFinite));
    assert_eq!(cmd.pos_rad[0], 0.5);
    assert_eq!(cmd.vel_rad_s[0], 0.0);
    let mask = g.filter(&sp(9.0, 0.0, 0.0), &mut cmd);
    assert!(mask.contains(Constraint::Position));
    assert_eq!(g.counts()[Constraint::Position as usize], 1);
}

#[test]
fn runs_into_a_limit_at_full_speed_and_stops_inside_it() {
    let lim = limits(1);
    let t = 1e-3;
    let mut g = Gate::new(lim, 1_000_000, &[0.0; MAX_DOF]);
    let mut chk = LimitChecker::new(lim, t, [0.0; MAX_DOF]);
    let mut cmd = Command::default();
    let mut saw = 0u32;
    // Proposal races toward +10 rad at 5 rad/s: velocity and braking must both act.
    for k in 1..4000 {
        let p = 5.0 * k as f64 * t;
        saw |= g.filter(&sp(p, 5.0, 0.0), &mut cmd).0;
        chk.push(cmd.pos_rad);
    }
    assert!(saw & Constraint::Velocity.bit() != 0);
    assert!(saw & Constraint::Position.bit() != 0);
    assert!((cmd.pos_rad[0] - 2.98).abs() < 1e-6, "{}", cmd.pos_rad[0]);
}

#[test]
fn domain_flag_is_reported_once() {
    let mut g = Gate::new(limits(2), 1_000_000, &[0.0; MAX_DOF]);
    let mut cmd = Command::default();
    g.flag_out_of_domain(Some(1));
    let mut p = sp(0.0, 0.0, 0.0);
    p.dof = 2;
    let mask = g.filter(&p, &mut cmd);
    assert_eq!(mask.0, Constraint::Domain.bit());
    assert_eq!(g.interventions()[0].joint, 1);
    assert!(g.filter(&p, &mut cmd).is_empty());
    assert_eq!(g.counts()[Constraint::Domain as usize], 1);
    assert_eq!(cmd.dof, 2);
}

#[test]
fn rejoins_a_moving_proposal_after_a_disturbance() {
    let lim = limits(1);
    let t = 1e-3;
    let mut g = Gate::new(lim, 1_000_000, &[0.0; MAX_DOF]);
    let mut chk = LimitChecker::new(lim, t, [0.0; MAX_DOF]);
    let mut cmd = Command::default();
    // A feasible 1 Hz sine (1.26 rad/s, 7.9 rad/s^2) that starts 0.2 rad away from
    // the gate's state: the gate must catch it and then follow it exactly.
    let w = std::f64::consts::TAU;
    let mut last_intervention = 0;
    for k in 1..4000 {
        let x = k as f64 * t;
        let p = 0.2 * (w * x).cos();
        let mask = g.filter(
            &sp(p, -0.2 * w * (w * x).sin(), -0.2 * w * w * (w * x).cos()),
            &mut cmd,
        );
        chk.push(cmd.pos_rad);
        if !mask.is_empty() {
            last_intervention = k;
        }
    }
    assert!(
        last_intervention < 2000,
        "still intervening at tick {last_intervention}"
    );
    let x = 3999.0 * t;
    assert!((cmd.pos_rad[0] - 0.2 * (w * x).cos()).abs() < 1e-12);
}

/// The action filter in front of the gate: a smooth proposal below its cutoff is only
/// delayed (no `action_filter` intervention, the command within a lag of it), a step
/// is an intervention on that joint only, and the filter acting is not a saturation.
#[test]
fn the_action_filter_counts_a_step_but_not_a_smooth_proposal() {
    // Limits wide enough that a 0.1 rad step passes the gate's own rate limits.
    let wide = chunkrt_core::JointLimit {
        max_vel_rad_s: 10.0,
        max_acc_rad_s2: 1000.0,
        max_jerk_rad_s3: 1e6,
        brake_acc_rad_s2: 1000.0,
        ..chunkrt_core::JointLimit::default()
    };
    let lim = JointLimits::uniform(2, wide);
    let period_ns = 20_000_000; // 50 Hz
    let mut gate = Gate::new(lim, period_ns, &[0.0; MAX_DOF]).with_action_filter(Some(10.0));
    let mut cmd = Command::default();
    let (amp, f0) = (0.2, 0.5);
    let w = 2.0 * std::f64::consts::PI * f0;
    let mut worst_lag = 0.0f64;
    for k in 0..200 {
        let t = k as f64 * 0.02;
        let mut sp = Setpoint {
            dof: 2,
            ..Setpoint::default()
        };
        for j in 0..2 {
            // From rest: 1 - cos.
            sp.pos_rad[j] = amp * (1.0 - (w * t).cos());
            sp.vel_rad_s[j] = amp * w * (w * t).sin();
            sp.acc_rad_s2[j] = amp * w * w * (w * t).cos();
        }
        let mask = gate.filter(&sp, &mut cmd);
        assert!(
            !mask.contains(Constraint::ActionFilter),
            "cycle {k}: {mask:?}"
        );
        worst_lag = worst_lag.max((cmd.pos_rad[0] - sp.pos_rad[0]).abs());
    }
    // At 0.5 Hz a 10 Hz first-order filter delays by about 1/(2 pi 10 Hz): 16 ms of a
    // motion of at most 0.63 rad/s is 10 mrad; the command never strays further.
    assert!(worst_lag < 0.012, "lag {worst_lag}");
    // A 0.1 rad step on joint 1 only.
    let (q0, q1) = (cmd.pos_rad[0], cmd.pos_rad[1]);
    let mut sp = Setpoint {
        dof: 2,
        ..Setpoint::default()
    };
    sp.pos_rad[0] = q0;
    sp.pos_rad[1] = q1 + 0.1;
    let mask = gate.filter(&sp, &mut cmd);
    assert!(mask.contains(Constraint::ActionFilter));
    let iv = gate.interventions();
    assert_eq!(iv.len(), 1, "{iv:?}");
    assert_eq!(
        (iv[0].joint, iv[0].constraint),
        (1, Constraint::ActionFilter)
    );
    assert_eq!(gate.saturation(1).cycles, 0);
    assert_eq!(gate.counts()[Constraint::ActionFilter as usize], 1);
}
