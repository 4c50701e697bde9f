//! Reading a run: its plan (report and events), its recorded cycles as frames, and its
//! camera images.

use super::{run_err, Episode, ExportError, Frame, PartialRun, CONTINUOUS_OUTCOME};
use chunkrt_telemetry::readback::{Cut, CycleSample};
use serde_json::{json, Value};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn read_report(run: &Path) -> Result<Value, ExportError> {
    let text = chunkrt_files::read_text_bounded(&run.join("report.json"), 64 << 20, "report")
        .map_err(|e| run_err(run, e.to_string()))?
        .map_err(|_| run_err(run, "report.json is not UTF-8"))?;
    serde_json::from_str(&text).map_err(|e| run_err(run, format!("report.json: {e}")))
}

/// The checkpoints `run`'s commands came from, as its report names them: the base
/// policy's manifest and model digest and, with a residual in authority, the residual's
/// (null when the run was frozen, or its report predates them).
pub(super) fn checkpoints(run: &Path) -> Result<Value, ExportError> {
    let report = read_report(run)?;
    let c = &report["config"];
    Ok(json!({
        "run": run.display().to_string(),
        "policy_manifest": c["policy_manifest"],
        "policy_model_sha256": c["policy_model_sha256"],
        "residual_manifest": c["residual_manifest"],
        "residual_model_sha256": c["residual_model_sha256"],
    }))
}

/// A run's episode lines, its episodes' goals, its control period and whether it is one
/// continuous run (no `[episodes]`: the whole run is its one episode, each cycle's goal
/// the one the policy pursued at that cycle's observation).
struct RunPlan {
    /// Its ended episodes' lines, in order (a continuous run's one episode made up).
    episodes: Vec<Value>,
    /// The goals of its plan, by the episode's index in its run (or the policy's).
    goals: Vec<Vec<f64>>,
    /// The control period (s).
    period_s: f64,
    /// A run without `[episodes]`, exported as one episode.
    continuous: bool,
}

/// The episodes of `run` (its events), the goals of its plan (its report's config: the
/// episodes' goals, or without `[episodes]` the policy's) and its control period in
/// seconds.
fn run_plan(run: &Path) -> Result<RunPlan, ExportError> {
    // Each ended episode once, in order: a repeated line is refused, not exported twice.
    let mut episodes =
        chunkrt_telemetry::episodes::read_log(run).map_err(|e| run_err(run, e.to_string()))?;
    let report = read_report(run)?;
    let cfg = &report["config"];
    let continuous = cfg.get("episodes").is_none_or(Value::is_null);
    let goals = plan_goals(run, cfg, continuous)?;
    if continuous {
        episodes = vec![json!({
            "episode": 0,
            "outcome": CONTINUOUS_OUTCOME,
            "residual": cfg["residual_manifest"].is_string(),
            "held_out": false,
        })];
    } else if episodes.is_empty() {
        return Err(run_err(
            run,
            "no episode in events.jsonl (its [episodes] ended none)",
        ));
    }
    let period_ms = cfg["period_ms"]
        .as_f64()
        .ok_or_else(|| run_err(run, "report.json's config has no period_ms"))?;
    Ok(RunPlan {
        episodes,
        goals,
        period_s: period_ms * 1e-3,
        continuous,
    })
}

/// The goals a run's config names: its episodes' or, for a continuous run, its policy's.
fn plan_goals(run: &Path, cfg: &Value, continuous: bool) -> Result<Vec<Vec<f64>>, ExportError> {
    let goals_key = if continuous {
        "policy_goals_rad"
    } else {
        "episodes.goals_rad"
    };
    let goals = match continuous {
        true => cfg["policy_goals_rad"].clone(),
        false => cfg["episodes"]["goals_rad"].clone(),
    };
    serde_json::from_value(goals).map_err(|_| {
        run_err(
            run,
            format!(
                "report.json's config has no {goals_key}{}",
                if continuous {
                    " (a run without [episodes] is exported as one episode whose goal is \
                     the policy's at each cycle; this run's policy names no goals, or \
                     an older chunkrt recorded it)"
                } else {
                    ""
                }
            ),
        )
    })
}

fn f32s(v: &[f64]) -> Vec<f32> {
    v.iter().map(|x| *x as f32).collect()
}

/// What one run gives the dataset.
#[derive(Clone, Debug)]
pub struct RunRead {
    /// Its episodes, each with its frames, in order.
    pub episodes: Vec<Episode>,
    /// The period of its frames (s): the control period times the stride.
    pub frame_dt_s: f64,
    /// Its recording was cut (read with `allow_partial`): where, and what was left out.
    pub partial: Option<PartialRun>,
    /// Its start (the recording's clock record): two runs with the same are one run.
    pub start: Option<(u64, i64)>,
}

/// Reads `run`'s running episodes as frames, every `stride`-th cycle.
///
/// A recording that is not whole (cut short, or failing a CRC: see
/// [`chunkrt_telemetry::readback::Cut`]) is refused, naming the run and the cut; with
/// `allow_partial` only the episodes wholly recorded before the cut are read (an
/// episode whose end the intact part holds: a cycle after its running phase), and
/// [`RunRead::partial`] says which were left out.
pub fn read_run(
    run: &Path,
    stride: NonZeroUsize,
    allow_partial: bool,
) -> Result<RunRead, ExportError> {
    let stride = stride.get();
    let plan = run_plan(run)?;
    let files =
        chunkrt_telemetry::readback::segments(run).map_err(|e| run_err(run, e.to_string()))?;
    let images = camera_images(run, &files)?;
    let image_size = images.first().map(|i| i.2);
    let mut collect = Collect::new(&plan, images, stride);
    let data = chunkrt_telemetry::readback::read_with(&files, None, |c| collect.cycle(c))
        .map_err(|e| run_err(run, e.to_string()))?;
    collect.finish(run, &data.goal_changes)?;
    let cut = data.truncated;
    if let (Some(cut), false) = (&cut, allow_partial) {
        return Err(run_err(
            run,
            format!(
                "its recording is not whole: {cut}. Exported, the dataset would hold part of \
                 the run as if it were all of it; --allow-partial exports only the episodes \
                 wholly recorded before the cut (and notes the cut in meta/chunkrt.json)"
            ),
        ));
    }
    let ended_at = collect.ended_at;
    let whole = |k: usize| wholly_recorded(cut.as_ref(), ended_at[k]);
    let (out, left_out) = whole_episodes(run, &plan.episodes, collect.frames, whole, image_size);
    if out.is_empty() {
        return Err(run_err(run, no_episode(cut.as_ref())));
    }
    Ok(RunRead {
        episodes: out,
        frame_dt_s: plan.period_s * stride as f64,
        partial: cut.map(|cut| PartialRun {
            run: run.to_path_buf(),
            cut,
            left_out,
        }),
        start: data.start,
    })
}

/// An episode is whole when the recording holds it to its end (`ended_at`: the first
/// cycle after its running phase), or the recording has no cut at all.
fn wholly_recorded(cut: Option<&Cut>, ended_at: Option<u64>) -> bool {
    match cut {
        None => true,
        Some(c) => {
            c.messages_whole
                || ended_at
                    .zip(c.last_cycle.as_ref())
                    .is_some_and(|(end, last)| end <= last.cycle)
        }
    }
}

/// The run's episodes with frames that `whole` says were wholly recorded, and the run
/// indices of those left out.
fn whole_episodes(
    run: &Path,
    eps: &[Value],
    frames: Vec<Vec<Frame>>,
    whole: impl Fn(usize) -> bool,
    image_size: Option<(u32, u32)>,
) -> (Vec<Episode>, Vec<u64>) {
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for (k, (e, frames)) in eps.iter().zip(frames).enumerate() {
        let run_episode = e["episode"].as_u64().unwrap_or(0);
        if !whole(k) {
            left_out.push(run_episode);
        } else if !frames.is_empty() {
            out.push(Episode {
                frames,
                outcome: e["outcome"].as_str().unwrap_or("?").to_string(),
                residual: e["residual"] == true,
                held_out: e["held_out"] == true,
                run: run.to_path_buf(),
                run_episode,
                image_size,
            });
        }
    }
    (out, left_out)
}

/// Why a run gave no episode: none was wholly recorded before its cut, or its recording
/// does not say which cycles were an episode's.
fn no_episode(cut: Option<&Cut>) -> String {
    match cut {
        Some(c) => format!("no episode of it was wholly recorded before the cut: {c}"),
        None => "its recording holds no cycle of a running episode (it does not say \
                 the episode and phase of each cycle: recorded by an older chunkrt?)"
            .to_string(),
    }
}

/// A run's recorded cycles gathered into its episodes' frames, one cycle at a time as
/// [`chunkrt_telemetry::readback::read_with`] hands them over.
struct Collect<'a> {
    plan: &'a RunPlan,
    /// Every `stride`-th cycle of an episode is a frame.
    stride: usize,
    /// Each planned episode's index in its run: the recorded cycles name it.
    index: Vec<u64>,
    /// Per episode, its frames so far.
    frames: Vec<Vec<Frame>>,
    /// Per episode, its running cycles seen so far.
    seen: Vec<usize>,
    /// The previous cycle's measured positions (for the velocities).
    prev_fb: Option<Vec<f64>>,
    /// The run's camera images, in capture order.
    images: Vec<CameraImage>,
    /// The first of `images` not captured by the last frame's deadline.
    next_image: usize,
    /// The first frame that had no image captured before it.
    no_image: Option<String>,
    /// Per episode, the first cycle after its running phase (the recording holds its end).
    ended_at: Vec<Option<u64>>,
    /// A continuous run's frames' cycles (their goal is known after the read).
    cycles: Vec<u64>,
    /// The episode the previous cycle ran in.
    current: Option<usize>,
}

impl<'a> Collect<'a> {
    fn new(plan: &'a RunPlan, images: Vec<CameraImage>, stride: usize) -> Self {
        let n = plan.episodes.len();
        Collect {
            plan,
            stride,
            // The recorded cycles say which episode's running phase their command was
            // made in.
            index: plan
                .episodes
                .iter()
                .map(|e| e["episode"].as_u64().unwrap_or(u64::MAX))
                .collect(),
            frames: vec![Vec::new(); n],
            seen: vec![0; n],
            prev_fb: None,
            images,
            next_image: 0,
            no_image: None,
            ended_at: vec![None; n],
            cycles: Vec::new(),
            current: None,
        }
    }

    /// One recorded cycle: a frame of its episode when it is a running one's
    /// `stride`-th.
    fn cycle(&mut self, c: &CycleSample) {
        let fb_prev = self.prev_fb.replace(c.feedback_rad.to_vec());
        let Some(k) = self.running(c) else {
            return;
        };
        self.seen[k] += 1;
        if !(self.seen[k] - 1).is_multiple_of(self.stride) {
            return;
        }
        let plan = self.plan;
        // The plan's goals in turn, by the episode's index in its run (a continuous
        // run's: filled in after the read, from the goal changes it recorded).
        let goal = plan
            .goals
            .get(self.index[k] as usize % plan.goals.len().max(1))
            .cloned()
            .unwrap_or_default();
        if plan.continuous {
            self.cycles.push(c.cycle);
        }
        let image = self.image(c, k);
        let frame = frame(c, fb_prev.as_deref(), plan.period_s, &goal, image);
        self.frames[k].push(frame);
    }

    /// The episode whose running phase `c` is in (a continuous run: every cycle is its
    /// one episode's), noting where the previous cycle's episode ended.
    fn running(&mut self, c: &CycleSample) -> Option<usize> {
        let running = match self.plan.continuous {
            true => Some(0),
            false => c
                .running_episode
                .and_then(|e| self.index.iter().position(|i| *i == e)),
        };
        if let Some(p) = self.current.filter(|p| running != Some(*p)) {
            self.ended_at[p].get_or_insert(c.cycle);
        }
        self.current = running;
        running
    }

    /// The newest image captured by the cycle's deadline (none without a camera; a
    /// cycle before the first image is noted, and refused after the read).
    fn image(&mut self, c: &CycleSample, k: usize) -> Option<Arc<[u8]>> {
        let images = &self.images;
        while images.get(self.next_image).is_some_and(|i| i.0 <= c.t_s) {
            self.next_image += 1;
        }
        match self.next_image.checked_sub(1) {
            Some(i) => Some(images[i].1.clone()),
            None if !images.is_empty() => {
                self.no_image.get_or_insert_with(|| {
                    format!(
                        "cycle {} (episode {}, t = {:.3} s) has no camera image captured \
                         before it (the first is at {:.3} s)",
                        c.cycle, self.index[k], c.t_s, images[0].0
                    )
                });
                None
            }
            None => None,
        }
    }

    /// Completes the frames once the read is done: refused when a frame had no camera
    /// image; a continuous run's goals from `changes`, the goal changes it recorded.
    fn finish(&mut self, run: &Path, changes: &[(u64, u16)]) -> Result<(), ExportError> {
        if let Some(e) = self.no_image.take() {
            return Err(run_err(run, e));
        }
        if self.plan.continuous {
            goals_by_observation(&mut self.frames[0], &self.cycles, changes, &self.plan.goals);
        }
        Ok(())
    }
}

/// One cycle's frame: its measurement and the velocities since `fb_prev` (the previous
/// cycle's, `period_s` before), `goal`, what the gate was given and let through, and
/// `image`.
fn frame(
    c: &CycleSample,
    fb_prev: Option<&[f64]>,
    period_s: f64,
    goal: &[f64],
    image: Option<Arc<[u8]>>,
) -> Frame {
    let dof = c.command_rad.len();
    let vel: Vec<f64> = match fb_prev {
        Some(p) if p.len() == dof => (0..dof)
            .map(|j| (c.feedback_rad[j] - p[j]) / period_s)
            .collect(),
        _ => vec![0.0; dof],
    };
    let mut state = f32s(c.feedback_rad);
    state.extend(f32s(&vel));
    let mask: Vec<i64> = (0..dof)
        .map(|j| i64::from(c.gate_mask_joints.get(j).copied().unwrap_or(0)))
        .collect();
    // The shaping stages (action filter, residual gate) are not blocks.
    let blocked = c.gate_mask as u32 & !chunkrt_core::SHAPING_BITS != 0;
    Frame {
        state,
        goal: f32s(goal),
        action: f32s(c.command_rad),
        proposed: f32s(c.setpoint_rad),
        base: if c.base_rad.is_empty() {
            f32s(c.setpoint_rad)
        } else {
            f32s(c.base_rad)
        },
        residual: if c.residual_rad.is_empty() {
            vec![0.0; dof]
        } else {
            f32s(c.residual_rad)
        },
        mask,
        blocked,
        intervention: blocked || c.mode != chunkrt_core::Mode::Playing,
        image,
        wrench: c.wrench.as_ref().map(|w| f32s(w)),
    }
}

/// A continuous run's frames' goals: at each frame's cycle, the goal the policy pursued
/// from the latest observation at or before it (`changes`: from observation `.0` on,
/// goal `.1`; before the first, the first goal).
fn goals_by_observation(
    frames: &mut [Frame],
    cycles: &[u64],
    changes: &[(u64, u16)],
    goals: &[Vec<f64>],
) {
    let mut next = 0;
    let mut goal = changes.first().map_or(0, |c| usize::from(c.1));
    for (f, &cycle) in frames.iter_mut().zip(cycles) {
        while changes.get(next).is_some_and(|c| c.0 <= cycle) {
            goal = usize::from(changes[next].1);
            next += 1;
        }
        if let Some(g) = goals.get(goal % goals.len().max(1)) {
            f.goal = f32s(g);
        }
    }
}

/// A recorded camera image: capture time (s since the run's start), PNG, `(height, width)`.
type CameraImage = (f64, Arc<[u8]>, (u32, u32));

/// The run's recorded camera images in capture order (none without a camera), each
/// checked to be an RGB8 PNG of the first one's size.
fn camera_images(run: &Path, files: &[PathBuf]) -> Result<Vec<CameraImage>, ExportError> {
    let recorded =
        chunkrt_telemetry::readback::images(files).map_err(|e| run_err(run, e.to_string()))?;
    let mut out: Vec<CameraImage> = Vec::with_capacity(recorded.len());
    for r in recorded {
        let bad = |what: String| run_err(run, format!("camera image {}: {what}", r.seq));
        let reader = png::Decoder::new(std::io::Cursor::new(&r.png[..]))
            .read_info()
            .map_err(|e| bad(e.to_string()))?;
        let info = reader.info();
        if (info.color_type, info.bit_depth) != (png::ColorType::Rgb, png::BitDepth::Eight) {
            return Err(bad(format!(
                "{:?} {:?}, not RGB8",
                info.color_type, info.bit_depth
            )));
        }
        let size = (info.height, info.width);
        if let Some(first) = out.first().filter(|f| f.2 != size) {
            return Err(bad(format!(
                "{} x {}, the first image is {} x {}",
                size.0, size.1, first.2 .0, first.2 .1
            )));
        }
        if out.last().is_some_and(|l| l.0 > r.t_s) {
            return Err(bad("captured before the image recorded ahead of it".into()));
        }
        out.push((r.t_s, Arc::from(r.png), size));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_continuous_runs_goal_follows_the_observations_it_changed_at() {
        let frame = |g: f32| Frame {
            goal: vec![g],
            ..Frame::default()
        };
        let mut frames: Vec<Frame> = (0..5).map(|_| frame(-1.0)).collect();
        let goals = vec![vec![10.0], vec![20.0], vec![30.0]];
        // Goal 0 from observation 0, goal 2 from observation 3.
        goals_by_observation(&mut frames, &[1, 2, 3, 4, 9], &[(0, 0), (3, 2)], &goals);
        let got: Vec<f32> = frames.iter().map(|f| f.goal[0]).collect();
        assert_eq!(got, vec![10.0, 10.0, 30.0, 30.0, 30.0]);
    }
}
