//! Console output that may fail: a closed pipe (`| head -2`) or a closed stdout or
//! stderr drops the text instead of stopping the command (the records are files).

use std::io::Write;

/// A line on stdout.
pub fn out(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// Text on stdout, as it is (no newline added).
pub fn out_raw(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// A line on stderr.
pub fn err(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}
