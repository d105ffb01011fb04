//! The plugins the `lsplat-engine` binary and the Python package link, by the names
//! configurations use: models (`train.model`), losses (`train.loss_plugin`), the checks
//! that refuse unknown names and combinations that make no sense, and the reader of a
//! finished run by the model that wrote it.

use std::sync::Arc;

use lsplat_core::Config;
use lsplat_core::config::{LossKind, SolverKind};
use lsplat_data::DataError;
use lsplat_device::Backend;
use lsplat_engine::{EngineError, Model, PixelLoss};

/// A configuration error (the checks' only kind).
fn bail<T>(msg: String) -> Result<T, EngineError> {
    Err(EngineError::Config(msg))
}

/// The built-in model's name.
pub const BUILT_IN_MODEL: &str = "langsplat";

/// `(name, crate, what)` of every model: `train.model`.
pub const MODELS: [(&str, &str, &str); 2] = [
    (
        BUILT_IN_MODEL,
        "built in",
        "LangSplat V1: one feature per Gaussian",
    ),
    (
        langsplat_v2::model::NAME,
        "plugins/langsplat-v2",
        "LangSplatV2: top-4 sparse codes over a 64-entry codebook, 512-D decode",
    ),
];

/// `(name, crate, what)` of every plugin loss: `train.loss_plugin`.
pub const LOSSES: [(&str, &str, &str); 1] = [(
    robust_cosine::NAME,
    "plugins/robust-cosine",
    "Cauchy-robust cosine (example plugin with its own kernel)",
)];

fn names(list: &[(&str, &str, &str)]) -> String {
    list.iter()
        .map(|(n, ..)| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a finished run with the output reader of the model that wrote it
/// (`features.npy` for the built-in model).
pub fn load_run(dir: &std::path::Path) -> Result<lsplat_data::run_dir::RunInputs, DataError> {
    lsplat_data::run_dir::load_run_with(dir, &|dir, cfg| {
        if cfg.train.model == langsplat_v2::model::NAME {
            langsplat_v2::outputs::read_run(dir)
        } else {
            lsplat_data::run_dir::read_features_npy(dir)
        }
    })
}

/// Refuses unknown model or loss names and combinations that make no sense, before
/// anything is loaded or written.
pub fn check(cfg: &Config) -> Result<(), EngineError> {
    let model = cfg.train.model.as_str();
    if !MODELS.iter().any(|(n, ..)| *n == model) {
        return bail(format!(
            "train.model = {model:?}: no linked plugin provides it (models: {})",
            names(&MODELS)
        ));
    }
    let loss = cfg.train.loss_plugin.as_str();
    if !loss.is_empty() && !LOSSES.iter().any(|(n, ..)| *n == loss) {
        return bail(format!(
            "train.loss_plugin = {loss:?}: no linked plugin provides it (losses: {})",
            names(&LOSSES)
        ));
    }
    if model != BUILT_IN_MODEL {
        if !loss.is_empty() {
            return bail(format!(
                "train.loss_plugin = {loss:?} applies to the built-in model; train.model = {model} has its own loss"
            ));
        }
        if cfg.train.solver != SolverKind::Adam {
            return bail(format!(
                "train.model = {model} is trained by gradient steps: train.solver must be adam, not {}",
                cfg.train.solver.name()
            ));
        }
    }
    Ok(())
}

/// Refuses a dataset the configured model cannot train (after loading it, before the
/// run directory is made).
pub fn check_dataset(cfg: &Config, scene: &lsplat_data::SceneData) -> Result<(), EngineError> {
    const CLIP_WIDTH: usize = 128;
    let dim = scene.dim();
    if cfg.train.model == langsplat_v2::model::NAME
        && let Err(e) = langsplat_v2::model::check_scene(scene)
    {
        return bail(format!("train.model = {}: {e}", langsplat_v2::model::NAME));
    }
    // LangSplat V1's recipe (unit-normalised features, masked L1) is for the
    // autoencoder's low-dimensional codes; other losses on wide features (e.g. cosine
    // without normalisation) stay allowed.
    let v1_recipe = cfg.train.normalize && cfg.train.loss == LossKind::MaskedL1;
    if cfg.train.model == BUILT_IN_MODEL
        && cfg.train.solver == SolverKind::Adam
        && cfg.train.loss_plugin.is_empty()
        && v1_recipe
        && dim >= CLIP_WIDTH
    {
        return bail(format!(
            "the dataset's features are {dim}-D: LangSplat V1 (normalised features, masked L1) trains low-dimensional codes (3-D from `lsplat-engine autoencoder encode`); train {dim}-D embeddings with train.model = \"{}\", encode them first, or set train.loss = \"cosine\" and train.normalize = false to fit them directly",
            langsplat_v2::model::NAME
        ));
    }
    Ok(())
}

/// Sets an unset `train.iterations` to the model's own default (30 000 for
/// LangSplat V1, 10 000 for LangSplatV2), so the run records the value it trains.
pub fn resolve_iterations(cfg: &mut Config) {
    if cfg.train.iterations.is_none() {
        cfg.train.iterations = Some(match cfg.train.model.as_str() {
            langsplat_v2::model::NAME => langsplat_v2::model::DEFAULT_ITERATIONS,
            _ => lsplat_core::config::DEFAULT_ITERATIONS,
        });
    }
}

/// The plugin model named by `train.model` (`None` for the built-in one).
pub fn model<B: Backend>(cfg: &Config) -> Option<Arc<dyn Model<B>>> {
    match cfg.train.model.as_str() {
        langsplat_v2::model::NAME => Some(Arc::new(langsplat_v2::model::LangSplatV2)),
        _ => None,
    }
}

/// The plugin loss named by `train.loss_plugin` (`None` for the built-in one).
pub fn loss<B: Backend>(cfg: &Config) -> Option<Box<dyn PixelLoss<B>>> {
    match cfg.train.loss_plugin.as_str() {
        robust_cosine::NAME => Some(Box::new(robust_cosine::RobustCosine::<B>::default())),
        _ => None,
    }
}

/// Lines for `lsplat-engine info`.
pub fn describe() -> Vec<String> {
    let mut out = vec!["models (train.model):".to_string()];
    for (n, c, w) in MODELS {
        out.push(format!("  {n:<14} {c:<22} {w}"));
    }
    out.push("losses (train.loss_plugin):".to_string());
    for (n, c, w) in LOSSES {
        out.push(format!("  {n:<14} {c:<22} {w}"));
    }
    out
}
