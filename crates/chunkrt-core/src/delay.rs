//! Delay injection: seeded delay models, a fixed-capacity delay line, dropped-chunk
//! decisions.
//!
//! Everything here is deterministic from a seed and allocation-free after
//! construction, so that the control thread can carry a delay line and an
//! experiment can be repeated bit for bit. The generator is splitmix64 (small, fast,
//! passes BigCrush on its 64-bit output, and any seed, zero included, is fine);
//! normal variates come from Box-Muller. Each injection point draws from its own
//! stream ([`stream_seed`]) so that changing one point's parameters does not shift
//! another point's sequence.

use crate::time::MonoTime;

/// Capacity of the delay lines the runtime preallocates (entries). At a 1 ms bus
/// period it holds about one second of delay; configs are checked against it.
pub const INJECT_LINE_CAPACITY: usize = 1024;

/// Splitmix64: a tiny seeded pseudo-random generator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose sequence is fixed by `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits of resolution.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A standard normal variate (Box-Muller; the second variate is not kept, so the
    /// sequence depends only on how many draws were made).
    pub fn next_normal(&mut self) -> f64 {
        // 1 - u is in (0, 1], so the logarithm is finite.
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * core::f64::consts::PI * u2).cos()
    }
}

/// The seed of one injection point's stream, derived from the run's seed, so that
/// points draw independent sequences.
pub fn stream_seed(seed: u64, stream: u64) -> u64 {
    SplitMix64::new(seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64()
}

/// A distribution of injected delays (nanoseconds; never negative).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DelayModel {
    /// Always the same delay.
    Fixed {
        /// The delay.
        ns: u64,
    },
    /// Uniform between the bounds (inclusive lower, exclusive upper).
    Uniform {
        /// Lower bound.
        min_ns: u64,
        /// Upper bound (>= `min_ns`).
        max_ns: u64,
    },
    /// Normal, clipped at zero (clipping biases the mean up when `std_ns` is
    /// comparable to `mean_ns`; the config keeps them apart).
    Normal {
        /// Mean.
        mean_ns: u64,
        /// Standard deviation.
        std_ns: u64,
    },
    /// `base_ns` most of the time; with probability `probability` a spike of
    /// `spike_ns` instead (the warm-up or GC stall that breaks a chunk schedule).
    Spikes {
        /// The usual delay.
        base_ns: u64,
        /// The delay of a spike.
        spike_ns: u64,
        /// Probability of a spike per draw, in [0, 1].
        probability: f64,
    },
}

impl DelayModel {
    /// No delay at all.
    pub const NONE: DelayModel = DelayModel::Fixed { ns: 0 };

    /// Whether every draw is zero (the injection point can be bypassed).
    pub fn is_zero(&self) -> bool {
        match *self {
            DelayModel::Fixed { ns } => ns == 0,
            DelayModel::Uniform { max_ns, .. } => max_ns == 0,
            DelayModel::Normal { mean_ns, std_ns } => mean_ns == 0 && std_ns == 0,
            DelayModel::Spikes {
                base_ns,
                spike_ns,
                probability,
            } => base_ns == 0 && (spike_ns == 0 || probability <= 0.0),
        }
    }

    /// The mean of the distribution (before clipping, for `Normal`).
    pub fn mean_ns(&self) -> f64 {
        match *self {
            DelayModel::Fixed { ns } => ns as f64,
            DelayModel::Uniform { min_ns, max_ns } => 0.5 * (min_ns as f64 + max_ns as f64),
            DelayModel::Normal { mean_ns, .. } => mean_ns as f64,
            DelayModel::Spikes {
                base_ns,
                spike_ns,
                probability,
            } => base_ns as f64 * (1.0 - probability) + spike_ns as f64 * probability,
        }
    }
}

/// Draws delays from a [`DelayModel`] with its own seeded stream.
#[derive(Clone, Copy, Debug)]
pub struct DelaySampler {
    model: DelayModel,
    rng: SplitMix64,
}

impl DelaySampler {
    /// A sampler of `model` seeded with `seed`.
    pub fn new(model: DelayModel, seed: u64) -> Self {
        DelaySampler {
            model,
            rng: SplitMix64::new(seed),
        }
    }

    /// The model.
    pub fn model(&self) -> DelayModel {
        self.model
    }

    /// The next delay.
    pub fn sample_ns(&mut self) -> u64 {
        match self.model {
            DelayModel::Fixed { ns } => ns,
            DelayModel::Uniform { min_ns, max_ns } => {
                let span = max_ns.saturating_sub(min_ns) as f64;
                min_ns + (self.rng.next_f64() * span) as u64
            }
            DelayModel::Normal { mean_ns, std_ns } => {
                let v = mean_ns as f64 + std_ns as f64 * self.rng.next_normal();
                v.max(0.0).round() as u64
            }
            DelayModel::Spikes {
                base_ns,
                spike_ns,
                probability,
            } => {
                if self.rng.next_f64() < probability {
                    spike_ns
                } else {
                    base_ns
                }
            }
        }
    }
}

/// Decides, chunk by chunk, whether a computed chunk is dropped instead of published.
#[derive(Clone, Copy, Debug)]
pub struct DropDecider {
    probability: f64,
    rng: SplitMix64,
}

impl DropDecider {
    /// Drops with `probability` (clamped to [0, 1]) per chunk, seeded with `seed`.
    pub fn new(probability: f64, seed: u64) -> Self {
        let probability = if probability.is_finite() {
            probability.clamp(0.0, 1.0)
        } else {
            0.0
        };
        DropDecider {
            probability,
            rng: SplitMix64::new(seed),
        }
    }

    /// Whether the next chunk is dropped. Draws even at probability 0, so the
    /// sequence of decisions for a seed does not depend on earlier zero settings.
    pub fn drop_next(&mut self) -> bool {
        self.rng.next_f64() < self.probability
    }
}

/// A push into a full [`DelayLine`]: the value was not stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayLineFull {
    /// The line's capacity.
    pub capacity: usize,
}

impl core::fmt::Display for DelayLineFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "delay line full ({} entries)", self.capacity)
    }
}

impl std::error::Error for DelayLineFull {}

/// A fixed-capacity FIFO that releases each value exactly `delay_ns` after the time
/// it was pushed at: what a slow bus or a sensor pipeline does to a stream.
///
/// No allocation after construction (box it when `N * size_of::<T>()` is large).
/// Values come out in push order; a value pushed at `t` is due at `t + delay_ns`
/// and not a nanosecond earlier.
#[derive(Clone, Debug)]
pub struct DelayLine<T: Copy, const N: usize> {
    release_ns: [u64; N],
    values: [T; N],
    head: usize,
    len: usize,
    delay_ns: u64,
    overflows: u64,
}

impl<T: Copy, const N: usize> DelayLine<T, N> {
    /// An empty line delaying by `delay_ns`; `fill` only initialises the storage.
    pub fn new(delay_ns: u64, fill: T) -> Self {
        assert!(N > 0, "a delay line needs a capacity");
        DelayLine {
            release_ns: [0; N],
            values: [fill; N],
            head: 0,
            len: 0,
            delay_ns,
            overflows: 0,
        }
    }

    /// The delay.
    pub fn delay_ns(&self) -> u64 {
        self.delay_ns
    }

    /// Values waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Capacity `N`.
    pub fn capacity(&self) -> usize {
        N
    }

    /// Pushes refused because the line was full.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// Enqueues `value`, pushed at `now`, due at `now + delay_ns`. A full line refuses
    /// it (and counts the overflow): the caller decides what a lost value means.
    pub fn push(&mut self, now: MonoTime, value: T) -> Result<(), DelayLineFull> {
        if self.len == N {
            self.overflows += 1;
            return Err(DelayLineFull { capacity: N });
        }
        let i = (self.head + self.len) % N;
        self.release_ns[i] = now.as_ns().saturating_add(self.delay_ns);
        self.values[i] = value;
        self.len += 1;
        Ok(())
    }

    /// The oldest value whose release time has come, removed from the line.
    pub fn pop_due(&mut self, now: MonoTime) -> Option<T> {
        if self.len == 0 || self.release_ns[self.head] > now.as_ns() {
            return None;
        }
        let v = self.values[self.head];
        self.head = (self.head + 1) % N;
        self.len -= 1;
        Some(v)
    }

    /// Removes every due value and returns the newest of them (what a receiver that
    /// only keeps the latest sample sees).
    pub fn pop_latest_due(&mut self, now: MonoTime) -> Option<T> {
        let mut latest = None;
        while let Some(v) = self.pop_due(now) {
            latest = Some(v);
        }
        latest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn delay_line_releases_exactly_after_the_delay() {
        let mut line: DelayLine<u64, 16> = DelayLine::new(3 * MS + 1, 0);
        // Push one value per millisecond, pop every 100 us: each value must appear at
        // exactly push time + delay, never earlier.
        let mut out = Vec::new();
        for step in 0..400u64 {
            let t = step * 100_000;
            if t % MS == 0 {
                line.push(MonoTime(t), t).unwrap();
            }
            while let Some(v) = line.pop_due(MonoTime(t)) {
                out.push((v, t));
            }
        }
        assert!(out.len() >= 30);
        for (pushed, popped) in out {
            // Release at pushed + 3 ms + 1 ns, first seen on the next 100 us grid point.
            assert_eq!(
                popped,
                pushed + 3 * MS + 100_000,
                "value pushed at {pushed}"
            );
        }
        let mut exact: DelayLine<u64, 4> = DelayLine::new(5 * MS, 0);
        exact.push(MonoTime(10 * MS), 7).unwrap();
        assert_eq!(exact.pop_due(MonoTime(15 * MS - 1)), None);
        assert_eq!(exact.pop_due(MonoTime(15 * MS)), Some(7));
        assert!(exact.is_empty());
    }

    #[test]
    fn delay_line_in_cycles_shifts_the_stream_by_whole_cycles() {
        let mut line: DelayLine<u32, 8> = DelayLine::new(5 * MS, 0);
        let mut seen = Vec::new();
        for k in 0..20u32 {
            let t = MonoTime(u64::from(k) * MS);
            line.push(t, k).unwrap();
            seen.push(line.pop_latest_due(t));
        }
        for (k, v) in seen.iter().enumerate() {
            let expected = (k >= 5).then(|| k as u32 - 5);
            assert_eq!(*v, expected, "cycle {k}");
        }
        // Zero delay: a value is due the instant it is pushed.
        let mut zero: DelayLine<u32, 2> = DelayLine::new(0, 0);
        zero.push(MonoTime(1), 9).unwrap();
        assert_eq!(zero.pop_due(MonoTime(1)), Some(9));
    }

    #[test]
    fn delay_line_overflow_is_refused_and_counted() {
        let mut line: DelayLine<u8, 3> = DelayLine::new(MS, 0);
        for i in 0..3 {
            line.push(MonoTime(0), i).unwrap();
        }
        assert_eq!(
            line.push(MonoTime(0), 9),
            Err(DelayLineFull { capacity: 3 })
        );
        assert_eq!(line.overflows(), 1);
        // The stored values are untouched, in order, and the ring wraps cleanly.
        assert_eq!(line.pop_due(MonoTime(MS)), Some(0));
        line.push(MonoTime(MS), 3).unwrap();
        assert_eq!(line.pop_latest_due(MonoTime(2 * MS)), Some(3));
        assert!(line.is_empty());
    }

    fn moments(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
        (mean, var)
    }

    fn draws(model: DelayModel, seed: u64, n: usize) -> Vec<f64> {
        let mut s = DelaySampler::new(model, seed);
        (0..n).map(|_| s.sample_ns() as f64).collect()
    }

    #[test]
    fn seeded_distributions_have_their_moments() {
        let n = 200_000;
        // Uniform [2, 10] ms: mean 6 ms, variance 64/12 ms^2.
        let (m, v) = moments(&draws(
            DelayModel::Uniform {
                min_ns: 2 * MS,
                max_ns: 10 * MS,
            },
            1,
            n,
        ));
        assert!((m / MS as f64 - 6.0).abs() < 0.03, "uniform mean {m}");
        let v_ms2 = v / (MS as f64 * MS as f64);
        assert!((v_ms2 - 64.0 / 12.0).abs() < 0.1, "uniform var {v_ms2}");
        // Normal 20 ms +- 3 ms (clipping at 0 is negligible 6.7 sigma away).
        let (m, v) = moments(&draws(
            DelayModel::Normal {
                mean_ns: 20 * MS,
                std_ns: 3 * MS,
            },
            2,
            n,
        ));
        assert!((m / MS as f64 - 20.0).abs() < 0.05, "normal mean {m}");
        let sd = v.sqrt() / MS as f64;
        assert!((sd - 3.0).abs() < 0.05, "normal sd {sd}");
        // Spikes: 5 % of 100 ms over a 1 ms base.
        let xs = draws(
            DelayModel::Spikes {
                base_ns: MS,
                spike_ns: 100 * MS,
                probability: 0.05,
            },
            3,
            n,
        );
        let rate = xs.iter().filter(|&&x| x == (100 * MS) as f64).count() as f64 / n as f64;
        assert!((rate - 0.05).abs() < 0.003, "spike rate {rate}");
        assert!(xs.iter().all(|&x| x == MS as f64 || x == (100 * MS) as f64));
        // Fixed is fixed.
        assert!(draws(DelayModel::Fixed { ns: 42 }, 4, 100)
            .iter()
            .all(|&x| x == 42.0));
    }

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        let model = DelayModel::Normal {
            mean_ns: 10 * MS,
            std_ns: 2 * MS,
        };
        assert_eq!(draws(model, 7, 1000), draws(model, 7, 1000));
        assert_ne!(draws(model, 7, 1000), draws(model, 8, 1000));
        let decisions = |seed| {
            let mut d = DropDecider::new(0.2, seed);
            (0..1000).map(|_| d.drop_next()).collect::<Vec<_>>()
        };
        assert_eq!(decisions(5), decisions(5));
        assert_ne!(decisions(5), decisions(6));
        assert_ne!(stream_seed(1, 0), stream_seed(1, 1));
    }

    #[test]
    fn drop_rate_matches_the_probability() {
        let mut d = DropDecider::new(0.1, 11);
        let n = 100_000;
        let dropped = (0..n).filter(|_| d.drop_next()).count() as f64 / n as f64;
        assert!((dropped - 0.1).abs() < 0.005, "drop rate {dropped}");
        let mut never = DropDecider::new(0.0, 11);
        assert!((0..10_000).all(|_| !never.drop_next()));
        let mut nan = DropDecider::new(f64::NAN, 11);
        assert!(!nan.drop_next());
    }

    proptest::proptest! {
        /// Whatever the delay, push times and poll times: values come out in push
        /// order, never before `push + delay`, and at the first poll at or after it.
        #[test]
        fn delay_line_is_exact_for_any_schedule(
            delay_ns in 0u64..5_000_000,
            gaps in proptest::collection::vec(0u64..2_000_000, 1..200),
            poll_ns in 1u64..700_000,
        ) {
            let mut line: DelayLine<(u64, u64), 256> = DelayLine::new(delay_ns, (0, 0));
            let mut t_push = 0u64;
            let mut pending = std::collections::VecDeque::new();
            let mut t = 0u64;
            for (id, gap) in gaps.into_iter().enumerate() {
                let id = id as u64;
                t_push += gap;
                // Poll up to (and including) the push instant, then push.
                while t + poll_ns <= t_push {
                    t += poll_ns;
                    while let Some((id, pushed)) = line.pop_due(MonoTime(t)) {
                        let (want_id, want_pushed): (u64, u64) = pending.pop_front().unwrap();
                        proptest::prop_assert_eq!((id, pushed), (want_id, want_pushed));
                        proptest::prop_assert!(t >= pushed + delay_ns);
                        proptest::prop_assert!(t < pushed + delay_ns + poll_ns);
                    }
                }
                line.push(MonoTime(t_push), (id, t_push)).unwrap();
                pending.push_back((id, t_push));
            }
        }
    }

    #[test]
    fn zero_models_are_recognised() {
        assert!(DelayModel::NONE.is_zero());
        assert!(DelayModel::Spikes {
            base_ns: 0,
            spike_ns: 5,
            probability: 0.0
        }
        .is_zero());
        assert!(!DelayModel::Uniform {
            min_ns: 0,
            max_ns: 1
        }
        .is_zero());
    }
}
