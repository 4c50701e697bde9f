//! `margin.json`'s shapes, one per loop: the types both writers fill and the schema
//! (`docs/reference/margin.schema.json`, `chunkrt reference schema margin`) is
//! generated from. A field that is `null` when there is nothing to give is written
//! as `null`, never left out.

use serde::Serialize;

/// `margin.json`: the reference loop's or the runtime loop's.
#[derive(Serialize, schemars::JsonSchema)]
#[serde(untagged)]
#[schemars(title = "margin.json")]
pub enum MarginJson {
    /// `chunkrt margin --loop reference`.
    Reference(ReferenceMargin),
    /// `chunkrt margin --loop runtime` (`--config`).
    Runtime(RuntimeMargin),
}

/// A gain margin: where the phase reaches -180 degrees, and by how much `|L|` is
/// below 1 there.
#[derive(Serialize, schemars::JsonSchema)]
pub struct GainMargin {
    /// The phase crossover (Hz).
    pub freq_hz: f64,
    /// The gain margin (dB).
    pub db: f64,
}

/// `x`, or `None` where it is not a number (serde_json writes a NaN as `null`
/// anyway: the type says so).
pub fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl GainMargin {
    /// From a (frequency, dB) pair.
    pub fn of(gm: Option<(f64, f64)>) -> Option<GainMargin> {
        gm.map(|(freq_hz, db)| GainMargin { freq_hz, db })
    }
}

/// The reference loop's `margin.json`: the loop, the margins at zero delay, the
/// hand model, the Bode points and the sweep.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ReferenceMargin {
    /// The loop measured.
    #[serde(rename = "loop")]
    pub loop_: ReferenceLoop,
    /// The gain crossover at zero delay (Hz).
    pub crossover_hz: f64,
    /// The phase margin at zero delay (degrees).
    pub pm0_deg: f64,
    /// The gain margin at zero delay (`null`: the phase never reaches -180 degrees
    /// in the band).
    pub gain_margin: Option<GainMargin>,
    /// The least-squares margin lost per ms of delay (`null`: fewer than two
    /// margins measured).
    pub loss_deg_per_ms: Option<f64>,
    /// `360 f_c` per second: the loss a pure delay costs at the crossover (deg/ms).
    pub expected_loss_deg_per_ms: f64,
    /// The margin below which a delay is too much (degrees).
    pub threshold_deg: f64,
    /// The delay at which the margin falls below the threshold (ms; `null`: it
    /// does not over the sweep).
    pub delay_at_threshold_ms: Option<f64>,
    /// The hand model's margins at zero delay (`null`: `|L|` never falls through 1).
    pub model: Option<ModelJson>,
    /// `L` at each Bode frequency, at zero delay.
    pub bode: Vec<ReferenceBodePoint>,
    /// The margin at each injected delay.
    pub sweep: Vec<SweepRow>,
}

/// The reference loop: the simulated arm's joint under a host-side PI servo.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ReferenceLoop {
    /// The arm's configuration (its name).
    pub config: String,
    /// The joint probed.
    pub joint: usize,
    /// The bus period (ms).
    pub period_ms: f64,
    /// The servo's proportional gain.
    pub kp: f64,
    /// The servo's integral gain (1/s).
    pub ki_per_s: f64,
    /// The probe's amplitude (rad).
    pub probe_amplitude_rad: f64,
    /// The drive's bandwidth (Hz).
    pub drive_bandwidth_hz: f64,
    /// The joint's inertia (kg m^2).
    pub inertia_kg_m2: f64,
    /// The joint's viscous friction (N m s/rad).
    pub viscous_nm_s_rad: f64,
    /// The joint's Coulomb friction (N m).
    pub coulomb_nm: f64,
}

/// The hand model's margins (docs/margin.md).
#[derive(Serialize, schemars::JsonSchema)]
pub struct ModelJson {
    /// Its gain crossover (Hz).
    pub crossover_hz: f64,
    /// Its phase margin (degrees).
    pub pm0_deg: f64,
    /// Its gain margin (`null`: none in the band).
    pub gain_margin: Option<GainMargin>,
}

/// One Bode point of the reference loop, beside the hand model's `|L|`.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ReferenceBodePoint {
    /// The frequency (Hz).
    pub freq_hz: f64,
    /// `|L|`.
    pub mag: f64,
    /// `20 log10 |L|`.
    pub mag_db: f64,
    /// The unwrapped phase of `L` (degrees).
    pub phase_deg: f64,
    /// The hand model's `|L|`.
    pub model_mag: f64,
    /// How the point was measured (`linear`, `saturated`, ...).
    pub status: String,
}

/// The reference loop at one injected delay.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SweepRow {
    /// The delay asked for (ms).
    pub delay_ms: f64,
    /// The delay the line adds: whole bus periods (ms).
    pub effective_delay_ms: f64,
    /// The gain crossover (Hz).
    pub crossover_hz: f64,
    /// The phase margin (degrees; `null`: not stable, or not linear).
    pub pm_deg: Option<f64>,
    /// How the crossover point was measured.
    pub status: String,
    /// `stable`, `unstable` or `undetermined`.
    pub stability: String,
    /// Why, in words.
    pub stability_detail: String,
    /// The free response's growth rate (1/s; `null`: not a number).
    pub growth_per_s: Option<f64>,
    /// `PM0 - 360 f_c tau` (degrees).
    pub pm_expected_deg: f64,
    /// The hand model's margin at this delay (degrees; `null`: no crossover).
    pub pm_model_deg: Option<f64>,
}

/// The runtime loop's `margin.json`: the loop and one row per compensation and
/// delay.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RuntimeMargin {
    /// The loop measured.
    #[serde(rename = "loop")]
    pub loop_: RuntimeLoop,
    /// The margin below which a delay is too much (degrees).
    pub threshold_deg: f64,
    /// One row per compensation and delay.
    pub rows: Vec<RuntimeRow>,
}

/// The runtime's own loop: policy, chunk buffer, executor, gate, backend.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RuntimeLoop {
    /// Always `runtime`.
    pub kind: &'static str,
    /// The loop in words.
    pub description: String,
    /// The run configuration (its name).
    pub config: String,
    /// The joint probed.
    pub joint: usize,
    /// The probe's amplitude per component (rad).
    pub probe_amplitude_rad: f64,
    /// The probe frequencies (Hz).
    pub probe_freqs_hz: Vec<f64>,
    /// The DFT window (s).
    pub window_s: f64,
    /// Time before the probe (s).
    pub settle_s: f64,
    /// The free response after the probe (s).
    pub free_s: f64,
    /// Where the delay is injected (`--inject-at`).
    pub inject_at: String,
    /// The injected delay's jitter (ms).
    pub jitter_ms: f64,
}

/// The runtime loop at one compensation and delay.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RuntimeRow {
    /// The compensation (`none`, ...).
    pub compensation: &'static str,
    /// The injected delay (ms).
    pub delay_ms: f64,
    /// The margin, or why there is none, in words.
    pub status: String,
    /// `stable`, `unstable` or `undetermined`.
    pub stability: &'static str,
    /// The free response's growth rate (1/s; `null`: not a number).
    pub growth_per_s: Option<f64>,
    /// The envelope's first block peak (rad; `null`: none, as where the loop lost
    /// authority).
    pub envelope_first_rad: Option<f64>,
    /// The envelope's last block peak (rad; `null`: none).
    pub envelope_last_rad: Option<f64>,
    /// What the probe frequencies do not explain (rad RMS).
    pub residual_rms_rad: f64,
    /// The gain crossover (Hz; `null`: no margin).
    pub crossover_hz: Option<f64>,
    /// The phase margin (degrees; `null`: no margin).
    pub pm_deg: Option<f64>,
    /// The delay margin (ms; `null`: no margin).
    pub delay_margin_ms: Option<f64>,
    /// The gain margin (`null`: none in the band).
    pub gain_margin: Option<GainMargin>,
    /// RMS of `goal - measured` over the free response (rad).
    pub hold_err_rms_rad: f64,
    /// Largest `|goal - measured|` there (rad).
    pub hold_err_max_rad: f64,
    /// Overshoot of the approach to the goal (rad; `null`: a paired point).
    pub overshoot_rad: Option<f64>,
    /// Time until the joint stayed near the goal (s; `null`: not before the probe).
    pub time_to_goal_s: Option<f64>,
    /// The strongest oscillation of the free response (`null`: none).
    pub oscillation: Option<Oscillation>,
    /// Cycles the gate changed the probed joint's command in the window.
    pub gate_cycles_in_window: u64,
    /// Fallbacks entered over the run.
    pub fallbacks: u64,
    /// Chunks expired over the run.
    pub chunks_expired: u64,
    /// The backend measured.
    pub backend: String,
    /// The run's directory.
    pub run_dir: String,
    /// The unprobed twin run's directory (`null`: not paired).
    pub reference_run_dir: Option<String>,
    /// The largest difference from the twin before the probe (rad; `null`: not
    /// paired).
    pub twin_mismatch_rad: Option<f64>,
    /// Probed runs made against the twin.
    pub attempts: u32,
    /// How far each pair made again had departed from its twin (rad).
    pub departed_rad: Vec<f64>,
    /// Chunks that missed their twin's cycle.
    pub replay_late: u64,
    /// The action filter's phase cost (`null`: no filter).
    pub action_filter: Option<ActionFilter>,
    /// `L` at each probe frequency.
    pub bode: Vec<RuntimeBodePoint>,
}

/// An oscillation of the free response.
#[derive(Serialize, schemars::JsonSchema)]
pub struct Oscillation {
    /// Its frequency (Hz).
    pub freq_hz: f64,
    /// Its amplitude (rad).
    pub amplitude_rad: f64,
    /// It kept at least half its amplitude: a limit cycle.
    pub limit_cycle: bool,
}

/// The action filter's phase cost.
#[derive(Serialize, schemars::JsonSchema)]
pub struct ActionFilter {
    /// Its cutoff (Hz).
    pub cutoff_hz: f64,
    /// Its lag at the measured crossover (degrees; `null`: no crossover).
    pub phase_lag_deg_at_crossover: Option<f64>,
    /// Its lag at each probe frequency.
    pub phase_lag_deg_at_probe_freqs: Vec<FilterLag>,
}

/// The action filter's lag at one frequency.
#[derive(Serialize, schemars::JsonSchema)]
pub struct FilterLag {
    /// The frequency (Hz).
    pub freq_hz: f64,
    /// The lag (degrees).
    pub lag_deg: f64,
}

/// One Bode point of the runtime loop.
#[derive(Serialize, schemars::JsonSchema)]
pub struct RuntimeBodePoint {
    /// The probe frequency (Hz).
    pub freq_hz: f64,
    /// `|L|`.
    pub mag: f64,
    /// The unwrapped phase of `L` (degrees).
    pub phase_deg: f64,
}
