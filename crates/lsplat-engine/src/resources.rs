//! Resources: the singletons of a training run.

use bevy_ecs::prelude::*;
use lsplat_core::config::{RenderConfig, SolveConfig, SolverKind, TrainConfig};
use lsplat_device::Backend;
use lsplat_render::Scratch;

use crate::EngineError;

/// The active backend.
#[derive(Resource)]
pub struct Dev<B: Backend>(pub B);

/// Optimisation settings.
#[derive(Resource, Clone, Debug)]
pub struct TrainSettings(pub TrainConfig);

/// Rendering settings.
#[derive(Resource, Clone, Debug)]
pub struct RenderSettings(pub RenderConfig);

/// The tile grid's tile size.
#[derive(Resource, Clone, Copy, Debug)]
pub struct TileConfig {
    /// Tile edge (8 or 16).
    pub tile_size: u32,
}

/// Step counter (0-based step being run).
#[derive(Resource, Clone, Copy, Debug, Default)]
pub struct Step(pub u64);

/// The camera sampler.
#[derive(Resource)]
pub struct Sampler(pub crate::sampler::CameraSampler);

/// The data-parallel world this process is one rank of (size 1 unless the run was
/// started by an MPI launcher).
#[derive(Resource, Clone, Debug)]
pub struct Collective {
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// The collectives.
    pub comm: std::sync::Arc<dyn lsplat_dist::Comm>,
}

impl Collective {
    /// The world of `comm`.
    pub fn new(comm: std::sync::Arc<dyn lsplat_dist::Comm>) -> Self {
        Collective {
            rank: comm.rank(),
            world_size: comm.world(),
            comm,
        }
    }
}

impl Default for Collective {
    fn default() -> Self {
        Collective::new(std::sync::Arc::new(lsplat_dist::Local))
    }
}

/// The AllReduce phase's state: the host copy of the gradient, the reducer, and what
/// the reductions moved.
#[derive(Resource, Debug)]
pub struct GradientReduce {
    /// Host copy of ∂L/∂x, `[N, C]` (the collectives run on host memory).
    pub host: Vec<f32>,
    /// Dense or touched-rows averaging.
    pub reducer: lsplat_dist::GradientReducer,
    /// Totals since the last reset.
    pub totals: ReduceTotals,
}

/// What the gradient all-reduces moved, summed over steps.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReduceTotals {
    /// Reductions run.
    pub steps: u64,
    /// Of which over the touched rows.
    pub sparse_steps: u64,
    /// Bytes of the whole gradient buffer, summed over the reductions.
    pub dense_bytes: u64,
    /// Bytes sent, summed over the reductions.
    pub sent_bytes: u64,
    /// Wall seconds in the AllReduce phase (copies and the collective).
    pub seconds: f64,
}

/// Per batch slot: rendered values and their gradient for the slot's camera, and the
/// scratch projection/bins used when the camera has no cache.
pub struct Frame<B: Backend> {
    /// Rendered `[V_max, C]`.
    pub rendered: B::Buf<f32>,
    /// ∂L/∂rendered `[V_max, C]`.
    pub d_rendered: B::Buf<f32>,
    /// Projection and bins of an uncached camera.
    pub scratch: Scratch<B>,
}

/// The batch's frame buffers, allocated once for the largest camera.
#[derive(Resource)]
pub struct Frames<B: Backend>(pub Vec<Frame<B>>);

/// Device-side metrics: the loss of each step since the last read-back.
#[derive(Resource)]
pub struct Metrics<B: Backend> {
    /// One slot per step of a logging window.
    pub loss: B::Buf<f32>,
    /// Read back every this many steps.
    pub every: u64,
    /// First step whose loss has not been read back yet (a read-back covers this
    /// step to the current one; a resumed run starts here).
    pub unread_from: u64,
}

/// When the Log phase writes checkpoints (inserted by the checkpoint plugin).
#[derive(Resource, Clone, Debug)]
pub struct CheckpointSchedule {
    /// Every this many steps; 0 = only after the last step.
    pub every: u64,
}

impl CheckpointSchedule {
    /// True when a checkpoint follows step `step` (0-based) of `iterations`.
    pub fn due(&self, step: u64, iterations: u64) -> bool {
        let done = step + 1;
        done == iterations || (self.every > 0 && done.is_multiple_of(self.every))
    }
}

/// Cache activity counters (host-side, updated by the systems).
#[derive(Resource, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Visits served by a warm cache.
    pub hits: u64,
    /// Visits that found the cache cold.
    pub misses: u64,
    /// Caches dropped to stay within the budget.
    pub evictions: u64,
    /// Bytes held by all camera caches.
    pub bytes: u64,
    /// Non-zeros of all cached operators.
    pub nnz: u64,
    /// Cameras holding an operator.
    pub operators: u64,
    /// Of those, operators spilled to disk (their files mapped into memory).
    pub spilled: u64,
    /// Bytes of the spilled operators on disk.
    pub disk_bytes: u64,
    /// Of the spilled, operators moved from memory to disk to make room for another
    /// camera's cache (instead of being evicted).
    pub demoted: u64,
}

/// Where training's operators go once the cache budget is full: the first ones
/// over it spilled to disk (up to the plan's share), operators in memory moved to disk
/// to make room while the disk has room, the rest evicted and rebuilt.
#[derive(Resource, Default)]
pub struct CacheSpill {
    /// The run's cache folder and disk budget (set by
    /// [`crate::Session::set_cache_dir`]); `None`: never spilled.
    pub target: Option<lsplat_render::placement::SpillTarget>,
    /// Planned with the first operator built (the plan is announced then).
    pub placer: Option<lsplat_render::placement::Placer>,
}

/// How much the camera caches may hold.
#[derive(Resource, Clone, Copy, Debug)]
pub struct CacheBudget {
    /// Bytes.
    pub limit: u64,
}

/// Records read back by the Log phase, drained by the runner.
#[derive(Resource, Default)]
pub struct LogSink {
    /// Step and loss of every step read back.
    pub records: Vec<crate::StepRecord>,
    /// The records of the latest read-back only (what the metrics file appends).
    pub window: Vec<crate::StepRecord>,
    /// Cache counters at the end of each logging window.
    pub cache: Vec<(u64, CacheStats)>,
}

/// The first error a system hit during a step.
#[derive(Resource, Default)]
pub struct Fault(pub Option<EngineError>);

impl Fault {
    /// Keeps the first error of `r`.
    pub fn check<T, E: Into<EngineError>>(&mut self, r: Result<T, E>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                if self.0.is_none() {
                    self.0 = Some(e.into());
                }
                None
            }
        }
    }

    /// True when a system already failed this step.
    pub fn failed(&self) -> bool {
        self.0.is_some()
    }
}

/// What a solver reports as it goes (`Session::on_fit_progress`).
#[derive(Clone, Debug, PartialEq)]
pub enum FitEvent {
    /// `done` of the `total` fitted cameras passed (the average's pass, the least
    /// squares' first pass).
    Cameras {
        /// Cameras passed.
        done: usize,
        /// Fitted cameras.
        total: usize,
    },
    /// A least-squares iteration finished (0: the warm start).
    Iteration {
        /// The iteration.
        iteration: u32,
        /// `solve.max_iters`.
        max: u32,
        /// Each level's relative residual.
        residuals: Vec<f64>,
    },
}

/// The receiver of a solver's [`FitEvent`]s.
#[derive(Resource, Clone)]
pub struct FitProgress(pub std::sync::Arc<dyn Fn(FitEvent) + Send + Sync>);

/// Camera entities by scene index.
#[derive(Resource, Clone, Debug, Default)]
pub struct CameraIndex(pub Vec<Entity>);

/// What a solver plugin fits, and how.
#[derive(Resource, Clone, Debug)]
pub struct SolverSettings {
    /// `average` or `lsq`.
    pub kind: SolverKind,
    /// Levels (in the order of the camera's `Labels` then `MoreLevels`).
    pub levels: Vec<u8>,
    /// Tolerance, iterations, λ, ε.
    pub solve: SolveConfig,
    /// Bytes the solver's operators may hold in memory.
    pub budget: u64,
    /// Where operators past the budget may be spilled (the run's cache folder; set
    /// by [`crate::Session::set_cache_dir`]); `None`: rebuilt instead.
    pub spill: Option<lsplat_render::placement::SpillTarget>,
}

/// The outcome of a fit (inserted by the solver's system).
#[derive(Resource, Clone, Debug)]
pub struct FitReport {
    /// The method.
    pub kind: SolverKind,
    /// Levels solved.
    pub levels: Vec<u8>,
    /// Wall seconds of the fit.
    pub seconds: f64,
    /// Per level: Gaussians no valid pixel of a fitted camera weighs (zero features).
    pub unweighted: Vec<usize>,
    /// `lsq`: iterations run (0 for `average`).
    pub iterations: u32,
    /// `lsq`: relative residual per level after each iteration (entry 0: warm start).
    pub residuals: Vec<Vec<f64>>,
    /// `lsq`: every level reached `solve.tol`.
    pub converged: bool,
    /// `lsq`: fitted cameras whose operator stayed cached (in memory or on disk) /
    /// was rebuilt every pass.
    pub cached: usize,
    /// See `cached`.
    pub streamed: usize,
    /// `lsq`: the operators' placement planned at start (what was announced) and
    /// the one reached.
    pub placement: Option<(
        lsplat_render::placement::Placement,
        lsplat_render::placement::Placement,
    )>,
    /// What fitting did to each camera (walks, operator builds, products).
    pub visits: lsplat_solve::Visits,
}

/// Operators a solver built over the union of the levels' valid pixels, kept for
/// evaluating the fitted cameras (indexed like the cameras).
#[derive(Resource)]
pub struct FitOperators<B: Backend>(pub Vec<Option<B::Operator>>);

/// A request to stop after the current step (a first Ctrl-C or SIGTERM), shared with
/// whoever raises it (the CLI's signal handler sets `flag`). The Log phase reads the
/// flag once per step ([`crate::systems::log::latch_stop`]); once latched, that step
/// reads its metrics back and is checkpointed as if it were the last, and
/// [`crate::Session::stop_requested`] tells the runner to stop.
#[derive(Resource, Clone, Debug, Default)]
pub struct StopRequest {
    /// Raised from outside (a signal handler); read with one atomic load per step.
    pub flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Whether this step saw the flag (all ranks agree on it).
    pub latched: bool,
}
