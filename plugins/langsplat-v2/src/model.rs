//! LangSplatV2 as an engine model (`train.model = "langsplat_v2"`): its state, its
//! systems in the engine's phases, and its outputs. Everything here uses the
//! engine's public API; the device work is this crate's ops ([`crate::ops`]), so it
//! runs on every backend.
//!
//! One step, per batch camera (workload.md §3):
//! - Rasterize: top-4 softmax of each Gaussian's 64 logits (once per step), and the
//!   64-channel weights composited through the camera's cache into its frame;
//! - Loss: `bg = table·Bᵀ`, `G = B·Bᵀ`, then per valid pixel the cosine between the
//!   decoded `F = Bᵀw` and its CLIP target from `w·bg` and `wᵀGw` — `[512, H, W]` and
//!   `[valid, 512]` are never formed — its gradient in w, and the codebook gradient
//!   `uᵀ·table + s·B` from per-pixel coefficients;
//! - Backward: `Wᵀ` of the weight gradients, then through the top-4 softmax;
//! - Step: Adam on {logits, codebook} with the run's `train.lr`, β and ε.

use std::path::Path;

use bevy_ecs::prelude::*;
use lsplat_data::SceneData;
use lsplat_device::{AdamParams, Backend, OpArg, Scalar};
use lsplat_engine::components::{Cache, GroundTruth, InBatch};
use lsplat_engine::resources::{Dev, Fault, Frames, Metrics, Step, TrainSettings};
use lsplat_engine::{Engine, EngineError, Model, ModelContext, TrainSystems};

use crate::ops;
use crate::{CODES, TOP_K};

/// The model's name (`train.model`).
pub const NAME: &str = "langsplat_v2";
/// Narrowest ground truth V2 accepts: it decodes CLIP-like embeddings through a
/// 64-entry codebook; a 3-D autoencoder code is V1's job.
pub const MIN_DIM: usize = 32;

/// LangSplatV2 (the model; its state lives in [`V2State`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct LangSplatV2;

/// Parameters, gradients, Adam moments and per-step scratch, all on the device.
#[derive(Resource)]
pub struct V2State<B: Backend> {
    /// Gaussians N.
    pub gaussians: usize,
    /// Feature width D.
    pub dim: usize,
    /// Most mask rows of any camera.
    pub rows_max: usize,
    /// Logits `[N, 64]`.
    pub logits: B::Buf<f32>,
    /// Codebook `[64, D]`.
    pub codebook: B::Buf<f32>,
    d_logits: B::Buf<f32>,
    d_codebook: B::Buf<f32>,
    m_logits: B::Buf<f32>,
    v_logits: B::Buf<f32>,
    m_codebook: B::Buf<f32>,
    v_codebook: B::Buf<f32>,
    /// Selected codes `[N, 4]`.
    pub idx: B::Buf<u32>,
    /// Their weights `[N, 4]`.
    pub val: B::Buf<f32>,
    dense: B::Buf<f32>,
    d_dense: B::Buf<f32>,
    bg: B::Buf<f32>,
    gram: B::Buf<f32>,
    gnorm: B::Buf<f32>,
    rho: B::Buf<f32>,
    coef: B::Buf<f32>,
    u: B::Buf<f32>,
    s: B::Buf<f32>,
}

/// Refuses scenes LangSplatV2 cannot train: features narrower than [`MIN_DIM`], or
/// fewer mask features than codes (the k-means codebook needs one per code).
pub fn check_scene(scene: &SceneData) -> Result<(), String> {
    let d = scene.dim();
    if d < MIN_DIM {
        return Err(format!(
            "the dataset's features are {d}-D; LangSplatV2 decodes CLIP embeddings (512-D) through a {CODES}-code codebook and needs at least {MIN_DIM} — train {d}-D codes with train.model = \"langsplat\""
        ));
    }
    let rows: usize = scene.labels.iter().map(|l| l.features.len() / d).sum();
    if rows < CODES {
        return Err(format!(
            "the dataset holds {rows} mask features; the {CODES}-code codebook is initialised by k-means over them and needs at least {CODES}"
        ));
    }
    Ok(())
}

fn config_error(e: impl std::fmt::Display) -> EngineError {
    EngineError::Config(format!("langsplat_v2: {e}"))
}

impl<B: Backend> Model<B> for LangSplatV2 {
    fn name(&self) -> &'static str {
        NAME
    }

    fn render_channels(&self) -> usize {
        CODES
    }

    fn ops(&self) -> Vec<Box<dyn lsplat_device::DeviceOp>> {
        ops::all()
    }

    fn check(&self, scene: &SceneData) -> Result<(), String> {
        check_scene(scene)
    }

    fn build(
        &self,
        engine: &mut Engine,
        ctx: &ModelContext,
        scene: &SceneData,
    ) -> Result<(), EngineError> {
        let (n, d) = (ctx.gaussians, ctx.channels);
        let t = &ctx.config.train;
        // Codebook: mini-batch k-means over every mask feature of the loaded level.
        let rows: Vec<f32> = scene
            .labels
            .iter()
            .flat_map(|l| l.features.iter().copied())
            .collect();
        let codebook = crate::minibatch_kmeans(&rows, d, CODES, t.seed, &Default::default())
            .map_err(config_error)?;
        // Logits: LangSplatV2 starts from zeros, where every code ties; a seeded
        // `train.init_std` normal draw breaks the ties the same way on every backend.
        let mut rng = lsplat_core::Rng::new(t.seed ^ 0x7632);
        let logits: Vec<f32> = (0..n * CODES).map(|_| t.init_std * rng.normal()).collect();
        let rows_max = scene
            .labels
            .iter()
            .map(|l| l.features.len() / d.max(1))
            .max()
            .unwrap_or(0)
            .max(1);
        let v = ctx.max_valid;
        let state = {
            let dev = &engine.world.resource::<Dev<B>>().0;
            V2State::<B> {
                gaussians: n,
                dim: d,
                rows_max,
                logits: dev.upload(&logits)?,
                codebook: dev.upload(&codebook)?,
                d_logits: dev.alloc(n * CODES)?,
                d_codebook: dev.alloc(CODES * d)?,
                m_logits: dev.alloc(n * CODES)?,
                v_logits: dev.alloc(n * CODES)?,
                m_codebook: dev.alloc(CODES * d)?,
                v_codebook: dev.alloc(CODES * d)?,
                idx: dev.alloc(n * TOP_K)?,
                val: dev.alloc(n * TOP_K)?,
                dense: dev.alloc(n * CODES)?,
                d_dense: dev.alloc(n * CODES)?,
                bg: dev.alloc(rows_max * CODES)?,
                gram: dev.alloc(CODES * CODES)?,
                gnorm: dev.alloc(rows_max)?,
                rho: dev.alloc(v)?,
                coef: dev.alloc(2 * v)?,
                u: dev.alloc(rows_max * CODES)?,
                s: dev.alloc(CODES * CODES)?,
            }
        };
        engine.insert_resource(state);
        let admitted = lsplat_engine::systems::cache::admit_caches::<B>;
        let binned = lsplat_engine::systems::render::bin_cold::<B>;
        engine.add_systems(
            TrainSystems::Rasterize,
            (select_codes::<B>, render_weights::<B>)
                .chain()
                .after(binned)
                .after(admitted),
        );
        engine.add_systems(TrainSystems::Loss, decode_loss::<B>);
        engine.add_systems(TrainSystems::Backward, backward::<B>);
        engine.add_systems(TrainSystems::Step, adam::<B>);
        Ok(())
    }

    fn report(&self, world: &mut World) -> Result<serde_json::Value, EngineError> {
        let (cos, pixels, cameras) = evaluate::<B>(world)?;
        Ok(serde_json::json!({
            "mean_cosine_valid": cos,
            "valid_pixels": pixels,
            "cameras": cameras,
        }))
    }

    fn write_outputs(&self, world: &mut World, dir: &Path) -> Result<Vec<String>, EngineError> {
        crate::outputs::write::<B>(world, dir)
    }
}

/// Mean cosine between the decoded and the target feature over the valid pixels of
/// every camera that holds a cache (with the final logits and codebook), the pixels
/// and the cameras counted.
pub fn evaluate<B: Backend>(world: &mut World) -> Result<(f64, usize, usize), EngineError> {
    world.resource_scope(|world, mut state: Mut<V2State<B>>| {
        world.resource_scope(|world, mut frames: Mut<Frames<B>>| {
            let mut q = world.query::<(&Cache<B>, &GroundTruth<B>)>();
            let dev = &world.resource::<Dev<B>>().0;
            let st = &mut *state;
            let n = st.gaussians;
            dev.run_op(
                &ops::TopKOp { gaussians: n },
                n,
                &mut [
                    OpArg::F32(&st.logits),
                    OpArg::U32Mut(&mut st.idx),
                    OpArg::F32Mut(&mut st.val),
                    OpArg::F32Mut(&mut st.dense),
                ],
            )?;
            let frame = &mut frames.0[0];
            let (mut sum, mut pixels, mut cameras) = (0.0f64, 0usize, 0usize);
            for (c, gt) in q.iter(world) {
                if c.cache.level() == lsplat_render::CacheLevel::None {
                    continue;
                }
                let gt = &gt.0;
                let (rows, v, d) = (gt.rows, gt.pixels.len, st.dim);
                lsplat_render::cache::forward(
                    dev,
                    &c.cache,
                    &frame.scratch,
                    &gt.pixels,
                    &st.dense,
                    CODES,
                    &mut frame.rendered,
                )?;
                dev.run_op(
                    &ops::PrepOp { rows, dim: d },
                    rows * CODES + CODES * CODES + rows,
                    &mut [
                        OpArg::F32(&st.codebook),
                        OpArg::F32(&gt.table),
                        OpArg::F32Mut(&mut st.bg),
                        OpArg::F32Mut(&mut st.gram),
                        OpArg::F32Mut(&mut st.gnorm),
                        OpArg::Scalar(Scalar::U32(d as u32)),
                    ],
                )?;
                dev.run_op(
                    &ops::CosineOp { rows, pixels: v },
                    v,
                    &mut [
                        OpArg::F32(&frame.rendered),
                        OpArg::U32(&gt.mask),
                        OpArg::F32(&st.bg),
                        OpArg::F32(&st.gram),
                        OpArg::F32(&st.gnorm),
                        OpArg::F32Mut(&mut frame.d_rendered),
                        OpArg::F32Mut(&mut st.rho),
                        OpArg::F32Mut(&mut st.coef),
                        OpArg::Scalar(Scalar::F32(1.0)),
                    ],
                )?;
                let rho = dev.download(&st.rho)?;
                sum += rho[..v].iter().map(|&r| r as f64).sum::<f64>();
                pixels += v;
                cameras += 1;
            }
            let cos = if pixels > 0 {
                1.0 - sum / pixels as f64
            } else {
                f64::NAN
            };
            Ok((cos, pixels, cameras))
        })
    })
}

/// Top-4 softmax of every Gaussian's logits into `idx`, `val` and the dense weights.
fn select_codes<B: Backend>(
    dev: Res<Dev<B>>,
    mut state: ResMut<V2State<B>>,
    mut fault: ResMut<Fault>,
) {
    let st = &mut *state;
    let n = st.gaussians;
    fault.check(dev.0.run_op(
        &ops::TopKOp { gaussians: n },
        n,
        &mut [
            OpArg::F32(&st.logits),
            OpArg::U32Mut(&mut st.idx),
            OpArg::F32Mut(&mut st.val),
            OpArg::F32Mut(&mut st.dense),
        ],
    ));
}

/// Composites the dense weights of every batch camera into its frame.
fn render_weights<B: Backend>(
    dev: Res<Dev<B>>,
    state: Res<V2State<B>>,
    mut frames: ResMut<Frames<B>>,
    batch: Query<(&Cache<B>, &GroundTruth<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    for (c, gt, slot) in &batch {
        let frame = &mut frames.0[slot.slot];
        fault.check(lsplat_render::cache::forward(
            &dev.0,
            &c.cache,
            &frame.scratch,
            &gt.0.pixels,
            &state.dense,
            CODES,
            &mut frame.rendered,
        ));
    }
}

/// Decode + cosine loss of every batch camera (slot order), the weight gradients
/// into the frames, the codebook gradient, and the batch-mean loss on the device.
fn decode_loss<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    step: Res<Step>,
    mut metrics: ResMut<Metrics<B>>,
    mut frames: ResMut<Frames<B>>,
    mut state: ResMut<V2State<B>>,
    batch: Query<(&GroundTruth<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    let dev = &dev.0;
    let st = &mut *state;
    let weight = 1.0 / settings.0.batch_size as f32;
    let slot = (step.0 % metrics.every) as u32;
    fault.check(dev.fill(&mut st.d_codebook, 0.0));
    let slots = settings.0.batch_size as usize;
    let ordered = (0..slots).flat_map(|s| batch.iter().filter(move |(_, b)| b.slot == s));
    for (i, (gt, b)) in ordered.enumerate() {
        let gt = &gt.0;
        let frame = &mut frames.0[b.slot];
        let (rows, v, d) = (gt.rows, gt.pixels.len, st.dim);
        let scale = weight / gt.pixels.grid.pixel_count() as f32;
        let r = (|| {
            let items = rows * CODES + CODES * CODES + rows;
            dev.run_op(
                &ops::PrepOp { rows, dim: d },
                items,
                &mut [
                    OpArg::F32(&st.codebook),
                    OpArg::F32(&gt.table),
                    OpArg::F32Mut(&mut st.bg),
                    OpArg::F32Mut(&mut st.gram),
                    OpArg::F32Mut(&mut st.gnorm),
                    OpArg::Scalar(Scalar::U32(d as u32)),
                ],
            )?;
            dev.run_op(
                &ops::CosineOp { rows, pixels: v },
                v,
                &mut [
                    OpArg::F32(&frame.rendered),
                    OpArg::U32(&gt.mask),
                    OpArg::F32(&st.bg),
                    OpArg::F32(&st.gram),
                    OpArg::F32(&st.gnorm),
                    OpArg::F32Mut(&mut frame.d_rendered),
                    OpArg::F32Mut(&mut st.rho),
                    OpArg::F32Mut(&mut st.coef),
                    OpArg::Scalar(Scalar::F32(scale)),
                ],
            )?;
            dev.run_op(
                &ops::AccOp { rows, pixels: v },
                rows * CODES + CODES * CODES,
                &mut [
                    OpArg::F32(&frame.rendered),
                    OpArg::U32(&gt.mask),
                    OpArg::F32(&st.coef),
                    OpArg::F32Mut(&mut st.u),
                    OpArg::F32Mut(&mut st.s),
                    OpArg::Scalar(Scalar::U32(v as u32)),
                ],
            )?;
            dev.run_op(
                &ops::CodebookGradOp { rows, dim: d },
                CODES * d,
                &mut [
                    OpArg::F32(&st.u),
                    OpArg::F32(&st.s),
                    OpArg::F32(&gt.table),
                    OpArg::F32(&st.codebook),
                    OpArg::F32Mut(&mut st.d_codebook),
                    OpArg::Scalar(Scalar::U32(rows as u32)),
                ],
            )?;
            dev.run_op(
                &ops::SumOp,
                ops::SUM_THREADS,
                &mut [
                    OpArg::F32(&st.rho),
                    OpArg::F32Mut(&mut metrics.loss),
                    OpArg::Scalar(Scalar::U32(v as u32)),
                    OpArg::Scalar(Scalar::U32(slot)),
                    OpArg::Scalar(Scalar::F32(scale)),
                    OpArg::Scalar(Scalar::U32(u32::from(i > 0))),
                ],
            )
        })();
        fault.check(r);
    }
}

/// `Wᵀ` of every batch camera's weight gradient (slot order), then through the top-4
/// softmax into the logits' gradient.
fn backward<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    frames: Res<Frames<B>>,
    mut state: ResMut<V2State<B>>,
    batch: Query<(&Cache<B>, &GroundTruth<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    let dev = &dev.0;
    let st = &mut *state;
    fault.check(dev.fill(&mut st.d_dense, 0.0));
    let slots = settings.0.batch_size as usize;
    let ordered = (0..slots).flat_map(|s| batch.iter().filter(move |(.., b)| b.slot == s));
    for (c, gt, b) in ordered {
        let frame = &frames.0[b.slot];
        fault.check(lsplat_render::cache::backward(
            dev,
            &c.cache,
            &frame.scratch,
            &gt.0.pixels,
            &frame.d_rendered,
            CODES,
            &mut st.d_dense,
        ));
    }
    let n = st.gaussians;
    fault.check(dev.run_op(
        &ops::TopKBackwardOp { gaussians: n },
        n,
        &mut [
            OpArg::U32(&st.idx),
            OpArg::F32(&st.val),
            OpArg::F32(&st.d_dense),
            OpArg::F32Mut(&mut st.d_logits),
        ],
    ));
}

/// One Adam group over {logits, codebook}.
fn adam<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    step: Res<Step>,
    mut state: ResMut<V2State<B>>,
    mut fault: ResMut<Fault>,
) {
    let t = &settings.0;
    let hp = AdamParams {
        lr: t.lr,
        beta1: t.beta1,
        beta2: t.beta2,
        eps: t.eps,
        step: (step.0 + 1) as u32,
        grad_scale: 1.0,
    };
    let st = &mut *state;
    fault.check(dev.0.adam_step(
        &mut st.logits,
        &st.d_logits,
        &mut st.m_logits,
        &mut st.v_logits,
        &hp,
    ));
    fault.check(dev.0.adam_step(
        &mut st.codebook,
        &st.d_codebook,
        &mut st.m_codebook,
        &mut st.v_codebook,
        &hp,
    ));
}
