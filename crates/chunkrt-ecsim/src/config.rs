//! Simulator configuration: drive parameters, clock, and seeded fault injection, from TOML.
//!
//! All fault times (`at_s`, `restore_s`) are seconds of *simulated* time counted from the moment
//! the first drive of the chain entered OP, so a test's faults land at the same point of the run
//! however long bring-up took. Frame faults (drop/delay/corrupt) also start at that moment unless
//! `frames.from_start = true`.

use crate::error::EcsimError;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// How simulated time advances.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ClockMode {
    /// Real monotonic time: the drives integrate the wall-clock time between process-data cycles.
    /// Use with a real transport and a master running at its real period.
    #[default]
    Wall,
    /// Virtual time: every frame that carries process data (LRD/LWR/LRW) advances the clock by one
    /// cycle (`cycle_us`, or the SYNC0 period when DC sync is active), any other frame by 20 us.
    /// Makes in-process tests deterministic and as fast as the CPU allows.
    Virtual,
}

/// AL states a transition can be refused into.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TargetState {
    /// INIT -> PRE-OP.
    PreOp,
    /// PRE-OP -> SAFE-OP.
    SafeOp,
    /// SAFE-OP -> OP.
    Op,
}

impl TargetState {
    /// The AL state code (2, 4, 8).
    pub fn al_code(self) -> u8 {
        match self {
            TargetState::PreOp => 2,
            TargetState::SafeOp => 4,
            TargetState::Op => 8,
        }
    }
}

/// Parameters of each simulated drive (all drives share them).
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct DriveParams {
    /// Vendor ID reported in SII and 0x1018:01.
    pub vendor_id: u32,
    /// Product code (SII, 0x1018:02).
    pub product_code: u32,
    /// Revision (SII, 0x1018:03).
    pub revision: u32,
    /// Serial number of drive 0; drive i reports `serial_base + i`.
    pub serial_base: u32,
    /// Encoder counts per motor revolution (informational; positions are in counts).
    pub counts_per_rev: u32,
    /// Position-loop bandwidth in Hz (critically damped, with velocity feed-forward).
    pub bandwidth_hz: f64,
    /// Velocity limit in counts/s.
    pub max_velocity_counts_s: f64,
    /// Acceleration (torque) limit in counts/s^2; 1000 per mille torque at this acceleration.
    pub max_accel_counts_s2: f64,
    /// Initial value of 0x6065 following error window (counts).
    pub following_error_window: u32,
    /// Initial value of 0x6066 following error time out (ms).
    pub following_error_timeout_ms: u16,
    /// Initial value of 0x6085 quick stop deceleration (counts/s^2).
    pub quick_stop_decel_counts_s2: u32,
    /// Initial value of 0x605A quick stop option code (2: stop then switch on disabled; 6: stop
    /// and stay in quick stop active).
    pub quick_stop_option: i16,
    /// Initial motor position of drive i is `initial_position_counts * (i + 1)` so drives differ.
    pub initial_position_counts: i32,
    /// Process-data (sync manager) watchdog in ms; 0 disables it. In OP, no outputs for this long
    /// drops the device to SAFE-OP with AL status code 0x001B, as real ESCs do.
    pub sm_watchdog_ms: u32,
    /// Offer a CoE mailbox (SDO, PDO assignment and configuration). Without it the drive has
    /// no mailbox at all: its process data is the fixed mapping `rx_pdo` / `tx_pdo` declared in
    /// its SII, and 0x6060 can only be set through process data.
    pub coe: bool,
    /// RxPDO 0x1600 at power-up (and the fixed mapping without CoE), CiA 301 entries
    /// `index << 16 | sub << 8 | bits`, e.g. `0x60400010` (controlword). At most 8.
    pub rx_pdo: Vec<u32>,
    /// TxPDO 0x1A00 at power-up (and the fixed mapping without CoE). At most 8.
    pub tx_pdo: Vec<u32>,
    /// Take SDO writes to the PDO mapping and assignment (0x1600/0x1A00, 0x1C12/0x1C13).
    /// `false`: such writes are acknowledged but change nothing, and the drive keeps running
    /// `rx_pdo` / `tx_pdo`: a drive whose mapping is really taken from its stored parameters
    /// at power-up (a conformant fixed mapping aborts with 0x06010002 instead, which a
    /// master sees at once; this one only a read-back finds).
    pub pdo_writable: bool,
    /// Initial value of 0x60FD digital inputs (e.g. `0x10000`: an enable switch wired
    /// to bit 16, held); [`crate::SimNetwork::set_digital_inputs`] changes it.
    pub digital_inputs: u32,
}

impl Default for DriveParams {
    fn default() -> Self {
        DriveParams {
            vendor_id: 0x0000_0CE5,
            product_code: 0x0402_0001,
            revision: 0x0001_0000,
            serial_base: 1000,
            counts_per_rev: 1 << 20,
            bandwidth_hz: 40.0,
            max_velocity_counts_s: 20.0 * (1 << 20) as f64,
            max_accel_counts_s2: 2000.0 * (1 << 20) as f64,
            following_error_window: 100_000,
            following_error_timeout_ms: 10,
            quick_stop_decel_counts_s2: 200 * (1 << 20),
            quick_stop_option: 2,
            initial_position_counts: 10_000,
            sm_watchdog_ms: 100,
            coe: true,
            rx_pdo: crate::pdo::DEFAULT_RX.iter().collect(),
            tx_pdo: crate::pdo::DEFAULT_TX.iter().collect(),
            pdo_writable: true,
            digital_inputs: 0,
        }
    }
}

/// Frame-level faults, each a probability per frame in 0..=1.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FrameFaults {
    /// Fraction of frames lost (half on the way out, before any drive saw them; half on the way
    /// back, after the drives processed them).
    pub drop: f64,
    /// Fraction of frames whose reply is held back by `delay_us`.
    pub delay: f64,
    /// Reply delay in microseconds for delayed frames.
    pub delay_us: u64,
    /// Fraction of frames corrupted on a random link: drives behind the bad link count a CRC
    /// error (0x0300 invalid frame counter) and do not process it; the master gets no reply.
    pub corrupt: f64,
    /// Fraction of process-data frames whose reply comes back malformed: the first PDU's
    /// length field says more data than the frame holds (a master that parses the reply
    /// must refuse it; the drives did process the frame). Drawn only when above 0, so
    /// seeded runs without it see the same faults as before it existed.
    pub garble: f64,
    /// Apply frame faults from the first frame instead of from the first OP.
    pub from_start: bool,
    /// Seconds after the first OP when frame faults begin (ignored with `from_start`); lets a
    /// master finish its transition to OP before frames go missing.
    pub start_s: f64,
}

/// Put a drive into CiA 402 fault at a given time.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DriveFault {
    /// Drive position in the chain (0-based).
    pub drive: usize,
    /// Seconds after the first OP.
    pub at_s: f64,
    /// Error code for 0x603F (default 0x2310, continuous over-current).
    #[serde(default = "default_fault_code")]
    pub code: u16,
}

fn default_fault_code() -> u16 {
    0x2310
}

/// Refuse an AL state transition with an AL status code.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RefuseTransition {
    /// Drive position in the chain (0-based).
    pub drive: usize,
    /// The state whose request is refused.
    pub to: TargetState,
    /// AL status code written to 0x0134 (default 0x0011, invalid requested state change).
    #[serde(default = "default_refuse_code")]
    pub code: u16,
    /// How many requests are refused before the drive accepts (default: all).
    pub count: Option<u32>,
}

fn default_refuse_code() -> u16 {
    0x0011
}

/// Cut the cable in front of a drive: it and every drive behind it disappear.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkCut {
    /// First unreachable drive (0-based); 0 cuts the master's own link.
    pub before_drive: usize,
    /// Seconds after the first OP.
    pub at_s: f64,
    /// Seconds after the first OP when the cable is plugged back in (default: never).
    pub restore_s: Option<f64>,
}

/// Power a drive off and on again: see [`crate::SimNetwork::power_cycle`] for what the chain
/// and the drive do.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PowerCycle {
    /// Drive position in the chain (0-based).
    pub drive: usize,
    /// Seconds after the first OP when power goes.
    pub at_s: f64,
    /// How long it stays off, in ms of simulated time (the ESC's boot included: when it is
    /// over, the drive answers at once).
    pub off_ms: u64,
}

/// Complete simulator configuration.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Seed of the fault-injection random generator.
    pub seed: u64,
    /// Number of drives in the chain (the CLI's `--drives` overrides it).
    pub drives: usize,
    /// Time source.
    pub clock: ClockMode,
    /// Cycle length in microseconds for the virtual clock.
    pub cycle_us: u64,
    /// Drive parameters.
    pub drive: DriveParams,
    /// Frame faults.
    pub frames: FrameFaults,
    /// Timed drive faults.
    pub drive_fault: Vec<DriveFault>,
    /// Refused state transitions.
    pub refuse_transition: Vec<RefuseTransition>,
    /// Cable cuts.
    pub link_cut: Vec<LinkCut>,
    /// The drives' clocks run this many parts per million fast (negative: slow) against
    /// the host's, as real crystals do (up to about +-100 ppm): a master that does not
    /// lock its cycle to SYNC0 slides across it.
    pub dc_drift_ppm: f64,
    /// Timed power cycles.
    pub power_cycle: Vec<PowerCycle>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            drives: 7,
            clock: ClockMode::Wall,
            cycle_us: 1000,
            drive: DriveParams::default(),
            frames: FrameFaults::default(),
            drive_fault: Vec::new(),
            refuse_transition: Vec::new(),
            link_cut: Vec::new(),
            dc_drift_ppm: 0.0,
            power_cycle: Vec::new(),
        }
    }
}

impl SimConfig {
    /// A fault-free chain of `drives` drives on the virtual clock (for in-process tests).
    pub fn virtual_chain(drives: usize) -> Self {
        SimConfig {
            drives,
            clock: ClockMode::Virtual,
            ..SimConfig::default()
        }
    }

    /// Parse TOML text; `origin` names the source in error messages.
    pub fn from_toml_str(text: &str, origin: &Path) -> Result<Self, EcsimError> {
        let cfg: SimConfig = toml::from_str(text).map_err(|e| EcsimError::ConfigParse {
            path: origin.to_path_buf(),
            message: e.to_string(),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Read and validate a TOML file.
    pub fn load(path: &Path) -> Result<Self, EcsimError> {
        // With a bound: a FIFO, a device or a huge file is refused, never read forever.
        let read = chunkrt_files::read_text_bounded(
            path,
            chunkrt_files::TOML_LIMIT_BYTES,
            "ecsim configuration",
        );
        let text = match read {
            Ok(Ok(text)) => text,
            Ok(Err(_)) => {
                return Err(EcsimError::ConfigRead {
                    path: PathBuf::from(path),
                    message: "not UTF-8 text (a TOML file was expected)".into(),
                })
            }
            Err(e) => {
                return Err(EcsimError::ConfigRead {
                    path: PathBuf::from(path),
                    message: e.to_string(),
                })
            }
        };
        Self::from_toml_str(&text, path)
    }

    /// Check ranges and cross-references; every message names the offending key.
    pub fn validate(&self) -> Result<(), EcsimError> {
        if self.drives == 0 || self.drives > crate::MAX_DRIVES {
            return Err(EcsimError::DriveCount(self.drives));
        }
        if self.cycle_us == 0 || self.cycle_us > 1_000_000 {
            return bad(format!(
                "cycle_us = {} must be in 1..=1000000",
                self.cycle_us
            ));
        }
        self.frames.validate()?;
        self.drive.validate()?;
        self.validate_faults()?;
        if !(self.dc_drift_ppm.is_finite() && self.dc_drift_ppm.abs() <= 1000.0) {
            return bad(format!(
                "dc_drift_ppm = {} must be within +-1000 (crystals are off by up to about 100)",
                self.dc_drift_ppm
            ));
        }
        self.validate_power_cycles()
    }

    /// The injected drive faults, refused transitions and link cuts: each names a drive
    /// (or a link) of this bus and a time.
    fn validate_faults(&self) -> Result<(), EcsimError> {
        let n = self.drives;
        for (i, f) in self.drive_fault.iter().enumerate() {
            if f.drive >= n {
                return bad(format!(
                    "drive_fault[{i}].drive = {} but only {n} drives",
                    f.drive
                ));
            }
            if !(f.at_s.is_finite() && f.at_s >= 0.0) {
                return bad(format!("drive_fault[{i}].at_s = {} must be >= 0", f.at_s));
            }
            if f.code == 0 {
                return bad(format!(
                    "drive_fault[{i}].code must not be 0 (0 means no error)"
                ));
            }
        }
        for (i, r) in self.refuse_transition.iter().enumerate() {
            if r.drive >= n {
                return bad(format!(
                    "refuse_transition[{i}].drive = {} but only {n} drives",
                    r.drive
                ));
            }
            if r.code == 0 {
                return bad(format!("refuse_transition[{i}].code must not be 0"));
            }
        }
        for (i, c) in self.link_cut.iter().enumerate() {
            if c.before_drive >= n {
                return bad(format!(
                    "link_cut[{i}].before_drive = {} but only {n} drives",
                    c.before_drive
                ));
            }
            if !(c.at_s.is_finite() && c.at_s >= 0.0) {
                return bad(format!("link_cut[{i}].at_s = {} must be >= 0", c.at_s));
            }
            if let Some(r) = c.restore_s {
                if !(r.is_finite() && r > c.at_s) {
                    return bad(format!("link_cut[{i}].restore_s = {r} must be > at_s"));
                }
            }
        }
        Ok(())
    }

    /// The power cycles: each names a drive of this bus, a time and how long it is off.
    fn validate_power_cycles(&self) -> Result<(), EcsimError> {
        let n = self.drives;
        for (i, c) in self.power_cycle.iter().enumerate() {
            if c.drive >= n {
                return bad(format!(
                    "power_cycle[{i}].drive = {} but only {n} drives",
                    c.drive
                ));
            }
            if !(c.at_s.is_finite() && c.at_s >= 0.0) {
                return bad(format!("power_cycle[{i}].at_s = {} must be >= 0", c.at_s));
            }
            if c.off_ms == 0 {
                return bad(format!(
                    "power_cycle[{i}].off_ms must be > 0 (the drive must be off for a while)"
                ));
            }
        }
        Ok(())
    }
}

impl FrameFaults {
    /// The start time and the fractions of frames dropped, delayed, corrupted, garbled.
    fn validate(&self) -> Result<(), EcsimError> {
        if !(self.start_s.is_finite() && self.start_s >= 0.0) {
            return bad(format!("frames.start_s = {} must be >= 0", self.start_s));
        }
        for (name, p) in [
            ("frames.drop", self.drop),
            ("frames.delay", self.delay),
            ("frames.corrupt", self.corrupt),
            ("frames.garble", self.garble),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("{name} = {p} must be a fraction in 0..=1"));
            }
        }
        Ok(())
    }
}

impl DriveParams {
    /// The drive model's rates and limits, its PDO mapping and its quick-stop option.
    fn validate(&self) -> Result<(), EcsimError> {
        for (name, v) in [
            ("drive.bandwidth_hz", self.bandwidth_hz),
            ("drive.max_velocity_counts_s", self.max_velocity_counts_s),
            ("drive.max_accel_counts_s2", self.max_accel_counts_s2),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return bad(format!("{name} = {v} must be finite and > 0"));
            }
        }
        if self.bandwidth_hz > 500.0 {
            return bad(format!(
                "drive.bandwidth_hz = {} is above the model's 500 Hz limit",
                self.bandwidth_hz
            ));
        }
        for (name, list, rx) in [
            ("drive.rx_pdo", &self.rx_pdo, true),
            ("drive.tx_pdo", &self.tx_pdo, false),
        ] {
            if list.len() > crate::pdo::MAX_ENTRIES {
                return bad(format!("{name} has {} entries, at most 8", list.len()));
            }
            if let Some(e) = list.iter().find(|e| !crate::catalogue::mappable(**e, rx)) {
                return bad(format!(
                    "{name}: {e:#010x} is not a {} object of this drive (index << 16 | sub << 8 | bits), \
                     nor padding (0x000000NN: index 0, NN bits)",
                    if rx { "host-to-drive (RxPDO)" } else { "drive-to-host (TxPDO)" }
                ));
            }
            if let Some(e) = crate::pdo::PdoMap::from_entries(list).misaligned() {
                return bad(format!(
                    "{name}: {e:#010x} does not start on a byte boundary (the padding before \
                     it is not a whole number of bytes); this drive packs objects on bytes"
                ));
            }
        }
        if ![1, 2, 5, 6].contains(&self.quick_stop_option) {
            return bad(format!(
                "drive.quick_stop_option = {} (supported: 1, 2, 5, 6)",
                self.quick_stop_option
            ));
        }
        Ok(())
    }
}

/// A `ConfigValue` error with the message naming the offending key.
fn bad(m: String) -> Result<(), EcsimError> {
    Err(EcsimError::ConfigValue(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_config_parses() {
        let text = r#"
            seed = 7
            drives = 3
            clock = "virtual"
            [drive]
            bandwidth_hz = 30.0
            [frames]
            drop = 0.01
            [[drive_fault]]
            drive = 1
            at_s = 0.5
            code = 0x5530
            [[refuse_transition]]
            drive = 2
            to = "safe-op"
            code = 0x001d
            count = 1
            [[link_cut]]
            before_drive = 2
            at_s = 1.0
            [[power_cycle]]
            drive = 1
            at_s = 5.0
            off_ms = 500
        "#;
        let c = SimConfig::from_toml_str(text, Path::new("t.toml")).unwrap();
        assert_eq!(c.drives, 3);
        assert_eq!(c.drive_fault[0].code, 0x5530);
        assert_eq!(c.refuse_transition[0].to, TargetState::SafeOp);
        assert_eq!(c.link_cut[0].restore_s, None);
        assert_eq!(
            c.power_cycle,
            [PowerCycle {
                drive: 1,
                at_s: 5.0,
                off_ms: 500
            }]
        );
    }

    #[test]
    fn power_cycle_errors_name_the_key() {
        let parse = |t: &str| {
            SimConfig::from_toml_str(t, Path::new("p.toml"))
                .unwrap_err()
                .to_string()
        };
        let e =
            parse("drives = 2\n[[power_cycle]]\ndrive = 1\nat_s = 1.0\noff_ms = 5\nof_ms = 1\n");
        assert!(e.contains("p.toml") && e.contains("of_ms"), "{e}");
        let e = parse("drives = 2\n[[power_cycle]]\ndrive = 1\nat_s = 1.0\n");
        assert!(e.contains("off_ms"), "{e}");
        let e = parse("drives = 2\n[[power_cycle]]\ndrive = 2\nat_s = 1.0\noff_ms = 5\n");
        assert!(e.contains("power_cycle[0].drive = 2"), "{e}");
        let e = parse("drives = 2\n[[power_cycle]]\ndrive = 0\nat_s = -1.0\noff_ms = 5\n");
        assert!(e.contains("power_cycle[0].at_s"), "{e}");
        let e = parse("drives = 2\n[[power_cycle]]\ndrive = 0\nat_s = 1.0\noff_ms = 0\n");
        assert!(e.contains("power_cycle[0].off_ms"), "{e}");
    }

    #[test]
    fn unknown_key_is_named() {
        let err = SimConfig::from_toml_str("[frames]\ndrops = 0.1\n", Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("x.toml") && err.contains("drops"), "{err}");
    }

    #[test]
    fn out_of_range_drive_is_named() {
        let err = SimConfig::from_toml_str(
            "drives = 2\n[[drive_fault]]\ndrive = 5\nat_s = 1.0\n",
            Path::new("x.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("drive_fault[0].drive = 5"), "{err}");
        let err = SimConfig::from_toml_str("[frames]\ndrop = 1.5\n", Path::new("x.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("frames.drop"), "{err}");
    }
}

#[cfg(test)]
mod example_files {
    use super::*;

    #[test]
    fn shipped_examples_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rt-config");
        let nominal = SimConfig::load(&dir.join("ecsim-nominal.toml")).unwrap();
        assert_eq!(nominal, SimConfig::default());
        let faults = SimConfig::load(&dir.join("ecsim-faults.toml")).unwrap();
        assert_eq!(faults.link_cut[0].restore_s, Some(25.0));
        let lossy = SimConfig::load(&dir.join("ecsim-lossy.toml")).unwrap();
        assert_eq!((lossy.frames.drop, lossy.frames.delay_us), (0.01, 3000));
        let fixed = SimConfig::load(&dir.join("ecsim-no-coe.toml")).unwrap();
        assert!(!fixed.drive.coe);
        assert_eq!(fixed.drive.rx_pdo, [0x6040_0010, 0x607A_0020, 0x6060_0008]);
        let cycled = SimConfig::load(&dir.join("ecsim-power-cycle.toml")).unwrap();
        assert_eq!(
            cycled.power_cycle,
            [PowerCycle {
                drive: 3,
                at_s: 5.0,
                off_ms: 500
            }]
        );
    }

    #[test]
    fn a_fixed_mapping_entry_in_the_wrong_direction_is_named() {
        let mut cfg = SimConfig::default();
        cfg.drive.rx_pdo.push(0x6041_0010);
        let e = cfg.validate().unwrap_err().to_string();
        assert!(
            e.contains("drive.rx_pdo") && e.contains("0x60410010"),
            "{e}"
        );
    }
}

#[cfg(test)]
mod bounded_read_tests {
    use super::*;

    /// `chunkrt ecsim --config /dev/zero` (or a directory) is refused at once, naming the
    /// file and what it is, never read without end.
    #[test]
    fn a_config_that_is_no_regular_file_is_refused_without_reading_it() {
        for (path, what) in [("/dev/zero", "device"), ("/tmp", "directory")] {
            let e = SimConfig::load(Path::new(path)).unwrap_err().to_string();
            assert!(e.contains(path) && e.contains(what), "{path}: {e}");
        }
    }
}

/// The JSON Schema (2020-12) of an ecsim configuration file (`rt-config/ecsim-*.toml`,
/// as JSON): its keys and their types, no unknown key
/// (docs/reference/ecsim.schema.json, by `chunkrt reference schema ecsim`).
pub fn schema() -> serde_json::Value {
    schemars::schema_for!(SimConfig).to_value()
}
