//! The inference thread: an absolute schedule, one chunk per period.

use crate::os;
use chunkrt_buffer::{Publisher, Subscriber};
use chunkrt_core::{Chunk, Observation, Policy};
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
    /// Time of setpoint 0 relative to the observation (signed ns).
    pub start_offset_ns: i64,
    /// Set by the runtime to end the loop.
    pub stop: Arc<AtomicBool>,
    /// Set by this thread when the policy panicked (the control loop then stops safely).
    pub failed: Arc<AtomicBool>,
    /// Injected inference delay and dropped chunks (`[inject]`, issue 8).
    pub inject: crate::inject::InferenceInjection,
    /// This thread's own count of the chunks it handed over (for the report's
    /// reconciliation; inference records can be lost to a full ring, these cannot).
    pub handoff: Arc<HandoffCounts>,
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

/// How the inference thread ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InferenceExit {
    /// Stopped on request.
    Stopped,
    /// The policy panicked; the control loop went on with its fallback.
    Panicked(String),
}

/// Runs until `stop`: every period, newest observation -> policy -> stamped chunk.
pub fn run(mut p: InferenceParts) -> InferenceExit {
    let mut chunk = Box::new(Chunk::default());
    let mut seq = 0u64;
    let mut next = os::now().add_ns(p.period_ns);
    while !p.stop.load(Ordering::Relaxed) {
        os::sleep_until(next);
        next = next.add_ns(p.period_ns);
        let now = os::now();
        if now > next {
            // Late: skip the periods that have passed instead of bursting.
            let behind = now.saturating_since(next) / p.period_ns + 1;
            next = next.add_ns(behind * p.period_ns);
        }
        let obs = match p.observations.latest() {
            Some(o) => *o,
            None => *p.observations.peek(),
        };
        if !obs.t_capture.is_set() {
            continue; // the control loop has not measured anything yet
        }
        let t_begin = os::now();
        let policy = &mut p.policy;
        let out = &mut *chunk;
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| policy.infer(&obs, out)));
        let info = match result {
            Ok(Ok(info)) => info,
            Ok(Err(e)) => {
                tracing::warn!("inference failed: {e}");
                p.records.push(InferRecord {
                    seq: 0,
                    t_obs: obs.t_capture,
                    t_begin,
                    t_end: os::now(),
                    status: InferStatus::Failed,
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
                t_obs: obs.t_capture,
                t_begin,
                t_end: os::now(),
                steps: info.steps,
                steps_nominal: info.steps_nominal,
                step_ns: info.step_ns,
                status: InferStatus::Dropped,
                out_of_domain: info.out_of_domain,
            });
            continue;
        }
        seq += 1;
        chunk.seq = seq;
        chunk.t_obs = obs.t_capture;
        chunk.out_of_domain = info.out_of_domain;
        chunk.t_start = obs.t_capture.add_signed_ns(p.start_offset_ns);
        let t_publish = os::now();
        chunk.t_publish = t_publish;
        if p.chunks.publish(&chunk) {
            p.handoff.overwritten.fetch_add(1, Ordering::Relaxed);
        }
        p.handoff.published.fetch_add(1, Ordering::Relaxed);
        p.records.push(InferRecord {
            seq,
            t_obs: obs.t_capture,
            t_begin,
            t_end: t_publish,
            steps: info.steps,
            steps_nominal: info.steps_nominal,
            step_ns: info.step_ns,
            status: InferStatus::Published,
            out_of_domain: info.out_of_domain,
        });
    }
    InferenceExit::Stopped
}
