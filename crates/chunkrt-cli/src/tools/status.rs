//! `chunkrt status`: a running controller's state for an operator on SSH, read from its
//! `[metrics]` endpoint (mode, authority, counters, faults, gate interventions, stage
//! latencies) and, given its run directory, the last lines of its `events.jsonl`.
//! Every read is bounded: the endpoint within [`DEADLINE`] and [`MAX_BODY`] bytes, the
//! events from the file's last [`TAIL_BYTES`] only.

use crate::console;
use clap::Parser;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The whole exchange with the endpoint.
const DEADLINE: Duration = Duration::from_secs(3);
/// The largest answer read.
const MAX_BODY: usize = 4 << 20;
/// How much of `events.jsonl`'s end is read.
const TAIL_BYTES: u64 = 64 << 10;

/// `chunkrt status`.
#[derive(Parser, Debug, Clone)]
pub struct StatusArgs {
    /// The controller's `[metrics] listen` address.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub metrics: String,
    /// Its run directory (e.g. /var/lib/chunkrt/runs/latest): its last events too.
    #[arg(long, value_name = "DIR")]
    pub run: Option<PathBuf>,
    /// How many of the last events to show.
    #[arg(long, default_value_t = 5)]
    pub events: usize,
}

/// One sample of the exposition: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses OpenMetrics/Prometheus text (`name{k="v",...} value`); comments skipped.
fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = match line.rsplit_once(' ') {
            Some(p) => p,
            None => continue,
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.trim_end_matches('}');
                let labels = body
                    .split("\",")
                    .filter_map(|kv| kv.split_once("=\""))
                    .map(|(k, v)| (k.to_string(), v.trim_end_matches('"').to_string()))
                    .collect();
                (name.to_string(), labels)
            }
        };
        out.push((name, labels, value));
    }
    out
}

/// `GET /metrics` within the deadline; the body.
fn fetch(addr: &str) -> Result<String, String> {
    let until = Instant::now() + DEADLINE;
    let sock: SocketAddr = addr
        .to_socket_addrs()
        .map_err(|e| format!("{addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr}: no address"))?;
    let mut c = TcpStream::connect_timeout(&sock, DEADLINE).map_err(|e| e.to_string())?;
    c.set_write_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    write!(c, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no whole answer within {DEADLINE:?}"));
        }
        c.set_read_timeout(Some(left)).map_err(|e| e.to_string())?;
        let n = c.read(&mut buf).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        if got.len() + n > MAX_BODY {
            return Err(format!("the answer is over {} MiB", MAX_BODY >> 20));
        }
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("the answer is not HTTP")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(format!(
            "answered {}",
            head.lines().next().unwrap_or_default()
        ));
    }
    Ok(body.to_string())
}

/// The last `n` whole lines of `file`, from its last [`TAIL_BYTES`].
fn tail(file: &Path, n: usize) -> Result<Vec<String>, String> {
    let f = chunkrt_files::open_regular(file, "events").map_err(|e| e.to_string())?;
    let size = f.size;
    let mut file_handle = f.file;
    let from = size.saturating_sub(TAIL_BYTES);
    file_handle
        .seek(SeekFrom::Start(from))
        .map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file_handle
        .take(TAIL_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.split('\n').collect();
    // A cut first line (the tail began inside it) and the text after the last newline.
    if from > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    lines.pop();
    let start = lines.len().saturating_sub(n);
    Ok(lines[start..].iter().map(|l| l.to_string()).collect())
}

fn find<'a>(s: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    s.iter().find(|(n, l, _)| {
        n == name
            && labels
                .iter()
                .all(|(k, v)| l.get(*k).is_some_and(|x| x == v))
    })
}

fn value(s: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    find(s, name, labels).map(|x| x.2)
}

/// The state, as printed.
fn render(s: &[Sample]) -> String {
    let mut out = String::new();
    render_headline(s, &mut out);
    render_drives(s, &mut out);
    render_counters(s, &mut out);
    render_faults(s, &mut out);
    render_gate(s, &mut out);
    render_stages(s, &mut out);
    out
}

/// How long the run has been going (or went), its mode and who has authority.
fn render_headline(s: &[Sample], out: &mut String) {
    let mode = s
        .iter()
        .find(|(n, _, v)| n == "chunkrt_mode" && *v == 1.0)
        .and_then(|(_, l, _)| l.get("mode").cloned())
        .unwrap_or_else(|| "-".into());
    let ended = value(s, "chunkrt_run_ended", &[]) == Some(1.0);
    let t = value(s, "chunkrt_run_seconds", &[]).unwrap_or(0.0);
    let authority = match mode.as_str() {
        "Playing" => "the policy has authority",
        "-" => "no cycle yet",
        _ => "the policy has no authority (the gate brakes or holds the arm)",
    };
    out.push_str(&format!(
        "{} {:.1} s, mode {mode}: {authority}\n",
        if ended { "ended after" } else { "running for" },
        t
    ));
}

/// The drives' states and thermal loads, joint 0 first (nothing before a drive reports).
fn render_drives(s: &[Sample], out: &mut String) {
    let mut drives: Vec<(usize, &str)> = s
        .iter()
        .filter(|(n, _, v)| n == "chunkrt_drive_state" && *v == 1.0)
        .filter_map(|(_, l, _)| Some((l.get("joint")?.parse().ok()?, l.get("state")?.as_str())))
        .collect();
    drives.sort();
    if !drives.is_empty() {
        let states: Vec<&str> = drives.iter().map(|d| d.1).collect();
        let thermal: Vec<String> = (0..drives.len())
            .filter_map(|j| value(s, "chunkrt_thermal_load", &[("joint", &j.to_string())]))
            .map(|l| format!("{l:.2}"))
            .collect();
        out.push_str(&format!("drives (joint 0 on): {}\n", states.join(" ")));
        if !thermal.is_empty() {
            out.push_str(&format!(
                "thermal load (1: rating): {}\n",
                thermal.join(" ")
            ));
        }
    }
}

/// The cycle, overrun, chunk and fallback counters.
fn render_counters(s: &[Sample], out: &mut String) {
    let c = |k: &str| value(s, &format!("chunkrt_{k}_total"), &[]).unwrap_or(0.0) as u64;
    out.push_str(&format!(
        "cycles {}  overruns {}  chunks published {}  expired {}  fallbacks {}\n",
        c("cycles"),
        c("deadline_overruns"),
        c("chunks_published"),
        c("chunks_expired"),
        c("fallback_entries"),
    ));
}

/// The fault and error counters that are not zero.
fn render_faults(s: &[Sample], out: &mut String) {
    let faults: Vec<String> = s
        .iter()
        .filter(|(n, l, v)| {
            l.is_empty()
                && *v > 0.0
                && ["fault", "error", "lost", "panic", "drop"]
                    .iter()
                    .any(|w| n.contains(w))
        })
        .map(|(n, _, v)| {
            format!(
                "{} {v}",
                n.trim_start_matches("chunkrt_").trim_end_matches("_total")
            )
        })
        .collect();
    out.push_str(&format!(
        "faults and errors: {}\n",
        if faults.is_empty() {
            "none".to_string()
        } else {
            faults.join(", ")
        }
    ));
}

/// The gate's interventions, per constraint.
fn render_gate(s: &[Sample], out: &mut String) {
    let gate: Vec<String> = s
        .iter()
        .filter(|(n, _, v)| n == "chunkrt_gate_interventions_by_constraint_total" && *v > 0.0)
        .map(|(_, l, v)| format!("{} {v}", l.get("constraint").map_or("?", |c| c.as_str())))
        .collect();
    out.push_str(&format!(
        "gate interventions: {}\n",
        if gate.is_empty() {
            "none".to_string()
        } else {
            gate.join(", ")
        }
    ));
}

/// The stage latency table (microseconds), stages by name.
fn render_stages(s: &[Sample], out: &mut String) {
    out.push_str("stage                         p50 us     p99 us   p99.9 us     max us\n");
    let mut stages: Vec<&String> = s
        .iter()
        .filter(|(n, _, _)| n == "chunkrt_stage_latency_max_seconds")
        .filter_map(|(_, l, _)| l.get("stage"))
        .collect();
    stages.sort();
    for stage in stages {
        let q = |q: &str| {
            value(
                s,
                "chunkrt_stage_latency_seconds",
                &[("stage", stage), ("quantile", q)],
            )
            .unwrap_or(f64::NAN)
                * 1e6
        };
        let max = value(s, "chunkrt_stage_latency_max_seconds", &[("stage", stage)])
            .unwrap_or(f64::NAN)
            * 1e6;
        out.push_str(&format!(
            "{stage:<26} {:>10.1} {:>10.1} {:>10.1} {:>10.1}\n",
            q("0.5"),
            q("0.99"),
            q("0.999"),
            max
        ));
    }
}

/// Runs `chunkrt status`: 0 when the controller answered, 1 when it did not.
pub fn status(args: &StatusArgs) -> anyhow::Result<u8> {
    let body = match fetch(&args.metrics) {
        Ok(b) => b,
        Err(e) => {
            console::err(&format!(
                "chunkrt status: no controller answers at http://{}/metrics ({e}): is it \
                 running, with [metrics] listen = \"{}\"?",
                args.metrics, args.metrics
            ));
            return Ok(crate::EXIT_FAIL);
        }
    };
    let samples = parse(&body);
    if find(&samples, "chunkrt_run_seconds", &[]).is_none() {
        console::err(&format!(
            "chunkrt status: http://{}/metrics answered, but not as a chunkrt run",
            args.metrics
        ));
        return Ok(crate::EXIT_FAIL);
    }
    console::out_raw(&render(&samples));
    if let Some(run) = &args.run {
        match tail(&run.join("events.jsonl"), args.events) {
            Ok(lines) => {
                console::out(&format!(
                    "last events ({}):",
                    run.join("events.jsonl").display()
                ));
                for l in lines {
                    console::out(&format!("  {l}"));
                }
            }
            Err(e) => console::err(&format!("chunkrt status: events: {e}")),
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_is_read_back_with_its_labels() {
        let s = parse(
            "# TYPE x gauge\nchunkrt_mode{mode=\"Holding\"} 1.0\nchunkrt_mode{mode=\"Playing\"} 0.0\n\
             chunkrt_stage_latency_seconds{stage=\"wake_latency\",quantile=\"0.99\"} 0.00012\n\
             chunkrt_run_seconds 3.5\nchunkrt_cycles_total 175\n# EOF\n",
        );
        assert_eq!(s.len(), 5);
        assert_eq!(
            value(
                &s,
                "chunkrt_stage_latency_seconds",
                &[("stage", "wake_latency"), ("quantile", "0.99")]
            ),
            Some(0.00012)
        );
        let text = render(&s);
        assert!(
            text.starts_with("running for 3.5 s, mode Holding: the policy has no authority"),
            "{text}"
        );
        assert!(text.contains("cycles 175 "), "{text}");
    }
}
