//! `chunkrt margin`: how much delay can this loop take?
//!
//! Two loops, each measured against injected delay: `reference` closes a host-side
//! servo on the simulated arm, measures `L(jw)` with a sine probe at the controller
//! output, finds the gain crossover and the phase margin (and the gain margin where
//! the phase reaches -180 degrees), then sweeps injected transport delay and prints
//! the margin against the delay, beside `PM0 - 360 f_c tau` and the hand model of
//! docs/margin.md; `live` measures the runtime's own loop (policy, executor, gate,
//! backend) with the compensations beside it. Both write `margin.json` and
//! `margin.svg` / `margin.png` (`figure`); `args` holds the command's arguments.

mod args;
mod figure;
mod json;
mod live;
mod reference;

use args::LoopKind;
pub use args::MarginArgs;
pub use json::MarginJson;

/// Runs `chunkrt margin`: the runtime's loop with `--config` (or `--loop
/// runtime`), else the reference loop.
pub fn margin(args: &MarginArgs) -> anyhow::Result<u8> {
    if !(args.threshold_deg.is_finite() && (0.0..180.0).contains(&args.threshold_deg)) {
        anyhow::bail!("--threshold-deg {}: expected 0 to 180", args.threshold_deg);
    }
    let kind = args.loop_kind.unwrap_or(match args.config {
        Some(_) => LoopKind::Runtime,
        None => LoopKind::Reference,
    });
    match kind {
        LoopKind::Runtime => live::margin_live(args),
        LoopKind::Reference => reference::margin_reference(args),
    }
}
