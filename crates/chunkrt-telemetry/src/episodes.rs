//! Episodes in the records: each ended episode as a line of `events.jsonl`
//! (`"event": "episode"`) and an entry of the report's `episodes`, with the figures
//! `chunkrt episodes` tabulates: outcome, start pose (held out or not), whether the
//! residual had authority, goal error, tracking error P99, the permission gate's and the
//! residual gate's cycles, operator stops in the budget's window, and the budget's
//! breach (the residual rolled back from then on); [`read_log`] reads them back.

use chunkrt_core::{EpisodeSummary, MonoTime};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Why a run's episode lines cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EpisodeLogError {
    /// `events.jsonl` could not be read (missing, not a regular file, too large, not
    /// UTF-8).
    #[error("{0}")]
    Read(String),
    /// A line is not what chunkrt writes: not JSON, an episode line without its
    /// figures, or an episode repeated or out of order.
    #[error("{}:{line}: {what}", file.display())]
    Line {
        /// The event log.
        file: PathBuf,
        /// Its line (1-based).
        line: usize,
        /// What is wrong.
        what: String,
    },
}

/// The episode lines of `run`'s `events.jsonl`, checked to be the log a run writes:
/// each ended episode once, in order of its index, with its running phase's begin and
/// end (`t_begin_s <= t_s`), each beginning no earlier than the one before ended.
///
/// A repeated episode line (an edited or concatenated log) is refused, not merged:
/// two lines for one episode cannot both be its record, and which one is cannot be
/// told from the log; counted twice it would be a second episode with a negative reset
/// before it (and a second copy of its frames in an export).
pub fn read_log(run: &Path) -> Result<Vec<Value>, EpisodeLogError> {
    let file = run.join("events.jsonl");
    let text =
        chunkrt_files::read_text_bounded(&file, chunkrt_files::MODEL_LIMIT_BYTES, "event log")
            .map_err(|e| EpisodeLogError::Read(e.to_string()))?
            .map_err(|_| EpisodeLogError::Read(format!("{}: not UTF-8 text", file.display())))?;
    let mut out: Vec<Value> = Vec::new();
    // The previous episode line: its index, end and line.
    let mut prev: Option<(u64, f64, usize)> = None;
    // Each episode's line.
    let mut lines: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for (i, l) in text.lines().enumerate() {
        let line = i + 1;
        let bad = |what: String| EpisodeLogError::Line {
            file: file.clone(),
            line,
            what,
        };
        let v: Value = serde_json::from_str(l).map_err(|e| bad(format!("not a JSON line: {e}")))?;
        if v["event"] != "episode" {
            continue;
        }
        let field = |k: &str| {
            num(&v[k]).ok_or_else(|| bad(format!("an episode line without a finite `{k}`")))
        };
        let (t_begin, t_end) = (field("t_begin_s")?, field("t_s")?);
        let k = v["episode"]
            .as_u64()
            .ok_or_else(|| bad("an episode line without its index (`episode`)".into()))?;
        if t_begin > t_end {
            return Err(bad(format!(
                "episode {k} begins at {t_begin} s, after it ended ({t_end} s)"
            )));
        }
        if let Some(first) = lines.insert(k, line) {
            return Err(bad(format!(
                "episode {k} again (its line is {first}): a repeated line; a run writes \
                 each ended episode once"
            )));
        }
        if let Some((pk, p_end, p_line)) = prev {
            if k < pk {
                return Err(bad(format!(
                    "episode {k} after episode {pk} (line {p_line}): out of order; a run \
                     writes its episodes in order"
                )));
            }
            if t_begin < p_end {
                return Err(bad(format!(
                    "episode {k} begins at {t_begin} s, before episode {pk} (line {p_line}) \
                     ended at {p_end} s"
                )));
            }
        }
        prev = Some((k, t_end, line));
        out.push(v);
    }
    Ok(out)
}

/// One episode as JSON; `t_rel` turns a time into seconds since the run's start.
pub fn episode_json(s: &EpisodeSummary, t_rel: impl Fn(MonoTime) -> f64) -> Value {
    let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
    json!({
        "t_s": t_rel(s.t_end),
        "event": "episode",
        "episode": s.index,
        "start": s.start,
        "held_out": s.held_out,
        "outcome": s.outcome.name(),
        "reason": s.reason.map(|r| format!("{r:?}")),
        "t_begin_s": t_rel(s.t_begin),
        "duration_s": s.t_end.saturating_since(s.t_begin) as f64 * 1e-9,
        "cycles": s.cycles,
        "residual": s.residual,
        "goal_err_rad": finite(s.goal_err_rad),
        "tracking_error_p99_rad": finite(s.track_p99_rad),
        "tracking_error_max_rad": finite(s.track_max_rad),
        "gate_interventions": s.gate_cycles,
        "residual_interventions": s.residual_cycles,
        "operator_stops_window": s.operator_stops_window,
        "budget_breach": s.breach.map(|b| b.name()),
        "intervened": s.marks,
    })
}

/// The report's `episodes`: every episode, and its summaries (see [`summaries`]).
pub fn summary_json(episodes: &[Value]) -> Value {
    json!({ "list": episodes, "groups": summaries("", episodes) })
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

fn mean(xs: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut s, mut n) = (0.0, 0usize);
    for x in xs {
        s += x;
        n += 1;
    }
    (n > 0).then(|| s / n as f64)
}

/// Per kind of start and residual state: episodes, success rate, goal error, tracking
/// error P99, gate interventions and operator stops per episode.
pub fn summaries(run: &str, episodes: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for held_out in [false, true] {
        for residual in [false, true] {
            let of: Vec<&Value> = episodes
                .iter()
                .filter(|e| e["held_out"] == held_out && e["residual"] == residual)
                .collect();
            if of.is_empty() {
                continue;
            }
            let n = of.len() as f64;
            let count = |k: &str| of.iter().filter_map(|e| e[k].as_u64()).sum::<u64>() as f64;
            let stops = of
                .iter()
                .filter(|e| e["outcome"] == "operator_stop")
                .count() as f64;
            out.push(json!({
                "run": run,
                "starts": if held_out { "held_out" } else { "seen" },
                "policy": if residual { "residual" } else { "frozen" },
                "episodes": of.len(),
                "success_rate": of.iter().filter(|e| e["outcome"] == "success").count() as f64 / n,
                "goal_err_rad": mean(of.iter().filter_map(|e| num(&e["goal_err_rad"]))),
                "tracking_error_p99_rad": mean(of.iter().filter_map(|e| num(&e["tracking_error_p99_rad"]))),
                "gate_interventions_per_episode": count("gate_interventions") / n,
                "operator_stops_per_episode": stops / n,
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_with(name: &str, lines: &[&str]) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("chunkrt-episodes-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
        d
    }

    const E0: &str = r#"{"event":"episode","episode":0,"t_begin_s":0.5,"t_s":2.0}"#;
    const E1: &str = r#"{"event":"episode","episode":1,"t_begin_s":3.0,"t_s":4.5}"#;
    const MODE: &str = r#"{"event":"mode","t_s":2.1}"#;

    /// The log a run writes is read as it is; every way a line can make an episode count
    /// twice or a reset negative is refused naming the file, the line and the episode.
    #[test]
    fn a_repeated_or_disordered_episode_line_is_refused_by_file_and_line() {
        let d = run_with("good", &[E0, MODE, E1]);
        let eps = read_log(&d).unwrap();
        assert_eq!(eps.len(), 2);
        let cases: [(&str, Vec<&str>, &str); 6] = [
            (
                "dup",
                vec![E0, MODE, E1, E1],
                ":4: episode 1 again (its line is 3)",
            ),
            (
                "dup-later",
                vec![E0, E1, E0],
                ":3: episode 0 again (its line is 1)",
            ),
            (
                "order",
                vec![E1, E0],
                ":2: episode 0 after episode 1 (line 1): out of order",
            ),
            (
                "overlap",
                vec![
                    E0,
                    r#"{"event":"episode","episode":1,"t_begin_s":1.0,"t_s":4.5}"#,
                ],
                ":2: episode 1 begins at 1 s, before episode 0 (line 1) ended at 2 s",
            ),
            (
                "negative",
                vec![r#"{"event":"episode","episode":0,"t_begin_s":2.5,"t_s":2.0}"#],
                ":1: episode 0 begins at 2.5 s, after it ended (2 s)",
            ),
            (
                "no-begin",
                vec![r#"{"event":"episode","episode":0,"t_s":2.0}"#],
                ":1: an episode line without a finite `t_begin_s`",
            ),
        ];
        for (name, lines, want) in cases {
            let d = run_with(name, &lines);
            let e = read_log(&d).unwrap_err().to_string();
            let file = d.join("events.jsonl").display().to_string();
            assert!(e.starts_with(&file) && e.contains(want), "{name}: {e}");
            let _ = std::fs::remove_dir_all(&d);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
