//! The inference thread: an absolute schedule, one chunk per period, phase-locked
//! to the control loop's deadline grid.
//!
//! Each chunk period starts on a control tick: the thread wakes just before the first
//! tick at or after its nominal (absolute, drift-free) time and takes the observation
//! that tick captures. Left free-running, the 50 ms schedule would drift across the
//! 20 ms control grid: the observation it reads would be anything from fresh to one
//! period old (a race when a wake lands on a tick), and the command derived from it
//! would leave one or two ticks later, a whole control period of end-to-end jitter.
//! Locked to the grid, the observation is always the tick's own (its age is the
//! cycle's compute time) and the first command from the chunk leaves on the next tick
//! whenever inference fits one control period. When the bus period does not divide
//! the chunk period (50 ms on a 20 ms grid) the chunk intervals alternate around the
//! nominal one (40/60 ms) and average it exactly.

use crate::os;
use chunkrt_buffer::{Publisher, Subscriber};
use chunkrt_core::{Chunk, MonoTime, Observation, Policy};
use chunkrt_telemetry::{InferProducer, InferRecord, InferStatus};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// What the inference thread needs.
pub struct InferenceParts {
    /// The policy.
    pub policy: Box<dyn Policy>,
    /// Observations from the control loop.
    pub observations: Subscriber<Observation>,
    /// Chunks to the control loop.
    pub chunks: Publisher<Chunk>,
    /// Inference records to telemetry.
    pub records: InferProducer,
    /// Chunk period.
    pub period_ns: u64,
    /// The control loop's deadline grid the schedule is locked to.
    pub grid: Arc<ControlGrid>,
    /// Time of setpoint 0 relative to the observation (signed ns).
    pub start_offset_ns: i64,
    /// Extrapolate the measured positions by velocity x the observation's age.
    pub extrapolate: bool,
    /// Set by the runtime to end the loop.
    pub stop: Arc<AtomicBool>,
    /// Set by this thread when the policy panicked (the control loop then stops safely).
    pub failed: Arc<AtomicBool>,
    /// Injected inference delay and dropped chunks (`[inject]`, issue 8).
    pub inject: crate::inject::InferenceInjection,
    /// A copy of every published chunk, for the recording (none: not recorded).
    pub chunk_records: Option<chunkrt_telemetry::ChunkProducer>,
    /// This thread's own count of the chunks it handed over (for the report's
    /// reconciliation; inference records can be lost to a full ring, these cannot).
    pub handoff: Arc<HandoffCounts>,
    /// Candidates per chunk and how to choose among them (`crate::select`).
    pub selection: crate::select::SelectionConfig,
    /// The camera, for a policy that takes an image (none: no camera).
    pub camera: Option<crate::camera::CameraFeed>,
}

/// Chunks the inference thread handed to the control loop, counted at the source.
#[derive(Debug, Default)]
pub struct HandoffCounts {
    /// Chunks published into the triple buffer.
    pub published: AtomicU64,
    /// Published chunks that replaced one the control loop had not read yet (the
    /// overwritten chunk is never offered to the executor).
    pub overwritten: AtomicU64,
}

/// The control loop's deadlines are `origin + k * period`; the control thread sets the
/// origin when its loop starts (0 until then).
#[derive(Debug)]
pub struct ControlGrid {
    origin_ns: AtomicU64,
    period_ns: u64,
}

impl ControlGrid {
    /// A grid of this period whose origin is not set yet.
    pub fn new(period_ns: u64) -> Self {
        ControlGrid {
            origin_ns: AtomicU64::new(0),
            period_ns: period_ns.max(1),
        }
    }

    /// Called by the control thread with the time its deadlines count from.
    pub fn start(&self, origin: MonoTime) {
        self.origin_ns
            .store(origin.as_ns().max(1), Ordering::Release);
    }

    /// Moves the origin by `ns` (the control loop's phase lock to SYNC0 moved its
    /// deadlines); the origin stays set.
    pub fn shift(&self, ns: i64) {
        let _ = self
            .origin_ns
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
                (o != 0).then(|| o.saturating_add_signed(ns).max(1))
            });
    }

    /// The origin, once the control loop has started.
    pub fn origin(&self) -> Option<MonoTime> {
        match self.origin_ns.load(Ordering::Acquire) {
            0 => None,
            ns => Some(MonoTime(ns)),
        }
    }

    /// The control period.
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }
}

/// How long before a tick the thread wakes to be ready for the tick's observation.
fn wake_guard_ns(control_period_ns: u64) -> u64 {
    (control_period_ns / 2).min(1_000_000)
}

/// Sleep between polls for the tick's observation (a normal-priority thread; the
/// control thread is never asked to signal, it makes no syscall for us).
const POLL_NS: u64 = 50_000;

/// Takes the observation the control loop publishes for `tick`: wakes a little before
/// the tick, discards what was published before it, then polls until a new one
/// arrives at or after the tick. When none arrives within one control period (the
/// control loop stalled or stopped) it returns the newest it has, whose age the
/// `obs_age` metric then shows.
fn observation_at(
    observations: &mut Subscriber<Observation>,
    tick: MonoTime,
    control_period_ns: u64,
    stop: &AtomicBool,
) -> Observation {
    os::sleep_until(MonoTime(
        tick.as_ns()
            .saturating_sub(wake_guard_ns(control_period_ns)),
    ));
    let give_up = tick.add_ns(control_period_ns);
    loop {
        observations.update();
        let now = os::now();
        // Only the tick's own cycle (or a later one) will do: a thread that wakes
        // after the tick but before that cycle published finds the previous cycle's
        // observation still unread.
        if observations.peek().t_cycle >= tick {
            break;
        }
        if now >= give_up || stop.load(Ordering::Relaxed) {
            break;
        }
        os::sleep_until(now.add_ns(POLL_NS));
    }
    *observations.peek()
}

/// How the inference thread ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InferenceExit {
    /// Stopped on request.
    Stopped,
    /// The policy panicked; the control loop went on with its fallback.
    Panicked(String),
}

/// `obs` with its measured positions moved on by the measured velocity times its
/// age at `now` (a joint with a non-finite velocity is left where it was measured).
pub fn extrapolated(obs: &Observation, now: MonoTime) -> Observation {
    let age_s = now.saturating_since(obs.t_capture) as f64 * 1e-9;
    let mut out = *obs;
    let dof = (obs.dof as usize).min(chunkrt_core::MAX_DOF);
    for j in 0..dof {
        let v = obs.vel_rad_s[j];
        if v.is_finite() {
            out.pos_rad[j] += v * age_s;
        }
    }
    out
}

/// Runs until `stop`: every period, the observation of a control tick -> policy ->
/// stamped chunk.
pub fn run(mut p: InferenceParts) -> InferenceExit {
    let mut chunk = Box::new(Chunk::default());
    let mut select = crate::select::Selection::new(p.selection);
    let mut seq = 0u64;
    let origin = loop {
        if p.stop.load(Ordering::Relaxed) {
            return InferenceExit::Stopped;
        }
        match p.grid.origin() {
            Some(t) => break t,
            None => os::sleep_until(os::now().add_ns(POLL_NS)),
        }
    };
    let control_period_ns = p.grid.period_ns();
    let mut nominal = origin.add_ns(p.period_ns);
    while !p.stop.load(Ordering::Relaxed) {
        // Late (inference overran): skip the periods that have passed instead of
        // bursting.
        nominal = nominal.grid_at_or_after(p.period_ns, os::now());
        let tick = origin.grid_at_or_after(control_period_ns, nominal);
        nominal = nominal.add_ns(p.period_ns);
        let obs = observation_at(&mut p.observations, tick, control_period_ns, &p.stop);
        if p.stop.load(Ordering::Relaxed) {
            break;
        }
        if !obs.t_capture.is_set() {
            continue; // the control loop has not measured anything yet
        }
        let t_begin = os::now();
        // The camera image: the newest frame, judged by its age now. An observation is
        // as old as its oldest part; a stale image gives no chunk (the one being played
        // ages out and the executor takes authority as for any stale chunk).
        let mut t_oldest = obs.t_capture;
        let (mut t_image, mut image_seq) = (MonoTime::ZERO, 0);
        if let Some(cam) = p.camera.as_mut() {
            cam.frames.update();
            let frame = cam.frames.peek();
            t_image = frame.t_capture;
            image_seq = frame.seq;
            if frame.seq == 0 || t_begin.saturating_since(frame.t_capture) > cam.max_age_ns {
                p.records.push(InferRecord {
                    t_obs: if frame.seq == 0 {
                        obs.t_capture
                    } else {
                        frame.t_capture.min(obs.t_capture)
                    },
                    obs,
                    t_begin,
                    t_end: t_begin,
                    status: InferStatus::StaleImage,
                    t_image,
                    image_seq,
                    ..InferRecord::default()
                });
                continue;
            }
            t_oldest = frame.t_capture.min(obs.t_capture);
            let image = chunkrt_core::ImageRef {
                seq: frame.seq,
                t_capture: frame.t_capture,
                height: frame.height as usize,
                width: frame.width as usize,
                rgb: frame.pixels(),
            };
            let policy = &mut p.policy;
            let given = std::panic::catch_unwind(AssertUnwindSafe(|| policy.observe_image(&image)));
            if !matches!(given, Ok(Ok(()))) {
                if let Ok(Err(e)) = &given {
                    tracing::warn!("camera image refused: {e}");
                }
                p.records.push(InferRecord {
                    t_obs: t_oldest,
                    obs,
                    t_begin,
                    t_end: os::now(),
                    status: InferStatus::Failed,
                    t_image,
                    image_seq,
                    ..InferRecord::default()
                });
                if given.is_err() {
                    p.failed.store(true, Ordering::Release);
                    return InferenceExit::Panicked("policy panicked on a camera image".into());
                }
                continue;
            }
        }
        let obs = if p.extrapolate {
            extrapolated(&obs, t_begin)
        } else {
            obs
        };
        // The new chunk is first played on the next control deadline.
        let t_first = tick.add_ns(control_period_ns);
        let mut best: Option<(usize, f64)> = None;
        let mut cost_first = 0.0;
        let mut drawn = 0u16;
        let mut result = Ok(Ok(chunkrt_core::InferInfo::default()));
        for i in 0..select.count() {
            if i > 0 && !select.within_budget(os::now().saturating_since(t_begin)) {
                break;
            }
            let policy = &mut p.policy;
            let out = &mut *select.candidates[i];
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| policy.infer(&obs, out)));
            let ok = matches!(r, Ok(Ok(_)));
            if i == 0 || !ok {
                // The first candidate's outcome is the chunk's (a later failure ends
                // the drawing; the candidates drawn so far stand).
                if i == 0 || best.is_none() {
                    result = r;
                }
                if !ok {
                    break;
                }
            }
            drawn += 1;
            let c = &mut *select.candidates[i];
            c.t_obs = t_oldest;
            c.t_start = obs.t_capture.add_signed_ns(p.start_offset_ns);
            let cost = select.mismatch_of(i, t_first);
            if i == 0 {
                cost_first = cost;
            }
            if best.is_none_or(|(_, b)| cost < b) {
                best = Some((i, cost));
            }
        }
        let (chosen, seam_cost) = best.unwrap_or((0, 0.0));
        *chunk = *select.candidates[chosen];
        let info = match result {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => {
                tracing::warn!("inference failed: {e}");
                p.records.push(InferRecord {
                    seq: 0,
                    t_obs: t_oldest,
                    obs,
                    t_begin,
                    t_end: os::now(),
                    status: InferStatus::Failed,
                    t_image,
                    image_seq,
                    ..InferRecord::default()
                });
                continue;
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                tracing::error!("policy panicked: {msg}; the control loop brings the arm to rest");
                p.failed.store(true, Ordering::Release);
                return InferenceExit::Panicked(msg);
            }
        };
        // Injected inference delay, then maybe a dropped chunk (issue 8): the chunk was
        // computed, and is held back or never published, as a slow or lossy link would.
        let (inject_delay_ns, inject_drop) = p.inject.decide();
        if inject_delay_ns > 0 {
            os::sleep_until(os::now().add_ns(inject_delay_ns));
        }
        if inject_drop {
            p.records.push(InferRecord {
                seq: 0,
                t_obs: t_oldest,
                obs,
                t_begin,
                t_end: os::now(),
                t_image,
                image_seq,
                steps: info.steps,
                steps_nominal: info.steps_nominal,
                step_ns: info.step_ns,
                status: InferStatus::Dropped,
                out_of_domain: info.out_of_domain,
                ..InferRecord::default()
            });
            continue;
        }
        seq += 1;
        chunk.seq = seq;
        chunk.t_obs = t_oldest;
        chunk.out_of_domain = info.out_of_domain;
        chunk.t_start = obs.t_capture.add_signed_ns(p.start_offset_ns);
        let t_publish = os::now();
        chunk.t_publish = t_publish;
        if p.chunks.publish(&chunk) {
            p.handoff.overwritten.fetch_add(1, Ordering::Relaxed);
        }
        select.published(&chunk);
        p.handoff.published.fetch_add(1, Ordering::Relaxed);
        if let Some(r) = p.chunk_records.as_mut() {
            r.push(&chunk);
        }
        p.records.push(InferRecord {
            seq,
            t_obs: t_oldest,
            t_image,
            image_seq,
            obs,
            t_begin,
            t_end: t_publish,
            steps: info.steps,
            steps_nominal: info.steps_nominal,
            step_ns: info.step_ns,
            status: InferStatus::Published,
            out_of_domain: info.out_of_domain,
            candidates: drawn,
            seam_cost: seam_cost as f32,
            seam_cost_first: cost_first as f32,
        });
    }
    InferenceExit::Stopped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_50_ms_schedule_on_a_20_ms_grid_alternates_40_60_and_averages_50() {
        let origin = MonoTime::from_ms(0);
        let ticks: Vec<u64> = (1..=10)
            .map(|n| {
                origin
                    .grid_at_or_after(20_000_000, MonoTime::from_ms(50 * n))
                    .as_ns()
            })
            .collect();
        let gaps: Vec<u64> = ticks
            .windows(2)
            .map(|w| (w[1] - w[0]) / 1_000_000)
            .collect();
        assert!(gaps.iter().all(|&g| g == 40 || g == 60), "{gaps:?}");
        assert_eq!((ticks[9] - ticks[1]) / 1_000_000, 400);
        // On a 1 ms grid the schedule is exact.
        for n in 1..=10 {
            let t = MonoTime::from_ms(50 * n);
            assert_eq!(origin.grid_at_or_after(1_000_000, t), t);
        }
    }

    #[test]
    fn the_observation_is_the_one_published_at_or_after_the_tick() {
        let (mut publisher, mut subscriber) = chunkrt_buffer::channel(Observation::default());
        let stop = Arc::new(AtomicBool::new(false));
        // A generous control period: the writer thread below must publish within it
        // even on a loaded machine, or the reader gives up (a chance failure, seen at
        // load average 8 with 20 ms).
        let period = 500_000_000;
        // The cycle before the tick published, and nobody read it yet; the thread
        // wakes after the tick, before the tick's own cycle publishes (it is late):
        // the unread observation is the previous cycle's and must not be taken.
        let tick = os::now();
        publisher.publish(&Observation {
            seq: 1,
            t_capture: tick.add_signed_ns(-(period as i64) + 100_000),
            t_cycle: tick.add_signed_ns(-(period as i64)),
            ..Observation::default()
        });
        os::sleep_until(tick.add_ns(500_000));
        let writer = std::thread::spawn(move || {
            os::sleep_until(tick.add_ns(2_000_000));
            publisher.publish(&Observation {
                seq: 2,
                t_capture: os::now(),
                t_cycle: tick,
                ..Observation::default()
            });
            publisher
        });
        let obs = observation_at(&mut subscriber, tick, period, &stop);
        assert_eq!(obs.seq, 2, "took the previous cycle's observation");
        assert!(obs.t_capture >= tick);
        let _publisher = writer.join().unwrap();
        // Nothing arrives: it gives up after a control period with the newest it has.
        let tick = os::now().add_ns(1_000_000);
        let obs = observation_at(&mut subscriber, tick, period, &stop);
        assert_eq!(obs.seq, 2);
        assert!(os::now() >= tick.add_ns(period));
    }
}
