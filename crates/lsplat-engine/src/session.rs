//! A training session: an [`Engine`] set up for one scene on one backend.

use std::marker::PhantomData;

use bevy_ecs::prelude::*;
use lsplat_core::Config;
use lsplat_data::SceneData;
use lsplat_device::Backend;
use lsplat_render::{CacheLevel, Scratch, cache};

use crate::components::{
    AdamState, Cache, CameraView, FeatureParams, Geometry, Gradients, GroundTruth, Labels, Shard,
};
use crate::plugins::{BackendPlugin, LossPlugin, MetricsPlugin, OperatorCachePlugin, TilePlugin};
use crate::resources::{
    CacheStats, CameraIndex, Collective, Dev, Fault, Frame, Frames, LogSink, Metrics,
    RenderSettings, Sampler, Step, TrainSettings,
};
use crate::sampler::CameraSampler;
use crate::{Engine, EngineError};

/// The loss of one step, as read back by the Log phase.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepRecord {
    /// 0-based step.
    pub step: u64,
    /// Batch-mean loss.
    pub loss: f32,
}

/// Quality of the learned features on the valid pixels of every camera.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvalReport {
    /// Mean over valid pixels of cos(rendered, target).
    pub mean_cosine: f64,
    /// Mean over cameras of the masked L1 loss (normalised by C·H·W).
    pub mean_l1: f64,
    /// Valid pixels evaluated.
    pub pixels: usize,
}

/// An engine set up to train one scene.
pub struct Session<B: Backend> {
    /// The engine (world + schedule).
    pub engine: Engine,
    config: Config,
    channels: usize,
    backend: PhantomData<B>,
}

/// Default cache budget: half the device's free memory, or 4 GiB if unknown.
fn default_budget<B: Backend>(dev: &B) -> u64 {
    dev.memory().map_or(4 << 30, |m| m.free / 2)
}

impl<B: Backend> Session<B> {
    /// Builds the engine: plugins, the splat entity, one entity per camera.
    pub fn new(dev: B, config: &Config, scene: SceneData) -> Result<Self, EngineError> {
        config
            .validate()
            .map_err(|e| EngineError::Config(e.to_string()))?;
        scene.validate()?;
        let n = scene.gaussians.len();
        let c = scene.dim();
        let batch = config.train.batch_size as usize;
        if batch > scene.cameras.len() {
            return Err(EngineError::Config(format!(
                "train.batch_size = {batch} exceeds the {} cameras",
                scene.cameras.len()
            )));
        }
        let budget = config
            .render
            .cache_budget
            .unwrap_or_else(|| default_budget(&dev));
        let geometry = dev.upload_geometry(&scene.gaussians)?;
        let max_valid = scene
            .labels
            .iter()
            .map(|l| l.valid.len())
            .max()
            .unwrap_or(0)
            .max(1);
        let mut frames = Vec::with_capacity(batch);
        for _ in 0..batch {
            frames.push(Frame::<B> {
                rendered: dev.alloc(max_valid * c)?,
                d_rendered: dev.alloc(max_valid * c)?,
                scratch: Scratch::default(),
            });
        }
        let x = if config.train.init_std > 0.0 {
            let mut rng = lsplat_core::Rng::new(config.train.seed ^ 0x1a17);
            let init: Vec<f32> = (0..n * c)
                .map(|_| config.train.init_std * rng.normal())
                .collect();
            dev.upload(&init)?
        } else {
            dev.alloc(n * c)?
        };
        let params = FeatureParams::<B> {
            x,
            rendered: dev.alloc(n * c)?,
            channels: c,
        };
        let grads = Gradients::<B> {
            d_rendered: dev.alloc(n * c)?,
            d_x: dev.alloc(n * c)?,
        };
        let adam = AdamState::<B> {
            m: dev.alloc(n * c)?,
            v: dev.alloc(n * c)?,
        };

        let mut engine = Engine::new();
        engine
            .add_plugin(BackendPlugin(dev))
            .add_plugin(TilePlugin {
                tile_size: config.render.tile_size,
            })
            .add_plugin(LossPlugin::<B>::new(config.train.loss))
            .add_plugin(OperatorCachePlugin::<B>::new(budget))
            .add_plugin(MetricsPlugin::<B>::new(config.log.every as u64));
        if let Some(e) = engine.world.resource_mut::<Fault>().0.take() {
            return Err(e);
        }
        let collective = Collective::default();
        let sampler = CameraSampler::new(
            scene.cameras.len(),
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
        engine.world.spawn((
            Geometry::<B> {
                buffers: geometry,
                count: n,
            },
            params,
            grads,
            adam,
        ));
        let allowed = CacheLevel::from_mode(config.render.cache);
        let mut index = Vec::with_capacity(scene.cameras.len());
        for (i, (camera, labels)) in scene.cameras.into_iter().zip(scene.labels).enumerate() {
            let e = engine.world.spawn((
                CameraView { camera, index: i },
                Labels(labels),
                Cache::<B> {
                    cache: Default::default(),
                    allowed,
                    last_used: 0,
                },
                Shard(0),
            ));
            index.push(e.id());
        }
        engine.insert_resource(CameraIndex(index));
        engine.initialize()?;
        Ok(Session {
            engine,
            config: config.clone(),
            channels: c,
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
        let world = &mut self.engine.world;
        let mut q = world.query::<(&FeatureParams<B>, &AdamState<B>, &Geometry<B>)>();
        let (params, adam, geometry) = q.single(world).expect("one splat cloud");
        let target = crate::systems::checkpoint::CheckpointTarget {
            run_dir: Default::default(),
            keep: 1,
            config,
            backend,
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
        world.resource_mut::<Step>().0 = ckpt.step;
        world
            .resource_mut::<Sampler>()
            .0
            .seek(ckpt.sampler_position);
        world.resource_mut::<Metrics<B>>().unread_from = ckpt.step;
        Ok(())
    }

    /// Runs one training step.
    pub fn step(&mut self) -> Result<(), EngineError> {
        self.engine.step()
    }

    /// Steps run so far.
    pub fn steps_done(&self) -> u64 {
        self.engine.world.resource::<Step>().0
    }

    /// Feature channels C.
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
        let world = &mut self.engine.world;
        let mut q = world.query::<&FeatureParams<B>>();
        let p = q.single(world).expect("one splat cloud");
        Ok(world.resource::<Dev<B>>().0.download(&p.x)?)
    }

    /// The per-Gaussian features as rendered `[N, C]` (unit rows for V1).
    pub fn features(&mut self) -> Result<Vec<f32>, EngineError> {
        let normalize = self.config.train.normalize;
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
    /// them with the targets.
    pub fn evaluate(&mut self) -> Result<EvalReport, EngineError> {
        let feats = self.features()?;
        let world = &mut self.engine.world;
        let tile = self.config.render.tile_size;
        let clip = (self.config.render.near, self.config.render.far);
        let mut geo_q = world.query::<&Geometry<B>>();
        let mut cams = world.query::<(&CameraView, &Labels, &Cache<B>, Option<&GroundTruth<B>>)>();
        let world = &*world;
        let geometry = geo_q.single(world).expect("one splat cloud");
        let dev = &world.resource::<Dev<B>>().0;
        let c = self.channels;
        let x = dev.upload(&feats)?;
        let (mut cos_sum, mut pixels, mut l1_sum, mut n_cams) = (0f64, 0usize, 0f64, 0usize);
        for (view, labels, cached, gt) in cams.iter(world) {
            let owned;
            let gt = match gt {
                Some(g) => &g.0,
                None => {
                    owned = crate::gt::upload(dev, &labels.0, tile)?;
                    &owned
                }
            };
            let grid = gt.pixels.grid;
            let mut scratch = Scratch::<B>::default();
            if cached.cache.level() == CacheLevel::None {
                cache::project(
                    dev,
                    &geometry.buffers,
                    &view.camera,
                    grid,
                    clip,
                    &mut scratch,
                )?;
                cache::bin(dev, grid, &mut scratch)?;
            }
            let mut out = dev.alloc::<f32>(gt.pixels.len * c)?;
            cache::forward(dev, &cached.cache, &scratch, &gt.pixels, &x, c, &mut out)?;
            let rendered = dev.download(&out)?;
            let mask = dev.download(&gt.mask)?;
            let table = dev.download(&gt.table)?;
            let mut l1 = 0f64;
            for (i, &m) in mask.iter().enumerate() {
                let f = &rendered[i * c..(i + 1) * c];
                let g = &table[m as usize * c..(m as usize + 1) * c];
                let dot: f64 = f
                    .iter()
                    .zip(g)
                    .map(|(a, b)| (*a as f64) * (*b as f64))
                    .sum();
                let nf: f64 = f.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
                let ng: f64 = g.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
                cos_sum += dot / (nf * ng).max(1e-12);
                l1 += f
                    .iter()
                    .zip(g)
                    .map(|(a, b)| (*a as f64 - *b as f64).abs())
                    .sum::<f64>();
            }
            pixels += mask.len();
            l1_sum += l1 / (c as f64 * grid.pixel_count() as f64);
            n_cams += 1;
        }
        Ok(EvalReport {
            mean_cosine: cos_sum / pixels.max(1) as f64,
            mean_l1: l1_sum / n_cams.max(1) as f64,
            pixels,
        })
    }
}
