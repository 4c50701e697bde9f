//! What one measured point of the runtime's loop holds: `L` at each probe
//! frequency, the margin or why there is none, and what a user sees.

use crate::complex::Complex;
use crate::verdict::Verdict;
use std::path::PathBuf;

/// One frequency of the measured loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LivePoint {
    /// Probe frequency.
    pub freq_hz: f64,
    /// `L(jw) = -U / C`.
    pub l: Complex,
    /// Unwrapped phase of `L` (degrees).
    pub phase_deg: f64,
}

/// How the loop turned out at one delay.
#[derive(Clone, Debug, PartialEq)]
pub enum LiveStatus {
    /// Stable, with a gain crossover in the probed band.
    Margin {
        /// Gain crossover (Hz).
        crossover_hz: f64,
        /// Phase margin (degrees).
        pm_deg: f64,
        /// Delay margin: how much more pure delay the loop takes (ms).
        delay_margin_ms: f64,
    },
    /// Stable, but `|L|` does not cross 1 in the probed band.
    NoCrossover {
        /// Largest `|L|` measured.
        max_mag: f64,
        /// Smallest `|L|` measured.
        min_mag: f64,
    },
    /// The free response grew, or the loop diverged.
    Unstable,
    /// After the probe the loop kept oscillating on its own, larger than the probe
    /// (hunting): no margin.
    LimitCycle {
        /// Its frequency (Hz).
        freq_hz: f64,
        /// Its amplitude (rad).
        amplitude_rad: f64,
    },
    /// The free response changed too little to tell.
    Undetermined {
        /// Free-response time it would take.
        run_longer_s: f64,
    },
    /// The policy lost authority (a fallback) while it was measured: no margin.
    LostAuthority {
        /// Cycles outside `Playing` after the probe started.
        cycles: u64,
    },
    /// The policy moves between its goals, and the probed run departed from its
    /// unprobed twin by far more than a small-signal answer to the probe (the
    /// probe moved the policy onto another path, or the run does not repeat): the
    /// difference is not the loop's answer, and no margin or stability can be read
    /// from it (measure with the policy held: `--hold`).
    Masked {
        /// RMS of what the probe frequencies do not explain of `U` less the twin's,
        /// or the largest difference before the probe started (rad).
        motion_rms_rad: f64,
        /// The probe's amplitude per frequency (rad).
        probe_rad: f64,
    },
}

impl LiveStatus {
    /// The phase margin, only for a stable loop with a crossover.
    pub fn pm_deg(&self) -> Option<f64> {
        match self {
            LiveStatus::Margin { pm_deg, .. } => Some(*pm_deg),
            _ => None,
        }
    }

    /// The gain crossover, only for a stable loop with one.
    pub fn crossover_hz(&self) -> Option<f64> {
        match self {
            LiveStatus::Margin { crossover_hz, .. } => Some(*crossover_hz),
            _ => None,
        }
    }

    /// What a table prints in the margin column.
    pub fn explain(&self) -> String {
        match self {
            LiveStatus::Margin { pm_deg, .. } => format!("{pm_deg:.1}"),
            LiveStatus::NoCrossover { max_mag, min_mag } => {
                format!("no crossover (|L| {min_mag:.2}..{max_mag:.2})")
            }
            LiveStatus::Unstable => "unstable".into(),
            LiveStatus::LimitCycle {
                freq_hz,
                amplitude_rad,
            } => format!(
                "limit cycle {freq_hz:.2} Hz {:.1} mrad",
                amplitude_rad * 1e3
            ),
            LiveStatus::Undetermined { run_longer_s } => {
                format!("undetermined (run longer: {run_longer_s:.0} s)")
            }
            LiveStatus::LostAuthority { cycles } => format!("lost authority ({cycles} cycles)"),
            LiveStatus::Masked {
                motion_rms_rad,
                probe_rad,
            } => format!(
                "masked: the probed run departed from its unprobed twin by {:.1} mrad \
                 (beside a {:.1} mrad probe): --hold",
                motion_rms_rad * 1e3,
                probe_rad * 1e3
            ),
        }
    }
}

/// What a user sees of the loop at one delay, beside its margin.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Consequences {
    /// RMS of `goal - measured` on the probed joint over the free response (rad;
    /// paired, the measured position less the unprobed run's).
    pub hold_err_rms_rad: f64,
    /// Largest `|goal - measured|` there (rad).
    pub hold_err_max_rad: f64,
    /// Overshoot of the approach to the goal before the probe (rad, 0: none;
    /// `None`: a paired point, whose policy moves between goals).
    pub overshoot_rad: Option<f64>,
    /// Time from the first cycle until the joint stayed within 5 mrad of the goal
    /// (s; `None`: it did not before the probe, or a paired point).
    pub time_to_goal_s: Option<f64>,
    /// The strongest oscillation in the free response: frequency (Hz) and amplitude
    /// (rad).
    pub oscillation: Option<(f64, f64)>,
    /// That oscillation kept at least half its amplitude from the first half of the
    /// free response to the second: a limit cycle (hunting), not a decaying ring.
    pub limit_cycle: bool,
    /// Cycles the gate changed the probed joint's command in the DFT window.
    pub gate_cycles: u64,
    /// Chunks expired over the run (report counter).
    pub chunks_expired: u64,
    /// Fallbacks entered over the run, the one at shutdown excluded.
    pub fallbacks: u64,
}

/// One measured point of the runtime's loop.
#[derive(Clone, Debug)]
pub struct LiveRow {
    /// The loop's `L` at each probe frequency.
    pub points: Vec<LivePoint>,
    /// The verdict on the free response.
    pub verdict: Verdict,
    /// RMS of what the probe frequencies do not explain of `U` in the window (rad):
    /// noise, and the probe's intermodulation through a nonlinear or sampled loop.
    /// Small beside the probe's response, the measurement is linear.
    pub residual_rms_rad: f64,
    /// Margin, or why there is none.
    pub status: LiveStatus,
    /// Gain margin (frequency, dB) where the phase crosses -180 degrees in the band.
    pub gain_margin: Option<(f64, f64)>,
    /// What a user sees.
    pub consequences: Consequences,
    /// The run's directory (report, recording, plots).
    pub run_dir: PathBuf,
    /// Measured against an unprobed twin run (in `run_dir/reference`; the policy
    /// moves on its own): the largest difference of `U` from the twin's before the
    /// probe started (rad), what the run does not repeat; twice it is the floor
    /// below which the free response is not judged. `None`: not paired.
    pub twin_mismatch_rad: Option<f64>,
    /// Probed runs made against the twin (a run that departed from it before the
    /// probe started is made again, up to [`crate::live::PAIRED_ATTEMPTS`]); 1 when
    /// not paired.
    pub attempts: u32,
    /// How far each pair made again had departed from its twin before the probe
    /// (rad; empty: the first pair held).
    pub departed_rad: Vec<f64>,
    /// Chunks of the kept probed run that missed their twin's cycle (an
    /// observation gone, or a chunk that arrived after the cycle its twin played
    /// it in): where the replay could not keep the twin's timing.
    pub replay_late: u64,
    /// The backend measured.
    pub backend: String,
    /// The action filter's phase cost (`limits.action_filter_hz`), when one is set:
    /// inside the measured loop (the recorded setpoint is the filtered one), stated
    /// here at the crossover from the filter's own transfer function (set by
    /// `measure`).
    pub action_filter: Option<FilterCost>,
}

/// What the action filter costs the loop at its crossover.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterCost {
    /// The filter's cutoff (Hz).
    pub cutoff_hz: f64,
    /// Its phase lag at the measured crossover (degrees; `None`: no crossover).
    pub lag_at_crossover_deg: Option<f64>,
}

impl FilterCost {
    /// The filter of `setup`'s config with its lag at `crossover_hz`.
    pub fn of(cfg: &chunkrt_config::Config, crossover_hz: Option<f64>) -> Option<FilterCost> {
        let fc = cfg.action_filter_hz()?;
        let f = chunkrt_core::ActionFilter::new(
            fc,
            cfg.period_ns() as f64 * 1e-9,
            &[0.0; chunkrt_core::MAX_DOF],
        );
        Some(FilterCost {
            cutoff_hz: f.cutoff_hz(),
            lag_at_crossover_deg: crossover_hz.map(|x| f.phase_lag_deg(x)),
        })
    }
}
