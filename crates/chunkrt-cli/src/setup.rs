//! What the commands that run the loop share before it starts: the run configuration
//! loaded (`--config`, other kinds of chunkrt file told as such), the run directory
//! claimed (`--out`), durations parsed (`--duration`), and the loop started (a run
//! that could not start sorted by exit status).

use anyhow::Context;
use chunkrt_config::Config;
use chunkrt_telemetry::outdir;
use std::time::Duration;

/// Loads a run configuration (`--config`); a file of another of chunkrt's kinds (a
/// budget, a policy manifest, an ecsim configuration) is told as such, with the
/// option that takes it, instead of as the first key a run configuration lacks.
pub fn load_config(path: &std::path::Path) -> anyhow::Result<Config> {
    use chunkrt_config::FileKind;
    let e = match Config::load(path) {
        Ok(cfg) => return Ok(cfg),
        Err(e) => e,
    };
    let kind = chunkrt_config::read_file(path)
        .ok()
        .map(|text| FileKind::detect(path, &text));
    let p = path.display();
    let (what, fix) = match kind {
        Some(FileKind::Budget) => (
            "a budget",
            format!(
                "it is read by `chunkrt bench --budget {p}`; pass --config the run \
             configuration (e.g. rt-config/sim.toml)"
            ),
        ),
        Some(FileKind::PolicyManifest) => (
            "a policy manifest",
            format!(
                "a run configuration names it as `policy.manifest = \"{p}\"`; pass --config the \
             run configuration (e.g. rt-config/sim.toml)"
            ),
        ),
        Some(FileKind::Ecsim) => (
            "an ecsim configuration",
            format!(
                "it is read by `chunkrt ecsim --config {p}`; pass --config the run \
             configuration (e.g. rt-config/sim.toml)"
            ),
        ),
        Some(FileKind::Run) | None => return Err(e.into()),
    };
    anyhow::bail!("--config {p}: this is {what}, not a run configuration: {fix}")
}

/// Refuses a directory that holds a run unless `overwrite` (then removes that run's
/// files), creates it if needed, and claims the reserve with real bytes: a read-only
/// file system, a path under a regular file or a full disk fail here, not after the
/// run. `run` and `bench` claim their `--out` with it.
pub fn prepare_out_dir(dir: &std::path::Path, overwrite: bool) -> Result<outdir::Reserve, String> {
    // A path that is (or lies under) something other than a directory: said as such,
    // not as the write that then fails.
    if let Some(f) = dir
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .find(|a| std::fs::metadata(a).is_ok_and(|m| !m.is_dir()))
    {
        let what = if f == dir {
            "is a file".to_string()
        } else {
            format!("lies under {}, which is a file", f.display())
        };
        return Err(format!(
            "{what}, not a directory: --out names the directory the run's records go to \
             (created if missing); choose another --out"
        ));
    }
    let held = outdir::run_files_in(dir);
    if !held.is_empty() {
        if !overwrite {
            return Err(format!(
                "already holds a run ({}); pass --overwrite to replace it, or choose \
                 another --out",
                held.join(", ")
            ));
        }
        outdir::clear_run(dir).map_err(|e| format!("removing the previous run: {e}"))?;
    }
    outdir::Reserve::claim(dir, outdir::RESERVE_BYTES).map_err(|e| {
        format!(
            "cannot write {} MiB of records ({e})",
            outdir::RESERVE_BYTES >> 20
        )
    })
}

/// Parses `10s`, `250ms`, `2m`, `1h`, `1.5s`; `0` and `inf` mean "no limit".
pub fn parse_duration(s: &str) -> Result<Option<Duration>, String> {
    let s = s.trim();
    if s == "inf" || s == "0" {
        return Ok(None);
    }
    let split = s
        .find(|c: char| c.is_ascii_alphabetic())
        .ok_or_else(|| format!("`{s}`: expected a number with a unit (ms, s, m, h), e.g. `10s`"))?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}`: `{num}` is not a number"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (use ms, s, m or h)")),
    };
    if !secs.is_finite() || !(0.0..=1e7).contains(&secs) {
        return Err(format!("`{s}`: out of range"));
    }
    Ok(Some(Duration::from_secs_f64(secs)))
}

/// Runs the loop, shared by `run` and `bench`; a run that could not start is sorted
/// here: a backend error is a bring-up failure, a configuration error found before
/// the loop started exit 2, anything else exit 1 (the inner `Err`'s status).
pub(crate) fn start_run(
    runtime: chunkrt_rt::Runtime,
    opts: &chunkrt_rt::RunOptions,
) -> anyhow::Result<Result<chunkrt_rt::RunOutcome, u8>> {
    match runtime.run(opts) {
        Ok(o) => Ok(Ok(o)),
        Err(e @ chunkrt_rt::RunError::Backend(_)) => Err(e).context("bring-up failed"),
        // A camera that does not fit the policy, or cannot be opened, an operator's socket
        // that cannot be made as configured, a wear ledger that cannot be used: a
        // configuration error found before the loop started (exit 2).
        Err(
            e @ (chunkrt_rt::RunError::Camera(_)
            | chunkrt_rt::RunError::Operator(_)
            | chunkrt_rt::RunError::Config(_)),
        ) => {
            crate::console::err(&format!("chunkrt: error: {e}; nothing was moved"));
            Ok(Err(crate::EXIT_USAGE))
        }
        Err(e) => {
            crate::console::err(&format!("chunkrt: error: {e}"));
            Ok(Err(crate::EXIT_FAIL))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_garbage() {
        assert_eq!(
            parse_duration("10s").unwrap(),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            parse_duration("250ms").unwrap(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            parse_duration("2m").unwrap(),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_duration("inf").unwrap(), None);
        assert!(parse_duration("10").unwrap_err().contains("unit"));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
