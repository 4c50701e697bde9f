//! Properties of the chunk spline and the seam blend: exact at the knots, C2 across
//! knots, C2 into the straight-line continuation, and a blend whose end joins the
//! new chunk to second order.

mod common;

use chunkrt_core::{
    Chunk, ChunkSpline, Executor, MonoTime, Pva, Setpoint, MAX_DOF, MAX_HORIZON, NS_PER_MS,
};
use common::*;
use proptest::prelude::*;

fn chunk(values: &[[f64; 4]], dt_ms: u64, dof: usize) -> Chunk {
    let mut c = Chunk {
        seq: 1,
        t_obs: MonoTime::from_ms(1_000),
        t_start: MonoTime::from_ms(1_000),
        dt_ns: dt_ms * NS_PER_MS,
        len: values.len() as u16,
        dof: dof as u16,
        ..Chunk::default()
    };
    for (i, row) in values.iter().enumerate() {
        c.pos_rad[i][..4].copy_from_slice(row);
    }
    c
}

proptest! {
    #[test]
    fn spline_is_exact_at_knots_and_c2_across_them(
        values in prop::collection::vec(prop::array::uniform4(-2.0f64..2.0), 2..MAX_HORIZON),
        dt_ms in 5u64..100,
        dof in 1usize..=4,
    ) {
        let c = chunk(&values, dt_ms, dof);
        let s = ChunkSpline::build(&c);
        let h = dt_ms as f64 * 1e-3;
        let (mut p, mut l, mut r) = (Pva::default(), Pva::default(), Pva::default());
        // Acceleration is piecewise linear: its extremes sit at the knots, and the
        // jerk is bounded by the steepest segment. Both bound the finite differences.
        let mut amax: f64 = 0.0;
        let mut jmax: f64 = 0.0;
        let mut prev_acc = [0.0; MAX_DOF];
        for (i, row) in values.iter().enumerate() {
            s.eval(c.t_of(i), &mut p);
            for j in 0..dof {
                prop_assert!((p.pos_rad[j] - row[j]).abs() < 1e-9, "knot {} joint {}", i, j);
                amax = amax.max(p.acc_rad_s2[j].abs());
                if i > 0 {
                    jmax = jmax.max((p.acc_rad_s2[j] - prev_acc[j]).abs() / h);
                }
                prev_acc[j] = p.acc_rad_s2[j];
            }
        }
        let delta = 1e-9; // 1 ns either side
        for i in 0..values.len() {
            let t = c.t_of(i);
            s.eval(t.add_signed_ns(-1), &mut l);
            s.eval(t.add_ns(1), &mut r);
            for j in 0..dof {
                let vmax = l.vel_rad_s[j].abs().max(r.vel_rad_s[j].abs());
                prop_assert!((r.pos_rad[j] - l.pos_rad[j]).abs() <= 2.0 * delta * vmax * 1.01 + 1e-12);
                prop_assert!((r.vel_rad_s[j] - l.vel_rad_s[j]).abs() <= 2.0 * delta * amax * 1.01 + 1e-9);
                prop_assert!(
                    (r.acc_rad_s2[j] - l.acc_rad_s2[j]).abs() <= 2.0 * delta * jmax * 1.01 + 1e-6 * (1.0 + amax),
                    "acc jump at knot {}: {} vs {}", i, l.acc_rad_s2[j], r.acc_rad_s2[j]
                );
            }
        }
        // The ends have zero acceleration (natural spline): the line beyond is C2.
        s.eval(c.t_end(), &mut p);
        for j in 0..dof {
            prop_assert!(p.acc_rad_s2[j].abs() <= 1e-6 * (1.0 + amax));
        }
    }

    #[test]
    fn blend_joins_the_new_chunk_to_second_order(
        old_pos in -1.0f64..1.0,
        old_vel in -1.0f64..1.0,
        new_pos in -1.0f64..1.0,
        new_vel in -1.0f64..1.0,
        blend_ms in 5u64..80,
    ) {
        let mut clk = Clock::start();
        let mut cfg = config(1);
        cfg.blend_ns = blend_ms * NS_PER_MS;
        let mut e = Executor::new(cfg, limits(1), &[0.0; MAX_DOF], clk.now());
        let t0 = clk.now();
        let line = |p0: f64, v: f64| move |t: f64, _| p0 + v * (t - t0.as_secs_f64());
        e.offer(&chunk_from(1, t0, t0, 20, 30, 1, line(old_pos, old_vel)), t0).unwrap();
        let mut sp = Setpoint::default();
        e.tick(t0, &mut sp);
        // Let the first blend (from rest) finish, then splice the second chunk.
        let ts = clk.advance_ms(100);
        e.tick(ts, &mut sp);
        e.offer(&chunk_from(2, ts, ts, 20, 30, 1, line(new_pos, new_vel)), ts).unwrap();
        e.tick(ts, &mut sp);
        // At the seam: exactly the old trajectory.
        let old_at = |t: MonoTime| old_pos + old_vel * (t.as_secs_f64() - t0.as_secs_f64());
        prop_assert!((sp.pos_rad[0] - old_at(ts)).abs() < 1e-9);
        prop_assert!((sp.vel_rad_s[0] - old_vel).abs() < 1e-9);
        prop_assert!(sp.acc_rad_s2[0].abs() < 1e-9);
        // Just before the blend ends: within O(delta^3, delta^2, delta) of the new one.
        let new_at = |t: MonoTime| new_pos + new_vel * (t.as_secs_f64() - t0.as_secs_f64());
        let end = ts.add_ns(blend_ms * NS_PER_MS);
        e.tick(end.add_signed_ns(-1), &mut sp);
        let dp = (old_at(end) - new_at(end)).abs() + (old_vel - new_vel).abs();
        let tb = blend_ms as f64 * 1e-3;
        prop_assert!((sp.pos_rad[0] - new_at(end)).abs() < 1e-9);
        prop_assert!((sp.vel_rad_s[0] - new_vel).abs() < 1e-9);
        prop_assert!(sp.acc_rad_s2[0].abs() < 100.0 * 1e-9 / tb.powi(3) * dp + 1e-9);
        e.tick(end, &mut sp);
        prop_assert!((sp.pos_rad[0] - new_at(end)).abs() < 1e-12);
        prop_assert!(sp.acc_rad_s2[0].abs() < 1e-9);
    }
}
