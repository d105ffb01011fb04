use std::path::PathBuf;

/// Errors of the query crate. Every variant names the file or input at fault.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// An I/O error on a file.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// A label file that cannot be used.
    #[error("{}: {problem}", path.display())]
    Labels {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// Inputs whose shapes do not agree.
    #[error("{0}")]
    Shape(String),
    /// An image that cannot be encoded.
    #[error("PNG encoding: {0}")]
    Png(String),
}

impl QueryError {
    /// A label-file error.
    pub fn labels(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        QueryError::Labels {
            path: path.into(),
            problem: problem.into(),
        }
    }
}
