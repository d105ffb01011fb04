//! `lsplat-engine bench`: timed training steps with per-phase times.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use lsplat_core::Config;
use lsplat_data::SceneData;
use lsplat_device::Backend;
use lsplat_dist::Comm;
use lsplat_engine::components::{Cache, GroundTruth};
use lsplat_engine::resources::{Collective, Dev, GradientReduce};
use lsplat_engine::timing::{PhaseTimes, PhaseTimingPlugin};
use lsplat_engine::{Session, TrainSystems};
use lsplat_render::BackendVisitor;

use crate::{BenchArgs, scene};

/// Runs `bench` (as one rank of a data-parallel job under mpirun/srun; rank 0
/// prints, with the all-reduce's share of the step).
pub fn run(args: BenchArgs) -> Result<()> {
    let comm = lsplat_dist::open(Duration::from_secs_f64(
        lsplat_core::config::DistConfig::default().timeout_s,
    ))?;
    if comm.world() == 1 {
        return run_rank(args, comm);
    }
    let rank = comm.rank();
    match run_rank(args, comm.clone()) {
        Ok(()) => Ok(()),
        Err(e) => {
            eprintln!("error: rank {rank} of {}: {e:#}", comm.world());
            comm.abort(1)
        }
    }
}

fn run_rank(args: BenchArgs, comm: Arc<dyn Comm>) -> Result<()> {
    let mut cfg = scene::config(&args.scene)?;
    comm.set_timeout(Duration::from_secs_f64(cfg.dist.timeout_s));
    // The bench runs as long as it is told, whatever the scene's iteration count.
    cfg.train.iterations = Some(u32::MAX);
    if cfg.train.solver != lsplat_core::config::SolverKind::Adam {
        anyhow::bail!(
            "bench times training steps; `train.solver = {}` solves once (time it with `solve`)",
            cfg.train.solver.name()
        );
    }
    crate::plugins::check(&cfg)?;
    if comm.world() > 1 {
        crate::ranks::agree_on_config(&*comm, &cfg)?;
    }
    let data = scene::load(&cfg)?.data;
    crate::plugins::check_dataset(&cfg, &data)?;
    if comm.world() > 1 {
        crate::ranks::agree_on_inputs(&*comm, &data)?;
    }
    let dev = scene::open_device(&mut cfg)?;
    dev.visit(BenchJob {
        cfg,
        data,
        args,
        comm,
    })
}

struct BenchJob {
    cfg: Config,
    data: SceneData,
    args: BenchArgs,
    comm: Arc<dyn Comm>,
}

fn phase_name(p: TrainSystems) -> &'static str {
    match p {
        TrainSystems::Load => "load",
        TrainSystems::Cache => "cache",
        TrainSystems::Project => "project",
        TrainSystems::Rasterize => "rasterize",
        TrainSystems::Loss => "loss",
        TrainSystems::Backward => "backward",
        TrainSystems::AllReduce => "allreduce",
        TrainSystems::Step => "step",
        TrainSystems::Log => "log",
    }
}

/// Bytes a warm operator step must read at least: per batch camera, one pass over its
/// operator (mean over the cached cameras) and its valid pixels' mask rows; and the
/// optimiser's reads of parameters, gradients and both moments (`4·N·C·4`). `None`
/// unless every camera holds an operator.
fn floor_bytes<B: Backend>(
    session: &mut Session<B>,
    batch: usize,
    gaussians: usize,
    channels: usize,
) -> Option<u64> {
    let world = &mut session.engine.world;
    let mut q = world.query::<(&Cache<B>, Option<&GroundTruth<B>>)>();
    let dev = &world.resource::<Dev<B>>().0;
    let (mut op_bytes, mut gt_bytes, mut cams) = (0u64, 0u64, 0u64);
    for (c, gt) in q.iter(world) {
        let stats = c.cache.operator_stats(dev)?;
        op_bytes += stats.pass_bytes as u64;
        gt_bytes += 4 * gt.map_or(0, |g| g.0.pixels.len) as u64;
        cams += 1;
    }
    if cams == 0 {
        return None;
    }
    let per_camera = (op_bytes + gt_bytes) as f64 / cams as f64;
    Some((batch as f64 * per_camera) as u64 + 16 * (gaussians * channels) as u64)
}

impl BackendVisitor for BenchJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let BenchJob {
            cfg,
            data,
            args,
            comm,
        } = self;
        let ranks = comm.world();
        let backend = if ranks > 1 {
            format!("{} × {}", dev.describe(), comm.describe())
        } else {
            dev.describe()
        };
        let cameras = data.cameras.len();
        let gaussians = data.gaussians.len();
        let valid: usize = data.labels.iter().map(|l| l.valid.len()).sum();
        let pixels: usize = data.cameras.iter().map(|c| c.pixel_count()).sum();
        let channels = data.dim();
        // The memory's read bandwidth, measured before anything else runs.
        let read_bw = dev.read_bandwidth();
        let collective = Collective::new(comm.clone());
        // A plugin's model brings its own parameters and optimiser: the floor below
        // models the built-in one only.
        let model = crate::plugins::model::<B>(&cfg);
        let builtin = model.is_none();
        let mut session = match model {
            Some(model) if ranks == 1 => Session::with_model(dev, &cfg, data, collective, model)?,
            Some(_) => anyhow::bail!("a plugin model trains on one rank"),
            None => Session::with_collective(dev, &cfg, data, Vec::new(), collective)?,
        };
        if let Some(loss) = crate::plugins::loss::<B>(&cfg) {
            session.use_loss(loss)?;
        }
        if let Some(dir) = &args.cache_dir {
            session.set_cache_dir(dir.clone());
        }
        session
            .engine
            .add_plugin(PhaseTimingPlugin::<B>(PhantomData));
        session.engine.initialize()?;
        // Warm-up: the requested steps plus enough to visit every camera once. With
        // several ranks each epoch deals a rank a different share of the cameras, so
        // they step on (checking together every 10 steps) until every rank has
        // visited every camera.
        let warm = args.warmup + cameras.div_ceil(cfg.train.batch_size as usize) as u64;
        for _ in 0..warm {
            session.step()?;
        }
        while comm.world() > 1 {
            let mut unvisited =
                [cameras.saturating_sub(session.cache_stats().misses as usize) as f64];
            comm.sum_f64("bench warm-up", &mut unvisited)?;
            if unvisited[0] == 0.0 {
                break;
            }
            for _ in 0..10 {
                session.step()?;
            }
        }
        session.engine.world.resource_mut::<PhaseTimes>().reset();
        if let Some(mut r) = session.engine.world.get_resource_mut::<GradientReduce>() {
            r.totals = Default::default();
        }
        let t0 = Instant::now();
        for _ in 0..args.iters {
            session.step()?;
        }
        session.device().synchronize()?;
        let secs = t0.elapsed().as_secs_f64();
        let times = session.engine.world.resource::<PhaseTimes>().clone();
        let stats = session.cache_stats();
        // What the gradient all-reduce moved per step (ranks > 1).
        let reduced = session
            .engine
            .world
            .get_resource::<GradientReduce>()
            .map(|r| r.totals);
        let per_step = |bytes: u64| bytes as f64 / args.iters.max(1) as f64;
        let allreduce_ms = times
            .ms_per_step()
            .into_iter()
            .find(|(p, _)| *p == TrainSystems::AllReduce)
            .map_or(0.0, |(_, ms)| ms);
        let floor = builtin
            .then(|| {
                floor_bytes::<B>(
                    &mut session,
                    cfg.train.batch_size as usize,
                    gaussians,
                    channels,
                )
            })
            .flatten();
        let ms_per_step = 1e3 * secs / args.iters.max(1) as f64;
        let floor_ms = match (floor, read_bw) {
            (Some(bytes), Some(bw)) => Some(bytes as f64 / bw * 1e3),
            _ => None,
        };
        let it_per_s = args.iters as f64 / secs.max(1e-12);
        let phases: serde_json::Map<String, serde_json::Value> = times
            .ms_per_step()
            .into_iter()
            .map(|(p, ms)| {
                (
                    phase_name(p).to_string(),
                    serde_json::json!((ms * 1e4).round() / 1e4),
                )
            })
            .collect();
        let line = serde_json::json!({
            "backend": backend,
            "model": cfg.train.model,
            "cache": cfg.render.cache,
            "weights": cfg.render.operator_precision,
            "tile_size": cfg.render.tile_size,
            "iters": args.iters,
            "it_per_s": (it_per_s * 100.0).round() / 100.0,
            "ms_per_step": ms_per_step,
            "read_gb_per_s": read_bw.map(|b| (b / 1e7).round() / 100.0),
            "floor_bytes": floor,
            "floor_ms": floor_ms,
            "floor_ratio": floor_ms.map(|f| ms_per_step / f),
            "fused": cfg.render.fused,
            "ms": phases,
            "cache_bytes": stats.bytes,
            "cached_operators": stats.operators,
            "nnz": stats.nnz,
            "valid_pixels": valid,
            "valid_fraction": valid as f64 / pixels.max(1) as f64,
            "nnz_per_valid_pixel": if stats.operators as usize == cameras { stats.nnz as f64 / valid.max(1) as f64 } else { f64::NAN },
            "bytes_per_camera": stats.bytes as f64 / cameras as f64,
            "gaussians": gaussians,
            "cameras": cameras,
            "cache_hits": stats.hits,
            "cache_misses": stats.misses,
            "evictions": stats.evictions,
            "spilled_operators": stats.spilled,
            "spilled_bytes": stats.disk_bytes,
            "demoted_operators": stats.demoted,
            "ranks": ranks,
            "allreduce_share": allreduce_ms / ms_per_step,
            "reduce_dense_bytes_per_step": reduced.map(|r| per_step(r.dense_bytes)),
            "reduce_sent_bytes_per_step": reduced.map(|r| per_step(r.sent_bytes)),
            "reduce_sparse_steps": reduced.map(|r| r.sparse_steps),
        });
        if comm.rank() != 0 {
            return Ok(());
        }
        if args.json {
            println!("{line}");
        } else {
            println!(
                "{backend}: {it_per_s:.1} it/s ({:.3} ms/step) over {} steps",
                1e3 / it_per_s,
                args.iters
            );
            for (p, ms) in times.ms_per_step() {
                println!("  {:<10} {ms:9.4} ms", phase_name(p));
            }
            if let (Some(f), Some(bw)) = (floor_ms, read_bw) {
                println!(
                    "  floor {f:.3} ms ({:.1} MB compulsory reads at {:.1} GB/s): {:.2}x the floor",
                    floor.unwrap_or(0) as f64 / 1e6,
                    bw / 1e9,
                    ms_per_step / f
                );
            }
            if let Some(r) = reduced {
                println!(
                    "  all-reduce: {:.1}% of the step; {:.1} kB sent per step of a {:.1} kB gradient ({} of {} steps over the touched rows)",
                    100.0 * allreduce_ms / ms_per_step,
                    per_step(r.sent_bytes) / 1e3,
                    per_step(r.dense_bytes) / 1e3,
                    r.sparse_steps,
                    r.steps
                );
            }
            println!(
                "  cache {:?}: {:.1} MB, {} operators, nnz {} ({:.1} per valid pixel); {} spilled ({:.1} MB on disk, {} moved from memory), {} evictions",
                cfg.render.cache,
                stats.bytes as f64 / 1e6,
                stats.operators,
                stats.nnz,
                stats.nnz as f64 / valid.max(1) as f64,
                stats.spilled,
                stats.disk_bytes as f64 / 1e6,
                stats.demoted,
                stats.evictions
            );
        }
        Ok(())
    }
}
