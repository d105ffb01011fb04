//! LangSplatV2 as an engine model (`train.model = "langsplat_v2"`): its state, its
//! systems in the engine's phases, and its outputs. Everything here uses the
//! engine's public API; the device work is this crate's ops ([`crate::ops`]), so it
//! runs on every backend.
//!
//! One step, per batch camera (workload.md §3):
//! - Rasterize: the 64-channel weights (4 non-zeros per Gaussian) composited through
//!   the camera's cache into its frame;
//! - Loss: `bg = table·Bᵀ`, `G = B·Bᵀ`, then per valid pixel the cosine between the
//!   decoded `F = Bᵀw` and its CLIP target from `w·bg` and `wᵀGw` — `[512, H, W]` and
//!   `[valid, 512]` are never formed — its gradient in w, and the codebook gradient
//!   `uᵀ·table + s·B` from per-pixel coefficients;
//! - Backward: `Wᵀ` of the weight gradients at the 4 selected codes;
//! - Step: one pass per Gaussian — the gradient through the top-4 softmax, Adam on
//!   its 64 logits, and the top-4 selection of the updated logits for the next step
//!   — then Adam on the codebook (the run's `train.lr`, β and ε).

use std::path::Path;

use bevy_ecs::prelude::*;
use lsplat_data::SceneData;
use lsplat_device::{Backend, DeviceError, OpArg, Scalar};
use lsplat_engine::resources::Dev;
use lsplat_engine::{Engine, EngineError, Model, ModelContext, ModelState, TrainSystems};

use crate::{CODES, TOP_K, ops, systems};

/// The model's name (`train.model`).
pub const NAME: &str = "langsplat_v2";
/// Steps of LangSplatV2's schedule (its `train.sh`): the run's length when
/// `train.iterations` is not set.
pub const DEFAULT_ITERATIONS: u32 = 10_000;
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
    pub(crate) d_codebook: B::Buf<f32>,
    pub(crate) m_logits: B::Buf<f32>,
    pub(crate) v_logits: B::Buf<f32>,
    pub(crate) m_codebook: B::Buf<f32>,
    pub(crate) v_codebook: B::Buf<f32>,
    /// Selected codes `[N, 4]`.
    pub idx: B::Buf<u32>,
    /// Their weights `[N, 4]`.
    pub val: B::Buf<f32>,
    /// The loss gradient of `val`.
    pub(crate) d_val: B::Buf<f32>,
    /// Per Gaussian, 1 when a batch camera of this step sees it (or for every
    /// Gaussian when a camera has no operator), else 0.
    pub(crate) vis: B::Buf<f32>,
    /// Per camera (its index in the scene), the bits of the Gaussians it sees
    /// ([`crate::ops::VisBitsOp`]), made at its first step with an operator.
    pub(crate) seen_bits: Vec<B::Buf<u32>>,
    /// Whether `seen_bits[camera]` has been made.
    pub(crate) seen_known: Vec<bool>,
    /// Scratch `[N]`: a camera's probe `Wᵀ·1`, from which its bits are made.
    pub(crate) probe: B::Buf<f32>,
    /// Per Gaussian, the last Adam step its logits, moments and selection hold (lazy
    /// Adam: [`crate::ops::CatchUpOp`] replays the rest).
    pub(crate) last: B::Buf<u32>,
    /// Zeros `[N]` and ones `[max valid]`: the probe `vis += Wᵀ·1` as a 1-channel
    /// sparse product.
    pub(crate) probe_idx: B::Buf<u32>,
    pub(crate) ones: B::Buf<f32>,
    /// Adam steps taken.
    pub(crate) steps: u32,
    /// Adam's hyper-parameters over the logits.
    pub(crate) hyper: ops::Hyper,
    /// Whether `idx`/`val` hold the selection of the current logits (the step's
    /// Adam pass selects for the next step) and `dense` may be stale.
    pub(crate) selected: bool,
    /// Dense `[N, 64]` weights and their gradient, for cameras composited without an
    /// operator cache.
    pub(crate) dense: B::Buf<f32>,
    pub(crate) d_dense: B::Buf<f32>,
    pub(crate) bg: B::Buf<f32>,
    pub(crate) gram: B::Buf<f32>,
    pub(crate) gnorm: B::Buf<f32>,
    pub(crate) rho: B::Buf<f32>,
    pub(crate) coef: B::Buf<f32>,
    pub(crate) u: B::Buf<f32>,
    pub(crate) s: B::Buf<f32>,
    /// Scratch of `lv2_acc` (its blocks' partial sums) and its finish counter.
    pub(crate) acc_part: B::Buf<f32>,
    pub(crate) acc_count: B::Buf<u32>,
}

impl<B: Backend> V2State<B> {
    /// Brings the Gaussians with `vis != 0` up to the last step taken (their missed
    /// zero-gradient Adam steps and their selection).
    pub(crate) fn catch_up(&mut self, dev: &B) -> Result<(), DeviceError> {
        let n = self.gaussians;
        let [a, b, c, d] =
            ops::CatchUpOp::scalars(&self.hyper).map(|x| OpArg::Scalar(Scalar::F32(x)));
        dev.run_op(
            &ops::CatchUpOp { gaussians: n },
            n,
            &mut [
                OpArg::F32Mut(&mut self.logits),
                OpArg::F32Mut(&mut self.m_logits),
                OpArg::F32Mut(&mut self.v_logits),
                OpArg::U32Mut(&mut self.idx),
                OpArg::F32Mut(&mut self.val),
                OpArg::F32(&self.vis),
                OpArg::U32Mut(&mut self.last),
                OpArg::Scalar(Scalar::U32(self.steps)),
                a,
                b,
                c,
                d,
            ],
        )
    }

    /// Every Gaussian brought up to the last step and selected: the trained model, as
    /// the dense Adam would hold it (outputs and evaluation read this).
    pub fn finish(&mut self, dev: &B) -> Result<(), DeviceError> {
        dev.fill(&mut self.vis, 1.0)?;
        self.catch_up(dev)?;
        self.select(dev)
    }

    /// Top-4 softmax of the current logits into `idx`, `val` and the dense weights
    /// (every Gaussian must be caught up: [`Self::finish`]).
    pub fn select(&mut self, dev: &B) -> Result<(), DeviceError> {
        let n = self.gaussians;
        self.selected = true;
        dev.run_op(
            &ops::TopKOp { gaussians: n },
            n,
            &mut [
                OpArg::F32(&self.logits),
                OpArg::U32Mut(&mut self.idx),
                OpArg::F32Mut(&mut self.val),
                OpArg::F32Mut(&mut self.dense),
            ],
        )
    }

    /// One camera's products `table·Bᵀ`, `B·Bᵀ`, `|g|`, then the fused decode +
    /// cosine of its rendered weights `w`: `d_w`, and ρ and the two coefficients per
    /// valid pixel in the state's scratch.
    pub fn decode_cosine(
        &mut self,
        dev: &B,
        gt: &lsplat_device::GroundTruth<B>,
        w: &B::Buf<f32>,
        d_w: &mut B::Buf<f32>,
        grad_scale: f32,
    ) -> Result<(), DeviceError> {
        let (rows, v, d) = (gt.rows, gt.pixels.len, self.dim);
        dev.run_op(
            &ops::PrepOp { rows, dim: d },
            rows * CODES + CODES * CODES + rows,
            &mut [
                OpArg::F32(&self.codebook),
                OpArg::F32(&gt.table),
                OpArg::F32Mut(&mut self.bg),
                OpArg::F32Mut(&mut self.gram),
                OpArg::F32Mut(&mut self.gnorm),
                OpArg::Scalar(Scalar::U32(d as u32)),
            ],
        )?;
        dev.run_op(
            &ops::CosineOp { rows, pixels: v },
            v,
            &mut [
                OpArg::F32(w),
                OpArg::U32(&gt.mask),
                OpArg::F32(&self.bg),
                OpArg::F32(&self.gram),
                OpArg::F32(&self.gnorm),
                OpArg::F32Mut(d_w),
                OpArg::F32Mut(&mut self.rho),
                OpArg::F32Mut(&mut self.coef),
                OpArg::Scalar(Scalar::F32(grad_scale)),
            ],
        )
    }
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

    fn default_iterations(&self) -> u32 {
        DEFAULT_ITERATIONS
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
        // Codebook: mini-batch k-means over every mask feature of the loaded level on
        // the fitted cameras (held-out cameras, `eval.holdout`, stay unseen).
        let holdout = &ctx.config.eval;
        let rows: Vec<f32> = scene
            .labels
            .iter()
            .enumerate()
            .filter(|(i, _)| !holdout.is_held_out(*i))
            .flat_map(|(_, l)| l.features.iter().copied())
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
                d_codebook: dev.alloc(CODES * d)?,
                m_logits: dev.alloc(n * CODES)?,
                v_logits: dev.alloc(n * CODES)?,
                m_codebook: dev.alloc(CODES * d)?,
                v_codebook: dev.alloc(CODES * d)?,
                idx: dev.alloc(n * TOP_K)?,
                val: dev.alloc(n * TOP_K)?,
                d_val: dev.alloc(n * TOP_K)?,
                vis: dev.alloc(n)?,
                seen_bits: (0..scene.cameras.len())
                    .map(|_| dev.alloc(ops::vis_words(n)))
                    .collect::<Result<_, _>>()?,
                seen_known: vec![false; scene.cameras.len()],
                probe: dev.alloc(n)?,
                last: dev.alloc(n)?,
                probe_idx: dev.alloc(n)?,
                ones: dev.upload(&vec![1.0f32; v.max(1)])?,
                steps: 0,
                hyper: ops::Hyper {
                    lr: t.lr,
                    beta1: t.beta1,
                    beta2: t.beta2,
                    eps: t.eps,
                },
                selected: false,
                dense: dev.alloc(n * CODES)?,
                d_dense: dev.alloc(n * CODES)?,
                bg: dev.alloc(rows_max * CODES)?,
                gram: dev.alloc(CODES * CODES)?,
                gnorm: dev.alloc(rows_max)?,
                rho: dev.alloc(v)?,
                coef: dev.alloc(2 * v)?,
                u: dev.alloc(rows_max * CODES)?,
                acc_part: dev.alloc(ops::AccOp::part_len(rows_max))?,
                acc_count: dev.upload(&[0u32])?,
                s: dev.alloc(CODES * CODES)?,
            }
        };
        engine.insert_resource(state);
        let admitted = lsplat_engine::systems::cache::admit_caches::<B>;
        let binned = lsplat_engine::systems::render::bin_cold::<B>;
        engine.add_systems(
            TrainSystems::Rasterize,
            (
                systems::mark_all::<B>.run_if(systems::dense_needed::<B>),
                systems::probe_visible::<B>.run_if(not(systems::dense_needed::<B>)),
                systems::catch_up::<B>,
                systems::select_codes::<B>.run_if(systems::dense_needed::<B>),
                systems::render_weights::<B>,
            )
                .chain()
                .after(binned)
                .after(admitted),
        );
        engine.add_systems(TrainSystems::Loss, systems::decode_loss::<B>);
        engine.add_systems(TrainSystems::Backward, systems::backward::<B>);
        engine.add_systems(TrainSystems::Step, systems::adam::<B>);
        Ok(())
    }

    fn evaluate(
        &self,
        world: &mut World,
        cameras: &[usize],
    ) -> Result<Option<lsplat_engine::EvalReport>, EngineError> {
        crate::evaluate::evaluate::<B>(world, cameras).map(Some)
    }

    fn write_outputs(&self, world: &mut World, dir: &Path) -> Result<Vec<String>, EngineError> {
        crate::outputs::write::<B>(world, dir)
    }

    fn checkpoints(&self) -> bool {
        true
    }

    fn snapshot(&self, world: &mut World) -> Result<ModelState, EngineError> {
        crate::checkpoint::snapshot::<B>(world)
    }

    fn restore(&self, world: &mut World, state: ModelState, steps: u64) -> Result<(), EngineError> {
        crate::checkpoint::restore::<B>(world, state, steps)
    }
}
