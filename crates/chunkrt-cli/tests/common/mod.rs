//! Helpers shared by the `chunkrt` binary's integration tests.
#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::mpsc;
use std::time::Duration;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh, empty temporary directory `chunkrt-{suite}-{name}-{pid}`.
pub fn temp_dir(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("chunkrt-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `rt-config/{file}` as text for a copy written elsewhere: its policy manifests made
/// absolute, its threads unpinned (tests run beside each other), `extra` appended.
pub fn bundled_config_text(file: &str, extra: &str) -> String {
    use chunkrt_testkit::edit::Edit;
    let policies = repo().join("rt-config/policies");
    std::fs::read_to_string(repo().join("rt-config").join(file))
        .unwrap()
        .edit(
            "manifest = \"policies/",
            &format!("manifest = \"{}/", policies.display()),
        )
        .edit("cpu = 1 ", "cpu = -1 ")
        .edit("cpu = 0\n", "cpu = -1\n")
        + extra
}

/// `chunkrt run --duration {duration} --config {config} --out {out}`, warnings only
/// logged, its output discarded; fails the test (named `name`) unless it exits 0 within
/// two minutes.
pub fn run_chunkrt(name: &str, config: &Path, out: &Path, duration: &str) {
    let mut child = std::process::Command::new(bin())
        .args(["run", "--duration", duration, "--config"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .env("CHUNKRT_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chunkrt starts");
    assert_eq!(
        wait(&mut child, Duration::from_secs(120)),
        Some(0),
        "chunkrt run ({name})"
    );
}

/// Waits for the exit status, killing the child after `limit` (a wedged process).
pub fn wait(child: &mut Child, limit: Duration) -> Option<i32> {
    let step = Duration::from_millis(50);
    let mut waited = Duration::ZERO;
    while waited < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(step);
        waited += step;
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Reads the child's stderr on a thread; sends every line.
pub fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The binary under test: this build's, or `CHUNKRT_BIN` (another build, e.g. the
/// one before a change, to see a test fail there).
pub fn bin() -> PathBuf {
    std::env::var_os("CHUNKRT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_chunkrt")))
}

/// `chunkrt plot run_dir` (plots beside the report); fails the test with its stderr
/// unless it succeeds.
pub fn plot(run_dir: &Path) {
    let o = std::process::Command::new(bin())
        .arg("plot")
        .arg(run_dir)
        .output()
        .expect("chunkrt starts");
    assert!(
        o.status.success(),
        "chunkrt plot {}: {}",
        run_dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A Python that has the `mcap` package (for scripts/read_recording.py):
/// `CHUNKRT_PYTHON`, the repository's `.venv`, or `python3`.
pub fn python_with_mcap() -> Option<PathBuf> {
    python_that_imports("mcap.reader")
}

/// The first of `CHUNKRT_PYTHON`, the repository's `.venv` and `python3` that runs
/// `import {modules}`.
pub fn python_that_imports(modules: &str) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("CHUNKRT_PYTHON") {
        candidates.push(PathBuf::from(p));
    }
    candidates.push(repo().join(".venv/bin/python3"));
    candidates.push(PathBuf::from("python3"));
    let import = format!("import {modules}");
    candidates.into_iter().find(|py| {
        std::process::Command::new(py)
            .args(["-c", &import])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// scripts/read_recording.py on `files` (`extra` arguments first): its JSON, after
/// asserting that it exited 0.
pub fn read_recording(py: &Path, extra: &[&str], files: &[PathBuf]) -> serde_json::Value {
    let args: Vec<&std::ffi::OsStr> = extra
        .iter()
        .map(std::ffi::OsStr::new)
        .chain(files.iter().map(|f| f.as_os_str()))
        .collect();
    script_json(py, "read_recording.py", &args)
}

/// `scripts/<script> ARGS` run by `py`: its standard output as JSON, after asserting
/// that it exited 0.
pub fn script_json(py: &Path, script: &str, args: &[&std::ffi::OsStr]) -> serde_json::Value {
    let read = std::process::Command::new(py)
        .arg(repo().join("scripts").join(script))
        .args(args)
        .output()
        .unwrap();
    assert!(
        read.status.success(),
        "{script} {args:?}: {}",
        String::from_utf8_lossy(&read.stderr)
    );
    serde_json::from_slice(&read.stdout).unwrap()
}

/// Runs the binary under test with `args` then `paths` (quiet logging); its output.
pub fn chunkrt_at(args: &[&str], paths: &[&Path]) -> std::process::Output {
    let mut c = std::process::Command::new(bin());
    c.args(args);
    for p in paths {
        c.arg(p);
    }
    c.env("CHUNKRT_LOG", "warn").output().unwrap()
}

/// An output's stdout then stderr, as text.
pub fn output_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The model digest a bundled policy manifest (`rt-config/policies/<name>`) declares.
pub fn bundled_model_sha256(manifest: &str) -> String {
    let text =
        std::fs::read_to_string(chunkrt_testkit::policy_files::policies().join(manifest)).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("model_sha256"))
        .expect("a model_sha256 line");
    line.split('"').nth(1).unwrap().to_string()
}

/// `rt-config/sim.toml` (the flow policy on the simulated arm), its threads unpinned and
/// its manifest named by its absolute path, as text for a test to extend.
pub fn flow_sim_config_text() -> String {
    use chunkrt_testkit::edit::Edit;
    let flow = chunkrt_testkit::policy_files::policies().join("flow.toml");
    std::fs::read_to_string(repo().join("rt-config/sim.toml"))
        .unwrap()
        .edit_once("cpu = 1 ", "cpu = -1 ")
        .edit_once("cpu = 0\n", "cpu = -1\n")
        .edit_once(
            "manifest = \"policies/flow.toml\"",
            &format!("manifest = \"{}\"", flow.display()),
        )
}

/// A residual manifest in `dir` (`residual.toml`) bound to the base model `base_sha256`:
/// LeRobot's ACT graph, whose absolute joint positions read as corrections are far out
/// of scale.
pub fn act_residual_manifest(dir: &Path, base_sha256: &str) -> PathBuf {
    use chunkrt_testkit::edit::Edit;
    let policies = chunkrt_testkit::policy_files::policies();
    let act = policies.join("lerobot-act.onnx");
    let text = std::fs::read_to_string(policies.join("lerobot-act.toml"))
        .unwrap()
        .edit_once(
            "model_file = \"lerobot-act.onnx\"",
            &format!("model_file = \"{}\"", act.display()),
        )
        .edit_once("encoding = \"absolute\"", "encoding = \"residual\"")
        + &format!("\n[residual]\nbase_sha256 = \"{base_sha256}\"\n");
    let path = dir.join("residual.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A port free now on loopback.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `rt-config/sim.toml` (the bundled policy, its manifest named by its absolute path)
/// with `extra` appended, as `dir/name`.
pub fn sim_with(dir: &Path, name: &str, extra: &str) -> PathBuf {
    use chunkrt_testkit::edit::Edit;
    let text = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    let absolute = repo().join("rt-config/policies/flow.toml");
    let edited = text.edit(
        "manifest = \"policies/flow.toml\"",
        &format!("manifest = \"{}\"", absolute.display()),
    );
    let file = dir.join(name);
    std::fs::write(&file, format!("{edited}\n{extra}\n")).unwrap();
    file
}

/// The one record batch of a Parquet file of dataset `ds` (`p` relative to it).
pub fn read_parquet(ds: &Path, p: &str) -> arrow_array::RecordBatch {
    let f = std::fs::File::open(ds.join(p)).unwrap();
    let mut r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .with_batch_size(1 << 20)
        .build()
        .unwrap();
    let batch = r.next().unwrap().unwrap();
    assert!(r.next().is_none(), "{p}: one batch");
    batch
}

/// Reads a `report.json`, `margin.json` or `gap.json` a run wrote, checked against its
/// committed JSON Schema (docs/reference/*.schema.json); panics with the validator's
/// errors and the file's path when it does not follow it.
pub fn read_json_checked(path: &Path) -> serde_json::Value {
    chunkrt_tests::schema::read_json_checked(path)
}
