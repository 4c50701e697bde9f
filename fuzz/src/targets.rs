//! The fuzz targets. Each takes arbitrary bytes, must never panic, and returns a
//! small signature of what happened (which error, which path through the code) so
//! that the runner can keep inputs that reach something new.
//!
//! Beyond "no panic", the targets assert the properties the rest of chunkrt relies
//! on: an accepted config yields usable limits and periods; a chunk stream, however
//! malformed, never makes the executor + gate emit a non-finite command or a
//! position outside the limits, and the chunk counters always reconcile.

use chunkrt_config::Config;
use chunkrt_core::{
    Chunk, Command, Executor, Gate, JointVec, ModeChangeReason, MonoTime, Setpoint, MAX_DOF,
    MAX_HORIZON,
};
use std::hash::{Hash, Hasher};
use std::path::Path;

/// A fuzz target: bytes in, outcome signature out; a panic is a finding.
pub type Target = fn(&[u8]) -> u64;

/// Every target by name.
pub const TARGETS: [(&str, Target); 3] = [
    ("config", config),
    ("manifest", manifest),
    ("chunks", chunks),
];

/// The target called `name`.
pub fn by_name(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

fn signature(parts: impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    parts.hash(&mut h);
    h.finish()
}

/// The first line of an error message with numbers and quoted text blanked, so
/// errors of one kind at different places share a signature.
fn error_shape(msg: &str) -> String {
    let line = msg.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out = String::with_capacity(line.len());
    let mut quoted = false;
    for ch in line.chars().take(160) {
        match ch {
            '`' | '"' => {
                quoted = !quoted;
                out.push('"');
            }
            _ if quoted => {}
            '0'..='9' => {
                if !out.ends_with('#') {
                    out.push('#');
                }
            }
            _ => out.push(ch),
        }
    }
    out
}

/// `chunkrt_config::Config::parse_str` on the bytes (as lossy UTF-8); an accepted
/// config must give finite, ordered limits and a usable period.
pub fn config(data: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(data);
    match Config::parse_str(&text, Path::new("fuzz.toml")) {
        Ok(cfg) => {
            let period = cfg.period_ns();
            assert!(period > 0, "accepted config with a zero period");
            let limits = cfg.joint_limits();
            assert!(
                limits.dof >= 1 && limits.dof <= MAX_DOF,
                "dof {}",
                limits.dof
            );
            for (j, l) in limits.joint[..limits.dof].iter().enumerate() {
                assert!(
                    l.pos_min_rad.is_finite()
                        && l.pos_max_rad.is_finite()
                        && l.pos_min_rad < l.pos_max_rad,
                    "joint {j}: accepted position range {} .. {}",
                    l.pos_min_rad,
                    l.pos_max_rad
                );
                for v in [
                    l.max_vel_rad_s,
                    l.max_acc_rad_s2,
                    l.max_jerk_rad_s3,
                    l.brake_acc_rad_s2,
                ] {
                    assert!(v.is_finite() && v > 0.0, "joint {j}: accepted limit {v}");
                }
            }
            let ex = cfg.executor_config();
            assert!(ex.dt_min_ns <= ex.dt_max_ns, "dt range {ex:?}");
            let _ = cfg.domain_box();
            signature(("ok", cfg.control.joints, cfg.policy.kind as u8))
        }
        Err(e) => signature(("err", error_shape(&e.to_string()))),
    }
}

/// `chunkrt_policy::Manifest::parse` on the bytes (as lossy UTF-8); an accepted
/// manifest's derived values are computed too.
pub fn manifest(data: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(data);
    match chunkrt_policy::Manifest::parse(Path::new("fuzz-manifest.toml"), &text) {
        Ok(m) => {
            let _ = m.model_path(Path::new("/models/fuzz-manifest.toml"));
            let _ = m.dt_ns();
            let _ = m.chunk_len();
            signature(("ok", m.format))
        }
        Err(e) => signature(("err", error_shape(&e.to_string()))),
    }
}

/// A little-endian reader over the fuzz input that yields zeros when it runs out.
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn done(&self) -> bool {
        self.at >= self.data.len()
    }
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }
}

/// Number of joints of the chunk target's arm.
const CHUNK_DOF: usize = 7;

/// The arm the chunk target drives: `rt-config/sim-scripted.toml` (limits, executor
/// settings, 1 ms period so that every tick is a gate step).
fn chunk_rig() -> (Executor, Gate, JointVec, u64) {
    let text = include_str!("../../rt-config/sim-scripted.toml");
    let cfg = Config::parse_str(text, Path::new("rt-config/sim-scripted.toml"))
        .expect("the bundled config parses");
    let sim = cfg
        .sim
        .as_ref()
        .expect("the bundled config has a [sim] table");
    let mut home = [0.0; MAX_DOF];
    for (j, h) in home.iter_mut().enumerate().take(CHUNK_DOF) {
        *h = sim.initial_pos_rad.as_ref().map_or(0.0, |p| p.get(j));
    }
    let t0 = MonoTime::from_ms(1_000);
    let period_ns = 1_000_000;
    let limits = cfg.joint_limits();
    let ex = Executor::new(cfg.executor_config(), limits, &home, t0);
    let gate = Gate::new(limits, period_ns, &home);
    (ex, gate, home, period_ns)
}

/// Values a chunk setpoint can take besides ordinary ones.
const SPECIAL: [f64; 8] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e300,
    -1e300,
    f64::MIN_POSITIVE,
    -0.0,
    1e-310,
];

/// Chunk ingestion: the bytes are a script of operations on the executor and the
/// gate (offer a chunk with arbitrary fields, tick, force a fallback, re-arm, jump
/// in time). After every tick the command must be finite and inside the position
/// limits; at the end the chunk counters must reconcile.
pub fn chunks(data: &[u8]) -> u64 {
    let (mut ex, mut gate, home, period_ns) = chunk_rig();
    let limits = *gate.limits();
    let mut b = Bytes { data, at: 0 };
    let mut now = MonoTime::from_ms(1_000);
    let mut last_seq = 0u64;
    let mut chunk = Chunk::default();
    let mut sp = Setpoint::default();
    let mut cmd = Command::default();
    // Which outcomes happened (accepted, each reject reason, each mode after a tick),
    // as a bit set: the signature of the run.
    let mut seen = 0u64;
    let mut ops = 0;
    while !b.done() && ops < 4096 {
        ops += 1;
        match b.u8() % 5 {
            0 => {
                fill_chunk(&mut b, &mut chunk, &home, now, &mut last_seq);
                let outcome = match ex.offer(&chunk, now) {
                    Ok(()) => 1u64,
                    Err(reason) => 2 + (std::mem::discriminant(&reason).hash_code() % 16),
                };
                seen |= 1 << (outcome % 64);
            }
            1 => {
                let steps = 1 + usize::from(b.u8() % 64);
                for _ in 0..steps {
                    now = now.add_ns(period_ns);
                    ex.tick(now, &mut sp);
                    gate.filter(&sp, &mut cmd);
                    check_command(&cmd, &limits);
                }
                seen |= 1 << (ex.mode() as u64 + 20);
            }
            2 => {
                let reason = match b.u8() % 3 {
                    0 => ModeChangeReason::BackendError,
                    1 => ModeChangeReason::OutOfDomain,
                    _ => ModeChangeReason::Shutdown,
                };
                ex.force_fallback(now, reason);
            }
            3 => ex.rearm(now),
            _ => {
                // A jump in time (a stalled loop), then one tick.
                now = now.add_ns(u64::from(b.u32()) * 1_000);
                ex.tick(now, &mut sp);
                gate.filter(&sp, &mut cmd);
                check_command(&cmd, &limits);
            }
        }
        while ex.pop_event().is_some() {}
    }
    let counts = ex.counts();
    assert!(
        counts.reconciles(),
        "chunk counters do not reconcile: {counts:?}"
    );
    signature(("chunks", seen, ex.mode() as u8))
}

trait HashCode {
    fn hash_code(&self) -> u64;
}

impl<T: Hash> HashCode for T {
    fn hash_code(&self) -> u64 {
        signature(self)
    }
}

fn fill_chunk(b: &mut Bytes, c: &mut Chunk, home: &JointVec, now: MonoTime, last_seq: &mut u64) {
    let flags = b.u8();
    c.seq = match flags & 3 {
        0 => last_seq.saturating_add(1),
        1 => *last_seq,
        2 => last_seq.saturating_sub(u64::from(b.u8())),
        _ => b.u64(),
    };
    *last_seq = (*last_seq).max(c.seq);
    // Observation and start times around now, in ms (signed), sometimes absurd.
    let t_obs_ms = i64::from(b.u8() as i8) * 4;
    c.t_obs = now.add_signed_ns(t_obs_ms * 1_000_000);
    c.t_start = if flags & 4 != 0 {
        MonoTime(b.u64())
    } else {
        c.t_obs.add_signed_ns(i64::from(b.u8() as i8) * 1_000_000)
    };
    c.t_publish = now;
    c.dt_ns = if flags & 8 != 0 {
        u64::from(b.u32())
    } else {
        20_000_000
    };
    c.len = if flags & 16 != 0 {
        b.u16()
    } else {
        u16::from(b.u8() % 40) + 2
    };
    c.dof = if flags & 32 != 0 {
        u16::from(b.u8())
    } else {
        CHUNK_DOF as u16
    };
    // Setpoints: a smooth excursion from home whose size and direction come from
    // the input, optionally with special values planted at input-chosen places.
    let amp = f64::from(b.u8() as i8) * 0.02;
    let freq = f64::from(b.u8() % 8) * 0.1;
    for (i, row) in c.pos_rad.iter_mut().enumerate().take(MAX_HORIZON) {
        for (j, v) in row.iter_mut().enumerate() {
            *v = home[j] + amp * ((i as f64) * freq + j as f64).sin();
        }
    }
    if flags & 64 != 0 {
        let n = b.u8() % 4;
        for _ in 0..n {
            let i = usize::from(b.u8()) % MAX_HORIZON;
            let j = usize::from(b.u8()) % MAX_DOF;
            c.pos_rad[i][j] = SPECIAL[usize::from(b.u8()) % SPECIAL.len()];
        }
    }
    if flags & 128 != 0 {
        // Raw little-endian doubles for the first setpoints of joint 0.
        let n = usize::from(b.u8() % 8);
        for i in 0..n {
            c.pos_rad[i][0] = f64::from_bits(b.u64());
        }
    }
}

fn check_command(cmd: &Command, limits: &chunkrt_core::JointLimits) {
    for j in 0..limits.dof {
        let l = &limits.joint[j];
        let (p, v) = (cmd.pos_rad[j], cmd.vel_rad_s[j]);
        assert!(
            p.is_finite() && v.is_finite(),
            "joint {j}: command ({p}, {v})"
        );
        assert!(
            p >= l.pos_min_rad && p <= l.pos_max_rad,
            "joint {j}: commanded {p} outside [{}, {}]",
            l.pos_min_rad,
            l.pos_max_rad
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_shapes_ignore_numbers_and_quoted_text() {
        assert_eq!(
            error_shape("f.toml:3: unknown field `a`, expected 12"),
            error_shape("f.toml:40: unknown field `bb`, expected 7")
        );
    }
}
