//! The viewer's errors.

use std::path::PathBuf;

/// Errors of the viewer. Each names the run, file or request at fault.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// A run folder that cannot be shown.
    #[error("{}: {problem}", path.display())]
    Run {
        /// The folder.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A request from a page that makes no sense (an unknown run or level, a camera
    /// of zero size, a query the text source cannot embed).
    #[error("{0}")]
    Request(String),
    /// A server setting that makes no sense, or an address that cannot be bound.
    #[error("{0}")]
    Server(String),
    /// Reading a run's files.
    #[error(transparent)]
    Data(#[from] lsplat_data::DataError),
    /// Lifting or scoring features.
    #[error(transparent)]
    Query(#[from] lsplat_query::QueryError),
    /// The autoencoder.
    #[error(transparent)]
    Autoencoder(#[from] lsplat_ae::AeError),
    /// Rendering on the device.
    #[error(transparent)]
    Device(#[from] lsplat_device::DeviceError),
    /// Encoding a frame.
    #[error("encoding a frame: {0}")]
    Encode(String),
    /// The network.
    #[error("{what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        error: std::io::Error,
    },
}

impl ViewError {
    /// A run error.
    pub fn run(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        ViewError::Run {
            path: path.into(),
            problem: problem.into(),
        }
    }
}

/// The viewer's result.
pub type Result<T, E = ViewError> = std::result::Result<T, E>;
