//! Messages that name the cause and the fix, a closed stdout, and `bench --out` on a
//! directory that holds a run (issue 37, "Messages that mislead"). Each test runs the
//! real binary as a user would and states what the message must say; none depends on
//! ONNX Runtime except `policy inspect` on a real model.

mod common;

use chunkrt_testkit::edit::Edit;
use common::{repo, temp_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The binary under test: this build's, or `CHUNKRT_BIN` (to run these checks against
/// another build, e.g. the one before a change, to see them fail there).
fn bin() -> PathBuf {
    std::env::var_os("CHUNKRT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_chunkrt")))
}

/// `chunkrt ARGS` from the repository root, its output read.
fn chunkrt(args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(repo())
        .args(args)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A path as an argument.
fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A budget no run of the simulated arm breaks, without a baseline: the bench tests
/// judge the command, not the host.
fn loose_budget(dir: &Path) -> PathBuf {
    let b = dir.join("budget-loose.toml");
    std::fs::write(&b, "[counters]\nring_drops = 1000000\n").unwrap();
    b
}

/// `bench` of the scripted policy on the simulated arm (no ONNX Runtime) for 1 s.
fn bench_args<'a>(budget: &'a Path, out: &'a Path) -> Vec<&'a str> {
    vec![
        "bench",
        "--config",
        "rt-config/sim-scripted.toml",
        "--budget",
        arg(budget),
        "--duration",
        "1s",
        "--quiet",
        "--out",
        arg(out),
    ]
}

/// `--config` naming a budget file, in every command that takes a run
/// configuration: said as a budget, with the option that takes it (`margin` and
/// `check` answered "unknown field `description`").
#[test]
fn a_config_naming_a_budget_says_it_is_a_budget_and_to_pass_it_as_budget() {
    let out = temp_dir("messages", "config-budget");
    let run_dir = out.join("run");
    let run = arg(&run_dir);
    let budget = ["--config", "rt-config/budget-ci.toml"];
    for cmd in [
        &["bench", budget[0], budget[1], "--out", run][..],
        &["run", budget[0], budget[1], "--out", run],
        &["margin", budget[0], budget[1], "--out", run],
        &[
            "margin",
            "--loop",
            "reference",
            budget[0],
            budget[1],
            "--out",
            run,
        ],
        &["check", budget[0], budget[1]],
    ] {
        let o = chunkrt(cmd);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {e}");
        // The cause: the file is a budget. The fix: the option that takes it.
        assert!(
            e.contains("this is a budget, not a run configuration"),
            "{cmd:?}: {e}"
        );
        assert!(
            e.contains("it is read by `chunkrt bench --budget rt-config/budget-ci.toml`"),
            "{cmd:?}: {e}"
        );
        assert!(!e.contains("unknown field"), "{cmd:?}: {e}");
    }
}

#[test]
fn bench_with_a_budget_requiring_the_baseline_but_none_says_to_pass_baseline_cyclictest() {
    let out = temp_dir("messages", "baseline-required").join("run");
    let o = chunkrt(&[
        "bench",
        "--config",
        "rt-config/sim-scripted.toml",
        "--budget",
        "rt-config/budget-ci.toml",
        "--duration",
        "1s",
        "--quiet",
        "--out",
        arg(&out),
    ]);
    let (s, e) = (stdout(&o), stderr(&o));
    // The required ratios fail for want of data (the budget is broken: exit 1), and
    // stderr says why and what to pass, before the run and after the verdicts.
    assert_eq!(o.status.code(), Some(1), "{e}\n{s}");
    assert!(s.contains("no data  FAIL"), "{s}");
    let why = "budget rt-config/budget-ci.toml: its [baseline] limits (p50_ratio, p99_ratio) \
               are required";
    let (first, last) = (e.find(why), e.rfind(why));
    assert!(first.is_some() && first != last, "said once or never: {e}");
    assert_eq!(
        e.matches("pass --baseline cyclictest (cyclictest from rt-tests)")
            .count(),
        2,
        "{e}"
    );
    assert!(
        e.contains("chunkrt: error: budget rt-config/budget-ci.toml"),
        "{e}"
    );
}

#[test]
fn validate_on_an_onnx_model_says_so_and_names_the_manifest_to_pass() {
    let o = chunkrt(&["validate", "rt-config/policies/flow.onnx"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("rt-config/policies/flow.onnx is an ONNX model, not a manifest"),
        "{e}"
    );
    assert!(
        e.contains("pass its manifest: chunkrt validate rt-config/policies/flow.toml"),
        "{e}"
    );
    // A model larger than a TOML file may be is told as a model too, not by its size;
    // both manifests that name it are offered.
    let o = chunkrt(&["validate", "rt-config/policies/lerobot-diffusion.onnx"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("is an ONNX model, not a manifest"), "{e}");
    for m in ["lerobot-diffusion-ddim.toml", "lerobot-diffusion-ddpm.toml"] {
        assert!(e.contains(&format!("rt-config/policies/{m}")), "{m}: {e}");
    }
    // No manifest beside it: how to draft one.
    let dir = temp_dir("messages", "onnx-alone");
    let model = dir.join("alone.onnx");
    std::fs::copy(repo().join("rt-config/policies/flow.onnx"), &model).unwrap();
    let o = chunkrt(&["validate", arg(&model)]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("no manifest beside it does"), "{e}");
    assert!(
        e.contains(&format!(
            "chunkrt policy inspect {} --manifest-only > {}",
            model.display(),
            dir.join("alone.toml").display()
        )),
        "{e}"
    );
}

#[test]
fn policy_inspect_on_a_missing_file_or_a_manifest_names_the_cause_and_the_model_to_pass() {
    let o = chunkrt(&["policy", "inspect", "rt-config/policies/flw.onnx"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(!e.contains("named by manifest"), "{e}");
    assert!(
        e.contains("rt-config/policies/flw.onnx: no such file: `chunkrt policy inspect` takes the path of an ONNX model"),
        "{e}"
    );
    // The models where it was looked for, the one meant among them.
    assert!(e.contains("rt-config/policies/flow.onnx"), "{e}");
    // A manifest: its provenance ledger (issue 41), not an error.
    let o = chunkrt(&["policy", "inspect", "rt-config/policies/flow.toml"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        out.starts_with("rt-config/policies/flow.toml: Flow model flow.onnx"),
        "{out}"
    );
    assert!(out.contains("regime_sequence: 1 stage(s)"), "{out}");
    // --manifest-only drafts a manifest for a model: given a manifest, it says so.
    let o = chunkrt(&[
        "policy",
        "inspect",
        "--manifest-only",
        "rt-config/policies/flow.toml",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a manifest"), "{}", stderr(&o));
}

#[test]
fn out_naming_a_file_says_it_is_a_file_not_a_directory() {
    let dir = temp_dir("messages", "out-file");
    let file = dir.join("notes.txt");
    std::fs::write(&file, "mine").unwrap();
    for out in [file.clone(), file.join("run")] {
        let o = chunkrt(&[
            "run",
            "--config",
            "rt-config/sim-scripted.toml",
            "--duration",
            "1s",
            "--quiet",
            "--out",
            arg(&out),
        ]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{e}");
        assert!(e.contains("not a directory"), "{e}");
        assert!(e.contains("choose another --out"), "{e}");
        assert!(!e.contains("MiB of records"), "{e}");
    }
    assert!(stderr(&chunkrt(&[
        "run",
        "--config",
        "rt-config/sim-scripted.toml",
        "--out",
        arg(&file.join("run")),
    ]))
    .contains(&format!("lies under {}, which is a file", file.display())),);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
}

#[test]
fn a_run_in_which_nothing_played_prints_no_nan() {
    let out = temp_dir("messages", "nothing-played").join("run");
    // Every chunk takes 5 s to compute: the 1 s run never plays one.
    let o = chunkrt(&[
        "run",
        "--config",
        "rt-config/sim-scripted.toml",
        "--duration",
        "1s",
        "--inject-inference-ms",
        "5000",
        "--quiet",
        "--no-plots",
        "--out",
        arg(&out),
    ]);
    let (s, e) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{e}");
    let report: serde_json::Value = common::read_json_checked(&out.join("report.json"));
    // The precondition, from the report: no cycle played.
    assert_eq!(report["command_stream"]["cycles"], 0, "{report:#}");
    assert!(!s.contains("NaN") && !e.contains("NaN"), "{s}{e}");
    assert!(
        s.contains("command stream (while playing): nothing played"),
        "{s}"
    );
}

#[test]
fn warnings_written_to_a_file_carry_no_colour_escapes() {
    let dir = temp_dir("messages", "no-colour");
    // A control CPU that does not exist: pinning fails, and the run warns.
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml")).unwrap();
    let line = "cpu = 1                 # control thread pinned here (-1: not pinned)";
    assert!(
        text.contains(line),
        "sim-scripted.toml changed: update this test"
    );
    let cfg = dir.join("cpu-4000.toml");
    std::fs::write(&cfg, text.edit(line, "cpu = 4000")).unwrap();
    let log = dir.join("stderr.txt");
    let status = Command::new(bin())
        .current_dir(repo())
        .args([
            "run",
            "--config",
            arg(&cfg),
            "--duration",
            "1s",
            "--quiet",
            "--no-plots",
            "--out",
            arg(&dir.join("run")),
        ])
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    let e = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(0), "{e}");
    assert!(e.contains("control thread not pinned"), "{e}");
    assert!(!e.contains('\u{1b}'), "colour escapes in a file: {e:?}");
}

/// Runs `chunkrt ARGS` twice: once with its stdout read, once with a stdout whose
/// reader is gone before the command writes (`chunkrt ... | head -0`). Returns both
/// outputs (the second's stdout empty).
fn consumed_and_closed(args: &[&str], before_each: &dyn Fn()) -> (Output, Output) {
    before_each();
    let consumed = chunkrt(args);
    before_each();
    let mut child = Command::new(bin())
        .current_dir(repo())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The read end closed at once: the child's first write meets EPIPE.
    drop(child.stdout.take());
    let closed = child.wait_with_output().unwrap();
    (consumed, closed)
}

/// A closed stdout ends the command quietly with the status it has when its output
/// is read.
fn assert_quiet_end(what: &str, consumed: &Output, closed: &Output) {
    let e = stderr(closed);
    assert!(!e.contains("panicked"), "{what}: {e}");
    assert_ne!(closed.status.code(), Some(101), "{what}: {e}");
    assert!(
        !stdout(consumed).is_empty(),
        "{what}: prints nothing when read, so nothing was tested: {}",
        stderr(consumed)
    );
    assert_eq!(
        closed.status.code(),
        consumed.status.code(),
        "{what}: the status must be the command's own: {e}"
    );
}

#[test]
fn check_survives_a_closed_stdout() {
    let (consumed, closed) = consumed_and_closed(&["check"], &|| {});
    assert_quiet_end("check", &consumed, &closed);
}

#[test]
fn margin_survives_a_closed_stdout_and_writes_margin_json() {
    let out = temp_dir("messages", "margin-closed");
    let clear = || {
        let _ = std::fs::remove_dir_all(&out);
    };
    let (consumed, closed) = consumed_and_closed(&["margin", "--out", arg(&out)], &clear);
    assert_quiet_end("margin", &consumed, &closed);
    let json: serde_json::Value = common::read_json_checked(&out.join("margin.json"));
    assert!(json.is_object(), "{json}");
    assert!(out.join("margin.svg").is_file());
}

#[test]
fn run_and_plot_survive_a_closed_stdout_and_write_their_files() {
    let dir = temp_dir("messages", "plot-closed");
    let run = dir.join("run");
    let run_args = [
        "run",
        "--config",
        "rt-config/sim-scripted.toml",
        "--duration",
        "1s",
        "--quiet",
        "--out",
        arg(&run),
    ];
    let (consumed, closed) = consumed_and_closed(&run_args, &|| {
        let _ = std::fs::remove_dir_all(&run);
    });
    assert_quiet_end("run", &consumed, &closed);
    assert!(run.join("report.json").is_file() && run.join("timeline.png").is_file());
    let plots = dir.join("plots");
    let (consumed, closed) =
        consumed_and_closed(&["plot", arg(&run), "--out", arg(&plots)], &|| {
            let _ = std::fs::remove_dir_all(&plots);
        });
    assert_quiet_end("plot", &consumed, &closed);
    assert!(plots.join("timeline.png").is_file() && plots.join("latency.png").is_file());
}

#[test]
fn validate_and_policy_inspect_survive_a_closed_stdout() {
    // `validate` prints its verdict whether or not ONNX Runtime is there (NOT CHECKED
    // without it, exit 1).
    let (consumed, closed) = consumed_and_closed(&["validate", "rt-config/sim.toml"], &|| {});
    assert_quiet_end("validate", &consumed, &closed);
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite(
            "validate_and_policy_inspect_survive_a_closed_stdout (policy inspect)",
            &e.to_string(),
        );
        return;
    }
    let (consumed, closed) = consumed_and_closed(
        &["policy", "inspect", "rt-config/policies/flow.onnx"],
        &|| {},
    );
    assert_eq!(consumed.status.code(), Some(0), "{}", stderr(&consumed));
    assert_quiet_end("policy inspect", &consumed, &closed);
}

#[test]
fn bench_survives_a_closed_stdout_and_writes_its_report() {
    let dir = temp_dir("messages", "bench-closed");
    let budget = loose_budget(&dir);
    let out = dir.join("bench");
    let (consumed, closed) = consumed_and_closed(&bench_args(&budget, &out), &|| {
        let _ = std::fs::remove_dir_all(&out);
    });
    assert_quiet_end("bench", &consumed, &closed);
    assert!(out.join("report.json").is_file() && out.join("wake_latency.hgrm").is_file());
}

#[test]
fn bench_refuses_an_out_that_holds_a_run_as_run_does() {
    let dir = temp_dir("messages", "bench-existing");
    let budget = loose_budget(&dir);
    let out = dir.join("bench");
    let first = chunkrt(&bench_args(&budget, &out));
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let report = std::fs::read(out.join("report.json")).unwrap();

    let again = chunkrt(&bench_args(&budget, &out));
    let e = stderr(&again);
    assert_eq!(again.status.code(), Some(2), "{e}");
    let said = format!(
        "chunkrt: error: output directory {}: already holds a run (report.json",
        out.display()
    );
    assert!(e.contains(&said), "{e}");
    assert!(
        e.contains("pass --overwrite to replace it, or choose another --out"),
        "{e}"
    );
    assert_eq!(std::fs::read(out.join("report.json")).unwrap(), report);

    // `run` says the same of it, in the same words.
    let run = chunkrt(&[
        "run",
        "--config",
        "rt-config/sim-scripted.toml",
        "--out",
        arg(&out),
    ]);
    assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
    assert!(stderr(&run).contains(&said), "{}", stderr(&run));

    // With --overwrite the old run's files go, those a new bench does not write too.
    std::fs::write(out.join("cyclictest.hgrm"), "an older bench's baseline").unwrap();
    let mut args = bench_args(&budget, &out);
    args.push("--overwrite");
    let o = chunkrt(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!out.join("cyclictest.hgrm").exists());
    assert!(out.join("report.json").is_file());
}
