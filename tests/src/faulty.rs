//! Fault injection for the fault matrix (`tests/tests/faults.rs`): a simulated arm
//! that fails on a schedule or on demand, a policy that misbehaves on a schedule, and the checks
//! every faulty run must pass (commands within the limits, records reconciled).
//!
//! Like [`crate::Recording`], these wrappers are for tests only: they may lock and
//! allocate (all but [`FaultyArm::on_demand`], whose exchanges the allocation proof
//! counts); the runtime's own backends and policies never do.

use crate::Seen;
use chunkrt_buffer::{Publisher, Subscriber};
use chunkrt_core::{
    Backend, BackendError, Chunk, Command, DriveRequest, Feedback, InferInfo, JointLimits,
    MonoTime, Observation, Policy, PolicyError, PolicySpec,
};
use chunkrt_sim::SimArm;
use chunkrt_telemetry::Report;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A fault the arm suffers at a given exchange.
#[derive(Clone, Copy, Debug)]
pub enum ArmFault {
    /// The next `cycles` exchanges fail with `error` (a lost or corrupted frame):
    /// the plant keeps its last command and the feedback is not refreshed.
    Errors {
        /// How many exchanges fail.
        cycles: u32,
        /// With which error.
        error: BackendError,
    },
    /// The drive of `joint` faults with `code` (torque off) until a fault reset.
    DriveFault {
        /// Joint index.
        joint: usize,
        /// CiA 402 error code.
        code: u16,
    },
    /// A constant external torque on `joint` from now on (a push; 0 releases it).
    ExternalTorque {
        /// Joint index.
        joint: usize,
        /// Torque in Nm.
        torque_nm: f64,
    },
}

/// One exchange as the faulty arm saw it.
#[derive(Clone, Copy, Debug)]
pub struct Exchange {
    /// Command, feedback and time.
    pub seen: Seen,
    /// The error the exchange returned, if any.
    pub error: Option<BackendError>,
}

/// The shared log of a [`FaultyArm`].
pub type ExchangeLog = Arc<Mutex<Vec<Exchange>>>;

/// The simulated arm with faults injected at chosen exchanges (0-based count of
/// `exchange` calls), so a fault lands at the same point of every run. Records
/// every exchange with its result.
pub struct FaultyArm {
    arm: SimArm,
    schedule: Vec<(u64, ArmFault)>,
    exchanges: u64,
    /// Faults posted by the test while the loop runs (see [`FaultyArm::on_demand`]).
    posted: Option<Subscriber<Option<ArmFault>>>,
}

impl FaultyArm {
    /// Wraps `arm`; `schedule` lists (exchange index, fault). Returned inside a
    /// [`Logged`] wrapper whose log fills as the loop runs.
    pub fn new(arm: SimArm, schedule: Vec<(u64, ArmFault)>) -> (Logged<FaultyArm>, ExchangeLog) {
        Logged::new(FaultyArm {
            arm,
            schedule,
            exchanges: 0,
            posted: None,
        })
    }

    /// `arm` with no schedule and no log: the test posts a fault through the returned
    /// publisher and the next exchange suffers it. Lock-free and allocation-free (the
    /// allocation proofs count its exchanges).
    pub fn on_demand(arm: SimArm) -> (FaultyArm, Publisher<Option<ArmFault>>) {
        let (post, posted) = chunkrt_buffer::channel(None);
        let arm = FaultyArm {
            arm,
            schedule: Vec::new(),
            exchanges: 0,
            posted: Some(posted),
        };
        (arm, post)
    }

    /// The simulated arm of `cfg` whose joint 2 drive faults (error 0x7500) at
    /// exchange 75, about 1.5 s into a 20 ms run: the drive-fault recovery scenario.
    pub fn drive_fault_at_75(cfg: &chunkrt_config::Config) -> (Logged<FaultyArm>, ExchangeLog) {
        let arm = SimArm::new(chunkrt_rt::build::sim_params(cfg)).expect("the sim config is valid");
        let fault = ArmFault::DriveFault {
            joint: 2,
            code: 0x7500,
        };
        FaultyArm::new(arm, vec![(75, fault)])
    }
}

impl Backend for FaultyArm {
    fn dof(&self) -> usize {
        self.arm.dof()
    }
    fn name(&self) -> &'static str {
        self.arm.name()
    }
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.arm.start(now, fb)
    }
    fn enable(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.arm.enable(now, fb)
    }
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        for (at, fault) in &self.schedule {
            if *at == self.exchanges {
                suffer(&mut self.arm, *fault);
            }
        }
        if let Some(Some(fault)) = self.posted.as_mut().and_then(|p| p.latest().copied()) {
            suffer(&mut self.arm, fault);
        }
        self.exchanges += 1;
        self.arm.exchange(now, cmd, fb)
    }
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.arm.shutdown(now)
    }
}

/// Makes `arm` suffer `fault` now.
fn suffer(arm: &mut SimArm, fault: ArmFault) {
    match fault {
        ArmFault::Errors { cycles, error } => arm.inject_error_for(cycles, error),
        ArmFault::DriveFault { joint, code } => arm
            .inject_drive_fault(joint, code)
            .expect("the faulted joint exists"),
        ArmFault::ExternalTorque { joint, torque_nm } => arm
            .set_external_torque(joint, torque_nm)
            .expect("the pushed joint exists and the torque is finite"),
    }
}

/// Any backend, with every exchange and its result recorded (for backends whose
/// faults come from elsewhere, e.g. the EtherCAT simulator's own fault schedule).
pub struct Logged<B: Backend> {
    inner: B,
    log: ExchangeLog,
}

impl<B: Backend> Logged<B> {
    /// Wraps `inner`; the returned log fills as the loop runs.
    pub fn new(inner: B) -> (Self, ExchangeLog) {
        let log = Arc::new(Mutex::new(Vec::with_capacity(1 << 16)));
        (
            Logged {
                inner,
                log: log.clone(),
            },
            log,
        )
    }
}

impl<B: Backend> Backend for Logged<B> {
    fn dof(&self) -> usize {
        self.inner.dof()
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.inner.start(now, fb)
    }
    fn enable(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.inner.enable(now, fb)
    }
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        let result = self.inner.exchange(now, cmd, fb);
        self.log.lock().unwrap().push(Exchange {
            seen: Seen {
                t: now,
                cmd: *cmd,
                fb: *fb,
            },
            error: result.err(),
        });
        result
    }
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.inner.shutdown(now)
    }
    fn disable_now(
        &mut self,
        now: MonoTime,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.inner.disable_now(now)
    }
    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.inner.counters(out)
    }
}

/// How the policy misbehaves on one call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PolicyFault {
    /// Panics.
    Panic,
    /// Blocks for this long, then answers normally.
    Stall(Duration),
    /// Answers, with one setpoint replaced by NaN.
    Nan,
    /// Returns an error.
    Error,
}

/// A policy that misbehaves on chosen calls (0-based count of `infer` calls).
pub struct FaultyPolicy {
    inner: Box<dyn Policy>,
    schedule: Vec<(std::ops::Range<u64>, PolicyFault)>,
    calls: u64,
    /// How many calls misbehaved, per kind: `[panic, stall, nan, error]`.
    pub injected: Arc<[AtomicU64; 4]>,
}

impl FaultyPolicy {
    /// Wraps `inner`; every call whose index falls in a range gets that fault.
    pub fn new(inner: Box<dyn Policy>, schedule: Vec<(std::ops::Range<u64>, PolicyFault)>) -> Self {
        FaultyPolicy {
            inner,
            schedule,
            calls: 0,
            injected: Arc::new(Default::default()),
        }
    }

    /// Calls that got `fault` so far.
    pub fn count(injected: &[AtomicU64; 4], fault: PolicyFault) -> u64 {
        let i = match fault {
            PolicyFault::Panic => 0,
            PolicyFault::Stall(_) => 1,
            PolicyFault::Nan => 2,
            PolicyFault::Error => 3,
        };
        injected[i].load(Ordering::Relaxed)
    }

    fn note(&self, fault: PolicyFault) {
        let i = match fault {
            PolicyFault::Panic => 0,
            PolicyFault::Stall(_) => 1,
            PolicyFault::Nan => 2,
            PolicyFault::Error => 3,
        };
        self.injected[i].fetch_add(1, Ordering::Relaxed);
    }
}

impl Policy for FaultyPolicy {
    fn spec(&self) -> PolicySpec {
        self.inner.spec()
    }
    fn infer(&mut self, obs: &Observation, out: &mut Chunk) -> Result<InferInfo, PolicyError> {
        let call = self.calls;
        self.calls += 1;
        let fault = self
            .schedule
            .iter()
            .find(|(r, _)| r.contains(&call))
            .map(|(_, f)| *f);
        if let Some(f) = fault {
            self.note(f);
        }
        match fault {
            Some(PolicyFault::Panic) => panic!("injected policy panic at call {call}"),
            Some(PolicyFault::Error) => {
                return Err(PolicyError(format!("injected policy error at call {call}")))
            }
            Some(PolicyFault::Stall(d)) => std::thread::sleep(d),
            _ => {}
        }
        let info = self.inner.infer(obs, out)?;
        if fault == Some(PolicyFault::Nan) {
            // Deep inside the chunk, so a check that looked only at the first or the
            // last setpoint would miss it.
            let row = (out.len as usize / 2).min(out.pos_rad.len() - 1);
            let joint = (out.dof as usize / 2).min(out.pos_rad[0].len() - 1);
            out.pos_rad[row][joint] = f64::NAN;
        }
        Ok(info)
    }
}

/// Checks every command handed to the backend against the limits the gate enforces:
/// finite values; position inside the limits less the margin; velocity,
/// acceleration and jerk of the commanded positions (backward differences over the
/// control period) within the joint limits; the velocity feed-forward within the
/// velocity limit. A `FaultReset` or `Disable` request starts a new window (the
/// gate may legitimately re-synchronise to the measured position there).
pub fn check_commands<'a>(
    commands: impl IntoIterator<Item = &'a Command>,
    limits: &JointLimits,
    period_ns: u64,
) -> Result<(), String> {
    let t = period_ns as f64 * 1e-9;
    let dof = limits.dof;
    // Relative slack for rounding in the backward differences, absolute slack for
    // the cancellation in them (third differences of ~1 rad values at 1 ms).
    let within = |v: f64, lim: f64, abs: f64| v.abs() <= lim * (1.0 + 1e-6) + abs;
    let mut window: Vec<&Command> = Vec::new();
    for (i, c) in commands.into_iter().enumerate() {
        if matches!(c.request, DriveRequest::FaultReset | DriveRequest::Disable) {
            window.clear();
            continue;
        }
        if usize::from(c.dof) != dof {
            return Err(format!("command {i}: dof {} (expected {dof})", c.dof));
        }
        for j in 0..dof {
            let l = &limits.joint[j];
            let (p, v) = (c.pos_rad[j], c.vel_rad_s[j]);
            if !p.is_finite() || !v.is_finite() {
                return Err(format!("command {i} joint {j}: not finite ({p}, {v})"));
            }
            let (lo, hi) = (
                l.pos_min_rad + l.pos_margin_rad,
                l.pos_max_rad - l.pos_margin_rad,
            );
            if p < lo - 1e-9 || p > hi + 1e-9 {
                return Err(format!(
                    "command {i} joint {j}: position {p} outside [{lo}, {hi}]"
                ));
            }
            if !within(v, l.max_vel_rad_s, 1e-9) {
                return Err(format!("command {i} joint {j}: velocity feed-forward {v}"));
            }
        }
        window.push(c);
        let n = window.len();
        for j in 0..dof {
            let l = &limits.joint[j];
            let q = |k: usize| window[n - 1 - k].pos_rad[j];
            if n >= 2 {
                let v = (q(0) - q(1)) / t;
                if !within(v, l.max_vel_rad_s, 1e-6) {
                    return Err(format!("command {i} joint {j}: velocity {v} rad/s"));
                }
            }
            if n >= 3 {
                let a = (q(0) - 2.0 * q(1) + q(2)) / (t * t);
                if !within(a, l.max_acc_rad_s2, 1e-3) {
                    return Err(format!("command {i} joint {j}: acceleration {a} rad/s2"));
                }
            }
            if n >= 4 {
                let jk = (q(0) - 3.0 * q(1) + 3.0 * q(2) - q(3)) / (t * t * t);
                if !within(jk, l.max_jerk_rad_s3, 1.0) {
                    return Err(format!("command {i} joint {j}: jerk {jk} rad/s3"));
                }
            }
        }
        if n > 4 {
            window.remove(0);
        }
    }
    Ok(())
}

/// A report counter (0 when absent).
pub fn counter(report: &Report, name: &str) -> u64 {
    report.counters.get(name).copied().unwrap_or(0)
}

/// Checks that the report's records are complete:
///
/// * cycles: `cycles_run = cycles + ring_drops_cycle` (every cycle the loop ran is
///   either in the histograms or counted as dropped);
/// * chunks, from the inference thread to the executor:
///   `chunks_published = chunks_offered + chunks_overwritten_in_handoff +
///   chunks_ignored_stopping + chunks_unread_at_end`;
/// * chunks in the executor (`ChunkCounts`): `offered = rejected + accepted`,
///   `accepted = used + superseded + discarded + pending`, and `expired +
///   horizon_ended <= used`;
/// * rejections: every rejection is logged unless its event was lost to a full
///   event ring (`chunks_rejected_logged <= chunks_rejected <=
///   chunks_rejected_logged + ring_drops_event`).
pub fn reconcile(report: &Report) -> Result<(), String> {
    let c = |k: &str| counter(report, k);
    for k in [
        "cycles_run",
        "chunks_offered",
        "chunks_overwritten_in_handoff",
        "chunks_unread_at_end",
        "ring_drops_cycle",
    ] {
        if !report.counters.contains_key(k) {
            return Err(format!("the report has no counter `{k}`"));
        }
    }
    let mut errors = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            errors.push(what);
        }
    };
    check(
        c("cycles_run") == c("cycles") + c("ring_drops_cycle"),
        format!(
            "cycles_run {} != cycles {} + ring_drops_cycle {}",
            c("cycles_run"),
            c("cycles"),
            c("ring_drops_cycle")
        ),
    );
    check(
        c("chunks_published")
            == c("chunks_offered")
                + c("chunks_overwritten_in_handoff")
                + c("chunks_ignored_stopping")
                + c("chunks_unread_at_end"),
        format!(
            "chunks_published {} != offered {} + overwritten_in_handoff {} + ignored_stopping {} + unread_at_end {}",
            c("chunks_published"),
            c("chunks_offered"),
            c("chunks_overwritten_in_handoff"),
            c("chunks_ignored_stopping"),
            c("chunks_unread_at_end")
        ),
    );
    check(
        c("chunks_offered") == c("chunks_rejected") + c("chunks_accepted"),
        format!(
            "chunks_offered {} != rejected {} + accepted {}",
            c("chunks_offered"),
            c("chunks_rejected"),
            c("chunks_accepted")
        ),
    );
    check(
        c("chunks_accepted")
            == c("chunks_used")
                + c("chunks_superseded")
                + c("chunks_discarded")
                + c("chunks_pending"),
        format!(
            "chunks_accepted {} != used {} + superseded {} + discarded {} + pending {}",
            c("chunks_accepted"),
            c("chunks_used"),
            c("chunks_superseded"),
            c("chunks_discarded"),
            c("chunks_pending")
        ),
    );
    check(
        c("chunks_expired") + c("chunks_horizon_ended") <= c("chunks_used"),
        format!(
            "chunks_expired {} + horizon_ended {} > used {}",
            c("chunks_expired"),
            c("chunks_horizon_ended"),
            c("chunks_used")
        ),
    );
    check(
        c("chunks_rejected_logged") <= c("chunks_rejected")
            && c("chunks_rejected") <= c("chunks_rejected_logged") + c("ring_drops_event"),
        format!(
            "chunks_rejected {} vs logged {} (+ event ring drops {})",
            c("chunks_rejected"),
            c("chunks_rejected_logged"),
            c("ring_drops_event")
        ),
    );
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// The report's mode events as (to, reason, t_s), in order; panics on an event that
/// lacks one of them (a default would read as a mode named "" at t = 0).
pub fn mode_events(report: &Report) -> Vec<(String, String, f64)> {
    report
        .events
        .iter()
        .filter(|e| e["event"] == "mode")
        .map(|e| {
            (
                e["to"]
                    .as_str()
                    .unwrap_or_else(|| panic!("a mode event without \"to\": {e}"))
                    .to_string(),
                e["reason"]
                    .as_str()
                    .unwrap_or_else(|| panic!("a mode event without \"reason\": {e}"))
                    .to_string(),
                e["t_s"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("a mode event without \"t_s\": {e}")),
            )
        })
        .collect()
}

/// Checks a drive-fault recovery in `ex` from exchange `from` on: a fault reset is
/// requested, the drives come back enabled, the first command after that is at the
/// measured position (nothing jumps), the report has `DrivesRecovered` (after the
/// mode event with reason `after_reason`, when given) followed by `Playing`, and
/// chunks play again.
pub fn assert_recovers(ex: &[Exchange], report: &Report, from: usize, after_reason: Option<&str>) {
    let reset = ex[from..]
        .iter()
        .position(|e| e.seen.cmd.request == DriveRequest::FaultReset)
        .map(|i| i + from)
        .expect("a fault reset was requested");
    let enabled = ex[reset..]
        .iter()
        .position(|e| e.seen.fb.all_enabled())
        .map(|i| i + reset)
        .expect("the drives came back");
    let after = &ex[enabled + 1].seen;
    for j in 0..after.cmd.dof as usize {
        let d = (after.cmd.pos_rad[j] - ex[enabled].seen.fb.pos_rad[j]).abs();
        assert!(
            d < 0.01,
            "joint {j}: command {d} rad from the measured position"
        );
    }
    let modes = mode_events(report);
    let start = after_reason.map_or(0, |r| {
        modes
            .iter()
            .position(|m| m.1 == r)
            .unwrap_or_else(|| panic!("no {r} event: {modes:?}"))
    });
    let recovered = modes[start..]
        .iter()
        .position(|m| m.1 == "DrivesRecovered")
        .map(|i| i + start)
        .unwrap_or_else(|| panic!("no recovery event: {modes:?}"));
    assert!(
        modes[recovered..].iter().any(|m| m.0 == "Playing"),
        "playback resumed: {modes:?}"
    );
    assert!(ex[enabled..].iter().any(|e| e.seen.cmd.chunk_seq != 0));
}

/// The report's events named `name` (`chunk_rejected`, `backend_error`, ...).
pub fn events_named<'a>(report: &'a Report, name: &str) -> Vec<&'a serde_json::Value> {
    report
        .events
        .iter()
        .filter(|e| e["event"] == name)
        .collect()
}

/// The lines of `events.jsonl` in `dir`, parsed.
pub fn event_log(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).expect("events.jsonl holds one JSON object a line"))
        .collect()
}

/// A fresh, empty output directory under the system temp dir.
pub fn out_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("chunkrt-faults-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use chunkrt_core::{JointLimit, JointVec};

    fn limits() -> JointLimits {
        JointLimits::uniform(2, JointLimit::default())
    }

    /// Commands that follow `pos(k)` at a 1 ms period.
    fn commands(pos: impl Fn(usize) -> f64, n: usize) -> Vec<Command> {
        (0..n)
            .map(|k| {
                let mut p: JointVec = [0.0; 16];
                p[0] = pos(k);
                Command {
                    dof: 2,
                    pos_rad: p,
                    ..Command::default()
                }
            })
            .collect()
    }

    #[test]
    fn check_commands_accepts_a_smooth_motion_and_catches_each_violation() {
        let l = limits();
        // 0.1 rad/s cruise: far inside every default limit.
        let smooth = commands(|k| 1e-4 * k as f64, 50);
        check_commands(&smooth, &l, 1_000_000).unwrap();
        // A position jump breaks the velocity limit (and more).
        let mut jump = smooth.clone();
        jump[30].pos_rad[0] += 0.01;
        assert!(check_commands(&jump, &l, 1_000_000).is_err());
        // Outside the position limits less the margin.
        let far = commands(|_| 2.99, 5);
        let e = check_commands(&far, &l, 1_000_000).unwrap_err();
        assert!(e.contains("outside"), "{e}");
        // NaN.
        let mut nan = smooth.clone();
        nan[3].vel_rad_s[1] = f64::NAN;
        assert!(check_commands(&nan, &l, 1_000_000)
            .unwrap_err()
            .contains("finite"));
        // A fault reset starts a new window: a re-synchronisation is not a jump.
        let mut reset = smooth.clone();
        reset[30].request = DriveRequest::FaultReset;
        for c in &mut reset[31..] {
            c.pos_rad[0] += 0.2;
        }
        check_commands(&reset, &l, 1_000_000).unwrap();
    }

    #[test]
    fn reconcile_catches_a_lost_cycle_and_a_lost_chunk() {
        let mut r = Report::default();
        for (k, v) in [
            ("cycles_run", 100),
            ("cycles", 90),
            ("ring_drops_cycle", 10),
            ("chunks_published", 12),
            ("chunks_offered", 10),
            ("chunks_overwritten_in_handoff", 1),
            ("chunks_unread_at_end", 1),
            ("chunks_rejected", 2),
            ("chunks_accepted", 8),
            ("chunks_used", 7),
            ("chunks_superseded", 1),
            ("chunks_rejected_logged", 2),
        ] {
            r.counters.insert(k.into(), v);
        }
        reconcile(&r).unwrap();
        r.counters.insert("cycles".into(), 89);
        assert!(reconcile(&r).unwrap_err().contains("cycles_run"));
        r.counters.insert("cycles".into(), 90);
        r.counters.insert("chunks_published".into(), 13);
        assert!(reconcile(&r).unwrap_err().contains("chunks_published"));
    }
}
