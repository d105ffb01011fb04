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
    /// A run that cannot answer as asked (its features, its decoder, a model given
    /// for it).
    #[error("run {} {problem}", path.display())]
    Run {
        /// The run directory.
        path: PathBuf,
        /// What is wrong, as a sentence after the run's name.
        problem: String,
    },
    /// Text embeddings that do not fit the run or the request.
    #[error("{}: {problem}", path.display())]
    Text {
        /// The embeddings file (or the encoder's folder).
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A file the query reads (embeddings, run outputs).
    #[error(transparent)]
    Data(#[from] lsplat_data::DataError),
    /// The autoencoder (its file, or codes of the wrong width).
    #[error(transparent)]
    Autoencoder(#[from] lsplat_ae::AeError),
    /// Rendering on the device.
    #[error(transparent)]
    Device(#[from] lsplat_device::DeviceError),
}

impl QueryError {
    /// A run error: `problem` follows "run <path>".
    pub fn run(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        QueryError::Run {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// A text-embeddings error.
    pub fn text(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        QueryError::Text {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// A label-file error.
    pub fn labels(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        QueryError::Labels {
            path: path.into(),
            problem: problem.into(),
        }
    }
}
