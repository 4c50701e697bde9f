//! Episodes in the records: each ended episode as a line of `events.jsonl`
//! (`"event": "episode"`) and an entry of the report's `episodes`, with the figures
//! `chunkrt episodes` tabulates: outcome, start pose (held out or not), whether the
//! residual had authority, goal error, tracking error P99, the permission gate's and the
//! residual gate's cycles, operator stops in the budget's window, and the budget's
//! breach (the residual rolled back from then on).

use chunkrt_core::{EpisodeSummary, MonoTime};
use serde_json::{json, Value};

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
