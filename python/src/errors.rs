//! The engine's errors as the package's Python exceptions (`lsplat.errors`), each
//! carrying the engine's message.

use lsplat_core::CoreError;
use lsplat_data::DataError;
use lsplat_device::DeviceError;
use lsplat_engine::EngineError;
use lsplat_models::ModelError;
use lsplat_prep::PrepError;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// An error of a call into the engine, before it becomes a Python exception.
#[derive(Debug)]
pub enum Error {
    /// A configuration value that makes no sense (`lsplat.ConfigError`).
    Config(String),
    /// An input file or data that cannot be used (`lsplat.DataError`).
    Data(String),
    /// A device failed (`lsplat.DeviceError`).
    Device(String),
    /// Training diverged at `step` (`lsplat.DivergedError`).
    Diverged {
        /// The engine's message.
        message: String,
        /// 0-based step.
        step: u64,
    },
    /// Any other engine failure (`lsplat.LsplatError`).
    Engine(String),
    /// A bad argument (`ValueError`), naming it.
    Value(String),
    /// An argument of the wrong type (`TypeError`), naming it.
    Type(String),
    /// A Python exception raised while the engine ran (a callback's).
    Python(PyErr),
}

impl From<EngineError> for Error {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Device(d) => d.into(),
            EngineError::Data(d) => d.into(),
            EngineError::Config(_) => Error::Config(e.to_string()),
            EngineError::NonFinite { step, .. } => Error::Diverged {
                message: e.to_string(),
                step,
            },
            other => Error::Engine(other.to_string()),
        }
    }
}

impl From<DataError> for Error {
    fn from(e: DataError) -> Self {
        match e {
            DataError::Core(c) => c.into(),
            other => Error::Data(other.to_string()),
        }
    }
}

impl From<DeviceError> for Error {
    fn from(e: DeviceError) -> Self {
        Error::Device(e.to_string())
    }
}

impl From<CoreError> for Error {
    fn from(e: CoreError) -> Self {
        match e {
            CoreError::UnknownKey { .. }
            | CoreError::BadValue { .. }
            | CoreError::ConfigFile { .. } => Error::Config(e.to_string()),
            CoreError::OutOfMemory { .. } => Error::Device(e.to_string()),
            other => Error::Data(other.to_string()),
        }
    }
}

impl From<PrepError> for Error {
    fn from(e: PrepError) -> Self {
        match e {
            PrepError::Config(_) => Error::Config(e.to_string()),
            PrepError::Data(d) => d.into(),
            PrepError::Models(m) => m.into(),
            PrepError::Io { .. } | PrepError::Image { .. } | PrepError::Model { .. } => {
                Error::Data(e.to_string())
            }
        }
    }
}

impl From<ModelError> for Error {
    fn from(e: ModelError) -> Self {
        match e {
            // The model files and their inputs are the call's data; finding, loading
            // or running ONNX Runtime is the engine's business.
            ModelError::ModelFile { .. }
            | ModelError::Contract { .. }
            | ModelError::Vocab { .. }
            | ModelError::Image { .. }
            | ModelError::Io { .. } => Error::Data(e.to_string()),
            ModelError::Query(_) | ModelError::Shape(_) => Error::Value(e.to_string()),
            other => Error::Engine(other.to_string()),
        }
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Error::Python(e)
    }
}

/// Makes an instance of `lsplat.errors.<class>` with `message`.
fn raise(py: Python<'_>, class: &str, message: String) -> PyResult<PyErr> {
    let cls = py.import("lsplat.errors")?.getattr(class)?;
    Ok(PyErr::from_value(cls.call1((message,))?))
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        Python::attach(|py| {
            let (class, message) = match e {
                Error::Value(m) => return PyValueError::new_err(m),
                Error::Type(m) => return PyTypeError::new_err(m),
                Error::Python(err) => return err,
                Error::Diverged { message, step } => {
                    let made = raise(py, "DivergedError", message.clone()).and_then(|err| {
                        err.value(py).setattr("step", step)?;
                        Ok(err)
                    });
                    return made.unwrap_or_else(|_| PyRuntimeError::new_err(message));
                }
                Error::Config(m) => ("ConfigError", m),
                Error::Data(m) => ("DataError", m),
                Error::Device(m) => ("DeviceError", m),
                Error::Engine(m) => ("LsplatError", m),
            };
            raise(py, class, message.clone()).unwrap_or_else(|_| PyRuntimeError::new_err(message))
        })
    }
}

/// Results of calls into the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;
