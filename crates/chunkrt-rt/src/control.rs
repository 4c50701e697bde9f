//! The control loop's per-cycle work: everything between two deadlines.
//!
//! `ControlLoop::cycle` is the real tick: the runtime calls it on the SCHED_FIFO
//! thread, and the allocation test calls it thousands of times under a counting
//! allocator. Nothing in it allocates, locks, logs or formats: records go into
//! preallocated rings, errors are `Copy` values.

use chunkrt_buffer::{Publisher, Subscriber};
use chunkrt_core::residual::Authority;
use chunkrt_core::{
    Backend, BackendError, Chunk, Command, DomainBox, DriveRequest, DriveState, Exclusions,
    Executor, Feedback, Gate, GateMask, JointVec, Mode, ModeChangeReason, MonoTime, Observation,
    Pva, RejectReason, ResidualGate, ResidualLimits, Resume, Setpoint, ThermalLimits,
    ThermalMonitor, MAX_DOF,
};
use chunkrt_telemetry::{CycleProducer, CycleRecord, EventProducer, EventRecord};

/// Where the thermal monitor started, per joint and per hardware unit (the report's
/// `thermal_initial_load` and `thermal_initial_from`): made by `crate::wear`.
#[derive(Clone, Debug, Default)]
pub struct ThermalSeed {
    /// Each joint's starting load (fraction of the rating's I²t).
    pub load: JointVec,
    /// Per hardware unit: where its joints' loads came from.
    pub from: Vec<serde_json::Value>,
}

/// The control thread's state; built before the first deadline.
pub struct ControlLoop {
    pub(crate) backend: Box<dyn Backend>,
    /// The backend samples on the control grid (`Backend::samples_at_deadline`).
    samples_at_deadline: bool,
    pub(crate) executor: Executor,
    gate: Gate,
    chunks: Subscriber<Chunk>,
    /// The residual policy's corrections, one per base chunk (same `seq`).
    residual_chunks: Option<Subscriber<Chunk>>,
    /// The residual stage (`[policy.residual]`), boxed: built once, before the loop.
    residual: Option<Box<ResidualGate>>,
    /// `[episodes]`: the episode state machine (boxed: built once).
    episodes: Option<Box<chunkrt_core::Episodes>>,
    /// Chunks of another episode or phase than the current one, not offered.
    chunks_other_episode: u64,
    /// This cycle's base setpoint, before the residual gate (for the records).
    base: JointVec,
    /// The episode and phase this cycle's command is made in (for the records).
    cycle_episode: Option<chunkrt_core::EpisodeTag>,
    observations: Publisher<Observation>,
    /// The arm's measurement for the synthetic camera (none: no such camera).
    world: Option<Publisher<Observation>>,
    cycles_out: CycleProducer,
    events_out: EventProducer,
    domain: Option<DomainBox>,
    /// The regions the policy manifest's omission log excludes from its domain.
    exclusions: Exclusions,
    /// The I²t thermal monitor (`limits.thermal`).
    thermal: Option<ThermalMonitor>,
    /// Where the monitor started (the wear ledger, or the declared worst case).
    thermal_seed: Option<ThermalSeed>,
    dof: usize,
    period_ns: u64,
    clock: fn() -> MonoTime,
    fb: Feedback,
    cmd: Command,
    setpoint: Setpoint,
    /// The executor's plan state for the observation (reused, no allocation).
    plan: Pva,
    cycle: u64,
    backend_failing: bool,
    stopping: bool,
    /// The stop became a quick stop (a second stop request, a panic): the drives are
    /// asked for their own quick stop (`DriveRequest::QuickStop`) while the gate
    /// brakes the commands.
    quick_stop: bool,
    /// The gate made this cycle's command and the exchange has not yet returned: a
    /// panic in between left a command the drives never got.
    unsent: bool,
    /// After such a panic the next cycle sends that command instead of the gate
    /// making another one for the same deadline (the gate's state is what it sent).
    resend: bool,
    recovering: bool,
    /// The operator re-armed while drives were faulted with `resume = manual`: fault
    /// reset is allowed until they are enabled again.
    reset_approved: bool,
    chunks_ignored_stopping: u64,
    /// A chunk was read from the handoff and waits for its cycle
    /// (`Chunk::play_at_cycle`, a replayed run); it is `chunks.peek()`.
    chunk_waiting: bool,
    /// Chunks that waited for their cycle and were replaced by a newer one first.
    chunks_overwritten_waiting: u64,
    /// Replayed chunks taken up after their cycle (they arrived late).
    chunks_played_late: u64,
    /// Delay injection (issue 8); `None`: the cycle is exactly the uninjected one.
    inject: Option<Box<crate::inject::ControlInjection>>,
    /// Gate saturation thresholds in cycles: logged at the first, authority taken
    /// away at the second.
    saturation_event_cycles: u32,
    saturation_fallback_cycles: u32,
    /// The enable switch (`[ethercat.enable_input]`): the joint whose feedback carries
    /// the drive's digital inputs, and the switch's bit mask.
    enable_input: Option<(usize, u32)>,
    /// The switch was released at the last check (an event is logged at each release).
    enable_released: bool,
    /// Following-error limits per joint (`limits.max_following_error_rad`).
    following_limit: Option<[f64; MAX_DOF]>,
    /// Joints over their limit now (an event is logged when one goes over).
    following_over: [bool; MAX_DOF],
    /// The command sent in the previous cycle: what this cycle's measurement follows.
    prev_cmd_pos: JointVec,
    /// The joint of a drive the backend could not bring back (`BackendError::DriveLost`):
    /// the run ends with a controlled stop.
    drive_lost: Option<u16>,
    /// The contact force tripwire (`[force] tripwire_n`).
    force_tripwire_n: Option<f64>,
    /// The tripwire fired and no `rearm` has come since.
    force_tripped: bool,
}

/// The measured speed under which a drive counts as at standstill (rad/s).
pub const STANDSTILL_VEL_RAD_S: f64 = 0.005;

/// Default gate-saturation thresholds (`executor.gate_saturated_*_ms`), in ms.
const SATURATION_EVENT_MS: u64 = 200;
const SATURATION_FALLBACK_MS: u64 = 1000;

/// What the loop needs to be built.
pub struct ControlParts {
    /// The started backend.
    pub backend: Box<dyn Backend>,
    /// The executor at rest at the first measured position.
    pub executor: Executor,
    /// The gate at rest at the same position.
    pub gate: Gate,
    /// Chunks from the inference thread.
    pub chunks: Subscriber<Chunk>,
    /// Observations to the inference thread.
    pub observations: Publisher<Observation>,
    /// Cycle records to telemetry.
    pub cycles_out: CycleProducer,
    /// Events to telemetry.
    pub events_out: EventProducer,
    /// Optional support-monitor box.
    pub domain: Option<DomainBox>,
    /// Control period.
    pub period_ns: u64,
    /// The backend's first measurement.
    pub first_feedback: Feedback,
    /// The clock (`os::now` in the runtime; tests drive a clock of their own).
    pub clock: fn() -> MonoTime,
}

impl ControlLoop {
    /// Assembles the loop.
    pub fn new(p: ControlParts) -> Self {
        let dof = p.backend.dof();
        let mut cmd = Command {
            dof: dof as u16,
            ..Command::default()
        };
        cmd.pos_rad = p.first_feedback.pos_rad;
        ControlLoop {
            samples_at_deadline: p.backend.samples_at_deadline(),
            backend: p.backend,
            executor: p.executor,
            gate: p.gate,
            residual_chunks: None,
            residual: None,
            episodes: None,
            chunks_other_episode: 0,
            base: [0.0; MAX_DOF],
            cycle_episode: None,
            chunks: p.chunks,
            observations: p.observations,
            world: None,
            cycles_out: p.cycles_out,
            events_out: p.events_out,
            domain: p.domain,
            dof,
            period_ns: p.period_ns,
            clock: p.clock,
            fb: p.first_feedback,
            cmd,
            setpoint: Setpoint::default(),
            plan: Pva::default(),
            cycle: 0,
            backend_failing: false,
            stopping: false,
            quick_stop: false,
            unsent: false,
            resend: false,
            recovering: false,
            reset_approved: false,
            chunks_ignored_stopping: 0,
            chunk_waiting: false,
            chunks_overwritten_waiting: 0,
            chunks_played_late: 0,
            inject: None,
            saturation_event_cycles: (SATURATION_EVENT_MS * 1_000_000)
                .div_ceil(p.period_ns.max(1))
                .max(1) as u32,
            saturation_fallback_cycles: (SATURATION_FALLBACK_MS * 1_000_000)
                .div_ceil(p.period_ns.max(1))
                .max(1) as u32,
            enable_input: None,
            enable_released: false,
            following_limit: None,
            exclusions: Exclusions::NONE,
            thermal: None,
            thermal_seed: None,
            following_over: [false; MAX_DOF],
            prev_cmd_pos: p.first_feedback.pos_rad,
            drive_lost: None,
            force_tripwire_n: None,
            force_tripped: false,
        }
    }

    /// Following-error limits per joint (`Config::following_error_limits`): a joint
    /// measured further than its limit from the command it was sent the cycle before
    /// takes authority from the policy (`FollowingError` event and fallback, every
    /// cycle while it lasts).
    pub fn with_following_error(mut self, limits: Option<[f64; MAX_DOF]>) -> Self {
        self.following_limit = limits;
        self
    }

    /// Takes authority from the policy every cycle while the measured state (positions,
    /// velocities) lies in one of `exclusions` (`Excluded` event and fallback), as the
    /// domain box does outside it.
    pub fn with_exclusions(mut self, exclusions: Exclusions) -> Self {
        self.exclusions = exclusions;
        self
    }

    /// The thermal monitor on the measured torques (`limits.thermal`): derates a hot
    /// joint's speed in the gate, then takes authority every cycle while its load is at
    /// `withdraw_at` or above (`Thermal` event and fallback).
    pub fn with_thermal(mut self, limits: Option<ThermalLimits>) -> Self {
        let period_s = self.period_ns as f64 * 1e-9;
        self.thermal = limits.map(|l| ThermalMonitor::new(l, period_s));
        self
    }

    /// Starts the thermal monitor (set by [`Self::with_thermal`]) from `seed`'s loads
    /// instead of cold: the same hardware's last recorded load, cooled, or the declared
    /// worst case (`crate::wear::thermal_seed`).
    pub fn with_thermal_seed(mut self, seed: Option<ThermalSeed>) -> Self {
        if let (Some(m), Some(s)) = (self.thermal.as_mut(), &seed) {
            *m = m.with_initial_load(&s.load);
        }
        self.thermal_seed = seed.filter(|_| self.thermal.is_some());
        self
    }

    /// The thermal monitor's I²t high-water mark per joint (none: no monitor).
    pub fn thermal_peaks(&self) -> Option<&JointVec> {
        self.thermal.as_ref().map(ThermalMonitor::peaks)
    }

    /// The thermal monitor's load per joint now (none: no monitor).
    pub fn thermal_loads(&self) -> Option<JointVec> {
        self.thermal.as_ref().map(ThermalMonitor::loads)
    }

    /// Where the thermal monitor started (none: no monitor, or started cold by a caller
    /// that gave no seed).
    pub fn thermal_seed(&self) -> Option<&ThermalSeed> {
        self.thermal_seed.as_ref()
    }

    /// Publishes each cycle's measurement (positions, velocities, capture time) into
    /// `world` as well: what the synthetic camera renders. One more copy per cycle into
    /// a preallocated triple buffer; nothing is allocated.
    pub fn with_world(mut self, world: Publisher<Observation>) -> Self {
        self.world = Some(world);
        self
    }

    /// Checks the measurement against the previous command (after a good exchange
    /// of fresh, not held, feedback, while no drive is recovering).
    fn check_following(&mut self, t: MonoTime) {
        let Some(limit) = self.following_limit else {
            return;
        };
        let mut over_any = false;
        for (j, &lim) in limit.iter().enumerate().take(self.dof.min(MAX_DOF)) {
            let err = (self.prev_cmd_pos[j] - self.fb.pos_rad[j]).abs();
            let over = err > lim || !err.is_finite();
            if over && !self.following_over[j] {
                self.events_out.push(EventRecord::FollowingError {
                    t,
                    joint: j as u16,
                    error_rad: err,
                    limit_rad: lim,
                });
            }
            self.following_over[j] = over;
            over_any |= over;
        }
        if over_any {
            self.executor
                .force_fallback(t, ModeChangeReason::FollowingError);
        }
    }

    /// Gate-saturation thresholds in cycles (`Config::gate_saturation_cycles`): a joint
    /// whose command the gate has held off the proposal for `event_cycles` in a row is
    /// logged (`GateSaturated` event record); at `fallback_cycles` the policy loses
    /// authority (`GateSaturated` fallback), so the executor's intent and the commands
    /// cannot drift apart silently.
    pub fn with_gate_saturation(mut self, event_cycles: u32, fallback_cycles: u32) -> Self {
        self.saturation_event_cycles = event_cycles.max(1);
        self.saturation_fallback_cycles = fallback_cycles.max(1);
        self
    }

    /// With a residual policy: its correction chunks and the residual stage's limits
    /// (both or neither), the first stage of the command path (proposal = base +
    /// residual; see `chunkrt_core::residual`).
    pub fn with_residual(
        mut self,
        chunks: Option<Subscriber<Chunk>>,
        limits: Option<ResidualLimits>,
    ) -> Self {
        self.residual = match (&chunks, limits) {
            (Some(_), Some(l)) => Some(Box::new(ResidualGate::new(l, self.period_ns))),
            _ => None,
        };
        self.residual_chunks = chunks;
        self
    }

    /// The residual stage, when the run has one.
    pub fn residual(&self) -> Option<&ResidualGate> {
        self.residual.as_deref()
    }

    /// Attaches the control-side injection (delay lines, extra work, the probe, a
    /// panic) when `cfg` asks for any; `first`: the feedback the delay lines start from.
    pub fn attach_injection(self, cfg: &chunkrt_config::InjectConfig, first: &Feedback) -> Self {
        if !crate::inject::acts_on_control(cfg) {
            return self;
        }
        let inj = crate::inject::ControlInjection::new(cfg, self.last_command(), first);
        self.with_injection(inj)
    }

    /// Attaches the delay lines of `[inject]` (built before the first deadline). Not
    /// called when nothing is injected, so a plain loop carries no injection code path.
    pub fn with_injection(mut self, inject: crate::inject::ControlInjection) -> Self {
        self.inject = Some(Box::new(inject));
        self
    }

    /// The attached injection points, if any.
    pub fn injection(&self) -> Option<&crate::inject::ControlInjection> {
        self.inject.as_deref()
    }

    /// The loop's clock (`ControlParts::clock`): what `Schedule` reads the time with.
    pub fn now(&self) -> MonoTime {
        (self.clock)()
    }

    /// Control period.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Current executor mode.
    pub fn mode(&self) -> Mode {
        self.executor.mode()
    }

    /// The last command handed to the backend.
    pub fn last_command(&self) -> &Command {
        &self.cmd
    }

    /// Gate interventions per constraint so far.
    pub fn gate_counts(&self) -> &[u64] {
        self.gate.counts()
    }

    /// The last feedback.
    pub fn last_feedback(&self) -> &Feedback {
        &self.fb
    }

    /// Logs that an operator asked for the stop (`signals`: stop signals so far, 0
    /// for the stop flag): the event, and with it an intervention record. No
    /// allocation (the event ring is preallocated).
    pub fn note_operator_stop(&mut self, now: MonoTime, signals: u32) {
        self.events_out
            .push(EventRecord::OperatorStop { t: now, signals });
        self.end_episode_by_operator(now);
    }

    /// Takes authority away from the policy for good (shutdown): the arm is brought
    /// to rest and no further chunk is offered to the executor.
    pub fn stop_playing(&mut self, now: MonoTime, reason: ModeChangeReason) {
        self.stopping = true;
        self.end_episodes(now);
        if self.executor.mode() == Mode::Playing {
            self.executor.force_fallback(now, reason);
        }
    }

    /// Makes the stop a quick stop: from the next cycle on every drive is asked for its
    /// own quick stop (CiA 402 quick-stop ramp on EtherCAT, the simulated drive's
    /// quick-stop deceleration) while the gate brakes the commands to rest. Takes
    /// authority from the policy as [`ControlLoop::stop_playing`] does.
    pub fn quick_stop(&mut self) {
        self.stopping = true;
        self.quick_stop = true;
    }

    /// After a panic caught on the control thread: a command the gate made that never
    /// reached the exchange is sent by the next cycle (retried for the same deadline),
    /// so the drives get the gate's command stream in order, one period late, as after
    /// a stall.
    pub fn after_panic(&mut self) {
        if self.unsent {
            self.unsent = false;
            self.resend = true;
        }
    }

    /// Whether the drives report standstill: every joint's measured speed is at most
    /// [`STANDSTILL_VEL_RAD_S`], or the drive is disabled or gone (no torque).
    pub fn drives_at_standstill(&self) -> bool {
        (0..self.dof.min(MAX_DOF)).all(|j| {
            self.fb.vel_rad_s[j].abs() <= STANDSTILL_VEL_RAD_S
                || matches!(self.fb.state[j], DriveState::Disabled | DriveState::Missing)
        })
    }

    /// Operator re-arm (SIGUSR1 in `chunkrt run`): with `resume = manual`, fresh chunks
    /// may take authority again after the ladder held the arm, and faulted drives are
    /// reset (then re-seeded at their measured position as with `resume = auto`).
    /// Logged as a `Rearmed` mode event. Ignored once stopping.
    pub fn rearm(&mut self, now: MonoTime) {
        if self.stopping {
            return;
        }
        self.executor.rearm(now);
        self.force_tripped = false;
        if self.recovering {
            self.reset_approved = true;
        }
    }

    /// Chunks that arrived after `stop_playing` and were not offered.
    pub fn chunks_ignored_stopping(&self) -> u64 {
        self.chunks_ignored_stopping
    }

    /// The joint of a drive the backend gave up bringing back, if any: the run is over
    /// (the schedule starts the controlled stop).
    pub fn drive_lost(&self) -> Option<u16> {
        self.drive_lost
    }

    /// Cycles run so far (the loop's own count; the report's `cycles` counts the
    /// cycle records that reached telemetry, `cycles_run = cycles + ring drops`).
    pub fn cycles_run(&self) -> u64 {
        self.cycle
    }

    /// Whether the commanded positions have stopped moving (the gate's backward-
    /// difference velocity is zero on every joint). The executor can report `Holding`
    /// while the gate, which rate-limited the stop, is still converging on the held
    /// position; a controlled stop is over only when both are at rest.
    pub fn command_at_rest(&self) -> bool {
        (0..self.dof).all(|j| self.gate.commanded(j).1.abs() < 1e-6)
    }

    /// The executor's chunk life-cycle counters (see `ChunkCounts`).
    pub fn chunk_counts(&self) -> chunkrt_core::ChunkCounts {
        self.executor.counts()
    }

    /// Whether a chunk is waiting in the handoff that the loop never read (called
    /// once after the inference thread has ended; takes it, for the reconciliation).
    pub fn take_unread_chunk(&mut self) -> bool {
        self.take_arrival();
        std::mem::take(&mut self.chunk_waiting)
    }

    /// Chunks read from the handoff that waited for their cycle and were replaced
    /// by a newer one first (never offered, as an overwritten chunk).
    pub fn chunks_overwritten_waiting(&self) -> u64 {
        self.chunks_overwritten_waiting
    }

    /// Replayed chunks (`Chunk::play_at_cycle`) taken up after their cycle: the run
    /// left the recorded one's timing.
    pub fn chunks_played_late(&self) -> u64 {
        self.chunks_played_late
    }

    /// Reads a newly arrived chunk out of the handoff, if any.
    #[inline]
    fn take_arrival(&mut self) {
        if self.chunks.update() {
            if self.chunk_waiting {
                self.chunks_overwritten_waiting += 1;
            }
            self.chunk_waiting = true;
        }
    }

    /// Gate saturation: logged once per run at the event threshold; at the fallback
    /// threshold the policy loses authority (every cycle while it lasts, so a chunk
    /// computed meanwhile cannot take it back).
    fn check_saturation(&mut self, wake: MonoTime) {
        for j in 0..self.dof.min(MAX_DOF) {
            let sat = self.gate.saturation(j);
            if sat.cycles == self.saturation_event_cycles {
                self.events_out.push(EventRecord::GateSaturated {
                    t: wake,
                    joint: j as u16,
                    constraint: sat.constraint,
                    cycles: sat.cycles,
                });
            }
            if sat.cycles >= self.saturation_fallback_cycles {
                self.executor
                    .force_fallback(wake, ModeChangeReason::GateSaturated);
            }
        }
    }

    /// One cycle. `deadline` is the absolute time the thread slept for, `wake` when
    /// it woke, `missed` the deadlines skipped before it.
    ///
    /// The cycle is a pipeline of stages, each a method below, in this order: the
    /// newest chunk; the authority checks on the last measurement; the executor's
    /// tick; the action filter (`Gate::shape`); the margin probe; the gate; the drive request; the exchange (with the
    /// following-error check of its fresh measurement); the observation for the
    /// inference thread; the records.
    pub fn cycle(&mut self, deadline: MonoTime, wake: MonoTime, missed: u32) {
        let slot = Slot {
            deadline,
            wake,
            missed,
        };
        let work_began = self.injected_work_began();
        self.cycle_episode = self.episode_tag();
        self.take_newest_chunk(wake);
        self.check_authority(wake, missed);
        // The trajectory is sampled for the deadline's slot (the gate differentiates
        // over the nominal period); freshness is judged at the wake time.
        self.executor.tick_at(wake, deadline, &mut self.setpoint);
        // The withdrawal is decided once, here: out of `Playing` every stage but the
        // gate's braking reference is bypassed (the stop brakes the commanded state,
        // the hold holds it; nothing layered on the base may add motion to either).
        let authority = self.executor.mode() == Mode::Playing;
        self.propose(deadline, authority);
        if authority {
            self.gate.shape(&mut self.setpoint);
        } else {
            self.gate.bypass_shaping();
        }
        let probed = self.probe(deadline);
        self.injected_control_panic(deadline);
        let (mask, commanded) = self.gate_command(wake, probed);
        let mode = self.executor.mode();
        self.cmd.t_cmd = deadline;
        self.cmd.request = self.drive_request(mode);
        let sent = self.exchange(deadline, work_began);
        // The largest |command - measurement|: the record's and the episode's.
        let track_err = self.track_err();
        self.observe_episode(deadline, mask, track_err);
        self.publish_observation(deadline, &commanded);
        self.publish_world(deadline);
        self.log_mode_events();
        self.record_cycle(slot, mode, mask, sent, track_err);
        self.cycle += 1;
    }

    /// The largest |command - measurement| over the joints this cycle.
    #[inline]
    fn track_err(&self) -> f64 {
        let mut e: f64 = 0.0;
        for j in 0..self.dof.min(MAX_DOF) {
            e = e.max((self.cmd.pos_rad[j] - self.fb.pos_rad[j]).abs());
        }
        e
    }

    /// When the cycle's work began on the real clock, for injected extra work (a
    /// stall, a slowdown) that stretches it; zero when nothing is injected.
    #[inline]
    fn injected_work_began(&self) -> MonoTime {
        match self.inject.as_deref() {
            Some(inj) if inj.burns() => crate::os::now(),
            _ => MonoTime::ZERO,
        }
    }

    /// Stage 1: the newest chunk, if any, offered to the executor (validated, then
    /// spliced at its start); a refused one is logged (`Reject`). Not offered while
    /// stopping: the policy has lost authority for good. A replayed chunk waits for
    /// the cycle it was first played in (`Chunk::play_at_cycle`).
    #[inline]
    fn take_newest_chunk(&mut self, wake: MonoTime) {
        self.take_arrival();
        if !self.chunk_waiting {
            return;
        }
        let chunk = self.chunks.peek();
        if self.stopping {
            self.chunk_waiting = false;
            self.chunks_ignored_stopping += 1;
            return;
        }
        if chunk.play_at_cycle > self.cycle {
            return;
        }
        if self.episodes.is_some() && chunk.episode != self.episode_tag() {
            self.chunk_waiting = false;
            self.chunks_other_episode += 1;
            return;
        }
        self.chunk_waiting = false;
        if chunk.play_at_cycle != 0 && chunk.play_at_cycle < self.cycle {
            self.chunks_played_late += 1;
        }
        let offered = self.executor.offer(chunk, wake);
        if offered.is_ok() {
            Self::take_correction(&mut self.residual_chunks, &mut self.residual, chunk.seq);
        }
        if let Err(reason) = offered {
            if reason == RejectReason::OutOfDomain {
                // The policy's own support monitor (manifest domain) flagged the
                // observation: it loses authority until it is back inside.
                self.executor
                    .force_fallback(wake, ModeChangeReason::OutOfDomain);
                self.gate.flag_out_of_domain(None);
            }
            self.events_out.push(EventRecord::Reject {
                t: wake,
                seq: chunk.seq,
                reason,
            });
        }
    }

    /// The residual's correction for the base chunk `seq` just accepted, offered to
    /// the residual stage; a correction that is missing (another chunk's) or refused
    /// leaves that chunk without one (the correction goes to zero within its limits).
    #[inline]
    fn take_correction(
        chunks: &mut Option<Subscriber<Chunk>>,
        residual: &mut Option<Box<ResidualGate>>,
        seq: u64,
    ) {
        let (Some(sub), Some(residual)) = (chunks.as_mut(), residual.as_deref_mut()) else {
            return;
        };
        sub.update();
        let correction = sub.peek();
        // An empty correction was withheld at the source (failed, non-finite, out of the
        // residual's domain) and counted there.
        if correction.seq == seq && correction.len > 0 {
            residual.offer(correction);
        } else {
            residual.clear();
        }
    }

    /// Stage 3b, the proposal: with a residual, the base's setpoint (kept for the
    /// records) plus the residual's correction sampled at the base's own sample time
    /// (the deadline plus the executor's lookahead). `authority`: the executor plays;
    /// without it the correction is bypassed and restarts from zero.
    #[inline]
    fn propose(&mut self, deadline: MonoTime, authority: bool) {
        if self.residual.is_none() {
            return;
        }
        self.base = self.setpoint.pos_rad;
        let who = if !authority {
            Authority::Withdrawn
        } else if self.policy_runs() {
            Authority::Policy
        } else {
            Authority::Planner
        };
        let ts = deadline.add_ns(self.executor.config().lookahead_ns);
        let Some(r) = self.residual.as_deref_mut() else {
            return;
        };
        r.apply(ts, who, &mut self.setpoint);
        let mut raw = self.base;
        for (q, c) in raw.iter_mut().zip(r.raw()) {
            *q += c;
        }
        self.gate.note_residual(r.bits(), &raw);
    }

    /// Stage 2: the checks that take authority from the policy before the tick, on
    /// the last measurement: support monitor, probe excursion guard, drive faults,
    /// backend health. (The following error is checked on the exchange's fresh
    /// measurement, in [`Self::exchange`].)
    #[inline]
    fn check_authority(&mut self, wake: MonoTime, missed: u32) {
        self.check_enable(wake);
        self.check_operator(wake);
        self.check_domain(wake);
        self.check_thermal(wake, missed);
        self.check_force(wake);
        self.check_probe_guard(wake);
        self.check_drive_faults(wake);
        self.check_backend_health(wake);
    }

    /// The enable switch on the last measurement (`[ethercat.enable_input]`): every
    /// cycle while it is not held, the policy (or the reset planner) loses authority, so
    /// the command that follows the frame that carried the release is already the stop.
    /// A held frame keeps the last reading (the backend's loss policy bounds how long).
    #[inline]
    fn check_enable(&mut self, wake: MonoTime) {
        let Some((joint, mask)) = self.enable_input else {
            return;
        };
        if !self.fb.held {
            self.enable_released = self.fb.digital_inputs[joint] & mask == 0;
        }
        if self.enable_released {
            self.executor
                .force_fallback(wake, ModeChangeReason::EnableReleased);
        }
    }

    /// The operator's command channel (`crate::operator`): a `stop` holds the policy
    /// off every cycle until `rearm`; `intervene` marks the running episode.
    #[inline]
    fn check_operator(&mut self, wake: MonoTime) {
        if crate::operator::held() {
            self.executor
                .force_fallback(wake, ModeChangeReason::OperatorHold);
        }
        let running = self
            .episodes
            .as_deref()
            .is_some_and(|e| e.phase() == chunkrt_core::Phase::Running);
        crate::operator::publish_episode(running);
        let marks = crate::operator::take_marks();
        // Marks are taken only while an episode runs; one given as it ended is dropped,
        // never recorded without its episode.
        if marks > 0 {
            let episode = self.episodes.as_deref_mut().and_then(|e| {
                let i = e.index();
                e.mark(marks).then_some(i)
            });
            if episode.is_some() {
                self.events_out.push(EventRecord::OperatorMark {
                    t: wake,
                    count: marks,
                    episode,
                });
            }
        }
    }

    /// Reads the enable switch at bit `bit` of the digital inputs the feedback carries
    /// for `joint` (`[ethercat.enable_input]`); none: no switch.
    pub fn with_enable_input(mut self, input: Option<(usize, u8)>) -> Self {
        self.enable_input = input.map(|(j, bit)| (j.min(MAX_DOF - 1), 1u32 << bit.min(31)));
        // Released until a frame says otherwise.
        self.enable_released = self.enable_input.is_some();
        self
    }

    /// Whether the enable switch is released now (false without one).
    pub fn enable_released(&self) -> bool {
        self.enable_released
    }

    /// The support monitor on the last measurement. Every cycle while outside the
    /// domain: a chunk computed from an observation taken out there must not take
    /// authority back.
    #[inline]
    fn check_domain(&mut self, wake: MonoTime) {
        if let Some(j) = self
            .domain
            .as_ref()
            .and_then(|d| d.first_violation(&self.fb.pos_rad))
        {
            self.executor
                .force_fallback(wake, ModeChangeReason::OutOfDomain);
            self.gate.flag_out_of_domain(Some(j as u16));
        } else if let Some(r) = self.exclusions.find(&self.fb.pos_rad, &self.fb.vel_rad_s) {
            self.executor
                .force_fallback(wake, ModeChangeReason::Excluded);
            self.gate.flag_out_of_domain(Some(r.first_joint()));
        }
    }

    /// The thermal monitor on the last measurement's torques, over the periods since
    /// the last cycle (skipped deadlines included: the winding heated through them):
    /// the gate's derating, and the policy's authority taken while a joint is at
    /// `withdraw_at`.
    #[inline]
    fn check_thermal(&mut self, wake: MonoTime, missed: u32) {
        let Some(monitor) = self.thermal.as_mut() else {
            return;
        };
        let verdict = monitor.update(&self.fb.torque_nm, 1 + missed);
        for (j, f) in verdict.derate.iter().enumerate().take(self.dof) {
            self.gate.set_derate(j, *f);
        }
        if verdict.withdraw.is_some() {
            self.executor
                .force_fallback(wake, ModeChangeReason::Thermal);
        }
    }

    /// The margin probe's excursion guard (tripped in an earlier cycle): the probed
    /// loop ran away, and authority is taken every cycle from here on, as the domain
    /// monitor does, before the tick could resume playing.
    #[inline]
    fn check_probe_guard(&mut self, wake: MonoTime) {
        if let Some(j) = self.inject.as_deref().and_then(|i| i.probe_tripped()) {
            self.executor
                .force_fallback(wake, ModeChangeReason::ProbeExcursion);
            self.gate.flag_out_of_domain(Some(j));
        }
    }

    /// Drive faults, and drives gone from OP (the backend brings them back): answered
    /// with the fallback (the backend error), a fault reset and re-enable when
    /// `resume = auto` (see [`Self::drive_request`]), and a re-seed at the measured
    /// position once every drive is enabled again, so nothing jumps on re-enable.
    #[inline]
    fn check_drive_faults(&mut self, wake: MonoTime) {
        let faulted = self.fb.state[..self.dof]
            .iter()
            .any(|s| matches!(s, DriveState::Fault | DriveState::Missing));
        if faulted {
            self.recovering = true;
        } else if self.recovering && self.fb.all_enabled() {
            self.recovering = false;
            self.reset_approved = false;
            self.executor
                .resync(wake, &self.fb.pos_rad, ModeChangeReason::DrivesRecovered);
            self.gate.resync(&self.fb.pos_rad);
        }
    }

    /// While the backend is failing, the policy stays without authority from the
    /// start of the cycle: a chunk computed from the feedback of a failed exchange
    /// (captured after last cycle's `force_fallback`) must not be spliced in by this
    /// cycle's tick.
    #[inline]
    fn check_backend_health(&mut self, wake: MonoTime) {
        if self.backend_failing {
            self.executor
                .force_fallback(wake, ModeChangeReason::BackendError);
        }
    }

    /// The loop-transfer probe of `[inject.probe]`, added to the setpoint before the
    /// gate (which checks it like any setpoint), only while the policy plays; returns
    /// what was added, taken out again after the gate.
    #[inline]
    fn probe(&mut self, deadline: MonoTime) -> Option<(usize, [f64; 3])> {
        let inj = self.inject.as_deref_mut()?;
        let playing = self.executor.mode() == Mode::Playing && !self.setpoint.stop;
        inj.probe(deadline, playing, &mut self.setpoint, &self.fb.pos_rad)
    }

    /// `inject.panic` on the control thread (the fail-safe rehearsal).
    #[inline]
    fn injected_control_panic(&mut self, deadline: MonoTime) {
        if let Some(inj) = self.inject.as_deref_mut() {
            inj.check_control_panic(deadline);
        }
    }

    /// The gate, applied last in every mode, makes the command from the setpoint (or
    /// the command a panic kept from the drives is sent again, see
    /// [`Self::after_panic`]); the executor is told what left the gate, so a fallback
    /// plans its stop from there. Returns the constraints that acted and the
    /// commanded state.
    #[inline]
    fn gate_command(
        &mut self,
        wake: MonoTime,
        probed: Option<(usize, [f64; 3])>,
    ) -> (GateMask, Pva) {
        let mask = if self.resend {
            self.resend = false;
            GateMask(0)
        } else {
            self.gate.filter(&self.setpoint, &mut self.cmd)
        };
        self.unsent = true;
        if let Some(added) = probed {
            crate::inject::ControlInjection::unprobe(&mut self.setpoint, added);
        }
        let commanded = self.gate.commanded_state();
        self.executor.note_command(&commanded);
        if mask.0 != 0 {
            for iv in self.gate.interventions() {
                self.events_out.push(EventRecord::Gate {
                    t: wake,
                    intervention: *iv,
                });
            }
            self.check_saturation(wake);
        }
        (mask, commanded)
    }

    /// What the drives are asked to do with this cycle's command: a quick stop once
    /// the stop became one; while drives recover, a fault reset (with `resume = auto`
    /// or after the operator's re-arm, never while stopping), else a quick stop; in
    /// safe stop a quick stop; otherwise track the command.
    #[inline]
    fn drive_request(&self, mode: Mode) -> DriveRequest {
        if self.quick_stop {
            return DriveRequest::QuickStop;
        }
        if self.recovering {
            let auto_resume = self.executor.config().resume == Resume::Auto;
            return if (auto_resume || self.reset_approved) && !self.stopping {
                DriveRequest::FaultReset
            } else {
                DriveRequest::QuickStop
            };
        }
        match mode {
            Mode::SafeStop => DriveRequest::QuickStop,
            _ => DriveRequest::Track,
        }
    }

    /// The exchange with the drives (after the injected extra work, if any), through
    /// the delay lines when `[inject]` has any; then the backend's health and the
    /// following error of the fresh measurement.
    #[inline]
    fn exchange(&mut self, deadline: MonoTime, work_began: MonoTime) -> Sent {
        if let Some(inj) = self.inject.as_deref_mut() {
            inj.burn(work_began);
        }
        let t_cmd = (self.clock)();
        // Drives that sample on the grid are given the deadline (a simulated arm).
        let t_drive = if self.samples_at_deadline {
            deadline
        } else {
            t_cmd
        };
        let result = match self.inject.as_deref_mut() {
            None => self.backend.exchange(t_drive, &self.cmd, &mut self.fb),
            // Injected transport / feedback delay (issue 8), keyed on the deadline.
            Some(inj) => inj.exchange(
                &mut *self.backend,
                deadline,
                t_drive,
                &self.cmd,
                &mut self.fb,
            ),
        };
        let t_fb = (self.clock)();
        self.unsent = false;
        let backend_error = match result {
            Ok(()) => {
                self.backend_failing = false;
                if !self.fb.held && !self.recovering {
                    self.check_following(t_cmd);
                }
                false
            }
            Err(error) => {
                self.backend_failed(t_cmd, error);
                true
            }
        };
        self.prev_cmd_pos = self.cmd.pos_rad;
        Sent {
            t_cmd,
            t_fb,
            backend_error,
        }
    }

    /// A failed exchange: logged, and the policy loses authority every cycle while
    /// the errors last (as `force_fallback` asks): a chunk computed from a
    /// measurement taken during the outage (a faulted drive still reports positions)
    /// must not take authority back while the drives cannot follow it.
    #[inline]
    fn backend_failed(&mut self, t_cmd: MonoTime, error: BackendError) {
        self.events_out
            .push(EventRecord::Backend { t: t_cmd, error });
        self.executor
            .force_fallback(t_cmd, ModeChangeReason::BackendError);
        self.backend_failing = true;
        if let BackendError::DriveLost { joint } = error {
            self.drive_lost.get_or_insert(joint);
        }
    }

    /// The observation for the inference thread: this cycle's measurement, command
    /// and plan (or, with an injected observation delay, the one captured earlier).
    #[inline]
    fn publish_observation(&mut self, deadline: MonoTime, commanded: &Pva) {
        self.executor.plan_state(self.fb.t_capture, &mut self.plan);
        let plan = &self.plan;
        let fb = &self.fb;
        let cmd = &self.cmd;
        let seq = self.cycle;
        let episode = self.episodes.as_deref().map(|e| chunkrt_core::EpisodeTag {
            index: e.index(),
            phase: e.phase(),
        });
        if let Some(inj) = self
            .inject
            .as_deref_mut()
            .filter(|i| i.delays_observations())
        {
            // Injected observation delay (issue 8): publish the one captured earlier.
            let fresh = Observation {
                seq,
                t_capture: fb.t_capture,
                t_cycle: deadline,
                dof: fb.dof,
                pos_rad: fb.pos_rad,
                vel_rad_s: fb.vel_rad_s,
                torque_nm: fb.torque_nm,
                cmd_pos_rad: cmd.pos_rad,
                cmd_vel_rad_s: commanded.vel_rad_s,
                plan_pos_rad: plan.pos_rad,
                plan_vel_rad_s: plan.vel_rad_s,
                episode,
            };
            if let Some(mut old) = inj.observation(deadline, &fresh) {
                old.t_cycle = deadline;
                self.observations.publish(&old);
            }
        } else {
            self.observations.publish_with(|o| {
                o.seq = seq;
                o.t_capture = fb.t_capture;
                o.t_cycle = deadline;
                o.dof = fb.dof;
                o.pos_rad = fb.pos_rad;
                o.vel_rad_s = fb.vel_rad_s;
                o.torque_nm = fb.torque_nm;
                o.cmd_pos_rad = cmd.pos_rad;
                o.cmd_vel_rad_s = commanded.vel_rad_s;
                o.plan_pos_rad = plan.pos_rad;
                o.plan_vel_rad_s = plan.vel_rad_s;
                o.episode = episode;
            });
        }
    }

    /// The arm as a camera sees it (for the synthetic camera): the measurement, never
    /// delayed by `[inject]`.
    #[inline]
    fn publish_world(&mut self, deadline: MonoTime) {
        let Some(world) = self.world.as_mut() else {
            return;
        };
        let fb = &self.fb;
        let seq = self.cycle;
        world.publish_with(|o| {
            o.seq = seq;
            o.t_capture = fb.t_capture;
            o.t_cycle = deadline;
            o.dof = fb.dof;
            o.pos_rad = fb.pos_rad;
            o.vel_rad_s = fb.vel_rad_s;
        });
    }

    /// The executor's mode changes of this cycle, as event records.
    #[inline]
    fn log_mode_events(&mut self) {
        while let Some(ev) = self.executor.pop_event() {
            self.events_out.push(EventRecord::Mode(ev));
            if ev.from == Mode::Playing {
                self.episode_withdrawn(ev.t, ev.reason);
            }
        }
    }

    /// The cycle record: times, mode (as it was when the command was made), gate
    /// mask, chunk ages and latencies, and the largest tracking error.
    #[inline]
    fn record_cycle(&mut self, slot: Slot, mode: Mode, mask: GateMask, sent: Sent, track_err: f64) {
        let (mut handoff_ns, mut e2e_ns, mut chunk_age_ns) = (0, 0, 0);
        if let Some(info) = self.executor.current_chunk() {
            chunk_age_ns = slot.wake.saturating_since(info.t_obs);
        }
        if let Some(info) = self.executor.first_use() {
            handoff_ns = slot.wake.saturating_since(info.t_publish).max(1);
            e2e_ns = sent.t_cmd.saturating_since(info.t_obs).max(1);
        }
        let mut gate_joint_mask = [0u32; MAX_DOF];
        if mask.0 != 0 {
            for iv in self.gate.interventions() {
                gate_joint_mask[(iv.joint as usize).min(MAX_DOF - 1)] |= iv.mask.0;
            }
        }
        self.cycles_out.push(CycleRecord {
            cycle: self.cycle,
            t_deadline: slot.deadline,
            t_wake: slot.wake,
            t_cmd: sent.t_cmd,
            t_fb: sent.t_fb,
            t_done: (self.clock)(),
            missed: slot.missed,
            mode: mode as u8,
            gate_mask: mask.0,
            chunk_seq: self.cmd.chunk_seq,
            chunk_age_ns,
            handoff_ns,
            e2e_ns,
            bus_rtt_ns: self.fb.bus_rtt_ns,
            sync_phase_ns: self.fb.sync_phase_ns,
            backend_error: sent.backend_error,
            fb_held: self.fb.held,
            track_err_rad: track_err,
            dof: self.dof as u16,
            setpoint_pos_rad: self.setpoint.pos_rad,
            base_pos_rad: self.base,
            residual_rad: self
                .residual
                .as_deref()
                .map_or([0.0; MAX_DOF], |r| r.applied().pos_rad),
            residual: self.residual.is_some(),
            gate_joint_mask,
            episode: self.cycle_episode,
            cmd_pos_rad: self.cmd.pos_rad,
            fb_pos_rad: self.fb.pos_rad,
            fb_torque_nm: self.fb.torque_nm,
            drive_state: self.fb.state,
            thermal_load: self.thermal_loads().unwrap_or([f64::NAN; MAX_DOF]),
            wrench: self.fb.wrench,
        });
    }
}

/// One cycle's times, as the schedule hands them to [`ControlLoop::cycle`].
#[derive(Clone, Copy)]
struct Slot {
    /// The absolute time the thread slept for.
    deadline: MonoTime,
    /// When it woke.
    wake: MonoTime,
    /// Deadlines skipped before it.
    missed: u32,
}

/// What the exchange stage reports to the records.
#[derive(Clone, Copy)]
struct Sent {
    /// When the command was handed to the backend.
    t_cmd: MonoTime,
    /// When the backend's exchange returned.
    t_fb: MonoTime,
    /// The exchange failed.
    backend_error: bool,
}

mod episode_stage;
mod force_stage;
#[cfg(test)]
mod tests;
