//! Each control-side injection point delays exactly what it says, and a loop without
//! injection (or with an all-zero `[inject]`) runs exactly the cycle it ran before.
//!
//! The loop runs in simulated time: a thread-local clock, the real executor, gate and
//! simulated arm, and chunks from the scripted policy every 50 ms.

use chunkrt_config::{Config, InjectConfig};
use chunkrt_core::{
    Backend, BackendError, Chunk, Command, Executor, Feedback, Gate, MonoTime, Observation,
};
use chunkrt_rt::inject::ControlInjection;
use chunkrt_rt::{ControlLoop, ControlParts};
use std::cell::Cell;
use std::path::Path;
use std::sync::{Arc, Mutex};

thread_local! {
    static NOW: Cell<u64> = const { Cell::new(0) };
}

fn fake_now() -> MonoTime {
    MonoTime(NOW.with(|c| c.get()))
}

/// What the backend saw: the command it was handed and the measurement it returned.
type Wire = Arc<Mutex<Vec<(Command, Feedback)>>>;

/// The simulated arm, recording every exchange (tests only: it locks and allocates).
struct Recording {
    arm: Box<dyn Backend>,
    log: Wire,
}

impl Backend for Recording {
    fn dof(&self) -> usize {
        self.arm.dof()
    }
    fn name(&self) -> &'static str {
        "recording"
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
        let r = self.arm.exchange(now, cmd, fb);
        self.log.lock().unwrap().push((*cmd, *fb));
        r
    }
    fn shutdown(&mut self, now: MonoTime) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.arm.shutdown(now)
    }
}

/// One cycle as the loop saw it.
struct Trace {
    /// The gate's output (what the loop meant to send).
    gate: Vec<Command>,
    /// What the backend got and measured.
    wire: Vec<(Command, Feedback)>,
    /// The measurement the loop used after the cycle.
    loop_fb: Vec<Feedback>,
    /// Sequence number of the newest observation the inference side could read.
    obs_seq: Vec<Option<u64>>,
    /// Whether the loop carried injection code.
    injected: bool,
}

const PERIOD_NS: u64 = 1_000_000;

fn config() -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rt-config/sim-scripted.toml");
    let mut cfg = Config::load(&path).expect("rt-config/sim-scripted.toml loads");
    cfg.control.period_ms = 1.0;
    cfg
}

/// Runs `cycles` cycles; `inject` is attached as the runtime attaches it, or forced
/// on (`force`) even when it asks for nothing.
fn run(inject: &InjectConfig, force: bool, cycles: u64) -> Trace {
    let cfg = config();
    let t0 = MonoTime::from_ms(1_000);
    NOW.with(|c| c.set(t0.0));
    let log: Wire = Arc::default();
    let mut backend: Box<dyn Backend> = Box::new(Recording {
        arm: chunkrt_rt::build::backend(&cfg).unwrap(),
        log: log.clone(),
    });
    let mut policy = chunkrt_rt::build::policy(&cfg).unwrap();
    let mut first = Feedback::default();
    backend.start(t0, &mut first).unwrap();
    let limits = cfg.joint_limits();
    let (mut chunk_pub, chunk_sub) = chunkrt_buffer::channel(Chunk::default());
    let (obs_pub, mut obs_sub) = chunkrt_buffer::channel(Observation::default());
    let (cycle_p, event_p, _infer_p, mut consumers) = chunkrt_telemetry::rings(1 << 16);
    let control = ControlLoop::new(ControlParts {
        executor: Executor::new(cfg.executor_config(), limits, &first.pos_rad, t0),
        gate: Gate::new(limits, PERIOD_NS, &first.pos_rad),
        backend,
        chunks: chunk_sub,
        observations: obs_pub,
        cycles_out: cycle_p,
        events_out: event_p,
        domain: None,
        period_ns: PERIOD_NS,
        first_feedback: first,
        clock: fake_now,
    });
    let mut control = if force {
        let inj = ControlInjection::new(inject, control.last_command(), &first);
        control.with_injection(inj)
    } else {
        control.attach_injection(inject, &first)
    };
    let mut trace = Trace {
        gate: vec![],
        wire: vec![],
        loop_fb: vec![],
        obs_seq: vec![],
        injected: control.injection().is_some(),
    };
    let mut chunk = Box::new(Chunk::default());
    let mut seq = 0;
    for i in 1..=cycles {
        let deadline = t0.add_ns(i * PERIOD_NS);
        let wake = deadline.add_ns(15_000);
        NOW.with(|c| c.set(wake.0));
        if i % 50 == 1 {
            let _ = obs_sub.latest();
            let obs = *obs_sub.peek();
            if obs.t_capture.is_set() {
                policy.infer(&obs, &mut chunk).unwrap();
                seq += 1;
                chunk.seq = seq;
                chunk.t_obs = obs.t_capture;
                chunk.t_start = obs.t_capture;
                chunk.t_publish = wake;
                chunk_pub.publish(&chunk);
            }
        }
        control.cycle(deadline, wake, 0);
        trace.gate.push(*control.last_command());
        trace.loop_fb.push(*control.last_feedback());
        let _ = obs_sub.latest();
        let o = obs_sub.peek();
        trace.obs_seq.push(o.t_capture.is_set().then_some(o.seq));
        while consumers.pop_cycle().is_some() {}
        while consumers.pop_event().is_some() {}
    }
    assert!(cycles < 500 || seq > 3, "chunks were produced");
    trace.wire = log.lock().unwrap().clone();
    trace
}

/// The arm moves: a delay test on a constant stream would prove nothing.
fn assert_moving(t: &Trace) {
    let first = t.gate[0].pos_rad[0];
    assert!(
        t.gate.iter().any(|c| (c.pos_rad[0] - first).abs() > 1e-3),
        "the commands never changed"
    );
}

#[test]
fn zero_injection_adds_nothing_to_the_cycle() {
    let plain = run(&InjectConfig::default(), false, 1500);
    assert!(!plain.injected, "a zero [inject] attaches no delay line");
    assert_moving(&plain);
    // Only inference-side injection: still no control-side code path.
    let inference_only = InjectConfig {
        drop_chunk_probability: 0.5,
        ..InjectConfig::default()
    };
    assert!(!run(&inference_only, false, 10).injected);
    // Even forced through the injection path, zero delays change no bit.
    let forced = run(&InjectConfig::default(), true, 1500);
    assert!(forced.injected);
    assert_eq!(plain.wire.len(), forced.wire.len());
    for (k, (a, b)) in plain.wire.iter().zip(&forced.wire).enumerate() {
        assert_eq!(a.0, b.0, "command at cycle {k}");
        assert_eq!(a.1, b.1, "feedback at cycle {k}");
    }
    for k in 0..plain.obs_seq.len() {
        assert_eq!(plain.obs_seq[k], forced.obs_seq[k]);
        assert_eq!(plain.loop_fb[k], forced.loop_fb[k]);
    }
}

#[test]
fn transport_delay_shifts_the_commands_by_exactly_its_cycles() {
    let cfg = InjectConfig {
        transport_delay_ms: 5.0,
        ..InjectConfig::default()
    };
    let t = run(&cfg, false, 1500);
    assert!(t.injected);
    assert_moving(&t);
    for k in 0..t.wire.len() {
        let sent = &t.wire[k].0;
        if k >= 5 {
            assert_eq!(
                *sent,
                t.gate[k - 5],
                "cycle {k}: the gate's output of cycle {}",
                k - 5
            );
        } else {
            // Until the first delayed command arrives, the drives hold the start pose.
            assert_eq!(sent.pos_rad, t.wire[0].0.pos_rad, "cycle {k}");
            assert_eq!(sent.t_cmd, MonoTime::ZERO, "cycle {k}: the hold command");
        }
    }
}

#[test]
fn feedback_delay_shows_the_loop_measurements_exactly_that_old() {
    let cfg = InjectConfig {
        feedback_delay_ms: 3.0,
        ..InjectConfig::default()
    };
    let t = run(&cfg, false, 1500);
    assert_moving(&t);
    for k in 3..t.wire.len() {
        assert_eq!(t.loop_fb[k], t.wire[k - 3].1, "cycle {k}");
    }
    // The commands themselves are not delayed.
    for k in 0..t.wire.len() {
        assert_eq!(t.wire[k].0, t.gate[k]);
    }
}

#[test]
fn observation_delay_shows_inference_an_observation_exactly_that_old() {
    let cfg = InjectConfig {
        observation_delay_ms: 30.0,
        ..InjectConfig::default()
    };
    let t = run(&cfg, false, 1500);
    assert_moving(&t);
    for (k, seq) in t.obs_seq.iter().enumerate() {
        // Cycle k publishes the observation captured in cycle k - 30 (seq counts from 0).
        let expected = (k >= 30).then(|| k as u64 - 30);
        assert_eq!(*seq, expected, "cycle {k}");
    }
    // The control loop itself still sees fresh measurements.
    for k in 0..t.wire.len() {
        assert_eq!(t.loop_fb[k], t.wire[k].1);
    }
}

/// The runtime's inference thread with `inject`: returns the report's `injected`
/// block and counters.
fn run_runtime(inject: InjectConfig) -> chunkrt_telemetry::Report {
    let mut cfg = config();
    cfg.control.period_ms = 2.0;
    cfg.control.cpu = -1;
    cfg.control.lock_memory = false;
    cfg.inference.cpu = -1;
    cfg.inference.chunk_period_ms = 20.0;
    cfg.telemetry.status_interval_ms = 0.0;
    cfg.inject = inject;
    let runtime = chunkrt_rt::Runtime::from_config(&cfg).unwrap();
    let opts = chunkrt_rt::RunOptions {
        duration: Some(std::time::Duration::from_millis(600)),
        ..chunkrt_rt::RunOptions::default()
    };
    runtime.run(&opts).unwrap().report
}

#[test]
fn dropped_chunks_are_computed_but_never_reach_the_loop() {
    let every = run_runtime(InjectConfig {
        drop_chunk_probability: 1.0,
        inference_delay: chunkrt_config::InferenceDelayConfig::Fixed { ms: 1.0 },
        seed: 4,
        ..InjectConfig::default()
    });
    let inj = &every.extra["injected"];
    let computed = inj["inference_delays"].as_u64().unwrap();
    assert!(computed > 5, "{inj}");
    // Every computed chunk was delayed, then dropped; none was offered to the loop.
    assert_eq!(inj["chunks_dropped"].as_u64(), Some(computed), "{inj}");
    assert_eq!(every.counters["chunks_offered"], 0);
    assert_eq!(inj["inference_delay_max_ms"].as_f64(), Some(1.0));

    let none = run_runtime(InjectConfig {
        inference_delay: chunkrt_config::InferenceDelayConfig::Fixed { ms: 1.0 },
        ..InjectConfig::default()
    });
    let inj = &none.extra["injected"];
    assert_eq!(inj["chunks_dropped"].as_u64(), Some(0), "{inj}");
    assert!(none.counters["chunks_offered"] > 5);
    assert_eq!(inj["active"].as_bool(), Some(true));
}

#[test]
fn the_report_says_what_was_injected_in_whole_cycles() {
    let r = run_runtime(InjectConfig {
        transport_delay_ms: 3.0,
        observation_delay_ms: 9.0,
        feedback_delay_ms: 0.5,
        ..InjectConfig::default()
    });
    let inj = &r.extra["injected"];
    // At a 2 ms period: 3 ms -> 4 ms, 9 ms -> 10 ms, 0.5 ms -> 2 ms.
    assert_eq!(
        inj["effective_ms"]["transport_delay"].as_f64(),
        Some(4.0),
        "{inj}"
    );
    assert_eq!(
        inj["effective_ms"]["observation_delay"].as_f64(),
        Some(10.0)
    );
    assert_eq!(inj["effective_ms"]["feedback_delay"].as_f64(), Some(2.0));
    assert_eq!(inj["delay_line_overflows"].as_u64(), Some(0));
    assert!(r.counters["chunks_offered"] > 5, "chunks still flow");
}
