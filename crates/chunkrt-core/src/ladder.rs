//! Bookkeeping of the executor that is not trajectory math: the fallback ladder's modes
//! and mode events, the fixed-capacity mode-event queue, the chunk life-cycle counters,
//! the seam statistics and the seam blend weight.

use crate::time::MonoTime;

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
    /// The measured state entered a region the policy manifest's omission log excludes
    /// from its declared domain (a mechanism measured unclosed there).
    Excluded,
    /// A joint's I²t load reached `limits.thermal.withdraw_at`: the motor would overheat
    /// before the drive's own I²t limit if the policy kept pushing.
    Thermal,
    /// The backend reported an error.
    BackendError,
    /// The operator re-armed the executor.
    Rearmed,
    /// The runtime is stopping (duration over, SIGINT, SIGTERM).
    Shutdown,
    /// The drives were re-enabled after a fault; the executor holds where they are.
    DrivesRecovered,
    /// A drive left the bus and the backend could not bring it back: the run ends.
    DriveLost,
    /// The gate held a joint's command off the policy's proposal for too long: the
    /// executor's intent and what the drives are sent no longer agree.
    GateSaturated,
    /// A joint's measured position was further from its command than
    /// `limits.max_following_error_rad`: the arm is not following (blocked, a
    /// collision, a weak or failing drive).
    FollowingError,
    /// The margin probe's excursion guard: the probed joint was measured further than
    /// `inject.probe.max_excursion_rad` from the executor's unprobed setpoint (the
    /// loop ran away from the path the policy commands).
    ProbeExcursion,
    /// The enable (deadman) switch (`[ethercat.enable_input]`) is not held: the
    /// policy has authority only while an operator holds it.
    EnableReleased,
    /// An operator's `stop` on the command channel (`[operator] socket`): the policy
    /// holds off until `rearm`.
    OperatorHold,
    /// The wrist force/torque sensor measured |F| above `[force] tripwire_n` (or a
    /// reading that is not finite): the policy holds off until `rearm`.
    ForceTripwire,
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

/// Largest steps seen at seams.
///
/// A seam is every splice of a new chunk, whatever the mode it happens in. Its step
/// is, per joint, the difference at the seam tick's sample time between the output
/// with the new chunk spliced in and the output the old trajectory (playing chunk,
/// deceleration or hold) would have produced at that same time; the maxima over
/// joints and seams are kept. With blending on the step is zero by construction
/// (the blend starts exactly on the old output); with `blend_ns = 0` it is the jump
/// that the newest-wins switch makes.
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
    /// Seams that found the blend chain full (chunks arriving faster than one per
    /// `blend_ns / 14`) and blended in from the output state instead.
    pub blend_restarts: u64,
}

/// Capacity of the mode-event queue. Mode changes are rare (a handful per second
/// at worst); the runtime drains the queue every cycle.
pub const EVENT_CAPACITY: usize = 16;

/// Fixed-capacity FIFO of mode events; overflow drops the newest and is counted.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventQueue {
    buf: [Option<ModeEvent>; EVENT_CAPACITY],
    head: usize,
    len: usize,
    pub(crate) dropped: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            buf: [None; EVENT_CAPACITY],
            head: 0,
            len: 0,
            dropped: 0,
        }
    }
}

impl EventQueue {
    pub(crate) fn push(&mut self, ev: ModeEvent) {
        if self.len == EVENT_CAPACITY {
            self.dropped += 1;
            return;
        }
        self.buf[(self.head + self.len) % EVENT_CAPACITY] = Some(ev);
        self.len += 1;
    }

    pub(crate) fn pop(&mut self) -> Option<ModeEvent> {
        if self.len == 0 {
            return None;
        }
        let ev = self.buf[self.head].take();
        self.head = (self.head + 1) % EVENT_CAPACITY;
        self.len -= 1;
        ev
    }
}

/// What happened to the chunks offered to the executor.
///
/// Every offered chunk ends in exactly one of `rejected`, `superseded`, `discarded`
/// or `used`, or is still waiting for its start time (`pending`, 0 or 1):
///
/// `offered = rejected + accepted`, `accepted = used + superseded + discarded + pending`.
///
/// `expired` and `horizon_ended` are subsets of `used`: they count the used chunks
/// whose playback ended in the fallback ladder (rather than by handing over to a
/// newer chunk). A producer that counts its publications can add the chunks that
/// were overwritten in the lock-free handoff and never offered:
/// `published = offered + overwritten_in_handoff` (the runtime's side of the
/// reconciliation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkCounts {
    /// Chunks passed to `offer`.
    pub offered: u64,
    /// Chunks that passed the ingestion checks.
    pub accepted: u64,
    /// Chunks rejected whole at ingestion.
    pub rejected: u64,
    /// Accepted chunks that were played for at least one tick.
    pub used: u64,
    /// Accepted chunks replaced by a newer one before their first tick.
    pub superseded: u64,
    /// Accepted chunks dropped before their first tick because, when their start
    /// time came, they were no longer fresh or playback was not permitted
    /// (manual resume not re-armed, or computed before a forced fallback).
    pub discarded: u64,
    /// Used chunks that aged past `max_chunk_age` while playing (fallback entered).
    pub expired: u64,
    /// Used chunks whose horizon ran out while playing (fallback entered).
    pub horizon_ended: u64,
    /// Entries into the fallback ladder (`Playing -> Decelerating`), any reason.
    pub fallback_entries: u64,
    /// Chunks accepted but not yet started (0 or 1).
    pub pending: u64,
}

impl ChunkCounts {
    /// Whether the documented identities hold (used by tests and by the runtime's
    /// end-of-run sanity check).
    pub fn reconciles(&self) -> bool {
        self.offered == self.rejected + self.accepted
            && self.accepted == self.used + self.superseded + self.discarded + self.pending
            && self.expired + self.horizon_ended <= self.used
    }
}

impl SeamStats {
    /// Folds one seam's steps into the maxima.
    pub(crate) fn record(&mut self, pos: f64, vel: f64, acc: f64) {
        self.seams += 1;
        self.max_pos_step_rad = self.max_pos_step_rad.max(pos);
        self.max_vel_step_rad_s = self.max_vel_step_rad_s.max(vel);
        self.max_acc_step_rad_s2 = self.max_acc_step_rad_s2.max(acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_is_fifo_and_counts_overflow() {
        let mut q = EventQueue::default();
        for i in 0..EVENT_CAPACITY + 3 {
            q.push(ModeEvent {
                t: MonoTime(i as u64),
                from: Mode::Playing,
                to: Mode::Decelerating,
                reason: ModeChangeReason::ChunkExpired,
            });
        }
        assert_eq!(q.dropped, 3);
        for i in 0..EVENT_CAPACITY {
            assert_eq!(q.pop().map(|e| e.t), Some(MonoTime(i as u64)));
        }
        assert_eq!(q.pop(), None);
    }
}
