//! The names modes and gate constraints have in the records (logs, `report.json`,
//! the recording), a mode back from its `as u8` in a cycle record, and modes and
//! constraints back from their recorded names (a name chunkrt does not write is
//! refused, not guessed).

use chunkrt_core::{Constraint, Mode};

/// Name of a mode in logs and reports.
pub fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Playing => "Playing",
        Mode::Decelerating => "Decelerating",
        Mode::Holding => "Holding",
        Mode::SafeStop => "SafeStop",
    }
}

/// A drive's state as the live view and the metrics name it.
pub fn drive_state_name(s: chunkrt_core::DriveState) -> &'static str {
    use chunkrt_core::DriveState;
    match s {
        DriveState::Disabled => "disabled",
        DriveState::Ready => "ready",
        DriveState::Enabled => "enabled",
        DriveState::QuickStop => "quick_stop",
        DriveState::Fault => "fault",
        DriveState::Missing => "missing",
    }
}

/// Every drive state, for the metrics' state sets.
pub const DRIVE_STATES: [chunkrt_core::DriveState; 6] = [
    chunkrt_core::DriveState::Disabled,
    chunkrt_core::DriveState::Ready,
    chunkrt_core::DriveState::Enabled,
    chunkrt_core::DriveState::QuickStop,
    chunkrt_core::DriveState::Fault,
    chunkrt_core::DriveState::Missing,
];

/// Every mode, in the order of their `as u8` values.
pub const MODES: [Mode; 4] = [
    Mode::Playing,
    Mode::Decelerating,
    Mode::Holding,
    Mode::SafeStop,
];

/// A recorded name that names no mode (or no constraint).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is not a {what} chunkrt records (expected one of {expected})")]
pub struct UnknownName {
    /// `mode` or `gate constraint`.
    pub what: &'static str,
    /// The name as recorded.
    pub name: String,
    /// The names chunkrt writes, comma-separated.
    pub expected: String,
}

/// The mode whose recorded name ([`mode_name`]) is `name`.
pub fn mode_from_name(name: &str) -> Result<Mode, UnknownName> {
    MODES
        .into_iter()
        .find(|m| mode_name(*m) == name)
        .ok_or_else(|| UnknownName {
            what: "mode",
            name: name.to_string(),
            expected: MODES.map(mode_name).join(", "),
        })
}

/// The gate constraint whose recorded name ([`constraint_name`]) is `name`.
pub fn constraint_from_name(name: &str) -> Result<Constraint, UnknownName> {
    Constraint::ALL
        .into_iter()
        .find(|c| constraint_name(*c) == name)
        .ok_or_else(|| UnknownName {
            what: "gate constraint",
            name: name.to_string(),
            expected: Constraint::ALL.map(constraint_name).join(", "),
        })
}

/// Mode from its `as u8` value in a cycle record.
pub fn mode_from_u8(v: u8) -> Mode {
    match v {
        0 => Mode::Playing,
        1 => Mode::Decelerating,
        2 => Mode::Holding,
        _ => Mode::SafeStop,
    }
}

/// Name of a gate constraint in logs and reports (`Constraint::name`).
pub fn constraint_name(c: Constraint) -> &'static str {
    c.name()
}

/// Name of the constraint whose `as u8` value is `i` (for per-constraint counts).
pub fn constraint_name_index(i: usize) -> &'static str {
    Constraint::ALL
        .get(i)
        .map(|c| constraint_name(*c))
        .unwrap_or("unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names as the report and the recording spell them (written out here, not
    /// taken from `mode_name`), each parsed back to its mode.
    #[test]
    fn recorded_mode_names_parse_back_and_unknown_ones_are_refused() {
        for (name, mode) in [
            ("Playing", Mode::Playing),
            ("Decelerating", Mode::Decelerating),
            ("Holding", Mode::Holding),
            ("SafeStop", Mode::SafeStop),
        ] {
            assert_eq!(mode_from_name(name), Ok(mode));
        }
        let e = mode_from_name("playing").unwrap_err();
        assert_eq!(
            e.to_string(),
            "`playing` is not a mode chunkrt records (expected one of Playing, \
             Decelerating, Holding, SafeStop)"
        );
    }

    #[test]
    fn every_constraint_name_parses_back_and_an_unknown_one_is_refused() {
        for c in Constraint::ALL {
            assert_eq!(constraint_from_name(c.name()), Ok(c));
        }
        let e = constraint_from_name("speed").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("`speed` is not a gate constraint"),
            "{e}"
        );
    }
}
