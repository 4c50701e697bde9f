//! Fixtures shared by the criterion benches in `benches/`: a deterministic chunk
//! stream like the scripted policy's, and the naive reference player that chunkrt's
//! executor is measured against.

use chunkrt_core::{Chunk, JointVec, MonoTime, MAX_DOF, NS_PER_MS};

/// Setpoint period of the stream (the 20 ms grid).
pub const DT_NS: u64 = 20 * NS_PER_MS;
/// A new chunk every 50 ms, like the inference thread's schedule.
pub const CHUNK_PERIOD_NS: u64 = 50 * NS_PER_MS;
/// Setpoints per chunk (1 s horizon).
pub const HORIZON: usize = 50;
/// Observation-to-arrival latency of every chunk.
pub const LATENCY_NS: u64 = 10 * NS_PER_MS;
/// Period of the stream's trajectory; a multiple of the chunk period so a small
/// ring of template chunks repeats exactly.
const TRAJ_PERIOD_NS: u64 = 1_000 * NS_PER_MS;
const TEMPLATES: usize = (TRAJ_PERIOD_NS / CHUNK_PERIOD_NS) as usize;

/// Joint `j`'s position at time `t` (seconds): 1 Hz sines of amplitude `amp`, one
/// phase per joint. With the default limits (2 rad/s, 10 rad/s^2), `amp = 0.2` stays
/// within every limit; `amp = 0.4` needs 2.5 rad/s and 16 rad/s^2, so the gate
/// works every tick.
fn target(amp: f64, t: f64, j: usize) -> f64 {
    amp * (std::f64::consts::TAU * t + 0.7 * j as f64).sin()
}

/// An endless, allocation-free stream of chunks: template chunks for one
/// trajectory period, re-stamped with fresh `seq` and times on every use.
pub struct ChunkStream {
    templates: Vec<Chunk>,
    seq: u64,
    next_arrival: MonoTime,
}

impl ChunkStream {
    /// A stream for `dof` joints (sine amplitude `amp`) whose first chunk arrives at `start`.
    pub fn new(dof: usize, amp: f64, start: MonoTime) -> Self {
        let templates = (0..TEMPLATES)
            .map(|k| {
                let mut c = Chunk {
                    dt_ns: DT_NS,
                    len: HORIZON as u16,
                    dof: dof as u16,
                    ..Chunk::default()
                };
                // Relative to the trajectory period, so re-stamping shifts exactly.
                let t0 = (k as u64 * CHUNK_PERIOD_NS) as f64 * 1e-9;
                for i in 0..HORIZON {
                    for j in 0..dof.min(MAX_DOF) {
                        c.pos_rad[i][j] = target(amp, t0 + (i as u64 * DT_NS) as f64 * 1e-9, j);
                    }
                }
                c
            })
            .collect();
        ChunkStream {
            templates,
            seq: 0,
            next_arrival: start,
        }
    }

    /// The chunk that arrives at or before `now`, if one is due (stamped in place).
    pub fn poll(&mut self, now: MonoTime) -> Option<&Chunk> {
        if now < self.next_arrival {
            return None;
        }
        let k = (self.seq % TEMPLATES as u64) as usize;
        self.seq += 1;
        let t_obs = MonoTime(self.next_arrival.0 - LATENCY_NS.min(self.next_arrival.0));
        self.next_arrival = self.next_arrival.add_ns(CHUNK_PERIOD_NS);
        let c = &mut self.templates[k];
        c.seq = self.seq;
        c.t_obs = t_obs;
        c.t_start = t_obs;
        c.t_publish = t_obs.add_ns(LATENCY_NS / 2);
        Some(c)
    }
}

/// What the runtimes in PRIOR-ART.md do at their simplest: keep the newest chunk,
/// interpolate linearly between its setpoints at the current time, hold the last
/// setpoint past the horizon. No freshness check, no blending, no limits.
#[derive(Default)]
pub struct NaivePlayer {
    chunk: Chunk,
    has_chunk: bool,
}

impl NaivePlayer {
    /// Newest wins.
    pub fn offer(&mut self, c: &Chunk) {
        self.chunk = *c;
        self.has_chunk = true;
    }

    /// Linear interpolation at `now`.
    pub fn tick(&self, now: MonoTime, out: &mut JointVec) {
        if !self.has_chunk {
            return;
        }
        let c = &self.chunk;
        let dof = c.dof as usize;
        let u = now.saturating_since(c.t_start) as f64 / c.dt_ns as f64;
        let last = c.len as usize - 1;
        let i = (u as usize).min(last);
        let (a, b, w) = if i >= last {
            (last, last, 0.0)
        } else {
            (i, i + 1, u - i as f64)
        };
        let (ra, rb) = (&c.pos_rad[a], &c.pos_rad[b]);
        for (o, (pa, pb)) in out[..dof].iter_mut().zip(ra.iter().zip(rb.iter())) {
            *o = pa + w * (pb - pa);
        }
    }
}
