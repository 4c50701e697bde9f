//! The episode stage of the control cycle (`[episodes]`): the episode state machine fed
//! every cycle's measurement and every withdrawal of authority; an ended episode's
//! summary to telemetry; the residual rolled back when it breaks its budget. No
//! allocation, no lock.

use super::ControlLoop;
use chunkrt_core::{
    Budget, Constraint, CycleFacts, EpisodePlan, EpisodeSummary, EpisodeTag, Episodes,
    ModeChangeReason, MonoTime, Phase, PERMISSION_BITS,
};
use chunkrt_telemetry::EventRecord;

/// The residual gate's bits.
const RESIDUAL_BITS: u32 = Constraint::ResidualBound.bit()
    | Constraint::ResidualRate.bit()
    | Constraint::ResidualRegion.bit();

impl ControlLoop {
    /// Runs the episodes of `plan` from the first cycle on (none: one continuous run);
    /// the residual's `budget` is judged at each episode's end.
    pub fn with_episodes(mut self, plan: Option<EpisodePlan>, budget: Budget) -> Self {
        let residual = self.residual.is_some();
        let now = (self.clock)();
        self.episodes = plan.map(|p| Box::new(Episodes::new(p, budget, now, residual)));
        self
    }

    /// The episode and phase now (none without episodes).
    pub fn episode_tag(&self) -> Option<EpisodeTag> {
        self.episodes.as_deref().map(|e| EpisodeTag {
            index: e.index(),
            phase: e.phase(),
        })
    }

    /// Every episode has run (or a reset could not finish): the run ends.
    pub fn episodes_done(&self) -> bool {
        self.episodes
            .as_deref()
            .is_some_and(|e| e.phase() == Phase::Done)
    }

    /// Chunks of another episode or phase, not offered.
    pub fn chunks_other_episode(&self) -> u64 {
        self.chunks_other_episode
    }

    /// Whether the policy (and its residual) may have authority now: always without
    /// episodes; in a running episode with them (a reset is the reset planner's).
    #[inline]
    pub(super) fn policy_runs(&self) -> bool {
        self.episodes
            .as_deref()
            .is_none_or(|e| e.phase() == Phase::Running)
    }

    /// The episode stage: this cycle's measurement and gate bits to the episodes.
    #[inline]
    pub(super) fn observe_episode(
        &mut self,
        deadline: MonoTime,
        mask: chunkrt_core::GateMask,
        track: f64,
    ) {
        let Some(e) = self.episodes.as_deref_mut() else {
            return;
        };
        let summary = e.observe(&CycleFacts {
            now: deadline,
            pos_rad: &self.fb.pos_rad,
            vel_rad_s: &self.fb.vel_rad_s,
            gate_mask: mask.0,
            permission_bits: PERMISSION_BITS,
            residual_bits: RESIDUAL_BITS,
            track_err_rad: track,
        });
        self.episode_ended(summary);
    }

    /// A withdrawal of authority (a mode event out of `Playing`).
    #[inline]
    pub(super) fn episode_withdrawn(&mut self, t: MonoTime, reason: ModeChangeReason) {
        let summary = self
            .episodes
            .as_deref_mut()
            .and_then(|e| e.withdrawn(t, reason));
        self.episode_ended(summary);
    }

    /// An operator stopped the run: a running episode ends as an operator stop.
    pub(super) fn end_episode_by_operator(&mut self, now: MonoTime) {
        let summary = self
            .episodes
            .as_deref_mut()
            .and_then(|e| e.operator_stop(now));
        self.episode_ended(summary);
    }

    /// The run's stop began: a running episode ends, none follows.
    pub(super) fn end_episodes(&mut self, now: MonoTime) {
        let summary = self.episodes.as_deref_mut().and_then(|e| e.end_of_run(now));
        self.episode_ended(summary);
    }

    /// An ended episode to telemetry; a broken budget rolls the residual back.
    #[inline]
    fn episode_ended(&mut self, summary: Option<EpisodeSummary>) {
        let Some(s) = summary else {
            return;
        };
        if s.breach.is_some() {
            if let Some(r) = self.residual.as_deref_mut() {
                r.withdraw();
            }
        }
        self.events_out.push(EventRecord::Episode(s));
    }
}
