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
