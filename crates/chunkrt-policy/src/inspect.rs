//! `chunkrt policy inspect MODEL.onnx`: what a graph takes and gives, and a drafted
//! format-2 manifest for it (digest, shapes and roles filled in; what only the trainer
//! knows, the normalisation statistics, the goals and the domain, marked `FILL IN`).

use std::fmt::Write as _;
use std::path::Path;

use ort::value::ValueType;

use crate::error::PolicyLoadError;
use crate::session::{describe, open_session, SessionOptions};

/// One graph input or output.
#[derive(Clone, Debug, PartialEq)]
pub struct Port {
    /// Name.
    pub name: String,
    /// Element type and shape as text, e.g. `float32 [1, 16, 7]`.
    pub described: String,
    /// Whether the element type is float32.
    pub float32: bool,
    /// Dimensions (-1: symbolic).
    pub dims: Vec<i64>,
}

/// What `inspect` found.
#[derive(Clone, Debug, PartialEq)]
pub struct Inspection {
    /// The model file's SHA-256.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Inputs in graph order.
    pub inputs: Vec<Port>,
    /// Outputs in graph order.
    pub outputs: Vec<Port>,
}

fn port(name: &str, t: &ValueType) -> Port {
    let (float32, dims) = match t {
        ValueType::Tensor { ty, shape, .. } => (
            *ty == ort::value::TensorElementType::Float32,
            shape.iter().copied().collect(),
        ),
        _ => (false, Vec::new()),
    };
    Port {
        name: name.to_string(),
        described: describe(t),
        float32,
        dims,
    }
}

/// Opens the model in ONNX Runtime and lists its inputs and outputs.
pub fn inspect(model: &Path, opts: &SessionOptions) -> Result<Inspection, PolicyLoadError> {
    let (bytes, sha256) = chunkrt_files::read_with_sha256(
        model,
        chunkrt_files::MODEL_LIMIT_BYTES,
        "policy model",
        None,
    )
    .map_err(|error| PolicyLoadError::ModelRead {
        manifest: None,
        error,
    })?;
    let session = open_session(model, &bytes, opts)?;
    Ok(Inspection {
        sha256,
        bytes: bytes.len() as u64,
        inputs: session
            .inputs()
            .iter()
            .map(|o| port(o.name(), o.dtype()))
            .collect(),
        outputs: session
            .outputs()
            .iter()
            .map(|o| port(o.name(), o.dtype()))
            .collect(),
    })
}

/// The roles a drafted manifest gives the ports.
#[derive(Clone, Debug, PartialEq)]
pub struct Roles {
    /// The sequence output: (name, horizon, d_a).
    pub out: Option<(String, usize, usize)>,
    /// The noisy-sequence input (diffusion).
    pub x: Option<String>,
    /// The timestep input (diffusion).
    pub t: Option<String>,
    /// Observation inputs: (name, history, dim).
    pub obs: Vec<(String, usize, usize)>,
    /// Camera images, `[1, (history,) 3, H, W]`: (name, history, height, width).
    pub images: Vec<(String, usize, usize, usize)>,
}

fn dim(d: i64) -> Option<usize> {
    (d > 0).then_some(d as usize)
}

/// Guesses each port's role from its shape: the output `[B, H, A]`; an input of that
/// shape is the noisy sequence, a one-dimensional input the timestep (a diffusion
/// denoiser); the others observation inputs (`[B, n, D]`: n steps of history).
pub fn roles(i: &Inspection) -> Roles {
    let out = i.outputs.iter().find_map(|o| match o.dims[..] {
        [_, h, a] => Some((o.name.clone(), dim(h)?, dim(a)?)),
        _ => None,
    });
    let seq_dims = out.as_ref().map(|(_, h, a)| (*h as i64, *a as i64));
    let mut r = Roles {
        out,
        x: None,
        t: None,
        obs: Vec::new(),
        images: Vec::new(),
    };
    for p in &i.inputs {
        match p.dims[..] {
            [_, h, a] if Some((h, a)) == seq_dims && r.x.is_none() => r.x = Some(p.name.clone()),
            [_] if r.t.is_none() => r.t = Some(p.name.clone()),
            [_, n, d] => r
                .obs
                .push((p.name.clone(), dim(n).unwrap_or(1), dim(d).unwrap_or(0))),
            [_, d] => r.obs.push((p.name.clone(), 1, dim(d).unwrap_or(0))),
            [_, 3, h, w] => {
                r.images
                    .push((p.name.clone(), 1, dim(h).unwrap_or(0), dim(w).unwrap_or(0)))
            }
            [_, n, 3, h, w] => r.images.push((
                p.name.clone(),
                dim(n).unwrap_or(1),
                dim(h).unwrap_or(0),
                dim(w).unwrap_or(0),
            )),
            _ => r.obs.push((p.name.clone(), 1, 0)),
        }
    }
    r
}

/// The inspection as text.
pub fn inspection_text(model: &Path, i: &Inspection) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "model    {}", model.display());
    let _ = writeln!(s, "sha256   {}", i.sha256);
    let _ = writeln!(s, "size     {} bytes", i.bytes);
    for (what, ports) in [("input ", &i.inputs), ("output", &i.outputs)] {
        for p in ports {
            let _ = writeln!(s, "{what}   `{}` {}", p.name, p.described);
        }
    }
    s
}

/// A drafted format-2 manifest for the model (see the module docs).
pub fn draft_manifest(model: &Path, i: &Inspection) -> String {
    let d = Draft::new(i);
    let mut s = String::new();
    d.write_top(&mut s, model, i);
    d.write_observation(&mut s);
    d.write_action_and_io(&mut s);
    d.write_sampling_and_task(&mut s);
    write_training_and_domain(&mut s);
    s
}

/// What the sections of a drafted manifest share: the ports' roles and the sizes
/// read from them.
struct Draft {
    r: Roles,
    diffusion: bool,
    out: String,
    horizon: usize,
    d_a: usize,
    history: usize,
}

impl Draft {
    fn new(i: &Inspection) -> Draft {
        let r = roles(i);
        let diffusion = r.x.is_some() && r.t.is_some();
        let (out, horizon, d_a) = r.out.clone().unwrap_or_else(|| ("FILL IN".into(), 0, 0));
        let history = r
            .obs
            .iter()
            .map(|o| o.1)
            .chain(r.images.iter().map(|i| i.1))
            .max()
            .unwrap_or(1);
        Draft {
            r,
            diffusion,
            out,
            horizon,
            d_a,
            history,
        }
    }

    /// The header comment, the top-level keys and the `[origin]` table.
    fn write_top(&self, s: &mut String, model: &Path, i: &Inspection) {
        let file = model.file_name().map_or_else(
            || model.display().to_string(),
            |f| f.to_string_lossy().into(),
        );
        let (diffusion, d_a) = (self.diffusion, self.d_a);
        let _ = writeln!(
            s,
            "# chunkrt policy manifest drafted by `chunkrt policy inspect {}`.",
            model.display()
        );
        let _ = writeln!(
            s,
            "# Lines marked FILL IN need what only the training knows; `chunkrt validate` on\n\
             # this file says what is still wrong. docs/policy/lerobot.md has the contract."
        );
        let _ = writeln!(s, "format = 2");
        let _ = writeln!(
            s,
            "kind = \"{}\"",
            if diffusion { "diffusion" } else { "chunk" }
        );
        let _ = writeln!(s, "model_file = \"{file}\"");
        let _ = writeln!(s, "model_sha256 = \"{}\"", i.sha256);
        let _ = writeln!(s, "model_bytes = {}", i.bytes);
        let _ = writeln!(s, "d_a = {d_a}");
        let _ = writeln!(
            s,
            "dt_ms = 50.0  # FILL IN: the training data's frame period"
        );
        let _ = writeln!(
            s,
            "\n[origin]\nframework = \"FILL IN\"\npolicy = \"FILL IN\"\ncheckpoint = \"FILL IN\""
        );
    }

    /// The `[observation]` table with one entry per input and per image.
    fn write_observation(&self, s: &mut String) {
        let (r, d_a, history) = (&self.r, self.d_a, self.history);
        let _ = writeln!(
            s,
            "\n[observation]\nhistory = {history}\nstate = \"measured\"  # measured | commanded | planned"
        );
        for (name, _, dim) in &r.obs {
            let sources = match (*dim, d_a) {
                (d, a) if a > 0 && d == a && name.contains("environment") => "[\"goal\"]".into(),
                (d, a) if a > 0 && d == a => "[\"joint_pos\"]".into(),
                (d, a) if a > 0 && d == 2 * a => "[\"joint_pos\", \"joint_vel\"]".into(),
                _ => {
                    format!(
                        "[]  # FILL IN: {dim} values from joint_pos, joint_vel, goal ({d_a} each)"
                    )
                }
            };
            let _ = writeln!(
                s,
                "\n[[observation.inputs]]\nname = \"{name}\"\nsources = {sources}\n\
                 normalisation = \"mean_std\"  # FILL IN: mean_std | min_max | identity\n\
                 mean = []  # FILL IN: {dim} values\nstd = []  # FILL IN: {dim} values"
            );
        }
        for (name, _, h, w) in &r.images {
            let _ = writeln!(
                s,
                "\n[[observation.images]]\nname = \"{name}\"\nheight = {h}\nwidth = {w}\n\
                 normalisation = \"mean_std\"  # FILL IN: of pixels / 255, per channel R, G, B\n\
                 mean = []  # FILL IN: 3 values\nstd = []  # FILL IN: 3 values"
            );
        }
    }

    /// The `[action]` and `[io]` tables.
    fn write_action_and_io(&self, s: &mut String) {
        let (r, diffusion, d_a) = (&self.r, self.diffusion, self.d_a);
        let (out, horizon, history) = (&self.out, self.horizon, self.history);
        let _ = writeln!(
            s,
            "\n[action]\nencoding = \"absolute\"\nnormalisation = \"mean_std\"  # FILL IN\n\
             mean = []  # FILL IN: {d_a} values\nstd = []  # FILL IN: {d_a} values\n\
             horizon = {horizon}\nstart = {}  # FILL IN: the index of the action for the current observation (LeRobot diffusion: n_obs_steps - 1)\n\
             len = {}",
            if diffusion { history.saturating_sub(1) } else { 0 },
            if diffusion {
                horizon.saturating_sub(history.saturating_sub(1))
            } else {
                horizon
            }
        );
        let _ = write!(s, "\n[io]\n");
        if let (Some(x), Some(t)) = (&r.x, &r.t) {
            let _ = writeln!(s, "x = \"{x}\"\nt = \"{t}\"");
        }
        let _ = writeln!(s, "out = \"{out}\"");
    }

    /// The `[scheduler]` (diffusion), `[sampler]` and `[task]` tables.
    fn write_sampling_and_task(&self, s: &mut String) {
        let (diffusion, d_a) = (self.diffusion, self.d_a);
        if diffusion {
            let _ = writeln!(
                s,
                "\n[scheduler]  # FILL IN from the trained scheduler's config\n\
                 type = \"ddpm\"\ntrain_timesteps = 100\nalphas_cumprod = []  # FILL IN\n\
                 prediction_type = \"epsilon\"\nclip_sample = true\nclip_sample_range = 1.0\n\
                 timestep_spacing = \"leading\"\nsteps_offset = 0\nvariance_type = \"fixed_small\""
            );
        }
        let _ = writeln!(
            s,
            "\n[sampler]\nsteps = {0}\nmin_steps = {0}\nseed = 0",
            if diffusion { 10 } else { 1 }
        );
        let _ = writeln!(
            s,
            "\n[task]\ngoal_tolerance_rad = 0.05\ngoals = []  # FILL IN: goal poses, {d_a} values each"
        );
    }
}

/// The `[training]` and `[domain]` tables, all to fill in.
fn write_training_and_domain(s: &mut String) {
    let _ = writeln!(
        s,
        "\n[training]  # FILL IN\ndata_sha256 = \"\"\nsamples = 0\ndemonstrations = 0\nseed = 0\n\
         script = \"\"\nfinal_loss = 0.0"
    );
    let _ = writeln!(
        s,
        "\n[domain]  # FILL IN over the raw current observation (every input's sources in order)\n\
         obs_min = []\nobs_max = []\nmean = []\nridge = 1e-6\nmahalanobis_max = 10.0\ncovariance = []"
    );
}
