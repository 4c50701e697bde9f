//! Action chunks: H future setpoints on a fixed time grid, in a fixed-capacity array.

use crate::time::MonoTime;

/// Most joints a chunk, command or observation can carry.
pub const MAX_DOF: usize = 16;
/// Most setpoints a chunk can carry.
pub const MAX_HORIZON: usize = 64;

/// One value per joint; only the first `dof` entries are meaningful.
pub type JointVec = [f64; MAX_DOF];

/// An action chunk: setpoint `i` is the commanded joint position at `t_start + i * dt_ns`.
///
/// No heap: a chunk is a plain value that moves through the lock-free buffer by copy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chunk {
    /// Publication sequence number, strictly increasing per producer (starts at 1).
    pub seq: u64,
    /// Capture time of the observation the chunk was computed from.
    pub t_obs: MonoTime,
    /// Time of setpoint 0.
    pub t_start: MonoTime,
    /// Time the inference thread published the chunk (for handoff latency).
    pub t_publish: MonoTime,
    /// Setpoint period in nanoseconds (20 ms by default).
    pub dt_ns: u64,
    /// Number of setpoints (H).
    pub len: u16,
    /// Number of joints.
    pub dof: u16,
    /// Sampler steps the policy used for this chunk (0 for analytic policies).
    pub sampler_steps: u16,
    /// The observation it was computed from lay outside the policy's declared
    /// operating domain: the executor refuses it and the policy loses authority.
    pub out_of_domain: bool,
    /// The control cycle the loop takes it up in, not before (0: the first cycle
    /// after it arrives). Set only where a run replays a recorded one
    /// (`policy.draw_schedule`), so each chunk starts playing in the cycle it did.
    pub play_at_cycle: u64,
    /// With `[episodes]`: the episode and phase of the observation it was computed
    /// from (the control loop plays only the current one's).
    pub episode: Option<crate::phase::EpisodeTag>,
    /// Joint position setpoints in radians, `pos_rad[i][j]` for setpoint `i`, joint `j`.
    pub pos_rad: [JointVec; MAX_HORIZON],
}

impl Default for Chunk {
    fn default() -> Self {
        Chunk {
            seq: 0,
            t_obs: MonoTime::ZERO,
            t_start: MonoTime::ZERO,
            t_publish: MonoTime::ZERO,
            dt_ns: 0,
            len: 0,
            dof: 0,
            sampler_steps: 0,
            out_of_domain: false,
            play_at_cycle: 0,
            episode: None,
            pos_rad: [[0.0; MAX_DOF]; MAX_HORIZON],
        }
    }
}

impl Chunk {
    /// Time of setpoint `i`.
    pub fn t_of(&self, i: usize) -> MonoTime {
        self.t_start.add_ns(self.dt_ns.saturating_mul(i as u64))
    }

    /// Time of the last setpoint (the end of the chunk's horizon).
    pub fn t_end(&self) -> MonoTime {
        self.t_of((self.len as usize).saturating_sub(1))
    }

    /// The setpoints actually used, `len` rows.
    pub fn rows(&self) -> &[JointVec] {
        &self.pos_rad[..(self.len as usize).min(MAX_HORIZON)]
    }

    /// Whether every used value is finite.
    pub fn all_finite(&self) -> bool {
        let dof = (self.dof as usize).min(MAX_DOF);
        self.rows()
            .iter()
            .all(|row| row[..dof].iter().all(|v| v.is_finite()))
    }

    /// Age of the chunk at `now`: time since the observation it was computed from.
    pub fn age_ns(&self, now: MonoTime) -> u64 {
        now.saturating_since(self.t_obs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setpoint_times_follow_the_grid() {
        let c = Chunk {
            t_start: MonoTime::from_ms(100),
            dt_ns: 20_000_000,
            len: 10,
            dof: 2,
            ..Chunk::default()
        };
        assert_eq!(c.t_of(3), MonoTime::from_ms(160));
        assert_eq!(c.t_end(), MonoTime::from_ms(280));
        assert!(c.all_finite());
    }
}
