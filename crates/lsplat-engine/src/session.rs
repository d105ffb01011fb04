//! A training session: an [`Engine`] set up for one scene on one backend.

use std::marker::PhantomData;
use std::sync::Arc;

use lsplat_core::Config;
use lsplat_core::config::{ReduceKind, SolverKind};
use lsplat_data::{ImageLabels, SceneData};
use lsplat_device::Backend;
use lsplat_dist::ReduceMode;
use lsplat_render::{CacheLevel, EvalReport, RasterCache, Scratch};

use crate::components::{
    AdamState, Cache, CameraView, FeatureParams, Geometry, Gradients, HeldOut, Labels, MoreLevels,
    Shard,
};
use crate::plugins::{
    BackendPlugin, DataParallelPlugin, FeaturePlugin, LossPlugin, MetricsPlugin,
    OperatorCachePlugin, SolverPlugin, TilePlugin,
};
use crate::resources::{
    CacheStats, CameraIndex, Collective, Dev, Fault, FitOperators, FitReport, Frame, Frames,
    LogSink, Metrics, RenderSettings, Sampler, SolverSettings, Step, TrainSettings,
};
use crate::sampler::CameraSampler;
use crate::{ActiveLoss, ActiveModel, Engine, EngineError, Model, ModelContext, PixelLoss};

/// The loss of one step, as read back by the Log phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepRecord {
    /// 0-based step.
    pub step: u64,
    /// Batch-mean loss.
    pub loss: f32,
}

/// Quality of the features of one level on the fitted and on the held-out cameras.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    /// The level.
    pub level: u8,
    /// Cameras used for fitting.
    pub fitted: EvalReport,
    /// Cameras held out (`eval.holdout`), when any.
    pub held_out: Option<EvalReport>,
}

/// An engine set up to fit one scene: trained step by step (`train.solver = adam`)
/// or solved once (`average`, `lsq`).
pub struct Session<B: Backend> {
    /// The engine (world + schedules).
    pub engine: Engine,
    config: Config,
    /// Channels C of one level.
    channels: usize,
    /// Levels fitted (one for Adam).
    levels: Vec<u8>,
    /// A plugin's model, when it is not LangSplat V1.
    model: Option<Arc<dyn Model<B>>>,
    backend: PhantomData<B>,
}

/// Prepares (compiles) every op of a plugin before any step runs.
fn prepare_ops<B: Backend>(
    dev: &B,
    ops: &[Box<dyn lsplat_device::DeviceOp>],
) -> Result<(), EngineError> {
    for op in ops {
        dev.prepare_op(op.as_ref())?;
    }
    Ok(())
}

/// Default cache budget: half the device's free memory, or 4 GiB if unknown.
fn default_budget<B: Backend>(dev: &B) -> u64 {
    dev.memory().map_or(4 << 30, |m| m.free / 2)
}

/// The settings that depend on the scene's camera count (`eval.holdout`,
/// `train.batch_size`, the ranks sharing the cameras), checked without building
/// anything: a command calls it before it creates its run directory, and
/// [`Session`] again when it is built.
pub fn check_scene_settings(
    config: &Config,
    cameras: usize,
    ranks: usize,
) -> Result<(), EngineError> {
    let fitted = (0..cameras)
        .filter(|&i| !config.eval.is_held_out(i))
        .count();
    if config.eval.holdout > 0 && fitted == cameras {
        return Err(EngineError::Config(format!(
            "eval.holdout = {} holds out none of the {cameras} cameras",
            config.eval.holdout
        )));
    }
    if fitted == 0 {
        return Err(EngineError::Config(format!(
            "the scene has no camera to fit ({cameras} cameras, eval.holdout = {})",
            config.eval.holdout
        )));
    }
    let batch = config.train.batch_size as usize;
    if config.train.solver == SolverKind::Adam && batch > fitted {
        return Err(EngineError::Config(format!(
            "train.batch_size = {batch} exceeds the {fitted} fitted cameras{}",
            if fitted < cameras {
                format!(
                    " ({} of {cameras} are held out by eval.holdout)",
                    cameras - fitted
                )
            } else {
                String::new()
            }
        )));
    }
    if config.train.solver == SolverKind::Adam && fitted < ranks {
        return Err(EngineError::Config(format!(
            "{fitted} fitted cameras cannot be shared by {ranks} ranks"
        )));
    }
    Ok(())
}

impl<B: Backend> Session<B> {
    /// Builds the engine: plugins, the splat entity, one entity per camera.
    pub fn new(dev: B, config: &Config, scene: SceneData) -> Result<Self, EngineError> {
        Self::with_levels(dev, config, scene, Vec::new())
    }

    /// [`Session::new`] with the labels of further levels (`[level][camera]`, in
    /// `solve.levels` order after the scene's own), solved together by a solver.
    pub fn with_levels(
        dev: B,
        config: &Config,
        scene: SceneData,
        more_levels: Vec<Vec<ImageLabels>>,
    ) -> Result<Self, EngineError> {
        Self::with_collective(dev, config, scene, more_levels, Collective::default())
    }

    /// [`Session::with_levels`] as one rank of a data-parallel world: the rank takes
    /// its share of each epoch's cameras, and the AllReduce phase averages the
    /// gradients over the ranks (training only; a solver runs on one rank).
    pub fn with_collective(
        dev: B,
        config: &Config,
        scene: SceneData,
        more_levels: Vec<Vec<ImageLabels>>,
        collective: Collective,
    ) -> Result<Self, EngineError> {
        Self::build(dev, config, scene, more_levels, collective, None)
    }

    /// A session training a plugin's `model` (`train.model`) instead of LangSplat
    /// V1's features, on one rank.
    pub fn with_model(
        dev: B,
        config: &Config,
        scene: SceneData,
        collective: Collective,
        model: Arc<dyn Model<B>>,
    ) -> Result<Self, EngineError> {
        Self::build(dev, config, scene, Vec::new(), collective, Some(model))
    }

    fn build(
        dev: B,
        config: &Config,
        scene: SceneData,
        more_levels: Vec<Vec<ImageLabels>>,
        collective: Collective,
        model: Option<Arc<dyn Model<B>>>,
    ) -> Result<Self, EngineError> {
        // An unset `train.iterations` is the model's own default.
        let mut resolved = config.clone();
        if resolved.train.iterations.is_none() {
            resolved.train.iterations = Some(
                model
                    .as_ref()
                    .map_or(lsplat_core::config::DEFAULT_ITERATIONS, |m| {
                        m.default_iterations()
                    }),
            );
        }
        let config = &resolved;
        if let Some(m) = &model {
            if config.train.model != m.name() {
                return Err(EngineError::Config(format!(
                    "train.model = {:?} but the session was given the model {:?}",
                    config.train.model,
                    m.name()
                )));
            }
            if config.train.solver != SolverKind::Adam {
                return Err(EngineError::Config(format!(
                    "train.model = {} is trained by gradient steps: train.solver must be adam, not {}",
                    m.name(),
                    config.train.solver.name()
                )));
            }
            if collective.world_size > 1 {
                return Err(EngineError::Config(format!(
                    "train.model = {} runs on one rank (data parallelism covers the built-in model); start it without mpirun/srun",
                    m.name()
                )));
            }
            m.check(&scene)
                .map_err(|e| EngineError::Config(format!("train.model = {}: {e}", m.name())))?;
        } else if config.train.model != "langsplat" {
            return Err(EngineError::Config(format!(
                "train.model = {:?} is not built in (built in: \"langsplat\"); a plugin's model needs Session::with_model",
                config.train.model
            )));
        }
        if collective.world_size > 1 && config.train.solver != SolverKind::Adam {
            return Err(EngineError::Config(format!(
                "train.solver = {} runs on one rank; start it without mpirun/srun",
                config.train.solver.name()
            )));
        }
        config
            .validate()
            .map_err(|e| EngineError::Config(e.to_string()))?;
        scene.validate()?;
        for more in &more_levels {
            scene.validate_level(more)?;
        }
        let solver = config.train.solver;
        let levels = if config.solve.levels.is_empty() {
            vec![config.scene.level]
        } else {
            config.solve.levels.clone()
        };
        if levels.len() != 1 + more_levels.len() {
            return Err(EngineError::Config(format!(
                "{} levels configured but labels for {} given",
                levels.len(),
                1 + more_levels.len()
            )));
        }
        let n = scene.gaussians.len();
        let c = scene.dim();
        let cams = scene.cameras.len();
        check_scene_settings(config, cams, collective.world_size)?;
        let held_out: Vec<bool> = (0..cams).map(|i| config.eval.is_held_out(i)).collect();
        let fitted: Vec<usize> = (0..cams).filter(|&i| !held_out[i]).collect();
        let budget = config
            .render
            .cache_budget
            .unwrap_or_else(|| default_budget(&dev));
        let geometry = dev.upload_geometry(&scene.gaussians)?;
        let width = c * levels.len();

        let mut engine = Engine::new();
        engine
            .add_plugin(BackendPlugin(dev))
            .add_plugin(TilePlugin {
                tile_size: config.render.tile_size,
            });
        let dev = &engine.world.resource::<Dev<B>>().0;
        let x = if model.is_some() {
            dev.alloc(1)?
        } else if config.train.init_std > 0.0 && solver == SolverKind::Adam {
            let mut rng = lsplat_core::Rng::new(config.train.seed ^ 0x1a17);
            let init: Vec<f32> = (0..n * c)
                .map(|_| config.train.init_std * rng.normal())
                .collect();
            dev.upload(&init)?
        } else {
            dev.alloc(n * width)?
        };
        // A solver fits x directly; the training buffers are only needed by Adam.
        let train_len = if solver == SolverKind::Adam && model.is_none() {
            n * c
        } else {
            1
        };
        let params = FeatureParams::<B> {
            x,
            rendered: dev.alloc(train_len)?,
            channels: width,
        };
        let grads = Gradients::<B> {
            d_rendered: dev.alloc(train_len)?,
            d_x: dev.alloc(train_len)?,
        };
        let adam = AdamState::<B> {
            m: dev.alloc(train_len)?,
            v: dev.alloc(train_len)?,
        };
        let frame_c = model.as_ref().map_or(c, |m| m.render_channels());
        let max_valid = scene
            .labels
            .iter()
            .map(|l| l.valid.len())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut frames = Vec::new();
        if solver == SolverKind::Adam {
            for _ in 0..config.train.batch_size {
                frames.push(Frame::<B> {
                    rendered: dev.alloc(max_valid * frame_c)?,
                    d_rendered: dev.alloc(max_valid * frame_c)?,
                    scratch: Scratch::default(),
                });
            }
        }
        match solver {
            SolverKind::Adam => {
                engine
                    .add_plugin(OperatorCachePlugin::<B>::new(budget))
                    .add_plugin(MetricsPlugin::<B>::new(config.log.every as u64));
                if model.is_none() {
                    engine
                        .add_plugin(FeaturePlugin::<B>(PhantomData))
                        .add_plugin(LossPlugin::<B>::new(config.train.loss));
                }
                if collective.world_size > 1 {
                    let mode = match config.dist.reduce {
                        ReduceKind::Auto => ReduceMode::Auto,
                        ReduceKind::Dense => ReduceMode::Dense,
                        ReduceKind::Sparse => ReduceMode::Sparse,
                    };
                    engine.add_plugin(DataParallelPlugin::<B>::new(n * c, c, mode));
                }
            }
            kind => {
                engine.world.init_resource::<CacheStats>();
                engine.world.init_resource::<LogSink>();
                engine.add_plugin(SolverPlugin::<B>::new(SolverSettings {
                    kind,
                    levels: levels.clone(),
                    solve: config.solve.clone(),
                    budget,
                    spill: None,
                }));
            }
        }
        if let Some(e) = engine.world.resource_mut::<Fault>().0.take() {
            return Err(e);
        }
        let sampler = CameraSampler::over(
            fitted,
            config.train.seed,
            collective.rank,
            collective.world_size,
        )
        .map_err(EngineError::Config)?;
        engine
            .insert_resource(TrainSettings(config.train.clone()))
            .insert_resource(RenderSettings(config.render.clone()))
            .insert_resource(Step(0))
            .insert_resource(Sampler(sampler))
            .insert_resource(collective)
            .insert_resource(Frames(frames));
        let splats = Geometry::<B> {
            buffers: geometry,
            count: n,
        };
        if let Some(m) = &model {
            engine.world.spawn(splats);
            let ctx = ModelContext {
                gaussians: n,
                channels: c,
                max_valid,
                config: config.clone(),
            };
            engine.insert_resource(ActiveModel(m.clone()));
            prepare_ops(&engine.world.resource::<Dev<B>>().0, &m.ops())?;
            m.build(&mut engine, &ctx, &scene)?;
            if let Some(e) = engine.world.resource_mut::<Fault>().0.take() {
                return Err(e);
            }
        } else {
            engine.world.spawn((splats, params, grads, adam));
        }
        let allowed = CacheLevel::from_mode(config.render.cache);
        let mut index = Vec::with_capacity(cams);
        let mut more: Vec<_> = more_levels.into_iter().map(Vec::into_iter).collect();
        for (i, (camera, labels)) in scene.cameras.into_iter().zip(scene.labels).enumerate() {
            let mut e = engine.world.spawn((
                CameraView { camera, index: i },
                Labels(labels),
                Cache::<B> {
                    cache: Default::default(),
                    allowed,
                    last_used: 0,
                },
                Shard(0),
            ));
            if !more.is_empty() {
                e.insert(MoreLevels(
                    more.iter_mut().filter_map(Iterator::next).collect(),
                ));
            }
            if held_out[i] {
                e.insert(HeldOut);
            }
            index.push(e.id());
        }
        engine.insert_resource(CameraIndex(index));
        engine.initialize()?;
        Ok(Session {
            engine,
            config: config.clone(),
            channels: c,
            levels,
            model,
            backend: PhantomData,
        })
    }

    /// The training state after the steps run so far, as a checkpoint recording
    /// `config` (TOML) and `backend`.
    pub fn checkpoint(
        &mut self,
        config: String,
        backend: String,
    ) -> Result<lsplat_data::run::Checkpoint, EngineError> {
        self.v1_only()?;
        let world = &mut self.engine.world;
        let mut q = world.query::<(&FeatureParams<B>, &AdamState<B>, &Geometry<B>)>();
        let (params, adam, geometry) = q.single(world).expect("one splat cloud");
        let target = crate::systems::checkpoint::CheckpointTarget {
            run_dir: Default::default(),
            keep: 1,
            config,
            backend,
            identity: None,
        };
        crate::systems::checkpoint::snapshot(
            &world.resource::<Dev<B>>().0,
            params,
            adam,
            geometry.count,
            world.resource::<Step>().0,
            world.resource::<Sampler>().0.position(),
            &target,
        )
    }

    /// Continues from `ckpt` (before any step has run): parameters, Adam moments,
    /// step counter, sampler position and the metrics read-back window, so the next
    /// steps are those an uninterrupted run would take.
    pub fn restore(&mut self, ckpt: &lsplat_data::run::Checkpoint) -> Result<(), EngineError> {
        if let Some(model) = self.model.clone() {
            if ckpt.model.as_deref() != Some(model.name()) {
                return Err(EngineError::Config(format!(
                    "the checkpoint was written by train.model = {}, not {}",
                    ckpt.model.as_deref().unwrap_or("langsplat"),
                    model.name()
                )));
            }
            let state = crate::ModelState {
                gaussians: ckpt.gaussians,
                channels: ckpt.channels,
                params: ckpt.params.clone(),
                adam_m: ckpt.adam_m.clone(),
                adam_v: ckpt.adam_v.clone(),
                extra: ckpt.extra.clone(),
            };
            model.restore(&mut self.engine.world, state, ckpt.step)?;
            self.restore_position(ckpt);
            return Ok(());
        }
        if let Some(m) = &ckpt.model {
            return Err(EngineError::Config(format!(
                "the checkpoint was written by train.model = {m}, not the built-in model"
            )));
        }
        let world = &mut self.engine.world;
        let (x, m, v) = {
            let dev = &world.resource::<Dev<B>>().0;
            (
                dev.upload(&ckpt.params)?,
                dev.upload(&ckpt.adam_m)?,
                dev.upload(&ckpt.adam_v)?,
            )
        };
        let mut q = world.query::<(&mut FeatureParams<B>, &mut AdamState<B>, &Geometry<B>)>();
        let (mut params, mut adam, geometry) = q.single_mut(world).expect("one splat cloud");
        if (ckpt.gaussians, ckpt.channels) != (geometry.count, params.channels) {
            return Err(EngineError::Config(format!(
                "the checkpoint holds {}×{} features but the scene has {} Gaussians × {} channels",
                ckpt.gaussians, ckpt.channels, geometry.count, params.channels
            )));
        }
        params.x = x;
        adam.m = m;
        adam.v = v;
        self.restore_position(ckpt);
        Ok(())
    }

    /// The step, the sampler and the metrics read-back of a restored checkpoint.
    fn restore_position(&mut self, ckpt: &lsplat_data::run::Checkpoint) {
        let world = &mut self.engine.world;
        world.resource_mut::<Step>().0 = ckpt.step;
        world
            .resource_mut::<Sampler>()
            .0
            .seek(ckpt.sampler_position);
        world.resource_mut::<Metrics<B>>().unread_from = ckpt.step;
    }

    /// Lets operators that do not fit `render.cache_budget` be spilled to `dir` (the
    /// run's cache folder, created on the first spill) up to `render.disk_budget`.
    /// Without it they are rebuilt on every use.
    pub fn set_cache_dir(&mut self, dir: std::path::PathBuf) {
        let target = lsplat_render::placement::SpillTarget {
            dir,
            disk_budget: self.config.render.disk_budget,
            keep_free: self.config.render.disk_keep_free,
            read_bandwidth: self.config.render.disk_read_bandwidth,
        };
        if let Some(mut s) = self
            .engine
            .world
            .get_resource_mut::<crate::resources::CacheSpill>()
        {
            s.target = Some(target.clone());
        }
        if let Some(mut s) = self.engine.world.get_resource_mut::<SolverSettings>() {
            s.spill = Some(target);
        }
    }

    /// Where training's operators go, as planned with the first operator built (the
    /// line announced then); `None` before it or without an operator cache.
    pub fn cache_placement(&self) -> Option<lsplat_render::placement::Placement> {
        let spill = self
            .engine
            .world
            .get_resource::<crate::resources::CacheSpill>()?;
        spill.placer.as_ref().map(|p| *p.plan())
    }

    /// Runs the solver (sessions with `train.solver = average | lsq`): fits every
    /// level over the cameras not held out and returns what happened.
    pub fn fit(&mut self) -> Result<FitReport, EngineError> {
        if self.config.train.solver == SolverKind::Adam {
            return Err(EngineError::Config(
                "train.solver = adam trains step by step (Session::step), it has no fit".into(),
            ));
        }
        self.engine.fit()?;
        self.engine
            .world
            .get_resource::<FitReport>()
            .cloned()
            .ok_or_else(|| EngineError::Config("the solver reported nothing".into()))
    }

    /// Uses a plugin's loss (`train.loss_plugin`) instead of the built-in one. Its
    /// cameras render, evaluate and back-propagate in separate passes unless the loss
    /// names a built-in kind the fused operator step runs.
    pub fn use_loss(&mut self, loss: Box<dyn PixelLoss<B>>) -> Result<(), EngineError> {
        self.v1_only()?;
        loss.check_channels(self.channels).map_err(|e| {
            EngineError::Config(format!("train.loss_plugin = {}: {e}", loss.name()))
        })?;
        prepare_ops(self.device(), &loss.ops())?;
        if loss.fused_kind().is_none() {
            self.engine.world.resource_mut::<RenderSettings>().0.fused = false;
        }
        self.engine.world.insert_resource(ActiveLoss(loss));
        Ok(())
    }

    /// Sends the solver's progress ([`crate::resources::FitEvent`]) to `f` during
    /// [`Session::fit`].
    pub fn on_fit_progress(
        &mut self,
        f: impl Fn(crate::resources::FitEvent) + Send + Sync + 'static,
    ) {
        self.engine
            .insert_resource(crate::resources::FitProgress(Arc::new(f)));
    }

    /// The plugin model this session trains, if not LangSplat V1.
    pub fn model(&self) -> Option<&Arc<dyn Model<B>>> {
        self.model.as_ref()
    }

    /// Writes a plugin model's outputs into `dir` (see [`Model::write_outputs`]).
    pub fn write_model_outputs(
        &mut self,
        dir: &std::path::Path,
    ) -> Result<Vec<String>, EngineError> {
        let model = self.model.clone().ok_or_else(|| {
            EngineError::Config("the built-in model writes features, not model outputs".into())
        })?;
        model.write_outputs(&mut self.engine.world, dir)
    }

    /// A plugin model's quality figures (see [`Model::report`]).
    pub fn model_report(&mut self) -> Result<serde_json::Value, EngineError> {
        match self.model.clone() {
            Some(m) => m.report(&mut self.engine.world),
            None => Ok(serde_json::Value::Null),
        }
    }

    fn v1_only(&self) -> Result<(), EngineError> {
        match &self.model {
            None => Ok(()),
            Some(m) => Err(EngineError::Config(format!(
                "train.model = {} has no per-Gaussian feature vector (this needs the built-in model)",
                m.name()
            ))),
        }
    }

    /// Levels fitted (one for Adam; `solve.levels` for a solver).
    pub fn levels(&self) -> &[u8] {
        &self.levels
    }

    /// Runs one training step (`train.solver = adam`).
    pub fn step(&mut self) -> Result<(), EngineError> {
        if self.config.train.solver != SolverKind::Adam {
            return Err(EngineError::Config(format!(
                "train.solver = {} is solved once (Session::fit), not stepped",
                self.config.train.solver.name()
            )));
        }
        self.engine.step()
    }

    /// Stops after the step during which `flag` is raised: that step reads its
    /// metrics back and writes a checkpoint (with a [`crate::CheckpointPlugin`]) as
    /// if it were the last, and [`Session::stop_requested`] turns true. The flag is
    /// read once per step (an atomic load).
    pub fn set_stop_flag(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.engine
            .world
            .resource_mut::<crate::resources::StopRequest>()
            .flag = flag;
    }

    /// Whether the last step saw the stop flag (it was then read back and
    /// checkpointed): the runner should stop.
    pub fn stop_requested(&self) -> bool {
        self.engine
            .world
            .get_resource::<crate::resources::StopRequest>()
            .is_some_and(|s| s.latched)
    }

    /// Steps run so far.
    pub fn steps_done(&self) -> u64 {
        self.engine.world.resource::<Step>().0
    }

    /// Feature channels C of one level.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Takes the step records read back so far.
    pub fn drain_records(&mut self) -> Vec<StepRecord> {
        std::mem::take(&mut self.engine.world.resource_mut::<LogSink>().records)
    }

    /// Takes the cache counters reported at the end of each logging window.
    pub fn drain_cache_reports(&mut self) -> Vec<(u64, CacheStats)> {
        std::mem::take(&mut self.engine.world.resource_mut::<LogSink>().cache)
    }

    /// Cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        *self.engine.world.resource::<CacheStats>()
    }

    /// The backend.
    pub fn device(&self) -> &B {
        &self.engine.world.resource::<Dev<B>>().0
    }

    /// The trained parameters `[N, C]` (raw, before normalisation).
    pub fn parameters(&mut self) -> Result<Vec<f32>, EngineError> {
        self.v1_only()?;
        let world = &mut self.engine.world;
        let mut q = world.query::<&FeatureParams<B>>();
        let p = q.single(world).expect("one splat cloud");
        Ok(world.resource::<Dev<B>>().0.download(&p.x)?)
    }

    /// The per-Gaussian features as the renderer composites them, `[N, L·C]` (level
    /// after level per Gaussian; L = 1 for Adam): unit rows under the V1
    /// normalisation, the solution itself for a solver.
    pub fn features(&mut self) -> Result<Vec<f32>, EngineError> {
        self.v1_only()?;
        let normalize = self.config.train.normalize && self.config.train.solver == SolverKind::Adam;
        let world = &mut self.engine.world;
        let mut q = world.query::<&FeatureParams<B>>();
        let p = q.single(world).expect("one splat cloud");
        let dev = &world.resource::<Dev<B>>().0;
        let raw = dev.download(&p.x)?;
        if !normalize {
            return Ok(raw);
        }
        let mut out = vec![0f32; raw.len()];
        let c = p.channels;
        for (xr, or) in raw.chunks_exact(c).zip(out.chunks_exact_mut(c)) {
            let n = xr.iter().map(|v| v * v).sum::<f32>().sqrt();
            for (o, v) in or.iter_mut().zip(xr) {
                *o = v / (n + lsplat_core::constants::NORM_EPS);
            }
        }
        Ok(out)
    }

    /// Renders every camera's valid pixels with the current features and compares
    /// them with the targets (the first level).
    pub fn evaluate(&mut self) -> Result<EvalReport, EngineError> {
        let all: Vec<usize> = (0..self.engine.world.resource::<CameraIndex>().0.len()).collect();
        Ok(self.evaluate_cameras(&all)?[0])
    }

    /// Quality of every level on the fitted and on the held-out cameras (a plugin
    /// model's own [`Model::evaluate`]; none when it has no evaluation).
    pub fn quality(&mut self) -> Result<Vec<Quality>, EngineError> {
        let cams = self.engine.world.resource::<CameraIndex>().0.len();
        let (fitted, held): (Vec<usize>, Vec<usize>) =
            (0..cams).partition(|&i| !self.config.eval.is_held_out(i));
        if let Some(m) = self.model.clone() {
            let world = &mut self.engine.world;
            let Some(f) = m.evaluate(world, &fitted)? else {
                return Ok(Vec::new());
            };
            let h = if held.is_empty() {
                None
            } else {
                m.evaluate(world, &held)?
            };
            return Ok(vec![Quality {
                level: self.levels[0],
                fitted: f,
                held_out: h,
            }]);
        }
        let f = self.evaluate_cameras(&fitted)?;
        let h = if held.is_empty() {
            None
        } else {
            Some(self.evaluate_cameras(&held)?)
        };
        Ok(self
            .levels
            .iter()
            .enumerate()
            .map(|(l, &level)| Quality {
                level,
                fitted: f[l],
                held_out: h.as_ref().map(|h| h[l]),
            })
            .collect())
    }

    /// One report per level over `cameras`, through each camera's cached operator
    /// where it has one.
    fn evaluate_cameras(&mut self, cameras: &[usize]) -> Result<Vec<EvalReport>, EngineError> {
        let feats = self.features()?;
        crate::systems::solve::with_problem::<B, _>(&mut self.engine.world, |world, dev, p| {
            let solved = world.get_resource::<FitOperators<B>>();
            let index = &world.resource::<CameraIndex>().0;
            let operator = |cam: usize| -> Option<&B::Operator> {
                if let Some(ops) = solved {
                    return ops.0.get(cam).and_then(Option::as_ref);
                }
                match &world.get::<Cache<B>>(index[cam])?.cache {
                    RasterCache::Operator { op } => Some(op),
                    _ => None,
                }
            };
            lsplat_solve::evaluate(dev, p, &feats, cameras, operator)
                .map_err(crate::systems::solve::solve_error)
        })
    }
}
