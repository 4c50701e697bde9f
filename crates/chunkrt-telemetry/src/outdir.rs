//! The run's output directory: refusing one that already holds a run, proving
//! before anything moves that the disk can take the records, and writing the
//! report so that it is either whole or absent.
//!
//! At start [`Reserve::claim`] writes [`RESERVE_BYTES`] of real bytes to a reserve
//! file (a full disk fails here, not after the run) and keeps it for the whole
//! run; [`write_report`] releases it just before writing `report.json`, so a disk
//! that the logs filled during the run still has room for the report.
//!
//! The reserve file is unlinked as soon as it is created and held only by its open
//! descriptor: its blocks stay claimed until the descriptor is closed, and a run
//! killed by SIGKILL leaves no `.chunkrt-reserve` behind (the kernel frees them).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The reserves held, by directory: [`write_report`] closes the one of its directory
/// (the runtime that writes the report does not hold the [`Reserve`] itself).
static HELD: Mutex<Vec<(PathBuf, File)>> = Mutex::new(Vec::new());

/// Closes the reserve held for `dir` (its space returns to the file system).
fn release(dir: &Path) {
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    held.retain(|(d, _)| d != dir);
}

/// Files a run writes; a directory holding any of them holds a run (later
/// recording segments, `recording.N.mcap`, go with `recording.mcap`).
pub const RUN_FILES: &[&str] = &[
    "report.json",
    "events.jsonl",
    "gate.jsonl",
    "recording.mcap",
    "timeline.svg",
    "timeline.png",
    "latency.svg",
    "latency.png",
];

/// Name of the reserve file kept in the directory during a run.
pub const RESERVE_NAME: &str = ".chunkrt-reserve";

/// Bytes claimed at start and released for the report: the largest report (10 000
/// events at about 200 bytes) with room to spare.
pub const RESERVE_BYTES: usize = 4 << 20;

/// The run files present in `dir` (empty: it holds no run).
pub fn run_files_in(dir: &Path) -> Vec<&'static str> {
    RUN_FILES
        .iter()
        .copied()
        .filter(|f| dir.join(f).exists())
        .collect()
}

/// Removes a previous run's files (and a reserve a killed run left behind): its
/// recording segments and a bench's `.hgrm` percentile files too, so that nothing of
/// the old run sits beside the new report.
pub fn clear_run(dir: &Path) -> std::io::Result<()> {
    let segments: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| (n.starts_with("recording.") && n.ends_with(".mcap")) || n.ends_with(".hgrm"))
        .collect();
    let names = RUN_FILES
        .iter()
        .map(|s| s.to_string())
        .chain([RESERVE_NAME.to_string()])
        .chain(segments);
    for f in names {
        match std::fs::remove_file(dir.join(f)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    clear_interventions(&dir.join("interventions"))
}

/// The old run's intervention records (`<sha256>.jsonl`), and their directory once
/// empty (a file of the user's there keeps it).
fn clear_interventions(d: &Path) -> std::io::Result<()> {
    let Ok(entries) = std::fs::read_dir(d) else {
        return Ok(());
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let record = name.len() == 64 + ".jsonl".len()
            && name.ends_with(".jsonl")
            && name[..64].bytes().all(|b| b.is_ascii_hexdigit());
        if record {
            std::fs::remove_file(e.path())?;
        }
    }
    let _ = std::fs::remove_dir(d);
    Ok(())
}

/// Space claimed in the output directory for the report: an unlinked file held open
/// (see the module doc); released on drop, or earlier by [`write_report`].
#[derive(Debug)]
pub struct Reserve {
    dir: PathBuf,
}

impl Reserve {
    /// Creates `dir` if needed and writes `bytes` real bytes to a reserve file that
    /// is unlinked at once and kept open (synced, so that a disk that cannot hold
    /// them fails now).
    pub fn claim(dir: &Path, bytes: usize) -> std::io::Result<Reserve> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(RESERVE_NAME);
        let mut f = File::create(&path)?;
        // Unlinked before its first byte: a SIGKILL from here on leaves no file,
        // and the blocks written below stay claimed while `f` is open.
        std::fs::remove_file(&path)?;
        let block = vec![0u8; 64 * 1024];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(block.len());
            f.write_all(&block[..n])?;
            left -= n;
        }
        f.sync_data()?;
        let dir = dir.to_path_buf();
        release(&dir);
        HELD.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((dir.clone(), f));
        Ok(Reserve { dir })
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        release(&self.dir);
    }
}

/// Writes `bytes` to `dir/name` through a temporary file and a rename: a reader
/// (or a crash) sees the old file, the new one whole, or none; never half of one.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let result = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))?;
        // The rename itself lasts once the directory is synced; not every file
        // system lets a directory be synced, and the file is whole either way.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Releases the reserve (if the run claimed one) and writes `report.json`.
pub fn write_report(dir: &Path, json: &str) -> std::io::Result<()> {
    release(dir);
    write_atomic(dir, "report.json", json.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-outdir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The size of the deleted reserve file of `d` that this process holds open, as
    /// the kernel lists its descriptors (`/proc/self/fd`).
    fn held_bytes(d: &Path) -> Option<u64> {
        let deleted = format!("{} (deleted)", d.join(RESERVE_NAME).display());
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok())
            .find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == deleted.as_str()))
            .map(|e| std::fs::metadata(e.path()).unwrap().len())
    }

    #[test]
    fn a_reserve_leaves_no_file_and_is_released_when_dropped() {
        let d = temp("drop");
        let r = Reserve::claim(&d, 4096).unwrap();
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            0,
            "no file in the dir"
        );
        assert_eq!(held_bytes(&d), Some(4096));
        drop(r);
        assert_eq!(held_bytes(&d), None);
    }

    #[test]
    fn a_report_replaces_the_old_one_whole_and_leaves_no_temporary_file() {
        let d = temp("atomic");
        std::fs::write(d.join("report.json"), "old").unwrap();
        let r = Reserve::claim(&d, 1000).unwrap();
        assert!(!d.join(RESERVE_NAME).exists(), "unlinked at once");
        assert_eq!(held_bytes(&d), Some(1000), "held open");
        write_report(&d, "{\"new\": 1}").unwrap();
        assert_eq!(held_bytes(&d), None, "reserve released");
        drop(r);
        assert_eq!(
            std::fs::read_to_string(d.join("report.json")).unwrap(),
            "{\"new\": 1}"
        );
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["report.json"]);
    }

    #[test]
    fn a_directory_with_run_files_holds_a_run_until_cleared() {
        let d = temp("holds");
        assert!(run_files_in(&d).is_empty());
        std::fs::write(d.join("events.jsonl"), "").unwrap();
        std::fs::write(d.join("notes.txt"), "mine").unwrap();
        assert_eq!(run_files_in(&d), ["events.jsonl"]);
        clear_run(&d).unwrap();
        assert!(run_files_in(&d).is_empty());
        assert!(d.join("notes.txt").exists(), "only run files are removed");
        // The old run's intervention records go, a user's file beside them stays.
        let iv = d.join("interventions");
        std::fs::create_dir(&iv).unwrap();
        std::fs::write(iv.join(format!("{}.jsonl", "ab".repeat(32))), "{}").unwrap();
        clear_run(&d).unwrap();
        assert!(!iv.exists(), "the emptied directory goes too");
        std::fs::create_dir(&iv).unwrap();
        std::fs::write(iv.join(format!("{}.jsonl", "cd".repeat(32))), "{}").unwrap();
        std::fs::write(iv.join("mine.jsonl"), "{}").unwrap();
        clear_run(&d).unwrap();
        let left: Vec<_> = std::fs::read_dir(&iv)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["mine.jsonl"]);
    }
}
