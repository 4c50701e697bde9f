//! `[inject]`: delay and loss injected on the real path, deterministic from a seed.
//!
//! ```toml
//! [inject]
//! seed = 7
//! observation_delay_ms = 30.0   # inference sees an observation this much older
//! transport_delay_ms = 4.0      # commands reach the drives this much later
//! feedback_delay_ms = 2.0       # the loop sees measurements this much older
//! feedback_bias_rad = [0.0, 0.01, 0, 0, 0, 0, 0]  # added to each measured position (an encoder offset)
//! drop_chunk_probability = 0.05 # computed chunks that are never published
//! inference_delay = { kind = "spikes", base_ms = 0.0, spike_ms = 120.0, probability = 0.02 }
//! cycle_stall_ms = 2.0          # the control thread busy for 2 ms ...
//! cycle_stall_every = 20        # ... every 20th cycle (a periodic hiccup)
//! cycle_slowdown = 5.0          # each cycle's work stretched to 5x its time
//! camera_delay = { kind = "fixed", ms = 30.0 }  # each frame delivered this much later
//! camera_stall_after_s = 10.0   # the camera delivers nothing from 10 s after its start ...
//! camera_stall_s = 3.0          # ... for 3 s (then frames return)
//! panic = { thread = "backend", after_ms = 2000.0 }  # a panic in that thread (fail-safe test)
//!
//! [inject.probe]                 # a multisine added to one joint's setpoint (chunkrt margin)
//! joint = 0
//! amplitude_rad = 0.002          # each component
//! freqs_hz = [0.2, 0.5, 1.0]
//! start_s = 3.0                  # after the loop has settled
//! duration_s = 20.0              # then off: the free response judges stability
//! max_excursion_rad = 0.1        # past this the policy loses authority for good
//! ```
//!
//! Everything defaults to zero: a config without `[inject]` injects nothing, and the
//! control loop then bypasses the delay lines altogether.

use chunkrt_core::{ms_to_ns, DelayModel, INJECT_LINE_CAPACITY};
use serde::{Deserialize, Serialize};

/// Longest injectable delay of any kind.
pub const MAX_INJECT_DELAY_MS: f64 = 10_000.0;

/// The `[inject]` table.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InjectConfig {
    /// Seed of every injected random draw (each injection point has its own stream).
    #[serde(default)]
    pub seed: u64,
    /// Inference sees the observation captured this long before the newest one.
    #[serde(default)]
    pub observation_delay_ms: f64,
    /// Extra time each inference takes before its chunk is published.
    #[serde(default)]
    pub inference_delay: InferenceDelayConfig,
    /// Probability that a computed chunk is dropped instead of published.
    #[serde(default)]
    pub drop_chunk_probability: f64,
    /// Delay line between the permission gate and the backend (a slow bus).
    #[serde(default)]
    pub transport_delay_ms: f64,
    /// The control loop sees measurements this much older (a slow sensor path).
    #[serde(default)]
    pub feedback_delay_ms: f64,
    /// Added to every position the loop measures, per joint, from its first exchange:
    /// the drives track the commands, the host reads their positions through this
    /// offset (a miscalibrated sensing path: the mechanism `chunkrt gap`'s sensing
    /// channel sizes). Everything downstream of the measurement sees it: the
    /// following-error check, the observation, the recording.
    #[serde(default)]
    pub feedback_bias_rad: Option<crate::PerJoint>,
    /// The control thread stays busy this long (spinning, before the command leaves)
    /// every `cycle_stall_every`-th cycle: a periodic stall of the tick.
    #[serde(default)]
    pub cycle_stall_ms: f64,
    /// Which cycles stall (every N-th; 1: every cycle).
    #[serde(default = "default_stall_every")]
    pub cycle_stall_every: u64,
    /// Each cycle's own work, up to the command, is stretched to this many times its
    /// measured time by spinning (1: no slowdown): a slower tick.
    #[serde(default = "default_slowdown")]
    pub cycle_slowdown: f64,
    /// A probe signal added to one joint's setpoint while the policy plays (the
    /// loop-transfer measurement of `chunkrt margin`).
    #[serde(default)]
    pub probe: Option<ProbeConfig>,
    /// Extra exposure or transport time of each camera frame: the frame reaches the
    /// inference thread this much later (same models as `inference_delay`).
    #[serde(default)]
    pub camera_delay: InferenceDelayConfig,
    /// A camera stall begins this long after the camera's first frame (s) ...
    #[serde(default)]
    pub camera_stall_after_s: f64,
    /// ... and lasts this long (s; 0: no stall): no frame is delivered meanwhile.
    #[serde(default)]
    pub camera_stall_s: f64,
    /// A panic raised in one of the runtime's threads this long after the loop's start:
    /// rehearses the fail-safe path (every thread's panic ends in the stop a fault
    /// gets, exit status 7).
    #[serde(default)]
    pub panic: Option<PanicInjection>,
}

/// `inject.panic`: which thread panics, and when.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PanicInjection {
    /// The thread that panics.
    pub thread: PanicThread,
    /// When (ms after the control loop's first deadline; for the camera, after its
    /// first frame).
    pub after_ms: f64,
}

/// A runtime thread that `inject.panic` can make panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PanicThread {
    /// The control loop itself (in its cycle, before the gate).
    Control,
    /// The backend's exchange, on the control thread.
    Backend,
    /// The inference thread, outside the policy call.
    Inference,
    /// The camera thread.
    Camera,
    /// The telemetry thread.
    Telemetry,
}

impl PanicThread {
    /// The name used in records and messages.
    pub fn name(self) -> &'static str {
        match self {
            PanicThread::Control => "control",
            PanicThread::Backend => "backend",
            PanicThread::Inference => "inference",
            PanicThread::Camera => "camera",
            PanicThread::Telemetry => "telemetry",
        }
    }
}

/// Most sine components of a probe.
pub const MAX_PROBE_FREQS: usize = 16;

/// Share of a joint's velocity, acceleration and jerk limits the probe may take at
/// its peak (the rest is left to the motion it rides on).
pub const PROBE_LIMIT_SHARE: f64 = 0.25;

/// The probe's shape.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ProbeShape {
    /// `sum_k a sin(2 pi f_k t + phi_k)`, faded in and out.
    #[default]
    Multisine,
    /// A pulse: `a` from `start_s` for `duration_s` (a step up, then a step down), with
    /// no fade; the gate shapes each step within the joint's limits (`chunkrt gap`'s
    /// step responses).
    Step,
}

/// `[inject.probe]`: `sum_k a sin(2 pi f_k t + phi_k)` (Schroeder phases) added to
/// one joint's setpoint before the permission gate, only while the policy plays,
/// faded in and out over `ramp_s`; or, `shape = "step"`, a pulse of `a`. The gate
/// checks the probed setpoint like any other.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// The joint probed.
    pub joint: usize,
    /// Amplitude of each component (rad), or of the pulse.
    pub amplitude_rad: f64,
    /// Component frequencies (Hz), 1 to 16, below the bus's Nyquist frequency (none
    /// for a step).
    #[serde(default)]
    pub freqs_hz: Vec<f64>,
    /// `multisine` (default) or `step`.
    #[serde(default)]
    pub shape: ProbeShape,
    /// When the probe starts (s after the loop's first deadline).
    #[serde(default = "default_probe_start")]
    pub start_s: f64,
    /// How long it runs (s, ramps included).
    pub duration_s: f64,
    /// Fade in and out (raised cosine, s).
    #[serde(default = "default_probe_ramp")]
    pub ramp_s: f64,
    /// The excursion guard: once the probed joint is measured this far from the
    /// executor's setpoint before the probe (the path the policy itself commands, so
    /// a policy's own motion does not count) while the policy plays, it loses
    /// authority for the rest of the run (an unstable loop is stopped, not measured
    /// to its end).
    #[serde(default = "default_probe_excursion")]
    pub max_excursion_rad: f64,
}

fn default_probe_excursion() -> f64 {
    0.1
}

fn default_probe_start() -> f64 {
    3.0
}

fn default_probe_ramp() -> f64 {
    0.25
}

impl ProbeConfig {
    /// Schroeder phase of component `k` of `n` (a low crest factor: the peak of the
    /// sum stays near `sqrt(n)` amplitudes on smooth spectra).
    pub fn phase(k: usize, n: usize) -> f64 {
        -core::f64::consts::PI * (k * (k + 1)) as f64 / n.max(1) as f64
    }

    /// Peak |d|, |d'|, |d''|, |d'''| the probe can reach (sums over the components).
    pub fn peaks(&self) -> [f64; 4] {
        let mut p = [0.0; 4];
        for f in &self.freqs_hz {
            let w = 2.0 * core::f64::consts::PI * f;
            for (i, v) in p.iter_mut().enumerate() {
                *v += self.amplitude_rad * w.powi(i as i32);
            }
        }
        p
    }

    pub(crate) fn validate(&self, period_ms: f64, joints: usize) -> Result<(), (String, String)> {
        let err = |k: &str, m: String| Err((format!("inject.probe.{k}"), m));
        if self.joint >= joints {
            return err(
                "joint",
                format!("joint {} does not exist (the arm has {joints})", self.joint),
            );
        }
        let a = self.amplitude_rad;
        if !(a.is_finite() && a > 0.0 && a <= 0.1) {
            return err(
                "amplitude_rad",
                format!("expected an amplitude in (0, 0.1] rad, got {a}"),
            );
        }
        let nyquist = 500.0 / period_ms;
        let n = self.freqs_hz.len();
        if self.shape == ProbeShape::Step {
            if n != 0 {
                return err(
                    "freqs_hz",
                    "a step probe has no frequencies: leave freqs_hz out".into(),
                );
            }
        } else if n == 0 || n > MAX_PROBE_FREQS {
            return err(
                "freqs_hz",
                format!("expected 1 to {MAX_PROBE_FREQS} frequencies, got {n}"),
            );
        }
        if let Some(f) = self
            .freqs_hz
            .iter()
            .find(|f| !(f.is_finite() && **f > 0.0 && **f < nyquist))
        {
            return err(
                "freqs_hz",
                format!("{f} Hz is not in (0, {nyquist} Hz) (the bus's Nyquist frequency)"),
            );
        }
        for (k, v) in [
            ("start_s", self.start_s),
            ("duration_s", self.duration_s),
            ("ramp_s", self.ramp_s),
        ] {
            if !(v.is_finite() && (0.0..=3600.0).contains(&v)) {
                return err(k, format!("expected a time in [0, 3600] s, got {v}"));
            }
        }
        let x = self.max_excursion_rad;
        let peak = self.amplitude_rad * self.freqs_hz.len().max(1) as f64;
        if !(x.is_finite() && x > peak && x <= 1.0) {
            return err(
                "max_excursion_rad",
                format!(
                    "expected a bound above the probe's own peak ({peak} rad) and at most 1 rad, got {x}"
                ),
            );
        }
        if self.shape == ProbeShape::Multisine && self.duration_s <= 2.0 * self.ramp_s {
            return err(
                "duration_s",
                format!(
                    "expected more than both ramps (2 x {} s), got {}",
                    self.ramp_s, self.duration_s
                ),
            );
        }
        Ok(())
    }
}

impl Default for InjectConfig {
    /// Nothing injected (what a config without `[inject]` gets).
    fn default() -> Self {
        InjectConfig {
            seed: 0,
            observation_delay_ms: 0.0,
            inference_delay: InferenceDelayConfig::default(),
            drop_chunk_probability: 0.0,
            transport_delay_ms: 0.0,
            feedback_delay_ms: 0.0,
            feedback_bias_rad: None,
            cycle_stall_ms: 0.0,
            cycle_stall_every: default_stall_every(),
            cycle_slowdown: default_slowdown(),
            probe: None,
            camera_delay: InferenceDelayConfig::default(),
            camera_stall_after_s: 0.0,
            camera_stall_s: 0.0,
            panic: None,
        }
    }
}

fn default_stall_every() -> u64 {
    1
}

fn default_slowdown() -> f64 {
    1.0
}

/// Distribution of the injected inference delay.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum InferenceDelayConfig {
    /// Always `ms`.
    Fixed {
        /// The delay.
        ms: f64,
    },
    /// Uniform in [`min_ms`, `max_ms`).
    Uniform {
        /// Lower bound.
        min_ms: f64,
        /// Upper bound.
        max_ms: f64,
    },
    /// Normal, clipped at zero.
    Normal {
        /// Mean.
        mean_ms: f64,
        /// Standard deviation.
        std_ms: f64,
    },
    /// `base_ms`, or `spike_ms` with `probability`.
    Spikes {
        /// The usual delay.
        #[serde(default)]
        base_ms: f64,
        /// A spike's delay.
        spike_ms: f64,
        /// Probability of a spike per chunk.
        probability: f64,
    },
}

impl Default for InferenceDelayConfig {
    fn default() -> Self {
        InferenceDelayConfig::Fixed { ms: 0.0 }
    }
}

impl InferenceDelayConfig {
    /// The core model (call after validation).
    pub fn model(&self) -> DelayModel {
        match *self {
            InferenceDelayConfig::Fixed { ms } => DelayModel::Fixed { ns: ms_to_ns(ms) },
            InferenceDelayConfig::Uniform { min_ms, max_ms } => DelayModel::Uniform {
                min_ns: ms_to_ns(min_ms),
                max_ns: ms_to_ns(max_ms),
            },
            InferenceDelayConfig::Normal { mean_ms, std_ms } => DelayModel::Normal {
                mean_ns: ms_to_ns(mean_ms),
                std_ns: ms_to_ns(std_ms),
            },
            InferenceDelayConfig::Spikes {
                base_ms,
                spike_ms,
                probability,
            } => DelayModel::Spikes {
                base_ns: ms_to_ns(base_ms),
                spike_ns: ms_to_ns(spike_ms),
                probability,
            },
        }
    }
}

impl InjectConfig {
    /// Whether anything at all is injected.
    pub fn is_active(&self) -> bool {
        self.observation_delay_ms > 0.0
            || self.transport_delay_ms > 0.0
            || self.feedback_delay_ms > 0.0
            || self.biases_feedback()
            || self.drop_chunk_probability > 0.0
            || !self.inference_delay.model().is_zero()
            || self.burns_control_thread()
            || self.probe.is_some()
            || self.camera_is_disturbed()
            || self.panic.is_some()
    }

    /// Whether a measured position is offset (`feedback_bias_rad` not all zero).
    pub fn biases_feedback(&self) -> bool {
        match &self.feedback_bias_rad {
            None => false,
            Some(crate::PerJoint::All(v)) => *v != 0.0,
            Some(crate::PerJoint::Each(v)) => v.iter().any(|b| *b != 0.0),
        }
    }

    /// The offset added to joint `j`'s measured position (0 without one).
    pub fn feedback_bias(&self, j: usize) -> f64 {
        self.feedback_bias_rad.as_ref().map_or(0.0, |b| b.get(j))
    }

    /// Whether camera frames are delayed or stalled.
    pub fn camera_is_disturbed(&self) -> bool {
        !self.camera_delay.model().is_zero() || self.camera_stall_s > 0.0
    }

    /// Whether the control thread is made to work longer (stall or slowdown).
    pub fn burns_control_thread(&self) -> bool {
        self.cycle_stall_ms > 0.0 || self.cycle_slowdown > 1.0
    }

    /// Observation delay in ns.
    pub fn observation_delay_ns(&self) -> u64 {
        ms_to_ns(self.observation_delay_ms)
    }

    /// Transport delay in ns.
    pub fn transport_delay_ns(&self) -> u64 {
        ms_to_ns(self.transport_delay_ms)
    }

    /// Feedback delay in ns.
    pub fn feedback_delay_ns(&self) -> u64 {
        ms_to_ns(self.feedback_delay_ms)
    }

    /// Checks ranges; the delay lines on the control thread hold
    /// `INJECT_LINE_CAPACITY` cycles, so their delays are checked against the period.
    pub(crate) fn validate(&self, period_ms: f64) -> Result<(), (String, String)> {
        let line_max_ms = (INJECT_LINE_CAPACITY - 2) as f64 * period_ms;
        for (key, v, hi) in [
            (
                "inject.observation_delay_ms",
                self.observation_delay_ms,
                line_max_ms,
            ),
            (
                "inject.transport_delay_ms",
                self.transport_delay_ms,
                line_max_ms,
            ),
            (
                "inject.feedback_delay_ms",
                self.feedback_delay_ms,
                line_max_ms,
            ),
        ] {
            let hi = hi.min(MAX_INJECT_DELAY_MS);
            if !(v.is_finite() && v >= 0.0 && v <= hi) {
                return Err((
                    key.into(),
                    format!(
                        "expected a delay in [0, {hi}] ms (the delay line holds {} cycles \
                         of {period_ms} ms), got {v}",
                        INJECT_LINE_CAPACITY - 2
                    ),
                ));
            }
        }
        let stall = self.cycle_stall_ms;
        if !(stall.is_finite() && (0.0..=MAX_INJECT_DELAY_MS).contains(&stall)) {
            return Err((
                "inject.cycle_stall_ms".into(),
                format!("expected a stall in [0, {MAX_INJECT_DELAY_MS}] ms, got {stall}"),
            ));
        }
        if self.cycle_stall_every == 0 {
            return Err((
                "inject.cycle_stall_every".into(),
                "expected 1 or more (every N-th cycle stalls), got 0".into(),
            ));
        }
        let f = self.cycle_slowdown;
        if !(f.is_finite() && (1.0..=1000.0).contains(&f)) {
            return Err((
                "inject.cycle_slowdown".into(),
                format!("expected a factor in [1, 1000] (1: none), got {f}"),
            ));
        }
        let p = self.drop_chunk_probability;
        if !(p.is_finite() && (0.0..=1.0).contains(&p)) {
            return Err((
                "inject.drop_chunk_probability".into(),
                format!("expected a probability in [0, 1], got {p}"),
            ));
        }
        for (key, v) in [
            ("inject.camera_stall_after_s", self.camera_stall_after_s),
            ("inject.camera_stall_s", self.camera_stall_s),
        ] {
            if !(v.is_finite() && (0.0..=86_400.0).contains(&v)) {
                return Err((
                    key.into(),
                    format!("expected a time in [0, 86400] s, got {v}"),
                ));
            }
        }
        if let Some(p) = &self.panic {
            if !(p.after_ms.is_finite() && (0.0..=86_400_000.0).contains(&p.after_ms)) {
                return Err((
                    "inject.panic.after_ms".into(),
                    format!("expected a time in [0, 86400000] ms, got {}", p.after_ms),
                ));
            }
        }
        self.inference_delay.validate("inject.inference_delay")?;
        self.camera_delay.validate("inject.camera_delay")
    }
}

impl InferenceDelayConfig {
    fn validate(&self, table: &str) -> Result<(), (String, String)> {
        let delay = |key: &str, v: f64| -> Result<(), (String, String)> {
            if v.is_finite() && (0.0..=MAX_INJECT_DELAY_MS).contains(&v) {
                Ok(())
            } else {
                Err((
                    format!("{table}.{key}"),
                    format!("expected a delay in [0, {MAX_INJECT_DELAY_MS}] ms, got {v}"),
                ))
            }
        };
        match *self {
            InferenceDelayConfig::Fixed { ms } => delay("ms", ms),
            InferenceDelayConfig::Uniform { min_ms, max_ms } => {
                delay("min_ms", min_ms)?;
                delay("max_ms", max_ms)?;
                if max_ms < min_ms {
                    return Err((
                        format!("{table}.max_ms"),
                        format!("expected max_ms >= min_ms ({min_ms}), got {max_ms}"),
                    ));
                }
                Ok(())
            }
            InferenceDelayConfig::Normal { mean_ms, std_ms } => {
                delay("mean_ms", mean_ms)?;
                delay("std_ms", std_ms)
            }
            InferenceDelayConfig::Spikes {
                base_ms,
                spike_ms,
                probability,
            } => {
                delay("base_ms", base_ms)?;
                delay("spike_ms", spike_ms)?;
                if !(probability.is_finite() && (0.0..=1.0).contains(&probability)) {
                    return Err((
                        format!("{table}.probability"),
                        format!("expected a probability in [0, 1], got {probability}"),
                    ));
                }
                Ok(())
            }
        }
    }

    /// A one-line description for reports (`spikes 0 ms / 120 ms at p=0.02`).
    pub fn describe(&self) -> String {
        match *self {
            InferenceDelayConfig::Fixed { ms } => format!("fixed {ms} ms"),
            InferenceDelayConfig::Uniform { min_ms, max_ms } => {
                format!("uniform [{min_ms}, {max_ms}) ms")
            }
            InferenceDelayConfig::Normal { mean_ms, std_ms } => {
                format!("normal {mean_ms} ms +- {std_ms} ms (clipped at 0)")
            }
            InferenceDelayConfig::Spikes {
                base_ms,
                spike_ms,
                probability,
            } => format!("spikes {base_ms} ms, {spike_ms} ms with p={probability}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<InjectConfig, String> {
        let cfg: InjectConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        cfg.validate(1.0).map_err(|(k, m)| format!("{k}: {m}"))?;
        Ok(cfg)
    }

    #[test]
    fn every_kind_parses_into_its_model() {
        let c = parse(
            "seed = 3\ntransport_delay_ms = 4.0\n\
             inference_delay = { kind = \"uniform\", min_ms = 1.0, max_ms = 3.0 }",
        )
        .unwrap();
        assert_eq!(c.transport_delay_ns(), 4_000_000);
        assert_eq!(
            c.inference_delay.model(),
            DelayModel::Uniform {
                min_ns: 1_000_000,
                max_ns: 3_000_000
            }
        );
        assert!(c.is_active());
        let c =
            parse("inference_delay = { kind = \"spikes\", spike_ms = 100.0, probability = 0.1 }")
                .unwrap();
        assert!(matches!(
            c.inference_delay.model(),
            DelayModel::Spikes { .. }
        ));
        let c =
            parse("inference_delay = { kind = \"normal\", mean_ms = 5.0, std_ms = 1.0 }").unwrap();
        assert!(matches!(
            c.inference_delay.model(),
            DelayModel::Normal { .. }
        ));
        assert!(!parse("").unwrap().is_active());
        // The defaults of a table without the control-thread keys, and of no table.
        assert_eq!(parse("seed = 1").unwrap().cycle_stall_every, 1);
        assert_eq!(InjectConfig::default().cycle_slowdown, 1.0);
        assert!(InjectConfig::default().validate(20.0).is_ok());
        let c = parse("cycle_stall_ms = 2.0\ncycle_stall_every = 20").unwrap();
        assert!(c.is_active() && c.burns_control_thread());
        assert!(parse("cycle_slowdown = 5.0")
            .unwrap()
            .burns_control_thread());
    }

    #[test]
    fn bad_values_name_their_key() {
        let e = parse("transport_delay_ms = 2000.0").unwrap_err();
        assert!(e.starts_with("inject.transport_delay_ms"), "{e}");
        let e = parse("drop_chunk_probability = 1.5").unwrap_err();
        assert!(e.starts_with("inject.drop_chunk_probability"), "{e}");
        let e = parse("inference_delay = { kind = \"uniform\", min_ms = 3.0, max_ms = 1.0 }")
            .unwrap_err();
        assert!(e.starts_with("inject.inference_delay.max_ms"), "{e}");
        let e = parse("cycle_stall_ms = 2.0\ncycle_stall_every = 0").unwrap_err();
        assert!(e.starts_with("inject.cycle_stall_every"), "{e}");
        let e = parse("cycle_slowdown = 0.5").unwrap_err();
        assert!(e.starts_with("inject.cycle_slowdown"), "{e}");
        let e = parse("cycle_stall_ms = -1.0").unwrap_err();
        assert!(e.starts_with("inject.cycle_stall_ms"), "{e}");
        assert!(parse("inference_delay = { kind = \"gamma\", ms = 1.0 }").is_err());
        assert!(parse("inference_delay = { kind = \"fixed\", ms = 1.0, sd = 2.0 }").is_err());
    }
}
