//! The bundled visuomotor policy (`rt-config/policies/vision-flow.toml`: a CNN over the
//! synthetic camera's 64 x 64 image + the joint state, a flow-matching head) against
//! PyTorch/onnxruntime: `scripts/vision/golden_policy.py` committed the inputs (state,
//! image bytes, initial noise) and what the Python path computed from them (one graph
//! call, the normalised sequence after 10 Euler steps, the joint positions). chunkrt's
//! path (image layout HWC bytes -> CHW, pixels / 255, per-channel normalisation, the
//! state's normalisation, the flow integration, de-normalisation) must agree.
//!
//! The image is what the model reads its goal from: the same case with the red and
//! blue channels swapped, or with the target moved, must give a different chunk; a
//! manifest whose image size differs from the graph's is refused at load, naming it.

mod common;

use chunkrt_policy::{ImportedModel, PolicyLoadError, SessionOptions};
use common::{copy_policy, edit_manifest, policies, repo_root, temp_dir};
use serde_json::Value;

/// ONNX Runtime against itself from Python (same library, same graph), float32 in the
/// same operation order; measured below 1e-6.
const TOL: f32 = 1e-5;

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|x| match x.as_array() {
            Some(row) => row.iter().map(|y| y.as_f64().unwrap() as f32).collect(),
            None => vec![x.as_f64().unwrap() as f32],
        })
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn cases() -> Vec<Value> {
    let p = repo_root().join("crates/chunkrt-policy/tests/golden/vision/flow.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v["cases"].as_array().unwrap().clone()
}

/// Runs the case through chunkrt's path; returns (normalised sequence, actions).
fn run(model: &mut ImportedModel, case: &Value, image: &[u8]) -> (Vec<f32>, Vec<f32>) {
    let mut raw: Vec<f64> = case["q"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let q = raw.clone();
    raw.extend(
        case["qdot"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap()),
    );
    model.reset_history();
    model.push_observation(&raw);
    model.push_image(image).unwrap();
    let x0 = f32s(&case["x0"]);
    model.run(&x0, 10, &mut |_| {}, &mut |_| {}).unwrap();
    let m = model.manifest().raw.clone();
    let mut actions = vec![0.0f64; m.action.len * m.d_a];
    model.actions_into(&q, &mut actions);
    (
        model.sequence().to_vec(),
        actions.iter().map(|v| *v as f32).collect(),
    )
}

fn image_of(case: &Value) -> Vec<u8> {
    case["image"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u8)
        .collect()
}

#[test]
fn the_vision_policy_agrees_with_the_python_path_and_reads_its_goal_in_the_image() {
    let mut model = ImportedModel::load(
        &policies().join("vision-flow.toml"),
        &SessionOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(model.image_size(), Some((64, 64)));
    let cases = cases();
    assert!(cases.len() >= 4);
    for (k, case) in cases.iter().enumerate() {
        let image = image_of(case);
        let (seq, actions) = run(&mut model, case, &image);
        let ds = max_diff(&seq, &f32s(&case["sequence"]));
        let da = max_diff(&actions, &f32s(&case["actions"]));
        eprintln!("vision case {k}: sequence within {ds:.2e}, actions within {da:.2e} of Python");
        assert!(
            ds <= TOL && da <= TOL,
            "case {k}: sequence {ds}, actions {da}"
        );

        // Red and blue swapped: the target disc is no longer where the model looks
        // for red, and the chunk changes.
        let mut swapped = image.clone();
        for px in swapped.chunks_exact_mut(3) {
            px.swap(0, 2);
        }
        let (_, other) = run(&mut model, case, &swapped);
        let d = max_diff(&other, &actions);
        assert!(
            d > 0.02,
            "case {k}: swapped channels changed the chunk by only {d} rad"
        );
    }
    // The same state with the target drawn elsewhere: the chunk heads elsewhere.
    let case = &cases[0];
    let scene = &case["scene"];
    let q: Vec<f64> = scene["q"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let (u, v) = (scene["u"].as_f64().unwrap(), scene["v"].as_f64().unwrap());
    let mut moved = vec![0u8; 64 * 64 * 3];
    let (u2, v2) = (1.0 - u, 1.0 - v);
    chunkrt_camera_render(&q, u2, v2, &mut moved);
    let (_, base) = run(&mut model, case, &image_of(case));
    let (_, elsewhere) = run(&mut model, case, &moved);
    let last = |a: &[f32]| a[a.len() - 7..].to_vec();
    let d = max_diff(&last(&base), &last(&elsewhere));
    assert!(
        d > 0.05,
        "target moved from ({u:.2}, {v:.2}) to ({u2:.2}, {v2:.2}): chunk end moved {d} rad"
    );
}

/// The synthetic camera's renderer, as a dev-dependency would give it (kept local: the
/// policy crate does not depend on the camera crate).
fn chunkrt_camera_render(q: &[f64], u: f64, v: f64, rgb: &mut [u8]) {
    chunkrt_camera::synthetic::render(q, u, v, 64, rgb);
}

#[test]
fn an_image_size_other_than_the_graphs_is_refused_at_load() {
    let dir = temp_dir("vision-size");
    let manifest = copy_policy("vision-flow", &dir);
    edit_manifest(&manifest, |t| {
        let images = t["observation"]["images"].as_array_mut().unwrap();
        images[0]["height"] = toml::Value::Integer(32);
    });
    let err = ImportedModel::load(&manifest, &SessionOptions::default()).unwrap_err();
    assert!(
        matches!(err, PolicyLoadError::GraphMismatch { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("observation.image") && text.contains("32"),
        "the message names the input and the size: {text}"
    );
}

#[test]
fn a_model_with_neither_goals_nor_an_image_is_refused() {
    let dir = temp_dir("vision-goals");
    let manifest = copy_policy("vision-flow", &dir);
    edit_manifest(&manifest, |t| {
        t["observation"]
            .as_table_mut()
            .unwrap()
            .insert("images".into(), toml::Value::Array(vec![]));
    });
    let err = ImportedModel::load(&manifest, &SessionOptions::default()).unwrap_err();
    assert!(err.to_string().contains("task.goals is empty"), "{err}");
}
