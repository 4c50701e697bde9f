//! Shared helpers for the executor and gate tests: a hand-driven clock, limits and
//! chunk builders.
#![allow(dead_code)]

use chunkrt_core::{
    Chunk, ExecutorConfig, JointLimit, JointLimits, MonoTime, Resume, MAX_DOF, NS_PER_MS,
};

/// Joints used by most tests.
pub const DOF: usize = 3;

/// A mock clock advanced by hand.
pub struct Clock(pub MonoTime);

impl Clock {
    pub fn start() -> Self {
        Clock(MonoTime::from_ms(10_000))
    }
    pub fn now(&self) -> MonoTime {
        self.0
    }
    pub fn advance_ms(&mut self, ms: u64) -> MonoTime {
        self.0 = self.0.add_ns(ms * NS_PER_MS);
        self.0
    }
    pub fn advance_ns(&mut self, ns: u64) -> MonoTime {
        self.0 = self.0.add_ns(ns);
        self.0
    }
}

pub fn limits(dof: usize) -> JointLimits {
    JointLimits::uniform(dof, JointLimit::default())
}

pub fn config(dof: usize) -> ExecutorConfig {
    ExecutorConfig {
        dof,
        max_chunk_age_ns: 200 * NS_PER_MS,
        blend_ns: 40 * NS_PER_MS,
        seam: chunkrt_core::SeamMode::Crossfade,
        lookahead_ns: 0,
        safe_stop_after_ns: 1_000 * NS_PER_MS,
        resume: Resume::Auto,
        dt_min_ns: NS_PER_MS,
        dt_max_ns: 100 * NS_PER_MS,
        min_len: 2,
        max_time_offset_ns: 1_000 * NS_PER_MS,
        ensemble_coeff: 0.0,
        ensemble_chunks: 8,
    }
}

/// A chunk whose setpoints follow `f(t_seconds_since_epoch_of_setpoint, joint)`.
pub fn chunk_from(
    seq: u64,
    t_obs: MonoTime,
    t_start: MonoTime,
    dt_ms: u64,
    len: usize,
    dof: usize,
    f: impl Fn(f64, usize) -> f64,
) -> Chunk {
    let mut c = Chunk {
        seq,
        t_obs,
        t_start,
        t_publish: t_obs,
        dt_ns: dt_ms * NS_PER_MS,
        len: len as u16,
        dof: dof as u16,
        ..Chunk::default()
    };
    for i in 0..len {
        let t = c.t_of(i).as_secs_f64();
        for j in 0..dof.min(MAX_DOF) {
            c.pos_rad[i][j] = f(t, j);
        }
    }
    c
}

/// A constant chunk at `pos` for every joint.
pub fn still_chunk(seq: u64, now: MonoTime, pos: f64) -> Chunk {
    chunk_from(seq, now, now, 20, 25, DOF, |_, _| pos)
}
