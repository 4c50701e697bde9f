//! The chunk executor: splice, seam blend, freshness, fallback ladder.
//! (API contract; implementation pending.)

use crate::chunk::{Chunk, JointVec};
use crate::limits::JointLimits;
use crate::time::MonoTime;

/// Whether fresh chunks bring the arm back from `Holding` / `SafeStop` on their own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Resume {
    /// Fresh chunks resume playback.
    #[default]
    Auto,
    /// Playback resumes only after `Executor::rearm`.
    Manual,
}

/// Executor settings (validated by chunkrt-config).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ExecutorConfig {
    /// Number of joints.
    pub dof: usize,
    /// A chunk older than this (now - t_obs) is not played.
    pub max_chunk_age_ns: u64,
    /// Length of the seam blend (0: newest chunk wins at once).
    pub blend_ns: u64,
    /// The trajectory is sampled this far ahead of `now` (drive + bus delay).
    pub lookahead_ns: u64,
    /// Without a fresh chunk for this long the ladder goes to `SafeStop`.
    pub safe_stop_after_ns: u64,
    /// Resume policy.
    pub resume: Resume,
    /// Accepted range of a chunk's `dt`.
    pub dt_min_ns: u64,
    /// Accepted range of a chunk's `dt`.
    pub dt_max_ns: u64,
    /// Smallest accepted chunk length.
    pub min_len: usize,
    /// A chunk whose `t_start` is further than this from `now` is rejected.
    pub max_time_offset_ns: u64,
}

/// Where the ladder stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Playing a fresh chunk.
    Playing,
    /// Jerk-limited stop from the current state.
    Decelerating,
    /// At rest, holding the reached position.
    Holding,
    /// Held too long without a fresh chunk: the backend is asked for a quick stop.
    SafeStop,
}

/// Why the mode changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeChangeReason {
    /// A fresh chunk arrived.
    FreshChunk,
    /// The playing chunk became older than `max_chunk_age`.
    ChunkExpired,
    /// The playing chunk's horizon ran out.
    HorizonEnd,
    /// The deceleration reached rest.
    AtRest,
    /// No fresh chunk for `safe_stop_after`.
    SafeStopTimeout,
    /// The observation left the declared operating domain.
    OutOfDomain,
    /// The backend reported an error.
    BackendError,
    /// The operator re-armed the executor.
    Rearmed,
}

/// A timestamped mode change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModeEvent {
    /// When it happened.
    pub t: MonoTime,
    /// Mode left.
    pub from: Mode,
    /// Mode entered.
    pub to: Mode,
    /// Why.
    pub reason: ModeChangeReason,
}

/// Why a chunk was rejected at ingestion.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RejectReason {
    /// A setpoint is NaN or infinite.
    NonFinite {
        /// Setpoint index.
        row: u16,
        /// Joint index.
        joint: u16,
    },
    /// Wrong number of joints.
    WrongDof {
        /// In the chunk.
        got: u16,
        /// Configured.
        expected: u16,
    },
    /// Too few or too many setpoints.
    WrongLength {
        /// In the chunk.
        got: u16,
    },
    /// `seq` not greater than the last accepted one.
    StaleSeq {
        /// In the chunk.
        seq: u64,
        /// Last accepted.
        last: u64,
    },
    /// `dt` outside the accepted range.
    DtOutOfRange {
        /// In the chunk.
        dt_ns: u64,
    },
    /// `t_start` absurdly far from now.
    StartTooFar {
        /// t_start - now.
        offset_ns: i64,
    },
    /// Older than `max_chunk_age` on arrival.
    Expired {
        /// Age at arrival.
        age_ns: u64,
    },
}

/// The executor's output for one tick (before the gate).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Setpoint {
    /// Number of joints.
    pub dof: u16,
    /// Positions.
    pub pos_rad: JointVec,
    /// Velocities.
    pub vel_rad_s: JointVec,
    /// Accelerations.
    pub acc_rad_s2: JointVec,
    /// Chunk the setpoint comes from (0: fallback trajectory).
    pub chunk_seq: u64,
}

/// Largest steps seen at seams.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct SeamStats {
    /// Number of seams (chunk replacements while playing).
    pub seams: u64,
    /// Largest position step.
    pub max_pos_step_rad: f64,
    /// Largest velocity step.
    pub max_vel_step_rad_s: f64,
    /// Largest acceleration step.
    pub max_acc_step_rad_s2: f64,
}

/// Plays chunks (API contract; implementation pending).
pub struct Executor {
    _private: (),
}

impl Executor {
    /// A new executor at rest at `initial_pos` (mode `Holding`).
    pub fn new(
        _cfg: ExecutorConfig,
        _limits: JointLimits,
        _initial_pos: &JointVec,
        _now: MonoTime,
    ) -> Self {
        todo!("issue 3")
    }

    /// Ingests a chunk: validates it and splices it in, or rejects it whole.
    pub fn offer(&mut self, _chunk: &Chunk, _now: MonoTime) -> Result<(), RejectReason> {
        todo!("issue 3")
    }

    /// Advances to `now` and writes the setpoint to command.
    pub fn tick(&mut self, _now: MonoTime, _out: &mut Setpoint) {
        todo!("issue 3")
    }

    /// Takes authority away from the policy (out of domain, backend error).
    pub fn force_fallback(&mut self, _now: MonoTime, _reason: ModeChangeReason) {
        todo!("issue 3")
    }

    /// Re-arms after `SafeStop` when `resume = manual`.
    pub fn rearm(&mut self, _now: MonoTime) {
        todo!("issue 3")
    }

    /// Current mode.
    pub fn mode(&self) -> Mode {
        todo!("issue 3")
    }

    /// Takes the oldest pending mode-change event.
    pub fn pop_event(&mut self) -> Option<ModeEvent> {
        todo!("issue 3")
    }

    /// Seam statistics so far.
    pub fn seam_stats(&self) -> SeamStats {
        todo!("issue 3")
    }
}
