//! The contact force tripwire through the binary (issue 57): `rt-config/plate-mujoco.toml`
//! (the bundled flow policy through real ONNX Runtime, the MuJoCo Panda with a wrist
//! force/torque sensor and a plate 15-55 mm above where the policy takes the tool).
//! Judged from the recording: the force is MuJoCo's sensor reading as the backend
//! returned it, the mode is what each command was made in.
//!
//! - without `[force]` the policy drives the tool into the plate: a reading over 15 N
//!   comes back and the command after it is still the policy's (the check below fails
//!   on such a run — the oracle can fail);
//! - with `[force] tripwire_n = 15`: the command after the first reading over 15 N is
//!   the braking stop (one control period), one `force_tripwire` event names that
//!   reading, an intervention record of it is written, and the policy never has
//!   authority again in the run; the timeline plot has a force panel, and `chunkrt
//!   export lerobot` writes each cycle's reading as `observation.force`.

mod common;

use chunkrt_tests::recording::{self, RecordedCycle};
use std::path::PathBuf;

const TRIPWIRE_N: f64 = 15.0;

/// `rt-config/plate-mujoco.toml` as text for a copy written elsewhere (paths absolute,
/// threads unpinned).
fn plate_config_text() -> String {
    common::bundled_config_text("plate-mujoco.toml", "").replace(
        "model = \"../models/",
        &format!("model = \"{}/models/", common::repo().display()),
    )
}

/// Runs `chunkrt run` on `rt-config/plate-mujoco.toml` (its `[force]` kept or not) for
/// 6 s; returns the run directory.
fn run(name: &str, tripwire: bool) -> Option<PathBuf> {
    if let Err(e) = chunkrt_policy::find_ort_library(None) {
        chunkrt_testkit::missing_prerequisite("force", &e.to_string());
        return None;
    }
    let dir = common::temp_dir("force", name);
    let mut text = plate_config_text();
    if !tripwire {
        let start = text
            .find("\n[force]")
            .expect("plate-mujoco.toml has [force]");
        let end = start + text[start..].find("\n[telemetry]").unwrap();
        text.replace_range(start..end, "");
    }
    let config = dir.join("plate.toml");
    std::fs::write(&config, text).unwrap();
    let out = dir.join("run");
    common::run_chunkrt(name, &config, &out, "6s");
    Some(out)
}

fn norm(f: &[f64]) -> f64 {
    f.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// The index of the first cycle whose reading is over the tripwire.
fn first_over(cycles: &[RecordedCycle]) -> usize {
    assert!(
        cycles.iter().all(|c| c.force_n.len() == 3),
        "every cycle records the wrist force"
    );
    let k = cycles
        .iter()
        .position(|c| norm(&c.force_n) > TRIPWIRE_N)
        .expect("the policy drives the tool into the plate: a reading over 15 N");
    assert!(k > 0 && norm(&cycles[k - 1].force_n) < TRIPWIRE_N);
    k
}

#[test]
fn the_command_after_a_reading_over_the_tripwire_is_the_stop() {
    let Some(free) = run("free", false) else {
        return;
    };
    let (cycles, _) = recording::read(&free.join("recording.mcap")).unwrap();
    let k = first_over(&cycles);
    let peak = cycles.iter().map(|c| norm(&c.force_n)).fold(0.0, f64::max);
    eprintln!(
        "without [force]: first reading over {TRIPWIRE_N} N at cycle {} ({:.1} N), the next \
         command made in {}, peak {peak:.1} N",
        cycles[k].cycle,
        norm(&cycles[k].force_n),
        cycles[k + 1].mode
    );
    assert_eq!(cycles[k + 1].mode, "Playing", "the policy keeps pushing");

    let out = run("tripwire", true).unwrap();
    let (cycles, _) = recording::read(&out.join("recording.mcap")).unwrap();
    let k = first_over(&cycles);
    let reading = norm(&cycles[k].force_n);
    eprintln!(
        "with a {TRIPWIRE_N} N tripwire: first reading {reading:.1} N at cycle {}, the next \
         command made in {}",
        cycles[k].cycle,
        cycles[k + 1].mode
    );
    assert_eq!(cycles[k].mode, "Playing", "the reading came while playing");
    assert_eq!(
        cycles[k + 1].mode,
        "Decelerating",
        "the command after the reading is the braking stop"
    );
    assert!(
        cycles[k + 1..].iter().all(|c| c.mode != "Playing"),
        "authority stays withdrawn until rearm"
    );

    let events: Vec<serde_json::Value> = std::fs::read_to_string(out.join("events.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let trips: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "force_tripwire")
        .collect();
    assert_eq!(trips.len(), 1, "{trips:?}");
    let logged = trips[0]["force_n"].as_f64().unwrap();
    assert!(
        (logged - reading).abs() < 1e-9 * reading,
        "the event names the reading: {logged} against {reading}"
    );
    assert_eq!(trips[0]["limit_n"], TRIPWIRE_N);
    assert!(events
        .iter()
        .any(|e| e["event"] == "mode" && e["from"] == "Playing" && e["reason"] == "ForceTripwire"));

    let records: Vec<String> = std::fs::read_dir(out.join("interventions"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(
        records.iter().any(|r| r
            .lines()
            .next()
            .unwrap_or("")
            .contains("\"force_tripwire\"")),
        "an intervention record of the trip"
    );

    // The timeline draws the force in a panel of its own.
    common::plot(&out);
    let svg = std::fs::read_to_string(out.join("timeline.svg")).unwrap();
    assert_eq!(svg.matches("wrist |F| (N)").count(), 1, "one force panel");
    exported_force_matches_the_recording(&out, &cycles);
}

/// The run as a LeRobot dataset: `observation.force` holds each recorded cycle's force
/// (then the torque about the sensor), read back with the parquet crate.
fn exported_force_matches_the_recording(out: &std::path::Path, cycles: &[RecordedCycle]) {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Float32Type;
    let ds = out.with_file_name("dataset");
    let o = common::chunkrt_at(&["export", "lerobot", "--out"], &[&ds, out]);
    assert!(o.status.success(), "{}", common::output_text(&o));
    let data = common::read_parquet(&ds, "data/chunk-000/file-000.parquet");
    assert_eq!(
        data.num_rows(),
        cycles.len(),
        "one frame per recorded cycle"
    );
    let force = data
        .column_by_name("observation.force")
        .expect("observation.force");
    for (row, c) in cycles.iter().enumerate() {
        let got = force.as_fixed_size_list().value(row);
        let got = got.as_primitive::<Float32Type>().values();
        assert_eq!(got.len(), 6);
        let want: Vec<f32> = c.force_n.iter().map(|x| *x as f32).collect();
        assert_eq!(got[..3], want[..], "row {row}");
    }
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ds.join("meta/info.json")).unwrap()).unwrap();
    assert_eq!(
        info["features"]["observation.force"]["shape"],
        serde_json::json!([6])
    );
}

/// `chunkrt validate` (and so `run`, which loads the same way) refuses a sensor the
/// model lacks and a tripwire with no sensor to act on, naming what is wrong.
#[test]
fn a_missing_sensor_is_refused_before_anything_moves() {
    let dir = common::temp_dir("force", "refusals");
    let text = plate_config_text();
    for (name, edited, expect) in [
        (
            "site",
            text.replace("ft_site = \"ft\"", "ft_site = \"wrist\""),
            "has no <site> named \"wrist\" (mujoco.ft_site)",
        ),
        (
            "no-sensor",
            text.replace("ft_site = \"ft\"", ""),
            "key `force`: no force/torque sensor to act on",
        ),
    ] {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, edited).unwrap();
        let o = common::chunkrt_at(&["validate"], &[&config]);
        let out = common::output_text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {out}");
        assert!(out.contains(expect), "{name}: {out}");
    }
}
