//! Delay injection on the control thread: preallocated delay lines for the commands
//! (gate -> backend, a slow bus), the measurements (backend -> loop, a slow sensor
//! path) and the observations (loop -> inference, a slow camera pipeline); and extra
//! work on the control thread itself (a stall every N-th cycle, a slower tick).
//!
//! Built before the first deadline; nothing here allocates, locks or formats per
//! cycle. Delays are counted on the loop's deadlines, which are exact multiples of
//! the period, so a delay of `n` periods shifts a stream by exactly `n` cycles (a
//! delay between two multiples takes effect at the next cycle, as a bus would
//! deliver it). A loop without injection carries none of this ([`ControlInjection`]
//! is only attached when [`chunkrt_config::InjectConfig::is_active`]).

use chunkrt_config::InjectConfig;
use chunkrt_core::{
    ms_to_ns, stream_seed, Backend, BackendError, Command, DelayLine, DelaySampler, DropDecider,
    Feedback, MonoTime, Observation, INJECT_LINE_CAPACITY,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A stream delayed by a fixed time: the newest due value, held until the next.
pub struct Delayed<T: Copy> {
    line: Box<DelayLine<T, INJECT_LINE_CAPACITY>>,
    out: T,
    released: bool,
}

impl<T: Copy> Delayed<T> {
    /// A stream delayed by `delay_ns` that reads `initial` until the first value is
    /// due (a drive holds its last setpoint; a sensor shows its last reading).
    pub fn new(delay_ns: u64, initial: T) -> Self {
        Delayed {
            line: Box::new(DelayLine::new(delay_ns, initial)),
            out: initial,
            released: false,
        }
    }

    /// The delay.
    pub fn delay_ns(&self) -> u64 {
        self.line.delay_ns()
    }

    /// Values lost because the line was full (0 when the config was checked).
    pub fn overflows(&self) -> u64 {
        self.line.overflows()
    }

    /// Whether a value has come out yet.
    pub fn released(&self) -> bool {
        self.released
    }

    /// Feeds `value` in at `now` and returns what comes out at `now`: the newest due
    /// value, or the previous output when none is due.
    pub fn pass(&mut self, now: MonoTime, value: &T) -> &T {
        // A full line drops the new value (counted); the stream then repeats.
        let _ = self.line.push(now, *value);
        if let Some(v) = self.line.pop_latest_due(now) {
            self.out = v;
            self.released = true;
        }
        &self.out
    }
}

/// The control thread's injection points.
pub struct ControlInjection {
    transport: Option<Delayed<Command>>,
    feedback: Option<Delayed<Feedback>>,
    observation: Option<Delayed<Observation>>,
    raw_fb: Feedback,
    /// `inject.feedback_bias_rad` per joint (`None`: no offset).
    bias: Option<chunkrt_core::JointVec>,
    burn: Burn,
    probe: Option<Probe>,
    /// `inject.panic` in the control cycle or in the backend's exchange.
    control_panic: Option<crate::supervise::PanicPoint>,
    backend_panic: Option<crate::supervise::PanicPoint>,
}

/// The probe of `[inject.probe]`, evaluated on the loop's deadlines: a multisine
/// (Schroeder phases) under a raised-cosine fade, in fixed arrays.
#[derive(Clone, Copy, Debug)]
struct Probe {
    joint: usize,
    amplitude: f64,
    n: usize,
    w: [f64; chunkrt_config::MAX_PROBE_FREQS],
    phase: [f64; chunkrt_config::MAX_PROBE_FREQS],
    start_ns: u64,
    duration_ns: u64,
    ramp_ns: u64,
    origin: Option<MonoTime>,
    /// The excursion guard's bound on `|measured - U|` of the probed joint.
    max_excursion: f64,
    /// The guard tripped: the policy has lost authority for good.
    tripped: bool,
    /// A pulse of `amplitude` (`shape = "step"`), not a multisine.
    step: bool,
}

impl Probe {
    fn new(cfg: &chunkrt_config::ProbeConfig) -> Self {
        let mut p = Probe {
            joint: cfg.joint,
            amplitude: cfg.amplitude_rad,
            n: cfg.freqs_hz.len().min(chunkrt_config::MAX_PROBE_FREQS),
            w: [0.0; chunkrt_config::MAX_PROBE_FREQS],
            phase: [0.0; chunkrt_config::MAX_PROBE_FREQS],
            start_ns: (cfg.start_s * 1e9) as u64,
            duration_ns: (cfg.duration_s * 1e9) as u64,
            ramp_ns: (cfg.ramp_s * 1e9) as u64,
            origin: None,
            max_excursion: cfg.max_excursion_rad,
            tripped: false,
            step: cfg.shape == chunkrt_config::ProbeShape::Step,
        };
        for k in 0..p.n {
            p.w[k] = 2.0 * core::f64::consts::PI * cfg.freqs_hz[k];
            p.phase[k] = chunkrt_config::ProbeConfig::phase(k, p.n);
        }
        p
    }

    /// Position, velocity and acceleration of the probe at `deadline` (zero outside
    /// its span). The first call sets the origin.
    fn at(&mut self, deadline: MonoTime) -> [f64; 3] {
        let origin = *self.origin.get_or_insert(deadline);
        let since = deadline.saturating_since(origin);
        if since < self.start_ns || since >= self.start_ns + self.duration_ns {
            return [0.0; 3];
        }
        if self.step {
            return [self.amplitude, 0.0, 0.0];
        }
        let t_ns = since - self.start_ns;
        let edge = t_ns.min(self.duration_ns - t_ns);
        let fade = if edge >= self.ramp_ns || self.ramp_ns == 0 {
            1.0
        } else {
            0.5 - 0.5 * (core::f64::consts::PI * edge as f64 / self.ramp_ns as f64).cos()
        };
        let t = t_ns as f64 * 1e-9;
        let mut out = [0.0; 3];
        for k in 0..self.n {
            let (s, c) = (self.w[k] * t + self.phase[k]).sin_cos();
            let w = self.w[k];
            out[0] += s;
            out[1] += w * c;
            out[2] -= w * w * s;
        }
        out.map(|v| v * self.amplitude * fade)
    }
}
/// Extra work on the control thread: a stall every N-th cycle and a slowdown
/// factor, spun on the real monotonic clock (not the loop's clock, which a test may
/// hold still).
#[derive(Clone, Copy, Debug, Default)]
struct Burn {
    stall_ns: u64,
    every: u64,
    slowdown: f64,
    cycles: u64,
    /// Cycles that stalled.
    stalls: u64,
}

impl ControlInjection {
    /// The injection points `cfg` turns on; `hold` is the command the drives hold
    /// until the first delayed one arrives, `first` the first measurement.
    pub fn new(cfg: &InjectConfig, hold: &Command, first: &Feedback) -> Self {
        let obs = Observation {
            t_capture: first.t_capture,
            dof: first.dof,
            pos_rad: first.pos_rad,
            vel_rad_s: first.vel_rad_s,
            torque_nm: first.torque_nm,
            cmd_pos_rad: hold.pos_rad,
            ..Observation::default()
        };
        ControlInjection {
            transport: (cfg.transport_delay_ns() > 0)
                .then(|| Delayed::new(cfg.transport_delay_ns(), *hold)),
            feedback: (cfg.feedback_delay_ns() > 0)
                .then(|| Delayed::new(cfg.feedback_delay_ns(), *first)),
            observation: (cfg.observation_delay_ns() > 0)
                .then(|| Delayed::new(cfg.observation_delay_ns(), obs)),
            raw_fb: *first,
            bias: cfg.biases_feedback().then(|| {
                let mut b = chunkrt_core::JointVec::default();
                for (j, v) in b.iter_mut().enumerate().take(usize::from(first.dof)) {
                    *v = cfg.feedback_bias(j);
                }
                b
            }),
            probe: cfg.probe.as_ref().map(Probe::new),
            control_panic: crate::supervise::PanicPoint::for_thread(
                cfg,
                chunkrt_config::PanicThread::Control,
            ),
            backend_panic: crate::supervise::PanicPoint::for_thread(
                cfg,
                chunkrt_config::PanicThread::Backend,
            ),
            burn: Burn {
                stall_ns: ms_to_ns(cfg.cycle_stall_ms),
                every: cfg.cycle_stall_every.max(1),
                slowdown: cfg.cycle_slowdown,
                cycles: 0,
                stalls: 0,
            },
        }
    }

    /// Whether the cycle's work is stretched (and so [`ControlInjection::burn`] needs
    /// the time the work began).
    pub fn burns(&self) -> bool {
        self.burn.stall_ns > 0 || self.burn.slowdown > 1.0
    }

    /// The injected extra work of one cycle, spun before its command leaves: the
    /// work since `work_began` (real monotonic time) stretched by the slowdown
    /// factor, plus the stall on every N-th cycle. No allocation, no syscall but
    /// the clock.
    pub fn burn(&mut self, work_began: MonoTime) {
        let b = &mut self.burn;
        if b.stall_ns == 0 && b.slowdown <= 1.0 {
            return;
        }
        b.cycles += 1;
        let now = crate::os::now();
        let work = now.saturating_since(work_began);
        let mut extra = ((b.slowdown - 1.0).max(0.0) * work as f64) as u64;
        if b.stall_ns > 0 && b.cycles.is_multiple_of(b.every) {
            extra += b.stall_ns;
            b.stalls += 1;
        }
        let until = now.add_ns(extra);
        while crate::os::now() < until {
            std::hint::spin_loop();
        }
    }

    /// `inject.panic` in the control cycle: panics once when its time has come.
    pub fn check_control_panic(&mut self, deadline: MonoTime) {
        crate::supervise::check_panic(&mut self.control_panic, deadline);
    }

    /// Cycles that stalled.
    pub fn stalls(&self) -> u64 {
        self.burn.stalls
    }

    /// Exchange through the delay lines: the command goes in the transport line, what
    /// comes out of it goes to the backend; the fresh measurement goes in the feedback
    /// line and what comes out of it is written to `fb`. `at` is the cycle's deadline.
    pub fn exchange(
        &mut self,
        backend: &mut dyn Backend,
        at: MonoTime,
        now: MonoTime,
        cmd: &Command,
        fb: &mut Feedback,
    ) -> Result<(), BackendError> {
        // `inject.panic` in the backend's exchange (the fail-safe rehearsal).
        crate::supervise::check_panic(&mut self.backend_panic, at);
        let wire = match &mut self.transport {
            Some(line) => line.pass(at, cmd),
            None => cmd,
        };
        let result = match &mut self.feedback {
            None => backend.exchange(now, wire, fb),
            Some(line) => {
                let result = backend.exchange(now, wire, &mut self.raw_fb);
                *fb = *line.pass(at, &self.raw_fb);
                result
            }
        };
        if let Some(bias) = &self.bias {
            for (p, b) in fb.pos_rad.iter_mut().zip(bias).take(usize::from(fb.dof)) {
                *p += b;
            }
        }
        result
    }

    /// Adds the probe of `[inject.probe]` at `deadline` to `sp` when `playing` (the
    /// probe clock runs regardless); returns what was added, for [`Self::unprobe`].
    ///
    /// The excursion guard, from the probe's start to the end of the run, while the
    /// policy plays: the probed joint's last measured position `measured_pos_rad`
    /// against the executor's setpoint `sp` before the probe is added (`U`, the
    /// path the policy itself commands). A policy moving between its goals moves `U`
    /// and the arm with it, so its own motion does not count; a stable loop keeps
    /// the arm within the probe and the drive's following error of `U`; a loop that
    /// runs away swings `U` ever wider, and the arm falls ever further behind it
    /// (the loop's delay, the gate's limits on the swing), until past
    /// `max_excursion_rad` the policy loses authority for good.
    pub fn probe(
        &mut self,
        deadline: MonoTime,
        playing: bool,
        sp: &mut chunkrt_core::Setpoint,
        measured_pos_rad: &chunkrt_core::JointVec,
    ) -> Option<(usize, [f64; 3])> {
        let probe = self.probe.as_mut()?;
        let d = probe.at(deadline);
        let j = probe.joint;
        let since = probe.origin.map_or(0, |o| deadline.saturating_since(o));
        if playing
            && since >= probe.start_ns
            && (measured_pos_rad[j] - sp.pos_rad[j]).abs() > probe.max_excursion
        {
            probe.tripped = true;
        }
        if !playing || d == [0.0; 3] || probe.tripped {
            return None;
        }
        sp.pos_rad[j] += d[0];
        sp.vel_rad_s[j] += d[1];
        sp.acc_rad_s2[j] += d[2];
        Some((j, d))
    }

    /// The probe's excursion guard has tripped: the probed joint was measured further
    /// than `max_excursion_rad` from the executor's unprobed setpoint `U`.
    pub fn probe_tripped(&self) -> Option<u16> {
        self.probe
            .as_ref()
            .filter(|p| p.tripped)
            .map(|p| p.joint as u16)
    }

    /// Takes the probe back out of `sp` (the record keeps the executor's setpoint:
    /// the loop's own output `U`, while the command carries `U + d`).
    pub fn unprobe(sp: &mut chunkrt_core::Setpoint, (j, d): (usize, [f64; 3])) {
        sp.pos_rad[j] -= d[0];
        sp.vel_rad_s[j] -= d[1];
        sp.acc_rad_s2[j] -= d[2];
    }

    /// Whether observations are delayed.
    pub fn delays_observations(&self) -> bool {
        self.observation.is_some()
    }

    /// The observation to publish at `at` for the fresh one `obs`: `None` while
    /// observations are not delayed, or until the first delayed one is due.
    pub fn observation(&mut self, at: MonoTime, obs: &Observation) -> Option<Observation> {
        let line = self.observation.as_mut()?;
        let out = *line.pass(at, obs);
        line.released().then_some(out)
    }

    /// Values lost to full lines, over all three lines.
    pub fn overflows(&self) -> u64 {
        self.transport.as_ref().map_or(0, Delayed::overflows)
            + self.feedback.as_ref().map_or(0, Delayed::overflows)
            + self.observation.as_ref().map_or(0, Delayed::overflows)
    }
}

/// What was actually injected on the inference side (shared with the runtime, which
/// puts it in the report).
#[derive(Debug, Default)]
pub struct InjectCounts {
    /// Chunks computed and deliberately not published.
    pub chunks_dropped: AtomicU64,
    /// Inference calls that were delayed, and the total delay added.
    pub inference_delays: AtomicU64,
    /// Sum of the injected inference delays.
    pub inference_delay_ns_total: AtomicU64,
    /// Largest injected inference delay.
    pub inference_delay_ns_max: AtomicU64,
}

/// The inference thread's injection points: a delay drawn per chunk and the drop
/// decision, each from its own seeded stream.
pub struct InferenceInjection {
    delay: DelaySampler,
    drops: DropDecider,
    delay_active: bool,
    drop_active: bool,
    counts: Arc<InjectCounts>,
    /// `inject.panic` in the inference thread (outside the policy's call).
    pub panic: Option<crate::supervise::PanicPoint>,
}

/// Stream numbers of the injection points (see `chunkrt_core::stream_seed`).
const STREAM_INFERENCE_DELAY: u64 = 1;
const STREAM_DROP: u64 = 2;

impl InferenceInjection {
    /// The inference-side injection `cfg` asks for (inactive when it asks for none).
    pub fn new(cfg: &InjectConfig, counts: Arc<InjectCounts>) -> Self {
        let model = cfg.inference_delay.model();
        InferenceInjection {
            delay: DelaySampler::new(model, stream_seed(cfg.seed, STREAM_INFERENCE_DELAY)),
            drops: DropDecider::new(
                cfg.drop_chunk_probability,
                stream_seed(cfg.seed, STREAM_DROP),
            ),
            delay_active: !model.is_zero(),
            drop_active: cfg.drop_chunk_probability > 0.0,
            counts,
            panic: crate::supervise::PanicPoint::for_thread(
                cfg,
                chunkrt_config::PanicThread::Inference,
            ),
        }
    }

    /// Nothing injected.
    pub fn none() -> Self {
        InferenceInjection::new(&InjectConfig::default(), Arc::default())
    }

    /// For the chunk just computed: how long to hold it back (ns), and whether to
    /// drop it instead of publishing it. Counts what it decides.
    pub fn decide(&mut self) -> (u64, bool) {
        let delay_ns = if self.delay_active {
            let d = self.delay.sample_ns();
            self.counts.inference_delays.fetch_add(1, Ordering::Relaxed);
            self.counts
                .inference_delay_ns_total
                .fetch_add(d, Ordering::Relaxed);
            self.counts
                .inference_delay_ns_max
                .fetch_max(d, Ordering::Relaxed);
            d
        } else {
            0
        };
        let dropped = self.drop_active && self.drops.drop_next();
        if dropped {
            self.counts.chunks_dropped.fetch_add(1, Ordering::Relaxed);
        }
        (delay_ns, dropped)
    }
}

/// Whether `cfg` asks for anything on the control thread (delay lines, extra work, the
/// probe, a panic): the control loop then takes a [`ControlInjection`].
pub fn acts_on_control(cfg: &InjectConfig) -> bool {
    cfg.transport_delay_ns() != 0
        || cfg.feedback_delay_ns() != 0
        || cfg.biases_feedback()
        || cfg.observation_delay_ns() != 0
        || cfg.burns_control_thread()
        || cfg.probe.is_some()
        || cfg.panic.is_some()
}

/// `report.extra["injected"]`: what the config asked for and what was done
/// (`injection`: the control loop's, with the loop's period `period_ns`).
pub fn describe(
    cfg: &InjectConfig,
    period_ns: u64,
    injection: Option<&ControlInjection>,
    counts: &InjectCounts,
) -> Value {
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let delays = n(&counts.inference_delays);
    // The control-side lines act on whole cycles: a delay between two multiples of
    // the period takes effect at the next cycle.
    let period_ns = period_ns.max(1);
    let cycles_ms = |ns: u64| ns.div_ceil(period_ns) as f64 * period_ns as f64 * 1e-6;
    json!({
        "active": cfg.is_active(),
        "seed": cfg.seed,
        "observation_delay_ms": cfg.observation_delay_ms,
        "transport_delay_ms": cfg.transport_delay_ms,
        "feedback_delay_ms": cfg.feedback_delay_ms,
        "feedback_bias_rad": cfg.feedback_bias_rad,
        "effective_ms": {
            "observation_delay": cycles_ms(cfg.observation_delay_ns()),
            "transport_delay": cycles_ms(cfg.transport_delay_ns()),
            "feedback_delay": cycles_ms(cfg.feedback_delay_ns()),
        },
        "inference_delay": cfg.inference_delay.describe(),
        "drop_chunk_probability": cfg.drop_chunk_probability,
        "chunks_dropped": n(&counts.chunks_dropped),
        "inference_delays": delays,
        "inference_delay_mean_ms": if delays > 0 {
            n(&counts.inference_delay_ns_total) as f64 / delays as f64 * 1e-6
        } else {
            0.0
        },
        "inference_delay_max_ms": n(&counts.inference_delay_ns_max) as f64 * 1e-6,
        "delay_line_overflows": injection.map_or(0, ControlInjection::overflows),
        "cycle_stall_ms": cfg.cycle_stall_ms,
        "cycle_stall_every": cfg.cycle_stall_every,
        "cycle_slowdown": cfg.cycle_slowdown,
        "cycles_stalled": injection.map_or(0, ControlInjection::stalls),
        "probe": cfg.probe.as_ref().map(|p| json!({
            "joint": p.joint,
            "amplitude_rad": p.amplitude_rad,
            "freqs_hz": p.freqs_hz,
            "shape": p.shape,
            "start_s": p.start_s,
            "duration_s": p.duration_s,
            "ramp_s": p.ramp_s,
        })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chunkrt_core::Setpoint;

    const PERIOD_NS: u64 = 20_000_000;

    fn probed() -> ControlInjection {
        let cfg = InjectConfig {
            probe: Some(chunkrt_config::ProbeConfig {
                joint: 0,
                shape: chunkrt_config::ProbeShape::Multisine,
                amplitude_rad: 2e-3,
                freqs_hz: vec![0.5, 1.0],
                start_s: 0.0,
                duration_s: 60.0,
                ramp_s: 0.0,
                max_excursion_rad: 0.1,
            }),
            ..Default::default()
        };
        ControlInjection::new(&cfg, &Command::default(), &Feedback::default())
    }

    #[test]
    fn a_step_probe_adds_its_amplitude_over_its_span_only_and_no_derivatives() {
        let cfg = InjectConfig {
            probe: Some(chunkrt_config::ProbeConfig {
                joint: 2,
                shape: chunkrt_config::ProbeShape::Step,
                amplitude_rad: 2e-3,
                freqs_hz: Vec::new(),
                start_s: 1.0,
                duration_s: 0.6,
                ramp_s: 0.25,
                max_excursion_rad: 0.1,
            }),
            ..Default::default()
        };
        let mut inj = ControlInjection::new(&cfg, &Command::default(), &Feedback::default());
        let measured = [0.0; chunkrt_core::MAX_DOF];
        let added: Vec<f64> = (0..100)
            .map(|k| {
                let mut sp = Setpoint::default();
                let d = inj.probe(MonoTime(k * PERIOD_NS), true, &mut sp, &measured);
                assert_eq!((sp.vel_rad_s[2], sp.acc_rad_s2[2]), (0.0, 0.0));
                d.map_or(0.0, |(j, _)| {
                    assert_eq!(j, 2);
                    sp.pos_rad[2]
                })
            })
            .collect();
        // Cycles 50..80 (1.0 s to 1.6 s at 20 ms): the whole step, no fade.
        for (k, a) in added.iter().enumerate() {
            let want = if (50..80).contains(&k) { 2e-3 } else { 0.0 };
            assert_eq!(*a, want, "cycle {k}");
        }
    }

    /// Runs the guard over `cycles` cycles of a setpoint path `u(t)` that the arm
    /// follows `lag` cycles late (the probe it was sent added); returns the cycle at
    /// which the guard tripped, if it did.
    fn guard_over(u: impl Fn(f64) -> f64, lag: usize, cycles: usize) -> Option<usize> {
        let mut inj = probed();
        let mut sent = vec![0.0; cycles];
        for k in 0..cycles {
            let t = k as f64 * PERIOD_NS as f64 * 1e-9;
            let mut measured = [0.0; chunkrt_core::MAX_DOF];
            measured[0] = if k > lag { sent[k - lag - 1] } else { 0.0 };
            let mut sp = Setpoint::default();
            sp.pos_rad[0] = u(t);
            let added = inj.probe(MonoTime(k as u64 * PERIOD_NS), true, &mut sp, &measured);
            sent[k] = sp.pos_rad[0];
            if inj.probe_tripped().is_some() {
                assert!(added.is_none(), "a tripped guard added the probe");
                return Some(k);
            }
        }
        None
    }

    /// The bundled flow policy's motion: about 1.4 rad peak to peak at 0.17 Hz,
    /// followed by the arm a cycle or two late: not an excursion (it is 14 times
    /// the bound from where the probe began).
    #[test]
    fn a_policy_moving_between_its_goals_keeps_authority() {
        let u = |t: f64| 0.7 * (2.0 * core::f64::consts::PI * 0.17 * t).sin();
        for lag in [0, 1, 2] {
            assert_eq!(guard_over(u, lag, 1500), None, "lag {lag}");
        }
    }

    /// A loop that runs away: a 2 Hz swing of the setpoint growing 2.5x per second
    /// from 1 mrad, with the arm 80 ms behind (a transport delay). The guard trips
    /// while the swing is still about the bound, not after it has grown past it.
    #[test]
    fn a_loop_that_runs_away_trips_the_guard() {
        let swing = |t: f64| 1e-3 * (t * 2.5f64.ln()).exp();
        let u = |t: f64| swing(t) * (2.0 * core::f64::consts::PI * 2.0 * t).sin();
        let k = guard_over(u, 4, 1500).expect("the runaway never tripped the guard");
        let t = k as f64 * PERIOD_NS as f64 * 1e-9;
        assert!(swing(t) < 0.2, "tripped only at a {} rad swing", swing(t));
    }

    /// While the policy does not play (a fallback brakes, a drive faulted), the arm
    /// need not follow the setpoint: the guard does not judge it.
    #[test]
    fn the_guard_judges_only_while_the_policy_plays() {
        let mut inj = probed();
        let mut far = [0.0; chunkrt_core::MAX_DOF];
        far[0] = 0.5;
        let mut sp = Setpoint::default();
        assert_eq!(inj.probe(MonoTime(PERIOD_NS), false, &mut sp, &far), None);
        assert_eq!(inj.probe_tripped(), None);
        inj.probe(MonoTime(2 * PERIOD_NS), true, &mut sp, &far);
        assert_eq!(inj.probe_tripped(), Some(0));
    }
}
