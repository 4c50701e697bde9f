//! `chunkrt bench` as CI meets it: budget verdicts, exit statuses and the files.

use chunkrt_testkit::edit::Edit;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn chunkrt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("chunkrt-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn bench(budget: &Path, out: &Path, extra: &[&str]) -> Output {
    chunkrt()
        .arg("bench")
        .arg("--config")
        .arg(repo().join("rt-config/sim.toml"))
        .arg("--budget")
        .arg(budget)
        .args(["--duration", "3s", "--quiet", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A budget that cannot hold (a median wake latency of 0 ns: every recorded value
/// is at least 1 ns) next to one that always holds: exit 1, a FAIL row, a PASS row,
/// and the verdicts in report.json beside the .hgrm files and the plot.
#[test]
fn a_broken_budget_exits_1_with_a_fail_row_and_writes_every_file() {
    let dir = temp_dir("fail");
    let budget = dir.join("impossible.toml");
    std::fs::write(
        &budget,
        "[metrics.wake_latency]\np50_us = 0\n\n[metrics.cycle_time]\nmax_ms = 60000\n",
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = bench(&budget, &out_dir, &[]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.lines().any(|l| l.starts_with("wake_latency")
            && l.contains("p50 <= 0.0")
            && l.ends_with("FAIL")),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("cycle_time") && l.ends_with("PASS")),
        "{stdout}"
    );
    assert!(
        stdout.contains("budget: FAIL (1 of 2 limits broken)"),
        "{stdout}"
    );

    let report: serde_json::Value =
        chunkrt_tests::schema::read_json_checked(&out_dir.join("report.json"));
    let rows = report["budget"].as_array().expect("budget array");
    assert_eq!(rows.len(), 2);
    let wake = rows.iter().find(|r| r["metric"] == "wake_latency").unwrap();
    assert_eq!(wake["stat"], "p50");
    assert_eq!(wake["limit"], 0.0);
    assert_eq!(wake["pass"], false);
    assert!(wake["value"].as_f64().unwrap() > 0.0);
    assert_eq!(report["budget_pass"], false);
    // The report keeps its schema around the new blocks.
    assert!(report["metrics"]["wake_latency"]["p99"].is_u64());
    assert!(report["counters"]["cycles"].as_u64().unwrap() > 0);

    for name in ["wake_latency", "cycle_time", "chunk_age"] {
        let hgrm = std::fs::read_to_string(out_dir.join(format!("{name}.hgrm"))).unwrap();
        assert!(
            hgrm.contains("Percentile") && hgrm.contains("Total count"),
            "{hgrm}"
        );
    }
    let svg = std::fs::read_to_string(out_dir.join("latency.svg")).unwrap();
    assert!(svg.starts_with("<svg"));
    let texts = chunkrt_telemetry::plot::svg_texts(&svg);
    assert!(texts.iter().any(|t| t == "wake_latency"), "{texts:?}");
    let png = std::fs::read(out_dir.join("latency.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
}

#[test]
fn budget_and_baseline_errors_exit_2_and_say_what_to_do() {
    let dir = temp_dir("usage");
    let typo = dir.join("typo.toml");
    std::fs::write(&typo, "[metrics.obs_age]\nmax_msec = 25\n").unwrap();
    let out = bench(&typo, &dir.join("out"), &[]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("typo.toml:2: key `metrics.obs_age.max_msec`"),
        "{stderr}"
    );

    let ok = dir.join("ok.toml");
    std::fs::write(&ok, "[counters]\ndeadline_overruns = 1000000\n").unwrap();
    // cyclictest not on PATH: a clear error before the loop runs.
    let out = chunkrt()
        .env("PATH", dir.join("empty-path"))
        .arg("bench")
        .arg("--config")
        .arg(repo().join("rt-config/sim.toml"))
        .arg("--budget")
        .arg(&ok)
        .args([
            "--duration",
            "3s",
            "--quiet",
            "--baseline",
            "cyclictest",
            "--out",
        ])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("rt-tests"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let out = chunkrt()
        .args(["bench", "--duration", "inf"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// With cyclictest installed and the right to use SCHED_FIFO, the baseline block sits
/// in the report: pairs of segments, the loop alone then cyclictest alone; elsewhere
/// this part says why it is skipped (and fails under CI=true).
#[test]
fn a_generous_budget_passes_and_the_baseline_block_is_written() {
    let dir = temp_dir("pass");
    let budget = dir.join("generous.toml");
    std::fs::write(
        &budget,
        "[metrics.wake_latency]\nmax_ms = 60000\n\n[counters]\nring_drops = 1000000\n",
    )
    .unwrap();
    let have_cyclictest = Command::new("cyclictest").arg("--help").output().is_ok();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let extra: &[&str] = if have_cyclictest && root {
        &[
            "--baseline",
            "cyclictest",
            "--baseline-pairs",
            "2",
            "--baseline-segment",
            "2s",
        ]
    } else {
        chunkrt_testkit::missing_prerequisite(
            "a_generous_budget_passes_and_the_baseline_block_is_written",
            "cyclictest missing or not root",
        );
        &[]
    };
    let out_dir = dir.join("out");
    let out = bench(&budget, &out_dir, extra);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("budget: PASS (2 limits)"), "{stdout}");
    if !extra.is_empty() {
        let report: serde_json::Value =
            chunkrt_tests::schema::read_json_checked(&out_dir.join("report.json"));
        let b = &report["baseline"];
        assert_eq!(b["tool"], "cyclictest");
        assert_eq!(b["method"], "alternating segments");
        // Two segments of 2 s at 20 ms: about 100 cyclictest wakes each.
        let samples = b["samples"].as_u64().unwrap();
        assert!((150..=250).contains(&samples), "{b}");
        assert!(b["cyclictest"]["p99_ns"].is_u64(), "{b}");
        assert!(b["chunkrt"]["p99_ns"].is_u64(), "{b}");
        let pairs = b["segments"].as_array().unwrap();
        assert_eq!(pairs.len(), 2, "{b}");
        let (lo, hi) = (
            b["ratio_range"]["p99"][0].as_f64().unwrap(),
            b["ratio_range"]["p99"][1].as_f64().unwrap(),
        );
        for p in pairs {
            let r = p["ratio"]["p99"].as_f64().unwrap();
            assert!(lo <= r && r <= hi, "{b}");
        }
        assert!(stdout.contains("ratio chunkrt/cyclic"), "{stdout}");
        assert!(stdout.contains("2 pairs of 2.0 s segments"), "{stdout}");
        assert!(out_dir.join("cyclictest.hgrm").is_file());
        let svg = std::fs::read_to_string(out_dir.join("latency.svg")).unwrap();
        let texts = chunkrt_telemetry::plot::svg_texts(&svg);
        assert!(
            texts.iter().any(|t| t == "wake, cyclictest segments"),
            "{texts:?}"
        );
    }
}

/// The CI budget (rt-config/budget-ci.toml) catches the ordinary regressions: each
/// injected into the bundled pipeline on the simulated arm (`[inject]`, the real
/// control and inference threads), 8 s, must exit 1 with a FAIL on the row that
/// sees it, and only the injected run's own figures are judged. The same budget
/// passes the unmodified pipeline in CI (scripts/test.d/30-bench.sh).
#[test]
fn ordinary_regressions_fail_the_ci_budget() {
    let dir = temp_dir("regressions");
    let sim = std::fs::read_to_string(repo().join("rt-config/sim.toml")).unwrap();
    let sim = sim.edit(
        "manifest = \"policies/",
        &format!(
            "manifest = \"{}/rt-config/policies/",
            repo().canonicalize().unwrap().display()
        ),
    );
    for (name, inject, (metric, stat)) in [
        (
            "a 2 ms stall every 20th cycle",
            "cycle_stall_ms = 2.0\ncycle_stall_every = 20",
            ("cycle_time", "p99"),
        ),
        (
            // 10x, not 5x: the P75 limit (38 us) is 1.5x the slow VMs' worst good run
            // (25.2 us); on the fast ones a good P75 is 6-12 us and 5x gave 30.5 us
            // once (a fresh-clone run, 2026-12-04): a pass. 10x measured 61-124 us.
            "a 10x slower tick",
            "cycle_slowdown = 10.0",
            ("cycle_time", "p75"),
        ),
        (
            "a 10 ms inference stall on every call",
            "inference_delay = { kind = \"fixed\", ms = 10.0 }",
            ("inference_latency", "min"),
        ),
    ] {
        let config = dir.join(format!("{metric}-{stat}.toml"));
        std::fs::write(&config, format!("{sim}\n[inject]\n{inject}\n")).unwrap();
        let out_dir = dir.join(format!("out-{metric}-{stat}"));
        let out = chunkrt()
            .arg("bench")
            .arg("--config")
            .arg(&config)
            .arg("--budget")
            .arg(repo().join("rt-config/budget-ci.toml"))
            .args(["--duration", "8s", "--quiet", "--out"])
            .arg(&out_dir)
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {stdout}\n{stderr}");
        let report: serde_json::Value =
            chunkrt_tests::schema::read_json_checked(&out_dir.join("report.json"));
        let rows = report["budget"].as_array().unwrap();
        let row = rows
            .iter()
            .find(|r| r["metric"] == metric && r["stat"] == stat)
            .unwrap_or_else(|| panic!("{name}: no {metric} {stat} limit in budget-ci.toml"));
        assert_eq!(row["pass"], false, "{name}: {row}\n{stdout}");
        assert!(
            report["injected"]["active"].as_bool().unwrap(),
            "{name}: {}",
            report["injected"]
        );
    }
}
