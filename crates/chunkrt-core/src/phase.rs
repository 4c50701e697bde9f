//! Which episode and phase (`[episodes]`) an observation was captured in and a chunk
//! computed for: the control loop plays only the current one's chunks.

/// The phase the run is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Phase {
    /// The arm is moved to the next episode's start pose (the reset planner plays).
    Reset = 0,
    /// The policy has authority.
    Running = 1,
    /// Every episode ran (or the run cannot go on): the run ends.
    Done = 2,
}

/// Which episode and phase an observation was captured in, and a chunk computed for:
/// the control loop plays only chunks of the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpisodeTag {
    /// The episode's index.
    pub index: u32,
    /// Its phase.
    pub phase: Phase,
}
