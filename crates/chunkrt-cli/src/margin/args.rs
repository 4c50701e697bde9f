//! `chunkrt margin`'s arguments: which loop, where the delay goes in, the
//! compensations, the delays (`parse_delays`) and the probe.

use clap::Parser;
use std::path::PathBuf;

/// `chunkrt margin`.
#[derive(Parser, Debug, Clone)]
pub struct MarginArgs {
    /// Runtime config. With `--loop runtime` (the default when a config is given)
    /// its whole loop is measured: its policy, executor, gate and backend. With
    /// `--loop reference` only its `[control]` period and `[sim]` arm are used.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Which loop: `runtime` (the runtime's own loop through the policy, on the
    /// config's backend) or `reference` (a host servo closed on one simulated
    /// joint, checked against its analytic model). Default: runtime with
    /// `--config`, reference without.
    #[arg(long = "loop", value_enum)]
    pub loop_kind: Option<LoopKind>,
    /// Runtime loop: where the delay goes in (`transport`: gate -> drives;
    /// `observation`: loop -> policy; `feedback`: drives -> loop; `inference`: the
    /// policy's compute time).
    #[arg(long, value_enum, default_value = "transport")]
    pub inject_at: InjectAt,
    /// Runtime loop, `--inject-at inference`: a normal jitter with this standard
    /// deviation around each delay (ms; e.g. 35 with 6.2: P99 near 49.5).
    #[arg(long, default_value_t = 0.0)]
    pub jitter_ms: f64,
    /// Runtime loop: compensations, each measured at every delay in the same run
    /// (`none`, `lookahead`: the executor plays the chunk ahead by the injected
    /// delay; `extrapolate`: the observation moved on by velocity x its age).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "none")]
    pub compensate: Vec<Compensation>,
    /// Runtime loop: replace the config's policy by the servo policy with this
    /// integral gain (1/s), holding where the arm starts: the margin of the
    /// runtime, bus and drives around a feedback law of known crossover (near
    /// K / 2 pi Hz).
    #[arg(long, value_name = "K")]
    pub servo_gain: Option<f64>,
    /// Runtime loop: override `policy.state_source` (`measured` closes the policy's
    /// loop through the arm; `planned` policies observe their own plan).
    #[arg(long)]
    pub state_source: Option<String>,
    /// Runtime loop: the policy's only goal is the simulated arm's start pose
    /// (`[sim] initial_pos_rad`): it holds there while it is measured.
    #[arg(long)]
    pub hold: bool,
    /// Runtime loop: override `control.period_ms` (1 to 20).
    #[arg(long)]
    pub bus_period_ms: Option<f64>,
    /// Runtime loop: the excursion guard. Once the probed joint is measured this far
    /// from the setpoint the policy commands (before the probe) while it plays, the
    /// policy loses authority for the rest of that point's run (an unstable loop is
    /// stopped).
    #[arg(long, default_value_t = 0.1)]
    pub max_excursion_rad: f64,
    /// Runtime loop: DFT window per delay (s).
    #[arg(long, default_value_t = 20.0)]
    pub window_s: f64,
    /// Runtime loop: time before the probe (s).
    #[arg(long, default_value_t = 4.0)]
    pub settle_s: f64,
    /// Runtime loop: free response after the probe, judged for stability (s).
    #[arg(long, default_value_t = 8.0)]
    pub free_s: f64,
    /// Injected delays: `START:END:STEPms` (e.g. `0:60:5ms`) or a list `0,10,20ms`.
    #[arg(long, default_value = "0:60:5ms")]
    pub delays: String,
    /// Bode frequencies in Hz, comma-separated (default: 0.5 Hz to 0.4 x Nyquist).
    #[arg(long, value_delimiter = ',')]
    pub freqs: Option<Vec<f64>>,
    /// Report the delay at which the phase margin falls below this.
    #[arg(long, default_value_t = 30.0)]
    pub threshold_deg: f64,
    /// Joint the loop is closed on.
    #[arg(long, default_value_t = 0)]
    pub joint: usize,
    /// Host servo proportional gain (rad/rad).
    #[arg(long, default_value_t = 0.0)]
    pub kp: f64,
    /// Host servo integral gain (1/s); default 2 pi 3.
    #[arg(long, default_value_t = 2.0 * std::f64::consts::PI * 3.0)]
    pub ki: f64,
    /// Probe amplitude in rad (each component; default 1 mrad for the reference
    /// loop, 2 mrad for the runtime loop).
    #[arg(long)]
    pub amplitude_rad: Option<f64>,
    /// Output directory for margin.json and margin.svg/.png.
    #[arg(long, default_value = "runs/margin")]
    pub out: PathBuf,
}

/// The loop `chunkrt margin` measures.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopKind {
    /// The runtime's own loop.
    Runtime,
    /// The host servo on one simulated joint (docs/margin.md).
    Reference,
}

/// Where the runtime loop's delay goes in.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectAt {
    /// `[inject] transport_delay_ms`.
    Transport,
    /// `[inject] observation_delay_ms`.
    Observation,
    /// `[inject] feedback_delay_ms`.
    Feedback,
    /// `[inject] inference_delay`.
    Inference,
}

/// A compensation measured beside the plain loop.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compensation {
    /// Nothing.
    None,
    /// `executor.lookahead_ms` set to the injected delay.
    Lookahead,
    /// `inference.extrapolate_observation`.
    Extrapolate,
}

/// Parses `0:60:5ms`, `0,10,20ms`, `0:0.06:0.005s` into nanoseconds.
pub fn parse_delays(s: &str) -> Result<Vec<u64>, String> {
    let s = s.trim();
    let (body, scale) = if let Some(b) = s.strip_suffix("ms") {
        (b, 1e6)
    } else if let Some(b) = s.strip_suffix("us") {
        (b, 1e3)
    } else if let Some(b) = s.strip_suffix('s') {
        (b, 1e9)
    } else {
        return Err(format!(
            "`{s}`: expected a unit (ms, us or s), e.g. `0:60:5ms`"
        ));
    };
    let num = |t: &str| -> Result<f64, String> {
        let v: f64 = t
            .trim()
            .parse()
            .map_err(|_| format!("`{s}`: `{t}` is not a number"))?;
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!("`{s}`: `{t}` must be a delay >= 0"))
        }
    };
    let values: Vec<f64> = if body.contains(':') {
        let parts: Vec<&str> = body.split(':').collect();
        if parts.len() != 3 {
            return Err(format!("`{s}`: expected START:END:STEP"));
        }
        let (a, b, step) = (num(parts[0])?, num(parts[1])?, num(parts[2])?);
        if step <= 0.0 || b < a {
            return Err(format!("`{s}`: expected END >= START and STEP > 0"));
        }
        let n = ((b - a) / step + 1e-9).floor() as usize;
        if n > 1000 {
            return Err(format!("`{s}`: more than 1000 delays"));
        }
        (0..=n).map(|i| a + i as f64 * step).collect()
    } else {
        body.split(',').map(num).collect::<Result<_, _>>()?
    };
    if values.is_empty() {
        return Err(format!("`{s}`: no delay given"));
    }
    Ok(values.iter().map(|v| (v * scale).round() as u64).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_lists_parse_and_refuse_garbage() {
        assert_eq!(
            parse_delays("0:20:5ms").unwrap(),
            vec![0, 5_000_000, 10_000_000, 15_000_000, 20_000_000]
        );
        assert_eq!(parse_delays("0,2.5ms").unwrap(), vec![0, 2_500_000]);
        assert_eq!(
            parse_delays("0:0.01:0.005s").unwrap(),
            vec![0, 5_000_000, 10_000_000]
        );
        assert!(parse_delays("0:60:5").unwrap_err().contains("unit"));
        assert!(parse_delays("0:60ms").is_err());
        assert!(parse_delays("10:0:5ms").is_err());
        assert!(parse_delays("0:60:0ms").is_err());
        assert!(parse_delays("-5ms").is_err());
        assert!(parse_delays("a,b ms").is_err());
    }
}
