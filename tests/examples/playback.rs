//! Prints the seamless-playback figures of finished runs, one table row each
//! (docs/measurements/playback.md): judged from `recording.mcap` by `chunkrt_tests::playback`, beside
//! the run's own report (seam-window acceleration P99, inference latency P99).
//!
//!     cargo run --release -p chunkrt-tests --example playback -- CONFIG RUN_DIR [RUN_DIR...]
//!
//! CONFIG is the config the runs used (limits, policy manifest).

use chunkrt_config::Config;
use chunkrt_tests::playback;
use std::path::Path;

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [config, runs @ ..] = args.as_slice() else {
        return Err("usage: playback CONFIG RUN_DIR [RUN_DIR...]".into());
    };
    let cfg = Config::load(Path::new(config)).map_err(|e| e.to_string())?;
    println!(
        "| run | gate changed the proposal | \\|proposal - command\\| P99 | command acc. P99.9 | \
         seam acc. P99 | jerk P99.9 | time to goal | inference P99 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for run in runs {
        let dir = Path::new(run);
        let p = playback::judge_run(&cfg, dir)?;
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("report.json")).map_err(|e| format!("{run}: {e}"))?,
        )
        .map_err(|e| format!("{run}: {e}"))?;
        let seam_p99 = report["command_stream"]["acc_ratio"]["seam"]["p99"]
            .as_f64()
            .unwrap_or(f64::NAN);
        let infer_p99_ms = report["metrics"]["inference_latency"]["p99"]
            .as_f64()
            .unwrap_or(f64::NAN)
            * 1e-6;
        println!(
            "| {run} | {:.2} % | {:.2} mrad | {:.2} | {:.2} | {:.2} | {:.2} s ({} goals) | {:.1} ms |",
            p.altered_pct(),
            p.gap_p99_rad * 1e3,
            p.acc_p999,
            seam_p99,
            p.jerk_p999,
            p.mean_goal_time_s(),
            p.goal_times_s.len(),
            infer_p99_ms
        );
        eprintln!("{run}: {}", p.line());
    }
    Ok(())
}
