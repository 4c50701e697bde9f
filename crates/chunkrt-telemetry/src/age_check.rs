//! Whether `executor.max_chunk_age_ms` holds at the inference time the run measures.
//!
//! The config check ([`chunkrt_config::min_chunk_age_ms`]) can only assume the
//! inference time: `policy.deadline_ms`, or one control tick. A slower policy (a
//! larger model, a busy CPU, an injected delay) leaves a chunk age that passed the
//! check expiring chunks before their successors play, and the arm falls back every
//! few hundred milliseconds with nothing naming the cause. Here the same bound is
//! computed again from the median inference time (observation to publish) of the
//! run's first chunks, and a shortfall is said once, with the value to set.

/// Chunks left out at the start (the first calls of a fresh ONNX Runtime session
/// are slower than the rest).
const SKIP: u32 = 3;
/// Chunks whose median inference time is judged.
const JUDGED: usize = 20;

/// See the module docs.
#[derive(Debug)]
pub struct ChunkAgeCheck {
    period_ms: f64,
    chunk_period_ms: f64,
    max_chunk_age_ms: f64,
    seen: u32,
    latencies_ms: Vec<f64>,
}

impl ChunkAgeCheck {
    /// The check of a config's `control.period_ms`, `inference.chunk_period_ms` and
    /// `executor.max_chunk_age_ms`.
    pub fn new(period_ms: f64, chunk_period_ms: f64, max_chunk_age_ms: f64) -> Self {
        ChunkAgeCheck {
            period_ms,
            chunk_period_ms,
            max_chunk_age_ms,
            seen: 0,
            latencies_ms: Vec::with_capacity(JUDGED),
        }
    }

    /// One published chunk's inference time (ms, observation to publish). Once the
    /// judged chunks are in, the shortfall, if there is one, as the message to say
    /// (only then, once).
    pub fn published(&mut self, latency_ms: f64) -> Option<String> {
        self.seen += 1;
        if self.seen <= SKIP || self.latencies_ms.len() >= JUDGED || !latency_ms.is_finite() {
            return None;
        }
        self.latencies_ms.push(latency_ms);
        if self.latencies_ms.len() < JUDGED {
            return None;
        }
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[JUDGED / 2];
        let need = chunkrt_config::min_chunk_age_ms(self.period_ms, self.chunk_period_ms, median);
        (self.max_chunk_age_ms < need).then(|| {
            format!(
                "executor.max_chunk_age_ms {} expires chunks before their successors play at \
                 the inference time this run measures ({median:.1} ms median, observation to \
                 publish, over chunks {} to {}): set it to {need} or more \
                 (inference.chunk_period_ms {} and {median:.1} ms, each rounded up to \
                 control.period_ms {} ticks), or make inference faster",
                self.max_chunk_age_ms,
                SKIP + 1,
                SKIP as usize + JUDGED,
                self.chunk_period_ms,
                self.period_ms,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(age_ms: f64) -> ChunkAgeCheck {
        ChunkAgeCheck::new(20.0, 50.0, age_ms)
    }

    /// 50 ms chunks observed on a 20 ms grid lie up to 60 ms apart; 48 ms of
    /// inference is three ticks more: 120 ms. 100 ms (which the config check, at
    /// one tick of inference, passes: 80) is said, once; 120 is not.
    #[test]
    fn a_chunk_age_short_of_the_measured_inference_time_is_said_once() {
        let mut short = check(100.0);
        let mut said = Vec::new();
        for k in 0..40 {
            // The first chunks slow (a fresh session), then 48 ms with one spike.
            let lat = if k < 3 {
                400.0
            } else if k == 10 {
                90.0
            } else {
                48.0
            };
            said.extend(short.published(lat));
        }
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with("executor.max_chunk_age_ms 100 expires chunks")
                && said[0].contains("48.0 ms median")
                && said[0].contains("set it to 120 or more"),
            "{}",
            said[0]
        );
        let mut enough = check(120.0);
        assert!((0..40).all(|_| enough.published(48.0).is_none()));
        // Fast inference: the config check's own bound holds.
        let mut fast = check(80.0);
        assert!((0..40).all(|_| fast.published(4.0).is_none()));
    }
}
