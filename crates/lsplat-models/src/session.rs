//! One ONNX model in an ONNX Runtime session: execution-provider choice with a CPU
//! fall-back, thread count, input/output contract checks and batched runs.

use std::path::{Path, PathBuf};

use lsplat_core::config::{BackendKind, DeviceConfig};
use ort::ep::{self, ExecutionProvider};
use ort::session::Session;
use ort::value::TensorRef;

use crate::contract::{TensorInfo, TensorSpec};
use crate::{ModelError, Runtime};

/// Which accelerator a session tries before the CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accelerator {
    /// The CPU execution provider only.
    Cpu,
    /// NVIDIA: the CUDA execution provider.
    Cuda,
    /// AMD: the ROCm execution provider, then MIGraphX.
    Amd,
    /// CUDA, then ROCm, then MIGraphX, then the CPU.
    Auto,
}

impl Accelerator {
    /// The accelerator `device.backend` asks for: `cpu` and `simt` run on the CPU, `cuda`
    /// on CUDA, `hip` on ROCm/MIGraphX; any other backend tries them all.
    pub fn from_backend(kind: BackendKind) -> Accelerator {
        #[allow(unreachable_patterns)] // backends added later try every provider
        match kind {
            BackendKind::Cpu | BackendKind::Simt => Accelerator::Cpu,
            BackendKind::Cuda => Accelerator::Cuda,
            BackendKind::Hip => Accelerator::Amd,
            _ => Accelerator::Auto,
        }
    }

    /// The execution providers tried, in order, before the CPU.
    fn providers(self) -> &'static [&'static str] {
        match self {
            Accelerator::Cpu => &[],
            Accelerator::Cuda => &[ep::CUDA::NAME],
            Accelerator::Amd => &[ep::ROCm::NAME, ep::MIGraphX::NAME],
            Accelerator::Auto => &[ep::CUDA::NAME, ep::ROCm::NAME, ep::MIGraphX::NAME],
        }
    }
}

/// How sessions are made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    /// Accelerator tried before the CPU.
    pub accelerator: Accelerator,
    /// GPU ordinal for the accelerator.
    pub ordinal: u32,
    /// Intra-op threads; 0 = ONNX Runtime's default (one per physical core).
    pub threads: u32,
}

impl SessionOptions {
    /// The options `[device]` asks for (`backend`, `threads`, `ordinal`).
    pub fn from_device(device: &DeviceConfig) -> SessionOptions {
        SessionOptions {
            accelerator: Accelerator::from_backend(device.backend),
            ordinal: device.ordinal,
            threads: device.threads,
        }
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            accelerator: Accelerator::Cpu,
            ordinal: 0,
            threads: 0,
        }
    }
}

/// An input tensor handed to [`OnnxModel::run`].
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// 32-bit floats of the given shape.
    F32(&'a [usize], &'a [f32]),
    /// 64-bit integers of the given shape.
    I64(&'a [usize], &'a [i64]),
}

/// One ONNX model in a session.
pub struct OnnxModel {
    path: PathBuf,
    session: Session,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
    provider: String,
}

impl std::fmt::Debug for OnnxModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxModel")
            .field("path", &self.path)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .field("provider", &self.provider)
            .finish()
    }
}

impl OnnxModel {
    /// Opens `path` in a session on the first execution provider of `opts.accelerator`
    /// that works, else on the CPU (with a warning giving the reason).
    pub fn load(path: &Path, rt: &Runtime, opts: &SessionOptions) -> Result<OnnxModel, ModelError> {
        if !path.is_file() {
            return Err(ModelError::model(path, "missing (no such file)"));
        }
        let mut reasons = Vec::new();
        for &name in opts.accelerator.providers() {
            if !rt.has_provider(name) {
                if let Some(r) = missing_provider(opts.accelerator, name, &rt.path, &rt.providers) {
                    reasons.push(r);
                }
                continue;
            }
            match session(path, rt, opts, Some(name)) {
                Ok(s) => return OnnxModel::new(path, s, name),
                Err(e) => reasons.push(format!("{name} failed: {e}")),
            }
        }
        if !reasons.is_empty() {
            tracing::warn!(
                "{}: running on the CPU execution provider: {}",
                path.display(),
                reasons.join("; ")
            );
        }
        let s = session(path, rt, opts, None).map_err(|e| {
            ModelError::model(path, format!("not a readable ONNX model: {}", one_line(&e)))
        })?;
        OnnxModel::new(path, s, ep::CPU::NAME)
    }

    fn new(path: &Path, session: Session, provider: &str) -> Result<OnnxModel, ModelError> {
        let inputs = session
            .inputs()
            .iter()
            .map(|o| TensorInfo::from_outlet(o.name(), o.dtype()))
            .collect();
        let outputs = session
            .outputs()
            .iter()
            .map(|o| TensorInfo::from_outlet(o.name(), o.dtype()))
            .collect();
        Ok(OnnxModel {
            path: path.to_path_buf(),
            session,
            inputs,
            outputs,
            provider: provider.to_string(),
        })
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The execution provider the session runs on.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// Whether the session runs on an accelerator's provider (not the CPU's).
    pub fn on_accelerator(&self) -> bool {
        self.provider != ep::CPU::NAME
    }

    /// The inputs as the file declares them.
    pub fn inputs(&self) -> &[TensorInfo] {
        &self.inputs
    }

    /// The outputs as the file declares them.
    pub fn outputs(&self) -> &[TensorInfo] {
        &self.outputs
    }

    /// Checks the contract: exactly the `inputs` given (by name, type and dimensions)
    /// and at least one output, whose first matches `first_output`. The error names the
    /// file and lists what the model has.
    pub fn check(
        &self,
        inputs: &[TensorSpec<'_>],
        first_output: &TensorSpec<'_>,
    ) -> Result<(), ModelError> {
        let have = |list: &[TensorInfo]| {
            list.iter()
                .map(TensorInfo::describe)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let want = inputs
            .iter()
            .map(TensorSpec::describe)
            .collect::<Vec<_>>()
            .join(", ");
        let names_ok = self.inputs.len() == inputs.len()
            && inputs
                .iter()
                .all(|s| self.inputs.iter().any(|t| Some(t.name.as_str()) == s.name));
        if !names_ok {
            return Err(ModelError::contract(
                &self.path,
                format!(
                    "the model's inputs are {} but the contract is {want}",
                    have(&self.inputs)
                ),
            ));
        }
        for s in inputs {
            let t = self
                .inputs
                .iter()
                .find(|t| Some(t.name.as_str()) == s.name)
                .expect("checked above");
            if !s.accepts(t) {
                return Err(ModelError::contract(
                    &self.path,
                    format!("input {} must be {}", t.describe(), s.describe()),
                ));
            }
        }
        let Some(out) = self.outputs.first() else {
            return Err(ModelError::contract(&self.path, "the model has no output"));
        };
        if !first_output.accepts(out) {
            return Err(ModelError::contract(
                &self.path,
                format!(
                    "the first output {} must be {}",
                    out.describe(),
                    first_output.describe()
                ),
            ));
        }
        Ok(())
    }

    /// Runs the model on `inputs` (by name) and returns the first output as float32:
    /// its shape and values.
    pub fn run(
        &mut self,
        inputs: &[(&str, Input<'_>)],
    ) -> Result<(Vec<usize>, Vec<f32>), ModelError> {
        let mut all = self.run_outputs(inputs, 1)?;
        let (_, shape, data) = all.swap_remove(0);
        Ok((shape, data))
    }

    /// Runs the model on `inputs` (by name) and returns every output as float32, in the
    /// model's order: name, shape and values (for models with several outputs, such as
    /// SAM's decoder).
    pub fn run_all(
        &mut self,
        inputs: &[(&str, Input<'_>)],
    ) -> Result<Vec<(String, Vec<usize>, Vec<f32>)>, ModelError> {
        let n = self.outputs.len();
        self.run_outputs(inputs, n)
    }

    fn run_outputs(
        &mut self,
        inputs: &[(&str, Input<'_>)],
        count: usize,
    ) -> Result<Vec<(String, Vec<usize>, Vec<f32>)>, ModelError> {
        let run_err = |e: String| ModelError::Run {
            path: self.path.clone(),
            problem: e,
        };
        let mut values = Vec::with_capacity(inputs.len());
        for (name, input) in inputs {
            let v: ort::session::SessionInputValue<'_> = match *input {
                Input::F32(shape, data) => TensorRef::from_array_view((shape.to_vec(), data))
                    .map_err(|e| run_err(e.to_string()))?
                    .into(),
                Input::I64(shape, data) => TensorRef::from_array_view((shape.to_vec(), data))
                    .map_err(|e| run_err(e.to_string()))?
                    .into(),
            };
            values.push((std::borrow::Cow::Borrowed(*name), v));
        }
        let path = self.path.clone();
        let names: Vec<String> = self.outputs.iter().map(|o| o.name.clone()).collect();
        let outputs = self.session.run(values).map_err(|e| ModelError::Run {
            path: path.clone(),
            problem: one_line(&e.to_string()),
        })?;
        let mut out = Vec::with_capacity(count);
        for (i, name) in names.into_iter().enumerate().take(count) {
            let (shape, data) =
                outputs[i]
                    .try_extract_tensor::<f32>()
                    .map_err(|e| ModelError::Run {
                        path: path.clone(),
                        problem: format!("output `{name}` is not a float32 tensor: {e}"),
                    })?;
            let shape: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
            out.push((name, shape, data.to_vec()));
        }
        Ok(out)
    }
}

impl OnnxModel {
    /// Runs the model over the rows of `data` (each of `row_shape`), `batch` rows per
    /// run, as its input `input`; the first output must be `[b, D]` for a batch of b
    /// (the same D every run). Returns D and the `[rows, D]` outputs, calling
    /// `progress(done, rows)` before the first run and after each.
    pub fn run_batched_f32(
        &mut self,
        input: &str,
        data: &[f32],
        row_shape: &[usize],
        batch: usize,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(usize, Vec<f32>), ModelError> {
        self.batched(
            input,
            data,
            row_shape,
            batch,
            |s, d| Input::F32(s, d),
            progress,
        )
    }

    /// [`OnnxModel::run_batched_f32`] for an int64 input.
    pub fn run_batched_i64(
        &mut self,
        input: &str,
        data: &[i64],
        row_shape: &[usize],
        batch: usize,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(usize, Vec<f32>), ModelError> {
        self.batched(
            input,
            data,
            row_shape,
            batch,
            |s, d| Input::I64(s, d),
            progress,
        )
    }

    fn batched<T: Copy>(
        &mut self,
        input: &str,
        data: &[T],
        row_shape: &[usize],
        batch: usize,
        make: for<'a> fn(&'a [usize], &'a [T]) -> Input<'a>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(usize, Vec<f32>), ModelError> {
        let row_len: usize = row_shape.iter().product();
        if row_len == 0 || data.is_empty() || !data.len().is_multiple_of(row_len) {
            return Err(ModelError::Shape(format!(
                "{}: {} input values are not a whole number of rows of {row_shape:?}",
                self.path.display(),
                data.len()
            )));
        }
        let rows = data.len() / row_len;
        let (mut out, mut dim, mut done) = (Vec::new(), 0usize, 0usize);
        progress(0, rows);
        for chunk in data.chunks(batch.max(1) * row_len) {
            let b = chunk.len() / row_len;
            let mut shape = vec![b];
            shape.extend_from_slice(row_shape);
            let (oshape, values) = self.run(&[(input, make(&shape, chunk))])?;
            if oshape.len() != 2
                || oshape[0] != b
                || oshape[1] == 0
                || (dim != 0 && oshape[1] != dim)
            {
                return Err(ModelError::contract(
                    &self.path,
                    format!(
                        "the first output has shape {oshape:?} for a batch of {b}; the contract is [B, D]"
                    ),
                ));
            }
            dim = oshape[1];
            out.extend(values);
            done += b;
            progress(done, rows);
        }
        Ok((dim, out))
    }
}

/// The package that brings an execution provider.
fn install_hint(provider: &str) -> &'static str {
    if provider == ep::CUDA::NAME {
        "install `onnxruntime-gpu` for CUDA"
    } else {
        "install `onnxruntime-rocm` (or an ONNX Runtime built with MIGraphX) for AMD GPUs"
    }
}

/// Why the CPU runs instead of `provider`, which the runtime at `path` (offering
/// `offered`) lacks: worth a warning when the configuration named the accelerator, and
/// nothing with `device.backend = auto`, where a CPU-only runtime is the ordinary case
/// (it is then only logged at debug level).
fn missing_provider(
    accelerator: Accelerator,
    provider: &str,
    path: &Path,
    offered: &[String],
) -> Option<String> {
    if accelerator == Accelerator::Auto {
        tracing::debug!(
            "{provider} is not in the ONNX Runtime at {}",
            path.display()
        );
        return None;
    }
    Some(format!(
        "{provider} is not in the ONNX Runtime at {} (it has {}; {})",
        path.display(),
        offered.join(", "),
        install_hint(provider)
    ))
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A session on `provider` (then the CPU), or on the CPU alone.
fn session(
    path: &Path,
    rt: &Runtime,
    opts: &SessionOptions,
    provider: Option<&str>,
) -> Result<Session, String> {
    let mut b = Session::builder(&rt.env).map_err(|e| e.to_string())?;
    if opts.threads > 0 {
        b = b
            .with_intra_threads(opts.threads as usize)
            .map_err(|e| e.to_string())?;
    }
    let id = opts.ordinal as i32;
    let dispatch = match provider {
        Some(n) if n == ep::CUDA::NAME => Some(ep::CUDA::default().with_device_id(id).build()),
        Some(n) if n == ep::ROCm::NAME => Some(ep::ROCm::default().with_device_id(id).build()),
        Some(n) if n == ep::MIGraphX::NAME => {
            Some(ep::MIGraphX::default().with_device_id(id).build())
        }
        _ => None,
    };
    if let Some(d) = dispatch {
        b = b
            .with_execution_providers([d.error_on_failure()])
            .map_err(|e| e.to_string())?;
    }
    b.commit_from_file(path).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU-only runtime is worth a warning only when the configuration asked for an
    /// accelerator by name; `auto` falls back to the CPU quietly.
    #[test]
    fn a_missing_provider_is_named_only_when_it_was_asked_for() {
        let path = Path::new("/x/libonnxruntime.so.1.32.0");
        let offered = vec!["CPUExecutionProvider".to_string()];
        for name in Accelerator::Auto.providers() {
            assert_eq!(
                missing_provider(Accelerator::Auto, name, path, &offered),
                None
            );
        }
        let cuda = missing_provider(Accelerator::Cuda, ep::CUDA::NAME, path, &offered).unwrap();
        assert!(
            cuda.contains("CUDAExecutionProvider is not in the ONNX Runtime at /x/")
                && cuda.contains("it has CPUExecutionProvider")
                && cuda.contains("onnxruntime-gpu"),
            "{cuda}"
        );
        for name in Accelerator::Amd.providers() {
            let r = missing_provider(Accelerator::Amd, name, path, &offered).unwrap();
            assert!(r.contains("onnxruntime-rocm"), "{r}");
        }
        assert_eq!(
            Accelerator::from_backend(lsplat_core::config::BackendKind::Auto),
            Accelerator::Auto
        );
    }
}
