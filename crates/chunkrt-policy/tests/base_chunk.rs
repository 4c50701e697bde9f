//! A residual that conditions on its base's chunk (`[residual.base_chunk]`, issue 40):
//! the fixture `tests/fixtures/policies/base-following-residual` returns its base chunk
//! input unchanged, so its correction is `(base(i * 50 ms) - q) / 4`. The base chunks
//! here are ramps on a 20 ms grid, whose value at any time is known in closed form: the
//! expected corrections are computed from the ramp, not from the resampling code.

mod common;

use chunkrt_core::{Chunk, MonoTime, Observation, Policy};
use chunkrt_policy::{ImportedPolicy, ImportedPolicyConfig};
use common::repo_root;

const DOF: usize = 7;
/// The fixture's grid and length.
const RES_DT_S: f64 = 0.05;
const RES_STEPS: usize = 16;
/// The base's grid.
const BASE_DT_S: f64 = 0.02;

fn residual() -> ImportedPolicy {
    let manifest = repo_root().join("tests/fixtures/policies/base-following-residual.toml");
    ImportedPolicy::new(&ImportedPolicyConfig::new(manifest)).unwrap()
}

/// A measured state inside the base's domain: the first goal, at rest.
fn observation(seq: u64) -> Observation {
    let q = [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8];
    let mut obs = Observation {
        seq,
        t_capture: MonoTime::from_ns(1_000_000_000 + seq * 20_000_000),
        dof: DOF as u16,
        ..Observation::default()
    };
    obs.pos_rad[..DOF].copy_from_slice(&q);
    obs
}

/// A base chunk of `len` setpoints every 20 ms: joint `j` at `q_j + rate_j * t`.
fn ramp(obs: &Observation, len: usize, rate: &[f64; DOF]) -> Chunk {
    let mut c = Chunk {
        seq: obs.seq,
        t_obs: obs.t_capture,
        t_start: obs.t_capture,
        dt_ns: 20_000_000,
        len: len as u16,
        dof: DOF as u16,
        ..Chunk::default()
    };
    for i in 0..len {
        for (j, r) in rate.iter().enumerate() {
            c.pos_rad[i][j] = obs.pos_rad[j] + r * i as f64 * BASE_DT_S;
        }
    }
    c
}

fn correction(p: &mut ImportedPolicy, obs: &Observation, base: &Chunk) -> Vec<[f64; DOF]> {
    p.observe_base(base).unwrap();
    let mut out = Chunk::default();
    p.infer(obs, &mut out).unwrap();
    assert_eq!(out.len as usize, RES_STEPS);
    (0..RES_STEPS)
        .map(|i| std::array::from_fn(|j| out.pos_rad[i][j]))
        .collect()
}

#[test]
fn the_residual_sees_its_bases_chunk_on_its_own_grid_relative_to_the_observed_pose() {
    let mut p = residual();
    let rate = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6, 0.7];
    let obs = observation(1);
    // 32 setpoints: 620 ms of base, shorter than the residual's 750 ms: the last is held.
    let base = ramp(&obs, 32, &rate);
    let got = correction(&mut p, &obs, &base);
    let base_end_s = 31.0 * BASE_DT_S;
    for (i, row) in got.iter().enumerate() {
        let t = (i as f64 * RES_DT_S).min(base_end_s);
        for j in 0..DOF {
            let want = rate[j] * t / 4.0;
            assert!(
                (row[j] - want).abs() < 1e-5,
                "setpoint {i} joint {j}: correction {} rad, the base's ramp gives {want} rad",
                row[j]
            );
        }
    }
    // Another base, the same observation: another correction.
    let obs = observation(2);
    let flat = ramp(&obs, 32, &[0.0; DOF]);
    let got = correction(&mut p, &obs, &flat);
    assert!(got.iter().flatten().all(|v| v.abs() < 1e-6), "{got:?}");
}

#[test]
fn a_short_base_chunk_is_held_at_its_last_setpoint() {
    let mut p = residual();
    let rate = [1.0; DOF];
    let obs = observation(1);
    let got = correction(&mut p, &obs, &ramp(&obs, 3, &rate));
    // The base's last setpoint is at 40 ms: the residual's setpoint 0 is at 0, 1 at 50 ms.
    for j in 0..DOF {
        assert!(got[0][j].abs() < 1e-6);
        for row in &got[1..] {
            assert!((row[j] - 0.04 / 4.0).abs() < 1e-6, "{row:?}");
        }
    }
}

#[test]
fn without_its_base_chunk_or_with_a_broken_one_the_residual_refuses_to_run() {
    let mut p = residual();
    let obs = observation(1);
    let mut out = Chunk::default();
    let e = p.infer(&obs, &mut out).unwrap_err().to_string();
    assert!(
        e.contains("base's chunk") && e.contains("none was given"),
        "{e}"
    );

    // A base chunk is used once: the next observation needs the next one.
    let base = ramp(&obs, 32, &[0.1; DOF]);
    p.observe_base(&base).unwrap();
    p.infer(&obs, &mut out).unwrap();
    let e = p.infer(&observation(2), &mut out).unwrap_err().to_string();
    assert!(e.contains("none was given"), "{e}");

    let mut nan = base;
    nan.pos_rad[2][4] = f64::NAN;
    let e = p.observe_base(&nan).unwrap_err().to_string();
    assert!(e.contains("not finite at setpoint 2, joint 4"), "{e}");
    let e = p.infer(&obs, &mut out).unwrap_err().to_string();
    assert!(e.contains("none was given"), "{e}");

    let mut other = base;
    other.dof = 6;
    let e = p.observe_base(&other).unwrap_err().to_string();
    assert!(
        e.contains("6 joints") && e.contains("takes 7 joints"),
        "{e}"
    );
}

/// The fixture's manifest with `from` replaced by `to`, loaded: the error's text.
fn refused(from: &str, to: &str) -> String {
    let src = repo_root().join("tests/fixtures/policies/base-following-residual.toml");
    let text = std::fs::read_to_string(&src).unwrap();
    assert!(text.contains(from), "`{from}` not in the fixture");
    let dir = common::temp_dir(&format!("base-chunk-{}", from.len() + to.len()));
    std::fs::copy(
        src.with_file_name("base-following-residual.onnx"),
        dir.join("base-following-residual.onnx"),
    )
    .unwrap();
    let path = dir.join("residual.toml");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    let cfg = ImportedPolicyConfig::new(&path);
    let e = ImportedPolicy::new(&cfg).expect_err("accepted").to_string();
    let _ = std::fs::remove_dir_all(&dir);
    e
}

#[test]
fn a_base_chunk_input_that_does_not_fit_is_refused_naming_the_key() {
    let steps = "steps = 16\nencoding = \"delta_from_observed\"";
    let e = refused(steps, "steps = 0\nencoding = \"delta_from_observed\"");
    assert!(
        e.contains("residual.base_chunk (\"action.base\").steps"),
        "{e}"
    );
    // The graph takes 16 setpoints.
    let e = refused(steps, "steps = 10\nencoding = \"delta_from_observed\"");
    assert!(e.contains("residual.base_chunk"), "{e}");
    let e = refused(
        "encoding = \"delta_from_observed\"",
        "encoding = \"residual\"",
    );
    assert!(e.contains("must be absolute or delta_from_observed"), "{e}");
    let e = refused("name = \"action.base\"", "name = \"obs\"");
    assert!(e.contains("also an observation input's"), "{e}");
    let e = refused("std = [4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0]", "std = [4.0]");
    assert!(e.contains("residual.base_chunk"), "{e}");
}
