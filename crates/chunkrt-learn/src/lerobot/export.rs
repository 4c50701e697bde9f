//! The export: runs read in turn and checked to belong in one dataset, then the data
//! table and the metadata written.

use super::read::read_run;
use super::{meta, run_err, write, Episode, ExportError, PartialRun, Summary};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

/// Exports the running episodes of `runs` into `out` (a new directory) at every
/// `stride`-th control cycle. A run given twice (by any path, or a copy of it) is
/// refused; so is a run whose recording is not whole, unless `allow_partial`: then its
/// whole episodes are exported and [`Summary::partial`] (and `meta/chunkrt.json`) says
/// where it was cut and what was left out.
pub fn export(
    runs: &[PathBuf],
    out: &Path,
    stride: NonZeroUsize,
    task: &str,
    allow_partial: bool,
) -> Result<Summary, ExportError> {
    distinct_dirs(runs)?;
    let (episodes, partial, dt) = read_runs(runs, stride, allow_partial)?;
    if episodes.is_empty() {
        return Err(ExportError::Write {
            path: out.to_path_buf(),
            what: "no run given".into(),
        });
    }
    let fps = whole_fps(out, dt.unwrap_or(0.02))?;
    let dof = episodes.first().map_or(0, |e| e.frames[0].action.len());
    one_image_size(&episodes)?;
    one_force_feature(&episodes)?;
    let write_err = |what: String| ExportError::Write {
        path: out.to_path_buf(),
        what,
    };
    if out.exists() {
        return Err(write_err(
            "exists already: the export writes a new dataset".into(),
        ));
    }
    let batch = write::data_batch(&episodes, fps, dof).map_err(write_err)?;
    write::write_parquet(&out.join("data/chunk-000/file-000.parquet"), &batch)?;
    meta::write_meta(out, &episodes, &partial, &batch, (fps, dof), task)?;
    Ok(Summary {
        episodes: episodes.len(),
        frames: batch.num_rows(),
        fps,
        dof,
        partial,
    })
}

/// The runs' episodes, the runs exported in part and their frame period (s; none
/// without a run).
type RunsRead = (Vec<Episode>, Vec<PartialRun>, Option<f64>);

/// Reads each of `runs` in turn, refusing one that is another given twice (their
/// recordings start at the same instant) or whose frame period differs from the others'.
fn read_runs(
    runs: &[PathBuf],
    stride: NonZeroUsize,
    allow_partial: bool,
) -> Result<RunsRead, ExportError> {
    let mut episodes = Vec::new();
    let mut partial = Vec::new();
    let mut starts: Vec<((u64, i64), &Path)> = Vec::new();
    let mut dt: Option<f64> = None;
    for run in runs {
        let r = read_run(run, stride, allow_partial)?;
        if let Some(start) = r.start {
            if let Some((_, first)) = starts.iter().find(|s| s.0 == start) {
                return Err(run_err(
                    run,
                    format!(
                        "the same run as {} (their recordings start at the same instant): a \
                         run given twice would be in the dataset twice",
                        first.display()
                    ),
                ));
            }
            starts.push((start, run));
        }
        if dt.is_some_and(|d| (d - r.frame_dt_s).abs() > 1e-9) {
            return Err(run_err(
                run,
                "its frame period differs from the other runs' (control.period_ms x stride)",
            ));
        }
        dt = Some(r.frame_dt_s);
        episodes.extend(r.episodes);
        partial.extend(r.partial);
    }
    Ok((episodes, partial, dt))
}

/// The frame rate of a frame period of `dt` s, refused unless it is a whole number of
/// frames per second.
fn whole_fps(out: &Path, dt: f64) -> Result<u32, ExportError> {
    let fps = (1.0 / dt).round();
    if (fps * dt - 1.0).abs() > 1e-6 || fps < 1.0 {
        return Err(ExportError::Write {
            path: out.to_path_buf(),
            what: format!("a frame period of {dt} s is not a whole number of frames per second: choose another stride"),
        });
    }
    Ok(fps as u32)
}

/// Refuses episodes whose camera images differ in size (or some without a camera): a
/// dataset has one image feature.
fn one_image_size(episodes: &[Episode]) -> Result<(), ExportError> {
    if let Some(e) = episodes
        .iter()
        .find(|e| e.image_size != episodes[0].image_size)
    {
        return Err(run_err(
            &e.run,
            format!(
                "its camera images ({}) differ from {}'s ({}): a dataset has one image feature",
                size_text(e.image_size),
                episodes[0].run.display(),
                size_text(episodes[0].image_size)
            ),
        ));
    }
    Ok(())
}

/// Refuses episodes of which some have a wrist force/torque reading and some not (or
/// an episode with it on some frames only): the dataset's `observation.force` would
/// have holes.
fn one_force_feature(episodes: &[Episode]) -> Result<(), ExportError> {
    let count = |e: &Episode| e.frames.iter().filter(|f| f.wrench.is_some()).count();
    if let Some(e) = episodes
        .iter()
        .find(|e| !(count(e) == 0 || count(e) == e.frames.len()))
    {
        return Err(run_err(
            &e.run,
            format!(
                "episode {} has a wrist force reading on {} of its {} frames",
                e.run_episode,
                count(e),
                e.frames.len()
            ),
        ));
    }
    let with = episodes.iter().find(|e| count(e) > 0);
    let without = episodes.iter().find(|e| count(e) == 0);
    if let (Some(w), Some(e)) = (with, without) {
        return Err(run_err(
            &e.run,
            format!(
                "episode {} has no wrist force reading, {}'s have: a dataset has one \
                 observation.force feature",
                e.run_episode,
                w.run.display()
            ),
        ));
    }
    Ok(())
}

/// Refuses a run directory given twice (by the same or another path to it): its
/// episodes would be in the dataset twice.
fn distinct_dirs(runs: &[PathBuf]) -> Result<(), ExportError> {
    let mut seen: Vec<(PathBuf, &PathBuf)> = Vec::with_capacity(runs.len());
    for run in runs {
        let real = std::fs::canonicalize(run).map_err(|e| run_err(run, e.to_string()))?;
        if let Some((_, first)) = seen.iter().find(|s| s.0 == real) {
            return Err(run_err(
                run,
                format!(
                    "given twice (first as {}): its episodes would be in the dataset twice",
                    first.display()
                ),
            ));
        }
        seen.push((real, run));
    }
    Ok(())
}

fn size_text(s: Option<(u32, u32)>) -> String {
    s.map_or_else(|| "none".into(), |(h, w)| format!("{h} x {w}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: NonZeroUsize = NonZeroUsize::MIN;

    fn run_dir(name: &str, events: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-learn-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("events.jsonl"), events).unwrap();
        d
    }

    #[test]
    fn a_run_whose_episodes_ended_none_is_refused_naming_the_run_and_why() {
        let run = run_dir("noep", "{\"event\":\"mode\",\"t_s\":0.1}\n");
        std::fs::write(
            run.join("report.json"),
            r#"{"config": {"period_ms": 20.0, "episodes": {"goals_rad": [[0.0]]}}}"#,
        )
        .unwrap();
        let out = run.join("ds");
        let e = export(std::slice::from_ref(&run), &out, ONE, "t", false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&run.display().to_string()), "{text}");
        assert!(text.contains("no episode in events.jsonl"), "{text}");
        assert!(!out.exists(), "nothing written");
        let _ = std::fs::remove_dir_all(&run);
    }

    #[test]
    fn a_continuous_run_whose_policy_names_no_goals_is_refused_saying_so() {
        let run = run_dir("nogoals", "{\"event\":\"mode\",\"t_s\":0.1}\n");
        std::fs::write(
            run.join("report.json"),
            r#"{"config": {"period_ms": 20.0}}"#,
        )
        .unwrap();
        let e = export(std::slice::from_ref(&run), &run.join("ds"), ONE, "t", false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("has no policy_goals_rad"), "{text}");
        let _ = std::fs::remove_dir_all(&run);
    }

    #[test]
    fn a_broken_event_line_is_named_by_file_and_line() {
        let run = run_dir("badline", "{\"event\":\"mode\",\"t_s\":0.1}\nnot json\n");
        let e = export(std::slice::from_ref(&run), &run.join("ds"), ONE, "t", false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("events.jsonl:2:"), "{text}");
        let _ = std::fs::remove_dir_all(&run);
    }

    fn episode(run: &str, wrenches: &[bool]) -> Episode {
        let frame = |w: bool| super::super::Frame {
            wrench: w.then(|| vec![0.0; 6]),
            ..Default::default()
        };
        Episode {
            frames: wrenches.iter().map(|w| frame(*w)).collect(),
            outcome: "continuous".into(),
            residual: false,
            held_out: false,
            run: PathBuf::from(run),
            run_episode: 0,
            image_size: None,
        }
    }

    #[test]
    fn episodes_with_and_without_a_force_reading_are_refused_naming_the_odd_one() {
        let with = episode("with", &[true, true]);
        let without = episode("without", &[false, false]);
        assert!(one_force_feature(&[with.clone(), with.clone()]).is_ok());
        assert!(one_force_feature(std::slice::from_ref(&without)).is_ok());
        let e = one_force_feature(&[with.clone(), without])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("without: episode 0 has no wrist force reading, with's"),
            "{e}"
        );
        let e = one_force_feature(&[episode("some", &[true, false, true])])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a wrist force reading on 2 of its 3 frames"),
            "{e}"
        );
    }
}
