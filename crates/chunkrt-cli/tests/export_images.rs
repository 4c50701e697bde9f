//! The camera in the learner's record (issue 40): a run of the visuomotor policy
//! (`rt-config/sim-vision.toml`, the synthetic camera) in episodes, exported with
//! `chunkrt export lerobot`. Judged against the recording read by an independent reader
//! (`chunkrt_tests::recording`): every camera frame the policy was given is in the
//! recording, and each dataset frame holds the newest image captured by its cycle's
//! deadline, as `datasets.Image()` stores it, its pixels those of the recorded image;
//! `meta/info.json` declares it as LeRobot's image feature with its size.

mod common;

use chunkrt_testkit::edit::Edit;
use chunkrt_tests::recording;
use common::{chunkrt_at, output_text, repo, temp_dir};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `rt-config/sim-vision.toml` unpinned, its manifest by its absolute path, with two
/// short episodes (the policy finds its goal in the image; the episodes time out).
fn config_in(dir: &Path) -> PathBuf {
    let manifest = repo().join("rt-config/policies/vision-flow.toml");
    let text = std::fs::read_to_string(repo().join("rt-config/sim-vision.toml"))
        .unwrap()
        .edit_once("cpu = 1 ", "cpu = -1 ")
        .edit_once("cpu = 0\n\n[policy]", "cpu = -1\n\n[policy]")
        .edit_once(
            "manifest = \"policies/vision-flow.toml\"",
            &format!("manifest = \"{}\"", manifest.display()),
        )
        + "\n[episodes]\ncount = 2\n\
           starts_rad = [[0.0, -0.2, 0.0, -1.6, 0.0, 1.2, 0.8], [0.1, -0.1, 0.0, -1.5, 0.0, 1.2, 0.8]]\n\
           goals_rad = [[0.3, -0.2, 0.0, -1.6, 0.0, 1.2, 0.8]]\n\
           time_limit_s = 1.5\ntolerance_rad = 0.02\n";
    let path = dir.join("vision-episodes.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn pixels(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let mut r = png::Decoder::new(std::io::Cursor::new(png_bytes))
        .read_info()
        .unwrap();
    let mut buf = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.height, info.width, buf)
}

#[test]
fn a_camera_runs_dataset_holds_at_each_frame_the_newest_image_captured_by_its_deadline() {
    use arrow_array::cast::AsArray;
    let dir = temp_dir("export-images", "vision");
    let config = config_in(&dir);
    let out = dir.join("run");
    let o = chunkrt_at(
        &[
            "run",
            "--duration",
            "20s",
            "--quiet",
            "--no-plots",
            "--config",
        ],
        &[&config, Path::new("--out"), &out],
    );
    assert!(o.status.success(), "{}", output_text(&o));
    let report: Value = common::read_json_checked(&out.join("report.json"));
    let rec = out.join("recording.mcap");
    let images = recording::images(&rec).unwrap();
    let (cycles, _) = recording::read(&rec).unwrap();
    // Every frame the camera published to the policy is recorded, in order.
    assert_eq!(report["counters"]["ring_drops_image"], 0);
    assert_eq!(
        report["counters"]["camera_frames"].as_u64().unwrap(),
        images.len() as u64
    );
    assert!(images
        .windows(2)
        .all(|w| w[0].seq < w[1].seq && w[0].t_capture_ns <= w[1].t_capture_ns));
    assert!(images.iter().all(|i| i.format == "png"));

    let ds = dir.join("dataset");
    let o = chunkrt_at(&["export", "lerobot"], &[&out, Path::new("--out"), &ds]);
    assert!(o.status.success(), "{}", output_text(&o));
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(ds.join("meta/info.json")).unwrap()).unwrap();
    let feature = &info["features"]["observation.image"];
    assert_eq!(feature["dtype"], "image", "{feature}");
    assert_eq!(feature["shape"], serde_json::json!([64, 64, 3]));
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(ds.join("meta/stats.json")).unwrap())
            .unwrap();
    let mean = &stats["observation.image"]["mean"];
    assert_eq!(mean.as_array().map(Vec::len), Some(3), "{mean}");

    let f = std::fs::File::open(ds.join("data/chunk-000/file-000.parquet")).unwrap();
    let batch = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .with_batch_size(1 << 20)
        .build()
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let column = batch.column_by_name("observation.image").unwrap();
    let column = column.as_struct();
    assert_eq!(column.column_names(), ["bytes", "path"]);
    let bytes = column.column_by_name("bytes").unwrap().as_binary::<i32>();
    // The running episodes' cycles, in order, are the rows.
    let running: Vec<&recording::RecordedCycle> = cycles
        .iter()
        .filter(|c| c.episode.as_ref().is_some_and(|e| e.1 == "running"))
        .collect();
    assert_eq!(running.len(), batch.num_rows());
    let mut distinct = std::collections::BTreeSet::new();
    for (row, c) in running.iter().enumerate() {
        let want = images
            .iter()
            .rfind(|i| i.t_capture_ns <= c.t_deadline_ns)
            .unwrap_or_else(|| panic!("cycle {}: no image before it", c.cycle));
        let got = pixels(bytes.value(row));
        assert_eq!(got, pixels(&want.bytes), "row {row} (cycle {})", c.cycle);
        assert_eq!((got.0, got.1), (64, 64));
        distinct.insert(want.seq);
    }
    // The scene moved: the frames do not all hold one image.
    assert!(distinct.len() > 20, "{} distinct images", distinct.len());
    let _ = std::fs::remove_dir_all(&dir);
}
