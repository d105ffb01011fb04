//! The built-in plugins.

use std::marker::PhantomData;

use bevy_ecs::prelude::*;
use lsplat_core::config::LossKind;
use lsplat_device::Backend;

use crate::resources::{
    CacheBudget, CacheStats, CheckpointSchedule, Dev, LogSink, Metrics, TileConfig,
};
use crate::systems::{batch, cache, checkpoint, dist, log, optim, render};
use crate::{ActiveLoss, Engine, PixelLoss, Plugin, TrainSystems};

/// Installs a backend and the systems every model shares: batch sampling, resident
/// ground truth, projection and binning of uncached cameras, the step counter.
pub struct BackendPlugin<B: Backend>(pub B);

impl<B: Backend> Plugin for BackendPlugin<B> {
    fn build(self, engine: &mut Engine) {
        engine.insert_resource(Dev(self.0));
        engine.add_systems(TrainSystems::Load, batch::sample_batch);
        engine.add_systems(TrainSystems::Cache, batch::make_ground_truth_resident::<B>);
        engine.add_systems(
            TrainSystems::Project,
            render::project_cold::<B>.run_if(render::any_cold_in_batch::<B>),
        );
        engine.add_systems(
            TrainSystems::Rasterize,
            render::bin_cold::<B>.run_if(render::any_cold_in_batch::<B>),
        );
        engine
            .world
            .init_resource::<crate::resources::StopRequest>();
        engine.add_systems(
            TrainSystems::Log,
            log::latch_stop::<B>.before(log::advance_step),
        );
        engine.add_systems(TrainSystems::Log, log::advance_step);
    }
}

/// LangSplat V1's model: one trainable feature per Gaussian ([`crate::components::FeatureParams`]),
/// unit-normalised (when `train.normalize`), composited, its gradient chained back
/// through the normalisation, and Adam.
pub struct FeaturePlugin<B: Backend>(pub PhantomData<B>);

impl<B: Backend> Plugin for FeaturePlugin<B> {
    fn build(self, engine: &mut Engine) {
        engine.add_systems(
            TrainSystems::Rasterize,
            (
                render::normalize_features::<B>.run_if(render::normalizing),
                render::render_batch::<B>,
            )
                .chain()
                .after(render::bin_cold::<B>),
        );
        engine.add_systems(TrainSystems::Backward, render::backward_batch::<B>);
        engine.add_systems(
            TrainSystems::Step,
            (
                render::normalize_chain::<B>.run_if(render::normalizing),
                optim::adam_step::<B>,
            )
                .chain(),
        );
    }
}

/// Sets the tile size (a compile-time define for GPU kernels, a value on the CPU).
pub struct TilePlugin {
    /// 8 or 16.
    pub tile_size: u32,
}

impl Plugin for TilePlugin {
    fn build(self, engine: &mut Engine) {
        engine.insert_resource(TileConfig {
            tile_size: self.tile_size,
        });
    }
}

/// The loss on the valid pixels: a built-in kind (masked L1 = LangSplat V1, cosine,
/// or both) or a plugin's [`PixelLoss`].
pub struct LossPlugin<B: Backend> {
    /// Which loss.
    pub loss: Box<dyn PixelLoss<B>>,
}

impl<B: Backend> LossPlugin<B> {
    /// The plugin for a built-in `kind`.
    pub fn new(kind: LossKind) -> Self {
        LossPlugin {
            loss: Box::new(kind),
        }
    }
}

impl<B: Backend> Plugin for LossPlugin<B> {
    fn build(self, engine: &mut Engine) {
        engine.insert_resource(ActiveLoss(self.loss));
        engine.add_systems(TrainSystems::Loss, optim::loss_batch::<B>);
    }
}

/// Per-camera raster caches under a byte budget. Without it every visit recomputes.
pub struct OperatorCachePlugin<B: Backend> {
    /// Bytes the caches may hold.
    pub budget: u64,
    /// The backend.
    pub backend: PhantomData<B>,
}

impl<B: Backend> OperatorCachePlugin<B> {
    /// The plugin with a budget in bytes.
    pub fn new(budget: u64) -> Self {
        OperatorCachePlugin {
            budget,
            backend: PhantomData,
        }
    }
}

impl<B: Backend> Plugin for OperatorCachePlugin<B> {
    fn build(self, engine: &mut Engine) {
        engine.insert_resource(CacheBudget { limit: self.budget });
        engine.world.init_resource::<CacheStats>();
        engine.world.init_resource::<crate::resources::CacheSpill>();
        engine.add_systems(TrainSystems::Cache, cache::touch_caches::<B>);
        engine.add_systems(
            TrainSystems::Rasterize,
            cache::admit_caches::<B>
                .run_if(cache::any_promotable::<B>)
                .after(render::bin_cold::<B>)
                .before(render::render_batch::<B>),
        );
    }
}

/// Device-side loss accumulation, read back every `every` steps.
pub struct MetricsPlugin<B: Backend> {
    /// Read-back period in steps.
    pub every: u64,
    /// The backend.
    pub backend: PhantomData<B>,
}

impl<B: Backend> MetricsPlugin<B> {
    /// The plugin with a read-back period.
    pub fn new(every: u64) -> Self {
        MetricsPlugin {
            every,
            backend: PhantomData,
        }
    }
}

impl<B: Backend> Plugin for MetricsPlugin<B> {
    fn build(self, engine: &mut Engine) {
        let every = self.every.max(1);
        let loss = {
            let dev = &engine.world.resource::<Dev<B>>().0;
            dev.alloc::<f32>(every as usize)
        };
        match loss {
            Ok(loss) => {
                engine.insert_resource(Metrics::<B> {
                    loss,
                    every,
                    unread_from: 0,
                });
            }
            Err(e) => {
                engine.world.resource_mut::<crate::resources::Fault>().0 = Some(e.into());
            }
        }
        engine.world.init_resource::<LogSink>();
        engine.add_systems(
            TrainSystems::Log,
            log::read_metrics::<B>
                .run_if(log::log_due::<B>)
                .after(log::latch_stop::<B>)
                .before(log::advance_step),
        );
        if engine.world.contains_resource::<CacheStats>() {
            engine.add_systems(
                TrainSystems::Log,
                log::report_cache_stats
                    .run_if(log::log_due::<B>)
                    .after(log::latch_stop::<B>)
                    .before(log::advance_step),
            );
        }
    }
}

/// Appends every read-back window to the run's `metrics.jsonl` (rank 0, Log phase,
/// after the read-back). Needs the [`MetricsPlugin`].
pub struct MetricsFilePlugin<B: Backend> {
    /// The open metrics file.
    pub log: lsplat_data::run::MetricsLog,
    /// The backend.
    pub backend: PhantomData<B>,
}

impl<B: Backend> MetricsFilePlugin<B> {
    /// The plugin appending to `log`.
    pub fn new(log: lsplat_data::run::MetricsLog) -> Self {
        MetricsFilePlugin {
            log,
            backend: PhantomData,
        }
    }
}

impl<B: Backend> Plugin for MetricsFilePlugin<B> {
    fn build(self, engine: &mut Engine) {
        engine.insert_resource(checkpoint::MetricsFile(self.log));
        engine.add_systems(
            TrainSystems::Log,
            checkpoint::append_metrics
                .run_if(log::log_due::<B>)
                .run_if(log::is_rank0)
                .after(log::read_metrics::<B>)
                .after(log::report_cache_stats)
                .before(log::advance_step),
        );
    }
}

/// Checkpoints of the training state in the Log phase, on rank 0: every `every`
/// steps (0 = none on the way) and after the last step, into
/// `<run_dir>/checkpoints/`, keeping the newest `keep`. The metrics are read back
/// before each checkpoint, and a state with a NaN or infinity is never written.
pub struct CheckpointPlugin<B: Backend> {
    /// Steps between checkpoints; 0 = only after the last step.
    pub every: u64,
    /// Where they go and what they record.
    pub target: checkpoint::CheckpointTarget,
    /// The backend.
    pub backend: PhantomData<B>,
}

impl<B: Backend> CheckpointPlugin<B> {
    /// The plugin.
    pub fn new(every: u64, target: checkpoint::CheckpointTarget) -> Self {
        CheckpointPlugin {
            every,
            target,
            backend: PhantomData,
        }
    }
}

impl<B: Backend> Plugin for CheckpointPlugin<B> {
    fn build(self, engine: &mut Engine) {
        engine.insert_resource(CheckpointSchedule { every: self.every });
        engine.insert_resource(self.target);
        // The built-in model's state, or a plugin model's snapshot.
        let plugin_model = resource_exists::<crate::model::ActiveModel<B>>;
        engine.add_systems(
            TrainSystems::Log,
            (
                checkpoint::write_checkpoint::<B>.run_if(not(plugin_model)),
                checkpoint::write_model_checkpoint::<B>.run_if(plugin_model),
            )
                .run_if(checkpoint::checkpoint_due)
                .run_if(log::is_rank0)
                .run_if(checkpoint::no_fault)
                .after(log::read_metrics::<B>)
                .after(checkpoint::append_metrics)
                .before(log::advance_step),
        );
    }
}

/// A training-free solver (`train.solver = average | lsq`): its system runs once in
/// the [`crate::Fit`] schedule (see [`crate::Session::fit`]) over the cameras not
/// held out, and leaves the solution in the splat cloud's features and a
/// [`crate::resources::FitReport`].
pub struct SolverPlugin<B: Backend> {
    /// Method, levels and settings.
    pub settings: crate::resources::SolverSettings,
    /// The backend.
    pub backend: PhantomData<B>,
}

impl<B: Backend> SolverPlugin<B> {
    /// The plugin for `settings`.
    pub fn new(settings: crate::resources::SolverSettings) -> Self {
        SolverPlugin {
            settings,
            backend: PhantomData,
        }
    }
}

impl<B: Backend> Plugin for SolverPlugin<B> {
    fn build(self, engine: &mut Engine) {
        engine.insert_resource(self.settings);
        engine.add_fit_systems(crate::systems::solve::fit::<B>);
    }
}

/// Data-parallel training: the AllReduce phase averages ∂L/∂x over the ranks of the
/// [`crate::resources::Collective`] (a no-op system at world size 1).
pub struct DataParallelPlugin<B: Backend> {
    /// Elements of the gradient (`N × C`).
    pub len: usize,
    /// Channels C (rows are Gaussians).
    pub channels: usize,
    /// Dense, touched rows, or the smaller.
    pub mode: lsplat_dist::ReduceMode,
    /// The backend.
    pub backend: PhantomData<B>,
}

impl<B: Backend> DataParallelPlugin<B> {
    /// The plugin for an `[N, channels]` gradient of `len` elements.
    pub fn new(len: usize, channels: usize, mode: lsplat_dist::ReduceMode) -> Self {
        DataParallelPlugin {
            len,
            channels,
            mode,
            backend: PhantomData,
        }
    }
}

impl<B: Backend> Plugin for DataParallelPlugin<B> {
    fn build(self, engine: &mut Engine) {
        let c = self.channels.max(1);
        engine.insert_resource(crate::resources::GradientReduce {
            host: vec![0.0; self.len],
            reducer: lsplat_dist::GradientReducer::new(self.len / c, c, self.mode),
            totals: Default::default(),
        });
        engine.add_systems(
            TrainSystems::AllReduce,
            dist::all_reduce_gradients::<B>.run_if(dist::multi_rank),
        );
    }
}
