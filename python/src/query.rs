//! `relevancy`: LangSplat's relevancy of rendered features for text queries, as
//! `lsplat-engine query` scores a run whose features are in the text space.

use std::path::{Path, PathBuf};

use lsplat_data::embeddings::{TextEmbeddings, read_embeddings};
use lsplat_query::{CANONICAL, normalize_rows, relevancy as score};
use pyo3::prelude::*;

use crate::arrays::{Dim, array, slice, to_numpy};
use crate::errors::{Error, Result};

/// Pixels scored at once (as `lsplat-engine query`).
const CHUNK: usize = 8192;

/// Text embeddings from a file, or from names and `[P, D]` rows.
fn text(obj: &Bound<'_, PyAny>) -> Result<TextEmbeddings> {
    if let Ok(path) = obj.extract::<PathBuf>() {
        return Ok(read_embeddings(&path)?);
    }
    let (names, rows): (Vec<String>, Bound<'_, PyAny>) = obj.extract().map_err(|_| {
        Error::Type(
            "text_embeddings: expected a file path (.parquet, or .npy with its .txt) or a dict {phrase: vector}".into(),
        )
    })?;
    let arg = "text_embeddings";
    let (a, shape) = array::<f32>(
        arg,
        &rows,
        Some(&[Dim::Is(names.len(), "phrases"), Dim::Any]),
    )?;
    Ok(TextEmbeddings::from_rows(
        Path::new("<text_embeddings>"),
        names,
        shape[1],
        slice(arg, &a)?.to_vec(),
    )?)
}

/// Relevancy `[..., Q]` of `[..., D]` features for each query phrase against the
/// canonical phrases ("object", "things", "stuff", "texture").
#[pyfunction]
#[pyo3(signature = (features, text_embeddings, queries=None))]
pub fn relevancy<'py>(
    py: Python<'py>,
    features: &Bound<'py, PyAny>,
    text_embeddings: &Bound<'py, PyAny>,
    queries: Option<Vec<String>>,
) -> Result<(Bound<'py, PyAny>, Vec<String>)> {
    let text = text(text_embeddings)?;
    let queries: Vec<String> = match queries {
        Some(q) => q,
        None => text
            .names
            .iter()
            .filter(|n| !CANONICAL.contains(&n.as_str()))
            .cloned()
            .collect(),
    };
    if queries.is_empty() {
        return Err(Error::Value(format!(
            "queries: none given, and {} holds no phrase besides the canonical ones",
            text.path.display()
        )));
    }
    let (pos, neg) = text.query_rows(&queries, &CANONICAL)?;
    let q = queries.len();
    let (f, shape) = array::<f32>("features", features, None)?;
    let d = text.dim;
    if shape.last() != Some(&d) {
        return Err(Error::Value(format!(
            "features: shape {shape:?}, expected (..., {d}) (the text embeddings are {d}-D)"
        )));
    }
    let x = slice("features", &f)?;
    let rel = py.detach(|| -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(x.len() / d * q);
        for chunk in x.chunks(CHUNK * d) {
            let mut unit = chunk.to_vec();
            normalize_rows(&mut unit, d);
            out.extend(score(&unit, d, &pos, &neg).map_err(|e| Error::Value(e.to_string()))?);
        }
        Ok(out)
    })?;
    let mut out_shape = shape[..shape.len() - 1].to_vec();
    out_shape.push(queries.len());
    Ok((to_numpy(py, rel, &out_shape)?.into_any(), queries))
}
