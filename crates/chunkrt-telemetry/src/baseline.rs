//! cyclictest beside the control loop: what the kernel allows, measured in the same
//! run with the same period, priority and CPU.
//!
//! cyclictest (Debian `rt-tests`) is the reference wake-latency measurement on
//! Linux. chunkrt's control loop sleeps the same way (`clock_nanosleep` to an
//! absolute deadline) and records the same quantity (`wake_latency` = actual wake -
//! deadline), so the ratio of the two says whether chunkrt's loop is as good as the
//! host allows; the absolute numbers say more about the host than about chunkrt.
//!
//! The two never run at once: each would perturb the other (same CPU, same
//! priority). `chunkrt bench --baseline cyclictest` measures them in alternating
//! segments, loop then cyclictest, several pairs ([`Baseline::alternating`]), with
//! the same `/dev/cpu_dma_latency` setting (held at 0 by both, or by neither:
//! `--laptop`). The report gives both distributions, the ratio of the merged
//! percentiles and its range over the pairs. cyclictest is stopped with SIGINT
//! after its segment and its histogram (`-h`, one bucket per microsecond) parsed.

use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long cyclictest may take to leave after SIGINT before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long cyclictest gets to fail at start-up (no permission, bad option).
const START_GRACE: Duration = Duration::from_millis(300);

/// The baseline could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// cyclictest is not installed.
    #[error(
        "`{program}` not found: install rt-tests (`apt-get install rt-tests`; \
         scripts/setup.sh does it) or run without --baseline"
    )]
    NotFound {
        /// The program looked for.
        program: String,
    },
    /// cyclictest could not be started or stopped.
    #[error("cyclictest: {0}")]
    Process(String),
    /// cyclictest exited by itself (before it was stopped).
    #[error("cyclictest exited early ({status}): {stderr}")]
    Exited {
        /// Exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Its output has no usable histogram.
    #[error("cyclictest output: {0}")]
    Parse(String),
}

/// How to run cyclictest: the control loop's period, priority and CPU.
#[derive(Clone, Debug)]
pub struct CyclictestSpec {
    /// The program (default `cyclictest`, found on `PATH`).
    pub program: PathBuf,
    /// Period in microseconds (`-i`).
    pub period_us: u64,
    /// SCHED_FIFO priority (`-p`).
    pub priority: u8,
    /// CPU to pin to (`-a`); `None`: not pinned.
    pub cpu: Option<usize>,
    /// Largest latency tracked by the histogram (`-h`), microseconds; larger ones are
    /// counted as overflows.
    pub histogram_us: u64,
    /// Hold `/dev/cpu_dma_latency` at 0 while it runs (cyclictest's default), as the
    /// control loop does with `control.hold_cpu_dma_latency`; false: `--laptop`.
    pub hold_dma_latency: bool,
}

impl CyclictestSpec {
    /// The spec for a control loop; the histogram covers five periods (at least 10 ms).
    pub fn for_loop(period_ns: u64, priority: u8, cpu: Option<usize>) -> Self {
        let period_us = (period_ns / 1000).max(1);
        CyclictestSpec {
            program: PathBuf::from("cyclictest"),
            period_us,
            priority,
            cpu,
            histogram_us: (5 * period_us).max(10_000),
            hold_dma_latency: true,
        }
    }

    /// The arguments: mlockall, one thread, absolute sleeps (the default), quiet
    /// (only the histogram at exit), running until stopped.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "-m".to_string(),
            "-p".into(),
            self.priority.to_string(),
            "-i".into(),
            self.period_us.to_string(),
            "-t1".into(),
            "-h".into(),
            self.histogram_us.to_string(),
            "-q".into(),
        ];
        if let Some(cpu) = self.cpu {
            a.push("-a".into());
            a.push(cpu.to_string());
        }
        if !self.hold_dma_latency {
            a.push("--laptop".into());
        }
        a
    }

    /// The command line, for the report.
    pub fn command_line(&self) -> String {
        format!("{} {}", self.program.display(), self.args().join(" "))
    }
}

/// A running cyclictest.
pub struct Cyclictest {
    child: Child,
    spec: CyclictestSpec,
}

impl Cyclictest {
    /// Starts cyclictest and checks that it is still running after a short grace
    /// period (a refused priority makes it exit at once).
    pub fn start(spec: &CyclictestSpec) -> Result<Cyclictest, BaselineError> {
        let mut child = Command::new(&spec.program)
            .args(spec.args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::NotFound {
                    BaselineError::NotFound {
                        program: spec.program.display().to_string(),
                    }
                } else {
                    BaselineError::Process(format!("cannot start {}: {e}", spec.program.display()))
                }
            })?;
        std::thread::sleep(START_GRACE);
        match child.try_wait() {
            Ok(None) => Ok(Cyclictest {
                child,
                spec: spec.clone(),
            }),
            Ok(Some(status)) => {
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut stderr);
                }
                Err(BaselineError::Exited {
                    status: status.to_string(),
                    stderr: stderr.trim().to_string(),
                })
            }
            Err(e) => Err(BaselineError::Process(e.to_string())),
        }
    }

    /// Stops cyclictest with SIGINT (it then prints its histogram) and parses it.
    pub fn stop(mut self) -> Result<CyclictestHistogram, BaselineError> {
        let pid = self.child.id() as libc::pid_t;
        // Its output can exceed a pipe's buffer: read both streams while it exits.
        let mut out = self.child.stdout.take();
        let mut err = self.child.stderr.take();
        let out_reader = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(o) = out.as_mut() {
                let _ = o.read_to_string(&mut s);
            }
            s
        });
        let err_reader = std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(e) = err.as_mut() {
                let _ = e.read_to_string(&mut s);
            }
            s
        });
        // SAFETY: kill has no memory-safety preconditions; `pid` is our own child,
        // which has not been waited for, so the id cannot have been reused.
        let rc = unsafe { libc::kill(pid, libc::SIGINT) };
        if rc != 0 {
            return Err(BaselineError::Process(format!(
                "cannot signal it: {}",
                std::io::Error::last_os_error()
            )));
        }
        let t0 = Instant::now();
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if t0.elapsed() > STOP_TIMEOUT => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(BaselineError::Process(format!(
                        "did not stop within {STOP_TIMEOUT:?} of SIGINT; killed"
                    )));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(e) => return Err(BaselineError::Process(e.to_string())),
            }
        };
        let stdout = out_reader.join().unwrap_or_default();
        let stderr = err_reader.join().unwrap_or_default();
        if !status.success() && stdout.trim().is_empty() {
            return Err(BaselineError::Exited {
                status: status.to_string(),
                stderr: stderr.trim().to_string(),
            });
        }
        let mut h = parse_histogram(&stdout)?;
        h.histogram_us = self.spec.histogram_us;
        Ok(h)
    }

    /// The spec it runs with.
    pub fn spec(&self) -> &CyclictestSpec {
        &self.spec
    }
}

impl Drop for Cyclictest {
    fn drop(&mut self) {
        // Stopped without `stop` (an error elsewhere): do not leave it running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// cyclictest's histogram of one thread (microsecond buckets).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CyclictestHistogram {
    /// `(latency_us, count)` for every non-empty bucket, ascending.
    pub buckets: Vec<(u64, u64)>,
    /// Samples at or above the histogram's limit (their values are unknown, at most `max_us`).
    pub overflows: u64,
    /// `# Min Latencies`.
    pub min_us: Option<u64>,
    /// `# Avg Latencies`.
    pub avg_us: Option<u64>,
    /// `# Max Latencies`.
    pub max_us: Option<u64>,
    /// The histogram's limit (`-h`), when known.
    pub histogram_us: u64,
}

fn numbers(s: &str) -> Option<Vec<u64>> {
    s.split_whitespace()
        .map(|t| t.parse::<u64>().ok())
        .collect()
}

/// Parses cyclictest's `-h`/`-H` output: bucket rows `LATENCY_US COUNT [COUNT...]`
/// (the first count column is the first thread) and `# Key: value` summary lines;
/// anything else (warnings, the `/dev/cpu_dma_latency` note) is ignored.
pub fn parse_histogram(text: &str) -> Result<CyclictestHistogram, BaselineError> {
    let mut h = CyclictestHistogram::default();
    let mut rows = 0usize;
    let mut overflow_line = false;
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix('#') {
            let Some((key, value)) = rest.split_once(':') else {
                continue;
            };
            let first = value
                .split_whitespace()
                .next()
                .and_then(|t| t.parse::<u64>().ok());
            match key.trim() {
                "Min Latencies" => h.min_us = first,
                "Avg Latencies" => h.avg_us = first,
                "Max Latencies" => h.max_us = first,
                "Histogram Overflows" => {
                    h.overflows = first.ok_or_else(|| {
                        BaselineError::Parse(format!("unreadable overflow count in `{line}`"))
                    })?;
                    overflow_line = true;
                }
                _ => {}
            }
            continue;
        }
        match numbers(line) {
            Some(v) if v.len() >= 2 => {
                rows += 1;
                if v[1] > 0 {
                    h.buckets.push((v[0], v[1]));
                }
            }
            _ => {}
        }
    }
    if rows == 0 {
        return Err(BaselineError::Parse(
            "no histogram rows (was it run with -h?)".into(),
        ));
    }
    if !overflow_line {
        return Err(BaselineError::Parse(
            "no `# Histogram Overflows` line: the output is cut short".into(),
        ));
    }
    h.buckets.sort_unstable();
    if h.count() == 0 {
        return Err(BaselineError::Parse("no samples recorded".into()));
    }
    Ok(h)
}

impl CyclictestHistogram {
    /// Samples, overflows included.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|(_, c)| c).sum::<u64>() + self.overflows
    }

    /// The value at quantile `q` in microseconds. A quantile that falls among the
    /// overflows is reported as the maximum (an upper bound; `true` in the second field).
    pub fn quantile_us(&self, q: f64) -> (u64, bool) {
        let n = self.count();
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (us, c) in &self.buckets {
            seen += c;
            if seen >= rank {
                return (*us, false);
            }
        }
        (self.max_us.unwrap_or(self.histogram_us), true)
    }

    /// The largest sample, microseconds.
    pub fn max(&self) -> u64 {
        self.max_us
            .unwrap_or_else(|| self.buckets.last().map(|b| b.0).unwrap_or(0))
    }

    /// Adds another segment's samples (the average is dropped: not kept per bucket).
    pub fn merge(&mut self, o: &CyclictestHistogram) {
        let mut all: std::collections::BTreeMap<u64, u64> = self.buckets.iter().copied().collect();
        for (us, c) in &o.buckets {
            *all.entry(*us).or_insert(0) += c;
        }
        self.buckets = all.into_iter().collect();
        self.overflows += o.overflows;
        self.min_us = match (self.min_us, o.min_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.max_us = match (self.max_us, o.max_us) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.avg_us = None;
        self.histogram_us = self.histogram_us.max(o.histogram_us);
    }

    /// P50, P99 and max, nanoseconds; whether a percentile fell among the overflows.
    pub fn stats(&self) -> (WakeStats, bool) {
        let (p50, b50) = self.quantile_us(0.50);
        let (p99, b99) = self.quantile_us(0.99);
        (
            WakeStats {
                p50_ns: p50 * 1000,
                p99_ns: p99 * 1000,
                max_ns: self.max() * 1000,
            },
            b50 || b99,
        )
    }

    /// As an HDR histogram in nanoseconds (overflows at the maximum), for plots and
    /// `.hgrm` files.
    pub fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, crate::metrics::MAX_VALUE_NS, 3)
            .expect("constant bounds are valid");
        for (us, c) in &self.buckets {
            h.saturating_record_n((us * 1000).max(1), *c);
        }
        if self.overflows > 0 {
            h.saturating_record_n((self.max() * 1000).max(1), self.overflows);
        }
        h
    }
}

/// P50, P99 and max of a wake latency, nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WakeStats {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Largest.
    pub max_ns: u64,
}

impl WakeStats {
    /// Of an HDR histogram (nanoseconds); `None` when it is empty.
    pub fn of(h: &Histogram<u64>) -> Option<WakeStats> {
        (!h.is_empty()).then(|| WakeStats {
            p50_ns: h.value_at_quantile(0.50),
            p99_ns: h.value_at_quantile(0.99),
            max_ns: h.max(),
        })
    }
}

/// ours / cyclictest per statistic; absent where cyclictest measured 0.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ratios {
    /// P50 ratio.
    pub p50: Option<f64>,
    /// P99 ratio.
    pub p99: Option<f64>,
    /// Max ratio.
    pub max: Option<f64>,
}

/// One pair of segments: the loop alone, then cyclictest alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SegmentPair {
    /// The loop's wake latency in its segment (absent when it has no samples).
    pub chunkrt: Option<WakeStats>,
    /// cyclictest's in the segment after it.
    pub cyclictest: WakeStats,
    /// chunkrt / cyclictest in this pair.
    pub ratio: Ratios,
}

/// Smallest and largest of a ratio over the pairs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RatioRange {
    /// P50 ratio: (min, max) over the pairs.
    pub p50: Option<(f64, f64)>,
    /// P99 ratio.
    pub p99: Option<(f64, f64)>,
}

/// The report's `baseline` block.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Baseline {
    /// Always `cyclictest`.
    pub tool: &'static str,
    /// How the two were measured: `alternating segments` (never at once).
    pub method: &'static str,
    /// The exact command line.
    pub command: String,
    /// Length of each segment, seconds.
    pub segment_s: f64,
    /// cyclictest's samples over all its segments (overflows included).
    pub samples: u64,
    /// Samples beyond the histogram's limit.
    pub overflows: u64,
    /// The histogram's limit (`-h`), microseconds.
    pub histogram_us: u64,
    /// Whether a cyclictest percentile fell among the overflows (reported as the max).
    pub percentile_is_upper_bound: bool,
    /// cyclictest's wake latency, all its segments merged (microsecond resolution, in ns).
    pub cyclictest: WakeStats,
    /// chunkrt's `wake_latency`, all the loop's segments merged.
    pub chunkrt: Option<WakeStats>,
    /// chunkrt / cyclictest of the merged distributions: 1.0 means the loop wakes as
    /// well as the kernel allows.
    pub ratio: Ratios,
    /// The ratio's smallest and largest value over the pairs.
    pub ratio_range: RatioRange,
    /// Each pair.
    pub segments: Vec<SegmentPair>,
}

fn ratio(ours: u64, theirs: u64) -> Option<f64> {
    (theirs > 0).then(|| ours as f64 / theirs as f64)
}

fn ratios(ours: Option<WakeStats>, theirs: &WakeStats) -> Ratios {
    Ratios {
        p50: ours.and_then(|o| ratio(o.p50_ns, theirs.p50_ns)),
        p99: ours.and_then(|o| ratio(o.p99_ns, theirs.p99_ns)),
        max: ours.and_then(|o| ratio(o.max_ns, theirs.max_ns)),
    }
}

fn range(values: impl Iterator<Item = Option<f64>>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match (acc, v) {
        (acc, None) => acc,
        (None, Some(v)) => Some((v, v)),
        (Some((lo, hi)), Some(v)) => Some((lo.min(v), hi.max(v))),
    })
}

impl Baseline {
    /// The loop's and cyclictest's wake latency from `pairs` of alternating segments
    /// (the loop's histogram in nanoseconds, cyclictest's as it printed it).
    /// `None` when there is no pair.
    pub fn alternating(
        spec: &CyclictestSpec,
        segment_s: f64,
        pairs: &[(Histogram<u64>, CyclictestHistogram)],
    ) -> Option<Baseline> {
        let (first_loop, first_ct) = pairs.first()?;
        let mut ours = first_loop.clone();
        let mut theirs = first_ct.clone();
        for (l, c) in &pairs[1..] {
            let _ = ours.add(l);
            theirs.merge(c);
        }
        let (ct_stats, upper) = theirs.stats();
        let chunkrt = WakeStats::of(&ours);
        let segments: Vec<SegmentPair> = pairs
            .iter()
            .map(|(l, c)| {
                let ours = WakeStats::of(l);
                let (theirs, _) = c.stats();
                SegmentPair {
                    chunkrt: ours,
                    cyclictest: theirs,
                    ratio: ratios(ours, &theirs),
                }
            })
            .collect();
        Some(Baseline {
            tool: "cyclictest",
            method: "alternating segments",
            command: spec.command_line(),
            segment_s,
            samples: theirs.count(),
            overflows: theirs.overflows,
            histogram_us: spec.histogram_us,
            percentile_is_upper_bound: upper,
            cyclictest: ct_stats,
            chunkrt,
            ratio: ratios(chunkrt, &ct_stats),
            ratio_range: RatioRange {
                p50: range(segments.iter().map(|s| s.ratio.p50)),
                p99: range(segments.iter().map(|s| s.ratio.p99)),
            },
            segments,
        })
    }

    /// Side-by-side text table (microseconds) with the ratio row.
    pub fn table(&self) -> String {
        let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
        let r = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<22} {:>10} {:>10} {:>10}",
            "wake latency (us)", "P50", "P99", "max"
        );
        if let Some(o) = &self.chunkrt {
            let _ = writeln!(
                s,
                "{:<22} {:>10} {:>10} {:>10}",
                "chunkrt",
                us(o.p50_ns),
                us(o.p99_ns),
                us(o.max_ns)
            );
        }
        let c = &self.cyclictest;
        let _ = writeln!(
            s,
            "{:<22} {:>10} {:>10} {:>10}",
            "cyclictest",
            us(c.p50_ns),
            us(c.p99_ns),
            us(c.max_ns)
        );
        let _ = writeln!(
            s,
            "{:<22} {:>10} {:>10} {:>10}",
            "ratio chunkrt/cyclic",
            r(self.ratio.p50),
            r(self.ratio.p99),
            r(self.ratio.max)
        );
        let span = |r: Option<(f64, f64)>| {
            r.map(|(lo, hi)| format!("{lo:.2}-{hi:.2}"))
                .unwrap_or_else(|| "-".into())
        };
        let _ = writeln!(
            s,
            "{:<22} {:>10} {:>10} {:>10}",
            "  range over pairs",
            span(self.ratio_range.p50),
            span(self.ratio_range.p99),
            ""
        );
        let _ = writeln!(
            s,
            "{} pairs of {:.1} s segments (the loop alone, then cyclictest alone)",
            self.segments.len(),
            self.segment_s
        );
        let _ = writeln!(
            s,
            "cyclictest: {} samples, {} beyond its histogram limit of {} us{}",
            self.samples,
            self.overflows,
            self.histogram_us,
            if self.percentile_is_upper_bound {
                " (a percentile fell among them: shown as the max)"
            } else {
                ""
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../testdata/cyclictest-h100.txt");

    #[test]
    fn the_captured_histogram_parses_with_its_summary() {
        let h = parse_histogram(SAMPLE).unwrap();
        // Captured: 148 samples in the histogram + 2 overflows, min 25, avg 59, max 1139.
        assert_eq!(h.buckets.iter().map(|b| b.1).sum::<u64>(), 148);
        assert_eq!(h.overflows, 2);
        assert_eq!(h.count(), 150);
        assert_eq!(
            (h.min_us, h.avg_us, h.max_us),
            (Some(25), Some(59), Some(1139))
        );
        assert_eq!(h.buckets.first().unwrap().0, 25);
        let (p50, upper) = h.quantile_us(0.5);
        assert!((25..100).contains(&p50) && !upper);
        // The top 2 of 150 samples overflowed: P99 (rank 149) is among them.
        assert_eq!(h.quantile_us(0.99), (1139, true));
        assert_eq!(h.quantile_us(0.986), (h.buckets.last().unwrap().0, false));
        let hdr = h.to_hdr();
        assert_eq!(hdr.len(), 150);
        assert_eq!(
            hdr.value_at_quantile(1.0),
            hdr.highest_equivalent(1_139_000)
        );
    }

    #[test]
    fn quantiles_walk_the_buckets() {
        let text = "# Histogram\n000010 000050\n000011 000049\n000012 000001\n\
                    # Total: 000000100\n# Max Latencies: 00012\n# Histogram Overflows: 00000\n";
        let h = parse_histogram(text).unwrap();
        assert_eq!(h.quantile_us(0.5), (10, false));
        assert_eq!(h.quantile_us(0.51), (11, false));
        assert_eq!(h.quantile_us(0.99), (11, false));
        assert_eq!(h.quantile_us(1.0), (12, false));
        // -H adds a summary column; the first count column is used.
        let h2 = parse_histogram(
            "000010 000050 000050\n000011 000050 000050\n# Histogram Overflows: 00000 00000\n",
        )
        .unwrap();
        assert_eq!(h2.count(), 100);
    }

    #[test]
    fn broken_output_is_an_error_not_a_number() {
        for bad in [
            "",
            "WARN: something\n# Histogram Overflows: 00000\n",
            "000010 000050\n",
            "000010 000000\n# Histogram Overflows: 00000\n",
            "000010 000050\n# Histogram Overflows: lots\n",
        ] {
            assert!(parse_histogram(bad).is_err(), "{bad:?}");
        }
    }

    /// A cyclictest segment: `n` samples at `us`, `slow` more at `slow_us`.
    fn ct(us: u64, n: u64, slow_us: u64, slow: u64) -> CyclictestHistogram {
        let text = format!(
            "{us:06} {n:06}\n{slow_us:06} {slow:06}\n# Max Latencies: {slow_us:05}\n# Histogram Overflows: 00000\n"
        );
        parse_histogram(&text).unwrap()
    }

    /// A loop segment: `n` wakes at `us`, `slow` more at `slow_us` (in ns).
    fn lp(us: u64, n: u64, slow_us: u64, slow: u64) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new_with_bounds(1, crate::metrics::MAX_VALUE_NS, 3).unwrap();
        h.record_n(us * 1000, n).unwrap();
        h.record_n(slow_us * 1000, slow).unwrap();
        h
    }

    #[test]
    fn alternating_segments_give_both_distributions_the_ratio_and_its_range() {
        let spec = CyclictestSpec::for_loop(20_000_000, 80, Some(1));
        assert_eq!(
            spec.command_line(),
            "cyclictest -m -p 80 -i 20000 -t1 -h 100000 -q -a 1"
        );
        // Pair 1: loop P99 = 200 us against cyclictest's 100 (2x); pair 2: 300 against
        // 300 (1x). Merged (200 samples each, the 198th is the P99): cyclictest's is
        // 100 us, the loop's 200 us.
        let pairs = vec![
            (lp(10, 98, 200, 2), ct(10, 98, 100, 2)),
            (lp(10, 98, 300, 2), ct(10, 98, 300, 2)),
        ];
        let b = Baseline::alternating(&spec, 5.0, &pairs).unwrap();
        assert_eq!(b.method, "alternating segments");
        assert_eq!(b.segments.len(), 2);
        // The loop's histogram keeps 3 significant digits: ratios within 0.1 %.
        let near = |x: Option<f64>, y: f64| x.is_some_and(|x| (x - y).abs() < 2e-3);
        assert!(near(b.segments[0].ratio.p99, 2.0), "{:?}", b.segments[0]);
        assert!(near(b.segments[1].ratio.p99, 1.0), "{:?}", b.segments[1]);
        let (lo, hi) = b.ratio_range.p99.unwrap();
        assert!(
            near(Some(lo), 1.0) && near(Some(hi), 2.0),
            "{:?}",
            b.ratio_range
        );
        let (lo, hi) = b.ratio_range.p50.unwrap();
        assert!(
            near(Some(lo), 1.0) && near(Some(hi), 1.0),
            "{:?}",
            b.ratio_range
        );
        assert_eq!(b.samples, 200);
        assert_eq!(b.cyclictest.p99_ns, 100_000);
        assert_eq!(b.cyclictest.max_ns, 300_000);
        let ours = b.chunkrt.unwrap();
        assert!(Histogram::<u64>::new(3)
            .unwrap()
            .equivalent(ours.p99_ns, 200_000));
        assert!(near(b.ratio.p99, 2.0), "{:?}", b.ratio);
        let json = serde_json::to_value(&b).unwrap();
        assert_eq!(json["ratio_range"]["p99"].as_array().unwrap().len(), 2);
        assert_eq!(json["segments"].as_array().unwrap().len(), 2);
        let t = b.table();
        assert!(
            t.contains("ratio chunkrt/cyclic") && t.contains("1.00-2.00"),
            "{t}"
        );
        assert!(t.contains("2 pairs of 5.0 s segments"), "{t}");
        assert!(Baseline::alternating(&spec, 5.0, &[]).is_none());
        let mut quiet = spec.clone();
        quiet.hold_dma_latency = false;
        assert!(quiet.command_line().ends_with(" --laptop"));
    }

    #[test]
    fn a_missing_program_says_how_to_install_it() {
        let mut spec = CyclictestSpec::for_loop(20_000_000, 80, None);
        spec.program = PathBuf::from("/nonexistent/cyclictest");
        let e = Cyclictest::start(&spec).err().unwrap().to_string();
        assert!(e.contains("rt-tests"), "{e}");
    }
}
