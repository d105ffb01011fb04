//! NumPy arguments, checked: the dtype, the shape and C-contiguous strides, with errors
//! (`ValueError`, `TypeError`) that name the argument. Checked arrays are read in place
//! (no copy); results are handed to NumPy without a copy.

use numpy::{
    Element, PyArray1, PyArrayDescrMethods, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn,
    PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::errors::{Error, Result};

/// A dimension an argument must have: any size, or exactly this one (with what it
/// counts, for the message).
#[derive(Clone, Copy)]
pub enum Dim {
    /// Any size.
    Any,
    /// Exactly `n` (`what`: e.g. "Gaussians").
    Is(usize, &'static str),
}

/// Reads `obj` (the argument `arg`) as a C-contiguous NumPy array of `T` with `dims`
/// (`None`: any number of dimensions); returns it borrowed read-only with its shape.
pub fn array<'py, T: Element>(
    arg: &str,
    obj: &Bound<'py, PyAny>,
    dims: Option<&[Dim]>,
) -> Result<(PyReadonlyArrayDyn<'py, T>, Vec<usize>)> {
    let py = obj.py();
    let want = numpy::dtype::<T>(py);
    let Ok(untyped) = obj.cast::<PyUntypedArray>() else {
        return Err(Error::Type(format!(
            "{arg}: expected a numpy.ndarray of {} (or an object with __dlpack__), got {}",
            want.str().map_or_else(|_| "?".into(), |s| s.to_string()),
            obj.get_type()
                .name()
                .map_or_else(|_| "?".into(), |s| s.to_string())
        )));
    };
    let got = untyped.dtype();
    if !got.is_equiv_to(&want) {
        return Err(Error::Value(format!(
            "{arg}: dtype {}, expected {} (convert with .astype(numpy.{}))",
            got.str().map_or_else(|_| "?".into(), |s| s.to_string()),
            want.str().map_or_else(|_| "?".into(), |s| s.to_string()),
            want.str().map_or_else(|_| "?".into(), |s| s.to_string())
        )));
    }
    let shape = untyped.shape().to_vec();
    if let Some(dims) = dims {
        let fits = shape.len() == dims.len()
            && dims.iter().zip(&shape).all(|(d, &s)| match d {
                Dim::Any => true,
                Dim::Is(n, _) => *n == s,
            });
        if !fits {
            return Err(Error::Value(format!(
                "{arg}: shape {}, expected {}",
                tuple(&shape),
                describe(dims)
            )));
        }
    }
    if !untyped.is_c_contiguous() {
        return Err(Error::Value(format!(
            "{arg}: the array is not C-contiguous (shape {}, strides {}); pass numpy.ascontiguousarray({arg})",
            tuple(&shape),
            tuple(untyped.strides())
        )));
    }
    let typed = untyped
        .cast::<PyArrayDyn<T>>()
        .map_err(|e| Error::Value(format!("{arg}: {e}")))?;
    let ro = typed
        .try_readonly()
        .map_err(|e| Error::Value(format!("{arg}: {e}")))?;
    Ok((ro, shape))
}

/// The slice of a checked (C-contiguous) array.
pub fn slice<'a, T: Element>(arg: &str, a: &'a PyReadonlyArrayDyn<'_, T>) -> Result<&'a [T]> {
    a.as_slice()
        .map_err(|e| Error::Value(format!("{arg}: {e}")))
}

/// `(a, b, c)` of a shape or strides.
fn tuple<T: std::fmt::Display>(v: &[T]) -> String {
    match v {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `(N, 3) with N = 4000 Gaussians` for a shape pattern.
fn describe(dims: &[Dim]) -> String {
    const NAMES: [&str; 4] = ["A", "B", "C", "D"];
    let mut named = Vec::new();
    let parts: Vec<String> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| match d {
            Dim::Any => NAMES.get(i).copied().unwrap_or("_").to_string(),
            Dim::Is(n, "") => n.to_string(),
            Dim::Is(n, what) => {
                named.push(format!("{n} {what}"));
                n.to_string()
            }
        })
        .collect();
    let mut s = if parts.len() == 1 {
        format!("({},)", parts[0])
    } else {
        format!("({})", parts.join(", "))
    };
    if !named.is_empty() {
        s.push_str(&format!(" ({})", named.join(", ")));
    }
    s
}

/// `data` as a NumPy array of `shape`, without a copy (NumPy takes the vector).
pub fn to_numpy<'py, T: Element>(
    py: Python<'py>,
    data: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyArrayDyn<T>>> {
    PyArray1::from_vec(py, data).reshape(shape.to_vec())
}
