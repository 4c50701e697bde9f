//! One plant behind the whole chain: the drives' shafts moved together by a model of the
//! arm they sit in (coupled inertia, gravity, torque limits), instead of each drive's own
//! motor model.
//!
//! Each drive keeps its CiA 402 state machine, object dictionary and supervision; once
//! per process-data frame the network asks every drive what it wants of its shaft
//! ([`ShaftCommand`]), steps the plant over the time since the previous frame with all of
//! them, and hands each drive its shaft's measurement ([`ShaftState`]) before the drive
//! checks its following error and writes its inputs (0x6064, 0x606C, 0x6077).
//!
//! Positions and velocities are in the drive's counts: the plant owns the mapping from its
//! joints onto the drives' encoders (offset, direction, resolution), as the arm's
//! mechanics do.

/// What a drive asks of its shaft over one cycle.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShaftCommand {
    /// Operation enabled in CSP: follow the target, which moves from `from_counts` at the
    /// start of the cycle to `to_counts` at its end (the drive's own interpolation of
    /// the master's setpoints).
    Track {
        /// The target at the start of the cycle (the previous frame's).
        from_counts: f64,
        /// The target at the end of the cycle (this frame's).
        to_counts: f64,
    },
    /// Quick stop or fault reaction: the shaft ramps to rest on the drive's stop ramp.
    Stop,
    /// Power stage off: no torque (a holding brake, where the plant has one, holds).
    Off,
}

/// A shaft's measurement, as the drive's encoder and current loop give it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShaftState {
    /// Position (counts).
    pub pos_counts: f64,
    /// Velocity (counts/s).
    pub vel_counts_s: f64,
    /// The torque the drive applies, per mille of its rated torque (0x6077's unit).
    pub torque_per_mille: f64,
    /// The shaft stands still and the drive's stop ramp (if one runs) has ended: what
    /// ends a quick stop or a fault reaction.
    pub at_rest: bool,
}

/// The plant behind every drive of a chain.
pub trait ChainPlant: Send {
    /// The drives it moves: drive `i` of the chain is its shaft `i`.
    fn shafts(&self) -> usize;

    /// Shaft `i` as it is now (before the first step: at rest where the plant starts).
    fn shaft(&self, i: usize) -> ShaftState;

    /// Advances the plant by `dt_ns` under `commands` (one per shaft, in chain order).
    fn step(&mut self, dt_ns: u64, commands: &[ShaftCommand]);

    /// What the plant is, for a log line (e.g. the arm model and its digest).
    fn describe(&self) -> String;
}
