//! Proof that the control loop's per-cycle path does not allocate: a counting global
//! allocator around 10 000+ real ticks (executor, gate, simulated arm, rings, buffers).

use chunkrt_alloc_count::{count_allocations, CountingAllocator};
use chunkrt_core::{Chunk, Executor, Feedback, Gate, MonoTime, Observation};
use chunkrt_core::{DomainBox, ExcludedRegion, Exclusions, ModeChangeReason, ThermalLimits};
use chunkrt_rt::{ControlLoop, ControlParts};
use chunkrt_telemetry::EventRecord;
use chunkrt_tests::sim_config;
use std::sync::atomic::{AtomicU64, Ordering};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

static FAKE_NS: AtomicU64 = AtomicU64::new(0);

/// The fake clock is process-wide: tests that drive it run one at a time. Run side by
/// side, one test's clock reached the other's loop (its feedback stamped with the
/// other's time), and chunks that should have played were rejected.
static ONE_CLOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fake_now() -> MonoTime {
    MonoTime(FAKE_NS.load(Ordering::Relaxed))
}

/// The stages in front of the permission gate a run has.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shaped {
    /// None.
    No,
    /// The action filter, the torque slew limit and a residual.
    Filtered,
    /// A residual, and episodes.
    Episodes,
    /// The Cartesian stage: the bundled Panda's kinematics, a tool-speed limit and a
    /// plane the scripted motion runs into (issue 57).
    Cartesian,
    /// The contact force tripwire armed, the simulated arm given a wrist sensor that
    /// reads 1 N, then 20 N from exchange 3000 on (in the counted cycles).
    Force,
}

/// The simulated arm with a wrist force sensor of a scripted reading.
struct WithForce {
    arm: Box<dyn chunkrt_core::Backend>,
    exchanges: u64,
}

impl WithForce {
    fn reading(&self, t_capture: MonoTime) -> Option<chunkrt_core::Wrench> {
        let f = if self.exchanges >= 3_000 { 20.0 } else { 1.0 };
        Some(chunkrt_core::Wrench {
            t_capture,
            force_n: [0.0, 0.0, f],
            torque_nm: [0.0; 3],
        })
    }
}

impl chunkrt_core::Backend for WithForce {
    fn dof(&self) -> usize {
        self.arm.dof()
    }
    fn name(&self) -> &'static str {
        "sim-with-force"
    }
    fn start(
        &mut self,
        now: MonoTime,
        fb: &mut Feedback,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.arm.start(now, fb)?;
        fb.wrench = self.reading(fb.t_capture);
        Ok(())
    }
    fn exchange(
        &mut self,
        now: MonoTime,
        cmd: &chunkrt_core::Command,
        fb: &mut Feedback,
    ) -> Result<(), chunkrt_core::BackendError> {
        self.exchanges += 1;
        let r = self.arm.exchange(now, cmd, fb);
        fb.wrench = self.reading(fb.t_capture);
        r
    }
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.arm.shutdown(now)
    }
}

/// The gate's Cartesian stage for the bundled Panda (flange at 0.107 m on link 7): a
/// tool-speed limit of 0.05 m/s and a keep-out plane 2 cm below the flange at `start`.
fn cartesian(start: &chunkrt_core::JointVec) -> chunkrt_core::CartesianFilter {
    let model = chunkrt_tests::repo_root().join("models/franka_panda/panda.xml");
    let chain = chunkrt_mujoco::chain_from_mjcf(&model, "link7")
        .unwrap()
        .chain
        .with_tool_offset([0.0, 0.0, 0.107])
        .unwrap();
    let p = chain.tool_point(start);
    let plane = chunkrt_core::Plane::new([p[0], p[1], p[2] - 0.02], [0.0, 0.0, 1.0]).unwrap();
    let limits = chunkrt_core::CartesianLimits::new(Some(0.05), 2.0, &[plane]).unwrap();
    chunkrt_core::CartesianFilter::new(chain, limits)
}

/// Runs `cycles` ticks at `period_ms` with chunks every 50 ms and returns the
/// allocations counted on the control path after warm-up.
fn allocations_over(period_ms: f64, cycles: u64, domain: bool) -> u64 {
    allocations_with(
        period_ms,
        cycles,
        domain,
        None,
        Exclusions::NONE,
        None,
        Shaped::No,
    )
    .0
}

/// As `allocations_over`, with the control-side delay lines of `inject` attached.
#[allow(clippy::too_many_arguments)]
fn allocations_with(
    period_ms: f64,
    cycles: u64,
    domain: bool,
    inject: Option<chunkrt_config::InjectConfig>,
    exclusions: Exclusions,
    thermal: Option<ThermalLimits>,
    shaped: Shaped,
) -> (u64, u64, [u64; chunkrt_core::CONSTRAINT_COUNT]) {
    let residual = matches!(shaped, Shaped::Filtered | Shaped::Episodes);
    let _clock = ONE_CLOCK.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = sim_config(|c| c.control.period_ms = period_ms);
    let period_ns = cfg.period_ns();
    let t0 = MonoTime::from_ms(1_000);
    FAKE_NS.store(t0.0, Ordering::Relaxed);

    let mut backend = chunkrt_rt::build::backend(&cfg).unwrap();
    if shaped == Shaped::Force {
        backend = Box::new(WithForce {
            arm: backend,
            exchanges: 0,
        });
    }
    let mut policy = chunkrt_rt::build::policy(&cfg).unwrap();
    let mut first = Feedback::default();
    backend.start(t0, &mut first).unwrap();
    let limits = cfg.joint_limits();
    let (mut chunk_pub, chunk_sub) = chunkrt_buffer::channel(Chunk::default());
    let (obs_pub, mut obs_sub) = chunkrt_buffer::channel(Observation::default());
    let (cycle_p, event_p, _infer_p, mut consumers) =
        chunkrt_telemetry::rings(cfg.telemetry.ring_capacity);
    let mut control = ControlLoop::new(ControlParts {
        executor: Executor::new(cfg.executor_config(), limits, &first.pos_rad, t0),
        gate: if shaped == Shaped::Cartesian {
            Gate::new(limits, period_ns, &first.pos_rad)
                .with_cartesian(Some(cartesian(&first.pos_rad)))
        } else if shaped != Shaped::No {
            // The action filter at 5 Hz and a torque slew limit far below the jerk
            // limit (issue 41): both act on the scripted motion.
            Gate::new(limits, period_ns, &first.pos_rad)
                .with_action_filter((shaped == Shaped::Filtered).then_some(5.0))
                .with_torque_slew(
                    (shaped == Shaped::Filtered).then_some([5.0; chunkrt_core::MAX_DOF]),
                )
        } else {
            Gate::new(limits, period_ns, &first.pos_rad)
        },
        backend,
        chunks: chunk_sub,
        observations: obs_pub,
        cycles_out: cycle_p,
        events_out: event_p,
        domain: domain.then(|| {
            cfg.domain_box().unwrap_or(DomainBox {
                dof: cfg.control.joints,
                lo_rad: [-10.0; 16],
                hi_rad: [10.0; 16],
            })
        }),
        period_ns,
        first_feedback: first,
        clock: fake_now,
    });
    control = control
        .with_exclusions(exclusions)
        .with_thermal(thermal)
        .with_force_tripwire((shaped == Shaped::Force).then_some(15.0));
    let (mut residual_pub, residual_sub) = chunkrt_buffer::channel(Chunk::default());
    if residual {
        // A residual stage (issue 40) whose correction is out of scale: its bound,
        // rate and region act.
        control = control.with_residual(
            Some(residual_sub),
            Some(chunkrt_core::ResidualLimits {
                dof: cfg.control.joints,
                bound_rad: [0.05; chunkrt_core::MAX_DOF],
                rate_rad_s: [0.2; chunkrt_core::MAX_DOF],
                acc_rad_s2: [1.0; chunkrt_core::MAX_DOF],
                jerk_rad_s3: [50.0; chunkrt_core::MAX_DOF],
                // Joint 0's scripted motion (0 to 0.6 rad) leaves it and comes back.
                region: Some(chunkrt_core::ActivityRegion {
                    lo_rad: [
                        -0.2, -3.5, -3.5, -3.5, -3.5, -3.5, -3.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                        0.0, 0.0, 0.0,
                    ],
                    hi_rad: [
                        0.2, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                        0.0,
                    ],
                    fade_rad: 0.05,
                }),
            }),
        );
    }
    if shaped == Shaped::Episodes {
        // Episodes (issue 40) of 2 s from where the arm is toward a goal out of
        // reach, a residual budget no episode keeps: episodes end, the residual is
        // rolled back, resets run.
        let mut plan = chunkrt_core::EpisodePlan {
            dof: cfg.control.joints,
            count: 50,
            starts: [first.pos_rad; chunkrt_core::episodes::MAX_POSES],
            n_starts: 1,
            held_out: [false; chunkrt_core::episodes::MAX_POSES],
            goals: [[0.0; chunkrt_core::MAX_DOF]; chunkrt_core::episodes::MAX_POSES],
            n_goals: 1,
            time_limit_ns: 2_000_000_000,
            reset_limit_ns: 60_000_000_000,
            tolerance_rad: 0.01,
            reset_tolerance_rad: 0.01,
            settle_vel_rad_s: 0.05,
            settle_ns: 0,
        };
        plan.goals[0] = [5.0; chunkrt_core::MAX_DOF];
        let budget = chunkrt_core::Budget {
            max_track_p99_rad: Some(0.0),
            window_episodes: 1,
            ..chunkrt_core::Budget::default()
        };
        control = control.with_episodes(Some(plan), budget);
    }
    if let Some(inject) = &inject {
        control = control.attach_injection(inject, &first);
        assert!(control.injection().is_some());
        // And a following-error limit tight enough to trip on every moving cycle:
        // its events and fallbacks are on the counted path too (issue 16).
        control = control.with_following_error(Some([1e-4; chunkrt_core::MAX_DOF]));
    }
    // The synthetic camera's view of the arm (issue 19), published every cycle; read
    // on the camera's side (not counted) as the camera thread does.
    let mut world = None;
    if inject.is_some() {
        let (world_pub, world_sub) = chunkrt_buffer::channel(Observation::default());
        control = control.with_world(world_pub);
        world = Some(world_sub);
    }

    let chunk_period_ns = 50_000_000;
    let mut next_chunk = t0;
    let mut chunk = Box::new(Chunk::default());
    let mut seq = 0;
    let warmup = 500;
    let mut counted_allocs = 0;
    let mut excluded_events = 0;
    for i in 0..(warmup + cycles) {
        let deadline = t0.add_ns(i * period_ns);
        let wake = deadline.add_ns(20_000 + (i % 7) * 3_000);
        FAKE_NS.store(wake.0, Ordering::Relaxed);
        // The inference side (not counted): a chunk every 50 ms from the newest observation.
        if wake >= next_chunk {
            next_chunk = next_chunk.add_ns(chunk_period_ns);
            let _ = obs_sub.latest();
            let obs = *obs_sub.peek();
            if obs.t_capture.is_set() {
                policy.infer(&obs, &mut chunk).unwrap();
                seq += 1;
                chunk.seq = seq;
                chunk.t_obs = obs.t_capture;
                chunk.t_start = obs.t_capture;
                chunk.t_publish = wake;
                chunk.episode = obs.episode;
                // The reset planner's part: hold the start pose while resetting.
                if obs
                    .episode
                    .is_some_and(|t| t.phase == chunkrt_core::Phase::Reset)
                {
                    for row in chunk.pos_rad.iter_mut() {
                        *row = first.pos_rad;
                    }
                }
                if residual {
                    let mut correction = *chunk;
                    for row in correction.pos_rad.iter_mut() {
                        row.fill(if seq % 2 == 0 { 10.0 } else { -3.0 });
                    }
                    let _ = residual_pub.publish(&correction);
                }
                let _ = chunk_pub.publish(&chunk);
            }
        }
        let ((), n) = count_allocations(|| control.cycle(deadline, wake, 0));
        if i >= warmup {
            counted_allocs += n;
        }
        if let Some(w) = world.as_mut() {
            w.update();
            assert_eq!(w.peek().seq, i, "the camera sees each cycle");
        }
        // The telemetry side (not counted) keeps the rings from filling.
        if i % 100 == 0 {
            while consumers.pop_cycle().is_some() {}
            while let Some(e) = consumers.pop_event() {
                if matches!(e, EventRecord::Mode(m)
                    if m.reason == ModeChangeReason::Excluded || m.reason == ModeChangeReason::Thermal)
                    || matches!(e, EventRecord::ForceTripwire { .. })
                {
                    excluded_events += 1;
                }
                if let EventRecord::Episode(s) = e {
                    // Counted with the withdrawals: the episode ends (and the
                    // residual's rollback) ran on the counted path.
                    excluded_events += 1 + u64::from(s.breach.is_some()) * 1000;
                }
            }
        }
    }
    assert!(seq > 100, "chunks were produced");
    let mut counts = [0; chunkrt_core::CONSTRAINT_COUNT];
    counts.copy_from_slice(control.gate_counts());
    (counted_allocs, excluded_events, counts)
}

#[test]
fn ten_thousand_cycles_at_20ms_allocate_nothing() {
    assert_eq!(allocations_over(20.0, 10_000, true), 0);
}

#[test]
fn ten_thousand_cycles_at_1ms_allocate_nothing() {
    assert_eq!(allocations_over(1.0, 10_000, false), 0);
}

#[test]
fn ten_thousand_cycles_with_every_delay_line_allocate_nothing() {
    // Transport, feedback and observation delay lines on the control thread (issue 8),
    // the margin probe (issue 14) on from the second cycle to the last, and the
    // offset on the measured positions (issue 41, `chunkrt gap`'s sensing channel).
    let inject = chunkrt_config::InjectConfig {
        transport_delay_ms: 5.0,
        feedback_delay_ms: 3.0,
        feedback_bias_rad: Some(chunkrt_config::PerJoint::All(1e-3)),
        observation_delay_ms: 30.0,
        probe: Some(chunkrt_config::ProbeConfig {
            joint: 0,
            shape: chunkrt_config::ProbeShape::Multisine,
            amplitude_rad: 1e-3,
            freqs_hz: vec![0.5, 1.0, 2.0],
            start_s: 0.001,
            duration_s: 9.0,
            ramp_s: 0.5,
            max_excursion_rad: 0.1,
        }),
        ..Default::default()
    };
    assert_eq!(
        allocations_with(
            1.0,
            10_000,
            true,
            Some(inject),
            Exclusions::NONE,
            None,
            Shaped::No
        )
        .0,
        0
    );
}

#[test]
fn ten_thousand_cycles_in_and_out_of_an_excluded_region_allocate_nothing() {
    // The scripted goals move joint 0 between 0 and 0.6 rad: it enters the region
    // moving (authority taken, braked to rest, out of the region by its velocity),
    // plays again, and so on (issue 41's omission-log exclusions).
    let mut region = ExcludedRegion::unbounded(0);
    [region.pos_lo_rad[0], region.pos_hi_rad[0]] = [0.2, 0.4];
    [region.vel_lo_rad_s[0], region.vel_hi_rad_s[0]] = [0.05, 10.0];
    let mut ex = Exclusions::NONE;
    assert!(ex.push(region));
    let (allocations, excluded, _) =
        allocations_with(20.0, 10_000, true, None, ex, None, Shaped::No);
    assert!(excluded > 2, "the region was entered {excluded} time(s)");
    assert_eq!(allocations, 0);
}

#[test]
fn ten_thousand_cycles_heated_derated_and_withdrawn_by_the_thermal_monitor_allocate_nothing() {
    // Every joint rated at a fraction of the torque the simulated drives spend moving
    // between the scripted goals: derated, then withdrawn (the monitor's update, the
    // gate's derated limits and the fallback run every counted cycle).
    let cfg = sim_config(|_| {});
    let mut limits = ThermalLimits {
        dof: cfg.control.joints,
        continuous_nm: [f64::INFINITY; chunkrt_core::MAX_DOF],
        time_constant_s: [0.5; chunkrt_core::MAX_DOF],
        derate_at: 0.3,
        withdraw_at: 0.9,
        min_derate: 0.2,
    };
    limits.continuous_nm[..cfg.control.joints].fill(0.5);
    let (allocations, withdrawn, _) = allocations_with(
        20.0,
        10_000,
        true,
        None,
        Exclusions::NONE,
        Some(limits),
        Shaped::No,
    );
    assert!(
        withdrawn >= 1,
        "the monitor took authority {withdrawn} time(s)"
    );
    assert_eq!(allocations, 0);
}

#[test]
fn ten_thousand_cycles_through_the_residual_gate_action_filter_and_torque_slew_limit_allocate_nothing(
) {
    let (allocations, _, shaped_counts) = allocations_with(
        20.0,
        10_000,
        true,
        None,
        Exclusions::NONE,
        None,
        Shaped::Filtered,
    );
    use chunkrt_core::Constraint;
    for c in [
        Constraint::TorqueSlew,
        Constraint::ActionFilter,
        Constraint::ResidualBound,
        Constraint::ResidualRate,
        Constraint::ResidualRegion,
    ] {
        assert!(
            shaped_counts[c as usize] > 0,
            "{} acted: {shaped_counts:?}",
            c.name()
        );
    }
    assert_eq!(allocations, 0);
}

#[test]
fn ten_thousand_cycles_of_episodes_resets_and_a_residual_rollback_allocate_nothing() {
    let (allocations, episodes, counts) = allocations_with(
        20.0,
        10_000,
        true,
        None,
        Exclusions::NONE,
        None,
        Shaped::Episodes,
    );
    // Episodes of 2 s (the goal out of reach) with resets between them ended; the
    // first rolled the residual back.
    assert!(
        episodes % 1000 >= 5 && episodes / 1000 == 1,
        "episodes {episodes}"
    );
    assert!(counts[chunkrt_core::Constraint::ResidualBound as usize] > 0);
    assert_eq!(allocations, 0);
}

#[test]
fn ten_thousand_cycles_through_the_cartesian_stage_allocate_nothing() {
    let (allocations, _, counts) = allocations_with(
        20.0,
        10_000,
        true,
        None,
        Exclusions::NONE,
        None,
        Shaped::Cartesian,
    );
    use chunkrt_core::Constraint;
    for c in [Constraint::Approach, Constraint::ToolSpeed] {
        assert!(counts[c as usize] > 0, "{} acted: {counts:?}", c.name());
    }
    assert_eq!(allocations, 0);
}

#[test]
fn ten_thousand_cycles_held_off_by_the_force_tripwire_allocate_nothing() {
    let (allocations, events, _) = allocations_with(
        20.0,
        10_000,
        true,
        None,
        Exclusions::NONE,
        None,
        Shaped::Force,
    );
    assert_eq!(events, 1, "the tripwire fired once");
    assert_eq!(allocations, 0);
}

#[test]
fn the_counting_allocator_does_count() {
    // The proof above is only worth something if the allocator sees allocations.
    let (v, n) = count_allocations(|| std::hint::black_box(vec![1u8; 64]));
    assert_eq!(n, 1);
    drop(v);
}
