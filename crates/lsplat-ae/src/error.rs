use std::path::PathBuf;

/// Errors of the autoencoder crate.
#[derive(Debug, thiserror::Error)]
pub enum AeError {
    /// An I/O error on a model file.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// A model file is malformed or describes an unusable network.
    #[error("{}: {problem}", path.display())]
    Model {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// Data of the wrong width for a model.
    #[error("{what} is {got}-D but the autoencoder expects {want}-D")]
    Width {
        /// What was given (e.g. "the dataset's features").
        what: String,
        /// Its width.
        got: usize,
        /// The model's width.
        want: usize,
    },
    /// A setting that makes no sense.
    #[error("autoencoder settings: {0}")]
    Config(String),
    /// Training data that cannot be used.
    #[error("training data: {0}")]
    Data(String),
}

impl AeError {
    /// A model-file error.
    pub fn model(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        AeError::Model {
            path: path.into(),
            problem: problem.into(),
        }
    }
}
