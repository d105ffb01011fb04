//! The `lsplat` Python package's native module (`lsplat._lsplat`): a thin layer over
//! the engine's crates. Scenes load through `lsplat-data` as the command-line tool
//! loads them, `solve` and `train` run the engine's `Session`, `render` the views the
//! CLI's `render` writes, `operator` the CPU operator, `relevancy` `lsplat-query`'s,
//! `preprocess` and `text_embeddings` run SAM and CLIP through `lsplat-prep` and
//! `lsplat-models` (ONNX Runtime), and `Run` reads a run directory with
//! `lsplat-plugins`' reader. The GIL is released
//! while the engine works. The Python layer (`python/lsplat/__init__.py`) adds the
//! documented signatures, DLPack inputs, tqdm progress and SciPy matrices.

mod arrays;
mod camera;
mod errors;
mod fit;
mod inputs;
mod prep;
mod query;
mod render;
mod run;
mod scene;

use pyo3::prelude::*;

#[pymodule]
fn _lsplat(m: &Bound<'_, PyModule>) -> PyResult<()> {
    scene::register(m)?;
    m.add_class::<run::Run>()?;
    m.add_function(wrap_pyfunction!(fit::solve, m)?)?;
    m.add_function(wrap_pyfunction!(fit::train, m)?)?;
    m.add_function(wrap_pyfunction!(render::render, m)?)?;
    m.add_function(wrap_pyfunction!(render::operator, m)?)?;
    m.add_function(wrap_pyfunction!(query::relevancy, m)?)?;
    m.add_function(wrap_pyfunction!(prep::preprocess, m)?)?;
    m.add_function(wrap_pyfunction!(prep::text_embeddings, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("DEMO_SCENE", lsplat_data::demo::DEMO_SCENE)?;
    Ok(())
}
