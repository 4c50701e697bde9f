//! The learner's record complete or refused (issue 56): one short run of the scripted
//! policy in episodes, its recording then cut or damaged as a killed run or a bad copy
//! leaves it, each copy exported with `chunkrt export lerobot`.
//!
//! The cuts are placed by the recording's own chunk index (read with the mcap crate's
//! indexed reader, `chunkrt_tests::recording::chunks`): inside a chunk, at a chunk's
//! start, inside the footer, one flipped bit in a chunk's data, and inside the first
//! chunk that holds cycles (nothing whole: refused with `--allow-partial` too, naming
//! the run, where the old export blamed the output directory). What a cut copy
//! keeps is judged from the whole recording: an episode is whole when every cycle of
//! its running phase and the cycle after it (what tells a reader of the cut copy that
//! the phase ended) lie in the chunks before the damage; a cut after the last chunk
//! keeps every episode. Without `--allow-partial` the export refuses (exit 2, the run
//! and the cut's byte offset and last whole cycle named, no dataset); with it the
//! dataset holds exactly the whole episodes, frame for frame, `meta/chunkrt.json` says
//! where the run was cut and which episodes were left out, and the exit status is 5.
//!
//! The same run reused: given twice (by another path, or as a copy) it is refused, as
//! is `--stride 0`; an `events.jsonl` with an episode line repeated is refused by
//! `chunkrt episodes` and by the export, naming its line.

mod common;

use chunkrt_testkit::edit::Edit;
use chunkrt_tests::recording::{self, ChunkSpan};
use common::{chunkrt_at, output_text, repo, temp_dir};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `rt-config/sim-scripted.toml` unpinned at 10 ms with episodes of 0.6 s and quick
/// resets: three episodes in a 3 s run, one in each of the recording's one-second chunks.
fn config_in(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(repo().join("rt-config/sim-scripted.toml"))
        .unwrap()
        .edit_once("cpu = 1 ", "cpu = -1 ")
        .edit_once("cpu = 0\n", "cpu = -1\n")
        .edit_once("period_ms = 20.0 ", "period_ms = 10.0 ")
        + "\n[episodes]\ncount = 8\n\
           starts_rad = [[0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785], [0.05, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]]\n\
           goals_rad = [[0.3, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785]]\n\
           time_limit_s = 0.6\ntolerance_rad = 0.01\nsettle_ms = 40.0\nreset_vel_rad_s = 1.5\n";
    let path = dir.join("episodes.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A copy of `run` (its records) named `name` in `dir`, its recording replaced by `rec`.
fn copy_with(run: &Path, dir: &Path, name: &str, rec: &[u8]) -> PathBuf {
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for f in ["events.jsonl", "report.json"] {
        std::fs::copy(run.join(f), to.join(f)).unwrap();
    }
    std::fs::write(to.join("recording.mcap"), rec).unwrap();
    to
}

/// The parquet file's only batch.
fn batch(path: &Path) -> arrow_array::RecordBatch {
    let f = std::fs::File::open(path).unwrap();
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .with_batch_size(1 << 20)
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
}

/// The dataset's episodes: (run episode, frames), in order.
fn exported(ds: &Path) -> Vec<(u64, u64)> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    let meta = batch(&ds.join("meta/episodes/chunk-000/file-000.parquet"));
    let col = |n: &str| {
        meta.column_by_name(n)
            .unwrap()
            .as_primitive::<Int64Type>()
            .values()
            .to_vec()
    };
    col("run_episode")
        .into_iter()
        .zip(col("length"))
        .map(|(e, n)| (e as u64, n as u64))
        .collect()
}

/// What the whole recording says of the run: per ended episode (`events.jsonl`), the
/// numbers of its running cycles.
struct Truth {
    running: BTreeMap<u64, Vec<u64>>,
    /// Every cycle number, in order.
    cycles: Vec<u64>,
}

/// What lies before a cut.
#[derive(Clone, Copy, Debug)]
enum Before {
    /// Every message.
    All,
    /// The cycles up to this one.
    Upto(u64),
    /// No cycle.
    Nothing,
}

impl Truth {
    /// The episodes whole in a copy whose sound part holds `before`, and those left out.
    fn split(&self, before: Before) -> (Vec<(u64, u64)>, Vec<u64>) {
        let (mut whole, mut left) = (Vec::new(), Vec::new());
        for (k, cycles) in &self.running {
            let end = *cycles.last().unwrap();
            let next = self.cycles.iter().find(|c| **c > end);
            match (before, next) {
                (Before::All, _) => whole.push((*k, cycles.len() as u64)),
                (Before::Upto(l), Some(n)) if *n <= l => whole.push((*k, cycles.len() as u64)),
                _ => left.push(*k),
            }
        }
        (whole, left)
    }
}

/// One damaged copy's expected outcome.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// Byte offset the cut is placed at (`None`: in the footer).
    offset: Option<u64>,
    /// What lies before it.
    before: Before,
}

/// `damage` exported strictly and with `--allow-partial`, judged against `truth`.
fn check_case(run: &Path, dir: &Path, truth: &Truth, case: &Case) {
    let name = case.name;
    let copy = copy_with(run, dir, name, &case.bytes);
    let ds = dir.join(format!("{name}-ds"));
    let o = chunkrt_at(&["export", "lerobot"], &[&copy, Path::new("--out"), &ds]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{name}: refused: {text}");
    assert!(!ds.exists(), "{name}: a dataset was written");
    assert!(
        text.contains(&format!("{}: its recording is not whole", copy.display())),
        "{name}: names the run: {text}"
    );
    if let Some(at) = case.offset {
        assert!(
            text.contains(&format!("cut at byte {at} of {}", case.bytes.len())),
            "{name}: names the cut: {text}"
        );
    }
    let last = match case.before {
        Before::Upto(last) => format!("the last whole cycle is {last} at "),
        Before::Nothing => "no whole cycle before it".to_string(),
        Before::All => "the last whole cycle is ".to_string(),
    };
    assert!(
        text.contains(&last),
        "{name}: names the last whole cycle: {text}"
    );
    let (whole, left) = truth.split(case.before);
    let ds = dir.join(format!("{name}-partial"));
    let o = chunkrt_at(
        &["export", "lerobot", "--allow-partial"],
        &[&copy, Path::new("--out"), &ds],
    );
    let text = output_text(&o);
    if whole.is_empty() {
        assert_eq!(o.status.code(), Some(2), "{name}: nothing whole: {text}");
        assert!(
            text.contains(&format!(
                "{}: no episode of it was wholly recorded before the cut",
                copy.display()
            )),
            "{name}: names the run: {text}"
        );
        assert!(!ds.exists(), "{name}: a dataset was written");
        eprintln!("{name}: refused, and with --allow-partial too (no whole episode)");
        return;
    }
    assert_eq!(o.status.code(), Some(5), "{name}: exported in part: {text}");
    assert_eq!(
        exported(&ds),
        whole,
        "{name}: the whole episodes, every frame"
    );
    let ours: Value =
        serde_json::from_str(&std::fs::read_to_string(ds.join("meta/chunkrt.json")).unwrap())
            .unwrap();
    let cut = &ours["runs"][0]["cut"];
    if let Some(at) = case.offset {
        assert_eq!(cut["offset_bytes"], at, "{name}: {cut}");
    }
    assert_eq!(cut["file_bytes"], case.bytes.len(), "{name}: {cut}");
    assert_eq!(
        cut["episodes_left_out"],
        serde_json::json!(left),
        "{name}: {cut}"
    );
    eprintln!(
        "{name}: refused; with --allow-partial {} of {} episodes ({} frames), left out {left:?}",
        whole.len(),
        truth.running.len(),
        whole.iter().map(|w| w.1).sum::<u64>()
    );
}

/// The damaged copies: cut inside and at the start of the first chunk `k` past which
/// an episode is left out (at least one whole before it), inside the footer, one bit
/// flipped in chunk `k`'s data, and cut inside the first chunk that holds cycles.
fn cases(bytes: &[u8], chunks: &[ChunkSpan], truth: &Truth) -> Vec<Case> {
    let before = |k: usize| {
        chunks[..k]
            .iter()
            .flat_map(|c| c.cycles.last())
            .last()
            .map_or(Before::Nothing, |c| Before::Upto(*c))
    };
    let k = (1..chunks.len())
        .find(|&k| {
            let (whole, left) = truth.split(before(k));
            !whole.is_empty() && !left.is_empty() && !chunks[k].cycles.is_empty()
        })
        .expect("a chunk with a whole episode before it and one left out from it");
    let first = chunks.iter().position(|c| !c.cycles.is_empty()).unwrap();
    let middle = |c: &ChunkSpan| ((c.start + c.end) / 2) as usize;
    let mut flipped = bytes.to_vec();
    flipped[middle(&chunks[k])] ^= 0x10;
    let at = |name, bytes: Vec<u8>, k: usize| Case {
        name,
        bytes,
        offset: Some(chunks[k].start),
        before: before(k),
    };
    vec![
        at("inside-a-chunk", bytes[..middle(&chunks[k])].to_vec(), k),
        at("at-a-chunk", bytes[..chunks[k].start as usize].to_vec(), k),
        Case {
            name: "inside-the-footer",
            bytes: bytes[..bytes.len() - 10].to_vec(),
            offset: None,
            before: Before::All,
        },
        at("a-flipped-bit", flipped, k),
        at(
            "before-any-episode",
            bytes[..middle(&chunks[first])].to_vec(),
            first,
        ),
    ]
}

#[test]
fn a_cut_or_corrupt_recording_or_a_repeated_run_is_refused_or_exported_whole_episodes_only() {
    let dir = temp_dir("export-cut", "run");
    let config = config_in(&dir);
    let run = dir.join("run");
    let o = chunkrt_at(
        &[
            "run",
            "--duration",
            "3s",
            "--quiet",
            "--no-plots",
            "--config",
        ],
        &[&config, Path::new("--out"), &run],
    );
    assert!(o.status.success(), "{}", output_text(&o));
    let rec = run.join("recording.mcap");
    let (cycles, _) = recording::read(&rec).unwrap();
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    let ended: Vec<u64> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["event"] == "episode")
        .map(|v| v["episode"].as_u64().unwrap())
        .collect();
    let truth = Truth {
        running: ended
            .iter()
            .map(|k| {
                let mine = cycles
                    .iter()
                    .filter(|c| c.episode == Some((*k, "running".to_string())))
                    .map(|c| c.cycle)
                    .collect();
                (*k, mine)
            })
            .collect(),
        cycles: cycles.iter().map(|c| c.cycle).collect(),
    };
    assert!(truth.running.len() >= 2, "episodes: {ended:?}");
    assert!(truth.running.values().all(|c| !c.is_empty()));

    // The whole run: every episode, exit 0, no cut in meta/chunkrt.json.
    let ds = dir.join("whole-ds");
    let o = chunkrt_at(&["export", "lerobot"], &[&run, Path::new("--out"), &ds]);
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    assert_eq!(exported(&ds), truth.split(Before::All).0);
    let ours: Value =
        serde_json::from_str(&std::fs::read_to_string(ds.join("meta/chunkrt.json")).unwrap())
            .unwrap();
    assert!(ours["runs"][0].get("cut").is_none(), "{ours}");

    let bytes = std::fs::read(&rec).unwrap();
    let chunks = recording::chunks(&rec).unwrap();
    for case in cases(&bytes, &chunks, &truth) {
        check_case(&run, &dir, &truth, &case);
    }

    // The same run twice: by another path to it, and as a copy.
    let same = run.join(".");
    let copy = copy_with(&run, &dir, "copy", &bytes);
    for (other, says) in [(&same, "given twice"), (&copy, "the same run as")] {
        let ds = dir.join("twice-ds");
        let o = chunkrt_at(
            &["export", "lerobot"],
            &[&run, other, Path::new("--out"), &ds],
        );
        let text = output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{text}");
        assert!(text.contains(says), "{text}");
        assert!(!ds.exists());
    }
    // A stride of 0.
    let ds = dir.join("stride-ds");
    let o = chunkrt_at(
        &["export", "lerobot", "--stride", "0"],
        &[&run, Path::new("--out"), &ds],
    );
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains("'--stride <STRIDE>'"), "{text}");
    assert!(!ds.exists());

    // An episode line repeated at the end of the log (a concatenated or edited log).
    let dup = copy_with(&run, &dir, "dup", &bytes);
    let first = events
        .lines()
        .position(|l| l.contains("\"event\":\"episode\""))
        .unwrap();
    let again = events.lines().count() + 1;
    let line = events.lines().nth(first).unwrap();
    std::fs::write(dup.join("events.jsonl"), format!("{events}{line}\n")).unwrap();
    let want = format!(
        "{}:{again}: episode {} again (its line is {})",
        dup.join("events.jsonl").display(),
        ended[0],
        first + 1
    );
    let o = chunkrt_at(&["episodes"], &[&dup]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains(&want), "{text}");
    let ds = dir.join("dup-ds");
    let o = chunkrt_at(&["export", "lerobot"], &[&dup, Path::new("--out"), &ds]);
    let text = output_text(&o);
    assert_eq!(o.status.code(), Some(2), "{text}");
    assert!(text.contains(&want), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
