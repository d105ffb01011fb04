//! `lsplat-engine train`: a new run, or `--resume` of one from its newest checkpoint.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use lsplat_core::Config;
use lsplat_data::SceneData;
use lsplat_data::ply::SplatPly;
use lsplat_data::run::{self, Checkpoint, MetricsLog, RunDir};
use lsplat_device::Backend;
use lsplat_engine::systems::checkpoint::{CheckpointTarget, resident_bytes};
use lsplat_engine::{CheckpointPlugin, EngineError, MetricsFilePlugin, Session};
use lsplat_render::{BackendVisitor, Device};
use tracing::info;

use crate::{TrainArgs, progress, run as outputs, scene};

/// Where the run starts.
enum Start {
    /// A new run directory (`--out`, or a unique default name).
    Fresh { out: Option<PathBuf>, force: bool },
    /// An existing one, locked, continued from this checkpoint.
    Resume { run: RunDir, ckpt: Box<Checkpoint> },
}

/// Runs `train`.
pub fn run(args: TrainArgs) -> Result<()> {
    let (cfg, start) = match &args.resume {
        Some(dir) => resume_config(dir, &args.scene.set)?,
        None => (
            scene::config(&args.scene)?,
            Start::Fresh {
                out: args.out,
                force: args.force,
            },
        ),
    };
    let (data, ply) = scene::load(&cfg)?;
    info!(
        gaussians = data.gaussians.len(),
        cameras = data.cameras.len(),
        channels = data.dim(),
        rss_mb = resident_bytes().map_or(0, |b| b >> 20),
        "scene loaded{}",
        if cfg.scene.is_demo() {
            " (embedded demo)"
        } else {
            ""
        }
    );
    let dev = Device::open(&cfg.device, &cfg.simt)?;
    dev.visit(TrainJob {
        cfg,
        data,
        ply,
        start,
    })
}

/// Locks the run directory, reads its newest checkpoint and the configuration stored
/// in it, and applies the `--set` overrides a resumed run allows.
fn resume_config(dir: &Path, sets: &[String]) -> Result<(Config, Start)> {
    let run = RunDir::resume(dir)?;
    let Some((_, path)) = run::newest_checkpoint(dir)? else {
        bail!(
            "{}: no checkpoint to resume from (checkpoints/ is empty)",
            dir.display()
        );
    };
    let ckpt = Checkpoint::read(&path)?;
    let stored = Config::from_toml(&ckpt.config, &path)?;
    let mut cfg = stored.clone();
    for s in sets {
        cfg.set(s).with_context(|| format!("--set {s}"))?;
        if let Some(key) = stored.result_changing_difference(&cfg) {
            bail!(
                "--set {s}: `{key}` would change what the resumed run computes; a resumed run may change only train.iterations, log.*, device.threads and device.ordinal"
            );
        }
    }
    let iters = cfg.train.iterations as u64;
    if iters < ckpt.step || (iters == ckpt.step && run::is_finished(dir)) {
        bail!(
            "{}: the run has already trained {} of train.iterations = {iters} steps; pass --set train.iterations=N with N > {} to train further",
            dir.display(),
            ckpt.step,
            ckpt.step
        );
    }
    info!(
        checkpoint = %path.display(),
        step = ckpt.step,
        iterations = iters,
        "resuming"
    );
    Ok((
        cfg,
        Start::Resume {
            run,
            ckpt: Box::new(ckpt),
        },
    ))
}

struct TrainJob {
    cfg: Config,
    data: SceneData,
    ply: Option<SplatPly>,
    start: Start,
}

impl BackendVisitor for TrainJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let TrainJob {
            cfg,
            data,
            ply,
            start,
        } = self;
        let backend = dev.describe();
        let (run, ckpt) = match start {
            Start::Fresh { out, force } => {
                let run = match out {
                    Some(out) => RunDir::create(&out, force)?,
                    None => {
                        RunDir::create_unique(&outputs::default_parent(), &outputs::default_name())?
                    }
                };
                (run, None)
            }
            Start::Resume { run, ckpt } => (run, Some(ckpt)),
        };
        run.write_config(&cfg.to_toml())?;
        let metrics_path = run.join(run::METRICS_FILE);
        let mut session = Session::new(dev, &cfg, data)?;
        let (log, mut losses) = match &ckpt {
            Some(c) => {
                let log = MetricsLog::resume(&metrics_path, c.step)?;
                (log, run::read_losses(&metrics_path)?)
            }
            None => (MetricsLog::create(&metrics_path)?, Vec::new()),
        };
        session
            .engine
            .add_plugin(MetricsFilePlugin::<B>::new(log))
            .add_plugin(CheckpointPlugin::<B>::new(
                cfg.log.checkpoint_every as u64,
                CheckpointTarget {
                    run_dir: run.path().to_path_buf(),
                    keep: cfg.log.checkpoint_keep as usize,
                    config: cfg.to_toml(),
                    backend: backend.clone(),
                },
            ));
        session.engine.initialize()?;
        if let Some(c) = &ckpt {
            session.restore(c)?;
            run.unfinish()?;
        }
        let start = session.steps_done();
        info!(
            backend = %backend,
            out = %run.path().display(),
            cache = ?cfg.render.cache,
            from_step = start,
            rss_mb = resident_bytes().map_or(0, |b| b >> 20),
            "training"
        );
        let iters = cfg.train.iterations as u64;
        let bar = progress::bar(iters, "steps");
        bar.set_position(start);
        bar.reset_eta();
        if !cfg.log.progress {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        let t0 = Instant::now();
        for _ in start..iters {
            if let Err(e) = session.step() {
                bar.abandon();
                return Err(diverged_context(e, &run));
            }
            bar.inc(1);
            let fresh = session.drain_records();
            if !fresh.is_empty() {
                let mean = fresh.iter().map(|r| r.loss as f64).sum::<f64>() / fresh.len() as f64;
                bar.set_message(format!(
                    "loss {mean:.6} (mean of steps {}–{})",
                    fresh[0].step,
                    fresh[fresh.len() - 1].step
                ));
                losses.extend(fresh.iter().map(|r| (r.step, r.loss)));
            }
            session.drain_cache_reports();
        }
        let seconds = t0.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let eval = if cfg.log.eval {
            Some(session.evaluate()?)
        } else {
            None
        };
        let features = session.features()?;
        let stats = session.cache_stats();
        let session_steps = iters - start;
        outputs::write_outputs(
            &run,
            &outputs::Outputs {
                features: &features,
                channels: session.channels(),
                losses: &losses,
                eval,
                seconds,
                session_steps,
                steps: iters,
                backend: backend.clone(),
                ply: ply.as_ref(),
            },
        )?;
        if start > 0 {
            println!(
                "resumed after step {start}: trained steps {start}–{} in {seconds:.2} s on {backend}",
                iters - 1
            );
        } else {
            println!(
                "trained {iters} steps in {seconds:.2} s ({:.0} it/s) on {backend}",
                session_steps as f64 / seconds.max(1e-9)
            );
        }
        if let Some((a, b)) = outputs::loss_windows(&losses) {
            println!(
                "loss: mean {:.6} over steps {}–{} -> mean {:.6} over steps {}–{} ({:.1}x lower)",
                a.mean,
                a.first_step,
                a.last_step,
                b.mean,
                b.first_step,
                b.last_step,
                a.mean / b.mean
            );
        }
        if let Some(eval) = eval {
            println!(
                "recovered-feature similarity: mean cosine {:.4} over {} valid pixels (all cameras; masked L1 {:.6})",
                eval.mean_cosine, eval.pixels, eval.mean_l1
            );
        }
        println!(
            "cache: {} hits, {} misses, {} evictions, {:.1} MB held",
            stats.hits,
            stats.misses,
            stats.evictions,
            stats.bytes as f64 / 1e6
        );
        println!("run directory: {}", run.path().display());
        Ok(())
    }
}

/// Adds where to go on from to a divergence error: the newest (good) checkpoint.
fn diverged_context(e: EngineError, run: &RunDir) -> anyhow::Error {
    if !matches!(e, EngineError::NonFinite { .. }) {
        return e.into();
    }
    let last = match run::newest_checkpoint(run.path()) {
        Ok(Some((step, p))) => format!(
            "the newest checkpoint, {} (after {step} steps), holds the last good state",
            p.display()
        ),
        _ => "no checkpoint was written before it".to_string(),
    };
    anyhow::anyhow!("{e}; {last}; lower train.lr or check the inputs")
}
