use std::path::PathBuf;

/// Errors of the data crate. Every variant names the file (or item) and the problem.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// An I/O error on a file.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file's content is malformed.
    #[error("{}: {problem}", path.display())]
    Format { path: PathBuf, problem: String },
    /// Labels of an image are inconsistent.
    #[error("labels of `{image}`: {problem}")]
    Labels { image: String, problem: String },
    /// A scene is inconsistent (cameras vs labels vs Gaussians).
    #[error("scene: {0}")]
    Scene(String),
    /// A core validation error.
    #[error(transparent)]
    Core(#[from] lsplat_core::CoreError),
}

impl DataError {
    /// A format error for `path`.
    pub fn format(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        DataError::Format {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// An I/O error for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DataError::Io {
            path: path.into(),
            source,
        }
    }
}
