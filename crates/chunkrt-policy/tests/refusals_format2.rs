//! Every refusal of a format-2 manifest (policies brought from LeRobot): each test breaks
//! one thing in a copy of a bundled export and checks that the message names it.

mod common;

use std::path::{Path, PathBuf};

use chunkrt_policy::{ImportedModel, SessionOptions};
use common::{policies, temp_dir};

/// Copies `<manifest>.toml` and the model it names into `dir`.
fn copy(manifest: &str, dir: &Path) -> PathBuf {
    let src = policies().join(format!("{manifest}.toml"));
    let m = chunkrt_policy::CheckedManifest2::load(&src).unwrap();
    std::fs::copy(m.raw.model_path(&src), dir.join(&m.raw.model_file)).unwrap();
    let dst = dir.join(format!("{manifest}.toml"));
    std::fs::copy(&src, &dst).unwrap();
    dst
}

/// The manifest with `from` replaced by `to` (which must occur).
fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "`{from}` not in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

fn load_err(manifest: &Path) -> String {
    match ImportedModel::load(manifest, &SessionOptions::default()) {
        Ok(_) => panic!("{} was accepted", manifest.display()),
        Err(e) => e.to_string(),
    }
}

fn broken(name: &str, manifest: &str, from: &str, to: &str) -> String {
    let dir = temp_dir(name);
    let m = copy(manifest, &dir);
    edit(&m, from, to);
    load_err(&m)
}

#[test]
fn accepts_the_bundled_exports() {
    for name in [
        "lerobot-diffusion-ddim",
        "lerobot-diffusion-ddpm",
        "lerobot-act",
    ] {
        let m = ImportedModel::load(
            &policies().join(format!("{name}.toml")),
            &SessionOptions::default(),
        );
        assert!(m.is_ok(), "{name}: {}", m.unwrap_err());
    }
}

#[test]
fn refuses_an_unknown_key() {
    let e = broken(
        "unknown-key",
        "lerobot-act",
        "[observation]\n",
        "[observation]\nhistroy = 2\n",
    );
    assert!(e.contains("unknown field `histroy`"), "{e}");
}

#[test]
fn refuses_a_modified_model() {
    let dir = temp_dir("modified2");
    let m = copy("lerobot-act", &dir);
    let model = dir.join("lerobot-act.onnx");
    let mut bytes = std::fs::read(&model).unwrap();
    let n = bytes.len();
    bytes[n - 100] ^= 0x01;
    std::fs::write(&model, &bytes).unwrap();
    let e = load_err(&m);
    assert!(e.contains("does not match model_sha256"), "{e}");
}

#[test]
fn refuses_a_history_the_graph_does_not_take() {
    let e = broken(
        "history",
        "lerobot-diffusion-ddim",
        "history = 2",
        "history = 3",
    );
    assert!(
        e.contains("input `observation.state` (observation.inputs[0]) is float32 [1, 2, 14], the manifest expects float32 [1, 3, 14]"),
        "{e}"
    );
}

#[test]
fn refuses_an_input_the_graph_does_not_have() {
    let e = broken(
        "input-name",
        "lerobot-act",
        "name = \"observation.environment_state\"",
        "name = \"observation.goal\"",
    );
    assert!(
        e.contains("graph input `observation.environment_state` is not in the manifest"),
        "{e}"
    );
}

#[test]
fn refuses_an_output_the_graph_does_not_have() {
    let e = broken(
        "output-name",
        "lerobot-act",
        "out = \"actions\"",
        "out = \"action\"",
    );
    assert!(
        e.contains("graph has no output `action` (manifest io.out); its outputs are `actions` "),
        "{e}"
    );
}

#[test]
fn refuses_statistics_of_the_wrong_length() {
    let e = broken(
        "stats",
        "lerobot-act",
        "sources = [\"joint_pos\", \"joint_vel\"]",
        "sources = [\"joint_pos\", \"joint_vel\", \"goal\"]",
    );
    assert!(
        e.contains("observation.inputs[0] (\"observation.state\").mean has 14 values, expected 21"),
        "{e}"
    );
}

#[test]
fn refuses_an_unknown_source() {
    let e = broken(
        "source",
        "lerobot-act",
        "sources = [\"goal\"]",
        "sources = [\"joint_torque\"]",
    );
    assert!(e.contains("unknown variant `joint_torque`"), "{e}");
}

#[test]
fn refuses_an_unsupported_scheduler() {
    let e = broken(
        "scheduler",
        "lerobot-diffusion-ddpm",
        "type = \"ddpm\"",
        "type = \"pndm\"",
    );
    assert!(
        e.contains("scheduler.type = \"pndm\" is not supported (ddpm or ddim)"),
        "{e}"
    );
}

#[test]
fn refuses_a_played_slice_past_the_sequence() {
    let e = broken("slice", "lerobot-act", "len = 16", "len = 17");
    assert!(
        e.contains("action.start + action.len = 0 + 17 is past action.horizon = 16"),
        "{e}"
    );
}

#[test]
fn refuses_a_chunk_model_with_a_scheduler() {
    let dir = temp_dir("chunk-scheduler");
    let m = copy("lerobot-act", &dir);
    let text = std::fs::read_to_string(&m).unwrap();
    let sched = std::fs::read_to_string(policies().join("lerobot-diffusion-ddim.toml")).unwrap();
    let start = sched.find("[scheduler]").unwrap();
    let end = start + sched[start..].find("\n[sampler]").unwrap();
    std::fs::write(&m, format!("{text}\n{}", &sched[start..end])).unwrap();
    let e = load_err(&m);
    assert!(
        e.contains("kind = \"chunk\" takes no [scheduler] table"),
        "{e}"
    );
}

#[test]
fn refuses_more_steps_than_the_spacing_allows() {
    // Leading spacing with an offset: 100 steps of 100 would reach timestep 100.
    let dir = temp_dir("offset");
    let m = copy("lerobot-diffusion-ddim", &dir);
    edit(&m, "steps_offset = 0", "steps_offset = 1");
    edit(&m, "\nsteps = 10", "\nsteps = 100");
    let e = load_err(&m);
    assert!(e.contains("is past train_timesteps = 100"), "{e}");
}

#[test]
fn refuses_an_unknown_key_in_an_input() {
    // The American spelling: LeRobot's own key is `normalization_mapping`.
    let e = broken(
        "input-key",
        "lerobot-act",
        "name = \"observation.state\"\n",
        "name = \"observation.state\"\nnormalization = \"mean_std\"\n",
    );
    assert!(e.contains("unknown field `normalization`"), "{e}");
}
