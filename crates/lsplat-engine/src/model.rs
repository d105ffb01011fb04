//! Models that plugins bring (`train.model`): what is trained per Gaussian, how it is
//! rendered, its loss and its optimiser step. LangSplat V1 (`langsplat`) is built in
//! ([`crate::plugins::FeaturePlugin`]); any other model is a [`Model`] whose
//! [`Model::build`] adds its resources and its Rasterize, Loss, Backward and Step
//! systems on top of the shared pipeline (batch sampling, resident ground truth,
//! projection, binning, the operator cache and the metrics).

use std::path::Path;
use std::sync::Arc;

use bevy_ecs::prelude::*;
use lsplat_core::Config;
use lsplat_data::SceneData;
use lsplat_device::Backend;

use crate::{Engine, EngineError};

/// What a model's [`Model::build`] gets to know about the session.
#[derive(Clone, Debug)]
pub struct ModelContext {
    /// Gaussians N.
    pub gaussians: usize,
    /// Channels of the ground truth (the dataset's feature width).
    pub channels: usize,
    /// Most valid pixels of any camera (per-pixel buffers are sized for it).
    pub max_valid: usize,
    /// The run's configuration.
    pub config: Config,
}

/// A trainable model provided by a plugin.
///
/// The session inserts the shared resources before [`Model::build`] runs, among them
/// [`crate::resources::Frames`] with `rendered` / `d_rendered` buffers of
/// `max_valid × render_channels()` per batch slot, and [`crate::resources::Metrics`]
/// whose `loss[step % every]` the model's Loss systems must write (the batch mean).
pub trait Model<B: Backend>: Send + Sync + 'static {
    /// Its `train.model` name.
    fn name(&self) -> &'static str;
    /// Steps when `train.iterations` is unset (its paper's schedule).
    fn default_iterations(&self) -> u32 {
        lsplat_core::config::DEFAULT_ITERATIONS
    }
    /// Channels of what it composites per pixel (the frame buffers' width).
    fn render_channels(&self) -> usize;
    /// Every device op the model runs (prepared — GPU kernels compiled — before the
    /// session's first step).
    fn ops(&self) -> Vec<Box<dyn lsplat_device::DeviceOp>>;
    /// Refuses scenes it cannot train (feature width, too little data, …), before
    /// anything is allocated or written.
    fn check(&self, scene: &SceneData) -> Result<(), String>;
    /// Adds its parameters and systems. `scene` is the loaded scene (for
    /// data-dependent initialisation).
    fn build(
        &self,
        engine: &mut Engine,
        ctx: &ModelContext,
        scene: &SceneData,
    ) -> Result<(), EngineError>;
    /// Quality figures for the run's summary (`"report"` in summary.json), computed
    /// after the last step; `Null` when the model has none.
    fn report(&self, world: &mut World) -> Result<serde_json::Value, EngineError> {
        let _ = world;
        Ok(serde_json::Value::Null)
    }
    /// Quality on `cameras` (indices in the scene's camera order, fitted or held out:
    /// held-out cameras have no cache and no resident ground truth), after the last
    /// step: what `summary.json` reports as `eval_*` and `heldout_*` for every model;
    /// `None` when the model has no evaluation. A field the model does not measure is
    /// NaN (written as null).
    fn evaluate(
        &self,
        world: &mut World,
        cameras: &[usize],
    ) -> Result<Option<crate::EvalReport>, EngineError> {
        let _ = (world, cameras);
        Ok(None)
    }
    /// Writes the trained model into `dir` (atomically, file by file) and returns the
    /// names of the files written.
    fn write_outputs(&self, world: &mut World, dir: &Path) -> Result<Vec<String>, EngineError>;
    /// Whether it writes checkpoints ([`Model::snapshot`]) and resumes from them
    /// ([`Model::restore`]). Without, a run says so at start and cannot be resumed.
    fn checkpoints(&self) -> bool {
        false
    }
    /// Its training state after the steps run so far, for a checkpoint (in the Log
    /// phase of a checkpoint step; it may bring lazy state up to date first).
    fn snapshot(&self, world: &mut World) -> Result<ModelState, EngineError> {
        let _ = world;
        Err(EngineError::Config(format!(
            "train.model = {} writes no checkpoints",
            self.name()
        )))
    }
    /// Puts a [`Model::snapshot`] back after `steps` completed steps (after
    /// [`Model::build`], before the first step), so that the run continues bit for
    /// bit as if never interrupted.
    fn restore(&self, world: &mut World, state: ModelState, steps: u64) -> Result<(), EngineError> {
        let _ = (world, state, steps);
        Err(EngineError::Config(format!(
            "train.model = {} cannot resume from a checkpoint",
            self.name()
        )))
    }
}

/// A model's training state in a checkpoint: its per-Gaussian parameters `[N, C]`
/// with their Adam moments (the checkpoint's main tensors), and further named
/// tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelState {
    /// Gaussians N.
    pub gaussians: usize,
    /// Parameters per Gaussian C.
    pub channels: usize,
    /// `[N, C]` parameters.
    pub params: Vec<f32>,
    /// Their Adam first moment `[N, C]`.
    pub adam_m: Vec<f32>,
    /// Their Adam second moment `[N, C]`.
    pub adam_v: Vec<f32>,
    /// Further tensors (names other than `params`, `adam_m`, `adam_v`).
    pub extra: Vec<lsplat_data::run::Extra>,
}

/// The model a session trains when it is not the built-in one.
#[derive(Resource, Clone)]
pub struct ActiveModel<B: Backend>(pub Arc<dyn Model<B>>);
