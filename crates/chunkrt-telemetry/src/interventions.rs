//! Intervention records: every withdrawal of the policy's authority, gate saturation,
//! following-error excursion, backend fault and operator stop written as a standalone file with the
//! full-rate cycles around it, cut from an in-memory ring whether or not the
//! recording is on, named by its SHA-256 and listed in the report (ready to cite from
//! a policy manifest's `negative_event_registry`).
//!
//! A record is `interventions/<sha256>.jsonl`: a first line naming the trigger
//! (`{"intervention": kind, "t_s", "detail", "before_s", "after_s", "cycles_before",
//! "cycles_after", "complete"}`), then one line per control cycle as the recording's
//! `cycle` channel writes it, oldest first. The SHA-256 is of the file's bytes.
//! Runs on the telemetry thread (never the control thread): it may allocate, but its
//! memory is bounded whatever the run's length: the ring is allocated once, whole,
//! and holds the windows before and after; an open record is its trigger alone, and
//! its cycles go from the ring to the file through a buffered writer when its window
//! after is full (no copy of the window, no file-sized string).

use crate::records::{CycleRecord, EventRecord};
use chunkrt_core::{Mode, ModeChangeReason, MonoTime};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Most records one run writes (a fault storm does not fill the disk).
pub const MAX_RECORDS: usize = 16;

/// A record written, as the report lists it.
#[derive(Clone, Debug, Serialize)]
pub struct InterventionRef {
    /// `withdrawal`, `gate_saturated`, `following_error`, `backend_fault` or
    /// `operator_stop`.
    pub kind: &'static str,
    /// What triggered it (the reason, joint, constraint, error).
    pub detail: String,
    /// When (s from the run's start).
    pub t_s: f64,
    /// The file, relative to the run directory.
    pub file: String,
    /// SHA-256 of the file (hex).
    pub sha256: String,
    /// Cycles kept up to the trigger, and after it.
    pub cycles_before: usize,
    /// Cycles after it.
    pub cycles_after: usize,
    /// False when the run ended before the window after it was full.
    pub complete: bool,
}

struct Pending {
    kind: &'static str,
    detail: String,
    t: MonoTime,
}

/// The ring of recent cycles and the records being cut from it.
pub struct InterventionLog {
    dir: PathBuf,
    run_dir: PathBuf,
    t0: MonoTime,
    before_ns: u64,
    after_ns: u64,
    ring: VecDeque<CycleRecord>,
    /// Cycles the ring holds at most.
    ring_cycles: usize,
    pending: Vec<Pending>,
    written: Vec<InterventionRef>,
    /// Triggers not written: past [`MAX_RECORDS`], or a write that failed.
    pub dropped: u64,
    /// Records whose write failed (among `dropped`).
    pub failed: u64,
    /// The last write error.
    pub error: Option<String>,
}

impl InterventionLog {
    /// Records into `run_dir/interventions`, `before_s` and `after_s` around each
    /// trigger; `ring_cycles`: cycles the ring holds (the windows before and after
    /// plus the telemetry's drain interval, so a trigger drained late still finds its
    /// past when its window after closes).
    pub fn new(
        run_dir: &Path,
        t0: MonoTime,
        before_s: f64,
        after_s: f64,
        ring_cycles: usize,
    ) -> Self {
        InterventionLog {
            dir: run_dir.join("interventions"),
            run_dir: run_dir.to_path_buf(),
            t0,
            before_ns: (before_s * 1e9) as u64,
            after_ns: (after_s * 1e9) as u64,
            ring: VecDeque::with_capacity(ring_cycles.max(16)),
            ring_cycles: ring_cycles.max(16),
            pending: Vec::new(),
            written: Vec::new(),
            dropped: 0,
            failed: 0,
            error: None,
        }
    }

    /// The records written so far.
    pub fn written(&self) -> &[InterventionRef] {
        &self.written
    }

    /// One cycle: kept in the ring, added to the records still open, and those whose
    /// window after is now full written.
    pub fn cycle(&mut self, r: &CycleRecord) {
        if self.ring.len() >= self.ring_cycles {
            self.ring.pop_front();
        }
        self.ring.push_back(*r);
        let mut k = 0;
        while k < self.pending.len() {
            if r.t_deadline.saturating_since(self.pending[k].t) > self.after_ns {
                let p = self.pending.remove(k);
                self.write(p, true);
            } else {
                k += 1;
            }
        }
    }

    /// One event: a record opens when it is an intervention.
    pub fn event(&mut self, e: &EventRecord) {
        let Some((kind, t, detail)) = trigger(e) else {
            return;
        };
        if self.written.len() + self.pending.len() >= MAX_RECORDS {
            self.dropped += 1;
            return;
        }
        self.pending.push(Pending { kind, detail, t });
    }

    /// The ring's cycles in `p`'s window, oldest first: from `before` up to the trigger
    /// and `after` past it. The ring may hold cycles after the trigger when the event
    /// is drained (the rings are drained cycles first): those count as after it.
    fn window<'a>(&'a self, p: &Pending) -> impl Iterator<Item = &'a CycleRecord> + 'a {
        let (t, after) = (p.t, self.after_ns);
        let from = t.as_ns().saturating_sub(self.before_ns);
        self.ring.iter().filter(move |c| {
            c.t_deadline.as_ns() >= from && c.t_deadline.saturating_since(t) <= after
        })
    }

    /// The run ended: the records still open are written with what they have.
    pub fn finish(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            self.write(p, false);
        }
    }

    fn write(&mut self, p: Pending, complete: bool) {
        let t_s = |t: MonoTime| t.diff_ns(self.t0) as f64 * 1e-9;
        let (mut before, mut after) = (0, 0);
        for c in self.window(&p) {
            if c.t_deadline <= p.t {
                before += 1;
            } else {
                after += 1;
            }
        }
        let head = serde_json::json!({
            "intervention": p.kind,
            "detail": p.detail,
            "t_s": t_s(p.t),
            "before_s": self.before_ns as f64 * 1e-9,
            "after_s": self.after_ns as f64 * 1e-9,
            "cycles_before": before,
            "cycles_after": after,
            "complete": complete,
        });
        // Written under a temporary name while its digest is summed, then renamed to it:
        // a file named by a digest always holds the bytes the digest is of.
        let partial = self.dir.join(format!(".{}.partial", self.written.len()));
        let wrote = std::fs::create_dir_all(&self.dir)
            .and_then(|()| self.write_window(&partial, &head, &p))
            .and_then(|sha| {
                let path = self.dir.join(format!("{sha}.jsonl"));
                std::fs::rename(&partial, &path).map(|()| (sha, path))
            });
        let (sha, path) = match wrote {
            Ok(done) => done,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                self.dropped += 1;
                self.failed += 1;
                self.error = Some(format!("{}: {e}", partial.display()));
                return;
            }
        };
        self.written.push(InterventionRef {
            kind: p.kind,
            detail: p.detail,
            t_s: t_s(p.t),
            file: path
                .strip_prefix(&self.run_dir)
                .unwrap_or(&path)
                .display()
                .to_string(),
            sha256: sha,
            cycles_before: before,
            cycles_after: after,
            complete,
        });
    }

    /// The head line and `p`'s window, one line each, into `path`; the SHA-256 (hex)
    /// of the bytes written.
    fn write_window(
        &self,
        path: &Path,
        head: &serde_json::Value,
        p: &Pending,
    ) -> std::io::Result<String> {
        let mut out = Digesting {
            inner: std::io::BufWriter::new(std::fs::File::create(path)?),
            sha: Sha256::new(),
        };
        serde_json::to_writer(&mut out, head)?;
        out.write_all(b"\n")?;
        for c in self.window(p) {
            let t_s = c.t_wake.diff_ns(self.t0) as f64 * 1e-9;
            serde_json::to_writer(&mut out, &crate::recording::cycle_json(c, t_s))?;
            out.write_all(b"\n")?;
        }
        out.inner.flush()?;
        Ok(hex(&out.sha.finalize()))
    }
}

/// A writer that sums the SHA-256 of what passes through it.
struct Digesting<W> {
    inner: W,
    sha: Sha256,
}

impl<W: Write> Write for Digesting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The kind, time and detail of an intervention event; `None` for any other event.
/// A withdrawal is the executor leaving `Playing` for any reason but a stop
/// (`Shutdown`: the run's end, or an operator's stop, which is a record of its own):
/// a chunk that expired or ran out is one too.
fn trigger(e: &EventRecord) -> Option<(&'static str, MonoTime, String)> {
    match e {
        EventRecord::Mode(m) if m.from == Mode::Playing && m.to != Mode::Playing => (m.reason
            != ModeChangeReason::Shutdown)
            .then(|| ("withdrawal", m.t, format!("{:?}", m.reason))),
        EventRecord::GateSaturated {
            t,
            joint,
            constraint,
            cycles,
        } => Some((
            "gate_saturated",
            *t,
            format!(
                "joint {joint}: {} for {cycles} cycles",
                crate::names::constraint_name(*constraint)
            ),
        )),
        EventRecord::FollowingError {
            t,
            joint,
            error_rad,
            limit_rad,
        } => Some((
            "following_error",
            *t,
            format!("joint {joint}: {error_rad:.4} rad against a limit of {limit_rad} rad"),
        )),
        EventRecord::Backend { t, error } => Some(("backend_fault", *t, error.to_string())),
        EventRecord::ForceTripwire {
            t,
            force_n,
            limit_n,
            ..
        } => Some((
            "force_tripwire",
            *t,
            if force_n.is_finite() {
                format!("|F| {force_n:.1} N against a tripwire of {limit_n} N")
            } else {
                format!("no finite force reading (tripwire {limit_n} N)")
            },
        )),
        EventRecord::OperatorMark { t, episode, .. } => Some((
            "operator_intervention",
            *t,
            match episode {
                Some(e) => format!("episode {e} marked intervened"),
                None => "marked intervened (no episode running)".to_string(),
            },
        )),
        EventRecord::OperatorStop { t, signals } => Some((
            "operator_stop",
            *t,
            match signals {
                0 => "the stop flag".to_string(),
                n => format!("{n} stop signal(s)"),
            },
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chunkrt_core::ModeEvent;

    fn cycle(k: u64) -> CycleRecord {
        let t = MonoTime::from_ns(k * 10_000_000);
        CycleRecord {
            cycle: k,
            t_deadline: t,
            t_wake: t,
            dof: 1,
            ..CycleRecord::default()
        }
    }

    fn mode(t_s: f64, reason: ModeChangeReason) -> EventRecord {
        EventRecord::Mode(ModeEvent {
            t: MonoTime::from_ns((t_s * 1e9) as u64),
            from: Mode::Playing,
            to: Mode::Decelerating,
            reason,
        })
    }

    #[test]
    fn a_record_holds_the_window_around_its_trigger_and_is_named_by_its_digest() {
        let dir = std::env::temp_dir().join(format!("chunkrt-iv-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // 10 ms cycles; 2 s before, 1 s after; the ring holds both and a drain (3.2 s).
        let mut log = InterventionLog::new(&dir, MonoTime::from_ns(0), 2.0, 1.0, 320);
        // Drained as the telemetry thread drains: cycles up to 3.08 s, then the event
        // of 3.0 s (a domain exit), then the run's own stop (no record), more cycles.
        for k in 0..=308 {
            log.cycle(&cycle(k));
        }
        log.event(&mode(3.0, ModeChangeReason::OutOfDomain));
        log.event(&mode(3.5, ModeChangeReason::Shutdown));
        for k in 309..=500 {
            log.cycle(&cycle(k));
        }
        log.finish();
        let w = log.written();
        assert_eq!(w.len(), 1, "{w:?}");
        let r = &w[0];
        assert_eq!((r.kind, r.detail.as_str()), ("withdrawal", "OutOfDomain"));
        // 1.00 s to 3.00 s inclusive, then (3.00, 4.00] s.
        assert_eq!(
            (r.cycles_before, r.cycles_after, r.complete),
            (201, 100, true)
        );
        let text = std::fs::read_to_string(dir.join(&r.file)).unwrap();
        assert_eq!(r.file, format!("interventions/{}.jsonl", r.sha256));
        assert_eq!(hex(&Sha256::digest(text.as_bytes())), r.sha256);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1 + 301);
        assert_eq!(lines[0]["intervention"], "withdrawal");
        assert_eq!(lines[1]["cycle"], 100);
        assert_eq!(lines[301]["cycle"], 400);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn each_kind_of_intervention_opens_a_record_and_the_runs_own_stop_does_not() {
        let t = MonoTime::from_ns(1_000_000_000);
        let kinds: Vec<_> = [
            mode(1.0, ModeChangeReason::ChunkExpired),
            mode(1.0, ModeChangeReason::Shutdown),
            EventRecord::GateSaturated {
                t,
                joint: 2,
                constraint: chunkrt_core::Constraint::Braking,
                cycles: 5,
            },
            EventRecord::Backend {
                t,
                error: chunkrt_core::BackendError::DriveFault {
                    joint: 1,
                    code: 0x7500,
                },
            },
            EventRecord::FollowingError {
                t,
                joint: 0,
                error_rad: 0.07,
                limit_rad: 0.06,
            },
            EventRecord::OperatorStop { t, signals: 1 },
        ]
        .iter()
        .map(|e| trigger(e).map(|(k, _, _)| k))
        .collect();
        assert_eq!(
            kinds,
            [
                Some("withdrawal"),
                None,
                Some("gate_saturated"),
                Some("backend_fault"),
                Some("following_error"),
                Some("operator_stop")
            ]
        );
    }

    #[test]
    fn a_record_cut_short_by_the_end_says_so_and_a_storm_is_capped() {
        let dir = std::env::temp_dir().join(format!("chunkrt-iv-cap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut log = InterventionLog::new(&dir, MonoTime::from_ns(0), 0.5, 1.0, 100);
        for k in 0..=100 {
            log.cycle(&cycle(k));
        }
        for _ in 0..MAX_RECORDS + 5 {
            log.event(&mode(1.0, ModeChangeReason::FollowingError));
        }
        log.finish();
        assert_eq!(log.written().len(), MAX_RECORDS);
        assert_eq!(log.dropped, 5);
        let r = &log.written()[0];
        assert_eq!(
            (r.cycles_before, r.cycles_after, r.complete),
            (51, 0, false)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
