//! The wear ledger's file (issue 41), read with a bound (issue 56).
//!
//! The ledger is JSON lines, one per hardware unit per run, appended to at the end of
//! every run and never rewritten, so that a manifest can cite its first lines by their
//! digest while later runs go on appending. It grows without end, so it is never held
//! whole:
//!
//! - a line is read at a time with a cap on its length ([`MAX_LINE_BYTES`]), every
//!   value checked as it is read (a negative, absurd or denormal running time, a load
//!   that is no load, is an error naming the line): [`LedgerTotals::scan`], constant
//!   memory, time proportional to the file (`chunkrt wear`, and a ledger without a
//!   valid totals file);
//! - beside it, `<ledger>.totals.json` holds each hardware id's running totals and its
//!   last run, with the ledger's size and the digest of its last line when it was
//!   written (through a temporary file and a rename). A run reads that and the
//!   ledger's tail ([`LedgerTotals::load`]); when they do not vouch for the ledger as it
//!   is (another writer, an edit, a crash between the two writes, a ledger older than
//!   the totals file) the totals are rebuilt by one scan and written again.
//!
//! The ledger must be a regular file: a FIFO, a device or a directory is refused by
//! [`chunkrt_files`] without blocking, when the run loads (before the arm moves) and by
//! `validate`, not after the stop.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chunkrt_core::MAX_DOF;
use chunkrt_files::{lines, FileError, RegularFile};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::wear::SHOCKS;

/// The longest line a ledger may hold: chunkrt's own are under 4 KiB (16 joints).
pub const MAX_LINE_BYTES: usize = lines::LINE_LIMIT_BYTES;
/// The longest running time one line may record: a run of 366 days.
pub const MAX_RUNNING_S: f64 = 366.0 * 86_400.0;
/// The highest I²t load a line may record (100 times the rating's: no winding survives
/// it; a larger one is no measurement).
pub const MAX_LOAD: f64 = 100.0;
/// The highest torque a line may record, N m.
pub const MAX_TORQUE_NM: f64 = 1e6;
/// The most hardware ids one ledger may hold.
pub const MAX_UNITS: usize = 4096;
/// The largest totals file read.
const TOTALS_LIMIT_BYTES: u64 = 16 << 20;
/// What the ledger is read as, in messages.
const WHAT: &str = "wear ledger";
/// The totals file's format.
const FORMAT: u32 = 1;

/// A ledger that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// The file is no regular file, cannot be opened or read, or has an over-long line.
    #[error(transparent)]
    File(#[from] FileError),
    /// A line is not a ledger line, or holds a value no run records.
    #[error("{}: line {line}: {why}", path.display())]
    Line {
        /// The ledger.
        path: PathBuf,
        /// The line's number, from 1.
        line: u64,
        /// What is wrong.
        why: String,
    },
    /// The ledger or its totals could not be written.
    #[error("{}: {why}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// What failed.
        why: String,
    },
}

/// A ledger line as read back: the fields chunkrt writes that are summed or started
/// from (others are ignored).
#[derive(Debug, Deserialize)]
struct LineIn {
    hardware_id: String,
    running_s: f64,
    #[serde(default)]
    joints: Vec<usize>,
    #[serde(default)]
    shocks: BTreeMap<String, Vec<u64>>,
    #[serde(default)]
    torque_peak_nm: Vec<f64>,
    #[serde(default)]
    i2t_peak: Option<Vec<f64>>,
    #[serde(default)]
    i2t_end: Option<Vec<f64>>,
    #[serde(default)]
    t_end_unix_s: Option<f64>,
}

/// Zero or a normal number: a denormal (5e-324) is a typo or a corrupted value.
fn plain(v: f64) -> bool {
    v == 0.0 || v.is_normal()
}

/// `v` as a message shows it: `1e308` and `5e-324` rather than 309 digits.
fn num(v: f64) -> String {
    if v != 0.0 && !(1e-3..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

fn check_values(key: &str, v: &[f64], hi: f64, joints: usize) -> Result<(), String> {
    if joints > 0 && v.len() != joints {
        return Err(format!("{key} has {} values for {joints} joints", v.len()));
    }
    match v.iter().find(|&&x| !(plain(x) && (0.0..=hi).contains(&x))) {
        Some(x) => Err(format!(
            "{key} holds {}: expected 0 to {}",
            num(*x),
            num(hi)
        )),
        None => Ok(()),
    }
}

impl LineIn {
    /// Every value within what a run records.
    fn check(&self) -> Result<(), String> {
        let id = &self.hardware_id;
        if id.trim().is_empty() || id.len() > 256 || id.chars().any(char::is_control) {
            return Err(format!("hardware_id {id:?}: expected a non-empty id of at most 256 bytes without control characters"));
        }
        let r = self.running_s;
        if !(plain(r) && (0.0..=MAX_RUNNING_S).contains(&r)) {
            return Err(format!(
                "running_s = {}: expected the run's running time, 0 to {MAX_RUNNING_S} s (366 days)",
                num(r)
            ));
        }
        if self.joints.len() > MAX_DOF || self.joints.iter().any(|&j| j >= MAX_DOF) {
            return Err(format!(
                "joints = {:?}: expected at most {MAX_DOF} joints, each below {MAX_DOF}",
                self.joints
            ));
        }
        let n = self.joints.len();
        check_values("torque_peak_nm", &self.torque_peak_nm, MAX_TORQUE_NM, n)?;
        for (key, v) in [("i2t_peak", &self.i2t_peak), ("i2t_end", &self.i2t_end)] {
            if let Some(v) = v {
                check_values(key, v, MAX_LOAD, n)?;
            }
        }
        if let Some(t) = self.t_end_unix_s {
            if !(plain(t) && (0.0..=1e12).contains(&t)) {
                return Err(format!(
                    "t_end_unix_s = {}: expected a time since 1970 in seconds",
                    num(t)
                ));
            }
        }
        if let Some((k, v)) = self.shocks.iter().find(|(_, v)| v.len() > MAX_DOF) {
            return Err(format!(
                "shocks.{k} has {} values, at most {MAX_DOF}",
                v.len()
            ));
        }
        Ok(())
    }
}

/// A hardware id's last run in the ledger: what its next run's thermal monitor starts
/// from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LastRun {
    /// Its line in the ledger, from 1.
    pub line: u64,
    /// When it ended (seconds since 1970), as it was recorded.
    pub t_end_unix_s: Option<f64>,
    /// The joints of the arm the unit drives.
    pub joints: Vec<usize>,
    /// Each joint's I²t load at its end (none: no thermal monitor, or a line from before
    /// it was recorded).
    pub i2t_end: Option<Vec<f64>>,
    /// Each joint's highest I²t load in it (an upper bound of the load at its end).
    pub i2t_peak: Option<Vec<f64>>,
}

/// One hardware id's totals over the ledger.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UnitTotals {
    /// Its lines (runs).
    pub runs: u64,
    /// Its running time, s.
    pub running_s: f64,
    /// Its shocks, summed over joints, per kind of [`SHOCKS`].
    pub shocks: [u64; 4],
    /// Its highest measured torque, N m.
    pub torque_peak_nm: f64,
    /// Its highest I²t load (none: never monitored).
    pub i2t_peak: Option<f64>,
    /// Its last run.
    pub last: LastRun,
}

/// What a ledger holds, summed per hardware id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerTotals {
    /// The totals file's format.
    pub format: u32,
    /// The ledger's lines (newline-terminated, blank ones included).
    pub lines: u64,
    /// The ledger's size, bytes.
    pub bytes: u64,
    /// SHA-256 of its last line (without the newline); none when it is empty.
    pub last_line_sha256: Option<String>,
    /// Per hardware id.
    pub units: BTreeMap<String, UnitTotals>,
}

/// The totals file beside `ledger`: `<ledger>.totals.json`.
pub fn totals_path(ledger: &Path) -> PathBuf {
    let mut name = ledger.file_name().unwrap_or_default().to_os_string();
    name.push(".totals.json");
    ledger.with_file_name(name)
}

fn sha256_hex(bytes: &[u8]) -> String {
    chunkrt_files::hex(&Sha256::digest(bytes))
}

impl LedgerTotals {
    fn empty() -> Self {
        LedgerTotals {
            format: FORMAT,
            ..LedgerTotals::default()
        }
    }

    /// Adds a checked line.
    fn add(&mut self, path: &Path, number: u64, l: LineIn) -> Result<(), LedgerError> {
        if !self.units.contains_key(&l.hardware_id) && self.units.len() >= MAX_UNITS {
            return Err(LedgerError::Line {
                path: path.to_path_buf(),
                line: number,
                why: format!("more than {MAX_UNITS} hardware ids in one ledger"),
            });
        }
        let u = self.units.entry(l.hardware_id).or_default();
        u.runs += 1;
        u.running_s += l.running_s;
        for (k, name) in SHOCKS.iter().enumerate() {
            let n: u64 = l.shocks.get(*name).map_or(0, |v| v.iter().sum());
            u.shocks[k] = u.shocks[k].saturating_add(n);
        }
        u.torque_peak_nm = l
            .torque_peak_nm
            .iter()
            .fold(u.torque_peak_nm, |m, &t| m.max(t));
        if let Some(p) = l
            .i2t_peak
            .as_ref()
            .and_then(|v| v.iter().copied().reduce(f64::max))
        {
            u.i2t_peak = Some(u.i2t_peak.map_or(p, |q| q.max(p)));
        }
        u.last = LastRun {
            line: number,
            t_end_unix_s: l.t_end_unix_s,
            joints: l.joints,
            i2t_end: l.i2t_end,
            i2t_peak: l.i2t_peak,
        };
        Ok(())
    }

    /// Parses and checks one line's text and adds it.
    fn add_text(&mut self, path: &Path, number: u64, text: &[u8]) -> Result<(), LedgerError> {
        let bad = |why: String| LedgerError::Line {
            path: path.to_path_buf(),
            line: number,
            why,
        };
        let l: LineIn = serde_json::from_slice(text)
            .map_err(|e| bad(format!("not a wear ledger line: {e}")))?;
        l.check().map_err(bad)?;
        self.add(path, number, l)
    }

    /// Reads the whole ledger a line at a time (constant memory), checking every line;
    /// returns its totals and the SHA-256 of all its lines (what a manifest citing all
    /// of them states). An absent ledger is empty.
    pub fn scan(ledger: &Path) -> Result<(LedgerTotals, String), LedgerError> {
        match chunkrt_files::open_regular(ledger, WHAT) {
            Ok(f) => Self::scan_file(ledger, f),
            Err(FileError::Open { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
                Ok((Self::empty(), sha256_hex(b"")))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn scan_file(ledger: &Path, f: RegularFile) -> Result<(LedgerTotals, String), LedgerError> {
        let mut reader = lines::LineReader::new(f, ledger, WHAT, MAX_LINE_BYTES);
        let mut totals = Self::empty();
        let mut all = Sha256::new();
        while let Some(line) = reader.next_line()? {
            if !line.terminated {
                return Err(LedgerError::Line {
                    path: ledger.to_path_buf(),
                    line: line.number,
                    why: "has no newline: the ledger was cut short (a write that did not \
                          finish?); remove the partial line"
                        .into(),
                });
            }
            all.update(line.text);
            all.update(b"\n");
            totals.lines = line.number;
            totals.last_line_sha256 = Some(sha256_hex(line.text));
            if line.text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let (number, text) = (line.number, line.text.to_vec());
            totals.add_text(ledger, number, &text)?;
        }
        totals.bytes = reader.offset();
        Ok((totals, chunkrt_files::hex(&all.finalize())))
    }

    /// Whether these totals describe `file` (the ledger, of `size` bytes) as it is: its
    /// size and its last line (read from its tail) are those they were taken at.
    fn vouch_for(&self, file: &mut std::fs::File, size: u64) -> bool {
        if self.format != FORMAT || self.bytes != size {
            return false;
        }
        match lines::last_line(file, size, MAX_LINE_BYTES) {
            Ok(last) => last.map(|l| sha256_hex(&l)) == self.last_line_sha256,
            Err(_) => false,
        }
    }

    /// The totals file of `ledger` when there is a readable one (none: absent, too
    /// large or not the format: rebuilt); one that is no regular file is an error
    /// (a directory there would make its rename fail after the run).
    fn read_totals_file(ledger: &Path) -> Result<Option<LedgerTotals>, LedgerError> {
        let path = totals_path(ledger);
        match chunkrt_files::read_bounded(&path, TOTALS_LIMIT_BYTES, "wear ledger's totals") {
            Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
            Err(e @ FileError::NotRegular { .. }) => Err(e.into()),
            Err(_) => Ok(None),
        }
    }

    /// The ledger's totals: from its totals file where that vouches for the ledger as it
    /// is (reading the ledger's tail only), else by a scan. An absent ledger is empty.
    /// Returns whether they were rebuilt (the totals file is to be written again).
    pub fn load(ledger: &Path) -> Result<(LedgerTotals, bool), LedgerError> {
        let mut f = match chunkrt_files::open_regular(ledger, WHAT) {
            Ok(f) => f,
            Err(FileError::Open { error, .. }) if error.kind() == std::io::ErrorKind::NotFound => {
                // Checked now, not after the run: the totals file's path must be usable.
                Self::read_totals_file(ledger)?;
                return Ok((Self::empty(), false));
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(t) = Self::read_totals_file(ledger)? {
            if t.vouch_for(&mut f.file, f.size) {
                return Ok((t, false));
            }
        }
        Ok((Self::scan_file(ledger, f)?.0, true))
    }

    /// Writes the totals file beside `ledger` (a temporary file and a rename).
    pub fn write(&self, ledger: &Path) -> Result<(), LedgerError> {
        let path = totals_path(ledger);
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        let text = serde_json::to_string(self).unwrap_or_default();
        crate::outdir::write_atomic(dir, &name, text.as_bytes()).map_err(|e| LedgerError::Write {
            path: path.clone(),
            why: e.to_string(),
        })
    }

    /// The last run of `hardware_id`, if the ledger has one.
    pub fn last_run(&self, hardware_id: &str) -> Option<&LastRun> {
        self.units.get(hardware_id).map(|u| &u.last)
    }
}

/// Appends `entries` to `ledger` (one line each, written in one call and synced), each
/// given `running_hours_total`: its hardware id's running time over the ledger's
/// earlier lines and this one, from the totals (the ledger's tail and its totals file;
/// scanned only when they do not vouch for it), then writes the totals file again.
/// The ledger is opened only if it is a regular file.
pub fn append_ledger(ledger: &Path, entries: &mut [Value]) -> Result<(), LedgerError> {
    let mut f = chunkrt_files::open_append(ledger, WHAT)?;
    let mut totals = match LedgerTotals::read_totals_file(ledger)? {
        Some(t) if t.vouch_for(&mut f.file, f.size) => t,
        _ => {
            let read = chunkrt_files::open_regular(ledger, WHAT)?;
            LedgerTotals::scan_file(ledger, read)?.0
        }
    };
    let mut text = String::new();
    let mut last = String::new();
    for e in entries.iter_mut() {
        let id = e["hardware_id"].as_str().unwrap_or_default().to_string();
        let before = totals.units.get(&id).map_or(0.0, |u| u.running_s);
        let total = (before + e["running_s"].as_f64().unwrap_or(0.0)) / 3600.0;
        e["running_hours_total"] = json!(total);
        last = e.to_string();
        let number = totals.lines + 1;
        // Summed as a later scan will: the totals file stays what a scan would write.
        totals.add_text(ledger, number, last.as_bytes())?;
        totals.lines = number;
        text.push_str(&last);
        text.push('\n');
    }
    let failed = |e: std::io::Error| LedgerError::Write {
        path: ledger.to_path_buf(),
        why: e.to_string(),
    };
    use std::io::Write;
    f.file.write_all(text.as_bytes()).map_err(failed)?;
    f.file.sync_all().map_err(failed)?;
    totals.bytes = f.size + text.len() as u64;
    totals.last_line_sha256 = Some(sha256_hex(last.as_bytes()));
    // Another writer appended meanwhile: the totals would not describe the ledger;
    // the next load rebuilds them instead.
    let size_now = f.file.metadata().map_err(failed)?.len();
    if size_now != totals.bytes || entries.is_empty() {
        let _ = std::fs::remove_file(totals_path(ledger));
        return Ok(());
    }
    totals.write(ledger)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-ledger-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entry(id: &str, running_s: f64, i2t_end: f64) -> Value {
        json!({"hardware_id": id, "joints": [0, 1], "running_s": running_s,
               "shocks": {"acceleration": [1, 2], "jerk": [0, 0]},
               "torque_peak_nm": [3.0, 4.0], "i2t_peak": [0.5, i2t_end],
               "i2t_end": [0.25, i2t_end], "t_end_unix_s": 1.7e9})
    }

    /// The totals a run keeps beside the ledger are the totals a scan of the whole
    /// ledger gives, after every append; an append by another writer (the totals file
    /// no longer vouching for the ledger) is picked up by a scan.
    #[test]
    fn appends_keep_the_totals_file_equal_to_a_scan() {
        let d = dir("append");
        let ledger = d.join("wear.jsonl");
        let (t, rebuilt) = LedgerTotals::load(&ledger).unwrap();
        assert_eq!((t.lines, rebuilt), (0, false));
        append_ledger(
            &ledger,
            &mut [entry("a", 3600.0, 0.7), entry("b", 10.0, 0.1)],
        )
        .unwrap();
        let mut e = [entry("a", 1800.0, 0.9)];
        append_ledger(&ledger, &mut e).unwrap();
        assert_eq!(e[0]["running_hours_total"], json!(1.5));
        let (scanned, _) = LedgerTotals::scan(&ledger).unwrap();
        let (loaded, rebuilt) = LedgerTotals::load(&ledger).unwrap();
        assert!(!rebuilt, "the totals file vouches for the ledger");
        assert_eq!(loaded, scanned);
        assert_eq!(loaded.lines, 3);
        let a = &loaded.units["a"];
        assert_eq!((a.runs, a.running_s, a.shocks), (2, 5400.0, [6, 0, 0, 0]));
        assert_eq!(a.last.line, 3);
        assert_eq!(a.last.i2t_end, Some(vec![0.25, 0.9]));
        // Another writer's line: the totals file no longer vouches; a scan is taken.
        let mut text = std::fs::read_to_string(&ledger).unwrap();
        text.push_str(&entry("a", 60.0, 0.2).to_string());
        text.push('\n');
        std::fs::write(&ledger, &text).unwrap();
        let (loaded, rebuilt) = LedgerTotals::load(&ledger).unwrap();
        assert!(rebuilt);
        assert_eq!(loaded.units["a"].running_s, 5460.0);
        let mut e = [entry("a", 40.0, 0.2)];
        append_ledger(&ledger, &mut e).unwrap();
        assert_eq!(e[0]["running_hours_total"], json!(5500.0 / 3600.0));
        assert_eq!(
            LedgerTotals::load(&ledger).unwrap().0,
            LedgerTotals::scan(&ledger).unwrap().0
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A run's end reads the ledger's tail, not the ledger: with the totals file
    /// vouching for it, an append succeeds even though an early line (same length, the
    /// last line and the size unchanged) no longer parses, which a scan would refuse.
    #[test]
    fn an_append_reads_the_tail_when_the_totals_vouch_for_the_ledger() {
        let d = dir("tail");
        let ledger = d.join("wear.jsonl");
        append_ledger(&ledger, &mut [entry("a", 10.0, 0.5)]).unwrap();
        append_ledger(&ledger, &mut [entry("a", 20.0, 0.6)]).unwrap();
        let text = std::fs::read_to_string(&ledger).unwrap();
        let broken = text.replacen('{', "[", 1);
        assert_eq!(broken.len(), text.len());
        std::fs::write(&ledger, &broken).unwrap();
        assert!(LedgerTotals::scan(&ledger).is_err(), "a scan reads line 1");
        let mut e = [entry("a", 30.0, 0.7)];
        append_ledger(&ledger, &mut e).unwrap();
        assert_eq!(e[0]["running_hours_total"], json!(60.0 / 3600.0));
        let (t, rebuilt) = LedgerTotals::load(&ledger).unwrap();
        assert!(!rebuilt);
        assert_eq!((t.lines, t.units["a"].runs), (3, 3));
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Values no run records are refused with the line named: a negative, absurd,
    /// denormal running time; a load that is no load; a line that is no ledger line;
    /// a last line cut short.
    #[test]
    fn absurd_values_are_refused_with_their_line() {
        let d = dir("absurd");
        let ledger = d.join("wear.jsonl");
        let good = entry("a", 1.0, 0.5).to_string();
        let cases: [(String, &str); 8] = [
            (
                entry("a", -5.0, 0.5).to_string(),
                "line 2: running_s = -5: expected the run's running time, 0 to 31622400 s",
            ),
            (
                entry("a", 1e308, 0.5).to_string(),
                "line 2: running_s = 1e308: expected",
            ),
            (
                entry("a", 5e-324, 0.5).to_string(),
                "line 2: running_s = 5e-324: expected",
            ),
            (
                entry("a", 1.0, 1e9).to_string(),
                "line 2: i2t_peak holds 1e9: expected 0 to 100",
            ),
            (
                entry("a", 1.0, -0.5).to_string(),
                "line 2: i2t_peak holds -0.5",
            ),
            (
                r#"{"hardware_id":"a"}"#.to_string(),
                "line 2: not a wear ledger line: missing field `running_s`",
            ),
            (
                r#"{"hardware_id":"","running_s":1}"#.to_string(),
                "line 2: hardware_id \"\"",
            ),
            ("[1, 2".to_string(), "line 2: not a wear ledger line"),
        ];
        for (line, says) in cases {
            std::fs::write(&ledger, format!("{good}\n{line}\n")).unwrap();
            let _ = std::fs::remove_file(totals_path(&ledger));
            let e = LedgerTotals::scan(&ledger).unwrap_err().to_string();
            assert!(e.contains(says), "{line}: {e}");
            let e = LedgerTotals::load(&ledger).unwrap_err().to_string();
            assert!(e.contains(says), "{line}: {e}");
            let e = append_ledger(&ledger, &mut [entry("a", 1.0, 0.5)])
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{line}: {e}");
        }
        std::fs::write(&ledger, format!("{good}\n{good}")).unwrap();
        let e = LedgerTotals::scan(&ledger).unwrap_err().to_string();
        assert!(
            e.contains("line 2: has no newline: the ledger was cut short"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
