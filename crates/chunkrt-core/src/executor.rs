//! The chunk executor: splice, seam blend, freshness, fallback ladder.
//!
//! Pure code: every method takes `now`; nothing allocates after `new`.
//!
//! * **Time alignment.** Setpoints are tied to absolute times. Each tick samples the
//!   trajectory at `now + lookahead`; a late chunk is simply evaluated at that time,
//!   so the setpoints that are already past are skipped by time.
//! * **Splicing.** An accepted chunk waits (at most one, newest wins) until the
//!   sample time reaches its `t_start`, then it is spliced in at the next tick. The
//!   output crosses from the old trajectory to the new one over `blend_ns` with a
//!   quintic smoothstep weight `s`: `out = old + s (new - old)`, with the chain rule
//!   applied to velocity and acceleration, so the output is C2 across the seam. While
//!   playing, the "old trajectory" is exactly what was being played, blends still in
//!   progress included (a chain of blends, [`crate::blend`]), so blends may be longer
//!   than the interval between chunks. A chunk arriving while decelerating or holding
//!   blends in from the output's state at the seam continued as a constant-acceleration
//!   motion (velocity and acceleration first clipped to the joint limits, so a
//!   transient excess is not continued). `blend_ns = 0` switches blending off: the
//!   newest chunk wins at once (the comparison mode).
//! * **Freshness.** The playing chunk is fresh while `now - t_obs <= max_chunk_age`
//!   and the sample time is inside its horizon.
//! * **Fallback ladder.** `Playing -> Decelerating` (jerk-limited stop planned from
//!   the state of the last command that left the gate, reported by the runtime with
//!   [`Executor::note_command`]; without it, from the executor's last output) `->
//!   Holding` (once the commands are at rest, holding where they are) `-> SafeStop`
//!   (after `safe_stop_after` without a fresh chunk, counted from the moment the
//!   ladder was entered). Every mode change is queued as a timestamped [`ModeEvent`].
//! * **Resume.** A fresh chunk is always blended in while `Decelerating`. From
//!   `Holding`/`SafeStop`: with `Resume::Auto` a fresh chunk resumes playback; with
//!   `Resume::Manual` reaching `Holding` through the ladder disarms the executor and
//!   only [`Executor::rearm`] re-arms it (a new executor starts armed, so the first
//!   chunk after start-up plays). After [`Executor::force_fallback`] only chunks
//!   computed from an observation captured *after* the forced fallback may take
//!   authority back, whatever the resume policy.

use crate::blend::{BlendChain, SLOTS};
use crate::chunk::{Chunk, JointVec, MAX_DOF, MAX_HORIZON};
use crate::ladder::EventQueue;
use crate::limits::JointLimits;
use crate::spline::{ChunkSpline, Pva};
use crate::stop::StopProfile;
use crate::time::MonoTime;

pub use crate::ladder::{
    ChunkCounts, Mode, ModeChangeReason, ModeEvent, SeamStats, EVENT_CAPACITY,
};

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
    /// How a seam crosses to the new chunk over `blend_ns`.
    pub seam: SeamMode,
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
    /// `SeamMode::Ensemble`: chunk `k` (from the oldest) weighs `exp(-coeff * k)`.
    pub ensemble_coeff: f64,
    /// `SeamMode::Ensemble`: most chunks averaged at full weight.
    pub ensemble_chunks: usize,
}

/// How the executor crosses from the trajectory being played to a new chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SeamMode {
    /// Crossfade (a chain of quintic blends): the output moves from the old trajectory
    /// onto the new chunk over the blend, averaging the two meanwhile. For policies whose
    /// consecutive chunks disagree (fresh noise, positions only): it smooths their
    /// disagreement out.
    #[default]
    Crossfade,
    /// Transition: the new chunk at once, plus the output's offset from it at the seam
    /// (position, velocity, acceleration) faded out by a quintic Hermite polynomial.
    /// For policies that continue the trajectory being played (observing the plan):
    /// adds only what the seam differs by, not what the chunks' intents differ by later.
    Transition,
    /// Temporal ensembling (ACT's): the weighted mean of the recent chunks, chunk `k`
    /// from the oldest weighted `exp(-ensemble_coeff * k)`, each fading in and out over
    /// the blend (see `blend`). For chunk models that predict the same future again at
    /// every call: it averages their predictions for each instant.
    Ensemble,
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
    /// The whole horizon already lies before the sample time (`now + lookahead`).
    HorizonPassed {
        /// Sample time - t_end.
        late_ns: u64,
    },
    /// `Resume::Manual` and the executor is waiting for `rearm`.
    NotArmed,
    /// Computed from an observation captured before the last forced fallback.
    PredatesFallback {
        /// Last forced fallback - t_obs.
        by_ns: u64,
    },
    /// Computed from an observation outside the policy's declared operating domain.
    OutOfDomain,
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
    /// The policy has lost authority and the arm is being stopped: the gate brings
    /// every joint to rest from the commanded state as fast as the limits allow (in
    /// its own discrete model) and the positions above are only the plan's preview.
    pub stop: bool,
}

/// Identity and timing of a chunk, for telemetry (handoff latency, chunk age).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ChunkInfo {
    /// Sequence number.
    pub seq: u64,
    /// Capture time of its observation.
    pub t_obs: MonoTime,
    /// Time of its setpoint 0.
    pub t_start: MonoTime,
    /// When the inference thread published it.
    pub t_publish: MonoTime,
}

impl ChunkInfo {
    fn of(s: &ChunkSpline) -> Self {
        ChunkInfo {
            seq: s.seq,
            t_obs: s.t_obs,
            t_start: s.t_start,
            t_publish: s.t_publish,
        }
    }
}

/// Plays chunks: splice, seam blend, freshness, fallback ladder. See the module docs.
pub struct Executor {
    cfg: ExecutorConfig,
    limits: JointLimits,
    mode: Mode,
    armed: bool,
    /// Spline slots (`SLOTS`, allocated in `new`); roles rotate by index so a splice
    /// never copies a spline.
    splines: Box<[ChunkSpline]>,
    /// Slot of the newest spliced chunk (the one whose freshness counts).
    cur: usize,
    pending: usize,
    pending_valid: bool,
    /// Whether `splines[cur]` has ever been spliced in.
    cur_valid: bool,
    /// What the output is made of while playing (chunks still blending in).
    chain: BlendChain,
    stop: StopProfile,
    stop_t0: MonoTime,
    hold_pos: JointVec,
    /// The state a fallback starts from, and its sample time: the last command that
    /// left the gate when the runtime reports it ([`Executor::note_command`]),
    /// otherwise the executor's own last output.
    last: Pva,
    last_ts: MonoTime,
    /// Whether `last` is the gate's command (`note_command` was called).
    cmd_known: bool,
    /// When the ladder was last entered (or the executor created): safe-stop timer.
    t_fallback: MonoTime,
    /// Last forced fallback (`MonoTime::ZERO`: never).
    last_forced: MonoTime,
    last_seq: u64,
    first_use: Option<ChunkInfo>,
    events: EventQueue,
    seam: SeamStats,
    counts: ChunkCounts,
}

impl Executor {
    /// A new executor at rest at `initial_pos` (mode `Holding`, armed).
    ///
    /// `cfg.dof` is clamped to `MAX_DOF` (the config layer rejects larger values).
    pub fn new(
        cfg: ExecutorConfig,
        limits: JointLimits,
        initial_pos: &JointVec,
        now: MonoTime,
    ) -> Self {
        let mut cfg = cfg;
        cfg.dof = cfg.dof.min(MAX_DOF);
        let last = Pva::at_rest(initial_pos);
        Executor {
            cfg,
            limits,
            mode: Mode::Holding,
            armed: true,
            splines: (0..SLOTS).map(|_| ChunkSpline::default()).collect(),
            cur: 0,
            pending: 1,
            pending_valid: false,
            cur_valid: false,
            chain: {
                let mut c = BlendChain::new(cfg.blend_ns);
                c.set_ensemble(cfg.ensemble_coeff, cfg.ensemble_chunks);
                c
            },
            stop: StopProfile::default(),
            stop_t0: MonoTime::ZERO,
            hold_pos: *initial_pos,
            last,
            last_ts: now.add_ns(cfg.lookahead_ns),
            cmd_known: false,
            t_fallback: now,
            last_forced: MonoTime::ZERO,
            last_seq: 0,
            first_use: None,
            events: EventQueue::default(),
            seam: SeamStats::default(),
            counts: ChunkCounts::default(),
        }
    }

    /// Checks a chunk against the ingestion rules; `Ok` means it may be spliced.
    fn validate(&self, c: &Chunk, now: MonoTime) -> Result<(), RejectReason> {
        let cfg = &self.cfg;
        if c.out_of_domain {
            return Err(RejectReason::OutOfDomain);
        }
        if c.dof as usize != cfg.dof {
            return Err(RejectReason::WrongDof {
                got: c.dof,
                expected: cfg.dof as u16,
            });
        }
        let len = c.len as usize;
        if len < cfg.min_len.max(1) || len > MAX_HORIZON {
            return Err(RejectReason::WrongLength { got: c.len });
        }
        for (i, row) in c.pos_rad[..len].iter().enumerate() {
            if let Some(j) = row[..cfg.dof].iter().position(|v| !v.is_finite()) {
                return Err(RejectReason::NonFinite {
                    row: i as u16,
                    joint: j as u16,
                });
            }
        }
        if c.dt_ns < cfg.dt_min_ns.max(1) || c.dt_ns > cfg.dt_max_ns {
            return Err(RejectReason::DtOutOfRange { dt_ns: c.dt_ns });
        }
        if c.seq <= self.last_seq {
            return Err(RejectReason::StaleSeq {
                seq: c.seq,
                last: self.last_seq,
            });
        }
        let offset_ns = c.t_start.diff_ns(now);
        if offset_ns.unsigned_abs() > cfg.max_time_offset_ns {
            return Err(RejectReason::StartTooFar { offset_ns });
        }
        let age_ns = c.age_ns(now);
        if age_ns > cfg.max_chunk_age_ns {
            return Err(RejectReason::Expired { age_ns });
        }
        let ts = now.add_ns(cfg.lookahead_ns);
        if c.t_end() < ts {
            return Err(RejectReason::HorizonPassed {
                late_ns: ts.saturating_since(c.t_end()),
            });
        }
        if self.last_forced.is_set() && c.t_obs <= self.last_forced {
            return Err(RejectReason::PredatesFallback {
                by_ns: self.last_forced.saturating_since(c.t_obs),
            });
        }
        if !self.playback_permitted() {
            return Err(RejectReason::NotArmed);
        }
        Ok(())
    }

    /// Whether a fresh chunk may take (or keep) authority in the current mode.
    fn playback_permitted(&self) -> bool {
        matches!(self.mode, Mode::Playing | Mode::Decelerating) || self.armed
    }

    /// Ingests a chunk: validates it and queues it for splicing at the first tick
    /// whose sample time reaches its `t_start`, or rejects it whole (the playing
    /// chunk keeps playing). No allocation.
    pub fn offer(&mut self, chunk: &Chunk, now: MonoTime) -> Result<(), RejectReason> {
        self.counts.offered += 1;
        if let Err(e) = self.validate(chunk, now) {
            self.counts.rejected += 1;
            return Err(e);
        }
        self.counts.accepted += 1;
        self.last_seq = chunk.seq;
        if self.pending_valid {
            self.counts.superseded += 1;
        }
        self.splines[self.pending].rebuild(chunk);
        self.pending_valid = true;
        self.counts.pending = 1;
        Ok(())
    }

    fn push_event(&mut self, now: MonoTime, to: Mode, reason: ModeChangeReason) {
        if to == self.mode {
            return;
        }
        self.events.push(ModeEvent {
            t: now,
            from: self.mode,
            to,
            reason,
        });
        self.mode = to;
    }

    /// Output of the current mode at sample time `ts`.
    fn eval_mode(&self, ts: MonoTime, out: &mut Pva) {
        let dof = self.cfg.dof;
        match self.mode {
            Mode::Playing => self.chain.eval(&self.splines, dof, ts, out),
            Mode::Decelerating => {
                let t = ts.diff_ns(self.stop_t0) as f64 * 1e-9;
                self.stop.eval(t, out);
            }
            Mode::Holding | Mode::SafeStop => {
                *out = Pva::at_rest(&self.hold_pos);
            }
        }
    }

    /// Whether the chunk in `slot` may be played at `now` (sample time `ts`).
    fn staleness(&self, slot: usize, now: MonoTime, ts: MonoTime) -> Option<ModeChangeReason> {
        let s = &self.splines[slot];
        if s.t_obs < now && now.saturating_since(s.t_obs) > self.cfg.max_chunk_age_ns {
            Some(ModeChangeReason::ChunkExpired)
        } else if ts > s.t_end() {
            Some(ModeChangeReason::HorizonEnd)
        } else {
            None
        }
    }

    /// Splices the pending chunk in at sample time `ts`.
    fn splice(&mut self, now: MonoTime, ts: MonoTime) {
        let dof = self.cfg.dof;
        let mut old = Pva::default();
        self.eval_mode(ts, &mut old);
        let slot = self.pending;
        if self.cfg.seam == SeamMode::Ensemble {
            // A first member starts on the output (a transition's offset), later ones
            // join the mean.
            let offset = self.seam_offset(&old, slot, ts);
            if !(self.mode == Mode::Playing && self.cur_valid) {
                self.chain.solo(slot);
            }
            let t_end = self.splines[slot].t_end();
            self.chain.ensemble_push(slot, ts, t_end, &offset);
        } else if self.cfg.blend_ns == 0 {
            self.chain.solo(slot);
        } else if self.cfg.seam == SeamMode::Transition {
            // The new chunk at once, plus the output's offset from it faded out.
            let offset = self.seam_offset(&old, slot, ts);
            self.chain.transition(slot, ts, &offset);
        } else if self.mode == Mode::Playing && self.cur_valid {
            let state = self.within_limits(&old);
            self.chain.push(slot, ts, &state);
        } else {
            let state = self.within_limits(&old);
            self.chain.restart_from(&state, ts, slot);
        }
        self.cur = slot;
        // A slot the chain does not use (the chain always leaves one).
        self.pending = (0..SLOTS).find(|&i| !self.chain.uses(i)).unwrap_or(0);
        self.cur_valid = true;
        self.pending_valid = false;
        self.counts.pending = 0;
        self.counts.used += 1;
        self.first_use = Some(ChunkInfo::of(&self.splines[self.cur]));
        self.push_event(now, Mode::Playing, ModeChangeReason::FreshChunk);
        let mut new = Pva::default();
        self.eval_mode(ts, &mut new);
        let (mut dp, mut dv, mut da) = (0.0f64, 0.0f64, 0.0f64);
        for j in 0..dof {
            dp = dp.max((new.pos_rad[j] - old.pos_rad[j]).abs());
            dv = dv.max((new.vel_rad_s[j] - old.vel_rad_s[j]).abs());
            da = da.max((new.acc_rad_s2[j] - old.acc_rad_s2[j]).abs());
        }
        self.seam.record(dp, dv, da);
    }

    /// The output `old` (within the limits) minus the chunk in `slot`, at `ts`: what a
    /// transition fades out.
    fn seam_offset(&self, old: &Pva, slot: usize, ts: MonoTime) -> Pva {
        let state = self.within_limits(old);
        let mut offset = Pva::default();
        self.splines[slot].eval(ts, &mut offset);
        for j in 0..self.cfg.dof {
            offset.pos_rad[j] = state.pos_rad[j] - offset.pos_rad[j];
            offset.vel_rad_s[j] = state.vel_rad_s[j] - offset.vel_rad_s[j];
            offset.acc_rad_s2[j] = state.acc_rad_s2[j] - offset.acc_rad_s2[j];
        }
        offset
    }

    /// `state` with velocity and acceleration clipped to the joint limits.
    ///
    /// The output can exceed them only transiently, inside a seam blend whose excess
    /// the gate is already absorbing. Continuing such a state (a stop ramping down an
    /// acceleration far above the limit, or a blend source extrapolated with it)
    /// would compound the excess, so the fallback and the state-based blend start
    /// from the clipped state: position stays continuous, and velocity/acceleration
    /// are continuous whenever they were within the limits.
    fn within_limits(&self, state: &Pva) -> Pva {
        let mut out = *state;
        for j in 0..self.cfg.dof {
            let lim = &self.limits.joint[j];
            let (v, a) = (lim.max_vel_rad_s.abs(), lim.max_acc_rad_s2.abs());
            out.vel_rad_s[j] = out.vel_rad_s[j].clamp(-v, v);
            out.acc_rad_s2[j] = out.acc_rad_s2[j].clamp(-a, a);
        }
        out
    }

    /// Enters `Decelerating`: a jerk-limited stop planned from the state of the last
    /// command that left the gate (see [`Executor::note_command`]), so the stop begins
    /// where the arm is commanded to be, not where the policy wanted it.
    fn enter_fallback(&mut self, now: MonoTime, reason: ModeChangeReason) {
        let start = self.within_limits(&self.last);
        self.stop = StopProfile::plan(&start, self.cfg.dof, &self.limits);
        self.stop_t0 = self.last_ts;
        self.chain.solo(self.cur);
        self.t_fallback = now;
        self.counts.fallback_entries += 1;
        match reason {
            ModeChangeReason::ChunkExpired => self.counts.expired += 1,
            ModeChangeReason::HorizonEnd => self.counts.horizon_ended += 1,
            _ => {}
        }
        self.push_event(now, Mode::Decelerating, reason);
    }

    /// Advances to `now` and writes the setpoint to command; the trajectory is sampled
    /// at `now + lookahead`. See [`Executor::tick_at`]. No allocation.
    pub fn tick(&mut self, now: MonoTime, out: &mut Setpoint) {
        self.tick_at(now, now, out);
    }

    /// Advances to `now` and writes the setpoint for the command slot `t_slot`: the
    /// trajectory is sampled at `t_slot + lookahead`, freshness is judged at `now`.
    ///
    /// The control loop passes its deadline as `t_slot`: the gate differentiates the
    /// commands over the nominal period, so sampling at the (jittery) wake time would
    /// turn wake jitter into command acceleration noise. No allocation.
    pub fn tick_at(&mut self, now: MonoTime, t_slot: MonoTime, out: &mut Setpoint) {
        let ts = t_slot.add_ns(self.cfg.lookahead_ns);
        self.first_use = None;
        self.chain.prune(ts);
        if self.pending_valid && ts >= self.splines[self.pending].t_start {
            let p = self.pending;
            let usable = self.staleness(p, now, ts).is_none()
                && self.playback_permitted()
                && !(self.last_forced.is_set() && self.splines[p].t_obs <= self.last_forced);
            if usable {
                self.splice(now, ts);
            } else {
                self.pending_valid = false;
                self.counts.pending = 0;
                self.counts.discarded += 1;
            }
        }
        if self.mode == Mode::Playing {
            if let Some(reason) = self.staleness(self.cur, now, ts) {
                self.enter_fallback(now, reason);
            }
        }
        let mut pva = Pva::default();
        self.eval_mode(ts, &mut pva);
        if self.mode == Mode::Decelerating
            && ts.diff_ns(self.stop_t0) as f64 * 1e-9 >= self.stop.duration_s()
        {
            // At rest only when the commands are: the gate may still be converging
            // on the stop's end (it rate-limits every mode). Until then the stop's
            // rest position is the proposal.
            if !self.cmd_known || self.command_at_rest() {
                self.hold_pos = if self.cmd_known {
                    self.last.pos_rad
                } else {
                    *self.stop.rest_pos()
                };
                pva = Pva::at_rest(&self.hold_pos);
                self.push_event(now, Mode::Holding, ModeChangeReason::AtRest);
                if self.cfg.resume == Resume::Manual {
                    self.armed = false;
                }
            }
        }
        if self.mode == Mode::Holding
            && now.saturating_since(self.t_fallback) >= self.cfg.safe_stop_after_ns
        {
            self.push_event(now, Mode::SafeStop, ModeChangeReason::SafeStopTimeout);
            if self.cfg.resume == Resume::Manual {
                self.armed = false;
            }
        }
        if !self.cmd_known {
            self.last = pva;
        }
        self.last_ts = ts;
        out.dof = self.cfg.dof as u16;
        out.pos_rad = pva.pos_rad;
        out.vel_rad_s = pva.vel_rad_s;
        out.acc_rad_s2 = pva.acc_rad_s2;
        out.chunk_seq = if self.mode == Mode::Playing {
            self.splines[self.cur].seq
        } else {
            0
        };
        out.stop = self.mode == Mode::Decelerating && self.cmd_known;
    }

    /// The state of the trajectory being played, without the seam blends toward it: the
    /// newest spliced chunk's spline at `t` while `Playing`; otherwise the last command
    /// (what [`Executor::note_command`] reported, or the executor's own last output).
    ///
    /// What a policy trained to continue its own plan observes
    /// ([`crate::Observation::plan_pos_rad`]): a blend's transient velocity belongs to no
    /// chunk, and a policy that continued it would feed the blend's transients back into
    /// its next chunk (with blends longer than the gap from a splice to the next
    /// observation, a loop that rings). No allocation.
    pub fn plan_state(&self, t: MonoTime, out: &mut Pva) {
        if self.mode == Mode::Playing && self.cur_valid {
            self.splines[self.cur].eval(t, out);
        } else {
            *out = self.last;
        }
    }

    /// Tells the executor what left the gate this cycle: the commanded state at the
    /// command's sample time (the gate's [`crate::Gate::commanded_state`]). Call it
    /// after every `tick_at` + `filter`. A fallback entered from then on plans its stop
    /// from this state, and `Holding` is entered only once these commands are at rest.
    /// No allocation.
    pub fn note_command(&mut self, commanded: &Pva) {
        self.last = *commanded;
        self.cmd_known = true;
    }

    /// Whether the last noted command is at rest on every joint.
    fn command_at_rest(&self) -> bool {
        const REST_VEL_RAD_S: f64 = 1e-6;
        const REST_ACC_RAD_S2: f64 = 1e-3;
        (0..self.cfg.dof).all(|j| {
            self.last.vel_rad_s[j].abs() < REST_VEL_RAD_S
                && self.last.acc_rad_s2[j].abs() < REST_ACC_RAD_S2
        })
    }

    /// Takes authority away from the policy (out of domain, backend error): a
    /// playing executor starts decelerating with `reason`. Chunks computed from
    /// observations captured at or before `now` can no longer resume playback.
    /// Call it every cycle while the condition lasts.
    pub fn force_fallback(&mut self, now: MonoTime, reason: ModeChangeReason) {
        self.last_forced = now.max(MonoTime(1));
        if self.mode == Mode::Playing {
            self.enter_fallback(now, reason);
        }
    }

    /// Re-seeds the executor at rest at `pos`: the measured position after the drives
    /// were re-enabled following a fault (they hold where they stopped, not where the
    /// last command was). Mode `Holding` (event `reason`), safe-stop timer restarted,
    /// a queued chunk discarded; chunks computed before `now` are refused, as after
    /// `force_fallback`; the next fresh chunk blends in from here. No allocation.
    pub fn resync(&mut self, now: MonoTime, pos: &JointVec, reason: ModeChangeReason) {
        self.force_fallback(now, reason);
        if self.pending_valid {
            self.pending_valid = false;
            self.counts.pending = 0;
            self.counts.discarded += 1;
        }
        self.chain.solo(self.cur);
        self.hold_pos = *pos;
        self.last = Pva::at_rest(pos);
        self.t_fallback = now;
        // Logged even when already holding: the held position changed.
        self.events.push(ModeEvent {
            t: now,
            from: self.mode,
            to: Mode::Holding,
            reason,
        });
        self.mode = Mode::Holding;
    }

    /// Re-arms the executor (operator action; needed with `Resume::Manual` after the
    /// ladder reached `Holding`). From `SafeStop` it returns to `Holding` (event
    /// `Rearmed`) and restarts the safe-stop timer; the next fresh chunk then plays.
    /// Every call is logged (`Rearmed`; from `Holding` or a playing mode the event
    /// does not change the mode), so the record shows when the operator acted.
    pub fn rearm(&mut self, now: MonoTime) {
        self.armed = true;
        if self.mode == Mode::SafeStop {
            self.t_fallback = now;
            self.push_event(now, Mode::Holding, ModeChangeReason::Rearmed);
        } else {
            self.events.push(ModeEvent {
                t: now,
                from: self.mode,
                to: self.mode,
                reason: ModeChangeReason::Rearmed,
            });
        }
    }

    /// Current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Whether fresh chunks may currently resume playback from `Holding`/`SafeStop`.
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// Whether the runtime must ask the backend for a quick stop (mode `SafeStop`).
    pub fn quick_stop_requested(&self) -> bool {
        self.mode == Mode::SafeStop
    }

    /// Takes the oldest pending mode-change event.
    pub fn pop_event(&mut self) -> Option<ModeEvent> {
        self.events.pop()
    }

    /// Mode events lost because the queue was full (not drained for a while).
    pub fn events_dropped(&self) -> u64 {
        self.events.dropped
    }

    /// Seam statistics so far.
    pub fn seam_stats(&self) -> SeamStats {
        SeamStats {
            blend_restarts: self.chain.collapsed(),
            ..self.seam
        }
    }

    /// Chunk life-cycle counters (see [`ChunkCounts`] for the identities).
    pub fn counts(&self) -> ChunkCounts {
        self.counts
    }

    /// The chunk being played (`None` outside `Playing`).
    pub fn current_chunk(&self) -> Option<ChunkInfo> {
        (self.mode == Mode::Playing).then(|| ChunkInfo::of(&self.splines[self.cur]))
    }

    /// The chunk whose first use was the last `tick` (handoff latency: the tick's
    /// time minus `t_publish`), `None` when that tick started no new chunk.
    pub fn first_use(&self) -> Option<ChunkInfo> {
        self.first_use
    }

    /// The configuration in use.
    pub fn config(&self) -> &ExecutorConfig {
        &self.cfg
    }
}
