//! The wrist force/torque sensor (`ft_site`) of the MuJoCo arm, on
//! `models/franka_panda/panda-plate.xml` (a massless tool ball on the flange, a plate
//! whose top face is at z = 0.700 m). Judged by physics the sensor code does not
//! compute: a massless tool in free space carries no load; a contact force lies in the
//! plate's friction cone around its normal (+z, μ = 1, MuJoCo's default friction); the
//! torque about the sensor is that force's moment from a contact on the 10 mm ball
//! 10 mm beyond it (|T| ≤ 0.02 m · |F|, plus the penetration).

mod common;

use chunkrt_core::Backend;
use chunkrt_mujoco::{MujocoArm, MujocoParams};
use common::{cycle, started, track};
use std::path::PathBuf;

const START: [f64; 7] = [0.0, -0.4, 0.0, -1.6, 0.0, 1.2, 0.8];
/// A pose the bundled policy commands with the tool about 55 mm below the plate's face.
const PRESSED: [f64; 7] = [-0.0979, 0.4153, 0.2085, -0.8135, -0.1085, 1.0914, 0.8038];

fn plate_xml() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/franka_panda/panda-plate.xml")
}

fn plate_arm(site: &str) -> MujocoParams {
    let mut p = MujocoParams::panda(plate_xml());
    p.initial_pos_rad[..7].copy_from_slice(&START);
    p.ft_site = Some(site.into());
    p
}

fn norm(v: &[f64; 3]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

#[test]
fn the_sensor_reads_no_load_in_free_space_and_the_plates_push_when_pressed() {
    let (mut arm, mut fb) = started(plate_arm("ft"));
    let w = fb.wrench.expect("the first feedback carries the wrench");
    assert_eq!(w.t_capture, fb.t_capture);
    // Held at the start for 0.5 s: gravity on, the tool massless, nothing touched.
    for k in 1..=500 {
        arm.exchange(cycle(k), &track(&START), &mut fb).unwrap();
        let w = fb.wrench.unwrap();
        assert!(
            norm(&w.force_n) < 1e-9 && norm(&w.torque_nm) < 1e-9,
            "{w:?}"
        );
    }
    // Toward the pressed pose over 2 s, held there for 1 s.
    let (mut pressed, mut worst_cone, mut worst_lever) = (0.0f64, 0.0f64, 0.0f64);
    for k in 1..=3_000u64 {
        let s = (k as f64 / 2_000.0).min(1.0);
        let pose: Vec<f64> = (0..7)
            .map(|j| START[j] + s * (PRESSED[j] - START[j]))
            .collect();
        arm.exchange(cycle(500 + k), &track(&pose), &mut fb)
            .unwrap();
        let w = fb.wrench.unwrap();
        let f = norm(&w.force_n);
        if f < 1.0 {
            continue;
        }
        pressed = pressed.max(w.force_n[2]);
        let tangential = w.force_n[0].hypot(w.force_n[1]);
        worst_cone = worst_cone.max(tangential / w.force_n[2]);
        worst_lever = worst_lever.max(norm(&w.torque_nm) / f);
    }
    eprintln!(
        "pressed: F_z up to {pressed:.1} N, |F_t|/F_z at most {worst_cone:.4}, \
         |T|/|F| at most {worst_lever:.4} m"
    );
    assert!(pressed > 50.0, "the plate pushes the tool up: {pressed} N");
    assert!(
        worst_cone <= 1.0 + 1e-6,
        "in the friction cone: {worst_cone}"
    );
    assert!(
        worst_lever <= 0.0205,
        "a contact on the ball: {worst_lever} m"
    );
}

#[test]
fn a_site_or_sensor_the_model_lacks_is_refused_by_name() {
    let err = MujocoArm::new(plate_arm("wrist"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("no <site> named \"wrist\""), "{err}");
    // panda.xml has no sensor at all; a site of the plate model without sensors:
    let mut p = plate_arm("ft");
    p.model_path = common::panda_xml();
    let err = MujocoArm::new(p).err().unwrap().to_string();
    assert!(err.contains("no <site> named \"ft\""), "{err}");
    let dir = std::env::temp_dir().join(format!("chunkrt-ft-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(plate_xml()).unwrap();
    let model = dir.join("no-torque.xml");
    std::fs::write(
        &model,
        text.replace("<torque name=\"ft_torque\" site=\"ft\"/>", ""),
    )
    .unwrap();
    let mut p = plate_arm("ft");
    p.model_path = model;
    let err = MujocoArm::new(p).err().unwrap().to_string();
    assert!(
        err.contains("no <torque> sensor on the site \"ft\""),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
