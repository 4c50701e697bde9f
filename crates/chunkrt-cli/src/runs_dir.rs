//! `chunkrt run --runs-dir DIR`: every run in a directory of its own that nothing
//! overwrites, what a service restarted by systemd needs (the run that faulted is still
//! there after the restart).
//!
//! - Each run gets `DIR/NNNNNN-YYYYmmddTHHMMSSZ`: a sequence number one past the
//!   highest in `DIR` (the order does not depend on the clock: a host that boots
//!   without a real-time clock still orders its runs), then the UTC start time for
//!   people. The directory is made with `mkdir`, which fails rather than reuse one:
//!   two processes racing for a number take the next.
//! - The run holds an exclusive `flock` on `run.lock` in its directory for as long as
//!   the process lives (a SIGKILL releases it): retention never touches a locked run.
//! - `DIR/latest` is a symbolic link to the newest run, replaced atomically (a new
//!   link renamed over it); a `latest` that is not a link is refused, never removed.
//! - At the end the run writes `ending.json` (exit status and what happened, through a
//!   temporary file and a rename); a run without it was killed or is still running.
//! - Retention (`--keep N`, default 20): the newest N runs stay; an older run is
//!   removed only when its `ending.json` says it ended normally (exit status 0) and it
//!   is not locked. A run that ended in a fault or was killed is kept unless
//!   `--prune-faulted`, and even then a locked one (still running) is kept.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The link to the newest run.
pub const LATEST: &str = "latest";
/// The lock a live run holds.
pub const LOCK: &str = "run.lock";
/// How a run ended, written at its end.
pub const ENDING: &str = "ending.json";

/// A run's directory, claimed: its lock is held while this lives.
pub struct Claimed {
    /// The run's directory (its `--out`).
    pub dir: PathBuf,
    _lock: File,
}

/// One run directory found in a runs directory.
#[derive(Debug)]
pub struct RunEntry {
    pub seq: u64,
    pub dir: PathBuf,
}

/// Whether `name` is a run directory's name (`NNNNNN-…`); its sequence number.
fn run_seq(name: &str) -> Option<u64> {
    let (seq, rest) = name.split_once('-')?;
    if seq.len() < 6 || !seq.bytes().all(|b| b.is_ascii_digit()) || rest.is_empty() {
        return None;
    }
    seq.parse().ok()
}

/// The run directories in `root`, oldest first.
pub fn runs(root: &Path) -> Result<Vec<RunEntry>, String> {
    let rd = std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut out = Vec::new();
    for ent in rd.flatten() {
        let is_dir = ent.file_type().is_ok_and(|t| t.is_dir());
        if let (true, Some(seq)) = (is_dir, ent.file_name().to_str().and_then(run_seq)) {
            out.push(RunEntry {
                seq,
                dir: ent.path(),
            });
        }
    }
    out.sort_by_key(|r| r.seq);
    Ok(out)
}

/// `YYYYmmddTHHMMSSZ` of the wall clock (UTC).
fn utc_stamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let t = libc::time_t::try_from(secs).unwrap_or(0);
    // SAFETY: gmtime_r writes only the `tm` it is given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::gmtime_r(&t, &mut tm) }.is_null() {
        return "unknown".into();
    }
    format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Takes `flock(LOCK_EX | LOCK_NB)` on `file`; false when another process holds it.
fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: flock on a descriptor this `File` owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Whether a live process holds `dir`'s lock.
fn locked(dir: &Path) -> bool {
    match File::open(dir.join(LOCK)) {
        // Released at once when `f` drops.
        Ok(f) => !try_lock(&f).unwrap_or(false),
        Err(_) => false,
    }
}

/// Makes the next run's directory in `root` (created if missing), locks it and points
/// `latest` at it.
pub fn claim(root: &Path) -> Result<Claimed, String> {
    if let Ok(m) = std::fs::symlink_metadata(root.join(LATEST)) {
        if !m.file_type().is_symlink() {
            return Err(format!(
                "{} is not a symbolic link: --runs-dir keeps `latest` as a link to the \
                 newest run and will not replace anything else; move it away",
                root.join(LATEST).display()
            ));
        }
    }
    std::fs::create_dir_all(root).map_err(|e| format!("creating {}: {e}", root.display()))?;
    let stamp = utc_stamp();
    let mut next = runs(root)?.last().map_or(1, |r| r.seq + 1);
    let (name, dir) = loop {
        let name = format!("{next:06}-{stamp}");
        let dir = root.join(&name);
        match std::fs::create_dir(&dir) {
            Ok(()) => break (name, dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => next += 1,
            Err(e) => return Err(format!("creating {}: {e}", dir.display())),
        }
    };
    let lock = File::options()
        .create_new(true)
        .write(true)
        .open(dir.join(LOCK))
        .map_err(|e| format!("creating {}: {e}", dir.join(LOCK).display()))?;
    if !try_lock(&lock).map_err(|e| format!("locking {}: {e}", dir.join(LOCK).display()))? {
        return Err(format!("{} is locked by another process", dir.display()));
    }
    let tmp = root.join(format!(".{LATEST}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&name, &tmp)
        .and_then(|()| std::fs::rename(&tmp, root.join(LATEST)))
        .map_err(|e| format!("pointing {} at {name}: {e}", root.join(LATEST).display()))?;
    Ok(Claimed { dir, _lock: lock })
}

/// How a run ended, as its `ending.json` says: `Some(status)`, or `None` when it has
/// none (killed, or still running) or it cannot be read.
pub fn exit_status_of(dir: &Path) -> Option<u8> {
    let bytes = chunkrt_files::read_bounded(&dir.join(ENDING), 64 << 10, "ending.json").ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("exit_status")?
        .as_u64()
        .and_then(|s| u8::try_from(s).ok())
}

/// What retention removed and what it could not.
#[derive(Debug, Default)]
pub struct Pruned {
    pub removed: Vec<PathBuf>,
    pub errors: Vec<String>,
}

/// Applies the retention rule to `root` (see the module's text); `current` is never
/// removed whatever its place.
pub fn prune(root: &Path, keep: usize, prune_faulted: bool, current: &Path) -> Pruned {
    let mut pruned = Pruned::default();
    let all = match runs(root) {
        Ok(r) => r,
        Err(e) => {
            pruned.errors.push(e);
            return pruned;
        }
    };
    let older = all.len().saturating_sub(keep.max(1));
    for run in &all[..older] {
        if run.dir == current || locked(&run.dir) {
            continue;
        }
        let normal = exit_status_of(&run.dir) == Some(0);
        if !(normal || prune_faulted) {
            continue;
        }
        match std::fs::remove_dir_all(&run.dir) {
            Ok(()) => pruned.removed.push(run.dir.clone()),
            Err(e) => pruned.errors.push(format!("{}: {e}", run.dir.display())),
        }
    }
    pruned
}

/// Writes `ending.json` in the run's directory (a temporary file renamed into place).
pub fn write_ending(dir: &Path, status: u8, ending: &str) -> Result<(), String> {
    let body = serde_json::json!({ "exit_status": status, "ending": ending });
    let tmp = dir.join(format!(".{ENDING}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(format!("{body}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(ENDING))
    };
    write().map_err(|e| format!("{}: {e}", dir.join(ENDING).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_names_are_told_from_other_entries() {
        assert_eq!(run_seq("000042-20261207T093000Z"), Some(42));
        assert_eq!(run_seq("1234567-x"), Some(1_234_567));
        assert_eq!(run_seq("latest"), None);
        assert_eq!(run_seq("00042-x"), None);
        assert_eq!(run_seq("000042-"), None);
        assert_eq!(run_seq("00004a-x"), None);
    }

    #[test]
    fn a_locked_run_is_kept_and_a_normal_old_one_goes() {
        let root = std::env::temp_dir().join(format!("chunkrt-runs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let root = TempRoot(root);
        let a = claim(root.path()).unwrap();
        write_ending(&a.dir, 0, "normal").unwrap();
        // `a`'s process has ended: its lock is released (a lock this process holds is
        // held against its own other opens of the file too).
        let a_dir = a.dir.clone();
        drop(a);
        let b = claim(root.path()).unwrap();
        let c = claim(root.path()).unwrap();
        // `b` is still held (its lock lives): kept, though it is old and unfinished.
        let p = prune(root.path(), 1, true, &c.dir);
        assert_eq!(p.removed, vec![a_dir], "{p:?}");
        assert!(b.dir.is_dir() && c.dir.is_dir());
        let link = std::fs::read_link(root.path().join(LATEST)).unwrap();
        assert_eq!(root.path().join(link), c.dir);
        drop(b);
    }

    struct TempRoot(PathBuf);
    impl TempRoot {
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for TempRoot {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
