use std::path::PathBuf;

/// Errors of the data crate. Every variant names the file (or item) and the problem.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// An I/O error on a file. (The error is part of the message, not a chained
    /// source, so reports print it once.)
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
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
    /// A camera uses a lens model with distortion, which the rasterizer cannot model.
    #[error(
        "{}: camera {camera} uses the distorted model {model}; only PINHOLE and SIMPLE_PINHOLE are supported, undistort first (e.g. `colmap image_undistorter`)",
        path.display()
    )]
    DistortedCamera {
        path: PathBuf,
        camera: String,
        model: String,
    },
    /// Camera names and the images of a label source do not match one to one.
    #[error(
        "{}: cameras and labelled images differ; cameras without labels: [{}]; labelled images without a camera: [{}]",
        path.display(),
        no_labels.join(", "),
        no_camera.join(", ")
    )]
    NameMismatch {
        path: PathBuf,
        no_labels: Vec<String>,
        no_camera: Vec<String>,
    },
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
            error: source,
        }
    }
}
