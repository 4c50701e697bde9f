//! Where a chunk's setpoints may lie, checked on the inference thread before the chunk
//! is published: a chunk that is no trajectory the arm could follow (1e30 rad from a
//! policy server gone wrong, a local model's output decoded with the wrong scale) is
//! refused whole there, counted, and never offered to the executor.
//!
//! Every policy source passes here (ONNX in process, a policy server, the scripted and
//! servo policies, the reset planner). The bound per joint is the position limit widened
//! by the permission gate's margin (the gate clamps a setpoint in the margin anyway;
//! past the limit and its margin again a setpoint is not a command but a fault),
//! narrowed to the configuration's `[domain]` box where one is declared (the support
//! monitor takes authority as soon as the arm leaves it). A NaN or infinite setpoint is
//! left to the executor, which refuses it by its own rule (`NonFinite`).
//!
//! Only the setpoints the executor could play are judged: those due by the time the
//! chunk expires (`t_obs + max_chunk_age + lookahead`: no later setpoint is ever
//! sampled, the fallback ladder takes over at expiry), and the one after them (the
//! spline between them reaches toward it). A long horizon whose tail strays a little
//! past a limit is the gate's to clamp should it ever come; a setpoint in reach that
//! leaves the arm's range, or 1e30 rad anywhere in reach, is not.

use chunkrt_core::{Chunk, DomainBox, JointLimits, JointVec, MAX_DOF};

/// The range each joint's setpoints must lie in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SetpointBounds {
    dof: usize,
    lo_rad: JointVec,
    hi_rad: JointVec,
    /// How long after its observation a chunk can still be played (ns).
    playable_ns: u64,
}

/// The first setpoint of a chunk outside its bounds (the inference record's type: it is
/// recorded as it is found).
pub use chunkrt_telemetry::OutOfBounds;

impl SetpointBounds {
    /// The position limits of `limits`, each widened by its margin, within `domain`'s
    /// box where there is one, for the setpoints due within `playable_ns` of the
    /// chunk's observation.
    pub fn new(
        limits: &JointLimits,
        domain: Option<&DomainBox>,
        playable_ns: u64,
    ) -> SetpointBounds {
        let dof = limits.dof.min(MAX_DOF);
        let mut b = SetpointBounds {
            dof,
            lo_rad: [f64::NEG_INFINITY; MAX_DOF],
            hi_rad: [f64::INFINITY; MAX_DOF],
            playable_ns,
        };
        for j in 0..dof {
            let l = &limits.joint[j];
            b.lo_rad[j] = l.pos_min_rad - l.pos_margin_rad.max(0.0);
            b.hi_rad[j] = l.pos_max_rad + l.pos_margin_rad.max(0.0);
            if let Some(d) = domain.filter(|d| j < d.dof) {
                b.lo_rad[j] = b.lo_rad[j].max(d.lo_rad[j]);
                b.hi_rad[j] = b.hi_rad[j].min(d.hi_rad[j]);
            }
        }
        b
    }

    /// The bounds of a run of `cfg`: its `[limits]` and `[domain]`, its chunks
    /// playable until `executor.max_chunk_age_ms` plus `lookahead_ms`.
    pub fn of(cfg: &chunkrt_config::Config) -> SetpointBounds {
        let e = cfg.executor_config();
        SetpointBounds::new(
            &cfg.joint_limits(),
            cfg.domain_box().as_ref(),
            e.max_chunk_age_ns.saturating_add(e.lookahead_ns),
        )
    }

    /// How many of `c`'s setpoints could be played: those due by its expiry, and the
    /// one after them.
    fn playable_rows(&self, c: &Chunk) -> usize {
        let len = (c.len as usize).min(c.pos_rad.len());
        let until = c.t_obs.add_ns(self.playable_ns);
        let due = until.diff_ns(c.t_start).max(0) as u64;
        let rows = (due / c.dt_ns.max(1)).saturating_add(2);
        len.min(usize::try_from(rows).unwrap_or(usize::MAX))
    }

    /// The first finite setpoint of `c` that could be played and lies outside the
    /// bounds (row by row), if any.
    pub fn first_outside(&self, c: &Chunk) -> Option<OutOfBounds> {
        let dof = self.dof.min(c.dof as usize);
        let len = self.playable_rows(c);
        for (i, row) in c.pos_rad[..len].iter().enumerate() {
            for (j, &v) in row.iter().enumerate().take(dof) {
                if v.is_finite() && !(self.lo_rad[j]..=self.hi_rad[j]).contains(&v) {
                    return Some(OutOfBounds {
                        row: i as u16,
                        joint: j as u16,
                        value_rad: v,
                        lo_rad: self.lo_rad[j],
                        hi_rad: self.hi_rad[j],
                    });
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chunkrt_core::JointLimit;

    const MS: u64 = 1_000_000;

    /// A chunk of `rows` 20 ms apart, observed at 1 s and starting then.
    fn chunk(rows: &[[f64; 2]]) -> Chunk {
        let t = chunkrt_core::MonoTime::from_ms(1000);
        let mut c = Chunk {
            dof: 2,
            len: rows.len() as u16,
            dt_ns: 20 * MS,
            t_obs: t,
            t_start: t,
            ..Chunk::default()
        };
        for (i, r) in rows.iter().enumerate() {
            c.pos_rad[i][..2].copy_from_slice(r);
        }
        c
    }

    #[test]
    fn a_setpoint_past_a_limit_and_its_margin_is_found_nan_is_left_to_the_executor() {
        let limit = JointLimit {
            pos_min_rad: -1.0,
            pos_max_rad: 1.0,
            pos_margin_rad: 0.1,
            ..JointLimit::default()
        };
        let b = SetpointBounds::new(&JointLimits::uniform(2, limit), None, 200 * MS);
        // Inside the margin: the gate's to clamp, not a fault.
        assert_eq!(b.first_outside(&chunk(&[[1.05, -1.1], [0.0, 0.0]])), None);
        let far = b.first_outside(&chunk(&[[0.0, 0.0], [0.0, 1e30]])).unwrap();
        assert_eq!((far.row, far.joint, far.value_rad), (1, 1, 1e30));
        assert_eq!((far.lo_rad, far.hi_rad), (-1.1, 1.1));
        assert!(b
            .first_outside(&chunk(&[[-1.2, 0.0]]))
            .is_some_and(|o| o.joint == 0));
        // Rows past the chunk's length are not its setpoints.
        let mut c = chunk(&[[0.0, 0.0]]);
        c.pos_rad[1][0] = 5.0;
        assert_eq!(b.first_outside(&c), None);
        assert_eq!(b.first_outside(&chunk(&[[f64::NAN, f64::INFINITY]])), None);
        // Within a declared domain box.
        let mut d = DomainBox {
            dof: 2,
            lo_rad: [f64::NEG_INFINITY; MAX_DOF],
            hi_rad: [f64::INFINITY; MAX_DOF],
        };
        d.hi_rad[1] = 0.5;
        let b = SetpointBounds::new(&JointLimits::uniform(2, limit), Some(&d), 200 * MS);
        let o = b.first_outside(&chunk(&[[0.0, 0.6]])).unwrap();
        assert_eq!((o.joint, o.hi_rad), (1, 0.5));
    }

    #[test]
    fn only_the_setpoints_due_before_the_chunk_expires_and_the_next_are_judged() {
        let b = SetpointBounds::new(
            &JointLimits::uniform(2, JointLimit::default()),
            None,
            200 * MS,
        );
        let lim = JointLimit::default().pos_max_rad + 1.0;
        // Due by expiry: rows 0..=10 (200 ms at 20 ms), and row 11 after them.
        for (row, refused) in [(0, true), (10, true), (11, true), (12, false), (31, false)] {
            let mut rows = vec![[0.0, 0.0]; 32];
            rows[row][1] = lim;
            let found = b.first_outside(&chunk(&rows));
            assert_eq!(found.is_some(), refused, "row {row}: {found:?}");
        }
        // A chunk observed long before it starts has less left to play: its first
        // setpoint and the one after are judged still.
        let mut rows = vec![[0.0, 0.0]; 32];
        rows[1][0] = 1e30;
        rows[2][0] = 1e30;
        let mut c = chunk(&rows);
        c.t_obs = c.t_start.add_signed_ns(-(400 * MS as i64));
        assert_eq!(b.first_outside(&c).map(|o| o.row), Some(1));
        c.pos_rad[1][0] = 0.0;
        assert_eq!(b.first_outside(&c), None, "row 2 comes after expiry");
    }
}
