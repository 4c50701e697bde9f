//! Each stage of the control cycle on its own: a loop around a scripted arm (its
//! measurement is the command it got, plus a lag the test sets; its exchange fails
//! when the test says so), the real executor and gate, and a clock the test sets.

use super::*;
use chunkrt_config::Config;
use chunkrt_core::{Constraint, MAX_HORIZON};
use chunkrt_telemetry::RingConsumers;
use std::cell::Cell;
use std::path::Path;
use std::sync::{Arc, Mutex};

thread_local! {
    static NOW: Cell<u64> = const { Cell::new(0) };
}

fn fake_now() -> MonoTime {
    MonoTime(NOW.with(|c| c.get()))
}

fn set_now(t: MonoTime) {
    NOW.with(|c| c.set(t.0));
}

/// Inside every joint's range (the sim config's start position).
const HOME: [f64; 7] = [0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785];

/// What the scripted arm does at its next exchanges (shared with the test).
struct Script {
    /// The exchange fails with this error.
    fail: Option<BackendError>,
    /// Added to every commanded position in the measurement.
    lag_rad: f64,
    /// Every command the arm was handed (tests only: this allocates).
    sent: Vec<Command>,
    /// The wrist sensor's force in the next measurements (none: no sensor).
    force_n: Option<[f64; 3]>,
}

struct Arm {
    dof: usize,
    script: Arc<Mutex<Script>>,
}

impl Backend for Arm {
    fn dof(&self) -> usize {
        self.dof
    }
    fn name(&self) -> &'static str {
        "scripted-arm"
    }
    fn start(
        &mut self,
        _now: MonoTime,
        _fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(())
    }
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        let mut s = self.script.lock().unwrap();
        s.sent.push(*cmd);
        if let Some(e) = s.fail {
            return Err(e);
        }
        fb.t_capture = now;
        for j in 0..self.dof {
            fb.pos_rad[j] = cmd.pos_rad[j] + s.lag_rad;
            fb.vel_rad_s[j] = 0.0;
            fb.state[j] = DriveState::Enabled;
        }
        fb.held = false;
        fb.wrench = s.force_n.map(|force_n| chunkrt_core::Wrench {
            t_capture: now,
            force_n,
            torque_nm: [0.0; 3],
        });
        Ok(())
    }
    fn shutdown(&mut self, _now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(())
    }
}

struct Rig {
    control: ControlLoop,
    chunks: Publisher<Chunk>,
    observations: Subscriber<Observation>,
    records: RingConsumers,
    arm: Arc<Mutex<Script>>,
    cfg: Config,
    t0: MonoTime,
    period_ns: u64,
}

fn config() -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rt-config/sim-scripted.toml");
    Config::load(&path).expect("rt-config/sim-scripted.toml loads")
}

/// A loop at rest at `pos`, measured there by enabled drives.
fn rig_at(pos: [f64; 7], domain: Option<DomainBox>) -> Rig {
    let cfg = config();
    let t0 = MonoTime::from_ms(1_000);
    set_now(t0);
    let dof = cfg.control.joints;
    let mut first = Feedback {
        t_capture: t0,
        dof: dof as u16,
        ..Feedback::default()
    };
    first.pos_rad[..dof].copy_from_slice(&pos);
    first.state = [DriveState::Enabled; MAX_DOF];
    let arm = Arc::new(Mutex::new(Script {
        fail: None,
        lag_rad: 0.0,
        sent: Vec::new(),
        force_n: None,
    }));
    let (chunks, chunk_sub) = chunkrt_buffer::channel(Chunk::default());
    let (obs_pub, observations) = chunkrt_buffer::channel(Observation::default());
    let (cycles_out, events_out, _infer, records) = chunkrt_telemetry::rings(1 << 12);
    let limits = cfg.joint_limits();
    let period_ns = cfg.period_ns();
    let control = ControlLoop::new(ControlParts {
        backend: Box::new(Arm {
            dof,
            script: arm.clone(),
        }),
        executor: Executor::new(cfg.executor_config(), limits, &first.pos_rad, t0),
        gate: Gate::new(limits, period_ns, &first.pos_rad),
        chunks: chunk_sub,
        observations: obs_pub,
        cycles_out,
        events_out,
        domain,
        period_ns,
        first_feedback: first,
        clock: fake_now,
    });
    Rig {
        control,
        chunks,
        observations,
        records,
        arm,
        cfg,
        t0,
        period_ns,
    }
}

fn rig() -> Rig {
    rig_at(HOME, None)
}

impl Rig {
    /// The deadline of cycle `k` (the clock set to it: the loop wakes on time).
    fn at(&self, k: u64) -> MonoTime {
        let t = self.t0.add_ns(k * self.period_ns);
        set_now(t);
        t
    }

    /// A chunk that holds HOME, computed from an observation taken at `t_obs`.
    fn still_chunk(&self, seq: u64, t_obs: MonoTime) -> Chunk {
        let mut c = Chunk {
            seq,
            t_obs,
            t_start: t_obs,
            t_publish: t_obs,
            dt_ns: 20_000_000,
            len: 25,
            dof: HOME.len() as u16,
            ..Chunk::default()
        };
        for row in c.pos_rad.iter_mut().take(MAX_HORIZON) {
            row[..HOME.len()].copy_from_slice(&HOME);
        }
        c
    }

    /// Runs whole cycles `1..=k` with a fresh chunk at the first: the policy plays.
    fn play(&mut self, k: u64) {
        let t = self.at(1);
        let chunk = self.still_chunk(1, t);
        self.chunks.publish(&chunk);
        for i in 1..=k {
            let d = self.at(i);
            self.control.cycle(d, d, 0);
        }
        assert_eq!(self.control.mode(), Mode::Playing, "the still chunk plays");
        self.events();
    }

    fn events(&mut self) -> Vec<EventRecord> {
        std::iter::from_fn(|| self.records.pop_event()).collect()
    }

    /// The mode changes the executor logged since the last call.
    fn mode_changes(&mut self) -> Vec<ModeChangeReason> {
        self.control.log_mode_events();
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                EventRecord::Mode(m) => Some(m.reason),
                _ => None,
            })
            .collect()
    }
}

#[test]
fn take_newest_chunk_rejects_a_chunk_with_nan_and_counts_it() {
    let mut r = rig();
    let t = r.at(1);
    let mut bad = r.still_chunk(1, t);
    bad.pos_rad[3][2] = f64::NAN;
    r.chunks.publish(&bad);
    r.control.take_newest_chunk(t);
    let counts = r.control.chunk_counts();
    assert_eq!(
        (counts.offered, counts.rejected, counts.accepted),
        (1, 1, 0)
    );
    assert_eq!(
        r.events(),
        vec![EventRecord::Reject {
            t,
            seq: 1,
            reason: RejectReason::NonFinite { row: 3, joint: 2 },
        }]
    );
    // Read once: the next cycle finds nothing new to offer.
    r.control.take_newest_chunk(t);
    assert_eq!(r.control.chunk_counts().offered, 1);
}

#[test]
fn take_newest_chunk_accepts_a_valid_chunk_and_ignores_chunks_once_stopping() {
    let mut r = rig();
    let t = r.at(1);
    let chunk = r.still_chunk(1, t);
    r.chunks.publish(&chunk);
    r.control.take_newest_chunk(t);
    let counts = r.control.chunk_counts();
    assert_eq!((counts.accepted, counts.pending), (1, 1));
    assert!(r.events().is_empty());

    r.control.stop_playing(t, ModeChangeReason::Shutdown);
    let chunk = r.still_chunk(2, t);
    r.chunks.publish(&chunk);
    r.control.take_newest_chunk(t);
    assert_eq!(r.control.chunks_ignored_stopping(), 1);
    assert_eq!(r.control.chunk_counts().offered, 1, "not offered");
}

/// A replayed run (`policy.draw_schedule`): a chunk that arrives early waits for
/// the cycle its twin first played it in; one that comes after that cycle is
/// played at once and counted late; one replaced while it waits is counted
/// overwritten, and one still waiting at the end is unread.
#[test]
fn a_replayed_chunk_waits_for_the_cycle_its_twin_played_it_in() {
    let mut r = rig();
    let t = r.at(1);
    let mut chunk = r.still_chunk(1, t);
    chunk.play_at_cycle = 4;
    r.chunks.publish(&chunk);
    let mut offered_in = None;
    for i in 1..=8 {
        let cycle = r.control.cycles_run();
        let d = r.at(i);
        r.control.cycle(d, d, 0);
        if offered_in.is_none() && r.control.chunk_counts().offered == 1 {
            offered_in = Some(cycle);
        }
    }
    assert_eq!(
        offered_in,
        Some(4),
        "taken up in the cycle it was played in"
    );
    assert_eq!(r.control.mode(), Mode::Playing);
    assert_eq!(r.control.chunks_played_late(), 0);

    // Arrives after its cycle (8 have run): played at once, late.
    let t = r.at(9);
    let mut late = r.still_chunk(2, t);
    late.play_at_cycle = 6;
    r.chunks.publish(&late);
    r.control.cycle(t, t, 0);
    assert_eq!(r.control.chunk_counts().offered, 2);
    assert_eq!(r.control.chunks_played_late(), 1);

    // Waits for cycle 30, is replaced by one for cycle 40, which is still waiting
    // when the run ends.
    for (seq, at) in [(3, 30), (4, 40)] {
        let t = r.at(seq + 7);
        let mut waiting = r.still_chunk(seq, t);
        waiting.play_at_cycle = at;
        r.chunks.publish(&waiting);
        r.control.cycle(t, t, 0);
    }
    assert_eq!(r.control.chunk_counts().offered, 2, "neither offered");
    assert_eq!(r.control.chunks_overwritten_waiting(), 1);
    assert!(r.control.take_unread_chunk(), "the one waiting is unread");
    assert!(!r.control.take_unread_chunk());
}

#[test]
fn check_domain_takes_authority_outside_the_box_only() {
    let mut lo = [0.0; MAX_DOF];
    let mut hi = [0.0; MAX_DOF];
    for j in 0..HOME.len() {
        lo[j] = HOME[j] - 0.5;
        hi[j] = HOME[j] + 0.5;
    }
    let domain = DomainBox {
        dof: HOME.len(),
        lo_rad: lo,
        hi_rad: hi,
    };
    let mut r = rig_at(HOME, Some(domain));
    r.play(2);
    let t = r.at(3);
    r.control.check_domain(t);
    assert_eq!(r.control.mode(), Mode::Playing, "inside: nothing taken");
    r.control.fb.pos_rad[2] = HOME[2] + 0.6;
    r.control.check_domain(t);
    assert_ne!(r.control.mode(), Mode::Playing);
    assert_eq!(r.mode_changes(), vec![ModeChangeReason::OutOfDomain]);
    // And the gate records it against that joint.
    let (mask, _) = r.control.gate_command(t, None);
    assert_ne!(mask.0 & Constraint::Domain.bit(), 0);
}

#[test]
fn check_domain_takes_authority_inside_an_excluded_region_only() {
    let mut region = chunkrt_core::ExcludedRegion::unbounded(4);
    [region.pos_lo_rad[2], region.pos_hi_rad[2]] = [HOME[2] + 0.1, HOME[2] + 0.2];
    [region.vel_lo_rad_s[2], region.vel_hi_rad_s[2]] = [0.1, 1.0];
    let mut ex = chunkrt_core::Exclusions::NONE;
    assert!(ex.push(region));
    let mut r = rig_at(HOME, None);
    r.control = r.control.with_exclusions(ex);
    r.play(2);
    let t = r.at(3);
    // In the position band but not moving through it as the region says: inside.
    r.control.fb.pos_rad[2] = HOME[2] + 0.15;
    r.control.check_domain(t);
    assert_eq!(r.control.mode(), Mode::Playing);
    r.control.fb.vel_rad_s[2] = 0.5;
    r.control.check_domain(t);
    assert_ne!(r.control.mode(), Mode::Playing);
    assert_eq!(r.mode_changes(), vec![ModeChangeReason::Excluded]);
    let (mask, _) = r.control.gate_command(t, None);
    assert_ne!(mask.0 & Constraint::Domain.bit(), 0);
}

#[test]
fn check_drive_faults_asks_for_a_reset_then_reseeds_at_the_measurement() {
    let mut r = rig();
    r.play(2);
    let t = r.at(3);
    r.control.fb.state[4] = DriveState::Fault;
    r.control.check_drive_faults(t);
    // `resume = "auto"` in the sim config: the drive is reset.
    assert_eq!(r.cfg.executor_config().resume, Resume::Auto);
    assert_eq!(
        r.control.drive_request(r.control.mode()),
        DriveRequest::FaultReset
    );
    // Enabled again, 0.1 rad from where it was commanded: held where it is.
    r.control.fb.state[4] = DriveState::Enabled;
    r.control.fb.pos_rad[4] = HOME[4] + 0.1;
    r.control.check_drive_faults(t);
    assert_eq!(
        r.control.drive_request(r.control.mode()),
        DriveRequest::Track
    );
    assert_eq!(r.control.mode(), Mode::Holding);
    assert_eq!(
        r.mode_changes().last(),
        Some(&ModeChangeReason::DrivesRecovered)
    );
    assert_eq!(r.control.gate.commanded(4).0, HOME[4] + 0.1);
}

#[test]
fn check_backend_health_withdraws_authority_while_the_backend_fails() {
    let mut r = rig();
    r.play(2);
    r.arm.lock().unwrap().fail = Some(BackendError::FrameLost);
    let d = r.at(3);
    let sent = r.control.exchange(d, MonoTime::ZERO);
    assert!(sent.backend_error);
    assert_ne!(r.control.mode(), Mode::Playing);
    assert!(r.events().contains(&EventRecord::Backend {
        t: d,
        error: BackendError::FrameLost
    }));
    // A chunk computed after the failure, while the backend still fails: the
    // backend-health stage keeps it from taking authority at the next tick.
    let d = r.at(4);
    let chunk = r.still_chunk(2, d);
    r.chunks.publish(&chunk);
    r.control.take_newest_chunk(d);
    r.control.check_backend_health(d);
    r.control.executor.tick_at(d, d, &mut r.control.setpoint);
    assert_ne!(r.control.mode(), Mode::Playing);
    // The backend recovers: the next fresh chunk plays again.
    r.arm.lock().unwrap().fail = None;
    assert!(!r.control.exchange(d, MonoTime::ZERO).backend_error);
    let d = r.at(5);
    let chunk = r.still_chunk(3, d);
    r.chunks.publish(&chunk);
    r.control.take_newest_chunk(d);
    r.control.check_backend_health(d);
    r.control.executor.tick_at(d, d, &mut r.control.setpoint);
    assert_eq!(r.control.mode(), Mode::Playing);
}

#[test]
fn a_lost_drive_ends_the_run_with_its_joint() {
    let mut r = rig();
    r.arm.lock().unwrap().fail = Some(BackendError::DriveLost { joint: 5 });
    let d = r.at(1);
    r.control.exchange(d, MonoTime::ZERO);
    r.arm.lock().unwrap().fail = Some(BackendError::DriveLost { joint: 2 });
    r.control.exchange(d, MonoTime::ZERO);
    assert_eq!(r.control.drive_lost(), Some(5), "the first one lost");
}

#[test]
fn gate_command_clamps_a_setpoint_beyond_the_limit_to_the_configured_limit() {
    let lim = config().joint_limits().joint[0];
    let hi = lim.pos_max_rad - lim.pos_margin_rad;
    let mut start = HOME;
    start[0] = hi;
    let mut r = rig_at(start, None);
    let t = r.at(1);
    r.control.setpoint.pos_rad[..7].copy_from_slice(&start);
    r.control.setpoint.pos_rad[0] = hi + 0.5;
    let (mask, commanded) = r.control.gate_command(t, None);
    assert!((r.control.cmd.pos_rad[0] - hi).abs() < 1e-9);
    assert!(r.control.cmd.pos_rad[0] <= hi);
    assert_eq!(commanded.pos_rad[0], r.control.cmd.pos_rad[0]);
    assert_ne!(mask.0 & Constraint::Position.bit(), 0);
    // The event records and the gate's counts tell the same story.
    let gate_events: Vec<_> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EventRecord::Gate { intervention, .. } => Some(intervention),
            _ => None,
        })
        .collect();
    assert_eq!(gate_events.len(), 1);
    assert_eq!(gate_events[0].joint, 0);
    assert_eq!(gate_events[0].constraint, Constraint::Position);
    assert_eq!(r.control.gate_counts()[Constraint::Position as usize], 1);
}

#[test]
fn gate_command_resends_the_command_a_panic_kept_from_the_drives() {
    let mut r = rig();
    let t = r.at(1);
    r.control.setpoint.pos_rad[..7].copy_from_slice(&HOME);
    r.control.setpoint.pos_rad[0] = HOME[0] + 1e-4;
    r.control.gate_command(t, None);
    let made = r.control.cmd;
    // A panic before the exchange: the next cycle sends that command unchanged.
    r.control.after_panic();
    r.control.setpoint.pos_rad[0] = HOME[0] + 0.3;
    let d = r.at(2);
    let (mask, _) = r.control.gate_command(d, None);
    assert_eq!(mask.0, 0);
    assert_eq!(r.control.cmd.pos_rad, made.pos_rad);
    // Sent once: after the exchange, a panic leaves nothing to resend.
    r.control.exchange(d, MonoTime::ZERO);
    r.control.after_panic();
    assert!(!r.control.resend);
}

#[test]
fn drive_request_follows_stop_recovery_and_mode() {
    let mut r = rig();
    assert_eq!(r.control.drive_request(Mode::Playing), DriveRequest::Track);
    assert_eq!(r.control.drive_request(Mode::Holding), DriveRequest::Track);
    assert_eq!(
        r.control.drive_request(Mode::SafeStop),
        DriveRequest::QuickStop
    );
    r.control.recovering = true;
    assert_eq!(
        r.control.drive_request(Mode::Holding),
        DriveRequest::FaultReset
    );
    r.control.stopping = true;
    assert_eq!(
        r.control.drive_request(Mode::Holding),
        DriveRequest::QuickStop,
        "no reset while stopping"
    );
    r.control.recovering = false;
    r.control.quick_stop();
    assert_eq!(
        r.control.drive_request(Mode::Playing),
        DriveRequest::QuickStop
    );
}

#[test]
fn exchange_hands_the_command_over_and_checks_the_following_error() {
    let mut r = rig();
    r.control.following_limit = Some([0.05; MAX_DOF]);
    r.play(2);
    r.arm.lock().unwrap().lag_rad = 0.01;
    let d = r.at(3);
    let sent = r.control.exchange(d, MonoTime::ZERO);
    assert_eq!(sent.t_cmd, d);
    assert!(!sent.backend_error);
    assert_eq!(r.arm.lock().unwrap().sent.last(), Some(&r.control.cmd));
    assert_eq!(r.control.mode(), Mode::Playing, "within the limit");
    // Measured 0.1 rad from the command: every joint over its 0.05 rad limit.
    r.arm.lock().unwrap().lag_rad = 0.1;
    for k in 4..=5 {
        let d = r.at(k);
        r.control.exchange(d, MonoTime::ZERO);
    }
    let over: Vec<_> = r
        .events()
        .into_iter()
        .filter(|e| matches!(e, EventRecord::FollowingError { .. }))
        .collect();
    assert_eq!(
        over.len(),
        HOME.len(),
        "one event per joint, when it goes over"
    );
    assert_eq!(
        r.mode_changes().first(),
        Some(&ModeChangeReason::FollowingError)
    );
}

#[test]
fn publish_observation_carries_the_cycles_measurement_and_command() {
    let mut r = rig();
    r.arm.lock().unwrap().lag_rad = 0.002;
    let d = r.at(1);
    r.control.cycle(d, d, 0);
    assert!(r.observations.latest().is_some());
    let o = *r.observations.peek();
    assert_eq!(o.seq, 0);
    assert_eq!(o.t_cycle, d);
    assert_eq!(o.t_capture, d);
    for j in 0..HOME.len() {
        assert_eq!(o.cmd_pos_rad[j], r.control.cmd.pos_rad[j]);
        assert_eq!(o.pos_rad[j], r.control.cmd.pos_rad[j] + 0.002);
    }
}

#[test]
fn record_cycle_reports_the_cycle_as_it_ran() {
    let mut r = rig();
    r.arm.lock().unwrap().lag_rad = 0.003;
    for k in 1..=2 {
        let d = r.at(k);
        r.control.cycle(d, d.add_ns(7_000), 1);
    }
    let recs: Vec<_> = std::iter::from_fn(|| r.records.pop_cycle()).collect();
    assert_eq!(recs.len(), 2);
    let last = recs[1];
    assert_eq!(last.cycle, 1);
    assert_eq!(last.t_deadline, r.t0.add_ns(2 * r.period_ns));
    assert_eq!(last.t_wake, last.t_deadline.add_ns(7_000));
    assert_eq!(last.missed, 1);
    assert_eq!(last.mode, Mode::Holding as u8);
    assert!(!last.backend_error);
    assert!((last.track_err_rad - 0.003).abs() < 1e-12);
    assert_eq!(r.control.cycles_run(), 2);
}

#[test]
fn probe_adds_to_the_setpoint_only_while_playing_and_its_guard_takes_authority() {
    let mut r = rig();
    r.play(2);
    let inject = chunkrt_config::InjectConfig {
        probe: Some(chunkrt_config::ProbeConfig {
            joint: 1,
            shape: chunkrt_config::ProbeShape::Multisine,
            amplitude_rad: 1e-3,
            freqs_hz: vec![1.0],
            start_s: 0.0,
            duration_s: 10.0,
            ramp_s: 0.0,
            max_excursion_rad: 0.05,
        }),
        ..Default::default()
    };
    let inj = crate::inject::ControlInjection::new(&inject, &r.control.cmd, &r.control.fb);
    r.control.inject = Some(Box::new(inj));
    let before = r.control.setpoint;
    let d = r.at(3);
    let (j, added) = r.control.probe(d).expect("probed while playing");
    assert_eq!(j, 1);
    assert_ne!(added, [0.0; 3]);
    let sp = &r.control.setpoint;
    assert_eq!(sp.pos_rad[1] - before.pos_rad[1], added[0]);
    assert_eq!(sp.vel_rad_s[1] - before.vel_rad_s[1], added[1]);
    assert_eq!(sp.pos_rad[0], before.pos_rad[0], "other joints untouched");
    // The gate takes it back out of the setpoint (the record keeps the loop's own U).
    r.control.gate_command(d, Some((j, added)));
    assert_eq!(r.control.setpoint.pos_rad, before.pos_rad);
    // A setpoint that stops (the executor withdrew authority): nothing is added.
    r.control.setpoint.stop = true;
    let sp = r.control.setpoint;
    assert_eq!(r.control.probe(d), None);
    assert_eq!(r.control.setpoint.pos_rad, sp.pos_rad);
    assert_eq!(r.control.setpoint.vel_rad_s, sp.vel_rad_s);
    r.control.setpoint.stop = false;
    // The setpoint moved 0.1 rad from where the probe began: the guard trips, and the
    // next cycle's authority check takes authority for the probed joint.
    r.control.check_probe_guard(d);
    assert_eq!(r.control.mode(), Mode::Playing, "not tripped yet");
    r.control.setpoint.pos_rad[1] += 0.1;
    let d = r.at(4);
    assert_eq!(r.control.probe(d), None, "no probe once tripped");
    r.control.check_probe_guard(d);
    assert_ne!(r.control.mode(), Mode::Playing);
    assert_eq!(r.mode_changes(), vec![ModeChangeReason::ProbeExcursion]);
    let (mask, _) = r.control.gate_command(d, None);
    assert_ne!(mask.0 & Constraint::Domain.bit(), 0);
}

/// The setpoints and commands of joint 0 over the cycles from 4 on that play the chunk
/// 10 mrad off that arrives in cycle 4 (until it expires), with the action filter at
/// `cutoff_hz` when set.
fn setpoints_after_a_step(cutoff_hz: Option<f64>) -> Vec<(f64, f64)> {
    let mut r = rig();
    let limits = r.cfg.joint_limits();
    r.control.gate =
        Gate::new(limits, r.period_ns, &r.control.fb.pos_rad).with_action_filter(cutoff_hz);
    r.play(3);
    let t = r.at(4);
    let mut c = r.still_chunk(2, t);
    for row in c.pos_rad.iter_mut().take(MAX_HORIZON) {
        row[0] += 0.01;
    }
    r.chunks.publish(&c);
    (4..=40)
        .map_while(|k| {
            let d = r.at(k);
            r.control.cycle(d, d, 0);
            (r.control.mode() == Mode::Playing)
                .then_some((r.control.setpoint.pos_rad[0], r.control.cmd.pos_rad[0]))
        })
        .collect()
}

#[test]
fn the_action_filter_shapes_the_setpoint_before_the_gate_and_the_record() {
    // The loop's setpoint (what is recorded, and what the gate gets) with the filter
    // is the filter applied to the setpoint without it, cycle by cycle.
    let plain = setpoints_after_a_step(None);
    let shaped = setpoints_after_a_step(Some(5.0));
    assert!(plain.len() >= 8 && plain.len() == shaped.len(), "{plain:?}");
    let mut home = [0.0; MAX_DOF];
    home[..7].copy_from_slice(&HOME);
    let mut f = chunkrt_core::ActionFilter::new(5.0, 0.02, &home);
    let mut moved = 0.0f64;
    for (k, ((p, _), (s, cmd))) in plain.iter().zip(&shaped).enumerate() {
        let mut sp = chunkrt_core::Setpoint {
            dof: 7,
            ..Default::default()
        };
        sp.pos_rad[..7].copy_from_slice(&HOME);
        sp.pos_rad[0] = *p;
        f.apply(&mut sp);
        assert!(
            (sp.pos_rad[0] - s).abs() < 1e-12,
            "cycle {}: {s} vs {}",
            k + 4,
            sp.pos_rad[0]
        );
        // The command follows the filtered setpoint (the gate passes it unchanged).
        assert!(
            (cmd - s).abs() < 1e-9,
            "cycle {}: command {cmd}, setpoint {s}",
            k + 4
        );
        moved = moved.max((p - s).abs());
    }
    assert!(
        moved > 1e-3,
        "the filter changed the setpoint (by {moved} rad at most)"
    );
}

/// Runs cycles `from..=to` (whole cycles: check, command, exchange, record).
fn run_cycles(r: &mut Rig, from: u64, to: u64) {
    for k in from..=to {
        let d = r.at(k);
        r.control.cycle(d, d, 0);
    }
}

/// A rig whose arm has a wrist sensor reading `force_n` (the first measurement too),
/// with the tripwire at `limit_n`.
fn rig_with_tripwire(limit_n: f64, force_n: [f64; 3]) -> Rig {
    let mut r = rig();
    r.control = r.control.with_force_tripwire(Some(limit_n));
    r.arm.lock().unwrap().force_n = Some(force_n);
    r.control.fb.wrench = Some(chunkrt_core::Wrench {
        force_n,
        ..Default::default()
    });
    r
}

#[test]
fn the_force_tripwire_withdraws_in_the_cycle_after_the_reading_until_rearm() {
    // |F| = √229.84 = 15.16 N.
    let over = [0.0, -9.0, 12.2];
    let mut under = rig_with_tripwire(15.2, over);
    under.play(6);
    assert!(
        !under.control.force_tripped(),
        "15.16 N is under a 15.2 N tripwire"
    );

    // The first over-limit reading comes back from cycle 2's exchange (the chunk plays
    // from cycle 1).
    let mut r = rig_with_tripwire(15.0, [0.0, 0.0, 1.0]);
    let t = r.at(1);
    r.chunks.publish(&r.still_chunk(1, t));
    run_cycles(&mut r, 1, 2);
    r.arm.lock().unwrap().force_n = Some(over);
    run_cycles(&mut r, 3, 6);
    let recs: Vec<_> = std::iter::from_fn(|| r.records.pop_cycle()).collect();
    let first_over = recs
        .iter()
        .position(|c| c.wrench.is_some_and(|w| w.force_norm() > 15.0))
        .expect("a reading over the tripwire is recorded");
    assert_eq!(recs[first_over].mode, Mode::Playing as u8, "{first_over}");
    assert_ne!(
        recs[first_over + 1].mode,
        Mode::Playing as u8,
        "the command after the reading is the stop"
    );
    let trips: Vec<_> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            EventRecord::ForceTripwire {
                force_n, limit_n, ..
            } => Some((force_n, limit_n)),
            _ => None,
        })
        .collect();
    assert_eq!(trips.len(), 1, "one event per trip: {trips:?}");
    assert!((trips[0].0 - 229.84f64.sqrt()).abs() < 1e-12 && trips[0].1 == 15.0);

    // Held off while the force is gone, until the operator re-arms.
    r.arm.lock().unwrap().force_n = Some([0.0; 3]);
    let t = r.at(7);
    r.chunks.publish(&r.still_chunk(2, t));
    run_cycles(&mut r, 7, 9);
    assert_ne!(
        r.control.mode(),
        Mode::Playing,
        "a fresh chunk does not undo a trip"
    );
    r.control.rearm(r.at(10));
    assert!(!r.control.force_tripped());
}

#[test]
fn the_force_tripwire_fails_safe_on_a_missing_or_non_finite_reading_not_a_held_one() {
    for (force, held, trips) in [
        (Some([f64::NAN, 0.0, 0.0]), false, true),
        (None, false, true),
        (Some([0.0, 0.0, 1e3]), true, false),
        (Some([0.0, 0.0, 1.0]), false, false),
    ] {
        let mut r = rig_with_tripwire(15.0, [0.0; 3]);
        r.play(2);
        r.control.fb.wrench = force.map(|force_n| chunkrt_core::Wrench {
            force_n,
            ..Default::default()
        });
        r.control.fb.held = held;
        let t = r.at(3);
        r.control.check_force(t);
        assert_eq!(r.control.force_tripped(), trips, "{force:?} held {held}");
        let expect: Vec<ModeChangeReason> = if trips {
            vec![ModeChangeReason::ForceTripwire]
        } else {
            vec![]
        };
        assert_eq!(r.mode_changes(), expect, "{force:?} held {held}");
    }
}
