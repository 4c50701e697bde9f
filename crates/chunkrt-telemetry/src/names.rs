//! The names modes and gate constraints have in the records (logs, `report.json`,
//! the recording), and a mode back from its `as u8` in a cycle record.

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
