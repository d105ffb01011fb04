/// Errors of a device.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The backend was not compiled into this binary.
    #[error("the `{backend}` backend is not compiled in{}", build_hint(backend))]
    NotCompiled { backend: &'static str },
    /// The backend is compiled in but cannot be used here.
    #[error("the `{backend}` backend is unavailable: {reason}")]
    Unavailable {
        backend: &'static str,
        reason: String,
    },
    /// An allocation failed.
    #[error(
        "out of device memory allocating {:.2} GB (lower the image size, the number of cameras, the batch or render.cache_budget)",
        *bytes as f64 / 1e9
    )]
    OutOfMemory { bytes: usize },
    /// Buffers given to an op do not fit together.
    #[error("{op}: {problem}")]
    Shape { op: &'static str, problem: String },
    /// A kernel failed to compile or launch.
    #[error("kernel `{kernel}`: {message}")]
    Kernel { kernel: String, message: String },
    /// An operator could not be spilled to disk (the message names the folder and
    /// says when the disk is full).
    #[error("spilling an operator: {0}")]
    Spill(String),
    /// The driver reported an error.
    #[error("{backend} driver: {message}")]
    Driver {
        backend: &'static str,
        message: String,
    },
}

fn build_hint(backend: &str) -> &'static str {
    match backend {
        "cuda" => " (build with `--features cuda`)",
        "hip" => " (build with `--features hip`)",
        _ => "",
    }
}

impl DeviceError {
    /// A shape error for `op`.
    pub fn shape(op: &'static str, problem: impl Into<String>) -> Self {
        DeviceError::Shape {
            op,
            problem: problem.into(),
        }
    }
}
