//! The MJCF model read once, with a bound, and loaded from those bytes (issue 56).
//!
//! MuJoCo given a path reads the model and every file it names (`<include>`d MJCF,
//! meshes, textures, height fields) itself, without a bound: `/dev/zero` as a mesh
//! aborts the process. And a digest taken of the file before MuJoCo reopens it by path
//! may not be of the file loaded. So chunkrt reads the model file and every file it
//! names with [`chunkrt_files`] (regular files only, size caps, SHA-256 while reading),
//! puts the bytes in a MuJoCo virtual file system (`mjVFS`, `mj_addBufferVFS`) under
//! [`VIRTUAL_ROOT`], a directory that exists nowhere on disk, and loads the model from
//! there (`mj_loadXML` with the VFS): a file chunkrt did not read is no file MuJoCo can
//! open (its fallback to the disk finds nothing under that root), and the digests are
//! of the very bytes loaded.
//!
//! Where MuJoCo looks for a file, as its XML reference says: an `<include file>` and an
//! asset `<model file>` relative to the main model's directory; a mesh, height field,
//! skin or `flexcomp` file under `meshdir`, a texture under `texturedir` (either from
//! `assetdir`, `<compiler strippath>` honoured). A name must be relative and stay
//! inside the model's directory; an element naming a file in a way not listed here is
//! refused rather than guessed at.
//!
//! The digests: `model_sha256` is the SHA-256 of the main file (as `sha256sum` gives
//! it); `model_files_sha256`, for a model that names other files, the SHA-256 of the
//! lines `<sha256>  <path>\n` of those files sorted by path (relative to the model's
//! directory), what `sha256sum` prints for them, sorted.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use mujoco_rs::prelude::MjModel;
use mujoco_rs::wrappers::MjVfs;
use sha2::{Digest, Sha256};

use crate::params::MujocoError;

/// The largest MJCF file (the model or one it includes).
pub const XML_LIMIT_BYTES: u64 = 64 << 20;
/// The largest asset file (mesh, texture, height field, skin).
pub const ASSET_LIMIT_BYTES: u64 = 256 << 20;
/// The most bytes one model may read in all.
pub const TOTAL_LIMIT_BYTES: u64 = 1 << 30;
/// The most files one model may name.
const MAX_FILES: usize = 1024;
/// Where the files sit in MuJoCo's virtual file system: a directory on no disk.
pub const VIRTUAL_ROOT: &str = "/nonexistent/chunkrt-mjcf";

/// The model file and every file it names, read.
pub struct ModelFiles {
    path: PathBuf,
    main: Vec<u8>,
    /// The main file's SHA-256 (hex).
    pub main_sha256: String,
    /// The other files by path relative to the model's directory: (SHA-256, bytes).
    others: BTreeMap<String, (String, Vec<u8>)>,
}

/// Where MuJoCo looks for an element's file.
#[derive(Clone, Copy)]
enum Dir {
    Model,
    Mesh,
    Texture,
}

/// `<compiler>`'s path settings (the last one read wins, as in MuJoCo).
#[derive(Default)]
struct Compiler {
    meshdir: Option<String>,
    texturedir: Option<String>,
    assetdir: Option<String>,
    strippath: bool,
}

impl Compiler {
    fn read(&mut self, e: roxmltree::Node) {
        let get = |k| e.attribute(k).map(str::to_string);
        if let Some(v) = get("meshdir") {
            self.meshdir = Some(v);
        }
        if let Some(v) = get("texturedir") {
            self.texturedir = Some(v);
        }
        if let Some(v) = get("assetdir") {
            self.assetdir = Some(v);
        }
        if let Some(v) = e.attribute("strippath") {
            self.strippath = v == "true";
        }
    }

    fn dir(&self, d: Dir) -> Option<&str> {
        match d {
            Dir::Model => None,
            Dir::Mesh => self.meshdir.as_deref().or(self.assetdir.as_deref()),
            Dir::Texture => self.texturedir.as_deref().or(self.assetdir.as_deref()),
        }
    }
}

/// The elements whose `file*` attributes name an asset, and where MuJoCo looks.
fn asset_dir(tag: &str) -> Option<Dir> {
    match tag {
        "mesh" | "hfield" | "skin" | "flexcomp" => Some(Dir::Mesh),
        "texture" => Some(Dir::Texture),
        "model" => Some(Dir::Model),
        _ => None,
    }
}

/// `name` relative to the model's directory, normalised; refused when absolute or
/// leaving the directory.
fn relative(name: &str) -> Result<String, String> {
    let p = Path::new(name);
    if p.is_absolute() {
        return Err(format!(
            "names {name:?}, an absolute path: a model's files are named relative to its \
             directory"
        ));
    }
    let mut parts: Vec<&str> = Vec::new();
    for c in p.components() {
        match c {
            Component::Normal(s) => parts.push(s.to_str().ok_or("a file name that is not UTF-8")?),
            Component::CurDir => {}
            Component::ParentDir if parts.pop().is_some() => {}
            _ => {
                return Err(format!(
                    "names {name:?}, outside the model's directory: a model's files lie \
                     in its directory"
                ))
            }
        }
    }
    if parts.is_empty() {
        return Err(format!("names {name:?}, no file"));
    }
    Ok(parts.join("/"))
}

pub(crate) fn parse(text: &str) -> Result<roxmltree::Document<'_>, String> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    roxmltree::Document::parse_with_options(text, opts).map_err(|e| format!("is not XML: {e}"))
}

impl ModelFiles {
    /// Reads the model at `path` and every file it names, each with its bound.
    pub fn read(path: &Path) -> Result<ModelFiles, MujocoError> {
        let (main, main_sha256) =
            chunkrt_files::read_with_sha256(path, XML_LIMIT_BYTES, "MuJoCo model", None)?;
        let mut files = ModelFiles {
            path: path.to_path_buf(),
            main,
            main_sha256,
            others: BTreeMap::new(),
        };
        files.read_includes()?;
        Ok(files)
    }

    fn model_error(&self, why: String) -> MujocoError {
        MujocoError::Model {
            path: self.path.clone(),
            why,
        }
    }

    fn text<'a>(&self, name: Option<&str>, bytes: &'a [u8]) -> Result<&'a str, MujocoError> {
        std::str::from_utf8(bytes).map_err(|_| {
            self.model_error(match name {
                Some(n) => format!("includes {n}, which is not UTF-8 text (not MJCF)"),
                None => "is not UTF-8 text (not MJCF)".into(),
            })
        })
    }

    /// Reads `rel` (relative to the model's directory) as `what` unless read already.
    fn add(&mut self, rel: String, limit: u64, what: &'static str) -> Result<bool, MujocoError> {
        if self.others.contains_key(&rel) {
            return Ok(false);
        }
        if self.others.len() >= MAX_FILES {
            return Err(self.model_error(format!("names more than {MAX_FILES} files")));
        }
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let (bytes, sha) = chunkrt_files::read_with_sha256(&dir.join(&rel), limit, what, None)?;
        let total = self.main.len() as u64
            + self
                .others
                .values()
                .map(|(_, b)| b.len() as u64)
                .sum::<u64>()
            + bytes.len() as u64;
        if total > TOTAL_LIMIT_BYTES {
            return Err(self.model_error(format!(
                "and the files it names are more than {} in all",
                chunkrt_files::bytes_text(TOTAL_LIMIT_BYTES)
            )));
        }
        self.others.insert(rel, (sha, bytes));
        Ok(true)
    }

    /// Every `<include>`d file (recursively), then every asset file, as MuJoCo would
    /// find them once all `<compiler>` settings are read.
    fn read_includes(&mut self) -> Result<(), MujocoError> {
        let mut xml: Vec<Option<String>> = vec![None];
        let mut compiler = Compiler::default();
        let mut k = 0;
        while k < xml.len() {
            let name = xml[k].clone();
            let bytes = match &name {
                None => self.main.clone(),
                Some(n) => self.others[n].1.clone(),
            };
            let text = self.text(name.as_deref(), &bytes)?;
            let doc = parse(text).map_err(|why| self.model_error(in_file(&name, why)))?;
            for e in doc.descendants().filter(roxmltree::Node::is_element) {
                match e.tag_name().name() {
                    "compiler" => compiler.read(e),
                    "include" => {
                        let file = e.attribute("file").unwrap_or_default();
                        let rel = relative(file).map_err(|why| {
                            self.model_error(in_file(&name, format!("<include> {why}")))
                        })?;
                        if self.add(
                            rel.clone(),
                            XML_LIMIT_BYTES,
                            "file the MuJoCo model includes",
                        )? {
                            xml.push(Some(rel));
                        }
                    }
                    _ => {}
                }
            }
            k += 1;
        }
        for name in xml {
            let bytes = match &name {
                None => self.main.clone(),
                Some(n) => self.others[n].1.clone(),
            };
            let text = self.text(name.as_deref(), &bytes)?;
            let doc = parse(text).map_err(|why| self.model_error(in_file(&name, why)))?;
            for e in doc.descendants().filter(roxmltree::Node::is_element) {
                self.read_assets(&name, e, &compiler)?;
            }
        }
        Ok(())
    }

    /// The files one element names (`file`, and a cube texture's `fileright` ...).
    fn read_assets(
        &mut self,
        in_xml: &Option<String>,
        e: roxmltree::Node,
        compiler: &Compiler,
    ) -> Result<(), MujocoError> {
        let tag = e.tag_name().name();
        if tag == "include" {
            return Ok(());
        }
        for a in e.attributes().filter(|a| a.name().starts_with("file")) {
            let Some(dir) = asset_dir(tag) else {
                return Err(self.model_error(in_file(
                    in_xml,
                    format!(
                        "<{tag} {}=...>: chunkrt does not know where MuJoCo reads that file \
                         from, and reads no file it cannot bound",
                        a.name()
                    ),
                )));
            };
            let mut file = a.value().to_string();
            if compiler.strippath {
                file = Path::new(&file)
                    .file_name()
                    .map_or(file.clone(), |f| f.to_string_lossy().into_owned());
            }
            let refused = |why: String| {
                self.model_error(in_file(in_xml, format!("<{tag} {}> {why}", a.name())))
            };
            // An absolute file name is taken as it is, an absolute directory prefixed:
            // both refused, as is a directory leaving the model's.
            relative(&file).map_err(refused)?;
            let full = match compiler.dir(dir) {
                Some(d) => {
                    relative(d).map_err(|why| refused(format!("(its directory) {why}")))?;
                    format!("{d}/{file}")
                }
                None => file,
            };
            let rel = relative(&full).map_err(refused)?;
            let (limit, what) = match dir {
                Dir::Model => (XML_LIMIT_BYTES, "file the MuJoCo model includes"),
                _ => (ASSET_LIMIT_BYTES, "MuJoCo model asset"),
            };
            self.add(rel, limit, what)?;
        }
        Ok(())
    }

    /// The digest over the files the model names (none when it names none):
    /// SHA-256 of `<sha256>  <path>\n` per file, sorted by path.
    pub fn files_sha256(&self) -> Option<String> {
        if self.others.is_empty() {
            return None;
        }
        let mut h = Sha256::new();
        for (rel, (sha, _)) in &self.others {
            h.update(format!("{sha}  {rel}\n").as_bytes());
        }
        Some(chunkrt_files::hex(&h.finalize()))
    }

    /// How many other files the model names.
    pub fn count(&self) -> usize {
        self.others.len()
    }

    /// MuJoCo's model, loaded from these bytes through its virtual file system.
    pub fn load(&self) -> Result<MjModel, MujocoError> {
        let load_error = |why: String| MujocoError::Load {
            path: self.path.clone(),
            why,
        };
        let main_name = self
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| load_error("a model file name that is not UTF-8".into()))?;
        let mut vfs = MjVfs::new();
        let mut add = |name: String, bytes: &[u8]| {
            vfs.add_from_buffer(&name, bytes)
                .map_err(|e| load_error(format!("{name}: {e}")))
        };
        let main = format!("{VIRTUAL_ROOT}/{main_name}");
        add(main.clone(), &self.main)?;
        for (rel, (_, bytes)) in &self.others {
            add(format!("{VIRTUAL_ROOT}/{rel}"), bytes)?;
        }
        MjModel::from_xml_vfs(&main, &vfs).map_err(|e| load_error(e.to_string()))
    }
}

fn in_file(name: &Option<String>, why: String) -> String {
    match name {
        None => why,
        Some(n) => format!("(in {n}) {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: &str = r#"<mujoco model="t">
  <compiler meshdir="assets"/>
  <include file="inc.xml"/>
  <asset><mesh name="m" file="tet.obj"/></asset>
  <worldbody><body name="b"><joint name="j" type="hinge"/><geom type="mesh" mesh="m"/></body></worldbody>
</mujoco>"#;
    const INC: &str = "<mujoco><option timestep=\"0.004\"/></mujoco>\n";
    const TET: &str = "v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n";

    /// A model with an include and a mesh in `name` under the temp directory.
    fn model(name: &str, main: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("chunkrt-mjcf-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("assets")).unwrap();
        std::fs::write(d.join("main.xml"), main).unwrap();
        std::fs::write(d.join("inc.xml"), INC).unwrap();
        std::fs::write(d.join("assets/tet.obj"), TET).unwrap();
        d.join("main.xml")
    }

    fn sha(bytes: &[u8]) -> String {
        chunkrt_files::hex(&Sha256::digest(bytes))
    }

    /// The included file and the mesh are read, digested as documented (`sha256sum`'s
    /// lines sorted by path) and loaded from the bytes read: the model has the
    /// included timestep and the mesh.
    #[test]
    fn a_model_and_the_files_it_names_load_from_the_bytes_read() {
        let path = model("load", MAIN);
        let files = ModelFiles::read(&path).unwrap();
        assert_eq!(files.main_sha256, sha(MAIN.as_bytes()));
        let lines = format!(
            "{}  assets/tet.obj\n{}  inc.xml\n",
            sha(TET.as_bytes()),
            sha(INC.as_bytes())
        );
        assert_eq!(files.files_sha256(), Some(sha(lines.as_bytes())));
        assert_eq!(files.count(), 2);
        let m = files.load().unwrap();
        assert_eq!((m.njnt(), m.nmesh(), m.opt().timestep), (1, 1, 0.004));
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    /// What chunkrt did not read, MuJoCo cannot open: the include lies on the disk
    /// beside the model, but without its bytes in the virtual file system the load
    /// fails (MuJoCo's own fallback to the disk finds nothing under the virtual root).
    #[test]
    fn a_file_chunkrt_did_not_read_is_not_read_by_mujoco_from_the_disk() {
        let path = model("sandbox", MAIN);
        let mut files = ModelFiles::read(&path).unwrap();
        files.others.remove("inc.xml");
        let Err(e) = files.load() else {
            panic!("loaded without the included file's bytes")
        };
        let e = e.to_string();
        assert!(e.contains("inc.xml"), "{e}");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }

    /// A name outside the model's directory, an absolute one, a device behind a link,
    /// a FIFO and an element whose file chunkrt cannot place are refused, each named.
    #[test]
    fn files_outside_the_directory_devices_and_unknown_file_attributes_are_refused() {
        let cases: [(&str, &str, &str); 6] = [
            (
                "inc.xml",
                "/etc/hostname",
                "<include> names \"/etc/hostname\", an absolute path",
            ),
            (
                "inc.xml",
                "../inc.xml",
                "<include> names \"../inc.xml\", outside the model's directory",
            ),
            (
                "tet.obj",
                "zero.obj",
                "zero.obj: is a character device, not a regular file",
            ),
            (
                "tet.obj",
                "fifo.obj",
                "fifo.obj: is a FIFO (named pipe), not a regular file",
            ),
            (
                "tet.obj",
                "/dev/zero",
                "<mesh file> names \"/dev/zero\", an absolute path",
            ),
            (
                "<asset>",
                "<hfield2 file=\"x.png\"/><asset>",
                "<hfield2 file=...>: chunkrt does not know",
            ),
        ];
        for (i, (from, to, says)) in cases.into_iter().enumerate() {
            let path = model(&format!("refused{i}"), &MAIN.replace(from, to));
            let dir = path.parent().unwrap();
            std::os::unix::fs::symlink("/dev/zero", dir.join("assets/zero.obj")).unwrap();
            let fifo =
                std::ffi::CString::new(dir.join("assets/fifo.obj").to_str().unwrap()).unwrap();
            // SAFETY: `fifo` is a valid NUL-terminated path for the duration of the call.
            assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
            let e = ModelFiles::read(&path).err().expect(to).to_string();
            assert!(e.contains(says), "{to}: {e}");
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
