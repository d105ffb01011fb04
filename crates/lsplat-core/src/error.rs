use std::path::PathBuf;

/// Errors of the core crate: validation of Gaussians, cameras and configuration.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// A per-Gaussian array does not have the expected length.
    #[error("gaussians: `{field}` has {got} entries, expected {expected}")]
    GaussianLength {
        field: &'static str,
        got: usize,
        expected: usize,
    },
    /// A per-Gaussian value is NaN or infinite.
    #[error("gaussians: `{field}` of gaussian {index} is not finite ({value})")]
    NonFinite {
        field: &'static str,
        index: usize,
        value: f32,
    },
    /// A buffer cannot fit in memory.
    #[error(
        "{what}: {} (lower the image size, the number of cameras or the batch)",
        match (bytes, available) {
            (Some(b), Some(a)) => format!("needs {} but only {} of memory is available", crate::memory::gb(*b), crate::memory::gb(*a)),
            (Some(b), None) => format!("cannot allocate {}", crate::memory::gb(*b)),
            (None, _) => "is too large to address".to_string(),
        }
    )]
    OutOfMemory {
        what: String,
        bytes: Option<u64>,
        available: Option<u64>,
    },
    /// A camera is unusable.
    #[error("camera `{name}`: {problem}")]
    Camera { name: String, problem: String },
    /// A configuration key does not exist.
    #[error("unknown configuration key `{key}`{hint}")]
    UnknownKey { key: String, hint: String },
    /// A configuration value has the wrong type or is out of range.
    #[error("configuration `{key}`: {problem}")]
    BadValue { key: String, problem: String },
    /// A configuration file could not be parsed.
    #[error("{}: {problem}", path.display())]
    ConfigFile { path: PathBuf, problem: String },
}
