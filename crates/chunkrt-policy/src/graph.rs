//! A graph with named float32 inputs and one float32 output, checked against what its
//! manifest says of it, with every tensor allocated once and bound through an `IoBinding`.
//! Both manifest formats open their graph here: format 2 names its inputs
//! ([`crate::imported`]); format 1 has the fixed denoiser inputs `obs`, `x`, `t`
//! ([`OrtDenoiser`]). `check` is the one comparison of a graph with a manifest.

use std::path::{Path, PathBuf};

use chunkrt_core::PolicyError;
use ort::memory::Allocator;
use ort::session::{IoBinding, Session};
use ort::value::Tensor;

use crate::error::PolicyLoadError;
use crate::manifest::Manifest;
use crate::sampler::Denoiser;
use crate::session::{check_tensor, describe, open_session, rt_err, SessionOptions};

/// A named tensor the manifest expects: its name and float32 shape (batch 1 first).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSpec {
    /// Graph name.
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Where the manifest says it (for messages), e.g. `io.x`.
    pub key: String,
}

impl TensorSpec {
    /// Values in the tensor.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether it holds no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The session, its input tensors (in the order given at [`OrtGraph::open`]) and output.
pub struct OrtGraph {
    session: Session,
    binding: IoBinding,
    inputs: Vec<Tensor<f32>>,
    names: Vec<String>,
    _out: Tensor<f32>,
    out_name: String,
    out_len: usize,
    model_path: PathBuf,
}

impl std::fmt::Debug for OrtGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtGraph")
            .field("model", &self.model_path)
            .field("inputs", &self.names)
            .finish()
    }
}

impl OrtGraph {
    /// Opens the model bytes (already checked against the manifest's digest) and checks that
    /// the graph has exactly `inputs` and the output `output`, float32, of those shapes (a
    /// symbolic batch dimension is accepted).
    pub fn open(
        model_path: &Path,
        model_bytes: &[u8],
        opts: &SessionOptions,
        inputs: &[TensorSpec],
        output: &TensorSpec,
    ) -> Result<OrtGraph, PolicyLoadError> {
        let err = rt_err(model_path);
        let session = open_session(model_path, model_bytes, opts)?;
        check(&session, model_path, inputs, output)?;
        let mut tensors = Vec::with_capacity(inputs.len());
        for i in inputs {
            tensors
                .push(Tensor::from_array((i.shape.clone(), vec![0.0f32; i.len()])).map_err(&err)?);
        }
        let mut out =
            Tensor::<f32>::new(&Allocator::default(), output.shape.clone()).map_err(&err)?;
        let mut binding = session.create_binding().map_err(&err)?;
        binding
            .bind_output(output.name.clone(), &mut out)
            .map_err(&err)?;
        Ok(OrtGraph {
            session,
            binding,
            inputs: tensors,
            names: inputs.iter().map(|i| i.name.clone()).collect(),
            _out: out,
            out_name: output.name.clone(),
            out_len: output.len(),
            model_path: model_path.to_path_buf(),
        })
    }

    /// The values of input `k` (in the order given at open), to be written before a run.
    pub fn input_mut(&mut self, k: usize) -> &mut [f32] {
        self.inputs[k].extract_tensor_mut().1
    }

    /// Runs the graph on the inputs as written and copies the output into `out`.
    pub fn run(&mut self, out: &mut [f32]) -> Result<(), PolicyError> {
        let path = &self.model_path;
        let e = |what: &str, err: ort::Error| {
            PolicyError(format!("ONNX Runtime {what} ({}): {err}", path.display()))
        };
        // Re-bound every call: ort documents bound inputs as snapshots, so a rebind is what
        // guarantees the session sees the values just written (it copies no tensor data).
        for (name, t) in self.names.iter().zip(&self.inputs) {
            self.binding
                .bind_input(name.as_str(), t)
                .map_err(|err| e("bind", err))?;
        }
        let outputs = self
            .session
            .run_binding(&self.binding)
            .map_err(|err| e("run", err))?;
        let value = outputs.get(self.out_name.as_str()).ok_or_else(|| {
            PolicyError(format!(
                "ONNX Runtime returned no output `{}`",
                self.out_name
            ))
        })?;
        let (_, data) = value
            .try_extract_tensor::<f32>()
            .map_err(|err| e("output", err))?;
        if data.len() != self.out_len || out.len() != self.out_len {
            return Err(PolicyError(format!(
                "ONNX Runtime output `{}` has {} values, expected {}",
                self.out_name,
                data.len(),
                self.out_len
            )));
        }
        out.copy_from_slice(data);
        Ok(())
    }
}

/// Checks the graph's inputs and output (names, element type, shapes) against the
/// manifest's: no graph input the manifest does not name, none missing, each float32 of
/// the manifest's shape (a symbolic batch dimension is accepted).
fn check(
    session: &Session,
    path: &Path,
    inputs: &[TensorSpec],
    output: &TensorSpec,
) -> Result<(), PolicyLoadError> {
    let mismatch = |what: String| PolicyLoadError::GraphMismatch {
        path: path.to_path_buf(),
        what,
    };
    let have = session.inputs();
    check_input_names(have, inputs).map_err(mismatch)?;
    for spec in inputs {
        check_port(have, spec, "input").map_err(mismatch)?;
    }
    check_port(session.outputs(), output, "output").map_err(mismatch)
}

/// The graph's ports as a message lists them: `` `name` type [shape] ``.
fn listed(outlets: &[ort::value::Outlet]) -> String {
    outlets
        .iter()
        .map(|o| format!("`{}` {}", o.name(), describe(o.dtype())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// No graph input that the manifest does not name, and no fewer inputs than it names.
fn check_input_names(have: &[ort::value::Outlet], inputs: &[TensorSpec]) -> Result<(), String> {
    let names = |with_keys: bool| {
        inputs
            .iter()
            .map(|i| {
                if with_keys {
                    format!("`{}` ({})", i.name, i.key)
                } else {
                    format!("`{}`", i.name)
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(extra) = have
        .iter()
        .find(|o| !inputs.iter().any(|i| i.name == o.name()))
    {
        return Err(format!(
            "graph input `{}` is not in the manifest (its inputs are {}; the manifest names {})",
            extra.name(),
            listed(have),
            names(true)
        ));
    }
    if have.len() < inputs.len() {
        let keys = inputs.iter().map(|i| i.key.as_str()).collect::<Vec<_>>();
        return Err(format!(
            "graph has {} inputs ({}), manifest expects {}: {} ({})",
            have.len(),
            listed(have),
            inputs.len(),
            names(false),
            keys.join(", ")
        ));
    }
    Ok(())
}

/// The graph has the port `spec` names (an `input` or `output`), float32 of its shape.
fn check_port(outlets: &[ort::value::Outlet], spec: &TensorSpec, what: &str) -> Result<(), String> {
    let o = outlets
        .iter()
        .find(|o| o.name() == spec.name)
        .ok_or_else(|| {
            format!(
                "graph has no {what} `{}` (manifest {}); its {what}s are {}",
                spec.name,
                spec.key,
                listed(outlets)
            )
        })?;
    let shape = spec.shape.iter().map(|d| *d as i64).collect::<Vec<_>>();
    check_tensor(o.dtype(), &shape).map_err(|got| {
        format!(
            "{what} `{}` ({}) is {got}, the manifest expects float32 {shape:?}",
            spec.name, spec.key
        )
    })
}

/// The format-1 denoiser: an [`OrtGraph`] with the inputs `obs` `[1, d_obs]`, `x`
/// `[1, horizon, d_a]` and `t` `[1]` and the output `[1, horizon, d_a]`, under the names
/// the manifest's `io` table gives.
#[derive(Debug)]
pub struct OrtDenoiser {
    graph: OrtGraph,
}

/// Positions of the denoiser's inputs in its graph (the order given to [`OrtGraph::open`]).
const OBS: usize = 0;
const X: usize = 1;
const T: usize = 2;

impl OrtDenoiser {
    /// Opens the model bytes (already checked against the manifest's digest) and checks the
    /// graph's inputs and outputs against the manifest.
    pub fn open(
        manifest: &Manifest,
        model_path: &Path,
        model_bytes: &[u8],
        opts: &SessionOptions,
    ) -> Result<OrtDenoiser, PolicyLoadError> {
        let (d_obs, h, d_a) = (manifest.d_obs, manifest.horizon, manifest.d_a);
        let spec = |name: &str, shape: Vec<usize>, key: &str| TensorSpec {
            name: name.to_string(),
            shape,
            key: key.to_string(),
        };
        let io = &manifest.io;
        // In the order OBS, X, T.
        let inputs = [
            spec(&io.obs, vec![1, d_obs], "io.obs"),
            spec(&io.x, vec![1, h, d_a], "io.x"),
            spec(&io.t, vec![1], "io.t"),
        ];
        let output = spec(&io.out, vec![1, h, d_a], "io.out");
        let graph = OrtGraph::open(model_path, model_bytes, opts, &inputs, &output)?;
        Ok(OrtDenoiser { graph })
    }
}

impl Denoiser for OrtDenoiser {
    fn denoise(
        &mut self,
        obs_n: &[f32],
        x: &[f32],
        t: f32,
        out: &mut [f32],
    ) -> Result<(), PolicyError> {
        self.graph.input_mut(OBS).copy_from_slice(obs_n);
        self.graph.input_mut(X).copy_from_slice(x);
        self.graph.input_mut(T)[0] = t;
        self.graph.run(out)
    }
}
