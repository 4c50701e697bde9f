//! A CiA 402 servo drive in Cyclic Synchronous Position mode: the power state machine driven by
//! the controlword, a position loop on a motor model, following-error supervision, quick stop,
//! and fault handling with an error code in 0x603F.

use crate::config::DriveParams;
use crate::plant::{ShaftCommand, ShaftState};

/// CSP, the only mode of operation the drive runs (0x6502 says so).
pub const MODE_CSP: i8 = 8;
/// 0x603F code for a following error.
pub const ERR_FOLLOWING: u16 = 0x8611;
/// 0x603F code when process data stopped arriving while enabled (communication lost).
pub const ERR_COMM: u16 = 0x8130;

/// The power state machine's states (CiA 402 figure "state machine").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerState {
    /// After power-up, passes to switch-on-disabled on the next cycle.
    NotReadyToSwitchOn,
    /// No high voltage; waits for "shutdown".
    SwitchOnDisabled,
    /// Voltage may be applied; waits for "switch on".
    ReadyToSwitchOn,
    /// Power stage on, no torque.
    SwitchedOn,
    /// Torque on, following targets.
    OperationEnabled,
    /// Stopping on the quick-stop ramp.
    QuickStopActive,
    /// A fault was detected; stopping.
    FaultReactionActive,
    /// Faulted; waits for a fault reset (rising edge of controlword bit 7).
    Fault,
}

impl PowerState {
    /// Statusword bits 0..6 for the state (bit 4 "voltage enabled" included where it applies).
    fn status_bits(self) -> u16 {
        match self {
            PowerState::NotReadyToSwitchOn => 0x0000,
            PowerState::SwitchOnDisabled => 0x0040,
            PowerState::ReadyToSwitchOn => 0x0031,
            PowerState::SwitchedOn => 0x0033,
            PowerState::OperationEnabled => 0x0037,
            PowerState::QuickStopActive => 0x0017,
            PowerState::FaultReactionActive => 0x001F,
            PowerState::Fault => 0x0008,
        }
    }

    fn powered(self) -> bool {
        matches!(
            self,
            PowerState::OperationEnabled
                | PowerState::QuickStopActive
                | PowerState::FaultReactionActive
        )
    }
}

/// One drive: its objects and its motor.
#[derive(Clone, Debug)]
pub struct Drive {
    params: DriveParams,
    state: PowerState,
    /// 0x6040 as last written.
    pub controlword: u16,
    prev_fault_reset: bool,
    /// 0x6060.
    pub mode: i8,
    /// 0x607A.
    pub target: i32,
    prev_target: i32,
    /// 0x6065.
    pub fe_window: u32,
    /// 0x6066 (ms).
    pub fe_timeout_ms: u16,
    /// 0x6085.
    pub quick_stop_decel: u32,
    /// 0x605A.
    pub quick_stop_option: i16,
    /// 0x60FD digital inputs (switches wired to the drive).
    pub digital_inputs: u32,
    /// 0x603F.
    error_code: u16,
    fe_latched: bool,
    pending_fault: Option<u16>,
    pos: f64,
    vel: f64,
    accel: f64,
    limiting: bool,
    fe_over_ns: u64,
    /// The shaft is moved by a [`ChainPlant`](crate::plant::ChainPlant), not the motor
    /// model: `cycle` leaves the motion and the supervision to `finish_cycle`.
    external: bool,
    /// With an external shaft: the torque it reported (per mille of rated).
    shaft_torque: f64,
    /// With an external shaft: the cycle `cycle` began and `finish_cycle` ends (its
    /// length and the state at its start).
    pending_cycle: Option<(u64, PowerState)>,
}

impl Drive {
    /// A drive at rest at `initial_pos` counts, in switch-on-disabled after its first cycle.
    pub fn new(params: &DriveParams, initial_pos: i32) -> Self {
        Drive {
            params: params.clone(),
            state: PowerState::NotReadyToSwitchOn,
            controlword: 0,
            prev_fault_reset: false,
            mode: 0,
            target: initial_pos,
            prev_target: initial_pos,
            fe_window: params.following_error_window,
            fe_timeout_ms: params.following_error_timeout_ms,
            quick_stop_decel: params.quick_stop_decel_counts_s2,
            quick_stop_option: params.quick_stop_option,
            digital_inputs: params.digital_inputs,
            error_code: 0,
            fe_latched: false,
            pending_fault: None,
            pos: f64::from(initial_pos),
            vel: 0.0,
            accel: 0.0,
            limiting: false,
            fe_over_ns: 0,
            external: false,
            shaft_torque: 0.0,
            pending_cycle: None,
        }
    }

    /// From now on the shaft is moved by a plant outside the drive, which starts at
    /// `shaft`: each `cycle` is ended by `finish_cycle` with the shaft's measurement.
    pub fn attach_shaft(&mut self, shaft: ShaftState) {
        self.external = true;
        self.pending_cycle = None;
        self.take_shaft(shaft);
        self.target = self.position();
        self.prev_target = self.target;
    }

    /// What the drive asks of an external shaft for the cycle `cycle` began: follow
    /// the interpolated target (operation enabled, CSP), ramp to rest (quick stop, fault
    /// reaction, or enabled in a mode it does not run), or nothing (power stage off).
    pub fn shaft_command(&self) -> ShaftCommand {
        match self.state {
            PowerState::OperationEnabled if self.mode == MODE_CSP => ShaftCommand::Track {
                from_counts: f64::from(self.prev_target),
                to_counts: f64::from(self.target),
            },
            PowerState::OperationEnabled
            | PowerState::QuickStopActive
            | PowerState::FaultReactionActive => ShaftCommand::Stop,
            _ => ShaftCommand::Off,
        }
    }

    /// Ends the cycle `cycle` began, with the external shaft's measurement after it:
    /// the following error supervised, the quick stop or fault reaction ended where the
    /// shaft came to rest. Returns whether a cycle was pending (its inputs are then due);
    /// without one only the measurement is taken.
    pub fn finish_cycle(&mut self, shaft: ShaftState) -> bool {
        self.take_shaft(shaft);
        let Some((dt_ns, at_start)) = self.pending_cycle.take() else {
            return false;
        };
        self.supervise(dt_ns, at_start);
        self.prev_target = self.target;
        true
    }

    fn take_shaft(&mut self, shaft: ShaftState) {
        let finite = shaft.pos_counts.is_finite() && shaft.vel_counts_s.is_finite();
        if finite {
            self.pos = shaft.pos_counts;
            self.vel = if shaft.at_rest {
                0.0
            } else {
                shaft.vel_counts_s
            };
        }
        self.shaft_torque = if shaft.torque_per_mille.is_finite() {
            shaft.torque_per_mille
        } else {
            0.0
        };
        // The drive reports its current loop in limitation when it asks for its peak.
        self.limiting = self.shaft_torque.abs() >= 1000.0;
    }

    /// Current power state.
    pub fn state(&self) -> PowerState {
        self.state
    }

    /// 0x6061: the mode actually running.
    pub fn mode_display(&self) -> i8 {
        if self.mode == MODE_CSP {
            MODE_CSP
        } else {
            0
        }
    }

    /// 0x603F.
    pub fn error_code(&self) -> u16 {
        self.error_code
    }

    /// 0x6064 position actual value (counts), saturated into i32.
    pub fn position(&self) -> i32 {
        sat_i32(self.pos.round())
    }

    /// 0x606C velocity actual value (counts/s).
    pub fn velocity(&self) -> i32 {
        sat_i32(self.vel.round())
    }

    /// 0x6077 torque actual value (per mille of rated torque; rated = the acceleration limit).
    pub fn torque(&self) -> i16 {
        let t = if self.external {
            self.shaft_torque.round()
        } else {
            (self.accel / self.params.max_accel_counts_s2 * 1000.0).round()
        };
        t.clamp(-3000.0, 3000.0) as i16
    }

    /// 0x60F4 following error actual value.
    pub fn following_error(&self) -> i32 {
        sat_i32((f64::from(self.target) - self.pos).round())
    }

    /// 0x6041 statusword.
    pub fn statusword(&self) -> u16 {
        let mut sw = self.state.status_bits() | 0x0200; // bit 9: remote
        if self.state == PowerState::OperationEnabled && self.mode == MODE_CSP {
            sw |= 0x1000; // bit 12 in CSP: drive follows the command value
            if i64::from(self.following_error()).unsigned_abs() < u64::from(self.fe_window / 10 + 1)
            {
                sw |= 0x0400; // bit 10: target reached (within a tenth of the window)
            }
        }
        if self.limiting {
            sw |= 0x0800; // bit 11: internal limit active
        }
        if self.fe_latched {
            sw |= 0x2000; // bit 13: following error
        }
        sw
    }

    /// Raise a fault from outside (fault injection, communication loss). It takes effect on the
    /// next cycle, as a real drive's fault reaction does.
    pub fn raise_fault(&mut self, code: u16) {
        self.pending_fault = Some(code);
    }

    /// Power down because the EtherCAT state left OP: a powered drive goes to
    /// switch-on-disabled (torque off), as with "disable voltage".
    pub fn lose_outputs(&mut self) {
        if matches!(
            self.state,
            PowerState::OperationEnabled
                | PowerState::QuickStopActive
                | PowerState::SwitchedOn
                | PowerState::ReadyToSwitchOn
        ) {
            self.state = PowerState::SwitchOnDisabled;
        }
    }

    /// One cycle of `dt_ns`: evaluate the controlword, then run the motor and supervision
    /// (with an attached shaft, [`Drive::finish_cycle`] does the latter once the plant
    /// has moved).
    /// `outputs_valid` is false in SAFE-OP, where the master's outputs must be ignored.
    pub fn cycle(&mut self, dt_ns: u64, outputs_valid: bool) {
        // States entered during this cycle last at least until the next one, so the master sees
        // quick stop active / fault reaction active even when the motor already stands still.
        let at_start = self.state;
        if let Some(code) = self.pending_fault.take() {
            self.enter_fault(code);
        }
        if outputs_valid {
            self.apply_controlword();
        } else if self.state == PowerState::NotReadyToSwitchOn {
            self.state = PowerState::SwitchOnDisabled;
        }
        if self.external {
            // The plant moves the shaft once every drive of the frame has taken its
            // outputs; `finish_cycle` supervises on what it measured.
            self.pending_cycle = Some((dt_ns, at_start));
            return;
        }
        self.step_motor(dt_ns);
        self.supervise(dt_ns, at_start);
        self.prev_target = self.target;
    }

    fn enter_fault(&mut self, code: u16) {
        if !matches!(
            self.state,
            PowerState::Fault | PowerState::FaultReactionActive
        ) {
            self.error_code = code;
            self.state = PowerState::FaultReactionActive;
        }
    }

    fn apply_controlword(&mut self) {
        let cw = self.controlword;
        let reset = cw & 0x80 != 0;
        let rising_reset = reset && !self.prev_fault_reset;
        self.prev_fault_reset = reset;
        // Command decoding per CiA 402 table "device control commands".
        let disable_voltage = cw & 0x02 == 0;
        let quick_stop = cw & 0x06 == 0x02;
        let shutdown = cw & 0x07 == 0x06;
        let switch_on = cw & 0x0F == 0x07;
        let enable = cw & 0x0F == 0x0F;
        use PowerState::*;
        self.state = match self.state {
            NotReadyToSwitchOn => SwitchOnDisabled,
            SwitchOnDisabled if shutdown && !reset => ReadyToSwitchOn,
            ReadyToSwitchOn if disable_voltage || quick_stop => SwitchOnDisabled,
            ReadyToSwitchOn if switch_on || enable => SwitchedOn,
            SwitchedOn if disable_voltage || quick_stop => SwitchOnDisabled,
            SwitchedOn if shutdown => ReadyToSwitchOn,
            SwitchedOn if enable => self.enable_operation(),
            OperationEnabled if disable_voltage => SwitchOnDisabled,
            OperationEnabled if quick_stop => QuickStopActive,
            OperationEnabled if shutdown => ReadyToSwitchOn,
            OperationEnabled if switch_on => SwitchedOn,
            QuickStopActive if disable_voltage => SwitchOnDisabled,
            QuickStopActive
                if enable && matches!(self.quick_stop_option, 5 | 6) && self.vel == 0.0 =>
            {
                self.enable_operation()
            }
            Fault if rising_reset => {
                self.error_code = 0;
                self.fe_latched = false;
                self.fe_over_ns = 0;
                SwitchOnDisabled
            }
            s => s,
        };
    }

    fn enable_operation(&mut self) -> PowerState {
        // Take the current position as the start of the trajectory so the first cycle does not
        // see a velocity feed-forward from a stale target.
        self.prev_target = self.target;
        self.fe_over_ns = 0;
        PowerState::OperationEnabled
    }

    fn step_motor(&mut self, dt_ns: u64) {
        let dt = (dt_ns.min(50_000_000) as f64) * 1e-9;
        if dt <= 0.0 {
            return;
        }
        let p = &self.params;
        let substeps = (dt / 250e-6).ceil().max(1.0) as u32;
        let h = dt / f64::from(substeps);
        self.limiting = false;
        let tracking = self.state == PowerState::OperationEnabled && self.mode == MODE_CSP;
        let stopping = matches!(
            self.state,
            PowerState::QuickStopActive | PowerState::FaultReactionActive
        ) || (self.state == PowerState::OperationEnabled && self.mode != MODE_CSP);
        let w = 2.0 * std::f64::consts::PI * p.bandwidth_hz;
        let (t0, t1) = (f64::from(self.prev_target), f64::from(self.target));
        let v_ff = (t1 - t0) / dt;
        let mut last_acc = 0.0;
        for k in 1..=substeps {
            let acc = if tracking {
                let tgt = t0 + (t1 - t0) * f64::from(k) / f64::from(substeps);
                w * w * (tgt - self.pos) + 2.0 * w * (v_ff - self.vel)
            } else if stopping {
                let decel = f64::from(self.quick_stop_decel.max(1));
                if self.vel.abs() <= decel * h {
                    -self.vel / h
                } else {
                    -decel * self.vel.signum()
                }
            } else {
                // Power stage off: the motor coasts down on viscous friction (tau = 50 ms).
                -self.vel / 0.05
            };
            let acc_lim = acc.clamp(-p.max_accel_counts_s2, p.max_accel_counts_s2);
            if acc_lim != acc {
                self.limiting = true;
            }
            self.vel += acc_lim * h;
            if self.vel.abs() > p.max_velocity_counts_s {
                self.vel = self
                    .vel
                    .clamp(-p.max_velocity_counts_s, p.max_velocity_counts_s);
                self.limiting = true;
            }
            self.pos += self.vel * h;
            last_acc = acc_lim;
        }
        if self.vel.abs() < 1e-3 {
            self.vel = 0.0;
        }
        self.accel = if self.state.powered() { last_acc } else { 0.0 };
        if !self.pos.is_finite() {
            self.pos = 0.0;
            self.vel = 0.0;
        }
    }

    fn supervise(&mut self, dt_ns: u64, at_start: PowerState) {
        use PowerState::*;
        match self.state {
            OperationEnabled if self.mode == MODE_CSP => {
                let fe = i64::from(self.following_error()).unsigned_abs();
                if fe > u64::from(self.fe_window) {
                    self.fe_over_ns = self.fe_over_ns.saturating_add(dt_ns);
                    if self.fe_over_ns >= u64::from(self.fe_timeout_ms) * 1_000_000 {
                        self.fe_latched = true;
                        self.enter_fault(ERR_FOLLOWING);
                    }
                } else {
                    self.fe_over_ns = 0;
                }
            }
            QuickStopActive
                if at_start == QuickStopActive
                    && self.vel == 0.0
                    && matches!(self.quick_stop_option, 1 | 2) =>
            {
                self.state = SwitchOnDisabled;
            }
            FaultReactionActive if at_start == FaultReactionActive && self.vel == 0.0 => {
                self.state = Fault
            }
            _ => {}
        }
    }
}

fn sat_i32(v: f64) -> i32 {
    if v.is_nan() {
        0
    } else {
        v.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DT: u64 = 1_000_000;

    fn enabled_drive() -> Drive {
        let mut d = Drive::new(&DriveParams::default(), 5000);
        d.mode = MODE_CSP;
        for cw in [0x06, 0x07, 0x0F] {
            d.controlword = cw;
            d.cycle(DT, true);
            d.cycle(DT, true);
        }
        assert_eq!(d.state(), PowerState::OperationEnabled);
        d
    }

    #[test]
    fn enable_sequence_statuswords() {
        let mut d = Drive::new(&DriveParams::default(), 0);
        d.cycle(DT, true);
        assert_eq!(d.statusword() & 0x4F, 0x40);
        d.controlword = 0x06;
        d.cycle(DT, true);
        assert_eq!(d.statusword() & 0x6F, 0x21);
        d.controlword = 0x07;
        d.cycle(DT, true);
        assert_eq!(d.statusword() & 0x6F, 0x23);
        d.controlword = 0x0F;
        d.cycle(DT, true);
        assert_eq!(d.statusword() & 0x6F, 0x27);
    }

    #[test]
    fn tracks_a_ramp_closely() {
        let mut d = enabled_drive();
        let mut worst = 0i64;
        for k in 0..2000 {
            d.target = 5000 + k * 100; // 100 000 counts/s
            d.cycle(DT, true);
            if k > 200 {
                worst = worst.max(i64::from(d.following_error()).abs());
            }
        }
        assert!(worst < 500, "steady ramp following error {worst}");
        assert!(d.velocity() > 90_000 && d.velocity() < 110_000);
    }

    #[test]
    fn target_jump_causes_following_error_fault() {
        let mut d = enabled_drive();
        d.target = 5000 + 10_000_000;
        for _ in 0..300 {
            d.cycle(DT, true);
        }
        assert_eq!(d.statusword() & 0x4F, 0x08, "sw {:#06x}", d.statusword());
        assert_eq!(d.error_code(), ERR_FOLLOWING);
        assert!(d.statusword() & 0x2000 != 0);
        // Fault reset: rising edge of bit 7, then the enable sequence again.
        d.target = d.position();
        d.controlword = 0x80;
        d.cycle(DT, true);
        assert_eq!(d.statusword() & 0x4F, 0x40);
        assert_eq!(d.error_code(), 0);
    }

    #[test]
    fn quick_stop_ramps_down_then_disables() {
        let mut d = enabled_drive();
        for k in 0..300 {
            d.target = 5000 + k * 300;
            d.cycle(DT, true);
        }
        assert!(d.velocity() > 100_000);
        d.controlword = 0x02;
        d.cycle(DT, true);
        assert_eq!(d.statusword() & 0x6F, 0x07, "quick stop active");
        for _ in 0..100 {
            d.cycle(DT, true);
        }
        assert_eq!(d.velocity(), 0);
        assert_eq!(
            d.statusword() & 0x4F,
            0x40,
            "option 2 ends in switch on disabled"
        );
    }

    #[test]
    fn injected_fault_and_reset_needs_rising_edge() {
        let mut d = enabled_drive();
        d.raise_fault(0x2310);
        for _ in 0..10 {
            d.cycle(DT, true);
        }
        assert_eq!(d.state(), PowerState::Fault);
        assert_eq!(d.error_code(), 0x2310);
        d.controlword = 0x8F;
        d.cycle(DT, true);
        assert_eq!(d.state(), PowerState::SwitchOnDisabled);
        d.controlword = 0x8F;
        d.raise_fault(0x2310);
        d.cycle(DT, true);
        d.cycle(DT, true);
        d.cycle(DT, true);
        assert_eq!(
            d.state(),
            PowerState::Fault,
            "held bit 7 is not a new reset"
        );
    }
}
