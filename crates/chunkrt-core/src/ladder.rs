//! Bookkeeping of the executor that is not trajectory math: the fixed-capacity
//! mode-event queue, the chunk life-cycle counters and the seam blend weight.

use crate::executor::{ModeEvent, SeamStats};

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
    use crate::executor::{Mode, ModeChangeReason};
    use crate::time::MonoTime;

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
