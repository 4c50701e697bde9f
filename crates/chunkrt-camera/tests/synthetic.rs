//! The synthetic camera's rendering against the one the bundled vision policy was
//! trained on: `scripts/vision/scene.py` rendered the committed cases
//! (`tests/golden/synthetic/`, made by `scripts/vision/golden_camera.py`), and the Rust
//! renderer must give the same pixels. A policy that reads its goal in the image sees
//! in a run exactly what it saw in training.

use chunkrt_camera::synthetic::{project, render, target_pose};
use serde_json::Value;
use std::path::PathBuf;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/synthetic")
}

#[test]
fn the_rust_renderer_draws_what_the_training_renderer_drew() {
    let dir = golden_dir();
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
    let cases = cases.as_array().unwrap();
    assert!(cases.len() >= 12, "{} cases", cases.len());
    let mut sizes = std::collections::BTreeSet::new();
    for c in cases {
        let q: Vec<f64> = c["q"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let (u, v) = (c["u"].as_f64().unwrap(), c["v"].as_f64().unwrap());
        let size = c["size"].as_u64().unwrap() as usize;
        sizes.insert(size);
        let file = c["file"].as_str().unwrap();
        let want = std::fs::read(dir.join(file)).unwrap();
        assert_eq!(want.len(), size * size * 3, "{file}");
        let mut got = vec![0u8; size * size * 3];
        render(&q, u, v, size, &mut got);
        let differ: Vec<usize> = (0..size * size)
            .filter(|p| got[p * 3..p * 3 + 3] != want[p * 3..p * 3 + 3])
            .collect();
        assert!(
            differ.is_empty(),
            "{file} (q {q:?}, target ({u}, {v}), size {size}): {} pixels differ, first at (x {}, y {})",
            differ.len(),
            differ[0] % size,
            differ[0] / size
        );
    }
    assert!(sizes.len() >= 2, "cases of one size only: {sizes:?}");
}

#[test]
fn a_target_and_the_arm_at_its_pose_are_drawn_in_the_same_place() {
    // Independent of the golden files: the arm standing at the target's pose covers
    // the target's centre (green over red), and a distant target stays red.
    let size = 64;
    let mut img = vec![0u8; size * size * 3];
    let (u, v) = (0.3, 0.7);
    render(&target_pose(u, v), u, v, size, &mut img);
    let at = |x: f64, y: f64| {
        let (x, y) = (x as usize, y as usize);
        let i = (y * size + x) * 3;
        [img[i], img[i + 1], img[i + 2]]
    };
    let (px, py) = (8.0 + u * 48.0, 8.0 + v * 48.0);
    assert_eq!(at(px, py), [40, 200, 80], "arm drawn over the target");
    // 4 pixels right: inside the target (radius 5), outside the arm (radius 3).
    assert_eq!(at(px + 4.0, py), [220, 40, 40]);
    let (ua, va) = project(&target_pose(0.9, 0.1));
    assert!((ua - 0.9).abs() < 1e-12 && (va - 0.1).abs() < 1e-12);
}
