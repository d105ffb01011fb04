//! The crate's one error type.

use std::path::PathBuf;

/// Errors of the model layer. Every variant names the file (library, model, vocabulary,
/// image) at fault, or the input that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// No ONNX Runtime library was found.
    #[error(
        "no ONNX Runtime library found (looked in: {}). Install one: `pip install onnxruntime` (CPU), `onnxruntime-gpu` (CUDA) or `onnxruntime-rocm` (AMD) into the active Python environment or the repository's .venv, or a system libonnxruntime.so; or name it with `onnx.runtime` in the configuration or ORT_DYLIB_PATH",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    RuntimeNotFound {
        /// Every place searched, in order.
        looked: Vec<PathBuf>,
    },
    /// A library that is not a usable ONNX Runtime.
    #[error("{}: not a usable ONNX Runtime library: {problem}", path.display())]
    RuntimeLoad {
        /// The library.
        path: PathBuf,
        /// What went wrong.
        problem: String,
    },
    /// A second, different ONNX Runtime library asked for in the same process.
    #[error(
        "{}: ONNX Runtime is already loaded from {} in this process (a process can load only one)",
        requested.display(),
        loaded.display()
    )]
    RuntimeConflict {
        /// The library loaded first.
        loaded: PathBuf,
        /// The library asked for now.
        requested: PathBuf,
    },
    /// A model file that is missing or cannot be read as an ONNX model.
    #[error("{}: {problem}", path.display())]
    ModelFile {
        /// The model file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A model whose inputs or outputs are not what its contract says.
    #[error("{}: {problem} (docs/formats.md, CLIP models)", path.display())]
    Contract {
        /// The model file.
        path: PathBuf,
        /// What differs.
        problem: String,
    },
    /// ONNX Runtime failed while running a model.
    #[error("{}: running the model failed: {problem}", path.display())]
    Run {
        /// The model file.
        path: PathBuf,
        /// ONNX Runtime's message.
        problem: String,
    },
    /// A vocabulary file that is missing or not CLIP's.
    #[error("{}: {problem}", path.display())]
    Vocab {
        /// The vocabulary file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// An image that cannot be decoded or used.
    #[error("{}: {problem}", path.display())]
    Image {
        /// The image file (or a description of an in-memory image).
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A text query that cannot be encoded.
    #[error("{0}")]
    Query(String),
    /// Inputs whose sizes do not agree.
    #[error("{0}")]
    Shape(String),
    /// An I/O error on a file.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
}

impl ModelError {
    /// A model-file error.
    pub fn model(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        ModelError::ModelFile {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// A contract error.
    pub fn contract(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        ModelError::Contract {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// A vocabulary error.
    pub fn vocab(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        ModelError::Vocab {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// An image error.
    pub fn image(path: impl Into<PathBuf>, problem: impl Into<String>) -> Self {
        ModelError::Image {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// An I/O error.
    pub fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        ModelError::Io {
            path: path.into(),
            error,
        }
    }
}
