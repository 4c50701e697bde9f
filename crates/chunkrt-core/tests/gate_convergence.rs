//! Convergence of the permission gate on an infeasible proposal at every command
//! period the runtime offers (20, 10, 4, 1 ms): a step to a held position is
//! reached without overshoot (1e-9 rad) and is then followed exactly (within
//! 1e-9 rad) no later than 2x the continuous-time minimum rest-to-rest duration +
//! 3 periods with the default arm's limits (3x + 3 periods with a slow jerk); a
//! feasible moving proposal is rejoined (then followed exactly) after a
//! disturbance. Every executed command is also checked against the limits by
//! finite differences. (At 20 ms the gate used to creep at well under 1 rad/s^2,
//! then overshoot a 0.0167 rad step by 100 % and take a second to settle.)

use chunkrt_core::{Command, Gate, JointLimit, JointLimits, Setpoint, MAX_DOF};

/// The simulated arm's default joint (shoulder-like): the limits of the original
/// probe, where the gate used to creep and then overshoot at 20 ms.
fn joint() -> JointLimit {
    JointLimit {
        pos_min_rad: -0.0175,
        pos_max_rad: 3.7525,
        pos_margin_rad: 0.05,
        max_vel_rad_s: 2.61,
        max_acc_rad_s2: 20.0,
        max_jerk_rad_s3: 10_000.0,
        brake_acc_rad_s2: 10.0,
    }
}

/// A slow-jerk joint, where the jerk phases are long at every period.
fn soft_joint() -> JointLimit {
    JointLimit {
        max_jerk_rad_s3: 200.0,
        ..joint()
    }
}

fn setpoint(p: f64, v: f64, a: f64) -> Setpoint {
    let mut s = Setpoint {
        dof: 1,
        ..Setpoint::default()
    };
    s.pos_rad[0] = p;
    s.vel_rad_s[0] = v;
    s.acc_rad_s2[0] = a;
    s
}

/// Finite-difference check of one joint's executed positions (as the proptests do).
struct Checker {
    lim: JointLimit,
    t: f64,
    q: [f64; 3],
}

impl Checker {
    fn new(lim: JointLimit, t: f64, q0: f64) -> Self {
        Checker { lim, t, q: [q0; 3] }
    }
    fn push(&mut self, q: f64) {
        let (l, t, tol) = (&self.lim, self.t, 1e-6);
        assert!(q.is_finite());
        assert!(q <= l.pos_max_rad - l.pos_margin_rad + 1e-9, "pos {q}");
        assert!(q >= l.pos_min_rad + l.pos_margin_rad - 1e-9, "pos {q}");
        let v = (q - self.q[2]) / t;
        let v1 = (self.q[2] - self.q[1]) / t;
        let v0 = (self.q[1] - self.q[0]) / t;
        let (a, a1) = ((v - v1) / t, (v1 - v0) / t);
        let jerk = (a - a1) / t;
        assert!(v.abs() <= l.max_vel_rad_s * (1.0 + tol) + 1e-9, "vel {v}");
        assert!(a.abs() <= l.max_acc_rad_s2 * (1.0 + tol) + 1e-6, "acc {a}");
        assert!(
            jerk.abs() <= l.max_jerk_rad_s3 * (1.0 + tol) + 1e-3 / t,
            "jerk {jerk}"
        );
        self.q = [self.q[1], self.q[2], q];
    }
}

/// Continuous-time minimum duration of a rest-to-rest move over `dist` under the
/// velocity, acceleration and jerk limits (the classic seven-phase profile).
fn min_time(dist: f64, l: &JointLimit) -> f64 {
    let (vm, am, jm) = (l.max_vel_rad_s, l.max_acc_rad_s2, l.max_jerk_rad_s3);
    // Time to reach velocity v from rest, and the distance of accelerating to v and
    // braking back to rest (symmetric profile).
    let t_acc = |v: f64| {
        let tj = (am / jm).min((v / jm).sqrt());
        tj + v / (jm * tj)
    };
    let full = vm * t_acc(vm);
    if dist >= full {
        return t_acc(vm) + dist / vm;
    }
    let (mut lo, mut hi) = (0.0, vm);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if mid * t_acc(mid) < dist {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    2.0 * t_acc(hi)
}

/// Drives the gate from rest at `q0` toward a held `q0 + step`; returns the largest
/// overshoot past the target and the time after which the command stays within
/// `tol` of it.
fn step_response(lim: JointLimit, period_ms: u64, q0: f64, step: f64, tol: f64) -> (f64, f64) {
    let t = period_ms as f64 * 1e-3;
    let mut x0 = [0.0; MAX_DOF];
    x0[0] = q0;
    let mut gate = Gate::new(JointLimits::uniform(1, lim), period_ms * 1_000_000, &x0);
    let mut chk = Checker::new(lim, t, q0);
    let target = q0 + step;
    let sp = setpoint(target, 0.0, 0.0);
    let mut cmd = Command::default();
    let ticks = (3.0 * (min_time(step.abs(), &lim) + 0.2) / t) as usize + 10;
    let (mut overshoot, mut settled_at) = (0.0f64, None);
    for k in 1..=ticks {
        gate.filter(&sp, &mut cmd);
        let q = cmd.pos_rad[0];
        chk.push(q);
        overshoot = overshoot.max((q - target) * step.signum());
        if (q - target).abs() <= tol {
            settled_at.get_or_insert(k);
        } else {
            settled_at = None;
        }
    }
    let settled = settled_at.map_or(f64::INFINITY, |k| k as f64 * t);
    (overshoot, settled)
}

#[test]
fn steps_to_a_held_position_are_time_optimal_without_overshoot() {
    for lim in [joint(), soft_joint()] {
        for period_ms in [20, 10, 4, 1] {
            let t = period_ms as f64 * 1e-3;
            for step in [0.0167f64, -0.0167, 0.1, -0.3, 1.0, -1.1] {
                // Settled means on the proposal exactly (the gate passes it through
                // once it is reachable), so a slow creep at the end would count.
                let tol = 1e-9;
                let (overshoot, settled) = step_response(lim, period_ms, 1.2, step, tol);
                // With a slow jerk (swings of many periods, up to 5 periods at 20 ms)
                // the discrete stop brakes up to a period's velocity step too hard and
                // creeps in the rest: still overshoot-free, within 3x of the minimum.
                let factor = if lim.max_jerk_rad_s3 < 1000.0 {
                    3.0
                } else {
                    2.0
                };
                let bound = factor * min_time(step.abs(), &lim) + 3.0 * t;
                eprintln!(
                    "jerk {} T {period_ms} ms step {step}: overshoot {overshoot:.2e} settled {settled:.3} s (min {:.3} s)",
                    lim.max_jerk_rad_s3,
                    min_time(step.abs(), &lim)
                );
                assert!(
                    overshoot <= 1e-9,
                    "T {period_ms} ms step {step}: overshoot {overshoot}"
                );
                assert!(
                    settled <= bound,
                    "T {period_ms} ms step {step}: settled after {settled} s, bound {bound} s"
                );
            }
        }
    }
}

#[test]
fn a_feasible_moving_proposal_is_rejoined_and_then_followed_exactly() {
    // A 1 Hz sine within every limit (0.63 rad/s, 3.9 rad/s^2), started 0.2 rad away
    // from the gate: caught without crossing it and then followed exactly.
    let w = std::f64::consts::TAU;
    let amp = 0.1;
    for lim in [joint(), soft_joint()] {
        for period_ms in [20u64, 10, 4, 1] {
            let t = period_ms as f64 * 1e-3;
            let mut x0 = [0.0; MAX_DOF];
            x0[0] = 1.4;
            let mut gate = Gate::new(JointLimits::uniform(1, lim), period_ms * 1_000_000, &x0);
            let mut chk = Checker::new(lim, t, 1.4);
            let mut cmd = Command::default();
            let (mut last_intervention, mut crossed) = (0.0, 0.0f64);
            let ticks = (3.0 / t) as usize;
            for k in 1..=ticks {
                let x = k as f64 * t;
                let p = 1.2 + amp * (w * x).sin();
                let sp = setpoint(p, amp * w * (w * x).cos(), -amp * w * w * (w * x).sin());
                if !gate.filter(&sp, &mut cmd).is_empty() {
                    last_intervention = x;
                }
                chk.push(cmd.pos_rad[0]);
                // Started above the proposal: never below it by more than rounding.
                crossed = crossed.max(p - cmd.pos_rad[0]);
            }
            eprintln!(
                "jerk {} T {period_ms} ms: rejoined after {last_intervention:.3} s, crossed {crossed:.2e}",
                lim.max_jerk_rad_s3
            );
            // The approach extrapolates the proposal at constant acceleration; with a
            // slow jerk its stop spans a good part of the sine's period, over which
            // that guess is off, so there a small crossing (a quarter of the
            // initial offset at most) is the price of a fast rejoin.
            let soft = lim.max_jerk_rad_s3 < 1000.0;
            let max_cross = if soft { 0.05 } else { 1e-9 };
            assert!(
                crossed <= max_cross,
                "T {period_ms} ms: crossed by {crossed}"
            );
            assert!(
                last_intervention <= if soft { 1.0 } else { 0.3 },
                "T {period_ms} ms: still intervening at {last_intervention} s"
            );
            let p = 1.2 + amp * (w * ticks as f64 * t).sin();
            assert!((cmd.pos_rad[0] - p).abs() < 1e-12);
        }
    }
}
