//! The stop begins where the arm is (issue 12).
//!
//! Executor + gate wired as the control loop wires them (`tick_at` on the deadline,
//! `filter`, `note_command`), fed arbitrary chunk streams — out of scale, constant
//! far away, far from the current pose, absurd but finite — and a withdrawal of the
//! policy's authority at an arbitrary cycle (shutdown, out of domain, backend error,
//! chunk expiry) at bus periods of 1 to 20 ms.
//!
//! The oracle (`chunkrt_tests::braking::check_stop`) reads the emitted command stream
//! only: from the last three commands before the withdrawal it takes the commanded
//! state, from the joint limits alone the quickest stop from there (by brute force),
//! and it requires every later command inside that stop's braking distance
//! (+1e-6 rad), the speed never above its peak nor rising after it, and rest once
//! the stop is over.

use chunkrt_core::{
    Chunk, Command, Executor, ExecutorConfig, Gate, JointLimit, JointLimits, Mode,
    ModeChangeReason, MonoTime, Resume, Setpoint, MAX_DOF, NS_PER_MS,
};
use chunkrt_tests::braking::check_stop;
use proptest::prelude::*;

const DOF: usize = 3;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What the policy sends.
#[derive(Clone, Copy, Debug)]
enum Stream {
    /// A motion 100x the plausible scale (an `act_std` off by 100).
    OutOfScale { amp: f64, freq_hz: f64 },
    /// The same far-away target in every chunk (a model with constant output).
    Constant { target: f64 },
    /// A smooth motion around a pose far from the arm's.
    Far { offset: f64, amp: f64 },
    /// Finite garbage: every setpoint drawn at random in +-`scale`.
    Absurd { scale: f64 },
    /// A plausible motion (the withdrawal then happens mid-motion).
    Plausible { amp: f64, freq_hz: f64 },
}

/// What takes authority away.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Trigger {
    /// Duration over / SIGINT: forced once, no chunk offered afterwards.
    Shutdown,
    /// The observation left the domain: forced every cycle, chunks still offered.
    OutOfDomain,
    /// The backend fails from here on: forced every cycle, chunks still offered.
    BackendError,
    /// The policy goes silent: the playing chunk expires.
    Silence,
}

#[derive(Clone, Debug)]
struct Case {
    period_ms: u64,
    lim: JointLimit,
    blend_ms: u64,
    stream: Stream,
    stream_ms: u64,
    trigger: Trigger,
    trigger_cycle: usize,
    jitter: Vec<u64>,
    seed: u64,
}

fn stream() -> impl Strategy<Value = Stream> {
    prop_oneof![
        (2.0f64..300.0, 0.2f64..3.0).prop_map(|(amp, freq_hz)| Stream::OutOfScale { amp, freq_hz }),
        (-50.0f64..50.0).prop_map(|target| Stream::Constant { target }),
        ((-3.0f64..3.0), 0.0f64..0.5).prop_map(|(offset, amp)| Stream::Far { offset, amp }),
        (0.1f64..1e3).prop_map(|scale| Stream::Absurd { scale }),
        (0.05f64..1.0, 0.1f64..2.0).prop_map(|(amp, freq_hz)| Stream::Plausible { amp, freq_hz }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![1u64, 2, 4, 5, 10, 20]),
        (0.5f64..3.0, 2.0f64..20.0, 10.0f64..100.0, 0.5f64..1.0),
        prop::sample::select(vec![0u64, 20, 40, 100, 200]),
        stream(),
        20u64..100,
        prop::sample::select(vec![
            Trigger::Shutdown,
            Trigger::OutOfDomain,
            Trigger::BackendError,
            Trigger::Silence,
        ]),
        (
            0.02f64..0.9,
            prop::collection::vec(0u64..1_000_000, 16),
            any::<u64>(),
        ),
    )
        .prop_map(
            |(
                period_ms,
                (vel, acc, jerk_ratio, brake_frac),
                blend_ms,
                stream,
                stream_ms,
                trigger,
                (trigger_at, jitter, seed),
            )| {
                // Withdraw somewhere in the first 3 s of motion.
                let trigger_cycle = 3 + ((3000.0 / period_ms as f64) * trigger_at) as usize;
                Case {
                    period_ms,
                    lim: JointLimit {
                        pos_min_rad: -3.0,
                        pos_max_rad: 3.0,
                        pos_margin_rad: 0.02,
                        max_vel_rad_s: vel,
                        max_acc_rad_s2: acc,
                        max_jerk_rad_s3: acc * jerk_ratio,
                        brake_acc_rad_s2: acc * brake_frac,
                    },
                    blend_ms,
                    stream,
                    stream_ms,
                    trigger,
                    trigger_cycle,
                    jitter,
                    seed,
                }
            },
        )
}

/// A small deterministic generator for the absurd stream (no extra dependency).
fn splitmix(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
}

fn chunk(s: Stream, seq: u64, now: MonoTime, rng: &mut u64) -> Chunk {
    let mut c = Chunk {
        seq,
        t_obs: now,
        t_start: now,
        t_publish: now,
        dt_ns: 20 * NS_PER_MS,
        len: 25,
        dof: DOF as u16,
        ..Chunk::default()
    };
    for i in 0..25 {
        let t = c.t_of(i).as_secs_f64();
        for j in 0..DOF {
            let phase = std::f64::consts::TAU * t + j as f64;
            c.pos_rad[i][j] = match s {
                Stream::OutOfScale { amp, freq_hz } => amp * (freq_hz * phase).sin(),
                Stream::Constant { target } => target + j as f64,
                Stream::Far { offset, amp } => offset + amp * (0.5 * phase).sin(),
                Stream::Absurd { scale } => scale * splitmix(rng),
                Stream::Plausible { amp, freq_hz } => amp * (freq_hz * phase).sin(),
            };
        }
    }
    c
}

fn run(c: &Case) -> Result<(), TestCaseError> {
    let limits = JointLimits::uniform(DOF, c.lim);
    let cfg = ExecutorConfig {
        dof: DOF,
        max_chunk_age_ns: 200 * NS_PER_MS,
        blend_ns: c.blend_ms * NS_PER_MS,
        // Both seam kinds (the seed's low bit).
        seam: if c.seed & 1 == 0 {
            chunkrt_core::SeamMode::Crossfade
        } else {
            chunkrt_core::SeamMode::Transition
        },
        lookahead_ns: 0,
        safe_stop_after_ns: 60_000 * NS_PER_MS,
        resume: Resume::Auto,
        dt_min_ns: NS_PER_MS,
        dt_max_ns: 100 * NS_PER_MS,
        min_len: 2,
        max_time_offset_ns: 1_000 * NS_PER_MS,
        ensemble_coeff: 0.0,
        ensemble_chunks: 8,
    };
    let period_ns = c.period_ms * NS_PER_MS;
    let t = period_ns as f64 * 1e-9;
    let init = [0.0; MAX_DOF];
    let t0 = MonoTime::from_ms(5_000);
    let mut exec = Executor::new(cfg, limits, &init, t0);
    let mut gate = Gate::new(limits, period_ns, &init);
    let (mut sp, mut cmd) = (Setpoint::default(), Command::default());
    let mut cmds: Vec<[f64; MAX_DOF]> = vec![init; 3];
    let mut rng = c.seed;
    let mut seq = 0;
    let mut withdrawn_at: Option<usize> = None;
    // Long enough for any stop within these limits (V / A + A / J < 2 s), then some.
    let stop_cycles = (2_500 / c.period_ms) as usize;
    let total = c.trigger_cycle + stop_cycles;
    let stream_every = (c.stream_ms / c.period_ms).max(1) as usize;
    for k in 0..total {
        let deadline = t0.add_ns(k as u64 * period_ns);
        let now = deadline.add_ns(c.jitter[k % c.jitter.len()] % (period_ns / 2));
        let after = k >= c.trigger_cycle;
        let offer = k % stream_every == 0
            && !(after && matches!(c.trigger, Trigger::Shutdown | Trigger::Silence));
        if offer {
            seq += 1;
            let _ = exec.offer(&chunk(c.stream, seq, now, &mut rng), now);
        }
        let forced = match c.trigger {
            Trigger::Shutdown => k == c.trigger_cycle,
            Trigger::OutOfDomain | Trigger::BackendError => after,
            Trigger::Silence => false,
        };
        if forced {
            let reason = match c.trigger {
                Trigger::OutOfDomain => ModeChangeReason::OutOfDomain,
                Trigger::BackendError => ModeChangeReason::BackendError,
                _ => ModeChangeReason::Shutdown,
            };
            exec.force_fallback(now, reason);
        }
        exec.tick_at(now, deadline, &mut sp);
        gate.filter(&sp, &mut cmd);
        exec.note_command(&gate.commanded_state());
        while let Some(ev) = exec.pop_event() {
            // The withdrawal's cycle: the trigger itself, or (silence) the cycle the
            // last chunk ran out. Only the cycle is taken from the executor; what
            // is checked is the command stream.
            if after && withdrawn_at.is_none() && ev.from == Mode::Playing {
                withdrawn_at = Some(k);
            }
        }
        if forced && withdrawn_at.is_none() && c.trigger != Trigger::Silence {
            // Not playing when forced (decelerating or holding already): the stop in
            // progress is the withdrawal, checked from here.
            withdrawn_at = Some(k);
        }
        cmds.push(cmd.pos_rad);
    }
    let Some(w) = withdrawn_at else {
        // Silence while nothing was playing: nothing to withdraw.
        return Ok(());
    };
    // Commands are at `cmds[k + 3]` for cycle `k`; the last one before the
    // withdrawal cycle `w` is `cmds[w + 2]`.
    let base = w + 2;
    for j in 0..DOF {
        let q: Vec<f64> = cmds.iter().map(|c| c[j]).collect();
        if let Err(e) = check_stop(&q, base, &c.lim, t) {
            return Err(TestCaseError::fail(format!("joint {j}: {e}")));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(160), ..ProptestConfig::default() })]

    #[test]
    fn after_a_withdrawal_the_commands_stop_within_the_braking_envelope(c in case()) {
        run(&c)?;
    }
}

/// The same withdrawal on the EtherCAT backend over the in-process simulated chain of
/// 7 CiA 402 drives, with the real runtime: the scripted policy of
/// `arm-ethercat-veth.toml` asked for 10 rad/s (the bundled ONNX policies' declared
/// domain does not contain the simulated chain's start pose) plays until the run's
/// duration is over; the commands the drives received after the withdrawal are
/// judged by the braking oracle.
#[test]
fn on_the_ethercat_backend_the_stop_begins_where_the_arm_is() {
    use chunkrt_ecsim::{SimConfig, SimNetwork};
    use chunkrt_ethercat::{EthercatBackend, EthercatParams};
    use chunkrt_rt::{RunOptions, Runtime};
    use chunkrt_tests::faulty::{out_dir, Logged};
    use std::time::Duration;

    let root = chunkrt_tests::repo_root();
    let mut cfg = chunkrt_config::Config::load(&root.join("rt-config/arm-ethercat-veth.toml"))
        .expect("rt-config/arm-ethercat-veth.toml loads");
    cfg.control.lock_memory = false;
    cfg.control.cpu = -1;
    cfg.inference.cpu = -1;
    cfg.telemetry.status_interval_ms = 0.0;
    // A policy that asks for 5x the joints' velocity limits: the gate holds the
    // commands well behind its intent, the case where a stop planned from the intent
    // chases it.
    cfg.policy.max_vel_rad_s = 10.0;
    let mut sim = SimConfig::virtual_chain(7);
    sim.cycle_us = (cfg.control.period_ms * 1000.0).round() as u64;
    let mut params = EthercatParams::from_config(&cfg).expect("ethercat section");
    params.dc_static_sync_iterations = 20;
    params.frame_timeout = Duration::from_millis(20);
    params.frame_late = Duration::from_millis(10);
    let net = SimNetwork::new(sim).expect("valid simulator config");
    let (backend, _ctl) = EthercatBackend::simulated(params, net);
    let (logged, log) = Logged::new(backend);
    let policy = chunkrt_rt::build::policy(&cfg).expect("the out-of-scale ONNX policy loads");
    let opts = RunOptions {
        duration: Some(Duration::from_secs(3)),
        out_dir: Some(out_dir("withdrawal-ethercat")),
        ..RunOptions::default()
    };
    Runtime::with_parts(&cfg, Box::new(logged), policy)
        .run(&opts)
        .expect("the run completes");
    let seen = log.lock().unwrap().clone();
    let last_playing = seen
        .iter()
        .rposition(|e| e.seen.cmd.chunk_seq != 0)
        .expect("the policy played");
    assert!(last_playing >= 2 && last_playing + 1 < seen.len());
    let limits = cfg.joint_limits();
    let t = cfg.period_ns() as f64 * 1e-9;
    let mut moved: f64 = 0.0;
    for j in 0..cfg.control.joints {
        let q: Vec<f64> = seen.iter().map(|e| e.seen.cmd.pos_rad[j]).collect();
        let s = check_stop(&q, last_playing, &limits.joint[j], t)
            .unwrap_or_else(|e| panic!("joint {j}: {e}"));
        moved = moved.max(s.moved_rad);
    }
    eprintln!("EtherCAT, 10 rad/s policy: moved at most {moved:.4} rad after the withdrawal");
}
