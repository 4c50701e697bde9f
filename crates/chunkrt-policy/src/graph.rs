//! A graph with named float32 inputs and one float32 output, checked against what a
//! format-2 manifest says of it, with every tensor allocated once and bound through an
//! `IoBinding` (the format-1 denoiser, with its fixed three inputs, is
//! [`crate::session::OrtDenoiser`]).

use std::path::{Path, PathBuf};

use chunkrt_core::PolicyError;
use ort::memory::Allocator;
use ort::session::{IoBinding, Session};
use ort::value::Tensor;

use crate::error::PolicyLoadError;
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
        // Re-bound every call: bound inputs are snapshots (see OrtDenoiser::denoise).
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
    let listed = |outlets: &[ort::value::Outlet]| {
        outlets
            .iter()
            .map(|o| format!("`{}` {}", o.name(), describe(o.dtype())))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let have = session.inputs();
    if let Some(extra) = have
        .iter()
        .find(|o| !inputs.iter().any(|i| i.name == o.name()))
    {
        return Err(mismatch(format!(
            "graph input `{}` is not in the manifest (its inputs are {}; the manifest names {})",
            extra.name(),
            listed(have),
            inputs
                .iter()
                .map(|i| format!("`{}` ({})", i.name, i.key))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let shape_of = |s: &TensorSpec| s.shape.iter().map(|d| *d as i64).collect::<Vec<_>>();
    for spec in inputs {
        let o = have.iter().find(|o| o.name() == spec.name).ok_or_else(|| {
            mismatch(format!(
                "graph has no input `{}` ({}); its inputs are {}",
                spec.name,
                spec.key,
                listed(have)
            ))
        })?;
        let shape = shape_of(spec);
        check_tensor(o.dtype(), &shape).map_err(|got| {
            mismatch(format!(
                "input `{}` ({}) is {got}, the manifest expects float32 {shape:?}",
                spec.name, spec.key
            ))
        })?;
    }
    let outs = session.outputs();
    let o = outs
        .iter()
        .find(|o| o.name() == output.name)
        .ok_or_else(|| {
            mismatch(format!(
                "graph has no output `{}` ({}); its outputs are {}",
                output.name,
                output.key,
                listed(outs)
            ))
        })?;
    let shape = shape_of(output);
    check_tensor(o.dtype(), &shape).map_err(|got| {
        mismatch(format!(
            "output `{}` ({}) is {got}, the manifest expects float32 {shape:?}",
            output.name, output.key
        ))
    })?;
    Ok(())
}
