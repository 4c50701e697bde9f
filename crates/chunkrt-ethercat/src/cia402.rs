//! The CiA 402 power state machine seen from the host: statusword decoding and the next
//! controlword for each request. Pure functions, tested against the state table.

use chunkrt_core::{DriveRequest, DriveState};

/// Controlword "shutdown" (to Ready to switch on).
pub const CW_SHUTDOWN: u16 = 0x06;
/// Controlword "switch on".
pub const CW_SWITCH_ON: u16 = 0x07;
/// Controlword "enable operation".
pub const CW_ENABLE_OPERATION: u16 = 0x0F;
/// Controlword "quick stop" (enable voltage set, quick stop bit cleared).
pub const CW_QUICK_STOP: u16 = 0x02;
/// Controlword "disable voltage".
pub const CW_DISABLE_VOLTAGE: u16 = 0x00;
/// Controlword bit 7: fault reset on its rising edge.
pub const CW_FAULT_RESET: u16 = 0x80;

/// The power state a statusword shows, in CiA 402's own terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerState {
    /// Not ready to switch on (the drive is still initialising).
    NotReady,
    /// Switch on disabled.
    SwitchOnDisabled,
    /// Ready to switch on.
    ReadyToSwitchOn,
    /// Switched on.
    SwitchedOn,
    /// Operation enabled.
    OperationEnabled,
    /// Quick stop active.
    QuickStopActive,
    /// Fault reaction active.
    FaultReaction,
    /// Fault.
    Fault,
}

impl PowerState {
    /// Decode a statusword (0x6041).
    pub fn from_statusword(sw: u16) -> PowerState {
        match sw & 0x4F {
            0x08 => return PowerState::Fault,
            0x0F => return PowerState::FaultReaction,
            0x40 => return PowerState::SwitchOnDisabled,
            0x00 => return PowerState::NotReady,
            _ => {}
        }
        match sw & 0x6F {
            0x21 => PowerState::ReadyToSwitchOn,
            0x23 => PowerState::SwitchedOn,
            0x27 => PowerState::OperationEnabled,
            0x07 => PowerState::QuickStopActive,
            // Bits the table leaves undefined: treat as not ready (never as enabled).
            _ => PowerState::NotReady,
        }
    }

    /// The runtime's view of it.
    pub fn drive_state(self) -> DriveState {
        match self {
            PowerState::NotReady | PowerState::SwitchOnDisabled => DriveState::Disabled,
            PowerState::ReadyToSwitchOn | PowerState::SwitchedOn => DriveState::Ready,
            PowerState::OperationEnabled => DriveState::Enabled,
            PowerState::QuickStopActive => DriveState::QuickStop,
            PowerState::FaultReaction | PowerState::Fault => DriveState::Fault,
        }
    }

    /// Whether it is a fault state.
    pub fn is_fault(self) -> bool {
        matches!(self, PowerState::Fault | PowerState::FaultReaction)
    }
}

/// The next controlword of the enable sequence (shutdown, switch on, enable operation).
/// A drive in fault is left alone (only a fault reset clears it).
pub fn enable_step(state: PowerState) -> u16 {
    match state {
        PowerState::SwitchOnDisabled => CW_SHUTDOWN,
        PowerState::ReadyToSwitchOn => CW_SWITCH_ON,
        PowerState::SwitchedOn | PowerState::OperationEnabled => CW_ENABLE_OPERATION,
        // Leave quick stop through switch on disabled, then enable from scratch.
        PowerState::QuickStopActive
        | PowerState::NotReady
        | PowerState::FaultReaction
        | PowerState::Fault => CW_DISABLE_VOLTAGE,
    }
}

/// The controlword for `request` given the drive's state and the controlword sent last.
pub fn controlword(request: DriveRequest, state: PowerState, last_cw: u16) -> u16 {
    match request {
        DriveRequest::Track => enable_step(state),
        DriveRequest::FaultReset => match state {
            // A rising edge of bit 7: low first if it was high (e.g. the frame carrying the
            // reset was lost and the drive is still in fault).
            PowerState::Fault if last_cw & CW_FAULT_RESET != 0 => CW_DISABLE_VOLTAGE,
            PowerState::Fault => CW_FAULT_RESET,
            other => enable_step(other),
        },
        DriveRequest::QuickStop => match state {
            PowerState::Fault | PowerState::FaultReaction => CW_DISABLE_VOLTAGE,
            _ => CW_QUICK_STOP,
        },
        DriveRequest::Disable => CW_DISABLE_VOLTAGE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statusword_table() {
        use PowerState::*;
        for (sw, want) in [
            (0x0000, NotReady),
            (0x0250, SwitchOnDisabled),
            (0x0231, ReadyToSwitchOn),
            (0x0233, SwitchedOn),
            (0x1237, OperationEnabled),
            (0x0217, QuickStopActive),
            (0x021F, FaultReaction),
            (0x0218, Fault),
            (0x0208, Fault),
        ] {
            assert_eq!(PowerState::from_statusword(sw), want, "{sw:#06x}");
        }
    }

    /// A minimal drive answering controlwords per the CiA 402 transition table.
    fn drive_step(state: PowerState, cw: u16, last_cw: u16) -> PowerState {
        use PowerState::*;
        let cmd = cw & 0x8F;
        match state {
            Fault if cw & 0x80 != 0 && last_cw & 0x80 == 0 => SwitchOnDisabled,
            Fault | FaultReaction => state,
            _ if cmd & 0x02 == 0 => SwitchOnDisabled,
            QuickStopActive => state,
            _ if cmd & 0x07 == 0x02 => match state {
                OperationEnabled => QuickStopActive,
                _ => SwitchOnDisabled,
            },
            SwitchOnDisabled if cmd & 0x07 == 0x06 => ReadyToSwitchOn,
            ReadyToSwitchOn if cmd & 0x0F == 0x07 => SwitchedOn,
            ReadyToSwitchOn | SwitchedOn if cmd & 0x0F == 0x0F => {
                if state == ReadyToSwitchOn {
                    SwitchedOn
                } else {
                    OperationEnabled
                }
            }
            SwitchedOn | OperationEnabled if cmd & 0x0F == 0x06 => ReadyToSwitchOn,
            OperationEnabled if cmd & 0x0F == 0x07 => SwitchedOn,
            s => s,
        }
    }

    fn run(mut s: PowerState, req: DriveRequest, cycles: usize) -> PowerState {
        let mut last = 0;
        for _ in 0..cycles {
            let cw = controlword(req, s, last);
            s = drive_step(s, cw, last);
            last = cw;
        }
        s
    }

    #[test]
    fn track_enables_from_every_non_fault_state() {
        use PowerState::*;
        for s in [
            SwitchOnDisabled,
            ReadyToSwitchOn,
            SwitchedOn,
            QuickStopActive,
        ] {
            assert_eq!(run(s, DriveRequest::Track, 6), OperationEnabled, "{s:?}");
        }
        assert_eq!(
            run(Fault, DriveRequest::Track, 10),
            Fault,
            "track never resets"
        );
    }

    #[test]
    fn fault_reset_pulses_then_enables() {
        assert_eq!(
            run(PowerState::Fault, DriveRequest::FaultReset, 6),
            PowerState::OperationEnabled
        );
        // Bit 7 left high from before: low first, then the edge.
        assert_eq!(
            controlword(DriveRequest::FaultReset, PowerState::Fault, 0x80),
            0x00
        );
        assert_eq!(
            controlword(DriveRequest::FaultReset, PowerState::Fault, 0x00),
            0x80
        );
    }

    #[test]
    fn quick_stop_and_disable() {
        assert_eq!(
            run(PowerState::OperationEnabled, DriveRequest::QuickStop, 3),
            PowerState::QuickStopActive
        );
        assert_eq!(
            run(PowerState::OperationEnabled, DriveRequest::Disable, 1),
            PowerState::SwitchOnDisabled
        );
        assert_eq!(
            PowerState::from_statusword(0x0227).drive_state(),
            DriveState::Enabled
        );
    }
}
