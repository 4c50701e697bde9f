//! What to measure on the runtime's loop: its config, the probe and the run's
//! times.

use crate::error::MarginError;
use chunkrt_config::{Config, InjectConfig, ProbeConfig};

/// What to measure on the runtime's loop.
#[derive(Clone, Debug)]
pub struct LiveSetup {
    /// The run config (backend, policy, executor, gate); `[inject]` is replaced
    /// per point.
    pub cfg: Config,
    /// Its name, for the report.
    pub config_name: String,
    /// The joint probed.
    pub joint: usize,
    /// Amplitude of each probe component (rad).
    pub amplitude_rad: f64,
    /// Probe frequencies: whole multiples of `1 / window_s`.
    pub freqs_hz: Vec<f64>,
    /// Time before the probe starts (the approach to the goal, settling).
    pub settle_s: f64,
    /// The DFT window (the probe at full amplitude).
    pub window_s: f64,
    /// Fade in and out of the probe.
    pub ramp_s: f64,
    /// Free response after the probe, for the stability verdict.
    pub free_s: f64,
    /// The excursion guard of the probe (`[inject.probe] max_excursion_rad`).
    pub max_excursion_rad: f64,
}

impl LiveSetup {
    /// Defaults: joint 0, 2 mrad per component, a 20 s window with 11 frequencies
    /// from 0.1 Hz to 0.4 x the chunk rate's Nyquist frequency (at most 4 Hz), 4 s
    /// to settle, 8 s of free response.
    pub fn new(cfg: Config, config_name: String) -> LiveSetup {
        let window_s = 20.0;
        let top = (0.4 * 500.0 / cfg.inference.chunk_period_ms).min(4.0);
        LiveSetup {
            freqs_hz: default_freqs(window_s, 0.1, top, 11),
            cfg,
            config_name,
            joint: 0,
            amplitude_rad: 2e-3,
            settle_s: 4.0,
            window_s,
            ramp_s: 0.5,
            free_s: 8.0,
            max_excursion_rad: 0.1,
        }
    }

    /// The probe this setup adds.
    pub fn probe(&self) -> ProbeConfig {
        ProbeConfig {
            joint: self.joint,
            shape: chunkrt_config::ProbeShape::Multisine,
            amplitude_rad: self.amplitude_rad,
            freqs_hz: self.freqs_hz.clone(),
            start_s: self.settle_s,
            duration_s: self.window_s + 2.0 * self.ramp_s,
            ramp_s: self.ramp_s,
            max_excursion_rad: self.max_excursion_rad,
        }
    }

    /// The policy moves on its own: not the servo policy, and not held at one goal
    /// (`--hold` sets `policy.goals_rad` to one; none there means the manifest's).
    /// Each point is then measured against the same run without the probe.
    pub fn paired(&self) -> bool {
        let p = &self.cfg.policy;
        p.kind != chunkrt_config::PolicyKind::Servo && p.goals_rad.len() != 1
    }

    /// The length of one measured run.
    pub fn run_s(&self) -> f64 {
        self.settle_s + self.window_s + 2.0 * self.ramp_s + self.free_s
    }

    /// The config of one point: `inject` with this setup's probe, checked as a
    /// config file would be (a probe beyond the gate's limits is refused here).
    pub fn config_for(&self, inject: &InjectConfig) -> Result<Config, MarginError> {
        let mut cfg = self.cfg.clone();
        cfg.inject = inject.clone();
        cfg.inject.probe = Some(self.probe());
        cfg.check()?;
        Ok(cfg)
    }
}

/// `n` frequencies spaced about evenly in log from `lo` to `hi`, each a whole
/// multiple of `1 / window_s` (so every one has a whole number of periods in the
/// window), without repeats.
pub fn default_freqs(window_s: f64, lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let base = 1.0 / window_s;
    let mut out: Vec<f64> = (0..n)
        .map(|i| {
            let f = lo * (hi / lo).powf(i as f64 / (n.max(2) - 1) as f64);
            (f / base).round().max(1.0) * base
        })
        .collect();
    out.dedup_by(|a, b| (*a - *b).abs() < 0.5 * base);
    out
}
