//! Every refusal at load: each test breaks one thing and checks the message names it.

mod common;

use chunkrt_policy::{ExecutionProvider, PolicyModel, SessionOptions};
use common::{copy_policy, edit_manifest, temp_dir};

fn load_err(manifest: &std::path::Path) -> String {
    load_err_with(manifest, &SessionOptions::default())
}

fn load_err_with(manifest: &std::path::Path, opts: &SessionOptions) -> String {
    match PolicyModel::load(manifest, opts) {
        Ok(_) => panic!("{} was accepted", manifest.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn accepts_the_bundled_models() {
    for name in ["flow", "ddim"] {
        let m = PolicyModel::load(
            &common::policies().join(format!("{name}.toml")),
            &SessionOptions::default(),
        );
        assert!(m.is_ok(), "{name}: {}", m.unwrap_err());
    }
}

#[test]
fn refuses_a_modified_model() {
    let dir = temp_dir("modified");
    let manifest = copy_policy("flow", &dir);
    let model = dir.join("flow.onnx");
    let mut bytes = std::fs::read(&model).unwrap();
    let n = bytes.len();
    bytes[n - 100] ^= 0x01; // one bit in a weight
    std::fs::write(&model, &bytes).unwrap();
    let e = load_err(&manifest);
    assert!(
        e.starts_with(&format!("policy model {}: SHA-256 ", model.display())),
        "{e}"
    );
    assert!(
        e.contains(&format!("({n} bytes) does not match model_sha256 ")),
        "{e}"
    );
    assert!(
        e.ends_with("in its manifest: the file was changed, truncated or replaced"),
        "{e}"
    );
}

#[test]
fn refuses_a_truncated_model() {
    let dir = temp_dir("truncated");
    let manifest = copy_policy("flow", &dir);
    let model = dir.join("flow.onnx");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    let e = load_err(&manifest);
    assert!(
        e.contains(&format!(
            "({} bytes) does not match model_sha256",
            bytes.len() / 2
        )),
        "{e}"
    );
}

#[test]
fn refuses_a_missing_model() {
    let dir = temp_dir("missing-model");
    let manifest = copy_policy("flow", &dir);
    std::fs::remove_file(dir.join("flow.onnx")).unwrap();
    let e = load_err(&manifest);
    assert_eq!(
        e,
        format!(
            "{}: cannot open the policy model: No such file or directory (os error 2) \
             (model_file of manifest {})",
            dir.join("flow.onnx").display(),
            manifest.display()
        )
    );
}

/// A `model_file` that names no regular file, or one far too large, is refused before a
/// byte is read: `/dev/zero` read without bound until the OOM killer, a FIFO without a
/// writer blocked the load for good, a 10 GB sparse file was read whole.
#[test]
fn refuses_a_model_that_is_not_a_regular_file_or_too_large_without_reading_it() {
    let dir = temp_dir("not-a-model");
    let manifest = copy_policy("flow", &dir);
    let fifo = dir.join("fifo.onnx");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let sparse = dir.join("sparse.onnx");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(10_000_000_000)
        .unwrap();
    for (model, says) in [
        ("/dev/zero".to_string(), "/dev/zero: is a character device, not a regular file: the policy model is read from a regular file"),
        (dir.display().to_string(), "is a directory, not a regular file"),
        (fifo.display().to_string(), "fifo.onnx: is a FIFO (named pipe), not a regular file"),
        (sparse.display().to_string(), "sparse.onnx: 9.3 GiB is more than the 2.0 GiB a policy model may have"),
    ] {
        edit_manifest(&manifest, |t| {
            t["model_file"] = toml::Value::String(model.clone());
        });
        let e = load_err(&manifest);
        assert!(e.contains(says), "{model}: {e}");
        assert!(
            e.ends_with(&format!("(model_file of manifest {})", manifest.display())),
            "{model}: {e}"
        );
    }
}

/// A manifest that declares the model's size (`model_bytes`) has a model of another
/// size refused before it is read; the declared size itself is bounded.
#[test]
fn refuses_a_model_whose_size_differs_from_model_bytes() {
    let dir = temp_dir("model-bytes");
    let manifest = copy_policy("flow", &dir);
    let n = std::fs::metadata(dir.join("flow.onnx")).unwrap().len();
    edit_manifest(&manifest, |t| {
        t.insert("model_bytes".into(), toml::Value::Integer(n as i64));
    });
    PolicyModel::load(&manifest, &SessionOptions::default()).unwrap();
    edit_manifest(&manifest, |t| {
        t["model_bytes"] = toml::Value::Integer(n as i64 + 1);
    });
    let e = load_err(&manifest);
    assert!(
        e.contains(&format!(
            "flow.onnx: {n} bytes, but its manifest {} (model_bytes) declares {} bytes",
            manifest.display(),
            n + 1
        )),
        "{e}"
    );
    edit_manifest(&manifest, |t| {
        t["model_bytes"] = toml::Value::Integer(3 << 30);
    });
    let e = load_err(&manifest);
    assert!(
        e.contains("model_bytes = 3221225472: expected 1 to 2147483648"),
        "{e}"
    );
}

#[test]
fn refuses_a_missing_manifest() {
    let dir = temp_dir("missing-manifest");
    let e = load_err(&dir.join("nope.toml"));
    assert_eq!(
        e,
        format!(
            "{}: cannot open the policy manifest: No such file or directory (os error 2)",
            dir.join("nope.toml").display()
        )
    );
}

#[test]
fn refuses_a_manifest_with_a_missing_field() {
    for (table, key) in [
        (None, "model_sha256"),
        (None, "horizon"),
        (Some("domain"), "covariance"),
        (Some("normalisation"), "act_std"),
    ] {
        let dir = temp_dir(&format!("missing-{key}"));
        let manifest = copy_policy("flow", &dir);
        edit_manifest(&manifest, |t| {
            let t = match table {
                Some(name) => t.get_mut(name).unwrap().as_table_mut().unwrap(),
                None => t,
            };
            t.remove(key).unwrap();
        });
        let e = load_err(&manifest);
        assert!(
            e.starts_with(&format!("policy manifest {}: ", manifest.display())),
            "{e}"
        );
        assert!(e.contains(&format!("missing field `{key}`")), "{e}");
    }
}

#[test]
fn refuses_a_manifest_with_an_unknown_field() {
    let dir = temp_dir("unknown-field");
    let manifest = copy_policy("flow", &dir);
    edit_manifest(&manifest, |t| {
        t.insert("horizon_ms".into(), toml::Value::Integer(640));
    });
    let e = load_err(&manifest);
    assert!(e.contains("unknown field `horizon_ms`"), "{e}");
}

#[test]
fn refuses_inconsistent_manifest_values() {
    let dir = temp_dir("inconsistent");
    let manifest = copy_policy("flow", &dir);
    edit_manifest(&manifest, |t| {
        let n = t["normalisation"].as_table_mut().unwrap();
        n["obs_std"].as_array_mut().unwrap()[3] = toml::Value::Float(-1.0);
    });
    assert_eq!(
        load_err(&manifest),
        format!(
            "policy manifest {}: normalisation.obs_std[3] = -1 must be positive",
            manifest.display()
        )
    );
    let manifest = copy_policy("flow", &dir);
    edit_manifest(&manifest, |t| {
        t["sampler"].as_table_mut().unwrap()["method"] = toml::Value::String("ddim".into());
    });
    assert_eq!(
        load_err(&manifest),
        format!(
            "policy manifest {}: sampler.method = \"ddim\" does not fit kind = \"flow\" (flow: euler or heun; ddim: ddim)",
            manifest.display()
        )
    );
    let manifest = copy_policy("ddim", &dir);
    edit_manifest(&manifest, |t| {
        t.remove("schedule");
    });
    assert_eq!(
        load_err(&manifest),
        format!(
            "policy manifest {}: kind = \"ddim\" needs a [schedule] table with alphas_cumprod",
            manifest.display()
        )
    );
}

#[test]
fn refuses_a_graph_whose_input_names_disagree() {
    let dir = temp_dir("names");
    let manifest = copy_policy("flow", &dir);
    edit_manifest(&manifest, |t| {
        t["io"].as_table_mut().unwrap()["x"] = toml::Value::String("noisy_actions".into());
    });
    let e = load_err(&manifest);
    assert_eq!(
        e,
        format!(
            "policy model {}: graph input `x` is not in the manifest (its inputs are \
             `obs` float32 [1, 21], `x` float32 [1, 32, 7], `t` float32 [1]; the manifest \
             names `obs` (io.obs), `noisy_actions` (io.x), `t` (io.t))",
            dir.join("flow.onnx").display()
        )
    );
}

#[test]
fn refuses_a_graph_whose_shapes_disagree() {
    // A self-consistent manifest for a 16-setpoint model, pointing at the 32-setpoint graph.
    let dir = temp_dir("shapes");
    let manifest = copy_policy("flow", &dir);
    edit_manifest(&manifest, |t| {
        t["horizon"] = toml::Value::Integer(16);
        let n = t["normalisation"].as_table_mut().unwrap();
        for key in ["act_mean", "act_std"] {
            n[key].as_array_mut().unwrap().truncate(16 * 7);
        }
    });
    let e = load_err(&manifest);
    assert_eq!(
        e,
        format!(
            "policy model {}: input `x` (io.x) is float32 [1, 32, 7], the manifest expects \
             float32 [1, 16, 7]",
            dir.join("flow.onnx").display()
        )
    );
}

#[test]
fn refuses_an_unavailable_execution_provider() {
    let opts = SessionOptions {
        execution_provider: ExecutionProvider::Cuda { device_id: 0 },
        ..SessionOptions::default()
    };
    let e = load_err_with(&common::policies().join("flow.toml"), &opts);
    assert!(
        e.starts_with("execution provider `cuda`: the ONNX Runtime library "),
        "{e}"
    );
    assert!(e.contains("was built without CUDAExecutionProvider"), "{e}");
    assert!(e.contains("set execution_provider = \"cpu\""), "{e}");
}

#[test]
fn says_what_to_run_when_the_library_is_missing() {
    let opts = SessionOptions {
        ort_library: Some("/nonexistent/libonnxruntime.so.1.31.1".into()),
        ..SessionOptions::default()
    };
    let e = load_err_with(&common::policies().join("flow.toml"), &opts);
    assert_eq!(
        e,
        "ONNX Runtime library not found (looked for /nonexistent/libonnxruntime.so.1.31.1 \
         (policy key ort_library)); run ./scripts/bootstrap-ort.sh from the repository root, \
         or set ORT_DYLIB_PATH or the policy's ort_library key to libonnxruntime.so.1.31.1"
    );
}
