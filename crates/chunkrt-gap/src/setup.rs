//! The excitations: what is run on each plant, and the config of one excitation run.

use crate::error::GapError;
use chunkrt_config::{Config, PolicyKind, ProbeConfig};

/// The excitations run on each plant, the same on both.
///
/// One run per excited joint, by the real runtime on the config's backend: the servo
/// policy holds the arm where it starts (the config's policy path is replaced: what is
/// sized is the plant, and both plants get the same commands), first at rest (the
/// hold: sensing and load channels), then with `[inject.probe]`'s multisine on the
/// joint's setpoint (the actuator and coupling channels: the measured position over
/// the command that left the gate, `Y / C`, at each probe frequency, and every other
/// joint's answer to it). The run's report gives the timing channel.
#[derive(Clone, Debug)]
pub struct GapSetup {
    /// The joints excited, one run each.
    pub joints: Vec<usize>,
    /// Probe frequencies: whole multiples of `1 / window_s`.
    pub freqs_hz: Vec<f64>,
    /// Largest amplitude per component (rad); lowered per joint to what the gate's
    /// limits leave the probe (`PROBE_LIMIT_SHARE`, with a 20 % reserve).
    pub max_amplitude_rad: f64,
    /// Time from the start to the probe: the hold's window is its end.
    pub settle_s: f64,
    /// The hold's window before the probe (s).
    pub hold_s: f64,
    /// The DFT window (the probe at full amplitude).
    pub window_s: f64,
    /// Fade in and out of the probe.
    pub ramp_s: f64,
    /// Run on after the probe.
    pub tail_s: f64,
    /// The servo policy's gain (1/s).
    pub servo_gain_per_s: f64,
    /// The reversal run's slow sine (Hz): each joint's play (backlash) from the
    /// hysteresis of measured against commanded position.
    pub reversal_hz: f64,
    /// Its largest amplitude (rad; lowered to what the gate's limits leave a probe).
    /// Play up to half of it is measured.
    pub reversal_amplitude_rad: f64,
    /// Its whole periods in the window.
    pub reversal_periods: u32,
    /// The step run's step (rad): the setpoint is stepped up by it, held
    /// `step_hold_s`, stepped back down.
    pub step_rad: f64,
    /// How long each level of the step run is held (s).
    pub step_hold_s: f64,
}

impl Default for GapSetup {
    /// Joint 0; 1, 2, 5 and 10 Hz over a 5 s window; 3 s to settle, the last 1.5 s of
    /// it the hold.
    fn default() -> Self {
        GapSetup {
            joints: vec![0],
            freqs_hz: vec![1.0, 2.0, 5.0, 10.0],
            max_amplitude_rad: 2e-3,
            settle_s: 3.0,
            hold_s: 1.5,
            window_s: 5.0,
            ramp_s: 0.5,
            tail_s: 0.5,
            servo_gain_per_s: 4.0,
            reversal_hz: 0.5,
            reversal_amplitude_rad: 0.01,
            reversal_periods: 2,
            step_rad: 2e-3,
            step_hold_s: 0.6,
        }
    }
}

impl GapSetup {
    /// The length of one excitation run.
    pub fn run_s(&self) -> f64 {
        self.settle_s + self.window_s + 2.0 * self.ramp_s + self.tail_s
    }

    /// The reversal run's window (s): its whole periods.
    pub fn reversal_window_s(&self) -> f64 {
        f64::from(self.reversal_periods) / self.reversal_hz
    }

    /// The length of one reversal run: 1 s at rest, the sine faded in, its window,
    /// faded out, the tail.
    pub fn reversal_run_s(&self) -> f64 {
        REVERSAL_SETTLE_S + self.reversal_window_s() + 2.0 * self.ramp_s + self.tail_s
    }

    /// The length of one step run: 1 s at rest, the step up held, the step down held.
    pub fn step_run_s(&self) -> f64 {
        STEP_SETTLE_S + 2.0 * self.step_hold_s
    }

    /// Checks the times, frequencies and joints against `cfg`.
    pub fn check(&self, cfg: &Config) -> Result<(), GapError> {
        let bad = |m: String| Err(GapError::Setup(m));
        if self.joints.is_empty() {
            return bad("no joint to excite".into());
        }
        if let Some(j) = self.joints.iter().find(|&&j| j >= cfg.control.joints) {
            return bad(format!(
                "joint {j}: the arm has {} joints (0 to {})",
                cfg.control.joints,
                cfg.control.joints - 1
            ));
        }
        if !(self.hold_s > 0.0 && self.hold_s < self.settle_s) {
            return bad(format!(
                "the hold ({} s) must be shorter than the time before the probe ({} s)",
                self.hold_s, self.settle_s
            ));
        }
        let nyquist = 500.0 / cfg.control.period_ms;
        let base = 1.0 / self.window_s;
        for &f in &self.freqs_hz {
            if !(f > 0.0 && f < 0.8 * nyquist) {
                return bad(format!(
                    "{f} Hz: expected a frequency below 0.8 x the bus's Nyquist \
                     frequency ({nyquist} Hz at control.period_ms {})",
                    cfg.control.period_ms
                ));
            }
            if ((f / base) - (f / base).round()).abs() > 1e-6 {
                return bad(format!(
                    "{f} Hz is not a whole multiple of 1 / window ({base} Hz): its periods \
                     would not fill the window"
                ));
            }
        }
        Ok(())
    }

    /// The multisine of joint `j`, at amplitude 1 rad per component.
    fn unit_probe(&self, j: usize) -> ProbeConfig {
        ProbeConfig {
            joint: j,
            shape: chunkrt_config::ProbeShape::Multisine,
            amplitude_rad: 1.0,
            freqs_hz: self.freqs_hz.clone(),
            start_s: self.settle_s,
            duration_s: self.window_s + 2.0 * self.ramp_s,
            ramp_s: self.ramp_s,
            max_excursion_rad: 0.1,
        }
    }

    /// The config of joint `j`'s multisine run on the plant `cfg` names.
    pub fn excitation(&self, cfg: &Config, j: usize) -> Result<Config, GapError> {
        let probe = scaled(cfg, self.unit_probe(j), self.max_amplitude_rad);
        self.run_config(cfg, probe)
    }

    /// The config of joint `j`'s reversal run: one slow sine.
    pub fn reversal(&self, cfg: &Config, j: usize) -> Result<Config, GapError> {
        let unit = ProbeConfig {
            joint: j,
            shape: chunkrt_config::ProbeShape::Multisine,
            amplitude_rad: 1.0,
            freqs_hz: vec![self.reversal_hz],
            start_s: REVERSAL_SETTLE_S,
            duration_s: self.reversal_window_s() + 2.0 * self.ramp_s,
            ramp_s: self.ramp_s,
            max_excursion_rad: 0.1,
        };
        let probe = scaled(cfg, unit, self.reversal_amplitude_rad);
        self.run_config(cfg, probe)
    }

    /// The config of joint `j`'s step run: a pulse of `step_rad` on its setpoint, the
    /// servo's gain near zero (the policy holds its command and does not answer the
    /// step: what is measured is the drive following a stepped command).
    pub fn step(&self, cfg: &Config, j: usize) -> Result<Config, GapError> {
        let probe = ProbeConfig {
            joint: j,
            shape: chunkrt_config::ProbeShape::Step,
            amplitude_rad: self.step_rad,
            freqs_hz: Vec::new(),
            start_s: STEP_SETTLE_S,
            duration_s: self.step_hold_s,
            ramp_s: 0.0,
            max_excursion_rad: 0.1,
        };
        let mut c = self.run_config(cfg, probe)?;
        c.policy.gain_per_s = STEP_SERVO_GAIN_PER_S;
        c.check()?;
        Ok(c)
    }

    /// `cfg` with its backend, limits, bus and `[inject]` as they are, the servo
    /// policy holding the arm where it starts, `probe`, the recording on.
    fn run_config(&self, cfg: &Config, probe: ProbeConfig) -> Result<Config, GapError> {
        let mut c = cfg.clone();
        c.policy.kind = PolicyKind::Servo;
        c.policy.gain_per_s = self.servo_gain_per_s;
        c.policy.goals_rad.clear();
        c.policy.candidates = 1;
        c.policy.goal_schedule.clear();
        c.policy.draw_schedule.clear();
        c.policy.remote = None;
        c.policy.manifest = None;
        c.inject.probe = Some(probe);
        c.telemetry.record = true;
        c.check()?;
        Ok(c)
    }
}

/// Time at rest before the reversal run's sine.
pub const REVERSAL_SETTLE_S: f64 = 1.0;

/// Time at rest before the step run's step.
pub const STEP_SETTLE_S: f64 = 1.0;

/// The servo's gain in the step run (1/s): over a 0.6 s hold it moves the command by
/// 0.06 % of the step.
const STEP_SERVO_GAIN_PER_S: f64 = 1e-3;

/// `unit` (amplitude 1) at the largest amplitude within `max_rad` whose peak speed,
/// acceleration and jerk stay within 80 % of the share of its joint's limits in `cfg`
/// that a probe may take.
fn scaled(cfg: &Config, mut unit: ProbeConfig, max_rad: f64) -> ProbeConfig {
    let j = unit.joint;
    let [_, v, a, jk] = unit.peaks();
    let l = &cfg.limits;
    let share = 0.8 * chunkrt_config::PROBE_LIMIT_SHARE;
    unit.amplitude_rad = [
        l.max_vel_rad_s.get(j) / v,
        l.max_acc_rad_s2.get(j) / a,
        l.max_jerk_rad_s3.get(j) / jk,
    ]
    .into_iter()
    .fold(max_rad, |m, x| m.min(share * x));
    unit
}
