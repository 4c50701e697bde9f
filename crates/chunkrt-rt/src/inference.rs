//! The inference thread: an absolute schedule, one chunk per period, phase-locked
//! to the control loop's deadline grid.
//!
//! Each chunk period starts on a control tick: the thread wakes just before the first
//! tick at or after its nominal (absolute, drift-free) time and takes the observation
//! that tick captures. Left free-running, the 50 ms schedule would drift across the
//! 20 ms control grid: the observation it reads would be anything from fresh to one
//! period old (a race when a wake lands on a tick), and the command derived from it
//! would leave one or two ticks later, a whole control period of end-to-end jitter.
//! Locked to the grid, the observation is always the tick's own (its age is the
//! cycle's compute time) and the first command from the chunk leaves on the next tick
//! whenever inference fits one control period. When the bus period does not divide
//! the chunk period (50 ms on a 20 ms grid) the chunk intervals alternate around the
//! nominal one (40/60 ms) and average it exactly.

use crate::os;
use chunkrt_buffer::{Publisher, Subscriber};
use chunkrt_core::{Chunk, MonoTime, Observation, Policy};
use chunkrt_telemetry::{InferProducer, InferRecord, InferStatus};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// What the inference thread needs.
pub struct InferenceParts {
    /// The policy.
    pub policy: Box<dyn Policy>,
    /// Observations from the control loop.
    pub observations: Subscriber<Observation>,
    /// Chunks to the control loop.
    pub chunks: Publisher<Chunk>,
    /// Inference records to telemetry.
    pub records: InferProducer,
    /// Chunk period.
    pub period_ns: u64,
    /// The control loop's deadline grid the schedule is locked to.
    pub grid: Arc<ControlGrid>,
    /// Time of setpoint 0 relative to the observation (signed ns).
    pub start_offset_ns: i64,
    /// Extrapolate the measured positions by velocity x the observation's age.
    pub extrapolate: bool,
    /// Set by the runtime to end the loop.
    pub stop: Arc<AtomicBool>,
    /// Set by this thread when the policy panicked (the control loop then stops safely).
    pub failed: Arc<AtomicBool>,
    /// Injected inference delay and dropped chunks (`[inject]`, issue 8).
    pub inject: crate::inject::InferenceInjection,
    /// A copy of every published chunk, for the recording (none: not recorded).
    pub chunk_records: Option<chunkrt_telemetry::ChunkProducer>,
    /// This thread's own count of the chunks it handed over (for the report's
    /// reconciliation; inference records can be lost to a full ring, these cannot).
    pub handoff: Arc<HandoffCounts>,
    /// Candidates per chunk and how to choose among them (`crate::select`).
    pub selection: crate::select::SelectionConfig,
    /// A recorded run's chunks replayed (`policy.draw_schedule`), ascending by
    /// cycle. Empty: the thread's own schedule, drawn within the budget, the best
    /// published.
    pub draw_schedule: Vec<Replayed>,
    /// The camera, for a policy that takes an image (none: no camera).
    pub camera: Option<crate::camera::CameraFeed>,
    /// The residual policy, run on each published chunk's observation (none: the base
    /// alone).
    pub residual: Option<ResidualStage>,
    /// `[episodes]`: the reset planner between episodes, the episode's goal to the
    /// policy (none: one continuous run).
    pub episodes: Option<EpisodeDriver>,
    /// Where a chunk's setpoints must lie to be published (`crate::ingest`): a chunk
    /// with one outside is refused here, counted, and never offered to the executor.
    pub bounds: crate::ingest::SetpointBounds,
}

/// The inference thread's side of `[episodes]`: the control loop says which episode and
/// phase the arm is in (`Observation::episode`). In a reset the reset planner (the
/// scripted planner toward the episode's start pose, at `reset_vel_rad_s`) takes the
/// policy's place and its chunks are published; when the episode runs the policy comes
/// back, told the episode's goal (`Policy::begin_episode`, the residual too). Every
/// chunk is tagged with the episode and phase of its observation.
pub struct EpisodeDriver {
    plan: chunkrt_core::EpisodePlan,
    reset_vel_rad_s: f64,
    reset_acc_rad_s2: f64,
    /// The policy, parked while the reset planner plays.
    parked: Option<Box<dyn Policy>>,
    current: Option<chunkrt_core::EpisodeTag>,
}

impl EpisodeDriver {
    /// For `plan`, resets at `reset_vel_rad_s` and `reset_acc_rad_s2`.
    pub fn new(
        plan: chunkrt_core::EpisodePlan,
        reset_vel_rad_s: f64,
        reset_acc_rad_s2: f64,
    ) -> Self {
        EpisodeDriver {
            plan,
            reset_vel_rad_s,
            reset_acc_rad_s2,
            parked: None,
            current: None,
        }
    }

    /// The reset planner toward episode `k`'s start pose.
    fn reset_planner(&self, k: u32) -> Result<Box<dyn Policy>, String> {
        let dof = self.plan.dof;
        let start = self.plan.start(k)[..dof].to_vec();
        let mut params = chunkrt_policy::ScriptedParams::new(dof, vec![start]);
        params.max_vel_rad_s = self.reset_vel_rad_s;
        params.max_acc_rad_s2 = self.reset_acc_rad_s2;
        params.goal_tolerance_rad = (self.plan.reset_tolerance_rad * 0.2).max(1e-4);
        let planner = chunkrt_policy::ScriptedPolicy::new(params).map_err(|e| e.to_string())?;
        Ok(Box::new(planner))
    }
}

/// The residual policy on the inference thread: for every base chunk published, the
/// correction computed from the same observation, stamped with the base chunk's
/// sequence number and times, published first on its own handoff. A residual that
/// fails (an error, a panic) gives an empty correction chunk, which the control loop
/// refuses: that base chunk plays without a correction.
pub struct ResidualStage {
    policy: Box<dyn Policy>,
    chunks: Publisher<Chunk>,
    chunk: Box<Chunk>,
}

impl ResidualStage {
    /// The residual `policy` publishing on `chunks`.
    pub fn new(policy: Box<dyn Policy>, chunks: Publisher<Chunk>) -> Self {
        ResidualStage {
            policy,
            chunks,
            chunk: Box::default(),
        }
    }

    /// Computes the correction for `base` (stamped, not yet published) from `obs` (and
    /// `base`, for a residual that conditions on its base's chunk). A correction from an
    /// observation outside the residual's own declared domain is withheld like a failed
    /// one: a residual is not trusted where it was not trained.
    fn compute(&mut self, obs: &Observation, base: &Chunk) -> Correction {
        let (policy, out) = (&mut self.policy, &mut *self.chunk);
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            policy.observe_base(base)?;
            policy.infer(obs, out)
        }));
        let outcome = match result {
            Ok(Ok(info)) if info.out_of_domain => Correction::OutOfDomain,
            Ok(Ok(_)) => match first_non_finite(out) {
                Some((i, j)) => {
                    tracing::warn!(
                        "the residual's correction {} is {} at setpoint {i}, joint {j}: this \
                         chunk plays without it",
                        base.seq,
                        out.pos_rad[i][j]
                    );
                    Correction::NonFinite
                }
                None => Correction::Computed,
            },
            Ok(Err(e)) => {
                tracing::warn!("residual inference failed: {e}");
                Correction::Failed
            }
            Err(_) => {
                tracing::warn!("the residual policy panicked; this chunk plays without it");
                Correction::Failed
            }
        };
        if outcome != Correction::Computed {
            self.chunk.len = 0;
        }
        let c = &mut *self.chunk;
        c.seq = base.seq;
        c.t_obs = base.t_obs;
        c.t_start = base.t_start;
        c.play_at_cycle = base.play_at_cycle;
        outcome
    }

    /// Publishes the correction computed last, stamped `t_publish`.
    fn publish(&mut self, t_publish: MonoTime) {
        self.chunk.t_publish = t_publish;
        self.chunks.publish(&self.chunk);
    }
}

/// The first non-finite value of a chunk's setpoints (setpoint, joint), if any.
fn first_non_finite(c: &Chunk) -> Option<(usize, usize)> {
    let (n, dof) = (
        (c.len as usize).min(c.pos_rad.len()),
        (c.dof as usize).min(chunkrt_core::MAX_DOF),
    );
    c.pos_rad[..n].iter().enumerate().find_map(|(i, row)| {
        row[..dof]
            .iter()
            .position(|x| !x.is_finite())
            .map(|j| (i, j))
    })
}

/// What became of a residual's correction for one base chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Correction {
    /// Computed and handed over.
    Computed,
    /// Computed with a non-finite value (NaN, infinite): withheld.
    NonFinite,
    /// The observation was outside the residual's declared domain: withheld.
    OutOfDomain,
    /// The residual failed (an error, a panic): withheld.
    Failed,
}

/// One chunk of a recorded run, replayed (`policy.draw_schedule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// The cycle whose observation the chunk is computed from.
    pub cycle: u64,
    /// Candidates drawn, whatever the time budget.
    pub drawn: u16,
    /// The candidate published.
    pub chosen: u16,
    /// The cycle the control loop takes it up in, not before (0: as it arrives).
    pub played: u64,
}

impl Replayed {
    /// `policy.draw_schedule` (validated: counts within `policy.candidates`).
    pub fn schedule(p: &chunkrt_config::PolicyConfig) -> Vec<Replayed> {
        p.draw_schedule
            .iter()
            .map(|&[cycle, drawn, chosen, played]| Replayed {
                cycle,
                drawn: u16::try_from(drawn).unwrap_or(u16::MAX),
                chosen: u16::try_from(chosen).unwrap_or(u16::MAX),
                played,
            })
            .collect()
    }
}

/// Chunks the inference thread handed to the control loop, counted at the source.
#[derive(Debug, Default)]
pub struct HandoffCounts {
    /// Chunks published into the triple buffer.
    pub published: AtomicU64,
    /// Published chunks that replaced one the control loop had not read yet (the
    /// overwritten chunk is never offered to the executor).
    pub overwritten: AtomicU64,
    /// Replayed chunks (`policy.draw_schedule`) whose cycle's observation was gone
    /// when the thread got to it (a later one was taken): the run left the recorded
    /// one's timing.
    pub replay_late: AtomicU64,
    /// Base chunks whose correction the residual policy failed to compute (an error or
    /// a panic): they played without one.
    pub residual_failed: AtomicU64,
    /// Base chunks whose observation lay outside the residual's declared domain: they
    /// played without a correction.
    pub residual_out_of_domain: AtomicU64,
    /// Base chunks whose correction held a non-finite value (NaN, infinite): they played
    /// without one.
    pub residual_non_finite: AtomicU64,
    /// Periods whose policy call failed (an error, a server's failure): no chunk.
    pub failed: AtomicU64,
    /// Chunks refused before publishing because a setpoint lay outside its joint's
    /// bounds (`crate::ingest`): never offered to the executor.
    pub out_of_bounds: AtomicU64,
}

impl HandoffCounts {
    /// Why the policy produced no usable chunk in the whole run (it was asked, and
    /// every answer failed or was refused), or `None` when it produced one or was never
    /// asked.
    pub fn no_usable_chunk(&self) -> Option<String> {
        let failed = self.failed.load(Ordering::Relaxed);
        let refused = self.out_of_bounds.load(Ordering::Relaxed);
        (self.published.load(Ordering::Relaxed) == 0 && failed + refused > 0).then(|| {
            format!(
                "the policy produced no usable chunk: {failed} inference call(s) failed and \
                 {refused} chunk(s) were refused for setpoints outside the joints' bounds; the \
                 arm held where it was"
            )
        })
    }
}

/// The control loop's deadlines are `origin + k * period`; the control thread sets the
/// origin when its loop starts (0 until then).
#[derive(Debug)]
pub struct ControlGrid {
    origin_ns: AtomicU64,
    period_ns: u64,
}

impl ControlGrid {
    /// A grid of this period whose origin is not set yet.
    pub fn new(period_ns: u64) -> Self {
        ControlGrid {
            origin_ns: AtomicU64::new(0),
            period_ns: period_ns.max(1),
        }
    }

    /// Called by the control thread with the time its deadlines count from.
    pub fn start(&self, origin: MonoTime) {
        self.origin_ns
            .store(origin.as_ns().max(1), Ordering::Release);
    }

    /// Moves the origin by `ns` (the control loop's phase lock to SYNC0 moved its
    /// deadlines); the origin stays set.
    pub fn shift(&self, ns: i64) {
        let _ = self
            .origin_ns
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                (o != 0).then(|| o.saturating_add_signed(ns).max(1))
            });
    }

    /// The origin, once the control loop has started.
    pub fn origin(&self) -> Option<MonoTime> {
        match self.origin_ns.load(Ordering::Acquire) {
            0 => None,
            ns => Some(MonoTime(ns)),
        }
    }

    /// The control period.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }
}

/// How long before a tick the thread wakes to be ready for the tick's observation.
fn wake_guard_ns(control_period_ns: u64) -> u64 {
    (control_period_ns / 2).min(1_000_000)
}

/// Sleep between polls for the tick's observation (a normal-priority thread; the
/// control thread is never asked to signal, it makes no syscall for us).
const POLL_NS: u64 = 50_000;

/// Takes the observation the control loop publishes for `tick`: wakes a little before
/// the tick, discards what was published before it, then polls until a new one
/// arrives at or after the tick. When none arrives within one control period (the
/// control loop stalled or stopped) it returns the newest it has, whose age the
/// `obs_age` metric then shows.
///
/// Replaying a recorded run, `cycle` names the cycle whose observation is wanted
/// (`tick` is then only when to wake for it): taken at or after that cycle, by
/// its number.
fn observation_at(
    observations: &mut Subscriber<Observation>,
    tick: MonoTime,
    cycle: Option<u64>,
    control_period_ns: u64,
    stop: &AtomicBool,
) -> Observation {
    os::sleep_until(MonoTime(
        tick.as_ns()
            .saturating_sub(wake_guard_ns(control_period_ns)),
    ));
    let give_up = tick.add_ns(control_period_ns);
    loop {
        observations.update();
        let now = os::now();
        // Only the tick's own cycle (or a later one) will do: a thread that wakes
        // after the tick but before that cycle published finds the previous cycle's
        // observation still unread.
        let latest = observations.peek();
        let arrived = match cycle {
            Some(c) => latest.seq >= c && latest.t_capture.is_set(),
            None => latest.t_cycle >= tick,
        };
        if arrived {
            break;
        }
        if now >= give_up || stop.load(Ordering::Relaxed) {
            break;
        }
        os::sleep_until(now.add_ns(POLL_NS));
    }
    *observations.peek()
}

/// The control tick the next chunk starts on, and the slot after it, for a thread
/// that is ready at `now` with `nominal` the slot it was due at.
///
/// On time (`now` at or before the slot's tick) the chunk starts on the first control
/// tick at or after the slot, and the next slot is one chunk period later: the
/// absolute schedule. Late (the previous inference ran past this slot's tick) it
/// starts on the first control tick at or after `now`, the soonest observation there
/// is, and the schedule starts again from that tick: one chunk at a time, a chunk
/// period apart at the least, never a burst to catch up. Waiting instead for the
/// next slot of the old schedule would leave the thread idle for up to a chunk
/// period while the chunk being played, already late, ages towards
/// `max_chunk_age_ms` (a DDPM policy at 50 ms lost a chunk that way: the next slot
/// was 60 ms after an inference of 102 ms ended, and its chunk came 13 ms after the
/// old one expired).
pub fn next_slot(
    origin: MonoTime,
    nominal: MonoTime,
    period_ns: u64,
    control_period_ns: u64,
    now: MonoTime,
) -> (MonoTime, MonoTime) {
    let tick = origin.grid_at_or_after(control_period_ns, nominal);
    if now <= tick {
        (tick, nominal.add_ns(period_ns))
    } else {
        let tick = origin.grid_at_or_after(control_period_ns, now);
        (tick, tick.add_ns(period_ns))
    }
}

/// How the inference thread ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InferenceExit {
    /// Stopped on request.
    Stopped,
    /// The policy panicked; the control loop went on with its fallback.
    Panicked(String),
}

/// `obs` with its measured positions moved on by the measured velocity times its
/// age at `now` (a joint with a non-finite velocity is left where it was measured).
pub fn extrapolated(obs: &Observation, now: MonoTime) -> Observation {
    let age_s = now.saturating_since(obs.t_capture) as f64 * 1e-9;
    let mut out = *obs;
    let dof = (obs.dof as usize).min(chunkrt_core::MAX_DOF);
    for j in 0..dof {
        let v = obs.vel_rad_s[j];
        if v.is_finite() {
            out.pos_rad[j] += v * age_s;
        }
    }
    out
}

/// Runs until `stop`: every period, the observation of a control tick -> policy ->
/// stamped chunk.
pub fn run(p: InferenceParts) -> InferenceExit {
    let mut inf = Inference::new(p);
    let Some(origin) = inf.wait_for_grid() else {
        return InferenceExit::Stopped;
    };
    let control_period_ns = inf.control_period_ns;
    let mut nominal = origin.add_ns(inf.p.period_ns);
    let mut replayed = 0;
    while !inf.p.stop.load(Ordering::Relaxed) {
        let tick;
        let mut cycle = None;
        if let Some(r) = inf.p.draw_schedule.get(replayed) {
            // A recorded run replayed: its next chunk's cycle, whatever our own
            // schedule says. The cycle's deadline is `origin + cycle * period` when
            // none was skipped (later when some were): woken for the one before it,
            // the wait is by the cycle's number.
            replayed += 1;
            cycle = Some(r.cycle);
            let before = r.cycle.saturating_sub(1).saturating_mul(control_period_ns);
            tick = origin.add_ns(before);
            nominal = tick.add_ns(inf.p.period_ns);
        } else {
            (tick, nominal) = next_slot(
                origin,
                nominal,
                inf.p.period_ns,
                control_period_ns,
                os::now(),
            );
        }
        let obs = observation_at(
            &mut inf.p.observations,
            tick,
            cycle,
            control_period_ns.saturating_mul(if cycle.is_some() { 3 } else { 1 }),
            &inf.p.stop,
        );
        if inf.p.stop.load(Ordering::Relaxed) {
            break;
        }
        if !obs.t_capture.is_set() {
            continue; // the control loop has not measured anything yet
        }
        if cycle.is_some_and(|c| obs.seq != c) {
            inf.p.handoff.replay_late.fetch_add(1, Ordering::Relaxed);
        }
        if let Err(Skip::Exit(exit)) = inf.one_chunk(tick, obs) {
            return exit;
        }
    }
    InferenceExit::Stopped
}

/// Why a period gave no chunk.
enum Skip {
    /// This period's chunk is not published (recorded); the next period tries again.
    Period,
    /// The policy panicked: the thread ends.
    Exit(InferenceExit),
}

/// When the parts of an observation were captured.
#[derive(Clone, Copy)]
struct Stamp {
    /// An observation is as old as its oldest part (the measurement or the image).
    t_oldest: MonoTime,
    /// The camera image's capture time (zero: no camera).
    t_image: MonoTime,
    /// The camera image's sequence number (0: no camera, or no frame yet).
    image_seq: u64,
}

impl Stamp {
    /// The inference record of a period with this observation.
    fn record(
        &self,
        obs: &Observation,
        t_begin: MonoTime,
        t_end: MonoTime,
        status: InferStatus,
    ) -> InferRecord {
        InferRecord {
            t_obs: self.t_oldest,
            obs: *obs,
            t_begin,
            t_end,
            status,
            t_image: self.t_image,
            image_seq: self.image_seq,
            ..InferRecord::default()
        }
    }
}

/// A chunk's outcome: the first candidate's, or a later one's failure.
type Outcome = std::thread::Result<Result<chunkrt_core::InferInfo, chunkrt_core::PolicyError>>;

/// The candidates drawn in one period, and which one is published.
struct Drawn {
    chosen: usize,
    /// The chosen candidate's seam mismatch, and the first one's.
    seam_cost: f64,
    cost_first: f64,
    /// Candidates drawn.
    drawn: u16,
    /// The cycle the control loop takes it up in, replayed (0: as it arrives).
    played: u64,
}

/// The inference thread's state between periods.
struct Inference {
    p: InferenceParts,
    chunk: Box<Chunk>,
    select: crate::select::Selection,
    seq: u64,
    control_period_ns: u64,
}

impl Inference {
    fn new(p: InferenceParts) -> Self {
        let chunk = Box::new(Chunk::default());
        let select = crate::select::Selection::new(p.selection);
        let control_period_ns = p.grid.period_ns();
        Inference {
            p,
            chunk,
            select,
            seq: 0,
            control_period_ns,
        }
    }

    /// The control grid's origin, once the control loop has started (None: stopped
    /// before).
    fn wait_for_grid(&self) -> Option<MonoTime> {
        loop {
            if self.p.stop.load(Ordering::Relaxed) {
                return None;
            }
            match self.p.grid.origin() {
                Some(t) => return Some(t),
                None => os::sleep_until(os::now().add_ns(POLL_NS)),
            }
        }
    }

    /// One period from the tick's observation: the camera image, the candidates, the
    /// outcome, the injected delay or drop, the published chunk.
    fn one_chunk(&mut self, tick: MonoTime, obs: Observation) -> Result<(), Skip> {
        let t_begin = os::now();
        crate::supervise::check_panic(&mut self.p.inject.panic, t_begin);
        self.follow_episode(&obs)?;
        let stamp = self.give_image(&obs, t_begin)?;
        let obs = if self.p.extrapolate {
            extrapolated(&obs, t_begin)
        } else {
            obs
        };
        // The new chunk is first played on the next control deadline.
        let t_first = tick.add_ns(self.control_period_ns);
        let (result, drawn) = self.draw_candidates(&obs, t_begin, t_first, stamp.t_oldest);
        *self.chunk = *self.select.candidates[drawn.chosen];
        let info = match result {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => {
                tracing::warn!("inference failed: {e}");
                self.p.handoff.failed.fetch_add(1, Ordering::Relaxed);
                let record = stamp.record(&obs, t_begin, os::now(), InferStatus::Failed);
                self.p.records.push(record);
                return Err(Skip::Period);
            }
            Err(panic) => return Err(Skip::Exit(self.policy_panicked(&*panic))),
        };
        self.check_bounds(&obs, t_begin, stamp)?;
        self.inject_delay_or_drop(&obs, t_begin, stamp, &info)?;
        self.publish(&obs, t_begin, stamp, &info, &drawn);
        Ok(())
    }

    /// With `[episodes]`: the reset planner in the policy's place during a reset, the
    /// policy back (told the episode's goal) when the episode runs; nothing once done.
    fn follow_episode(&mut self, obs: &Observation) -> Result<(), Skip> {
        let (Some(ep), Some(tag)) = (self.p.episodes.as_mut(), obs.episode) else {
            return Ok(());
        };
        if ep.current == Some(tag) {
            return Ok(());
        }
        use chunkrt_core::Phase;
        match tag.phase {
            Phase::Done => return Err(Skip::Period),
            Phase::Reset => match ep.reset_planner(tag.index) {
                Ok(planner) => {
                    let policy = std::mem::replace(&mut self.p.policy, planner);
                    ep.parked.get_or_insert(policy);
                }
                Err(e) => {
                    tracing::warn!("reset planner: {e}");
                    return Err(Skip::Period);
                }
            },
            Phase::Running => {
                if let Some(policy) = ep.parked.take() {
                    self.p.policy = policy;
                }
                let goal = *ep.plan.goal(tag.index);
                self.p.policy.begin_episode(&goal);
                if let Some(r) = self.p.residual.as_mut() {
                    r.policy.begin_episode(&goal);
                }
            }
        }
        ep.current = Some(tag);
        Ok(())
    }

    /// The camera image, when there is a camera: the newest frame, judged by its age
    /// now. A stale image gives no chunk (the one being played ages out and the
    /// executor takes authority as for any stale chunk); an image the policy refuses
    /// neither, and one it panics on ends the thread.
    fn give_image(&mut self, obs: &Observation, t_begin: MonoTime) -> Result<Stamp, Skip> {
        let mut stamp = Stamp {
            t_oldest: obs.t_capture,
            t_image: MonoTime::ZERO,
            image_seq: 0,
        };
        let Some(cam) = self.p.camera.as_mut() else {
            return Ok(stamp);
        };
        cam.frames.update();
        let frame = cam.frames.peek();
        stamp.t_image = frame.t_capture;
        stamp.image_seq = frame.seq;
        if frame.seq == 0 || t_begin.saturating_since(frame.t_capture) > cam.max_age_ns {
            if frame.seq != 0 {
                stamp.t_oldest = frame.t_capture.min(obs.t_capture);
            }
            let record = stamp.record(obs, t_begin, t_begin, InferStatus::StaleImage);
            self.p.records.push(record);
            return Err(Skip::Period);
        }
        stamp.t_oldest = frame.t_capture.min(obs.t_capture);
        let image = chunkrt_core::ImageRef {
            seq: frame.seq,
            t_capture: frame.t_capture,
            height: frame.height as usize,
            width: frame.width as usize,
            rgb: frame.pixels(),
        };
        let policy = &mut self.p.policy;
        let given = std::panic::catch_unwind(AssertUnwindSafe(|| policy.observe_image(&image)));
        if matches!(given, Ok(Ok(()))) {
            return Ok(stamp);
        }
        if let Ok(Err(e)) = &given {
            tracing::warn!("camera image refused: {e}");
        }
        let record = stamp.record(obs, t_begin, os::now(), InferStatus::Failed);
        self.p.records.push(record);
        if given.is_err() {
            self.p.failed.store(true, Ordering::Release);
            let msg = "policy panicked on a camera image".into();
            return Err(Skip::Exit(InferenceExit::Panicked(msg)));
        }
        Err(Skip::Period)
    }

    /// Draws the candidates (one unless selection asks for more, within the budget)
    /// and picks the one whose start matches the trajectory being played best.
    fn draw_candidates(
        &mut self,
        obs: &Observation,
        t_begin: MonoTime,
        t_first: MonoTime,
        t_oldest: MonoTime,
    ) -> (Outcome, Drawn) {
        let select = &mut self.select;
        let mut best: Option<(usize, f64)> = None;
        let mut cost_first = 0.0;
        let mut drawn = 0u16;
        let mut result = Ok(Ok(chunkrt_core::InferInfo::default()));
        let sched = &self.p.draw_schedule;
        let replayed = sched
            .binary_search_by_key(&obs.seq, |d| d.cycle)
            .ok()
            .map(|k| sched[k]);
        let replay = replayed.map(|r| {
            (
                usize::from(r.drawn).min(select.count()),
                usize::from(r.chosen),
            )
        });
        for i in 0..select.count() {
            let more = match replay {
                Some((n, _)) => i < n,
                None => i == 0 || select.within_budget(os::now().saturating_since(t_begin)),
            };
            if !more {
                break;
            }
            let policy = &mut self.p.policy;
            let out = &mut *select.candidates[i];
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| policy.infer(obs, out)));
            let ok = matches!(r, Ok(Ok(_)));
            if i == 0 || !ok {
                // The first candidate's outcome is the chunk's (a later failure ends
                // the drawing; the candidates drawn so far stand).
                if i == 0 || best.is_none() {
                    result = r;
                }
                if !ok {
                    break;
                }
            }
            drawn += 1;
            let c = &mut *select.candidates[i];
            c.t_obs = t_oldest;
            c.t_start = obs.t_capture.add_signed_ns(self.p.start_offset_ns);
            let cost = select.mismatch_of(i, t_first);
            if i == 0 {
                cost_first = cost;
            }
            let pick = match replay {
                Some((_, c)) => i == c,
                None => best.is_none_or(|(_, b)| cost < b),
            };
            if pick || best.is_none() {
                best = Some((i, cost));
            }
        }
        let (chosen, seam_cost) = best.unwrap_or((0, 0.0));
        let picked = Drawn {
            chosen,
            seam_cost,
            cost_first,
            drawn,
            played: replayed.map_or(0, |r| r.played),
        };
        (result, picked)
    }

    /// The policy panicked: the control loop brings the arm to rest.
    fn policy_panicked(&self, panic: &(dyn std::any::Any + Send)) -> InferenceExit {
        let msg = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        tracing::error!("policy panicked: {msg}; the control loop brings the arm to rest");
        self.p.failed.store(true, Ordering::Release);
        InferenceExit::Panicked(msg)
    }

    /// Refuses the chosen chunk when a setpoint lies outside its joint's bounds: counted,
    /// recorded with where it lay, never published.
    fn check_bounds(
        &mut self,
        obs: &Observation,
        t_begin: MonoTime,
        stamp: Stamp,
    ) -> Result<(), Skip> {
        let Some(o) = self.p.bounds.first_outside(&self.chunk) else {
            return Ok(());
        };
        self.p.handoff.out_of_bounds.fetch_add(1, Ordering::Relaxed);
        self.p.records.push(InferRecord {
            out_of_bounds: Some(o),
            ..stamp.record(obs, t_begin, os::now(), InferStatus::OutOfBounds)
        });
        Err(Skip::Period)
    }

    /// Injected inference delay, then maybe a dropped chunk (issue 8): the chunk was
    /// computed, and is held back or never published, as a slow or lossy link would.
    fn inject_delay_or_drop(
        &mut self,
        obs: &Observation,
        t_begin: MonoTime,
        stamp: Stamp,
        info: &chunkrt_core::InferInfo,
    ) -> Result<(), Skip> {
        let (inject_delay_ns, inject_drop) = self.p.inject.decide();
        if inject_delay_ns > 0 {
            os::sleep_until(os::now().add_ns(inject_delay_ns));
        }
        if !inject_drop {
            return Ok(());
        }
        self.p.records.push(InferRecord {
            steps: info.steps,
            steps_nominal: info.steps_nominal,
            step_ns: info.step_ns,
            out_of_domain: info.out_of_domain,
            goal: info.goal,
            remote_rtt_ns: info.remote_rtt_ns,
            server_ns: info.server_ns,
            reconnects: info.reconnects,
            ..stamp.record(obs, t_begin, os::now(), InferStatus::Dropped)
        });
        Err(Skip::Period)
    }

    /// Stamps and publishes the chosen chunk, counts the handoff, and records it.
    fn publish(
        &mut self,
        obs: &Observation,
        t_begin: MonoTime,
        stamp: Stamp,
        info: &chunkrt_core::InferInfo,
        drawn: &Drawn,
    ) {
        self.seq += 1;
        let chunk = &mut *self.chunk;
        chunk.seq = self.seq;
        chunk.t_obs = stamp.t_oldest;
        chunk.out_of_domain = info.out_of_domain;
        chunk.t_start = obs.t_capture.add_signed_ns(self.p.start_offset_ns);
        chunk.play_at_cycle = drawn.played;
        chunk.episode = obs.episode;
        let runs = obs
            .episode
            .is_none_or(|t| t.phase == chunkrt_core::Phase::Running);
        if let Some(r) = self.p.residual.as_mut().filter(|_| runs) {
            let counter = match r.compute(obs, chunk) {
                Correction::Computed => None,
                Correction::OutOfDomain => Some(&self.p.handoff.residual_out_of_domain),
                Correction::Failed => Some(&self.p.handoff.residual_failed),
                Correction::NonFinite => Some(&self.p.handoff.residual_non_finite),
            };
            if let Some(c) = counter {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        let t_publish = os::now();
        chunk.t_publish = t_publish;
        // The correction first: the control loop takes it when it takes the base.
        if let Some(r) = self.p.residual.as_mut().filter(|_| runs) {
            r.publish(t_publish);
        }
        if self.p.chunks.publish(chunk) {
            self.p.handoff.overwritten.fetch_add(1, Ordering::Relaxed);
        }
        self.select.published(chunk);
        self.p.handoff.published.fetch_add(1, Ordering::Relaxed);
        if let Some(r) = self.p.chunk_records.as_mut() {
            r.push(*chunk);
        }
        self.p.records.push(InferRecord {
            seq: self.seq,
            steps: info.steps,
            steps_nominal: info.steps_nominal,
            step_ns: info.step_ns,
            out_of_domain: info.out_of_domain,
            candidates: drawn.drawn,
            chosen: drawn.chosen as u16,
            seam_cost: drawn.seam_cost as f32,
            seam_cost_first: drawn.cost_first as f32,
            goal: info.goal,
            remote_rtt_ns: info.remote_rtt_ns,
            server_ns: info.server_ns,
            reconnects: info.reconnects,
            ..stamp.record(obs, t_begin, t_publish, InferStatus::Published)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// The inference thread's schedule run through `next_slot` in simulated time: each
    /// inference takes `busy[i]` ns (cycling), the thread is ready again when it ends.
    /// Returns (ready, start) per chunk, the start being the control tick it took.
    fn simulate(period: u64, control: u64, busy: &[u64], n: usize) -> Vec<(u64, u64)> {
        let origin = MonoTime::from_ms(0);
        let mut nominal = origin.add_ns(period);
        let mut ready = origin;
        let mut out = Vec::new();
        for i in 0..n {
            let tick;
            (tick, nominal) = next_slot(origin, nominal, period, control, ready);
            out.push((ready.as_ns(), tick.as_ns()));
            ready = tick.add_ns(busy[i % busy.len()]);
        }
        out
    }

    #[test]
    fn a_50_ms_schedule_on_a_20_ms_grid_alternates_40_60_and_averages_50() {
        let starts: Vec<u64> = simulate(50 * MS, 20 * MS, &[5 * MS], 11)
            .iter()
            .map(|&(_, t)| t)
            .collect();
        let gaps: Vec<u64> = starts.windows(2).map(|w| (w[1] - w[0]) / MS).collect();
        assert!(gaps.iter().all(|&g| g == 40 || g == 60), "{gaps:?}");
        assert_eq!((starts[10] - starts[0]) / MS, 500);
        // On a 1 ms grid the schedule is exact.
        let starts = simulate(50 * MS, MS, &[5 * MS], 10);
        for (n, &(_, t)) in starts.iter().enumerate() {
            assert_eq!(t, 50 * MS * (n as u64 + 1));
        }
    }

    #[test]
    fn an_inference_that_ends_after_its_slot_but_before_the_tick_keeps_the_tick() {
        // Slot 150 ms on a 20 ms grid starts on the tick at 160 ms; an inference that
        // began at 100 ms and ends at 155 ms is in time for it.
        let origin = MonoTime::from_ms(0);
        let (tick, next) = next_slot(
            origin,
            MonoTime::from_ms(150),
            50 * MS,
            20 * MS,
            MonoTime::from_ms(155),
        );
        assert_eq!(tick, MonoTime::from_ms(160));
        assert_eq!(next, MonoTime::from_ms(200));
    }

    #[test]
    fn after_an_overrun_the_next_chunk_starts_on_the_first_tick_after_it_ends() {
        // The failure seen: slot at 7.23 s, the inference before it ended at 7.232 s.
        // The next observation is the 7.25 s tick's, not the next slot's (7.29 s).
        let origin = MonoTime::from_ms(90);
        let (tick, next) = next_slot(
            origin,
            MonoTime::from_ms(7_230),
            50 * MS,
            20 * MS,
            MonoTime(7_232 * MS),
        );
        assert_eq!(tick, MonoTime::from_ms(7_250));
        assert_eq!(next, MonoTime::from_ms(7_300));
        // 45 ms of inference every 50 ms on a 20 ms grid: every chunk starts on the
        // first tick after the one before ended (the thread never waits a whole
        // control period), and no two start closer than a chunk period apart less
        // one control period.
        let run = simulate(50 * MS, 20 * MS, &[45 * MS, 45 * MS, 70 * MS, 120 * MS], 40);
        for w in run.windows(2) {
            let ((_, s0), (ready, s1)) = (w[0], w[1]);
            assert!(s1 >= ready && s1 - ready < 20 * MS, "{run:?}");
            assert!(s1 - s0 >= 30 * MS, "{run:?}");
            assert_eq!(s1 % (20 * MS), 0);
        }
    }

    proptest::proptest! {
        /// Whatever the inference times: each chunk starts on a control tick at or
        /// after the thread is ready, less than a control period after it when the
        /// thread was late for its slot; never less than a chunk period after the
        /// previous start when rounded to the grid (no burst to catch up); and on the
        /// absolute schedule's tick whenever the thread was in time for it.
        #[test]
        fn the_schedule_never_idles_while_late_and_never_bursts(
            control_ms in 1u64..=25,
            period_ms in 10u64..=100,
            busy in proptest::collection::vec(1u64..=250_000, 1..8),
        ) {
            let (control, period) = (control_ms * MS, period_ms * MS);
            let busy: Vec<u64> = busy.iter().map(|b| b * 1_000).collect();
            let run = simulate(period, control, &busy, 60);
            let mut slot = period; // the absolute schedule's slot the thread was due at
            for (i, &(ready, start)) in run.iter().enumerate() {
                proptest::prop_assert_eq!(start % control, 0);
                proptest::prop_assert!(start >= ready);
                let due = slot.div_ceil(control) * control;
                if ready <= due {
                    proptest::prop_assert_eq!(start, due);
                    slot += period;
                } else {
                    proptest::prop_assert!(start - ready < control);
                    slot = start + period;
                }
                if i > 0 {
                    proptest::prop_assert!(start - run[i - 1].1 + control > period);
                }
            }
        }
    }

    /// A residual whose correction is `value` at setpoint 2, joint 1 (0 elsewhere).
    struct Correcting {
        value: f64,
    }

    impl Policy for Correcting {
        fn spec(&self) -> chunkrt_core::PolicySpec {
            chunkrt_core::PolicySpec {
                dof: 3,
                horizon: 4,
                dt_ns: 20 * MS,
            }
        }
        fn infer(
            &mut self,
            _obs: &Observation,
            out: &mut Chunk,
        ) -> Result<chunkrt_core::InferInfo, chunkrt_core::PolicyError> {
            out.len = 4;
            out.dof = 3;
            out.dt_ns = 20 * MS;
            out.pos_rad = [[0.0; chunkrt_core::MAX_DOF]; chunkrt_core::MAX_HORIZON];
            out.pos_rad[2][1] = self.value;
            Ok(chunkrt_core::InferInfo::default())
        }
    }

    #[test]
    fn a_non_finite_correction_is_withheld_and_told_apart() {
        for (value, expected) in [
            (0.01, Correction::Computed),
            (f64::NAN, Correction::NonFinite),
            (f64::INFINITY, Correction::NonFinite),
            (f64::NEG_INFINITY, Correction::NonFinite),
        ] {
            let (publisher, mut corrections) = chunkrt_buffer::channel(Chunk::default());
            let mut stage = ResidualStage::new(Box::new(Correcting { value }), publisher);
            let base = Chunk {
                seq: 7,
                ..Chunk::default()
            };
            assert_eq!(stage.compute(&Observation::default(), &base), expected);
            stage.publish(MonoTime::from_ms(1));
            corrections.update();
            let c = corrections.peek();
            assert_eq!(c.seq, 7);
            // Withheld: the control loop gets an empty correction (it clears the
            // residual's chunk without counting a refusal: this one is counted here).
            assert_eq!(c.len == 0, expected != Correction::Computed, "{value}");
        }
    }

    #[test]
    fn the_observation_is_the_one_published_at_or_after_the_tick() {
        let (mut publisher, mut subscriber) = chunkrt_buffer::channel(Observation::default());
        let stop = Arc::new(AtomicBool::new(false));
        // A generous control period: the writer thread below must publish within it
        // even on a loaded machine, or the reader gives up (a chance failure, seen at
        // load average 8 with 20 ms).
        let period = 500_000_000;
        // The cycle before the tick published, and nobody read it yet; the thread
        // wakes after the tick, before the tick's own cycle publishes (it is late):
        // the unread observation is the previous cycle's and must not be taken.
        let tick = os::now();
        publisher.publish(&Observation {
            seq: 1,
            t_capture: tick.add_signed_ns(-(period as i64) + 100_000),
            t_cycle: tick.add_signed_ns(-(period as i64)),
            ..Observation::default()
        });
        os::sleep_until(tick.add_ns(500_000));
        let writer = std::thread::spawn(move || {
            os::sleep_until(tick.add_ns(2_000_000));
            publisher.publish(&Observation {
                seq: 2,
                t_capture: os::now(),
                t_cycle: tick,
                ..Observation::default()
            });
            publisher
        });
        let obs = observation_at(&mut subscriber, tick, None, period, &stop);
        assert_eq!(obs.seq, 2, "took the previous cycle's observation");
        assert!(obs.t_capture >= tick);
        let _publisher = writer.join().unwrap();
        // Nothing arrives: it gives up after a control period with the newest it has.
        let tick = os::now().add_ns(1_000_000);
        let obs = observation_at(&mut subscriber, tick, None, period, &stop);
        assert_eq!(obs.seq, 2);
        assert!(os::now() >= tick.add_ns(period));
    }
}
