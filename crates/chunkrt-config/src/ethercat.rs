//! The `[ethercat]` section: the interface, the drives in bus order and how each maps
//! onto a joint, the PDO mapping and the bus timeouts.

use serde::{Deserialize, Serialize};

/// EtherCAT bus of CiA 402 drives in Cyclic Synchronous Position mode.
///
/// The bus period is `control.period_ms`: one process-data exchange per control cycle.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EthercatConfig {
    /// Network interface the drives hang off (`enp3s0`); a raw socket needs CAP_NET_RAW.
    pub interface: String,
    /// Configure Distributed Clocks SYNC0 at the bus period (most CSP drives want it).
    #[serde(default)]
    pub dc_sync0: bool,
    /// With `dc_sync0`: where in the SYNC0 period the cycle's frame is to reach the
    /// reference drive, in µs after SYNC0; the control loop's deadlines are phase-locked
    /// to it. Outputs written by the frame are applied at the next SYNC0 and inputs were
    /// latched at the last, so the default, half the bus period, leaves the most margin
    /// for jitter on either side.
    #[serde(default)]
    pub sync0_shift_us: Option<f64>,
    /// A cycle's frame not back after this long is lost (default: half the bus period,
    /// at most 2 ms).
    #[serde(default)]
    pub frame_timeout_ms: Option<f64>,
    /// A cycle's frame back after this long (and within the timeout) is late: its data is
    /// used and it is counted (`bus_frames_late`), but it is not a lost frame: its command
    /// reached the drives in its cycle (default: half the frame timeout).
    #[serde(default)]
    pub frame_late_ms: Option<f64>,
    /// Lost frames in a row that are ridden through (the drives hold the last
    /// command, the control loop gets the last feedback marked as held); the next one is
    /// reported and takes the policy's authority away. Default: the frames in 10 ms (at
    /// least 1), a tenth of a drive's typical 100 ms SM watchdog, so a ride-through ends
    /// long before a drive would give up on its own, and the command's jump when frames
    /// resume is at most 10 ms of motion.
    #[serde(default)]
    pub max_consecutive_lost: Option<u32>,
    /// Lowest share of answered frames (back within the frame timeout) over the last
    /// `success_window` frames; below it every lost frame is reported (default 0.9: one
    /// frame in ten).
    #[serde(default = "default_min_success_rate")]
    pub min_success_rate: f64,
    /// Frames the success rate is measured over (default 100: 100 ms at a 1 ms bus, the
    /// drives' typical watchdog; at most 1024).
    #[serde(default = "default_success_window")]
    pub success_window: u32,
    /// Longest wait for one AL state transition (INIT, PRE-OP, SAFE-OP, OP).
    #[serde(default = "default_state_timeout")]
    pub state_timeout_ms: f64,
    /// Longest wait for the CiA 402 enable sequence at bring-up.
    #[serde(default = "default_enable_timeout")]
    pub enable_timeout_ms: f64,
    /// Longest wait for one SDO (CoE mailbox) answer.
    #[serde(default = "default_sdo_timeout")]
    pub sdo_timeout_ms: f64,
    /// After a (re-)enable, a command further than this from the held position is refused
    /// instead of sent: nothing jumps on resume.
    #[serde(default = "default_resume_window")]
    pub resume_window_rad: f64,
    /// How long a drive may stay further than its following error window (0x6065) from its
    /// target before it faults itself (0x6066, whole ms, rounded up). Written to every
    /// drive with CoE, together with the window, when `limits.max_following_error_rad` is
    /// set. Default: 5 bus periods (at least 1 ms): the host's own check sees the same
    /// excess on the next cycle and its fallback acts on the command after that, so the
    /// drive's stop is the second line, not a race with the first, and still within a few
    /// cycles when the host cannot help (a blocked joint).
    #[serde(default)]
    pub following_error_timeout_ms: Option<f64>,
    /// Longest time a drive that left OP or the bus may take to come back to OP while the
    /// others keep running (the backend brings it back one register access per cycle);
    /// after it, or at once when the drive that answers is another one or cannot take
    /// the mapping, the drive is lost and the run ends with a controlled stop. Default
    /// 10 s: an ESC boots and its PHY brings the link up 0.1 to 2 s after power returns,
    /// then PRE-OP, the SDOs and SAFE-OP -> OP take up to a few hundred ms more on real
    /// drives; 10 s covers a slow drive several times over and still ends a run whose
    /// drive will not return before anyone would wait for it.
    #[serde(default = "default_rejoin_timeout")]
    pub rejoin_timeout_ms: f64,
    /// The process-data mapping written to every drive in PRE-OP.
    #[serde(default)]
    pub pdo: PdoConfig,
    /// An enable (deadman) switch read from a drive's digital inputs: the policy has
    /// authority only while it is held (`[ethercat.enable_input]`).
    #[serde(default)]
    pub enable_input: Option<EnableInputConfig>,
    /// The drives in bus order (the first one is the closest to the host).
    pub drive: Vec<DriveConfig>,
}

/// `[ethercat.enable_input]`: a bit of the digital inputs (0x60FD, mapped in `pdo.tx`)
/// of the drive that moves `joint`; 1 while the switch is held.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnableInputConfig {
    /// The joint whose drive has the switch wired to its inputs.
    pub joint: usize,
    /// The bit (0-31; CiA 402 leaves 16-31 to the manufacturer).
    pub bit: u8,
}

/// One drive on the bus.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DriveConfig {
    /// The joint this drive moves (0-based; every joint exactly once).
    pub joint: usize,
    /// Encoder counts per radian of joint motion (gear ratio included).
    pub counts_per_rad: f64,
    /// Encoder count at joint angle 0.
    #[serde(default)]
    pub offset_counts: i64,
    /// `1` or `-1`: sign of joint angle per count.
    #[serde(default = "one_i8")]
    pub direction: i8,
    /// Expected vendor ID (SII / 0x1018:01); checked at bring-up.
    pub vendor_id: u32,
    /// Expected product code (SII / 0x1018:02); checked at bring-up.
    pub product_code: u32,
    /// Rated torque (0x6076) in Nm at the joint: 0x6077 is per mille of it.
    #[serde(default = "one_f64")]
    pub rated_torque_nm: f64,
}

/// Which objects go into the process data, in order.
#[derive(Clone, Debug, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PdoConfig {
    /// Write the mapping over CoE in PRE-OP (drives without CoE keep their SII mapping,
    /// which must then match `rx` and `tx`).
    #[serde(default = "yes")]
    pub write: bool,
    /// RxPDO 0x1600 (host to drive).
    #[serde(default = "default_rx")]
    pub rx: Vec<PdoEntry>,
    /// TxPDO 0x1A00 (drive to host).
    #[serde(default = "default_tx")]
    pub tx: Vec<PdoEntry>,
}

impl Default for PdoConfig {
    fn default() -> Self {
        PdoConfig {
            write: true,
            rx: default_rx(),
            tx: default_tx(),
        }
    }
}

/// A CiA 402 object the backend knows how to put into process data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PdoEntry {
    /// 0x6040 controlword (rx).
    Controlword,
    /// 0x607A target position (rx).
    TargetPosition,
    /// 0x60B1 velocity offset: velocity feed-forward in CSP (rx).
    VelocityOffset,
    /// 0x6060 modes of operation (rx).
    ModeOfOperation,
    /// 0x6041 statusword (tx).
    Statusword,
    /// 0x6064 position actual value (tx).
    PositionActual,
    /// 0x606C velocity actual value (tx).
    VelocityActual,
    /// 0x6077 torque actual value (tx).
    TorqueActual,
    /// 0x603F error code (tx).
    ErrorCode,
    /// 0x6061 modes of operation display (tx).
    ModeDisplay,
    /// 0x60FD digital inputs (tx): limit switches, home, and manufacturer bits 16-31
    /// (an enable/deadman switch or a stop button wired to the drive).
    DigitalInputs,
}

impl PdoEntry {
    /// Every entry, in declaration order.
    pub const ALL: [PdoEntry; 11] = [
        PdoEntry::Controlword,
        PdoEntry::TargetPosition,
        PdoEntry::VelocityOffset,
        PdoEntry::ModeOfOperation,
        PdoEntry::Statusword,
        PdoEntry::PositionActual,
        PdoEntry::VelocityActual,
        PdoEntry::TorqueActual,
        PdoEntry::ErrorCode,
        PdoEntry::ModeDisplay,
        PdoEntry::DigitalInputs,
    ];

    /// The entry a drive's mapping word names (`index`, subindex `sub`, `bits` long),
    /// if the backend knows it.
    pub fn from_object(index: u16, sub: u8, bits: u8) -> Option<PdoEntry> {
        PdoEntry::ALL
            .into_iter()
            .find(|e| e.index() == index && sub == 0 && e.bits() == bits)
    }

    /// Object index.
    pub fn index(self) -> u16 {
        match self {
            PdoEntry::Controlword => 0x6040,
            PdoEntry::TargetPosition => 0x607A,
            PdoEntry::VelocityOffset => 0x60B1,
            PdoEntry::ModeOfOperation => 0x6060,
            PdoEntry::Statusword => 0x6041,
            PdoEntry::PositionActual => 0x6064,
            PdoEntry::VelocityActual => 0x606C,
            PdoEntry::TorqueActual => 0x6077,
            PdoEntry::ErrorCode => 0x603F,
            PdoEntry::ModeDisplay => 0x6061,
            PdoEntry::DigitalInputs => 0x60FD,
        }
    }

    /// Size in bits.
    pub fn bits(self) -> u8 {
        match self {
            PdoEntry::ModeOfOperation | PdoEntry::ModeDisplay => 8,
            PdoEntry::Controlword
            | PdoEntry::Statusword
            | PdoEntry::TorqueActual
            | PdoEntry::ErrorCode => 16,
            _ => 32,
        }
    }

    /// Whether the host writes it (RxPDO) rather than reads it (TxPDO).
    pub fn is_output(self) -> bool {
        matches!(
            self,
            PdoEntry::Controlword
                | PdoEntry::TargetPosition
                | PdoEntry::VelocityOffset
                | PdoEntry::ModeOfOperation
        )
    }

    /// The mapping entry as written to 0x1600/0x1A00: index << 16 | subindex 0 << 8 | bits.
    pub fn mapping_word(self) -> u32 {
        (u32::from(self.index()) << 16) | u32::from(self.bits())
    }
}

type Check = Result<(), (String, String)>;

fn fail(path: String, message: impl Into<String>) -> Check {
    Err((path, message.into()))
}

fn positive_ms(path: &str, v: f64, hi: f64) -> Check {
    if v.is_finite() && v > 0.0 && v <= hi {
        Ok(())
    } else {
        fail(
            path.to_string(),
            format!("expected a time in (0, {hi}] ms, got {v}"),
        )
    }
}

impl EthercatConfig {
    /// `[ethercat.enable_input]`: a joint of the arm, a bit of 32, 0x60FD mapped.
    fn check_enable_input(&self, joints: usize) -> Check {
        let Some(e) = &self.enable_input else {
            return Ok(());
        };
        if e.joint >= joints {
            return fail(
                "ethercat.enable_input.joint".into(),
                format!(
                    "expected a joint 0 to {}, got {}",
                    joints.saturating_sub(1),
                    e.joint
                ),
            );
        }
        if e.bit > 31 {
            return fail(
                "ethercat.enable_input.bit".into(),
                format!("expected a bit 0 to 31 of 0x60FD, got {}", e.bit),
            );
        }
        if !self.pdo.tx.contains(&PdoEntry::DigitalInputs) {
            return fail(
                "ethercat.enable_input".into(),
                "the switch is read from the drive's digital inputs: ethercat.pdo.tx must map \
                 digital_inputs (0x60FD)",
            );
        }
        Ok(())
    }

    /// Checks the section against the joint count, the bus period and the joint limits
    /// (every joint angle within the limits must fit the drive's int32 position range).
    pub(crate) fn validate(
        &self,
        joints: usize,
        period_ms: f64,
        limit_rad: impl Fn(usize) -> f64,
    ) -> Check {
        self.check_enable_input(joints)?;
        self.check_bus(period_ms)?;
        self.check_timeouts(period_ms)?;
        self.pdo.validate()?;
        self.check_drives(joints, limit_rad)
    }

    /// The interface's name and the bus's timing: SYNC0 shift, frame timeout and
    /// lateness, lost frames and the success rate over its window.
    fn check_bus(&self, period_ms: f64) -> Check {
        let iface = self.interface.trim();
        if iface.is_empty() || iface.len() > 15 || iface.contains(['/', ' ']) {
            return fail(
                "ethercat.interface".into(),
                format!(
                    "expected a network interface name (1-15 characters, e.g. `enp3s0`), got `{}`",
                    self.interface
                ),
            );
        }
        let shift_us = self.sync0_shift_us(period_ms);
        if !(shift_us.is_finite() && (0.0..period_ms * 1000.0).contains(&shift_us)) {
            return fail(
                "ethercat.sync0_shift_us".into(),
                format!(
                    "expected 0 up to the bus period ({} us, control.period_ms), got {shift_us}",
                    period_ms * 1000.0
                ),
            );
        }
        let timeout = self.frame_timeout_ms(period_ms);
        positive_ms("ethercat.frame_timeout_ms", timeout, period_ms).map_err(|(p, m)| {
            (
                p,
                format!("{m} (at most the bus period, control.period_ms)"),
            )
        })?;
        positive_ms(
            "ethercat.frame_late_ms",
            self.frame_late_ms(period_ms),
            timeout,
        )
        .map_err(|(p, m)| (p, format!("{m} (at most the frame timeout)")))?;
        if self.max_consecutive_lost.is_some_and(|n| n > 1000) {
            return fail(
                "ethercat.max_consecutive_lost".into(),
                format!(
                    "expected 0 to 1000 frames, got {}",
                    self.max_consecutive_lost.unwrap_or_default()
                ),
            );
        }
        if !(0.0..=1.0).contains(&self.min_success_rate) {
            return fail(
                "ethercat.min_success_rate".into(),
                format!(
                    "expected a share of answered frames in 0..=1 (0.9: 90 %), got {}",
                    self.min_success_rate
                ),
            );
        }
        if !(1..=1024).contains(&self.success_window) {
            return fail(
                "ethercat.success_window".into(),
                format!("expected 1 to 1024 frames, got {}", self.success_window),
            );
        }
        Ok(())
    }

    /// The state machine's, enable's, SDO's, rejoin's and following error's timeouts,
    /// and the resume window.
    fn check_timeouts(&self, period_ms: f64) -> Check {
        positive_ms(
            "ethercat.state_timeout_ms",
            self.state_timeout_ms,
            600_000.0,
        )?;
        positive_ms(
            "ethercat.enable_timeout_ms",
            self.enable_timeout_ms,
            600_000.0,
        )?;
        positive_ms("ethercat.sdo_timeout_ms", self.sdo_timeout_ms, 600_000.0)?;
        positive_ms(
            "ethercat.rejoin_timeout_ms",
            self.rejoin_timeout_ms,
            600_000.0,
        )
        .map_err(|(p, m)| {
            (
                p,
                format!(
                    "{m} (how long a drive that left OP may take to come back; 10000 if \
                     unsure)"
                ),
            )
        })?;
        positive_ms(
            "ethercat.following_error_timeout_ms",
            self.following_error_timeout_ms(period_ms),
            f64::from(u16::MAX),
        )
        .map_err(|(p, m)| (p, format!("{m} (0x6066 is a 16-bit count of ms)")))?;
        if !(self.resume_window_rad.is_finite() && self.resume_window_rad > 0.0) {
            return fail(
                "ethercat.resume_window_rad".into(),
                format!("expected a positive angle, got {}", self.resume_window_rad),
            );
        }
        Ok(())
    }

    /// One `[[ethercat.drive]]` per joint, each joint driven once, each drive's own
    /// settings in range.
    fn check_drives(&self, joints: usize, limit_rad: impl Fn(usize) -> f64) -> Check {
        if self.drive.len() != joints {
            return fail(
                "ethercat.drive".into(),
                format!(
                    "expected one [[ethercat.drive]] per joint ({joints}, control.joints), got {}",
                    self.drive.len()
                ),
            );
        }
        let mut seen = vec![None::<usize>; joints];
        for (i, d) in self.drive.iter().enumerate() {
            let key = |k: &str| format!("ethercat.drive[{i}].{k}");
            if d.joint >= joints {
                return fail(
                    key("joint"),
                    format!(
                        "expected a joint index 0 to {}, got {}",
                        joints - 1,
                        d.joint
                    ),
                );
            }
            if let Some(other) = seen[d.joint] {
                return fail(
                    key("joint"),
                    format!(
                        "joint {} is already driven by ethercat.drive[{other}]",
                        d.joint
                    ),
                );
            }
            seen[d.joint] = Some(i);
            d.check(i, limit_rad(d.joint))?;
        }
        Ok(())
    }

    /// The frame timeout in ms (the default applied).
    pub fn frame_timeout_ms(&self, period_ms: f64) -> f64 {
        self.frame_timeout_ms
            .unwrap_or_else(|| (0.5 * period_ms).min(2.0))
    }

    /// Lost frames in a row ridden through (the default applied: the frames in
    /// 10 ms, at least 1).
    pub fn max_consecutive_lost(&self, period_ms: f64) -> u32 {
        self.max_consecutive_lost
            .unwrap_or_else(|| ((10.0 / period_ms).floor() as u32).max(1))
    }

    /// The SYNC0 shift in µs (the default applied: half the bus period).
    pub fn sync0_shift_us(&self, period_ms: f64) -> f64 {
        self.sync0_shift_us.unwrap_or(period_ms * 500.0)
    }

    /// The drives' following error time out (0x6066) in whole ms (the default applied: 5
    /// bus periods, rounded up, at least 1 ms).
    pub fn following_error_timeout_ms(&self, period_ms: f64) -> f64 {
        self.following_error_timeout_ms
            .unwrap_or(5.0 * period_ms)
            .ceil()
            .max(1.0)
    }

    /// The late-frame threshold in ms (the default applied).
    pub fn frame_late_ms(&self, period_ms: f64) -> f64 {
        self.frame_late_ms
            .unwrap_or_else(|| 0.5 * self.frame_timeout_ms(period_ms))
    }
}

impl DriveConfig {
    /// The drive `ethercat.drive[i]`'s scaling, offset, direction and rating, and its
    /// joint's limit (`limit_rad` from the offset) within the int32 position range.
    fn check(&self, i: usize, limit_rad: f64) -> Check {
        let key = |k: &str| format!("ethercat.drive[{i}].{k}");
        if !(self.counts_per_rad.is_finite() && self.counts_per_rad >= 1.0) {
            return fail(
                key("counts_per_rad"),
                format!(
                    "expected at least 1 count per radian, got {}",
                    self.counts_per_rad
                ),
            );
        }
        if self.offset_counts < i64::from(i32::MIN) || self.offset_counts > i64::from(i32::MAX) {
            return fail(
                key("offset_counts"),
                format!("expected an int32 count, got {}", self.offset_counts),
            );
        }
        if self.direction != 1 && self.direction != -1 {
            return fail(
                key("direction"),
                format!("expected 1 or -1, got {}", self.direction),
            );
        }
        if !(self.rated_torque_nm.is_finite() && self.rated_torque_nm > 0.0) {
            return fail(
                key("rated_torque_nm"),
                format!("expected a positive torque, got {}", self.rated_torque_nm),
            );
        }
        // Positions travel as int32 counts relative to the offset (wrapping), so the
        // whole joint range must span less than half the int32 circle.
        let span = limit_rad * self.counts_per_rad;
        if span >= f64::from(i32::MAX) {
            return fail(
                key("counts_per_rad"),
                format!(
                    "joint {}: a limit of {} rad is {span:.0} counts from the offset, \
                     beyond the int32 position range (2147483647)",
                    self.joint, limit_rad
                ),
            );
        }
        Ok(())
    }
}

impl PdoConfig {
    fn validate(&self) -> Check {
        for (list, name, want_output) in [(&self.rx, "rx", true), (&self.tx, "tx", false)] {
            for (k, e) in list.iter().enumerate() {
                if e.is_output() != want_output {
                    return fail(
                        format!("ethercat.pdo.{name}[{k}]"),
                        format!(
                            "`{}` is a {} object; it belongs in ethercat.pdo.{}",
                            entry_name(*e),
                            if e.is_output() {
                                "host-to-drive"
                            } else {
                                "drive-to-host"
                            },
                            if e.is_output() { "rx" } else { "tx" }
                        ),
                    );
                }
                if list[..k].contains(e) {
                    return fail(
                        format!("ethercat.pdo.{name}[{k}]"),
                        format!("`{}` is listed twice", entry_name(*e)),
                    );
                }
            }
            if list.len() > 8 {
                return fail(
                    format!("ethercat.pdo.{name}"),
                    format!("expected at most 8 entries, got {}", list.len()),
                );
            }
        }
        for (need, list, name) in [
            (PdoEntry::Controlword, &self.rx, "rx"),
            (PdoEntry::TargetPosition, &self.rx, "rx"),
            (PdoEntry::Statusword, &self.tx, "tx"),
            (PdoEntry::PositionActual, &self.tx, "tx"),
        ] {
            if !list.contains(&need) {
                return fail(
                    format!("ethercat.pdo.{name}"),
                    format!("must contain `{}`", entry_name(need)),
                );
            }
        }
        Ok(())
    }
}

/// The config spelling of an entry.
pub fn entry_name(e: PdoEntry) -> &'static str {
    match e {
        PdoEntry::Controlword => "controlword",
        PdoEntry::TargetPosition => "target_position",
        PdoEntry::VelocityOffset => "velocity_offset",
        PdoEntry::ModeOfOperation => "mode_of_operation",
        PdoEntry::Statusword => "statusword",
        PdoEntry::PositionActual => "position_actual",
        PdoEntry::VelocityActual => "velocity_actual",
        PdoEntry::TorqueActual => "torque_actual",
        PdoEntry::ErrorCode => "error_code",
        PdoEntry::ModeDisplay => "mode_display",
        PdoEntry::DigitalInputs => "digital_inputs",
    }
}

fn default_min_success_rate() -> f64 {
    0.9
}
fn default_success_window() -> u32 {
    100
}
fn default_state_timeout() -> f64 {
    5000.0
}
fn default_enable_timeout() -> f64 {
    2000.0
}
fn default_sdo_timeout() -> f64 {
    1000.0
}
fn default_rejoin_timeout() -> f64 {
    10_000.0
}
fn default_resume_window() -> f64 {
    0.05
}
fn one_i8() -> i8 {
    1
}
fn one_f64() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}
fn default_rx() -> Vec<PdoEntry> {
    vec![PdoEntry::Controlword, PdoEntry::TargetPosition]
}
fn default_tx() -> Vec<PdoEntry> {
    vec![
        PdoEntry::Statusword,
        PdoEntry::PositionActual,
        PdoEntry::VelocityActual,
        PdoEntry::TorqueActual,
        PdoEntry::ErrorCode,
    ]
}
