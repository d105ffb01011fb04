//! What a model's inputs and outputs are ([`TensorInfo`], as the file declares them)
//! and what a contract requires of them ([`TensorSpec`]).

use ort::value::{TensorElementType, ValueType};

/// Element types the contracts use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    /// 32-bit float.
    F32,
    /// 64-bit integer.
    I64,
}

impl DType {
    fn of(t: TensorElementType) -> Option<DType> {
        match t {
            TensorElementType::Float32 => Some(DType::F32),
            TensorElementType::Int64 => Some(DType::I64),
            _ => None,
        }
    }

    /// The ONNX name (`float32`, `int64`).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::I64 => "int64",
        }
    }
}

/// A model input or output as the file declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name.
    pub name: String,
    /// Element type; `None` for types the engine does not use (named in `type_name`).
    pub dtype: Option<DType>,
    /// The element type as ONNX Runtime names it.
    pub type_name: String,
    /// Dimensions; `None` where the model leaves one free (a symbolic batch size).
    pub dims: Option<Vec<Option<usize>>>,
}

impl TensorInfo {
    pub(crate) fn from_outlet(name: &str, t: &ValueType) -> TensorInfo {
        match t {
            ValueType::Tensor { ty, shape, .. } => TensorInfo {
                name: name.to_string(),
                dtype: DType::of(*ty),
                type_name: format!("{ty:?}"),
                dims: Some(
                    shape
                        .iter()
                        .map(|&d| if d >= 0 { Some(d as usize) } else { None })
                        .collect(),
                ),
            },
            other => TensorInfo {
                name: name.to_string(),
                dtype: None,
                type_name: format!("{other:?}"),
                dims: None,
            },
        }
    }

    /// `name: float32 [B, 3, 224, 224]` (free dimensions as `?`).
    pub fn describe(&self) -> String {
        let dims = match &self.dims {
            Some(d) => d
                .iter()
                .map(|x| x.map_or("?".to_string(), |v| v.to_string()))
                .collect::<Vec<_>>()
                .join(", "),
            None => "not a tensor".into(),
        };
        let ty = self.dtype.map_or(self.type_name.as_str(), |d| d.name());
        format!("`{}`: {ty} [{dims}]", self.name)
    }
}

/// What a contract requires of a tensor: its name (for inputs), type and dimensions
/// (`None` = any size, e.g. the batch).
#[derive(Clone, Debug)]
pub struct TensorSpec<'a> {
    /// Required name; `None` = any (outputs are taken by position).
    pub name: Option<&'a str>,
    /// Element type.
    pub dtype: DType,
    /// Dimensions; `None` entries accept any size (fixed or free in the model).
    pub dims: &'a [Option<usize>],
}

impl TensorSpec<'_> {
    pub(crate) fn describe(&self) -> String {
        let dims = self
            .dims
            .iter()
            .map(|x| x.map_or("B".to_string(), |v| v.to_string()))
            .collect::<Vec<_>>()
            .join(", ");
        match self.name {
            Some(n) => format!("`{n}`: {} [{dims}]", self.dtype.name()),
            None => format!("{} [{dims}]", self.dtype.name()),
        }
    }

    /// Whether `t` satisfies the spec (names aside).
    pub(crate) fn accepts(&self, t: &TensorInfo) -> bool {
        t.dtype == Some(self.dtype)
            && t.dims.as_ref().is_some_and(|d| {
                d.len() == self.dims.len()
                    && d.iter()
                        .zip(self.dims)
                        .all(|(have, want)| match (have, want) {
                            (_, None) | (None, Some(_)) => true,
                            (Some(h), Some(w)) => h == w,
                        })
            })
    }
}
