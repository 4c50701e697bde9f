//! The ONNX Runtime side: where a graph runs (library, execution provider, threads), how a
//! session is opened, and how a graph port is compared with a float32 shape. The graphs
//! themselves, checked against their manifests, are [`crate::graph`].

use std::path::{Path, PathBuf};
use std::str::FromStr;

use ort::ep::{self, ExecutionProvider as _};
use ort::session::Session;
use ort::value::{TensorElementType, ValueType};

use crate::error::PolicyLoadError;
use crate::ortlib::ort_environment;

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
