//! `preprocess` and `text_embeddings`: images to LangSplat's language features (SAM
//! masks, mask NMS, CLIP features) and phrases to CLIP text embeddings, through ONNX
//! Runtime as `lsplat-engine preprocess` and `embed` run them, without the GIL.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use lsplat_core::Config;
use lsplat_models::{ClipModel, ClipText, SessionOptions};
use lsplat_prep::image::Resolution;
use lsplat_prep::onnx::OnnxModels;
use lsplat_prep::run::{FEATURES_DIR, Progress, check_images, list_images};
use lsplat_query::CANONICAL;
use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyBool, PyDict};

use crate::arrays::to_numpy;
use crate::errors::{Error, Result};

/// The default configuration with `config`'s `key=value` overrides, checked.
fn settings(config: &[String]) -> Result<Config> {
    let mut cfg = Config::default();
    for s in config {
        cfg.set(s)?;
    }
    cfg.resolve_paths(Path::new("."));
    cfg.validate()?;
    Ok(cfg)
}

/// Images in `images` (PNG, JPEG) to `out/language_features/` (`lsplat-engine
/// preprocess`); `callback(done, total, image)` after each image may return False to
/// stop there. Ctrl-C stops after the image in progress (a later call resumes).
#[pyfunction]
#[pyo3(signature = (images, out, sam, clip, resolution=-1, dataset=None, config=Vec::new(), callback=None))]
#[allow(clippy::too_many_arguments)]
pub fn preprocess<'py>(
    py: Python<'py>,
    images: PathBuf,
    out: PathBuf,
    sam: PathBuf,
    clip: PathBuf,
    resolution: i64,
    dataset: Option<PathBuf>,
    config: Vec<String>,
    callback: Option<Py<PyAny>>,
) -> Result<Bound<'py, PyDict>> {
    let cfg = settings(&config)?;
    let res = Resolution::from_arg(resolution).map_err(|e| Error::Value(e.to_string()))?;
    if let Some(cb) = &callback
        && !cb.bind(py).is_callable()
    {
        return Err(Error::Type(
            "callback: expected a callable (done, total, image)".into(),
        ));
    }
    let (list, mut models) = py.detach(|| -> Result<_> {
        let list = list_images(&images)?;
        check_images(&list)?;
        Ok((list, OnnxModels::load(&sam, &clip, &cfg)?))
    })?;
    // A Python error raised in the callback (or Ctrl-C) stops the run; it is raised
    // once the images written so far are closed.
    let mut raised: Option<PyErr> = None;
    let mut report = |p: &Progress| {
        Python::attach(|py| {
            if let Err(e) = py.check_signals() {
                raised = Some(e);
                return ControlFlow::Break(());
            }
            let Some(cb) = &callback else {
                return ControlFlow::Continue(());
            };
            match cb.bind(py).call1((p.done, p.total, p.last.clone())) {
                Ok(v) if v.cast::<PyBool>().is_ok_and(|b| !b.is_true()) => ControlFlow::Break(()),
                Ok(_) => ControlFlow::Continue(()),
                Err(e) => {
                    raised = Some(e);
                    ControlFlow::Break(())
                }
            }
        })
    };
    let summary = py.detach(|| {
        lsplat_prep::run::preprocess(
            &list,
            &out,
            res,
            &cfg.preprocess,
            &mut models.models(),
            &mut report,
        )
    })?;
    if let Some(e) = raised {
        return Err(Error::Python(e));
    }
    let features = out.join(FEATURES_DIR);
    let imported = match (&dataset, summary.stopped) {
        (Some(ds), false) => {
            py.detach(|| lsplat_data::dataset::import_langsplat(&features, ds))?;
            true
        }
        _ => false,
    };
    let d = PyDict::new(py);
    d.set_item("images", summary.images)?;
    d.set_item("processed", summary.processed)?;
    d.set_item("stopped", summary.stopped)?;
    d.set_item("masks", summary.masks.to_vec())?;
    d.set_item("features_dir", features)?;
    d.set_item("dataset", if imported { dataset } else { None })?;
    let t = summary.timings;
    let seconds = [
        ("encoder", t.encoder),
        ("decoder", t.decoder),
        ("masks", t.masks),
        ("nms", t.nms),
        ("cleanup", t.cleanup),
        ("clip", t.clip),
        ("total", t.total()),
    ];
    d.set_item("seconds", seconds.into_py_dict(py)?)?;
    let work = [
        ("encoder_runs", t.encoder_runs),
        ("prompts", t.prompts),
        ("clip_crops", t.clip_crops),
        ("clip_reused", t.clip_reused),
    ];
    d.set_item("work", work.into_py_dict(py)?)?;
    Ok(d)
}

/// CLIP text embeddings (unit rows) of the canonical phrases followed by `phrases`
/// (each once): their names and a `[P, D]` array (`lsplat-engine embed`).
#[pyfunction]
#[pyo3(signature = (clip, phrases, config=Vec::new()))]
pub fn text_embeddings<'py>(
    py: Python<'py>,
    clip: PathBuf,
    phrases: Vec<String>,
    config: Vec<String>,
) -> Result<(Vec<String>, Bound<'py, PyAny>)> {
    let cfg = settings(&config)?;
    if let Some(p) = phrases.iter().find(|p| p.trim().is_empty()) {
        return Err(Error::Value(format!("phrases: an empty phrase {p:?}")));
    }
    let mut names: Vec<String> = CANONICAL.iter().map(|s| s.to_string()).collect();
    for p in phrases {
        if !names.contains(&p) {
            names.push(p);
        }
    }
    let (dim, values) = py.detach(|| -> Result<_> {
        let rt = lsplat_models::runtime::load(cfg.onnx.runtime.as_deref())?;
        let model = ClipModel::at(&clip, cfg.models.clip_vocab.as_deref())?;
        let mut enc = ClipText::load(&model, rt, &SessionOptions::from_device(&cfg.device))?;
        enc.batch = cfg.models.batch as usize;
        let texts: Vec<&str> = names.iter().map(String::as_str).collect();
        Ok(enc.encode(&texts, &mut |_, _| {})?)
    })?;
    let n = names.len();
    Ok((names, to_numpy(py, values, &[n, dim])?.into_any()))
}
