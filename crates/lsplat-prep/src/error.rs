use std::path::PathBuf;

/// Errors of the preprocessing crate.
#[derive(Debug, thiserror::Error)]
pub enum PrepError {
    /// An I/O error on a file or folder.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// An input image that cannot be used (unreadable, truncated, wrong size).
    #[error("{}: {problem}", path.display())]
    Image {
        /// The image file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A model that does not meet its contract (wrong inputs, outputs or shapes).
    #[error("{model}: {problem}")]
    Model {
        /// The model (usually its file).
        model: String,
        /// What is wrong.
        problem: String,
    },
    /// A setting that makes no sense.
    #[error("preprocess settings: {0}")]
    Config(String),
    /// An error of the data crate (writing outputs, importing a dataset).
    #[error(transparent)]
    Data(#[from] lsplat_data::DataError),
    /// An error of the model layer (ONNX Runtime, model files, runs).
    #[error(transparent)]
    Models(#[from] lsplat_models::ModelError),
}

impl PrepError {
    /// An image error.
    pub fn image(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        PrepError::Image {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// A model-contract error.
    pub fn model(model: impl Into<String>, problem: impl Into<String>) -> Self {
        PrepError::Model {
            model: model.into(),
            problem: problem.into(),
        }
    }

    /// An I/O error.
    pub fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        PrepError::Io {
            path: path.into(),
            error,
        }
    }
}
