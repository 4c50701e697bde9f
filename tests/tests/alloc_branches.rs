//! The no-allocation proof over every branch of the control thread, not only the
//! happy path (`alloc.rs`): the control thread's real loop body (`Schedule::step`:
//! sleep to the deadline, `ControlLoop::cycle`, re-arm, stop requests, deadline
//! skipping) runs under the counting allocator while the test makes each rare branch
//! happen — rejected chunks, backend errors, drive faults and their recovery, domain
//! exits, every ladder transition and the way back, gate saturation, missed
//! deadlines, the operator re-arm and the controlled stop — and shows from the
//! records it drains (events, cycle records, counters) that each one ran.
//!
//! The loop runs on the test's thread with a clock and a sleep of its own: the
//! inference side (the scripted policy, chunks tampered with on purpose) and the
//! telemetry side (draining the rings) run between steps, uncounted, as they run on
//! other threads in `chunkrt run`. The backend is the simulated arm, with faults posted
//! through `FaultyArm::on_demand`.

use chunkrt_alloc_count::{count_allocations, CountingAllocator};
use chunkrt_buffer::{Publisher, Subscriber};
use chunkrt_config::{Config, ResumeMode};
use chunkrt_core::{
    BackendError, Chunk, Constraint, DomainBox, DriveRequest, Executor, Feedback, Gate, Mode,
    MonoTime, Observation, Policy, RejectReason, MAX_DOF,
};
use chunkrt_rt::inference::ControlGrid;
use chunkrt_rt::schedule::{Schedule, StopRequests};
use chunkrt_rt::{ControlLoop, ControlParts};
use chunkrt_telemetry::EventRecord;
use chunkrt_telemetry::RingConsumers;
use chunkrt_tests::faulty::{ArmFault, FaultyArm};
use chunkrt_tests::sim_config;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// The loop's clock, the re-arm request and the stall are process-wide: one scenario
/// at a time.
static SERIAL: Mutex<()> = Mutex::new(());

static FAKE_NS: AtomicU64 = AtomicU64::new(0);
/// Added to the next wake (a stall past several deadlines), then cleared.
static STALL_NS: AtomicU64 = AtomicU64::new(0);
static WAKES: AtomicU64 = AtomicU64::new(0);

fn fake_now() -> MonoTime {
    MonoTime(FAKE_NS.load(Ordering::Relaxed))
}

/// `os::sleep_until` on the test's clock: wakes 20-38 µs after the deadline (after
/// now when the deadline has passed), later by a pending stall.
fn fake_sleep_until(deadline: MonoTime) {
    let late_ns = 20_000 + (WAKES.fetch_add(1, Ordering::Relaxed) % 7) * 3_000;
    let now = FAKE_NS.load(Ordering::Relaxed).max(deadline.0);
    FAKE_NS.store(
        now + late_ns + STALL_NS.swap(0, Ordering::Relaxed),
        Ordering::Relaxed,
    );
}

/// What the inference side does to a chunk before publishing it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tamper {
    WrongDof,
    WrongLength,
    ZeroDt,
    Nan,
    /// A sequence number below the last accepted one.
    OutOfOrder,
    /// The previous chunk's sequence number again.
    Duplicate,
    /// Computed from an observation older than `max_chunk_age`.
    Old,
    StartTooFar,
    /// Its whole horizon before now.
    HorizonPassed,
    /// Flagged by the policy's own support monitor.
    OutOfDomain,
    /// Joint 6 far past its position limit: the gate holds it off.
    PastLimit,
}

/// Joint 0's operating-domain box (every other joint: +-10 rad): the scripted goals
/// keep joint 0 in [0, 0.6] rad, its replans after a push or a tampered chunk
/// overshoot to about -0.3 rad.
const DOMAIN_LO0_RAD: f64 = -1.0;

/// The control thread under test and the two sides that run around it.
struct Rig {
    control: ControlLoop,
    schedule: Schedule,
    grid: ControlGrid,
    stop: AtomicBool,
    policy_failed: AtomicBool,
    thread_failed: AtomicBool,
    stop_inference: AtomicBool,
    policy: Box<dyn Policy>,
    chunks: Publisher<Chunk>,
    observations: Subscriber<Observation>,
    rings: RingConsumers,
    faults: Publisher<Option<ArmFault>>,
    period_ns: u64,
    chunk: Box<Chunk>,
    seq: u64,
    next_chunk: MonoTime,
    publishing: bool,
    /// Applied to the next chunk only.
    tamper_next: Option<Tamper>,
    /// Applied to every chunk while set.
    tamper_all: Option<Tamper>,
    phase: &'static str,
    /// Counted allocations per phase.
    allocations: BTreeMap<&'static str, u64>,
    counted_steps: u64,
    ended: Option<MonoTime>,
    seen: Evidence,
}

/// What the records show ran.
#[derive(Default, Debug)]
struct Evidence {
    /// Rejections by reason.
    rejects: BTreeMap<&'static str, u64>,
    /// Mode changes, "from -> to (reason)".
    transitions: BTreeMap<String, u64>,
    /// Backend errors by kind.
    backend_errors: BTreeMap<&'static str, u64>,
    gate_saturated: u64,
    gate_interventions: u64,
    cycles: u64,
    cycles_with_backend_error: u64,
    deadlines_missed: u64,
    max_missed: u32,
    /// Requests handed to the backend, by kind.
    requests: BTreeMap<&'static str, u64>,
    /// Cycles whose feedback was outside the domain box.
    cycles_out_of_domain: u64,
    /// Cycles the gate logged the support monitor's flag in (`Domain` constraint).
    domain_flags: u64,
    /// Consecutive cycles up to now that played on track: no gate intervention, no
    /// backend error, every joint within 0.05 rad of its command.
    quiet_cycles: u64,
}

impl Evidence {
    fn transition(&self, from: Mode, to: Mode, reason: &str) -> u64 {
        let key = format!("{from:?} -> {to:?} ({reason})");
        self.transitions.get(&key).copied().unwrap_or(0)
    }
}

fn reject_name(r: &RejectReason) -> &'static str {
    match r {
        RejectReason::NonFinite { .. } => "NonFinite",
        RejectReason::WrongDof { .. } => "WrongDof",
        RejectReason::WrongLength { .. } => "WrongLength",
        RejectReason::StaleSeq { .. } => "StaleSeq",
        RejectReason::DtOutOfRange { .. } => "DtOutOfRange",
        RejectReason::StartTooFar { .. } => "StartTooFar",
        RejectReason::Expired { .. } => "Expired",
        RejectReason::HorizonPassed { .. } => "HorizonPassed",
        RejectReason::NotArmed => "NotArmed",
        RejectReason::PredatesFallback { .. } => "PredatesFallback",
        RejectReason::OutOfDomain => "OutOfDomain",
    }
}

fn backend_error_name(e: &BackendError) -> &'static str {
    match e {
        BackendError::DriveFault { .. } => "DriveFault",
        BackendError::Injected => "Injected",
        _ => "other",
    }
}

impl Rig {
    fn new(cfg: &Config) -> Rig {
        let period_ns = cfg.period_ns();
        let t0 = MonoTime::from_ms(1_000);
        FAKE_NS.store(t0.0, Ordering::Relaxed);
        STALL_NS.store(0, Ordering::Relaxed);
        // A re-arm request left pending by a scenario that failed before its loop
        // took it.
        let _ = chunkrt_rt::signals::take_rearm();

        let arm = chunkrt_sim::SimArm::new(chunkrt_rt::build::sim_params(cfg)).unwrap();
        let (mut backend, faults) = FaultyArm::on_demand(arm);
        let mut first = Feedback::default();
        chunkrt_core::Backend::start(&mut backend, t0, &mut first).unwrap();
        let limits = cfg.joint_limits();
        let (chunk_pub, chunk_sub) = chunkrt_buffer::channel(Chunk::default());
        let (obs_pub, obs_sub) = chunkrt_buffer::channel(Observation::default());
        let (cycle_p, event_p, _infer_p, rings) =
            chunkrt_telemetry::rings(cfg.telemetry.ring_capacity);
        let mut domain = DomainBox {
            dof: cfg.control.joints,
            lo_rad: [-10.0; MAX_DOF],
            hi_rad: [10.0; MAX_DOF],
        };
        domain.lo_rad[0] = DOMAIN_LO0_RAD;
        // Built as `Runtime::run` builds it.
        let control = ControlLoop::new(ControlParts {
            executor: Executor::new(cfg.executor_config(), limits, &first.pos_rad, t0),
            gate: Gate::new(limits, period_ns, &first.pos_rad),
            backend: Box::new(backend),
            chunks: chunk_sub,
            observations: obs_pub,
            cycles_out: cycle_p,
            events_out: event_p,
            domain: Some(domain),
            period_ns,
            first_feedback: first,
            clock: fake_now,
        });
        let (sat_event, sat_fallback) = cfg.gate_saturation_cycles();
        let control = control.with_gate_saturation(sat_event, sat_fallback);
        let grid = ControlGrid::new(period_ns);
        let (schedule, n) =
            count_allocations(|| Schedule::start(&control, &grid, None, fake_sleep_until));
        assert_eq!(grid.origin(), Some(t0));
        Rig {
            control,
            schedule,
            grid,
            stop: AtomicBool::new(false),
            policy_failed: AtomicBool::new(false),
            thread_failed: AtomicBool::new(false),
            stop_inference: AtomicBool::new(false),
            policy: chunkrt_rt::build::policy(cfg).unwrap(),
            chunks: chunk_pub,
            observations: obs_sub,
            rings,
            faults,
            period_ns,
            chunk: Box::new(Chunk::default()),
            seq: 0,
            next_chunk: t0,
            publishing: true,
            tamper_next: None,
            tamper_all: None,
            phase: "start",
            allocations: BTreeMap::from([("start", n)]),
            counted_steps: 0,
            ended: None,
            seen: Evidence::default(),
        }
    }

    /// One pass of the control thread's loop, counted; the other threads' work around it.
    fn step(&mut self) {
        assert!(self.ended.is_none(), "the loop has ended");
        self.inference_side();
        let requests = StopRequests {
            stop: &self.stop,
            policy_failed: &self.policy_failed,
            thread_failed: &self.thread_failed,
            stop_inference: &self.stop_inference,
        };
        let schedule = &mut self.schedule;
        let control = &mut self.control;
        let grid = &self.grid;
        let (ended, n) = count_allocations(|| schedule.step(control, &requests, grid));
        self.ended = ended;
        self.counted_steps += 1;
        *self.allocations.entry(self.phase).or_default() += n;
        self.telemetry_side();
    }

    /// Steps until `done` holds (checked after each step); fails after `max_s` seconds
    /// of loop time.
    fn run_until(&mut self, phase: &'static str, max_s: f64, done: impl Fn(&Rig) -> bool) {
        self.phase = phase;
        let until = fake_now().add_ns((max_s * 1e9) as u64);
        while !done(self) {
            assert!(
                fake_now() < until && self.ended.is_none(),
                "phase {phase}: not done after {max_s} s; mode {:?}; {:#?}",
                self.control.mode(),
                self.seen
            );
            self.step();
        }
    }

    /// Steps for `s` seconds of loop time.
    fn run_for(&mut self, phase: &'static str, s: f64) {
        let until = fake_now().add_ns((s * 1e9) as u64);
        self.run_until(phase, s + 1.0, |_| fake_now() >= until);
    }

    /// Steps until the executor plays again.
    fn until_playing(&mut self, phase: &'static str) {
        self.run_until(phase, 5.0, |r| r.control.mode() == Mode::Playing);
    }

    /// Steps until the arm has played on track for 0.5 s, so that what the next
    /// phase sees is its own doing (a drive rings for a while after a push, and a
    /// policy replanning from a ringing measurement saturates the gate).
    fn settle(&mut self) {
        let cycles = 500_000_000 / self.period_ns;
        self.run_until("settle", 10.0, |r| r.seen.quiet_cycles >= cycles);
    }

    /// Not counted: a chunk every 50 ms from the newest observation, tampered with as
    /// the script asks.
    fn inference_side(&mut self) {
        let now = fake_now();
        if !self.publishing || now < self.next_chunk {
            return;
        }
        self.next_chunk = now.add_ns(50_000_000);
        let _ = self.observations.latest();
        let obs = *self.observations.peek();
        if !obs.t_capture.is_set() {
            return;
        }
        self.policy.infer(&obs, &mut self.chunk).unwrap();
        self.seq += 1;
        // The policy's own chunk stays as it made it; a copy is tampered with.
        let mut chunk = *self.chunk;
        chunk.seq = self.seq;
        chunk.t_obs = obs.t_capture;
        chunk.t_start = obs.t_capture;
        chunk.t_publish = now;
        let len = chunk.len as usize;
        match self.tamper_next.take().or(self.tamper_all) {
            None => {}
            Some(Tamper::WrongDof) => chunk.dof = 3,
            Some(Tamper::WrongLength) => chunk.len = 0,
            Some(Tamper::ZeroDt) => chunk.dt_ns = 0,
            Some(Tamper::Nan) => chunk.pos_rad[len / 2][1] = f64::NAN,
            Some(Tamper::OutOfOrder) => chunk.seq = self.seq.saturating_sub(3),
            Some(Tamper::Duplicate) => chunk.seq = self.seq - 1,
            Some(Tamper::Old) => chunk.t_obs = now.add_signed_ns(-1_000_000_000),
            Some(Tamper::StartTooFar) => chunk.t_start = now.add_ns(5_000_000_000),
            Some(Tamper::HorizonPassed) => chunk.t_start = now.add_signed_ns(-500_000_000),
            Some(Tamper::OutOfDomain) => chunk.out_of_domain = true,
            Some(Tamper::PastLimit) => {
                for row in &mut chunk.pos_rad[..len] {
                    row[6] = 3.5;
                }
            }
        }
        let _ = self.chunks.publish(&chunk);
    }

    /// Not counted: drains the rings and tallies what ran.
    fn telemetry_side(&mut self) {
        let seen = &mut self.seen;
        while let Some(c) = self.rings.pop_cycle() {
            seen.cycles += 1;
            seen.deadlines_missed += u64::from(c.missed);
            seen.max_missed = seen.max_missed.max(c.missed);
            seen.cycles_with_backend_error += u64::from(c.backend_error);
            if c.fb_pos_rad[0] < DOMAIN_LO0_RAD {
                seen.cycles_out_of_domain += 1;
            }
            let quiet = c.mode == Mode::Playing as u8
                && c.gate_mask == 0
                && !c.backend_error
                && c.track_err_rad < 0.05;
            seen.quiet_cycles = if quiet { seen.quiet_cycles + 1 } else { 0 };
        }
        while let Some(e) = self.rings.pop_event() {
            match e {
                EventRecord::Mode(m) => {
                    let key = format!("{:?} -> {:?} ({:?})", m.from, m.to, m.reason);
                    *seen.transitions.entry(key).or_default() += 1;
                }
                EventRecord::Reject { reason, .. } => {
                    *seen.rejects.entry(reject_name(&reason)).or_default() += 1;
                }
                EventRecord::Gate { intervention, .. } => {
                    seen.gate_interventions += 1;
                    if intervention.constraint == Constraint::Domain {
                        seen.domain_flags += 1;
                    }
                }
                EventRecord::GateSaturated { .. } => seen.gate_saturated += 1,
                // No following-error limit, episodes or force tripwire here:
                // tests/tests/alloc.rs counts those paths; the operator's stop is the
                // signals tests'.
                EventRecord::FollowingError { .. }
                | EventRecord::ForceTripwire { .. }
                | EventRecord::OperatorStop { .. }
                | EventRecord::Episode(_)
                | EventRecord::OperatorMark { .. } => {}
                EventRecord::Backend { error, .. } => {
                    *seen
                        .backend_errors
                        .entry(backend_error_name(&error))
                        .or_default() += 1;
                }
            }
        }
        let request = match self.control.last_command().request {
            DriveRequest::Track => "Track",
            DriveRequest::QuickStop => "QuickStop",
            DriveRequest::FaultReset => "FaultReset",
            DriveRequest::Disable => "Disable",
        };
        *seen.requests.entry(request).or_default() += 1;
    }

    fn rejects(&self, reason: &str) -> u64 {
        self.seen.rejects.get(reason).copied().unwrap_or(0)
    }

    fn backend_errors(&self, kind: &str) -> u64 {
        self.seen.backend_errors.get(kind).copied().unwrap_or(0)
    }

    fn requests(&self, kind: &str) -> u64 {
        self.seen.requests.get(kind).copied().unwrap_or(0)
    }

    /// The mode changes so far, to compare with later.
    fn transitions_snapshot(&self) -> Evidence {
        Evidence {
            transitions: self.seen.transitions.clone(),
            ..Evidence::default()
        }
    }

    fn post(&mut self, fault: ArmFault) {
        let _ = self.faults.publish(&Some(fault));
    }

    /// Mode changes with `reason` so far.
    fn reason_count(&self, reason: &str) -> u64 {
        let tail = format!("({reason})");
        self.seen
            .transitions
            .iter()
            .filter(|(k, _)| k.ends_with(&tail))
            .map(|(_, n)| n)
            .sum()
    }

    /// The controlled stop: `stop` set, chunks still arriving (ignored), a re-arm
    /// request (ignored while stopping); steps until the loop ends.
    fn shut_down(&mut self, flag: &'static str) {
        match flag {
            "stop" => self.stop.store(true, Ordering::Relaxed),
            // A thread's panic: the quick stop (drives' own quick stop, bounded wait).
            "panic" => self.thread_failed.store(true, Ordering::Relaxed),
            _ => self.policy_failed.store(true, Ordering::Relaxed),
        }
        let quick_stops = self.requests("QuickStop");
        self.step();
        let rearmed = self.reason_count("Rearmed");
        chunkrt_rt::signals::request_rearm();
        self.run_until("shutdown", 5.0, |r| r.ended.is_some());
        // The loop took the request and ignored it: no re-arm while stopping.
        assert!(!chunkrt_rt::signals::take_rearm());
        assert_eq!(self.reason_count("Rearmed"), rearmed);
        assert!(self.stop_inference.load(Ordering::Relaxed));
        if flag == "panic" {
            // The drives were asked for their own quick stop.
            assert!(self.requests("QuickStop") > quick_stops);
        }
        assert!(self.control.chunks_ignored_stopping() > 0);
        assert!(self.control.command_at_rest());
        assert!(matches!(
            self.control.mode(),
            Mode::Holding | Mode::SafeStop
        ));
        assert!(
            self.seen
                .transition(Mode::Playing, Mode::Decelerating, "Shutdown")
                > 0
        );
    }

    /// The proof: no phase allocated, and the books of the run close.
    fn assert_allocated_nothing(&self) {
        let total: u64 = self.allocations.values().sum();
        assert_eq!(
            total, 0,
            "allocations on the control thread by phase (over {} counted loop steps): {:?}",
            self.counted_steps, self.allocations
        );
        assert_eq!(
            self.seen.cycles,
            self.control.cycles_run(),
            "a cycle record lost"
        );
        assert!(self.control.chunk_counts().reconciles());
    }
}

/// Each scenario's script runs this many times over: a branch that allocated only
/// once warmed up, or only when entered again, is caught either way.
const ROUNDS: usize = 3;

/// `resume = auto`: every branch but the operator's, `ROUNDS` times over.
fn auto_resume_scenario(period_ms: f64) -> Rig {
    let cfg = sim_config(|c| {
        c.control.period_ms = period_ms;
        c.executor.gate_saturated_event_ms = 100.0;
        c.executor.gate_saturated_fallback_ms = 300.0;
    });
    let mut r = Rig::new(&cfg);
    let period_ns = r.period_ns;
    // Counted from the first step on: the start from Holding is no warm-up.
    r.until_playing("start");
    for _ in 0..ROUNDS {
        auto_resume_round(&mut r, period_ns);
    }
    r.run_for("play", 1.0);
    // At 1 ms the run ends as after a thread's panic: the quick stop's branch.
    r.shut_down(if period_ms < 2.0 { "panic" } else { "stop" });
    // The ways back to Playing besides SafeStop's (checked each round), and the
    // chunks refused because they predate a forced fallback.
    let s = &r.seen;
    assert!(s.transition(Mode::Decelerating, Mode::Playing, "FreshChunk") > 0);
    assert!(s.transition(Mode::Holding, Mode::Playing, "FreshChunk") > 0);
    assert!(r.rejects("PredatesFallback") > 0);
    // Two records of the support monitor reconcile: the gate logged its flag once for
    // each measurement outside the box (checked the cycle after) and once for each
    // chunk the policy flagged.
    assert_eq!(
        r.seen.domain_flags,
        r.seen.cycles_out_of_domain + r.rejects("OutOfDomain")
    );
    r
}

/// One pass over the branches with `resume = auto`, each made to happen and seen to.
fn auto_resume_round(r: &mut Rig, period_ns: u64) {
    r.settle();

    // Rejected chunks, each between good ones (the playing chunk keeps playing).
    let rejected = r.seen.rejects.clone();
    for t in [
        Tamper::WrongDof,
        Tamper::WrongLength,
        Tamper::ZeroDt,
        Tamper::Nan,
        Tamper::OutOfOrder,
        Tamper::Duplicate,
        Tamper::Old,
        Tamper::StartTooFar,
        Tamper::HorizonPassed,
    ] {
        r.tamper_next = Some(t);
        r.run_for("rejected chunks", 0.15);
    }
    let new = |r: &Rig, reason| r.rejects(reason) - rejected.get(reason).copied().unwrap_or(0);
    for reason in [
        "WrongDof",
        "WrongLength",
        "DtOutOfRange",
        "NonFinite",
        "Expired",
        "StartTooFar",
        "HorizonPassed",
    ] {
        assert!(new(r, reason) >= 1, "{reason}: {:?}", r.seen.rejects);
    }
    assert!(
        new(r, "StaleSeq") >= 2,
        "out of order and duplicate: {:?} before {rejected:?}",
        r.seen.rejects
    );
    assert_eq!(r.control.mode(), Mode::Playing);

    // The policy's own support monitor: forced fallback, then fresh chunks play again.
    r.settle();
    let n = r.reason_count("OutOfDomain");
    r.tamper_next = Some(Tamper::OutOfDomain);
    r.run_until("policy out of domain", 1.0, |r| {
        r.reason_count("OutOfDomain") > n
    });
    r.until_playing("policy out of domain");

    // The ladder without chunks: Playing -> Decelerating -> Holding -> SafeStop
    // (quick stop requested), then a fresh chunk from SafeStop.
    r.settle();
    let before = r.transitions_snapshot();
    r.publishing = false;
    r.run_until("ladder", 5.0, |r| r.control.mode() == Mode::SafeStop);
    r.run_for("ladder", 0.2);
    assert_eq!(r.control.last_command().request, DriveRequest::QuickStop);
    r.publishing = true;
    r.until_playing("ladder");
    let new = |from, to, reason| {
        r.seen.transition(from, to, reason) - before.transition(from, to, reason)
    };
    assert!(
        new(Mode::Playing, Mode::Decelerating, "ChunkExpired")
            + new(Mode::Playing, Mode::Decelerating, "HorizonEnd")
            > 0
    );
    assert!(new(Mode::Decelerating, Mode::Holding, "AtRest") > 0);
    assert!(new(Mode::Holding, Mode::SafeStop, "SafeStopTimeout") > 0);
    assert!(new(Mode::SafeStop, Mode::Playing, "FreshChunk") > 0);

    // Missed deadlines: wakes 3.5 and 12.5 periods late, while playing.
    r.settle();
    for stall in [7 * period_ns / 2, 25 * period_ns / 2] {
        let missed = r.seen.deadlines_missed;
        STALL_NS.store(stall, Ordering::Relaxed);
        r.run_until("missed deadlines", 1.0, |r| {
            r.seen.deadlines_missed > missed
        });
        r.run_for("missed deadlines", 0.3);
    }
    // A wake 12.5 periods late finds the next 11 deadlines passed.
    assert!(r.seen.max_missed >= 11, "{:?}", r.seen);
    r.until_playing("missed deadlines");

    // Backend errors (lost frames) for 5 exchanges, then recovery.
    r.settle();
    let (n, errors) = (r.reason_count("BackendError"), r.backend_errors("Injected"));
    r.post(ArmFault::Errors {
        cycles: 5,
        error: BackendError::Injected,
    });
    r.run_until("backend errors", 1.0, |r| {
        r.reason_count("BackendError") > n
    });
    r.until_playing("backend errors");
    assert_eq!(r.backend_errors("Injected") - errors, 5);

    // A drive fault: fallback, fault reset (auto), re-seed, playing again.
    r.settle();
    let (n, errors, resets) = (
        r.reason_count("DrivesRecovered"),
        r.backend_errors("DriveFault"),
        r.requests("FaultReset"),
    );
    r.post(ArmFault::DriveFault {
        joint: 2,
        code: 0x7500,
    });
    r.run_until("drive fault", 2.0, |r| {
        r.reason_count("DrivesRecovered") > n
    });
    r.until_playing("drive fault");
    assert!(r.backend_errors("DriveFault") > errors);
    assert!(r.requests("FaultReset") > resets);

    // A push out of the operating-domain box on joint 0, then released.
    r.settle();
    let (n, flags) = (r.reason_count("OutOfDomain"), r.seen.domain_flags);
    // Just past what the drive can hold against (87 Nm): a slow drift out.
    r.post(ArmFault::ExternalTorque {
        joint: 0,
        torque_nm: -100.0,
    });
    // The measurement outside, seen by the next cycle's support monitor.
    r.run_until("domain exit", 2.0, |r| r.seen.domain_flags > flags);
    r.post(ArmFault::ExternalTorque {
        joint: 0,
        torque_nm: 0.0,
    });
    assert!(
        r.reason_count("OutOfDomain") > n,
        "{:?}",
        r.seen.transitions
    );
    r.until_playing("domain exit");

    // Chunks past joint 6's limit: the gate holds it off (event, then fallback).
    r.settle();
    let (n, events) = (r.reason_count("GateSaturated"), r.seen.gate_saturated);
    r.tamper_all = Some(Tamper::PastLimit);
    r.run_until("gate saturation", 5.0, |r| {
        r.reason_count("GateSaturated") > n
    });
    r.tamper_all = None;
    r.until_playing("gate saturation");
    assert!(r.seen.gate_saturated > events);
}

#[test]
fn every_branch_of_the_control_thread_at_20ms_allocates_nothing() {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = auto_resume_scenario(20.0);
    eprintln!(
        "20 ms, resume auto: {} loop steps counted; {:#?}",
        r.counted_steps, r.seen
    );
    r.assert_allocated_nothing();
}

#[test]
fn every_branch_of_the_control_thread_at_1ms_allocates_nothing() {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let r = auto_resume_scenario(1.0);
    eprintln!(
        "1 ms, resume auto: {} loop steps counted; {:#?}",
        r.counted_steps, r.seen
    );
    r.assert_allocated_nothing();
}

/// One pass with `resume = manual`: the ladder disarms, the operator re-arms.
fn manual_resume_round(r: &mut Rig) {
    r.run_for("play", 1.0);

    // The ladder disarms the executor: fresh chunks are refused until the operator
    // re-arms (SIGUSR1's path: `signals::request_rearm`, taken by the loop).
    let refused = r.rejects("NotArmed");
    r.publishing = false;
    r.run_until("ladder", 5.0, |r| r.control.mode() == Mode::Holding);
    r.publishing = true;
    r.run_until("not armed", 5.0, |r| r.control.mode() == Mode::SafeStop);
    assert!(r.rejects("NotArmed") > refused);
    let n = r.reason_count("Rearmed");
    let rearmed = |r: &Rig| {
        r.seen
            .transitions
            .get("SafeStop -> Holding (Rearmed)")
            .copied()
            .unwrap_or(0)
    };
    let before = rearmed(r);
    chunkrt_rt::signals::request_rearm();
    r.run_until("re-arm", 1.0, |r| r.reason_count("Rearmed") > n);
    // The re-arm took SafeStop to Holding. (The mode now may already be Playing: the
    // event is drained a cycle later, and a fresh chunk may have been spliced in by
    // then, depending on where the fake clock stands against the chunk schedule.)
    assert_eq!(rearmed(r), before + 1, "SafeStop -> Holding (Rearmed)");
    r.until_playing("re-arm");

    // A drive fault: held with a quick stop (no reset) until the operator re-arms.
    let (errors, resets, recovered) = (
        r.backend_errors("DriveFault"),
        r.requests("FaultReset"),
        r.reason_count("DrivesRecovered"),
    );
    r.post(ArmFault::DriveFault {
        joint: 2,
        code: 0x7500,
    });
    r.run_until("drive fault", 1.0, |r| {
        r.backend_errors("DriveFault") > errors
    });
    r.run_for("drive fault held", 0.5);
    assert_eq!(r.control.last_command().request, DriveRequest::QuickStop);
    assert_eq!(
        r.requests("FaultReset"),
        resets,
        "no reset before the re-arm"
    );
    chunkrt_rt::signals::request_rearm();
    r.run_until("drive fault re-arm", 2.0, |r| {
        r.reason_count("DrivesRecovered") > recovered
    });
    r.until_playing("drive fault re-arm");
    assert!(r.requests("FaultReset") > resets);
}

#[test]
fn manual_resume_and_operator_rearm_allocate_nothing() {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = sim_config(|c| c.executor.resume = ResumeMode::Manual);
    let mut r = Rig::new(&cfg);
    r.until_playing("start");
    for _ in 0..ROUNDS {
        manual_resume_round(&mut r);
    }
    assert!(r.seen.transition(Mode::SafeStop, Mode::Holding, "Rearmed") >= ROUNDS as u64);
    r.run_for("play", 0.5);
    r.shut_down("policy failed");
    eprintln!(
        "20 ms, resume manual: {} loop steps counted; {:#?}",
        r.counted_steps, r.seen
    );
    r.assert_allocated_nothing();
}
