//! A JSON-lines log file that survives faults: whole lines only, flushed on the
//! telemetry thread's schedule, capped in size, and never failing the run.
//!
//! Lines are buffered in memory and written by [`JsonlLog::flush`] (the telemetry
//! thread calls it after every drain, so a SIGKILL loses at most one drain interval).
//! A write that fails (a full disk) truncates the file back to its last whole line,
//! so every line on disk parses; that line and every later one are counted as lost,
//! and the first error is kept for stderr and the report.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Pending bytes that trigger a write before the next scheduled flush.
const FLUSH_AT_BYTES: usize = 64 * 1024;

/// What happened to the lines offered to a [`JsonlLog`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogCounts {
    /// Lines on disk.
    pub lines_written: u64,
    /// Bytes on disk.
    pub bytes_written: u64,
    /// Lines not written because the file reached its cap.
    pub lines_cut: u64,
    /// Lines not written because a write failed (e.g. the disk was full).
    pub lines_lost: u64,
}

/// One JSON-lines file.
pub struct JsonlLog {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    pending_lines: u64,
    cap_bytes: u64,
    counts: LogCounts,
    error: Option<String>,
    error_reported: bool,
}

impl JsonlLog {
    /// Creates (truncates) the file; `cap_bytes` bounds what it will ever hold.
    pub fn create(path: &Path, cap_bytes: u64) -> std::io::Result<Self> {
        Ok(JsonlLog {
            file: File::create(path)?,
            path: path.to_path_buf(),
            buf: Vec::with_capacity(FLUSH_AT_BYTES * 2),
            pending_lines: 0,
            cap_bytes,
            counts: LogCounts::default(),
            error: None,
            error_reported: false,
        })
    }

    /// Changes the cap (bytes).
    pub fn set_cap(&mut self, cap_bytes: u64) {
        self.cap_bytes = cap_bytes;
    }

    /// Queues one line; returns `false` when it was cut (cap) or lost (an earlier
    /// write failed) instead.
    pub fn write_line(&mut self, v: &serde_json::Value) -> bool {
        if self.error.is_some() {
            self.counts.lines_lost += 1;
            return false;
        }
        let start = self.buf.len();
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.buf, v);
        self.buf.push(b'\n');
        let total = self.counts.bytes_written + self.buf.len() as u64;
        if total > self.cap_bytes {
            self.buf.truncate(start);
            self.counts.lines_cut += 1;
            return false;
        }
        self.pending_lines += 1;
        if self.buf.len() >= FLUSH_AT_BYTES {
            self.flush();
        }
        true
    }

    /// Writes the queued lines. On failure the file is cut back to its last whole
    /// line and the log stops writing (see the module doc).
    pub fn flush(&mut self) {
        if self.buf.is_empty() || self.error.is_some() {
            return;
        }
        match self.file.write_all(&self.buf) {
            Ok(()) => {
                self.counts.bytes_written += self.buf.len() as u64;
                self.counts.lines_written += self.pending_lines;
            }
            Err(e) => {
                // A partial write may have left half a line: cut it off (shrinking a
                // file needs no free space).
                let _ = self.file.set_len(self.counts.bytes_written);
                self.counts.lines_lost += self.pending_lines;
                self.error = Some(format!("writing {}: {e}", self.path.display()));
            }
        }
        self.buf.clear();
        self.pending_lines = 0;
    }

    /// The first write error, once (for a live message on stderr).
    pub fn take_new_error(&mut self) -> Option<&str> {
        if self.error_reported {
            return None;
        }
        let e = self.error.as_deref()?;
        self.error_reported = true;
        Some(e)
    }

    /// The first write error.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Whether the cap has cut a line.
    pub fn capped(&self) -> bool {
        self.counts.lines_cut > 0
    }

    /// The counts so far (flushed lines only).
    pub fn counts(&self) -> LogCounts {
        self.counts
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-logfile-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join("log.jsonl")
    }

    #[test]
    fn the_cap_keeps_whole_lines_and_counts_what_it_cut() {
        let p = temp("cap");
        let mut log = JsonlLog::create(&p, 100).unwrap();
        let mut kept = 0;
        for i in 0..20 {
            if log.write_line(&json!({ "i": i, "pad": "xxxxxxxxxx" })) {
                kept += 1;
            }
        }
        log.flush();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.len() <= 100, "{}", text.len());
        assert_eq!(text.lines().count(), kept);
        for l in text.lines() {
            serde_json::from_str::<serde_json::Value>(l).unwrap();
        }
        let c = log.counts();
        assert_eq!(c.lines_written as usize, kept);
        assert_eq!(c.lines_written + c.lines_cut, 20);
        assert!(log.capped());
    }

    #[test]
    fn a_failed_write_cuts_back_to_the_last_whole_line_and_counts_the_rest() {
        // /dev/full fails every write with ENOSPC.
        let mut log = JsonlLog::create(Path::new("/dev/full"), u64::MAX).unwrap();
        assert!(log.write_line(&json!({ "a": 1 })));
        log.flush();
        assert!(!log.write_line(&json!({ "a": 2 })));
        let c = log.counts();
        assert_eq!((c.lines_written, c.lines_lost), (0, 2));
        let e = log.take_new_error().unwrap().to_string();
        assert!(e.contains("/dev/full") && e.contains("space"), "{e}");
        assert!(log.take_new_error().is_none(), "reported once");
    }
}
