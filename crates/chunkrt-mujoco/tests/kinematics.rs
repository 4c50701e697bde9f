//! The chain read from the MJCF model against MuJoCo's own kinematics: the tool point
//! and its positional Jacobian over random poses within the joints' ranges, on the
//! bundled Panda (at a tool site and at `link7`) and on a model that uses every form the
//! reader composes; each refusal with its message; and no allocation in
//! `tool_jacobian` (issue 57).

mod common;

use std::path::{Path, PathBuf};

use chunkrt_alloc_count::{count_allocations, CountingAllocator};
use chunkrt_core::{SplitMix64, MAX_DOF};
use chunkrt_mujoco::{chain_from_mjcf, file_sha256, ArmKinematics};
use mujoco_rs::prelude::{MjData, MjModel, MjtObjBase};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// The agreement asked of the chain, in metres (and metres per radian).
const TOLERANCE: f64 = 1e-9;
/// Random poses per model.
const POSES: usize = 200;

fn tmp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("chunkrt-kin-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The bundled Panda with a tool site on `link7`: the flange (0.107 m along its z)
/// plus a fingertip offset (0.1034 m), turned -45 degrees about z as Menagerie mounts
/// its hand. Written to a temporary copy: the bundled file's digest is pinned.
fn panda_with_tcp() -> PathBuf {
    let xml = std::fs::read_to_string(common::panda_xml()).unwrap();
    let joint7 = r#"<joint name="joint7" actuatorfrcrange="-12 12"/>"#;
    assert!(
        xml.contains(joint7),
        "the bundled model's joint7 line moved"
    );
    let site = r#"<site name="tcp" pos="0 0 0.2104" quat="0.9238795 0 0 -0.3826834"/>"#;
    let path = tmp_dir("tcp").join("panda_tcp.xml");
    std::fs::write(&path, xml.replace(joint7, &format!("{joint7}\n{site}"))).unwrap();
    path
}

/// Max |ours - MuJoCo's| over `POSES` random poses: (tool point, Jacobian entries).
fn against_mujoco(path: &Path, tool: &str, site: bool) -> (ArmKinematics, f64, f64) {
    let kin = chain_from_mjcf(path, tool).unwrap();
    let model = MjModel::from_xml(path).unwrap();
    let tool_id = if site {
        model.name_to_id(MjtObjBase::mjOBJ_SITE, tool)
    } else {
        model.name_to_id(MjtObjBase::mjOBJ_BODY, tool)
    }
    .expect("the tool is in MuJoCo's model");
    // Our joint j is MuJoCo's joint of the same name.
    let joints: Vec<usize> = kin
        .joint_names
        .iter()
        .map(|n| model.name_to_id(MjtObjBase::mjOBJ_JOINT, n).unwrap())
        .collect();
    let ranges: Vec<[f64; 2]> = joints
        .iter()
        .map(|&j| match model.jnt_limited()[j] {
            true => model.jnt_range()[j],
            false => [-std::f64::consts::PI, std::f64::consts::PI],
        })
        .collect();
    let qpos_adr: Vec<usize> = joints
        .iter()
        .map(|&j| model.jnt_qposadr()[j] as usize)
        .collect();
    let dof_adr: Vec<usize> = joints
        .iter()
        .map(|&j| model.jnt_dofadr()[j] as usize)
        .collect();
    let nv = model.nv() as usize;
    let mut data = MjData::new(&model);
    let mut rng = SplitMix64::new(57);
    let (mut fk_err, mut jac_err) = (0.0f64, 0.0f64);
    for _ in 0..POSES {
        let mut q = [0.0; MAX_DOF];
        for (j, [lo, hi]) in ranges.iter().enumerate() {
            q[j] = lo + (hi - lo) * rng.next_f64();
            data.qpos_mut()[qpos_adr[j]] = q[j];
        }
        data.forward();
        let (theirs, (jacp, _)) = if site {
            (
                data.site_xpos()[tool_id],
                data.jac_site(true, false, tool_id),
            )
        } else {
            (data.xpos()[tool_id], data.jac_body(true, false, tool_id))
        };
        let ours = kin.chain.tool_jacobian(&q[..kin.dof]);
        for k in 0..3 {
            fk_err = fk_err.max((ours.point[k] - theirs[k]).abs());
            for j in 0..kin.dof {
                jac_err = jac_err.max((ours.cols[j][k] - jacp[k * nv + dof_adr[j]]).abs());
            }
        }
    }
    (kin, fk_err, jac_err)
}

#[test]
fn the_panda_tool_site_agrees_with_mujoco_to_a_nanometre() {
    let path = panda_with_tcp();
    let (kin, fk, jac) = against_mujoco(&path, "tcp", true);
    println!("panda tcp site: max tool point error {fk:.3e} m, max Jacobian error {jac:.3e} m/rad");
    assert_eq!(kin.dof, 7);
    let names: Vec<String> = (1..=7).map(|j| format!("joint{j}")).collect();
    assert_eq!(kin.joint_names, names);
    assert!(fk <= TOLERANCE && jac <= TOLERANCE, "{fk:e} {jac:e}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn the_bundled_panda_to_link7_agrees_with_mujoco_and_names_its_digest() {
    let path = common::panda_xml();
    let (kin, fk, jac) = against_mujoco(&path, "link7", false);
    println!("panda link7: max tool point error {fk:.3e} m, max Jacobian error {jac:.3e} m/rad");
    assert_eq!(kin.dof, 7);
    assert_eq!(kin.sha256, file_sha256(&path).unwrap());
    assert!(fk <= TOLERANCE && jac <= TOLERANCE, "{fk:e} {jac:e}");
}

/// Every form the reader composes: a fixed base body with pos and quat, a default
/// axis, off-origin anchors, tilted and unnormalised axes, a `ref` in degrees (the
/// compiler's default unit), a body without a joint between joints and one after the
/// last, a site with its own pos and quat, and a joint outside the tool's path.
const EVERY_FORM: &str = r#"<mujoco model="forms">
  <compiler angle="degree"/>
  <default><joint axis="0 1 0" range="-170 170"/><geom size="0.03"/></default>
  <worldbody>
    <body name="base" pos="0.1 -0.2 0.05" quat="0.9 0.1 -0.2 0.3">
      <geom size="0.05"/>
      <body name="a" pos="0 0 0.3">
        <joint name="ja" pos="0.02 0 -0.01"/><geom/>
        <body name="side"><joint name="off_path"/><geom/></body>
        <body name="b" pos="0.25 0.05 0" quat="1 -1 0 0.2">
          <joint name="jb" axis="1 0.5 0.2" pos="0 0.03 0" ref="30"/><geom/>
          <body name="rigid" pos="0 0.1 0.2" quat="0.7 0 0.7 0"><geom/>
            <body name="c" pos="0.1 0 0">
              <joint name="jc" type="hinge" axis="0 0 -3" ref="-45"/><geom/>
              <body name="flange" pos="0 0 0.08" quat="0.5 0.5 0.5 0.5"><geom/>
                <site name="tip" pos="0.01 0.02 0.05" quat="0 1 0 0"/>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"#;

#[test]
fn every_form_the_reader_composes_agrees_with_mujoco() {
    let path = tmp_dir("forms").join("forms.xml");
    std::fs::write(&path, EVERY_FORM).unwrap();
    for (tool, site) in [("tip", true), ("flange", false), ("rigid", false)] {
        let (kin, fk, jac) = against_mujoco(&path, tool, site);
        println!("forms to {tool}: max tool point error {fk:.3e} m, max Jacobian error {jac:.3e}");
        let expected: &[&str] = if tool == "rigid" {
            &["ja", "jb"]
        } else {
            &["ja", "jb", "jc"]
        };
        assert_eq!(kin.joint_names, expected);
        assert!(
            fk <= TOLERANCE && jac <= TOLERANCE,
            "{tool}: {fk:e} {jac:e}"
        );
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// A two-joint arm, each refusal below a change to it.
const ARM: &str = r#"<mujoco>
  <worldbody>
    <body name="l1"><joint name="j1"/>
      <body name="l2" pos="0 0 0.3"><joint name="j2" axis="0 1 0"/>
        <site name="tool" pos="0 0 0.1"/>
      </body>
    </body>
  </worldbody>
</mujoco>"#;

const L1: &str = r#"<body name="l1">"#;
const J2: &str = r#"<joint name="j2" "#;
const SITE: &str = r#"<site name="tool" "#;
const ROOT: &str = "<mujoco>";

/// (text in `ARM`, its replacement, the tool, what the error must say).
const REFUSALS: &[(&str, &str, &str, &str)] = &[
    (
        L1,
        r#"<body name="l1" euler="0 0 1">"#,
        "tool",
        r#"<body name="l1"> (line 3) has euler=...: only pos and quat"#,
    ),
    (
        L1,
        r#"<body name="l1" axisangle="0 0 1 1">"#,
        "tool",
        r#"<body name="l1"> (line 3) has axisangle="#,
    ),
    (
        L1,
        r#"<body name="l1" xyaxes="1 0 0 0 1 0">"#,
        "tool",
        "has xyaxes=",
    ),
    (
        L1,
        r#"<body name="l1" zaxis="0 0 1">"#,
        "tool",
        "has zaxis=",
    ),
    (
        L1,
        r#"<body name="l1" childclass="arm">"#,
        "tool",
        r#"<body name="l1"> (line 3) has childclass="arm": default classes"#,
    ),
    (
        J2,
        r#"<joint name="j2" class="x" "#,
        "tool",
        r#"<joint name="j2"> (line 4) has class="x""#,
    ),
    (
        J2,
        r#"<joint name="j2" type="slide" "#,
        "tool",
        r#"<joint name="j2"> (line 4) is a slide joint: only hinge"#,
    ),
    (
        J2,
        r#"<joint name="j2" type="ball" "#,
        "tool",
        "is a ball joint",
    ),
    (
        r#"<joint name="j1"/>"#,
        r#"<freejoint name="j1"/>"#,
        "tool",
        r#"<freejoint name="j1"> (line 3) is a free joint"#,
    ),
    (
        ROOT,
        r#"<mujoco><default><joint type="slide"/></default>"#,
        "tool",
        r#"<joint name="j1"> (line 3) is a slide joint"#,
    ),
    (
        r#"axis="0 1 0"/>"#,
        r#"axis="0 1 0"/><joint name="j3"/>"#,
        "tool",
        r#"<joint name="j3"> (line 4) is a second joint in <body name="l2">"#,
    ),
    (
        SITE,
        r#"<site name="tool" euler="1 0 0" "#,
        "tool",
        r#"<site name="tool"> (line 5) has euler="#,
    ),
    (
        SITE,
        r#"<site name="tool" fromto="0 0 0 1 0 0" "#,
        "tool",
        "has fromto=",
    ),
    (
        ROOT,
        r#"<mujoco><default><site zaxis="1 0 0"/></default>"#,
        "tool",
        "<site> (line 1) has zaxis=",
    ),
    (
        ROOT,
        r#"<mujoco><include file="other.xml"/>"#,
        "tool",
        "<include> (line 1) includes another file",
    ),
    (
        L1,
        r#"<body name="l1" pos="0 0">"#,
        "tool",
        r#"<body name="l1"> (line 3) has pos="0 0": expected 3 finite numbers"#,
    ),
    (
        L1,
        r#"<body name="l1" quat="0 0 0 0">"#,
        "tool",
        r#"has quat="0 0 0 0": not a rotation"#,
    ),
    (
        r#"axis="0 1 0""#,
        r#"axis="0 0 0""#,
        "tool",
        r#"<joint name="j2"> (line 4) has axis="0 0 0""#,
    ),
    (
        ROOT,
        ROOT,
        "nowhere",
        r#"has no <site> or <body> named "nowhere""#,
    ),
    (
        r#"axis="0 1 0"/>"#,
        r#"axis="0 1 0"/><body name="tool"/>"#,
        "tool",
        r#"has 2 elements named "tool""#,
    ),
    (
        r#"<site name="tool" pos="0 0 0.1"/>"#,
        r#"<frame><site name="tool" pos="0 0 0.1"/></frame>"#,
        "tool",
        r#"<frame> (line 5) lies between the world body and "tool""#,
    ),
    (
        "<worldbody>",
        r#"<worldbody><site name="fixed"/>"#,
        "fixed",
        "0 hinge joints: expected 1 to",
    ),
    (
        ARM,
        "<robot/>",
        "tool",
        "<robot> (line 1) is the root element",
    ),
    (r#"</mujoco>"#, "", "tool", "is not XML"),
];

#[test]
fn what_the_reader_does_not_resolve_is_refused_by_element() {
    let dir = tmp_dir("refused");
    for (i, (from, to, tool, says)) in REFUSALS.iter().enumerate() {
        assert!(ARM.contains(from), "case {i}: {from}");
        let xml = ARM.replacen(from, to, 1);
        let path = dir.join(format!("case{i}.xml"));
        std::fs::write(&path, &xml).unwrap();
        let e = chain_from_mjcf(&path, tool).expect_err(says).to_string();
        assert!(e.contains(says), "case {i}: {e}\n{xml}");
        assert!(
            e.contains(&format!("case{i}.xml")),
            "case {i} names no file: {e}"
        );
    }
    let e = chain_from_mjcf(&dir.join("absent.xml"), "tool")
        .unwrap_err()
        .to_string();
    assert!(e.contains("absent.xml"), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_tool_jacobian_of_the_panda_allocates_nothing() {
    let kin = chain_from_mjcf(&common::panda_xml(), "link7").unwrap();
    let mut q = [0.0; MAX_DOF];
    let mut rng = SplitMix64::new(7);
    let mut sum = 0.0;
    let (_, allocations) = count_allocations(|| {
        for _ in 0..100 {
            for v in q.iter_mut().take(kin.dof) {
                *v = rng.next_f64() * 2.0 - 1.0;
            }
            let jac = kin.chain.tool_jacobian(&q[..kin.dof]);
            sum += jac.point[0] + jac.velocity(&q, kin.dof)[2];
        }
    });
    assert!(sum.is_finite());
    assert_eq!(allocations, 0);
}
