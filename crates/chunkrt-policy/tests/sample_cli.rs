//! The library side of `chunkrt policy sample`.

mod common;

use chunkrt_policy::{
    report_to_json, report_to_text, sample_chunks, sample_chunks_with, SampleOptions,
};
use common::{ambiguous_obs, policies};

#[test]
fn samples_are_seeded_and_start_at_the_observation() {
    let manifest = policies().join("flow.toml");
    let obs: Vec<f32> = ambiguous_obs(&manifest).iter().map(|v| *v as f32).collect();
    let a = sample_chunks(&manifest, &obs, 3, Some(4), 7).unwrap();
    let b = sample_chunks(&manifest, &obs, 3, Some(4), 7).unwrap();
    let c = sample_chunks(&manifest, &obs, 3, Some(4), 8).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), 3);
    for chunk in &a {
        assert_eq!(chunk.pos_rad.len(), 32);
        for (j, q) in obs.iter().take(7).enumerate() {
            // Setpoint 0 is "now": the observed position (delta 0 up to the model's error).
            assert!((chunk.pos_rad[0][j] - *q as f64).abs() < 0.05, "joint {j}");
        }
        assert!(chunk.pos_rad.iter().flatten().all(|v| v.is_finite()));
    }
}

#[test]
fn reports_format_and_bad_requests_are_named() {
    let manifest = policies().join("ddim.toml");
    let obs: Vec<f32> = ambiguous_obs(&manifest).iter().map(|v| *v as f32).collect();
    let opts = SampleOptions {
        samples: 2,
        steps: Some(10),
        seed: 1,
        ..SampleOptions::default()
    };
    let report = sample_chunks_with(&manifest, &obs, &opts).unwrap();
    assert!(report.in_domain, "{}", report.domain);
    let json: serde_json::Value = serde_json::from_str(&report_to_json(&report)).unwrap();
    assert_eq!(json["method"], "ddim");
    assert_eq!(json["steps"], 10);
    assert_eq!(json["chunks"][1]["pos_rad"].as_array().unwrap().len(), 32);
    let text = report_to_text(&report);
    assert!(
        text.starts_with("# ") && text.contains("chunk 1\n"),
        "{text}"
    );

    let e = sample_chunks(&manifest, &obs[..5], 1, None, 0)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "policy request: observation has 5 values, the model expects d_obs = 21 (joint_pos_goal_vel encoding)"
    );
    let e = sample_chunks(&manifest, &obs, 1, Some(500), 0)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "policy request: steps = 500 is outside 1..=100 for `ddim`"
    );
}
