//! The plots a person looks at: every run draws `timeline` and `latency` (SVG and
//! PNG) from its recording, and `chunkrt plot RUN_DIR` draws them again, of a
//! window, or of a run that was killed. The figures are judged against what the
//! run recorded, read independently: every gate intervention the report counted
//! is a red tick, every mode change in `events.jsonl` a line in each joint panel,
//! every cycle that began a new chunk (from `recording.mcap`, read with the `mcap`
//! crate) a seam tick; each PNG has its SVG's size.

use chunkrt_testkit::edit::Edit;
use chunkrt_tests::recording;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chunkrt() -> Command {
    Command::new(env!("CARGO_BIN_EXE_chunkrt"))
}

fn fresh(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("chunkrt-plot-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "{:?}\n{}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// sim-scripted.toml with joint speed limits below the policy's: the gate acts
/// and takes authority now and then (mode changes).
fn gated_config(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml")).unwrap();
    let limits = "max_vel_rad_s = [2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61]";
    assert!(text.contains(limits), "sim-scripted.toml changed");
    let path = dir.join("gated.toml");
    std::fs::write(
        &path,
        text.edit(
            limits,
            "max_vel_rad_s = [0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]",
        ),
    )
    .unwrap();
    path
}

/// Width and height of a PNG, from its IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap();
    assert!(
        b.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is a PNG",
        path.display()
    );
    assert_eq!(&b[12..16], b"IHDR");
    let be = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    (be(16), be(20))
}

/// Width and height an SVG declares.
fn svg_size(svg: &str) -> (u32, u32) {
    let attr = |name: &str| -> u32 {
        let at = svg.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        svg[at..svg[at..].find('"').unwrap() + at].parse().unwrap()
    };
    (attr("width"), attr("height"))
}

/// SVG elements drawn in `colour` (a plotters stroke attribute).
fn strokes(svg: &str, colour: &str) -> usize {
    svg.matches(&format!("stroke=\"{colour}\"")).count()
}

/// Both files of each figure exist and each PNG has its SVG's size; the timeline's
/// SVG text.
fn figures(dir: &Path) -> String {
    for stem in ["timeline", "latency"] {
        let svg = std::fs::read_to_string(dir.join(format!("{stem}.svg"))).unwrap();
        assert!(svg.trim_end().ends_with("</svg>"), "{stem}.svg is whole");
        assert_eq!(
            png_size(&dir.join(format!("{stem}.png"))),
            svg_size(&svg),
            "{stem}"
        );
    }
    std::fs::read_to_string(dir.join("timeline.svg")).unwrap()
}

#[test]
fn every_run_draws_its_plots_with_every_gate_intervention_mode_change_and_seam() {
    let dir = fresh("run");
    let out = dir.join("run");
    let run = chunkrt()
        .args(["run", "--duration", "4s", "--quiet", "--config"])
        .arg(gated_config(&dir))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    ok(&run);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("plots: ") && stdout.contains("timeline.png"),
        "{stdout}"
    );
    let svg = figures(&out);
    let report: serde_json::Value =
        chunkrt_tests::schema::read_json_checked(&out.join("report.json"));
    assert_eq!(report["counters"]["ring_drops_event"], 0);

    // Every gate intervention (per joint and constraint, as the report counts
    // them) is a red tick; one more red mark is the legend's.
    let gate: u64 = report["gate"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert!(gate > 50, "the gate acted: {gate}");
    assert_eq!(strokes(&svg, "#D00000") as u64, gate + 1);

    // Every mode change is a line across each of the 7 joint panels.
    let events = std::fs::read_to_string(out.join("events.jsonl")).unwrap();
    let modes = events
        .lines()
        .filter(|l| l.contains(r#""event":"mode""#))
        .count();
    assert!(modes >= 3, "{events}");
    assert_eq!(
        svg.matches(r##"opacity="0.6" stroke="#009E73""##).count(),
        7 * modes
    );

    // Every cycle that began playing a new chunk is a seam tick (+ the legend's).
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let mut seams = 0;
    let mut last = 0;
    for c in &cycles {
        let seq = if c.mode == "Playing" { c.chunk_seq } else { 0 };
        if seq != 0 && seq != last {
            seams += 1;
        }
        last = seq;
    }
    assert!(seams > 20, "{seams}");
    assert_eq!(strokes(&svg, "#56B4E9"), seams + 1);

    let texts = chunkrt_telemetry::plot::svg_texts(&svg);
    let subtitle = texts.iter().find(|t| t.contains(" cycles, ")).unwrap();
    assert!(
        subtitle.starts_with(&format!("{} cycles, {seams} seams", cycles.len())),
        "{subtitle}"
    );
    for legend in [
        "chunk setpoints (policy)",
        "setpoint (executor)",
        "command (after gate)",
        "measured",
        "gate acted",
    ] {
        assert!(texts.iter().any(|t| t == legend), "{legend}: {texts:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plot_draws_a_window_a_killed_run_and_refuses_what_it_cannot_draw() {
    let dir = fresh("cmd");
    // A run killed with SIGKILL after about 2 s: no report, a recording without
    // its summary. It still plots, and the figure says it was cut short.
    let killed = dir.join("killed");
    let mut child = chunkrt()
        .args(["run", "--duration", "30s", "--quiet", "--config"])
        .arg(repo().join("rt-config/sim-scripted.toml"))
        .arg("--out")
        .arg(&killed)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!killed.join("report.json").exists());
    let plot = chunkrt().arg("plot").arg(&killed).output().unwrap();
    ok(&plot);
    let svg = figures(&killed);
    let texts = chunkrt_telemetry::plot::svg_texts(&svg);
    assert!(
        texts.iter().any(|t| t.contains("recording cut short")),
        "{texts:?}"
    );

    // A window, into another directory: only its cycles.
    let win = dir.join("window");
    let plot = chunkrt()
        .arg("plot")
        .arg(&killed)
        .args(["--from", "0.5", "--to", "1.0", "--out"])
        .arg(&win)
        .output()
        .unwrap();
    ok(&plot);
    let svg = figures(&win);
    let texts = chunkrt_telemetry::plot::svg_texts(&svg);
    let subtitle = texts.iter().find(|t| t.contains(" cycles, ")).unwrap();
    let n: u32 = subtitle.split(' ').next().unwrap().parse().unwrap();
    // 0.5 s at 20 ms: 25 or 26 deadlines.
    assert!((25..=26).contains(&n), "{subtitle}");

    for (args, needle) in [
        (vec!["--from", "2", "--to", "1"], "the window must"),
        (vec!["--from", "500", "--to", "600"], "no cycle between"),
    ] {
        let o = chunkrt()
            .arg("plot")
            .arg(&killed)
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let o = chunkrt().arg("plot").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no recording"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A relative `--out` (the demo's, the default `runs/latest`) and a relative `--record`:
/// the run draws its plots, the report names the recording relative to the run
/// directory (or absolute), and `chunkrt plot` works from the run's cwd and from
/// elsewhere. Before, the report held cwd-relative paths that `plot` joined to the run
/// directory again: "no plots: the recording holds no cycle".
#[test]
fn a_relative_out_and_record_are_plotted_from_anywhere() {
    let cwd = fresh("relative");
    let config = repo().join("rt-config/sim-scripted.toml");
    for (out, record) in [("runs/rel", None), ("runs/rel2", Some("rec/r.mcap"))] {
        let mut c = chunkrt();
        c.current_dir(&cwd)
            .args(["run", "--duration", "2s", "--quiet", "--config"])
            .arg(&config)
            .args(["--out", out]);
        if let Some(r) = record {
            c.args(["--record", r]);
        }
        let o = c.output().unwrap();
        ok(&o);
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stdout.contains("plots: "), "{out}: {stdout}\n{stderr}");
        assert!(!stderr.contains("no plots"), "{out}: {stderr}");
        let run_dir = cwd.join(out);
        let report: serde_json::Value =
            chunkrt_tests::schema::read_json_checked(&run_dir.join("report.json"));
        let files = report["recording"]["files"]
            .as_array()
            .expect("recording.files");
        assert!(!files.is_empty(), "{report}");
        for f in files {
            let f = Path::new(f.as_str().unwrap());
            let on_disk = run_dir.join(f);
            assert!(on_disk.is_file(), "{out}: {} names no file", f.display());
            match record {
                None => assert_eq!(f, Path::new("recording.mcap")),
                Some(_) => assert!(f.is_absolute(), "outside the run dir: {}", f.display()),
            }
        }
        // From the run's cwd, and from elsewhere with the run dir's absolute path.
        let here = chunkrt()
            .current_dir(&cwd)
            .args(["plot", out, "--out", &format!("{out}-plots")])
            .output()
            .unwrap();
        ok(&here);
        let elsewhere = chunkrt()
            .current_dir(std::env::temp_dir())
            .arg("plot")
            .arg(&run_dir)
            .arg("--out")
            .arg(cwd.join(format!("{out}-plots2")))
            .output()
            .unwrap();
        ok(&elsewhere);
        assert!(cwd.join(format!("{out}-plots2/timeline.png")).is_file());
    }
}
