//! The arm's kinematics read from its MJCF model: a [`Chain`] from the world body down
//! the bodies holding hinge joints to a named tool (issue 57).
//!
//! The chain is the tool's ancestors, world body first. Each body's frame is its
//! parent's composed with its `pos` and `quat` (w x y z); a hinge then rotates the body
//! about its `axis` through its anchor (the joint's `pos`), both in the body's frame, by
//! the joint's angle less its `ref`: MuJoCo's own composition (`mj_kinematics`), so that
//! MuJoCo is the oracle in the tests. Bodies without a joint fold into the fixed
//! transforms; the tool is a `<site>` (its `pos`/`quat` in its body) or a `<body>` (its
//! origin).
//!
//! The top-level `<default>`'s `joint` and `site` attributes apply (MuJoCo's own
//! defaults otherwise: axis `0 0 1`, anchor at the origin, type hinge). What this reader
//! does not resolve is refused rather than guessed at, naming the element and its line:
//! an orientation other than `quat` (`euler`, `axisangle`, `xyaxes`, `zaxis`, `fromto`),
//! a `class` or `childclass` other than `main`, a joint that is not a hinge, two joints
//! in one body, an element on the path that is not a body (a `<frame>`, a `<replicate>`),
//! and an `<include>` (the kinematics are read from the one file whose digest is kept).
//! The file is read once with the model's bound and digested as read.

use std::f64::consts::PI;
use std::path::{Path, PathBuf};

use chunkrt_core::kinematics::{dot, Vec3};
use chunkrt_core::{Chain, Iso, Link};
use roxmltree::{Document, Node};

use crate::mjcf::{parse, XML_LIMIT_BYTES};
use crate::params::MujocoError;

/// Orientation attributes MuJoCo accepts besides `quat`, none read here.
const OTHER_ORIENTATIONS: [&str; 5] = ["euler", "axisangle", "xyaxes", "zaxis", "fromto"];

/// An arm's kinematics as read from its model file.
#[derive(Clone, Debug)]
pub struct ArmKinematics {
    /// World body to tool.
    pub chain: Chain,
    /// Hinge joints on the path (the chain's joints, in order).
    pub dof: usize,
    /// SHA-256 (hex) of the model file's bytes, the ones read.
    pub sha256: String,
    /// Each joint's `name` (empty where it has none), base first.
    pub joint_names: Vec<String>,
    /// The tool's name, as asked for.
    pub tool: String,
}

/// Reads the MJCF model at `path` (a regular file of at most [`XML_LIMIT_BYTES`]) and
/// builds the chain from the world body to `tool`, a `<site>` or `<body>` of that name.
pub fn chain_from_mjcf(path: &Path, tool: &str) -> Result<ArmKinematics, MujocoError> {
    let (bytes, sha256) =
        chunkrt_files::read_with_sha256(path, XML_LIMIT_BYTES, "MuJoCo model", None)?;
    let err = |why: String| MujocoError::Model {
        path: path.to_path_buf(),
        why,
    };
    let text =
        std::str::from_utf8(&bytes).map_err(|_| err("is not UTF-8 text (not MJCF)".into()))?;
    let doc = parse(text).map_err(err)?;
    let reader = Reader::new(path, &doc)?;
    let (links, tool_iso, joint_names) = reader.walk(tool)?;
    let chain = Chain::new(&links, tool_iso)
        .map_err(|e| err(format!("from the world body to {tool:?}: {e}")))?;
    Ok(ArmKinematics {
        chain,
        dof: links.len(),
        sha256,
        joint_names,
        tool: tool.to_string(),
    })
}

/// The document with what applies throughout: the top-level defaults, the angle unit.
struct Reader<'a, 'input> {
    path: PathBuf,
    doc: &'a Document<'input>,
    default_joint: Option<Node<'a, 'input>>,
    default_site: Option<Node<'a, 'input>>,
    /// Radians per unit of `ref` (`<compiler angle>`; MuJoCo's default is degrees).
    angle_unit: f64,
}

impl<'a, 'input> Reader<'a, 'input> {
    fn new(path: &Path, doc: &'a Document<'input>) -> Result<Self, MujocoError> {
        let mut r = Reader {
            path: path.to_path_buf(),
            doc,
            default_joint: None,
            default_site: None,
            angle_unit: PI / 180.0,
        };
        let root = doc.root_element();
        if root.tag_name().name() != "mujoco" {
            return Err(r.err(
                root,
                "is the root element, expected <mujoco> (not MJCF)".into(),
            ));
        }
        for e in root.descendants().filter(Node::is_element) {
            match e.tag_name().name() {
                "include" => {
                    return Err(r.err(
                        e,
                        "includes another file: the arm's kinematics are read from the one \
                         model file whose digest is kept"
                            .into(),
                    ))
                }
                "compiler" => match e.attribute("angle") {
                    Some("radian") => r.angle_unit = 1.0,
                    Some("degree") => r.angle_unit = PI / 180.0,
                    Some(v) => {
                        return Err(r.err(e, format!("angle={v:?}: expected radian or degree")))
                    }
                    None => {}
                },
                _ => {}
            }
        }
        if let Some(d) = root.children().find(|c| c.has_tag_name("default")) {
            r.default_joint = d.children().find(|c| c.has_tag_name("joint"));
            r.default_site = d.children().find(|c| c.has_tag_name("site"));
            if let Some(s) = r.default_site {
                r.orientation(s)?;
            }
        }
        Ok(r)
    }

    fn err(&self, e: Node, why: String) -> MujocoError {
        MujocoError::Model {
            path: self.path.clone(),
            why: format!("{} {why}", describe(self.doc, e)),
        }
    }

    /// The path's links, the tool's frame in the last joint's body, the joint names.
    fn walk(&self, tool: &str) -> Result<(Vec<Link>, Iso, Vec<String>), MujocoError> {
        let (site, body) = self.find_tool(tool)?;
        let mut path = Vec::new();
        let mut at = body;
        while !at.has_tag_name("worldbody") {
            if !at.has_tag_name("body") {
                return Err(self.err(
                    at,
                    format!(
                        "lies between the world body and {tool:?}: only <body> elements \
                         are composed here"
                    ),
                ));
            }
            path.push(at);
            at = at.parent_element().expect("a body lies under <worldbody>");
        }
        path.reverse();
        let mut links = Vec::new();
        let mut names = Vec::new();
        let mut since = Iso::IDENTITY;
        for b in path {
            self.no_class(b, "childclass")?;
            self.no_class(b, "class")?;
            since = since.then(&self.frame(b, None)?);
            if let Some(j) = self.joint(b)? {
                let (link, name) = self.link(j, &since)?;
                links.push(link);
                names.push(name);
                since = Iso::IDENTITY;
            }
        }
        if let Some(s) = site {
            self.no_class(s, "class")?;
            since = since.then(&self.frame(s, self.default_site)?);
        }
        Ok((links, since, names))
    }

    /// The tool's `<site>` (if it is one) and the body it sits in (or is).
    fn find_tool(
        &self,
        tool: &str,
    ) -> Result<(Option<Node<'a, 'input>>, Node<'a, 'input>), MujocoError> {
        let named: Vec<Node> = self
            .doc
            .descendants()
            .filter(|e| e.has_tag_name("worldbody"))
            .flat_map(|w| w.descendants())
            .filter(|e| e.has_tag_name("site") || e.has_tag_name("body"))
            .filter(|e| e.attribute("name") == Some(tool))
            .collect();
        let model_err = |why: String| MujocoError::Model {
            path: self.path.clone(),
            why,
        };
        match named.as_slice() {
            [] => Err(model_err(format!(
                "has no <site> or <body> named {tool:?} under <worldbody>: no tool to \
                 compute"
            ))),
            [one] if one.has_tag_name("body") => Ok((None, *one)),
            [one] => {
                let body = one.parent_element().expect("a site lies in a body");
                Ok((Some(*one), body))
            }
            _ => Err(model_err(format!(
                "has {} elements named {tool:?} (a <site> and a <body>?): name the tool \
                 uniquely",
                named.len()
            ))),
        }
    }

    fn no_class(&self, e: Node, attr: &str) -> Result<(), MujocoError> {
        match e.attribute(attr) {
            None | Some("main") => Ok(()),
            Some(c) => Err(self.err(
                e,
                format!(
                    "has {attr}={c:?}: default classes other than the top-level one are not \
                     resolved here"
                ),
            )),
        }
    }

    /// Refuses an orientation given other than as `quat`.
    fn orientation(&self, e: Node) -> Result<(), MujocoError> {
        match OTHER_ORIENTATIONS
            .iter()
            .find(|a| e.attribute(**a).is_some())
        {
            None => Ok(()),
            Some(a) => Err(self.err(
                e,
                format!("has {a}=...: only pos and quat (w x y z) are read here"),
            )),
        }
    }

    /// An element's frame in its parent body: `pos` and `quat`, from `default` where
    /// the element has none.
    fn frame(&self, e: Node, default: Option<Node>) -> Result<Iso, MujocoError> {
        self.orientation(e)?;
        let pos = self.numbers::<3>(e, "pos", default)?.unwrap_or([0.0; 3]);
        let quat = self
            .numbers::<4>(e, "quat", default)?
            .unwrap_or([1.0, 0.0, 0.0, 0.0]);
        if quat.iter().map(|v| v * v).sum::<f64>() < 1e-20 {
            return Err(self.err(e, "has quat=\"0 0 0 0\": not a rotation".into()));
        }
        Ok(Iso::from_pos_quat(pos, quat))
    }

    /// Attribute `name` of `e` (or of `default`) as `N` finite numbers.
    fn numbers<const N: usize>(
        &self,
        e: Node,
        name: &str,
        default: Option<Node>,
    ) -> Result<Option<[f64; N]>, MujocoError> {
        let Some(text) = e
            .attribute(name)
            .or(default.and_then(|d| d.attribute(name)))
        else {
            return Ok(None);
        };
        let values: Vec<f64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .unwrap_or_default();
        match <[f64; N]>::try_from(values) {
            Ok(v) if v.iter().all(|x| x.is_finite()) => Ok(Some(v)),
            _ => Err(self.err(
                e,
                format!("has {name}={text:?}: expected {N} finite numbers"),
            )),
        }
    }

    /// The body's one joint, if any; refused when not the only one.
    fn joint(&self, body: Node<'a, 'input>) -> Result<Option<Node<'a, 'input>>, MujocoError> {
        let mut joints = body
            .children()
            .filter(|c| c.has_tag_name("joint") || c.has_tag_name("freejoint"));
        let first = joints.next();
        if let Some(second) = joints.next() {
            return Err(self.err(
                second,
                format!(
                    "is a second joint in {}: one hinge per body is read here",
                    describe(self.doc, body)
                ),
            ));
        }
        Ok(first)
    }

    /// A hinge's link: `fixed` then the rotation by `-ref` (MuJoCo's angle is measured
    /// from `ref`), its anchor and axis.
    fn link(&self, j: Node, fixed: &Iso) -> Result<(Link, String), MujocoError> {
        self.no_class(j, "class")?;
        let kind = if j.has_tag_name("freejoint") {
            "free"
        } else {
            j.attribute("type")
                .or(self.default_joint.and_then(|d| d.attribute("type")))
                .unwrap_or("hinge")
        };
        if kind != "hinge" {
            return Err(self.err(
                j,
                format!("is a {kind} joint: only hinge joints are read on the tool's path"),
            ));
        }
        let d = self.default_joint;
        let anchor = self.numbers::<3>(j, "pos", d)?.unwrap_or([0.0; 3]);
        let axis = self.numbers::<3>(j, "axis", d)?.unwrap_or([0.0, 0.0, 1.0]);
        let n = dot(axis, axis).sqrt();
        if n < 1e-12 {
            return Err(self.err(j, "has axis=\"0 0 0\": no direction".into()));
        }
        let axis: Vec3 = axis.map(|v| v / n);
        let reference = self.numbers::<1>(j, "ref", d)?.map_or(0.0, |[r]| r) * self.angle_unit;
        let fixed = fixed.then(&Iso::hinge(axis, anchor, -reference));
        let name = j.attribute("name").unwrap_or_default().to_string();
        Ok((
            Link {
                fixed,
                anchor,
                axis,
            },
            name,
        ))
    }
}

/// `<body name="link3"> (line 30)`, for messages.
fn describe(doc: &Document, e: Node) -> String {
    let line = doc.text_pos_at(e.range().start).row;
    match e.attribute("name") {
        Some(n) => format!("<{} name={n:?}> (line {line})", e.tag_name().name()),
        None => format!("<{}> (line {line})", e.tag_name().name()),
    }
}
