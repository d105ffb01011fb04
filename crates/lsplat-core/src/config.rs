//! Typed configuration: one source of defaults for every run.
//!
//! A run's configuration is `Config::default()`, overlaid by a scene/config TOML file,
//! overlaid by `--set key=value` overrides. Unknown keys are errors.

use std::path::{Path, PathBuf};

use lsplat_config_derive::Describe;
use serde::{Deserialize, Serialize};

use crate::CoreError;

/// The whole configuration of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Input files of the scene. Leave every path empty to train the embedded demo.
    /// Relative paths follow one rule: written in a scene file, they are relative to
    /// that file's folder; given on the command line (`--set scene.dataset=...`),
    /// relative to the working directory. A run records them resolved (absolute,
    /// without `.` or `..`) in its `config.toml`.
    pub scene: SceneConfig,
    /// Parameters of the synthetic demo scene (used when `scene` names no files).
    pub demo: DemoConfig,
    /// Optimisation settings.
    pub train: TrainConfig,
    /// Rasterization and caching.
    pub render: RenderConfig,
    /// Which backend runs the ops.
    pub device: DeviceConfig,
    /// The CPU SIMT runtime of the GPU backend (`device.backend = "simt"`).
    pub simt: SimtConfig,
    /// Logging and metrics.
    pub log: LogConfig,
    /// The closed-form and least-squares solvers (`train.solver = average | lsq`).
    pub solve: SolveConfig,
    /// Held-out evaluation.
    pub eval: EvalConfig,
    /// Text queries (`lsplat-engine query`).
    pub query: QueryConfig,
    /// Data-parallel training across ranks (started by `mpirun` or `srun`).
    pub dist: DistConfig,
    /// ONNX Runtime, which runs the neural models (CLIP's encoders).
    pub onnx: OnnxConfig,
    /// Neural models the commands use (CLIP for text queries).
    pub models: ModelsConfig,
    /// `lsplat-engine preprocess`: SAM masks, mask NMS, CLIP crops.
    pub preprocess: crate::preprocess::PreprocessConfig,
}

/// ONNX Runtime. The execution provider follows `device.backend` (`cpu`/`simt`: CPU;
/// `cuda`: CUDA; `hip`: ROCm, then MIGraphX; falling back to the CPU with a printed
/// reason) and the intra-op threads `device.threads`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct OnnxConfig {
    /// The ONNX Runtime library (`libonnxruntime.so…`, or a folder holding it). Unset:
    /// `ORT_DYLIB_PATH`, else the first found in the active Python environment
    /// (`$VIRTUAL_ENV`), a `.venv` in the working directory or above the executable
    /// (`…/site-packages/onnxruntime/capi`), `LD_LIBRARY_PATH` and the standard library
    /// folders. `pip install onnxruntime` (CPU), `onnxruntime-gpu` (CUDA) or
    /// `onnxruntime-rocm` (AMD) provides one.
    pub runtime: Option<PathBuf>,
}

/// Neural models.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct ModelsConfig {
    /// CLIP model folder: `text.onnx`, `image.onnx` and `bpe_simple_vocab_16e6.txt.gz`
    /// (docs/formats.md; `scripts/export_clip.py` makes one). Used by `query` and
    /// `eval lerf` to encode query phrases when `--clip` is not given.
    pub clip: Option<PathBuf>,
    /// CLIP's vocabulary when it is not in the `clip` folder (e.g. the
    /// `open_clip/bpe_simple_vocab_16e6.txt.gz` inside the open_clip_torch wheel).
    pub clip_vocab: Option<PathBuf>,
    /// Texts or images per encoder run.
    #[config(range = ">= 1")]
    pub batch: u32,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        ModelsConfig {
            clip: None,
            clip_vocab: None,
            batch: 32,
        }
    }
}

/// Data-parallel training: ranks come from the MPI launcher; each rank takes its
/// share of every epoch's cameras and the gradients are averaged before each step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct DistConfig {
    /// Longest time, in seconds, one collective (gradient all-reduce, loss read-back,
    /// start-up checks) waits for the other ranks; past it every rank stops with an
    /// error naming the collective (a rank died, hangs or runs something else).
    #[config(range = "(0, 1e6]")]
    pub timeout_s: f64,
    /// How gradients are averaged: `auto` sends only the rows some rank touched when
    /// that (plus a one-bit-per-row mask) is smaller than the whole buffer; `dense`
    /// always sends the whole buffer; `sparse` always the touched rows.
    pub reduce: ReduceKind,
}

impl Default for DistConfig {
    fn default() -> Self {
        DistConfig {
            timeout_s: 300.0,
            reduce: ReduceKind::Auto,
        }
    }
}

/// Gradient averaging across ranks (`dist.reduce`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Describe)]
#[serde(rename_all = "lowercase")]
pub enum ReduceKind {
    /// The smaller of dense and touched rows, decided each step.
    Auto,
    /// The whole gradient buffer.
    Dense,
    /// The touched rows and their mask.
    Sparse,
}

/// Scene inputs. Relative paths resolve against the scene file's folder.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct SceneConfig {
    /// 3DGS PLY with the frozen geometry (Inria layout).
    pub splats: Option<PathBuf>,
    /// Cameras: an Inria `cameras.json`, a COLMAP sparse directory or a nerfstudio
    /// `transforms.json`.
    pub cameras: Option<PathBuf>,
    /// Engine dataset directory (`features.parquet` + `masks.parquet`).
    pub dataset: Option<PathBuf>,
    /// LangSplat feature level to train: 1 = subpart (s), 2 = part (m), 3 = whole (l).
    #[config(range = "[1, 3]")]
    pub level: u8,
}

impl Default for SceneConfig {
    fn default() -> Self {
        SceneConfig {
            splats: None,
            cameras: None,
            dataset: None,
            level: 1,
        }
    }
}

impl SceneConfig {
    /// True when no input file is named: the embedded demo scene is used.
    pub fn is_demo(&self) -> bool {
        self.splats.is_none() && self.cameras.is_none() && self.dataset.is_none()
    }
}

/// The synthetic teacher scene.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct DemoConfig {
    /// Number of Gaussians.
    #[config(range = ">= 1")]
    pub gaussians: u32,
    /// Number of objects, each with its own unit feature.
    #[config(range = ">= 1")]
    pub objects: u32,
    /// Number of cameras on the orbit.
    #[config(range = ">= 1")]
    pub cameras: u32,
    /// Image width.
    #[config(range = ">= 8")]
    pub width: u32,
    /// Image height.
    #[config(range = ">= 8")]
    pub height: u32,
    /// Seed of the scene generator.
    pub seed: u64,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            gaussians: 4000,
            objects: 6,
            cameras: 24,
            width: 192,
            height: 144,
            seed: 7,
        }
    }
}

/// Optimisation (LangSplat V1 defaults, workload.md §2, except `init_std`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Number of optimiser steps; unset = the model's own default
    /// ([`DEFAULT_ITERATIONS`] = 30 000 for LangSplat V1, 10 000 for LangSplatV2), which
    /// a run records in its `config.toml`.
    #[config(range = ">= 1")]
    pub iterations: Option<u32>,
    /// Adam learning rate (constant).
    #[config(range = "(0, 1]")]
    pub lr: f32,
    /// Adam β₁.
    #[config(range = "[0, 1)")]
    pub beta1: f32,
    /// Adam β₂.
    #[config(range = "[0, 1)")]
    pub beta2: f32,
    /// Adam ε.
    #[config(range = "(0, 1]")]
    pub eps: f32,
    /// Seed of the camera sampler (and of anything else random in training).
    pub seed: u64,
    /// Cameras per step; their gradients are averaged.
    #[config(range = ">= 1")]
    pub batch_size: u32,
    /// Loss on the valid pixels.
    pub loss: LossKind,
    /// A loss that a linked plugin provides (`lsplat-engine info` lists them), used
    /// instead of `loss`; empty = the built-in `loss`.
    pub loss_plugin: String,
    /// The model trained: `langsplat` (V1: one feature per Gaussian, composited) or a
    /// model a linked plugin provides (`langsplat_v2`; `lsplat-engine info` lists them).
    pub model: String,
    /// Unit-normalise each Gaussian's feature before rendering (LangSplat V1).
    pub normalize: bool,
    /// Standard deviation of the initial features (normal, seeded by `seed`); 0 = zeros,
    /// LangSplat's exact setting. The default is 0.01: with zeros and the V1
    /// normalisation a Gaussian's first gradient is scaled by 1/1e-9, which inflates its
    /// Adam second moment by ~1e18 and all but freezes it for thousands of steps (300
    /// steps on the biker scene lower the loss 1.07×, 0.01 lowers it 3.9×;
    /// docs/PERFORMANCE.md). `--set train.init_std=0` reproduces LangSplat.
    #[config(range = ">= 0")]
    pub init_std: f32,
    /// How the features are fitted: `adam` (gradient training, LangSplat's schedule),
    /// `average` (closed form: each Gaussian's weighted mean of the valid pixels'
    /// features, one pass) or `lsq` (least squares by conjugate gradient, warm-started
    /// from `average`). The solvers fit the composited feature itself, so a solved run
    /// records `normalize = false`; see the `[solve]` section.
    pub solver: SolverKind,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            iterations: None,
            lr: 2.5e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-15,
            seed: 0,
            batch_size: 1,
            loss: LossKind::MaskedL1,
            loss_plugin: String::new(),
            model: "langsplat".into(),
            normalize: true,
            init_std: 0.01,
            solver: SolverKind::Adam,
        }
    }
}

/// Steps of LangSplat V1 (its `train.py`), the default of `train.iterations` for the
/// built-in model.
pub const DEFAULT_ITERATIONS: u32 = 30_000;

impl TrainConfig {
    /// `iterations`, or [`DEFAULT_ITERATIONS`] when unset (a plugin model's own default
    /// is filled in by the session and the CLI before this is read).
    pub fn iterations(&self) -> u32 {
        self.iterations.unwrap_or(DEFAULT_ITERATIONS)
    }
}

/// How features are fitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Describe)]
#[serde(rename_all = "snake_case")]
pub enum SolverKind {
    /// Adam on the configured loss for `train.iterations` steps.
    Adam,
    /// Weighted average of the valid pixels' features (LUDVIG's rule), one pass.
    Average,
    /// Regularised least squares by preconditioned conjugate gradient.
    Lsq,
}

impl SolverKind {
    /// The name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SolverKind::Adam => "adam",
            SolverKind::Average => "average",
            SolverKind::Lsq => "lsq",
        }
    }
}

/// The closed-form (`average`) and least-squares (`lsq`) solvers.
///
/// `lsq` minimises Σ_cameras ‖M(W·x − f)‖² + λ‖x − x_avg‖² for each level, where W is a
/// fitted camera's operator, M its valid-pixel mask, f the target features and x_avg
/// the `average` solution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct SolveConfig {
    /// Levels solved together (each its own system, all in the same passes over the
    /// cameras); empty = `scene.level` alone.
    pub levels: Vec<u8>,
    /// `lsq`: stop when every level's relative residual ‖b − A·x‖/‖b‖ is at most this.
    #[config(range = "(0, 1)")]
    pub tol: f64,
    /// `lsq`: most conjugate-gradient iterations.
    #[config(range = ">= 1")]
    pub max_iters: u32,
    /// `lsq`: weight λ of the pull towards the `average` solution. It makes the system
    /// positive definite (Gaussians no fitted pixel sees keep x_avg = 0) and damps
    /// directions the cameras barely constrain. Weights are α·T ≤ 1, so a Gaussian's
    /// diagonal Σ w² is ~1e-3–10: λ = 1e-3 leaves well-observed Gaussians at the
    /// least-squares optimum and keeps poorly observed ones near their average
    /// (docs/PERFORMANCE.md measures the choice).
    #[config(range = ">= 0")]
    pub lambda: f32,
    /// ε of the average x = Σ w·f / (Σ w + ε) (LUDVIG's 1e-8).
    #[config(range = "> 0")]
    pub eps: f32,
    /// Scale each Gaussian's solved feature to unit length (per level), as LangSplat
    /// V1's x/|x| would render it. The composite of unit rows is no longer the
    /// least-squares optimum (docs/PERFORMANCE.md measures the loss); the output is
    /// still composited as stored.
    pub unit_rows: bool,
}

impl Default for SolveConfig {
    fn default() -> Self {
        SolveConfig {
            levels: Vec::new(),
            tol: 1e-3,
            max_iters: 500,
            lambda: 1e-3,
            eps: 1e-8,
            unit_rows: false,
        }
    }
}

impl SolveConfig {
    /// The levels a run solves: `levels`, or `[scene_level]` when empty.
    pub fn levels_or(&self, scene_level: u8) -> Vec<u8> {
        if self.levels.is_empty() {
            vec![scene_level]
        } else {
            self.levels.clone()
        }
    }
}

/// Held-out evaluation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe, Default)]
#[serde(default, deny_unknown_fields)]
pub struct EvalConfig {
    /// Hold out every k-th camera: camera i (in the scene's camera order) is held out
    /// when i % k == k − 1 and is never used for fitting; quality is reported on the
    /// held-out and on the fitted cameras. 0 = no camera is held out.
    pub holdout: u32,
}

impl EvalConfig {
    /// Whether camera `i` is held out.
    pub fn is_held_out(&self, i: usize) -> bool {
        let k = self.holdout as usize;
        k > 0 && i % k == k - 1
    }
}

/// Text queries on rendered features (`lsplat-engine query`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct QueryConfig {
    /// Pixels whose rendered opacity (accumulated alpha, Σ αᵢTᵢ) is below this are
    /// background: their relevancy is not lit in the heat-map PNGs (the `.npy` maps
    /// keep every pixel's raw value; `alpha.npy` holds the opacity). In [0, 1]; 0
    /// lights every pixel.
    #[config(range = "[0, 1]")]
    pub min_alpha: f32,
}

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig { min_alpha: 0.5 }
    }
}

/// Loss functions on the valid pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Describe)]
#[serde(rename_all = "snake_case")]
pub enum LossKind {
    /// LangSplat V1: mean over all C·H·W elements of |F − G| on valid pixels.
    MaskedL1,
    /// 1 − mean over H·W of cos(F, G) on valid pixels (invalid pixels count as 0).
    Cosine,
    /// Sum of the two.
    L1Cosine,
}

impl LossKind {
    /// The name a configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            LossKind::MaskedL1 => "masked_l1",
            LossKind::Cosine => "cosine",
            LossKind::L1Cosine => "l1_cosine",
        }
    }
}

/// Rasterization and caching.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct RenderConfig {
    /// Tile edge in pixels: 8 or 16.
    #[config(range = "8 or 16")]
    pub tile_size: u32,
    /// What is cached per camera between visits.
    pub cache: CacheMode,
    /// Bytes the per-camera caches may use; unset = half of the free memory.
    pub cache_budget: Option<u64>,
    /// Bytes the operators that do not fit `cache_budget` may take on disk, in the
    /// run's `cache/` folder (CPU backend; files mapped into memory, products give
    /// the same bits): unset = the free space less `disk_keep_free`, 0 = never spill
    /// (such operators are rebuilt on every use). Whether a camera is spilled or
    /// rebuilt is chosen by comparing its measured build time with the time to read
    /// its operator at the disk's measured bandwidth.
    pub disk_budget: Option<u64>,
    /// Bytes always left free on the cache folder's disk: spilling stops (the rest
    /// are rebuilt on every use) rather than take the disk below this.
    pub disk_keep_free: u64,
    /// The disk's read bandwidth in bytes per second that the spill-or-rebuild choice
    /// assumes; unset = measured once, on the first operator spilled.
    pub disk_read_bandwidth: Option<f64>,
    /// Storage of the cached operators: `f32` (exact: `W·x` is bitwise the
    /// rasterizer's compositing), `f16`, `bf16`, or `compact` (CPU: one-byte gap-coded
    /// positions and 16-bit weights with relative error ≤ 2⁻¹², 3 bytes per entry
    /// against f32's 6; the GPU stores f16 weights), or `recompute` (CPU: positions
    /// only, about 1.2 bytes per entry, exact weights recomputed in every product; the
    /// GPU stores f32). Also read as `render.weights`.
    #[serde(alias = "weights")]
    pub operator_precision: WeightPrecision,
    /// With a cached operator, run a camera's forward, per-pixel loss and backward as
    /// one pass over its operator (`Backend::operator_loss_step`); `false` runs SpMM,
    /// loss and transposed SpMM one after the other (same result to float rounding).
    pub fused: bool,
    /// Near plane (camera z).
    #[config(range = "> 0")]
    pub near: f32,
    /// Far plane (camera z).
    pub far: f32,
}

impl Default for RenderConfig {
    fn default() -> Self {
        RenderConfig {
            tile_size: 16,
            cache: CacheMode::Operator,
            cache_budget: None,
            disk_budget: None,
            disk_keep_free: 1 << 30,
            disk_read_bandwidth: None,
            operator_precision: WeightPrecision::F32,
            fused: true,
            near: crate::constants::DEFAULT_NEAR,
            far: crate::constants::DEFAULT_FAR,
        }
    }
}

/// Per-camera cache level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Describe)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Cache the sparse operator W (valid-pixel rows): a visit is an SpMM.
    Operator,
    /// Cache projection and sorted tile lists: a visit recomputes only the weights.
    Geometry,
    /// Cache nothing: every visit projects, bins, sorts and rasterizes.
    None,
}

/// Precision of cached operator weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Describe)]
#[serde(rename_all = "snake_case")]
pub enum WeightPrecision {
    /// 32-bit float (exact).
    F32,
    /// IEEE half: error ≤ max(2⁻¹¹·w, 2⁻²⁵) per weight w (weights below 2⁻¹⁴ are
    /// subnormal in f16 and keep an absolute error of at most 2⁻²⁵).
    F16,
    /// bfloat16: relative error ≤ 2⁻⁸ per weight.
    Bf16,
    /// The compact layout (CPU): per entry a one-byte gap to the row's previous list
    /// position and a 16-bit unsigned float weight (5 exponent, 11 mantissa bits):
    /// relative error ≤ 2⁻¹² per weight. Backends without that layout store f16.
    Compact,
    /// No weights stored (CPU): per entry only a one-byte gap-coded position (about
    /// 1.2 bytes per entry with the lists, a fifth of `f32`); every product recomputes
    /// the weights α·T from the camera's projection with the rasterizer's own
    /// arithmetic, so they are exact and `W·x` is bitwise the rasterizer's, at the
    /// price of slower products. Backends without it store f32.
    Recompute,
}

/// Backend selection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct DeviceConfig {
    /// The backend that runs the ops: `auto` picks a CUDA GPU when one is usable,
    /// else a HIP GPU, else the CPU, and prints why.
    pub backend: BackendKind,
    /// CPU worker threads (the CPU backend, and the simt runtime's block runners);
    /// 0 = one per physical core.
    pub threads: u32,
    /// GPU ordinal.
    pub ordinal: u32,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            backend: BackendKind::Auto,
            threads: 0,
            ordinal: 0,
        }
    }
}

/// The backends the engine knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Describe)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// The first usable of: a CUDA GPU, a HIP GPU, the CPU (never simt). A run records
    /// the backend chosen (and says why) in its `config.toml`.
    Auto,
    /// The CPU backend (always built).
    Cpu,
    /// NVIDIA GPUs (feature `cuda`).
    Cuda,
    /// AMD GPUs (feature `hip`).
    Hip,
    /// The GPU backend on the CPU: the same kernels, run as fibers (always built).
    Simt,
}

impl BackendKind {
    /// The name a configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Auto => "auto",
            BackendKind::Cpu => "cpu",
            BackendKind::Cuda => "cuda",
            BackendKind::Hip => "hip",
            BackendKind::Simt => "simt",
        }
    }
}

/// The simt runtime: the CPU executing the GPU kernels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct SimtConfig {
    /// Lanes per warp: 32 (CUDA semantics) or 64 (the HIP wave64 branch of compat.h).
    #[config(range = "32 or 64")]
    pub warp: u32,
    /// Order in which a block's threads run between synchronisation points.
    pub schedule: SimtSchedule,
    /// Seed of the random schedule.
    pub seed: u64,
}

impl Default for SimtConfig {
    fn default() -> Self {
        SimtConfig {
            warp: 32,
            schedule: SimtSchedule::InOrder,
            seed: 0,
        }
    }
}

/// Fiber order of the simt runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Describe)]
#[serde(rename_all = "kebab-case")]
pub enum SimtSchedule {
    /// Thread 0, 1, 2, …
    InOrder,
    /// The last thread first.
    Reverse,
    /// A seeded random permutation at every synchronisation point.
    Random,
}

/// Logging and metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Describe)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Read the device-side metrics back every this many steps.
    #[config(range = ">= 1")]
    pub every: u32,
    /// Show progress on stderr: a bar on a terminal; elsewhere (CI, `nohup`, Slurm
    /// logs) a plain line with the count, the rate, the time left and the loss.
    pub progress: bool,
    /// After training, render every camera's valid pixels and report how well the
    /// targets are reproduced (mean cosine, L1). Costs one render per camera.
    pub eval: bool,
    /// Write a checkpoint (parameters, Adam moments, step, sampler position, this
    /// configuration) every this many steps; one is always written after the last
    /// step; 0 = only that one.
    pub checkpoint_every: u32,
    /// Checkpoints kept in the run directory (the newest; at least 1).
    #[config(range = ">= 1")]
    pub checkpoint_keep: u32,
    /// Off a terminal, a progress line is printed at least every this many seconds
    /// (positive).
    #[config(range = "> 0")]
    pub progress_every_s: f64,
    /// Off a terminal, a progress line is also printed each time this share of the
    /// work (percent, in (0, 100]) is done.
    #[config(range = "(0, 100]")]
    pub progress_every_percent: f64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            every: 100,
            progress: true,
            eval: true,
            checkpoint_every: 2000,
            checkpoint_keep: 3,
            progress_every_s: 30.0,
            progress_every_percent: 10.0,
        }
    }
}

/// The table a run's `config.toml` ends with: the identity of the run (its inputs'
/// sizes and times, a hash of the settings), written and checked by
/// `lsplat_data::run::identity`; ignored when the file is read as configuration.
pub const RUN_RECORD: &str = "run";

impl Config {
    /// Parses a TOML document over the defaults. `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Config, CoreError> {
        toml::from_str(text).map_err(|e| CoreError::ConfigFile {
            path: origin.to_path_buf(),
            problem: one_line(&e.to_string()),
        })
    }

    /// Reads a scene file over the defaults, resolves its relative paths against the
    /// file's folder (to absolute paths) and validates it; errors name the file. A
    /// scene file must name its inputs (`[scene]` splats, cameras, dataset) or ask for
    /// the synthetic demo with a `[demo]` section: an empty file is an error, not the
    /// demo.
    pub fn load(path: &Path) -> Result<Config, CoreError> {
        let file_err = |problem: String| CoreError::ConfigFile {
            path: path.to_path_buf(),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_err(e.to_string()))?;
        let mut table: toml::Table =
            toml::from_str(&text).map_err(|e| file_err(one_line(&e.to_string())))?;
        // A run's config.toml ends with its `[run]` record (what the run was made
        // from); it is not configuration, so a copied config.toml reads as a scene.
        let mut cfg = if table.remove(RUN_RECORD).is_some() {
            let rest = toml::to_string(&table).map_err(|e| file_err(e.to_string()))?;
            Config::from_toml(&rest, path)?
        } else {
            Config::from_toml(&text, path)?
        };
        if cfg.scene.is_demo() && !table.contains_key("demo") {
            return Err(file_err(
                "names no scene inputs: give `[scene]` splats, cameras and dataset, or a `[demo]` section for the synthetic demo scene".into(),
            ));
        }
        // A bare file name (`scene.toml`) has an empty parent: the working directory.
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        let base = std::path::absolute(parent.unwrap_or(Path::new(".")))
            .map_err(|e| file_err(e.to_string()))?;
        cfg.resolve_paths(&base);
        cfg.validate().map_err(|e| file_err(e.to_string()))?;
        Ok(cfg)
    }

    /// Makes the scene paths absolute: relative ones are taken relative to `base`
    /// (itself made absolute against the working directory), so a run directory's
    /// `config.toml` names its inputs wherever it is read from.
    pub fn resolve_paths(&mut self, base: &Path) {
        for p in [
            &mut self.scene.splats,
            &mut self.scene.cameras,
            &mut self.scene.dataset,
            &mut self.onnx.runtime,
            &mut self.models.clip,
            &mut self.models.clip_vocab,
        ]
        .into_iter()
        .flatten()
        {
            if p.is_relative() {
                let joined = base.join(&*p);
                *p = std::path::absolute(&joined).unwrap_or(joined);
            }
            *p = lexically_normal(p);
        }
    }

    /// Applies one `key=value` override (`train.iterations=500`). The value is read
    /// as a TOML value (number, bool, quoted string, array) or else as a bare string.
    pub fn set(&mut self, assignment: &str) -> Result<(), CoreError> {
        let (key, raw) = assignment
            .split_once('=')
            .ok_or_else(|| CoreError::BadValue {
                key: assignment.to_string(),
                problem: "expected key=value".into(),
            })?;
        let key = match key.trim() {
            // The old name of `render.operator_precision`.
            "render.weights" => "render.operator_precision",
            k => k,
        };
        let raw = raw.trim();
        let value = match toml::from_str::<toml::Table>(&format!("v = {raw}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
        {
            Some(v) => v,
            // A number TOML cannot hold (an integer above 2^63 − 1) is out of range,
            // not a string.
            None if looks_numeric(raw) => {
                return Err(CoreError::BadValue {
                    key: key.into(),
                    problem: format!("{raw} is out of range (integers are at most {})", i64::MAX),
                });
            }
            None => toml::Value::String(raw.to_string()),
        };
        let mut root = toml::Value::try_from(&*self).expect("config serialises");
        let parts: Vec<&str> = key.split('.').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(CoreError::UnknownKey {
                key: key.into(),
                hint: String::new(),
            });
        }
        let mut node = &mut root;
        for (i, part) in parts.iter().enumerate() {
            let table = node.as_table_mut().ok_or_else(|| CoreError::UnknownKey {
                key: key.into(),
                hint: format!(" (`{}` is not a section)", parts[..i].join(".")),
            })?;
            if i + 1 == parts.len() {
                table.insert(part.to_string(), value.clone());
                break;
            }
            node = table
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(Default::default()));
        }
        let updated: Config = root.try_into().map_err(|e: toml::de::Error| {
            let msg = one_line(&e.to_string());
            if msg.contains("unknown field") {
                CoreError::UnknownKey {
                    key: key.into(),
                    hint: format!(" ({msg})"),
                }
            } else {
                CoreError::BadValue {
                    key: key.into(),
                    problem: out_of_range(raw, msg),
                }
            }
        })?;
        updated.validate()?;
        *self = updated;
        Ok(())
    }

    /// Range checks that serde cannot express.
    pub fn validate(&self) -> Result<(), CoreError> {
        let bad = |key: &str, problem: String| {
            Err(CoreError::BadValue {
                key: key.into(),
                problem,
            })
        };
        if !crate::constants::SUPPORTED_TILE_SIZES.contains(&self.render.tile_size) {
            return bad(
                "render.tile_size",
                format!("{} is not one of 8, 16", self.render.tile_size),
            );
        }
        if !(1..=3).contains(&self.scene.level) {
            return bad(
                "scene.level",
                format!("{} is not 1, 2 or 3", self.scene.level),
            );
        }
        if self.train.iterations == Some(0) {
            return bad("train.iterations", "must be at least 1".into());
        }
        self.preprocess.validate()?;
        if self.log.checkpoint_keep == 0 {
            return bad("log.checkpoint_keep", "must be at least 1".into());
        }
        let machine = std::thread::available_parallelism().map_or(1, |n| n.get());
        if self.device.threads as usize > machine {
            return bad(
                "device.threads",
                format!(
                    "{} exceeds the {machine} hardware threads of this machine (0 = one per physical core)",
                    self.device.threads
                ),
            );
        }
        if self.train.batch_size == 0 {
            return bad("train.batch_size", "must be at least 1".into());
        }
        if self.log.every == 0 {
            return bad("log.every", "must be at least 1".into());
        }
        if self.models.batch == 0 {
            return bad("models.batch", "must be at least 1".into());
        }
        if !(self.log.progress_every_s > 0.0 && self.log.progress_every_s.is_finite()) {
            return bad(
                "log.progress_every_s",
                format!(
                    "{} must be a positive number of seconds",
                    self.log.progress_every_s
                ),
            );
        }
        if !(self.log.progress_every_percent > 0.0 && self.log.progress_every_percent <= 100.0) {
            return bad(
                "log.progress_every_percent",
                format!("{} is not in (0, 100]", self.log.progress_every_percent),
            );
        }
        if !(0.0..=1.0).contains(&self.query.min_alpha) {
            return bad(
                "query.min_alpha",
                format!("{} is not in [0, 1]", self.query.min_alpha),
            );
        }
        if !(self.train.init_std >= 0.0 && self.train.init_std.is_finite()) {
            return bad(
                "train.init_std",
                format!("{} must be ≥ 0", self.train.init_std),
            );
        }
        if !(self.train.lr > 0.0 && self.train.lr <= 1.0) {
            return bad(
                "train.lr",
                format!(
                    "{:?} must be in (0, 1]: Adam moves every value by up to lr per step, and the targets lie in [-1, 1]",
                    self.train.lr
                ),
            );
        }
        if !(self.train.eps > 0.0 && self.train.eps <= 1.0) {
            return bad(
                "train.eps",
                format!(
                    "{:?} must be in (0, 1]: Adam divides by sqrt(v) + eps, and v is 0 for a value no pixel has touched yet (LangSplat's eps is 1e-15)",
                    self.train.eps
                ),
            );
        }
        if !(0.0..1.0).contains(&self.train.beta1) || !(0.0..1.0).contains(&self.train.beta2) {
            return bad("train.beta1/beta2", "must be in [0, 1)".into());
        }
        if let Some(bw) = self.render.disk_read_bandwidth
            && !(bw > 0.0 && bw.is_finite())
        {
            return bad(
                "render.disk_read_bandwidth",
                format!("{bw} bytes per second: need a positive finite number"),
            );
        }
        if !(self.render.near > 0.0 && self.render.far > self.render.near) {
            return bad("render.near/far", "need 0 < near < far".into());
        }
        if !(self.dist.timeout_s > 0.0 && self.dist.timeout_s <= 1e6) {
            return bad(
                "dist.timeout_s",
                format!(
                    "{:?} must be a positive number of seconds, at most 1e6 (11.6 days)",
                    self.dist.timeout_s
                ),
            );
        }
        if !matches!(self.simt.warp, 32 | 64) {
            return bad("simt.warp", format!("{} is not 32 or 64", self.simt.warp));
        }
        if self.eval.holdout == 1 {
            return bad(
                "eval.holdout",
                "1 would hold out every camera (use 0 for none, or k ≥ 2)".into(),
            );
        }
        let sv = &self.solve;
        if let Some(l) = sv.levels.iter().find(|l| !(1..=3).contains(*l)) {
            return bad("solve.levels", format!("{l} is not 1, 2 or 3"));
        }
        for (i, l) in sv.levels.iter().enumerate() {
            if sv.levels[..i].contains(l) {
                return bad("solve.levels", format!("level {l} is listed twice"));
            }
        }
        if sv.levels.len() > 1 && self.train.solver == SolverKind::Adam {
            return bad(
                "solve.levels",
                "several levels at once need `train.solver = average` or `lsq` (Adam trains one level per run)".into(),
            );
        }
        if !(sv.tol > 0.0 && sv.tol < 1.0) {
            return bad(
                "solve.tol",
                format!(
                    "{:?} must be in (0, 1): it bounds a relative residual",
                    sv.tol
                ),
            );
        }
        if sv.max_iters == 0 {
            return bad("solve.max_iters", "must be at least 1".into());
        }
        if !(sv.lambda >= 0.0 && sv.lambda.is_finite()) {
            return bad("solve.lambda", format!("{} must be ≥ 0", sv.lambda));
        }
        if !(sv.eps > 0.0 && sv.eps.is_finite()) {
            return bad("solve.eps", format!("{} must be positive", sv.eps));
        }
        let d = &self.demo;
        if d.gaussians == 0 || d.objects == 0 || d.cameras == 0 || d.width < 8 || d.height < 8 {
            return bad(
                "demo",
                "needs gaussians, objects, cameras ≥ 1 and images ≥ 8×8".into(),
            );
        }
        Ok(())
    }

    /// Keys a resumed run may change: they decide how long it runs, what it logs and
    /// where it runs, never what a step computes (`train.iterations`, `log.*`,
    /// `dist.*`, `device.threads`, `device.ordinal`, `onnx.*`, `models.*`). Returns the first other key whose value
    /// differs between `self` and `other`, if any.
    pub fn result_changing_difference(&self, other: &Config) -> Option<String> {
        let (a, b) = (self.result_settings(), other.result_settings());
        let (a, b) = (a.as_table()?, b.as_table()?);
        for (section, va) in a {
            let vb = b.get(section);
            match (va.as_table(), vb.and_then(|v| v.as_table())) {
                (Some(ta), Some(tb)) => {
                    let keys = ta.keys().chain(tb.keys().filter(|k| !ta.contains_key(*k)));
                    for k in keys {
                        if ta.get(k) != tb.get(k) {
                            return Some(format!("{section}.{k}"));
                        }
                    }
                }
                _ if Some(va) != vb => return Some(section.clone()),
                _ => {}
            }
        }
        None
    }

    /// The settings that decide what the steps compute: the configuration as a TOML
    /// value without the keys a resumed run may change (`train.iterations`, `log.*`,
    /// `dist.*`, `device.threads`, `device.ordinal`, `onnx.*`, `models.*`, `query.*`).
    pub fn result_settings(&self) -> toml::Value {
        let mut v = toml::Value::try_from(self).expect("config serialises");
        if let Some(t) = v.as_table_mut() {
            t.remove("log");
            // How ranks exchange gradients changes no result (every mode gives the
            // same numbers), nor does the timeout.
            t.remove("dist");
            // Where ONNX Runtime and the models for queries are found.
            t.remove("onnx");
            t.remove("models");
            // Query settings apply after training.
            t.remove("query");
            for (section, key) in [
                ("train", "iterations"),
                ("device", "threads"),
                ("device", "ordinal"),
            ] {
                if let Some(s) = t.get_mut(section).and_then(|s| s.as_table_mut()) {
                    s.remove(key);
                }
            }
        }
        v
    }

    /// The configuration as TOML text (what a run directory records).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("config serialises")
    }
}

/// `p` without `.` components and with each `..` removing the component before it
/// (lexically: symbolic links are not followed).
fn lexically_normal(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// True for a number literal (digits with an optional sign, point, exponent or `_`).
fn looks_numeric(raw: &str) -> bool {
    let t = raw.trim_start_matches(['+', '-']);
    t.starts_with(|c: char| c.is_ascii_digit())
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '_' | '.' | 'e' | 'E' | '+' | '-'))
}

/// serde's "invalid value: integer `…`, expected u32" said as what it is.
fn out_of_range(raw: &str, msg: String) -> String {
    match msg.find("invalid value: integer") {
        Some(_) => {
            let expected = msg.split("expected ").nth(1).map_or(String::new(), |t| {
                format!(" for {}", t.trim_end_matches('.'))
            });
            format!("{raw} is out of range{expected}")
        }
        None => msg,
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The web viewer (`lsplat-engine view`): server and frame defaults. Not part of a
/// run's configuration; `view`'s options override these.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ViewConfig {
    /// Address to bind (loopback: only this machine can connect).
    pub host: String,
    /// Port (0: any free port).
    pub port: u16,
    /// Cells per axis of the table over a LangSplat V1 run's 3-D code space whose
    /// vertices are decoded and interpolated instead of decoding every pixel.
    pub table_cells: usize,
    /// JPEG quality range of full frames (adapted to the frame time).
    pub jpeg_quality: (u8, u8),
    /// JPEG quality of previews.
    pub preview_quality: u8,
    /// Budget of a full frame in milliseconds (the quality adapts to it).
    pub frame_budget_ms: f64,
    /// Budget of a preview frame in milliseconds (its resolution adapts to it).
    pub preview_budget_ms: f64,
}

impl Default for ViewConfig {
    fn default() -> Self {
        ViewConfig {
            host: "127.0.0.1".to_string(),
            port: 8080,
            table_cells: 64,
            jpeg_quality: (70, 92),
            preview_quality: 60,
            frame_budget_ms: 100.0,
            preview_budget_ms: 30.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_overrides_fields() {
        let mut c = Config::default();
        c.set("train.iterations=500").unwrap();
        c.set("render.cache=geometry").unwrap();
        c.set("render.cache_budget=1000000").unwrap();
        c.set("scene.splats=foo/bar.ply").unwrap();
        assert_eq!(c.train.iterations, Some(500));
        assert_eq!(c.render.cache, CacheMode::Geometry);
        assert_eq!(c.render.cache_budget, Some(1_000_000));
        assert_eq!(c.scene.splats.as_deref(), Some(Path::new("foo/bar.ply")));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        let mut c = Config::default();
        let e = c.set("train.iterationz=5").unwrap_err().to_string();
        assert!(
            e.contains("unknown configuration key `train.iterationz`"),
            "{e}"
        );
        let e = c.set("nope.x=1").unwrap_err().to_string();
        assert!(e.contains("unknown"), "{e}");
        let e = c.set("train.iterations=abc").unwrap_err().to_string();
        assert!(e.contains("train.iterations"), "{e}");
        let e = c.set("render.tile_size=12").unwrap_err().to_string();
        assert!(e.contains("tile_size"), "{e}");
        assert!(c.set("novalue").is_err());
        assert_eq!(
            c,
            Config::default(),
            "failed overrides leave the config unchanged"
        );
    }

    #[test]
    fn toml_round_trip_and_partial_files() {
        let mut c = Config::default();
        c.set("train.lr=0.01").unwrap();
        let back = Config::from_toml(&c.to_toml(), Path::new("x")).unwrap();
        assert_eq!(back, c);
        let partial = Config::from_toml("[train]\niterations = 7\n", Path::new("x")).unwrap();
        assert_eq!(partial.train.iterations, Some(7));
        assert_eq!(partial.render, RenderConfig::default());
        let e = Config::from_toml("[train]\nbogus = 1\n", Path::new("s.toml")).unwrap_err();
        assert!(
            e.to_string().starts_with("s.toml:") && e.to_string().contains("bogus"),
            "{e}"
        );
    }

    #[test]
    fn scene_files_must_name_their_scene_and_are_blamed_for_their_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.toml");
        for text in ["", "# only a comment\n", "[train]\niterations = 5\n"] {
            std::fs::write(&p, text).unwrap();
            let e = Config::load(&p).unwrap_err().to_string();
            assert!(
                e.starts_with(&p.display().to_string()) && e.contains("names no scene inputs"),
                "{e}"
            );
        }
        std::fs::write(&p, "[demo]\ncameras = 4\n").unwrap();
        assert_eq!(Config::load(&p).unwrap().demo.cameras, 4);
        std::fs::write(&p, "[demo]\n[scene]\nlevel = 7\n").unwrap();
        let e = Config::load(&p).unwrap_err().to_string();
        assert!(e.contains("s.toml") && e.contains("scene.level"), "{e}");
        std::fs::write(&p, "[scene]\nsplats = \"a.ply\"\n").unwrap();
        let c = Config::load(&p).unwrap();
        assert!(c.scene.splats.unwrap().is_absolute());
    }

    #[test]
    fn nonsense_values_are_errors() {
        let mut c = Config::default();
        for (set, key) in [
            ("train.iterations=0", "train.iterations"),
            ("log.every=0", "log.every"),
            ("log.checkpoint_keep=0", "log.checkpoint_keep"),
            ("device.threads=100000", "device.threads"),
            ("models.batch=0", "models.batch"),
        ] {
            let e = c.set(set).unwrap_err().to_string();
            assert!(e.contains(key), "{set}: {e}");
        }
        c.set("device.threads=1").unwrap();
    }

    #[test]
    fn adam_settings_that_cannot_train_are_errors_naming_their_key() {
        let mut c = Config::default();
        for (set, key, says) in [
            ("train.lr=1e30", "train.lr", "(0, 1]"),
            ("train.lr=0", "train.lr", "(0, 1]"),
            ("train.lr=nan", "train.lr", "(0, 1]"),
            ("train.eps=-1", "train.eps", "(0, 1]"),
            ("train.eps=0", "train.eps", "divides by sqrt(v) + eps"),
        ] {
            let e = c.set(set).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(says), "{set}: {e}");
            if key == "train.eps" {
                assert!(
                    !e.contains("train.lr"),
                    "{set} blames the learning rate: {e}"
                );
            }
        }
        c.set("train.lr=1").unwrap();
        c.set("train.eps=1e-15").unwrap();
    }

    #[test]
    fn out_of_range_integers_say_so() {
        let mut c = Config::default();
        for (set, key) in [
            ("train.seed=18446744073709551616", "train.seed"),
            ("train.seed=99999999999999999999", "train.seed"),
            ("train.iterations=5000000000", "train.iterations"),
            ("train.iterations=-1", "train.iterations"),
        ] {
            let e = c.set(set).unwrap_err().to_string();
            assert!(
                e.contains(key) && e.contains("out of range") && !e.contains("string"),
                "{set}: {e}"
            );
        }
        // A word is still a (wrongly typed) string.
        let e = c.set("train.seed=abc").unwrap_err().to_string();
        assert!(
            e.contains("train.seed") && !e.contains("out of range"),
            "{e}"
        );
    }

    #[test]
    fn resumable_changes_are_only_the_harmless_ones() {
        let base = Config::default();
        for harmless in [
            "train.iterations=9",
            "log.every=7",
            "log.eval=false",
            "device.threads=1",
            "onnx.runtime=/x/libonnxruntime.so",
            "models.clip=/models/clip",
        ] {
            let mut c = base.clone();
            c.set(harmless).unwrap();
            assert_eq!(base.result_changing_difference(&c), None, "{harmless}");
        }
        for (set, key) in [
            ("train.lr=0.1", "train.lr"),
            ("render.cache=none", "render.cache"),
            ("device.backend=simt", "device.backend"),
            ("render.cache_budget=1000", "render.cache_budget"),
            ("demo.seed=3", "demo.seed"),
        ] {
            let mut c = base.clone();
            c.set(set).unwrap();
            assert_eq!(
                base.result_changing_difference(&c).as_deref(),
                Some(key),
                "{set}"
            );
        }
    }

    #[test]
    fn solver_and_holdout_settings_are_checked() {
        let mut c = Config::default();
        c.set("eval.holdout=5").unwrap();
        assert!((0..10).filter(|&i| c.eval.is_held_out(i)).eq([4, 9]));
        assert!(c.set("eval.holdout=1").is_err());
        c.set("render.disk_read_bandwidth=2e9").unwrap();
        assert_eq!(c.render.disk_read_bandwidth, Some(2e9));
        for bad in ["0", "-1", "inf", "nan"] {
            assert!(
                Config::default()
                    .set(&format!("render.disk_read_bandwidth={bad}"))
                    .is_err(),
                "{bad}"
            );
        }
        assert!(
            c.set("solve.levels=[1, 2]").is_err(),
            "several levels need a solver"
        );
        c.set("train.solver=lsq").unwrap();
        c.set("solve.levels=[1, 2, 3]").unwrap();
        assert_eq!(c.solve.levels_or(1), vec![1, 2, 3]);
        for bad in [
            "solve.levels=[1, 1]",
            "solve.levels=[4]",
            "solve.tol=0",
            "solve.max_iters=0",
            "solve.lambda=-1",
            "solve.eps=0",
        ] {
            assert!(c.set(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(SolveConfig::default().levels_or(2), vec![2]);
        assert!(!EvalConfig::default().is_held_out(0));
    }

    #[test]
    fn resolved_paths_have_no_dot_components() {
        let mut c = Config::default();
        c.scene.splats = Some("./a/../b/./s.ply".into());
        c.resolve_paths(Path::new("/scenes/x/.."));
        assert_eq!(c.scene.splats.unwrap(), PathBuf::from("/scenes/b/s.ply"));
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let mut c = Config::default();
        c.scene.splats = Some("a.ply".into());
        c.scene.dataset = Some("/abs/ds".into());
        c.resolve_paths(Path::new("/scenes"));
        assert_eq!(c.scene.splats.unwrap(), PathBuf::from("/scenes/a.ply"));
        assert_eq!(c.scene.dataset.unwrap(), PathBuf::from("/abs/ds"));
        // A relative base (a scene file given as `g/s.toml`) still gives absolute paths.
        let mut c = Config::default();
        c.scene.cameras = Some("cams.json".into());
        c.resolve_paths(Path::new("g"));
        let p = c.scene.cameras.unwrap();
        assert!(
            p.is_absolute() && p.ends_with("g/cams.json"),
            "{}",
            p.display()
        );
    }
}
