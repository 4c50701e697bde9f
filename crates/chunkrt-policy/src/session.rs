//! The ONNX Runtime side: a session for the denoiser graph, checked against the manifest,
//! with its input and output tensors allocated once and bound through an `IoBinding`.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use chunkrt_core::PolicyError;
use ort::ep::{self, ExecutionProvider as _};
use ort::memory::Allocator;
use ort::session::{IoBinding, Session};
use ort::value::{Tensor, TensorElementType, ValueType};

use crate::error::PolicyLoadError;
use crate::manifest::Manifest;
use crate::ortlib::ort_environment;
use crate::sampler::Denoiser;

/// Where ONNX Runtime runs the graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExecutionProvider {
    /// ONNX Runtime's CPU provider (the default; the PyPI wheel has only this one).
    #[default]
    Cpu,
    /// CUDA on the given device (needs a GPU build of ONNX Runtime).
    Cuda {
        /// CUDA device index.
        device_id: i32,
    },
    /// TensorRT on the given device (needs a GPU build of ONNX Runtime with TensorRT).
    TensorRt {
        /// CUDA device index.
        device_id: i32,
    },
}

impl FromStr for ExecutionProvider {
    type Err = PolicyLoadError;

    /// `cpu`, `cuda`, `cuda:N`, `tensorrt` or `tensorrt:N`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, dev) = match s.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (s, None),
        };
        let device_id = match dev {
            None => 0,
            Some(d) => d.parse::<i32>().ok().filter(|d| *d >= 0).ok_or_else(|| {
                PolicyLoadError::ExecutionProvider {
                    name: s.to_string(),
                    message: format!("device index `{d}` is not a non-negative integer"),
                }
            })?,
        };
        match (name, dev) {
            ("cpu", None) => Ok(ExecutionProvider::Cpu),
            ("cuda", _) => Ok(ExecutionProvider::Cuda { device_id }),
            ("tensorrt", _) => Ok(ExecutionProvider::TensorRt { device_id }),
            _ => Err(PolicyLoadError::ExecutionProvider {
                name: s.to_string(),
                message: "unknown; expected cpu, cuda[:N] or tensorrt[:N]".into(),
            }),
        }
    }
}

impl ExecutionProvider {
    /// The name used in configs.
    pub fn name(&self) -> &'static str {
        match self {
            ExecutionProvider::Cpu => "cpu",
            ExecutionProvider::Cuda { .. } => "cuda",
            ExecutionProvider::TensorRt { .. } => "tensorrt",
        }
    }
}

/// How to open a model.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionOptions {
    /// Explicit ONNX Runtime library (config key `ort_library`); `None`: ORT_DYLIB_PATH, then
    /// the repository's `.ort/lib`.
    pub ort_library: Option<PathBuf>,
    /// Execution provider.
    pub execution_provider: ExecutionProvider,
    /// ONNX Runtime intra-op threads (1: run on the calling thread, no spinning pool).
    pub intra_threads: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            ort_library: None,
            execution_provider: ExecutionProvider::Cpu,
            intra_threads: 1,
        }
    }
}

/// The denoiser graph in an ONNX Runtime session, with tensors allocated once.
pub struct OrtDenoiser {
    session: Session,
    binding: IoBinding,
    obs: Tensor<f32>,
    x: Tensor<f32>,
    t: Tensor<f32>,
    _out: Tensor<f32>,
    names: [String; 4],
    model_path: PathBuf,
}

impl std::fmt::Debug for OrtDenoiser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtDenoiser")
            .field("model", &self.model_path)
            .finish()
    }
}

pub(crate) fn rt_err(path: &Path) -> impl Fn(ort::Error) -> PolicyLoadError + '_ {
    move |e| PolicyLoadError::Runtime {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Opens model bytes in an ONNX Runtime session with the options' library, provider and
/// threads (one inter-op thread, no spinning).
pub(crate) fn open_session(
    model_path: &Path,
    model_bytes: &[u8],
    opts: &SessionOptions,
) -> Result<Session, PolicyLoadError> {
    let (env, lib) = ort_environment(opts.ort_library.as_deref())?;
    let err = rt_err(model_path);
    let mut builder = Session::builder(&env)
        .map_err(&err)?
        .with_intra_threads(opts.intra_threads.max(1))
        .map_err(|e| err(e.into()))?
        .with_inter_threads(1)
        .map_err(|e| err(e.into()))?
        .with_intra_op_spinning(false)
        .map_err(|e| err(e.into()))?;
    builder = register_provider(builder, opts.execution_provider, &lib)?;
    builder.commit_from_memory(model_bytes).map_err(&err)
}

impl OrtDenoiser {
    /// Opens the model bytes (already checked against the manifest's digest) and checks the
    /// graph's inputs and outputs against the manifest.
    pub fn open(
        manifest: &Manifest,
        model_path: &Path,
        model_bytes: &[u8],
        opts: &SessionOptions,
    ) -> Result<OrtDenoiser, PolicyLoadError> {
        let err = rt_err(model_path);
        let session = open_session(model_path, model_bytes, opts)?;
        check_graph(manifest, model_path, &session)?;

        let (d_obs, h, d_a) = (manifest.d_obs, manifest.horizon, manifest.d_a);
        let obs = Tensor::from_array(([1usize, d_obs], vec![0.0f32; d_obs])).map_err(&err)?;
        let x = Tensor::from_array(([1usize, h, d_a], vec![0.0f32; h * d_a])).map_err(&err)?;
        let t = Tensor::from_array(([1usize], vec![0.0f32; 1])).map_err(&err)?;
        let mut out = Tensor::<f32>::new(&Allocator::default(), [1usize, h, d_a]).map_err(&err)?;
        let mut binding = session.create_binding().map_err(&err)?;
        binding
            .bind_output(manifest.io.out.clone(), &mut out)
            .map_err(&err)?;
        Ok(OrtDenoiser {
            session,
            binding,
            obs,
            x,
            t,
            _out: out,
            names: [
                manifest.io.obs.clone(),
                manifest.io.x.clone(),
                manifest.io.t.clone(),
                manifest.io.out.clone(),
            ],
            model_path: model_path.to_path_buf(),
        })
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
        let e = |what: &str, err: ort::Error| {
            PolicyError(format!(
                "ONNX Runtime {what} ({}): {err}",
                self.model_path.display()
            ))
        };
        self.obs.extract_tensor_mut().1.copy_from_slice(obs_n);
        self.x.extract_tensor_mut().1.copy_from_slice(x);
        self.t.extract_tensor_mut().1[0] = t;
        // Re-bound every call: ort documents bound inputs as snapshots, so a rebind is what
        // guarantees the session sees the values just written (it copies no tensor data).
        let [n_obs, n_x, n_t, n_out] = &self.names;
        self.binding
            .bind_input(n_obs.as_str(), &self.obs)
            .map_err(|err| e("bind", err))?;
        self.binding
            .bind_input(n_x.as_str(), &self.x)
            .map_err(|err| e("bind", err))?;
        self.binding
            .bind_input(n_t.as_str(), &self.t)
            .map_err(|err| e("bind", err))?;
        let outputs = self
            .session
            .run_binding(&self.binding)
            .map_err(|err| e("run", err))?;
        let value = outputs
            .get(n_out.as_str())
            .ok_or_else(|| PolicyError(format!("ONNX Runtime returned no output `{n_out}`")))?;
        let (_, data) = value
            .try_extract_tensor::<f32>()
            .map_err(|err| e("output", err))?;
        if data.len() != out.len() {
            return Err(PolicyError(format!(
                "ONNX Runtime output `{n_out}` has {} values, expected {}",
                data.len(),
                out.len()
            )));
        }
        out.copy_from_slice(data);
        Ok(())
    }
}

fn register_provider(
    builder: ort::session::builder::SessionBuilder,
    provider: ExecutionProvider,
    lib: &Path,
) -> Result<ort::session::builder::SessionBuilder, PolicyLoadError> {
    let unavailable = |name: &str, ep_name: &str| PolicyLoadError::ExecutionProvider {
        name: name.to_string(),
        message: format!(
            "the ONNX Runtime library {} was built without {ep_name} (the onnxruntime wheel \
             from PyPI is CPU-only); set execution_provider = \"cpu\", or set ort_library to \
             a GPU build of libonnxruntime.so",
            lib.display()
        ),
    };
    let failed = |name: &str, e: ort::Error| PolicyLoadError::ExecutionProvider {
        name: name.to_string(),
        message: format!("registration failed: {e}"),
    };
    match provider {
        ExecutionProvider::Cpu => Ok(builder),
        ExecutionProvider::Cuda { device_id } => {
            if !ep::CUDA::is_available().unwrap_or(false) {
                return Err(unavailable("cuda", "CUDAExecutionProvider"));
            }
            builder
                .with_execution_providers([ep::CUDA::default()
                    .with_device_id(device_id)
                    .build()
                    .error_on_failure()])
                .map_err(|e| failed("cuda", e.into()))
        }
        ExecutionProvider::TensorRt { device_id } => {
            if !ep::TensorRT::is_available().unwrap_or(false) {
                return Err(unavailable("tensorrt", "TensorrtExecutionProvider"));
            }
            builder
                .with_execution_providers([ep::TensorRT::default()
                    .with_device_id(device_id)
                    .build()
                    .error_on_failure()])
                .map_err(|e| failed("tensorrt", e.into()))
        }
    }
}

/// Checks the graph's inputs/outputs (names, element type, shapes) against the manifest.
fn check_graph(m: &Manifest, path: &Path, session: &Session) -> Result<(), PolicyLoadError> {
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
    let inputs = session.inputs();
    let expected_in: [(&str, &str, Vec<i64>); 3] = [
        ("obs", &m.io.obs, vec![1, m.d_obs as i64]),
        ("x", &m.io.x, vec![1, m.horizon as i64, m.d_a as i64]),
        ("t", &m.io.t, vec![1]),
    ];
    if inputs.len() != expected_in.len() {
        return Err(mismatch(format!(
            "graph has {} inputs ({}), manifest expects 3: `{}`, `{}`, `{}`",
            inputs.len(),
            listed(inputs),
            m.io.obs,
            m.io.x,
            m.io.t
        )));
    }
    for (role, name, shape) in &expected_in {
        let o = inputs.iter().find(|o| o.name() == *name).ok_or_else(|| {
            mismatch(format!(
                "graph has no input `{name}` (manifest io.{role}); its inputs are {}",
                listed(inputs)
            ))
        })?;
        check_tensor(o.dtype(), shape).map_err(|got| {
            mismatch(format!(
                "input `{name}` is {got}, manifest expects float32 {shape:?}"
            ))
        })?;
    }
    let outputs = session.outputs();
    let out_shape = vec![1, m.horizon as i64, m.d_a as i64];
    let o = outputs
        .iter()
        .find(|o| o.name() == m.io.out)
        .ok_or_else(|| {
            mismatch(format!(
                "graph has no output `{}` (manifest io.out); its outputs are {}",
                m.io.out,
                listed(outputs)
            ))
        })?;
    check_tensor(o.dtype(), &out_shape).map_err(|got| {
        mismatch(format!(
            "output `{}` is {got}, manifest expects float32 {out_shape:?}",
            m.io.out
        ))
    })?;
    Ok(())
}

/// A graph port that is not the float32 tensor the manifest describes: what it is
/// instead ([`describe`]).
#[derive(Debug, thiserror::Error)]
#[error("{got}")]
pub(crate) struct OtherTensor {
    /// The port's type and shape.
    pub(crate) got: String,
}

/// Ok when `t` is a float32 tensor of `shape` (a symbolic leading batch dim is accepted).
pub(crate) fn check_tensor(t: &ValueType, shape: &[i64]) -> Result<(), OtherTensor> {
    match t {
        ValueType::Tensor { ty, shape: s, .. } => {
            let dims: &[i64] = s;
            let shape_ok = dims.len() == shape.len()
                && dims
                    .iter()
                    .zip(shape)
                    .enumerate()
                    .all(|(i, (g, e))| g == e || (i == 0 && *g < 0));
            if *ty == TensorElementType::Float32 && shape_ok {
                Ok(())
            } else {
                Err(OtherTensor { got: describe(t) })
            }
        }
        other => Err(OtherTensor {
            got: describe(other),
        }),
    }
}

pub(crate) fn describe(t: &ValueType) -> String {
    match t {
        ValueType::Tensor { ty, shape, .. } => {
            let dims: &[i64] = shape;
            format!("{ty:?} {dims:?}").replace("Float32", "float32")
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_providers() {
        assert_eq!(
            "cpu".parse::<ExecutionProvider>().unwrap(),
            ExecutionProvider::Cpu
        );
        assert_eq!(
            "cuda:1".parse::<ExecutionProvider>().unwrap(),
            ExecutionProvider::Cuda { device_id: 1 }
        );
        assert_eq!(
            "tensorrt".parse::<ExecutionProvider>().unwrap(),
            ExecutionProvider::TensorRt { device_id: 0 }
        );
        let e = "rocm".parse::<ExecutionProvider>().unwrap_err().to_string();
        assert_eq!(
            e,
            "execution provider `rocm`: unknown; expected cpu, cuda[:N] or tensorrt[:N]"
        );
        let e = "cuda:x"
            .parse::<ExecutionProvider>()
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "execution provider `cuda:x`: device index `x` is not a non-negative integer"
        );
    }
}
