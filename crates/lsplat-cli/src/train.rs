//! `lsplat-engine train`: a new run, or `--resume` of one from its newest checkpoint;
//! `lsplat-engine solve`: a new run fitted by a solver plugin instead of steps.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lsplat_core::Config;
use lsplat_core::config::{BackendKind, DistConfig, SolverKind};
use lsplat_data::run::identity::RunIdentity;
use lsplat_data::run::{self, Checkpoint, MetricsLog, RunDir};
use lsplat_device::Backend;
use lsplat_dist::Comm;
use lsplat_engine::resources::{Collective, FitReport};
use lsplat_engine::systems::checkpoint::{CheckpointTarget, resident_bytes};
use lsplat_engine::{CheckpointPlugin, EngineError, MetricsFilePlugin, Quality, Session};
use lsplat_render::BackendVisitor;
use tracing::{info, warn};

use crate::progress::Cadence;
use crate::scene::Loaded;
use crate::signals::{Interrupted, Signals};
use crate::{TrainArgs, progress, run as outputs, scene};

/// Where the run starts.
enum Start {
    /// A new run directory (`--out`, or a unique default name), and the scene file a
    /// folder scene writes into it.
    Fresh {
        out: Option<PathBuf>,
        force: bool,
        scene_file: Option<String>,
    },
    /// An existing one, continued from this checkpoint; rank 0 holds its lock (the
    /// other ranks of a data-parallel run never touch the run directory).
    Resume {
        run: Option<RunDir>,
        ckpt: Box<Checkpoint>,
    },
}

/// Runs `train`: on one process, or as one rank of a data-parallel job when an MPI
/// launcher started it. A rank that fails prints its error and ends every rank.
pub fn run(args: TrainArgs, signals: Signals) -> Result<()> {
    let comm = lsplat_dist::open(Duration::from_secs_f64(DistConfig::default().timeout_s))?;
    if comm.world() == 1 {
        return run_rank(args, comm, signals);
    }
    let (rank, world) = (comm.rank(), comm.world());
    match run_rank(args, comm.clone(), signals) {
        Ok(()) => Ok(()),
        Err(e) if e.is::<Interrupted>() => Err(e),
        Err(e) => {
            eprintln!("error: rank {rank} of {world}: {e:#}");
            comm.abort(1)
        }
    }
}

fn run_rank(args: TrainArgs, comm: Arc<dyn Comm>, signals: Signals) -> Result<()> {
    let (cfg, start) = match &args.resume {
        Some(dir) => resume_config(dir, &args.scene.set, &*comm)?,
        None => {
            let resolved = scene::resolve(&args.scene)?;
            let out = args.out.or_else(|| resolved.default_out());
            if args.force && out.is_none() {
                bail!("--force overwrites the run in --out: give --out DIR (or -m MODEL)");
            }
            let scene_file = resolved.scene_file();
            (
                resolved.cfg,
                Start::Fresh {
                    out,
                    force: args.force,
                    scene_file,
                },
            )
        }
    };
    start_job(cfg, start, comm, signals)
}

/// Runs `solve` (or `train` with `train.solver` set to a solver): a new run
/// directory, fitted once.
pub fn run_fresh(
    cfg: Config,
    out: Option<PathBuf>,
    force: bool,
    scene_file: Option<String>,
) -> Result<()> {
    if let Some(l) = lsplat_dist::detect().filter(|l| l.ranks > 1) {
        bail!(
            "started by {} with {} ranks, but a solver runs on one process (it takes seconds): start `solve` without the launcher",
            l.name,
            l.ranks
        );
    }
    start_job(
        cfg,
        Start::Fresh {
            out,
            force,
            scene_file,
        },
        Arc::new(lsplat_dist::Local),
        Signals::none(),
    )
}

/// Checks everything that can be checked, loads the scene, opens the device and
/// trains (or solves). Every settings error is found before the run directory is
/// created, so a refused run leaves nothing behind.
fn start_job(mut cfg: Config, start: Start, comm: Arc<dyn Comm>, signals: Signals) -> Result<()> {
    comm.set_timeout(Duration::from_secs_f64(cfg.dist.timeout_s));
    if comm.world() > 1 {
        if cfg.train.solver != SolverKind::Adam {
            bail!(
                "train.solver = {} runs on one process (it takes seconds): start it without the launcher",
                cfg.train.solver.name()
            );
        }
        crate::ranks::agree_on_config(&*comm, &cfg)?;
    }
    if cfg.train.solver != SolverKind::Adam && cfg.train.normalize {
        // A solver fits the composited feature itself; record that renders of its
        // output must not normalise it.
        cfg.train.normalize = false;
        info!(
            solver = cfg.train.solver.name(),
            "train.normalize = false: the solved features are composited as they are"
        );
    }
    crate::plugins::check(&cfg)?;
    crate::plugins::resolve_iterations(&mut cfg);
    if let Start::Fresh {
        out: Some(out),
        force,
        ..
    } = &start
        && comm.rank() == 0
    {
        // Before the scene is read: a folder that cannot be used is said at once.
        run::check_available(out, *force, &run::layout::RUN)?;
    }
    let loaded = scene::load(&cfg)?;
    crate::plugins::check_dataset(&cfg, &loaded.data)?;
    lsplat_engine::check_scene_settings(&cfg, loaded.data.cameras.len(), comm.world())?;
    info!(
        gaussians = loaded.data.gaussians.len(),
        cameras = loaded.data.cameras.len(),
        channels = loaded.data.dim(),
        levels = 1 + loaded.more_levels.len(),
        rss_mb = resident_bytes().map_or(0, |b| b >> 20),
        "scene loaded{}",
        if cfg.scene.is_demo() {
            " (embedded demo)"
        } else {
            ""
        }
    );
    if comm.world() > 1 {
        crate::ranks::agree_on_inputs(&*comm, &loaded.data)?;
        if matches!(cfg.device.backend, BackendKind::Cuda | BackendKind::Hip) {
            // One GPU per rank: a node's ranks take consecutive devices.
            cfg.device.ordinal += lsplat_dist::local_rank() as u32;
        }
    }
    let dev = scene::open_device(&mut cfg)?;
    dev.visit(TrainJob {
        cfg,
        loaded,
        start,
        comm,
        signals,
    })
}

/// Locks the run directory, picks the newest checkpoint that reads back intact and
/// belongs to the run (saying which newer ones it skipped and why), and applies the
/// `--set` overrides a resumed run allows. Nothing runs before this succeeds.
///
/// In a data-parallel job rank 0 alone opens the run directory and sends the
/// checkpoint's bytes to the others.
fn resume_config(dir: &Path, sets: &[String], comm: &dyn Comm) -> Result<(Config, Start)> {
    let (run, path, bytes) = if comm.rank() == 0 {
        let run = RunDir::resume(dir)?;
        let chosen = run::resume::newest_valid(dir)?;
        for (p, why) in &chosen.skipped {
            warn!("skipping checkpoint {}: {why}", p.display());
        }
        for w in &chosen.warnings {
            warn!("{w}");
        }
        (Some(run), chosen.path, chosen.bytes)
    } else {
        (None, dir.join("checkpoints"), Vec::new())
    };
    let mut bytes = bytes;
    comm.broadcast("checkpoint broadcast", 0, &mut bytes)?;
    let ckpt = Checkpoint::parse(&bytes, &path)?;
    drop(bytes);
    let stored = Config::from_toml(&ckpt.config, &path)?;
    let mut cfg = stored.clone();
    for s in sets {
        cfg.set(s).with_context(|| format!("--set {s}"))?;
        if let Some(key) = stored.result_changing_difference(&cfg) {
            bail!(
                "--set {s}: `{key}` would change what the resumed run computes; a resumed run may change only train.iterations, log.*, dist.*, device.threads and device.ordinal"
            );
        }
    }
    let iters = cfg.train.iterations() as u64;
    if iters < ckpt.step || (iters == ckpt.step && comm.rank() == 0 && run::is_finished(dir)) {
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

/// What `train` prints and returns when a signal stopped it: the checkpoint kept
/// and the command that continues the run.
pub fn interrupted(
    signals: &Signals,
    run: Option<&RunDir>,
    steps: u64,
    ckpt: Option<&Path>,
) -> anyhow::Error {
    let signal = signals.received().unwrap_or(signal_hook::consts::SIGINT);
    let message = match (run, ckpt) {
        (Some(run), Some(c)) => format!(
            "stopped after step {steps}, checkpoint {}; continue with `lsplat-engine train --resume {}`",
            c.display(),
            run.path().display()
        ),
        (Some(run), None) => format!(
            "stopped after step {steps} without a checkpoint (this model writes none); {} holds no resumable state",
            run.path().display()
        ),
        (None, _) => "stopped before the run started; nothing was written".into(),
    };
    Interrupted { signal, message }.into()
}

/// Marks a stopped run: `summary.json` with `"status": "interrupted"` (not finished:
/// `train --resume` continues it, and it does not block a new run's folder check).
pub fn write_interrupted(run: &RunDir, steps: u64, signals: &Signals) -> Result<Option<PathBuf>> {
    let newest = run::newest_checkpoint(run.path())?
        .filter(|(s, _)| *s == steps)
        .map(|(_, p)| p);
    let summary = serde_json::json!({
        "status": run::STATUS_INTERRUPTED,
        "steps": steps,
        "signal": signals.received(),
        "checkpoint": newest.as_ref().map(|p| p.display().to_string()),
        "resume": format!("lsplat-engine train --resume {}", run.path().display()),
    });
    run.finish(serde_json::to_string_pretty(&summary)?.as_bytes())?;
    Ok(newest)
}

/// The built-in model's session, or what a plugin model's run is built from.
enum Built<B: Backend> {
    V1(Box<Session<B>>),
    Model(
        B,
        lsplat_data::SceneData,
        Collective,
        Arc<dyn lsplat_engine::Model<B>>,
    ),
}

struct TrainJob {
    cfg: Config,
    loaded: Loaded,
    start: Start,
    comm: Arc<dyn Comm>,
    signals: Signals,
}

impl BackendVisitor for TrainJob {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let TrainJob {
            cfg,
            loaded,
            start,
            comm,
            signals,
        } = self;
        let Loaded {
            data,
            more_levels,
            ply,
        } = loaded;
        let rank0 = comm.rank() == 0;
        let backend = if comm.world() > 1 {
            format!("{} × {}", dev.describe(), comm.describe())
        } else {
            dev.describe()
        };
        let identity = RunIdentity::of(&cfg)?;
        let collective = Collective::new(comm.clone());
        let model = crate::plugins::model::<B>(&cfg);
        // Everything the model and the session check is checked before the run
        // directory exists.
        let mut built = match model {
            Some(m) => {
                m.check(&data)
                    .map_err(|e| anyhow::anyhow!("train.model = {}: {e}", m.name()))?;
                Built::Model(dev, data, collective, m)
            }
            None => {
                let mut s = Session::with_collective(dev, &cfg, data, more_levels, collective)?;
                if let Some(loss) = crate::plugins::loss::<B>(&cfg) {
                    s.use_loss(loss)?;
                }
                Built::V1(Box::new(s))
            }
        };
        if signals.received().is_some() {
            return Err(interrupted(&signals, None, 0, None));
        }
        let (run, ckpt, scene_file) = match start {
            Start::Fresh { .. } if !rank0 => (None, None, None),
            Start::Fresh {
                out,
                force,
                scene_file,
            } => {
                let run = match out {
                    Some(out) => RunDir::create(&out, force)?,
                    None => {
                        RunDir::create_unique(&outputs::default_parent(), &outputs::default_name())?
                    }
                };
                (Some(run), None, scene_file)
            }
            Start::Resume { run, ckpt } => (run, Some(ckpt), None),
        };
        if let Some(run) = &run {
            run.write_config(&format!("{}{}", cfg.to_toml(), identity.to_toml()))?;
            if let Some(text) = scene_file {
                lsplat_data::io::write_bytes_atomic(&run.join(run::SCENE_FILE), text.as_bytes())?;
            }
        }
        let identity = Some(identity.to_json());
        let session = match built {
            Built::V1(ref mut s) => s,
            Built::Model(dev, data, collective, model) => {
                let run = run.context("a plugin model trains on one rank")?;
                let job = crate::train_model::Job {
                    cfg: &cfg,
                    run: &run,
                    ckpt: ckpt.as_deref(),
                    backend: &backend,
                    identity,
                    signals: &signals,
                };
                return crate::train_model::train(dev, job, data, collective, model);
            }
        };
        let solver = cfg.train.solver;
        if let Some(run) = &run {
            // Operators past render.cache_budget may be spilled here (files unlinked
            // once mapped, so nothing is left behind).
            session.set_cache_dir(run.join("cache"));
        }
        let fitted = if solver == SolverKind::Adam {
            let job = Steps {
                cfg: &cfg,
                run: run.as_ref(),
                ckpt: ckpt.as_deref(),
                backend: &backend,
                identity,
                signals: &signals,
            };
            let fitted = train_steps(session, job)?;
            if fitted.stopped {
                let Some(run) = &run else {
                    return Err(interrupted(&signals, None, fitted.steps, None));
                };
                let kept = write_interrupted(run, fitted.steps, &signals)?;
                return Err(interrupted(
                    &signals,
                    Some(run),
                    fitted.steps,
                    kept.as_deref(),
                ));
            }
            fitted
        } else {
            info!(
                backend = %backend,
                out = %run.as_ref().map_or(Path::new(""), |r| r.path()).display(),
                solver = solver.name(),
                holdout = cfg.eval.holdout,
                rss_mb = resident_bytes().map_or(0, |b| b >> 20),
                "solving"
            );
            let t0 = Instant::now();
            let bars = Arc::new(std::sync::Mutex::new(progress::SolveProgress::new(
                cfg.log.progress,
                Cadence::of(&cfg.log),
            )));
            let sink = bars.clone();
            session.on_fit_progress(move |e| {
                if let Ok(mut b) = sink.lock() {
                    b.event(e);
                }
            });
            let report = session.fit();
            if let Ok(mut b) = bars.lock() {
                b.finish();
            }
            let report = report?;
            Fitted {
                losses: Vec::new(),
                seconds: t0.elapsed().as_secs_f64(),
                start: 0,
                steps: 0,
                fit: Some(report),
                stopped: false,
            }
        };
        // Rank 0 alone evaluates and writes; the other ranks are done.
        let Some(run) = run else {
            return Ok(());
        };
        let t_eval = Instant::now();
        let quality = if cfg.log.eval {
            Some(session.quality()?)
        } else {
            None
        };
        let eval_seconds = t_eval.elapsed().as_secs_f64();
        let features = session.features()?;
        let stats = session.cache_stats();
        let levels = session.levels().to_vec();
        let c = session.channels();
        let width = c * levels.len();
        let mut summaries = Vec::with_capacity(levels.len());
        for (l, &level) in levels.iter().enumerate() {
            let feats: Vec<f32> = features
                .chunks_exact(width)
                .flat_map(|r| r[l * c..(l + 1) * c].iter().copied())
                .collect();
            let o = outputs::Outputs {
                features: &feats,
                channels: c,
                losses: &fitted.losses,
                quality: quality.as_ref().map(|q| q[l]),
                holdout: cfg.eval.holdout,
                solver: solver.name(),
                fit: fitted.fit.as_ref(),
                seconds: fitted.seconds,
                session_steps: fitted.steps - fitted.start,
                steps: fitted.steps,
                backend: backend.clone(),
                ply: ply.as_ref(),
            };
            let dir = if levels.len() == 1 {
                run.path().to_path_buf()
            } else {
                let dir = run.join(&format!("level_{level}"));
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
                // Each level's folder is a run of its own (`render`, `query` and
                // `eval lerf` read it): its configuration names that level alone.
                let mut one = cfg.clone();
                one.scene.level = level;
                one.solve.levels = vec![level];
                lsplat_data::io::write_bytes_atomic(
                    &dir.join(run::CONFIG_FILE),
                    one.to_toml().as_bytes(),
                )?;
                dir
            };
            summaries.push((level, outputs::write_outputs(&dir, &o)?));
        }
        // summary.json in the run directory is written last: it marks the run finished.
        let summary = match &summaries[..] {
            [(_, one)] => one.clone(),
            many => {
                let mut all = serde_json::Map::new();
                for (level, s) in many {
                    outputs::write_json(&run.join(&format!("level_{level}")), s)?;
                    all.insert(format!("level_{level}"), s.clone());
                }
                serde_json::json!({ "solver": solver.name(), "levels": levels, "per_level": all })
            }
        };
        run.finish(serde_json::to_string_pretty(&summary)?.as_bytes())?;
        print_summary(&cfg, &backend, &fitted, quality.as_deref(), eval_seconds);
        if solver == SolverKind::Adam {
            println!(
                "cache: {} hits, {} misses, {} evictions, {:.1} MB held, {} operators spilled ({:.1} MB on disk; {} of them moved there from memory to make room)",
                stats.hits,
                stats.misses,
                stats.evictions,
                stats.bytes as f64 / 1e6,
                stats.spilled,
                stats.disk_bytes as f64 / 1e6,
                stats.demoted
            );
        }
        println!("run directory: {}", run.path().display());
        Ok(())
    }
}

/// What the fitting produced, besides the features.
pub(crate) struct Fitted {
    /// `(step, loss)` of every step of the run (all sessions of it).
    pub losses: Vec<(u64, f32)>,
    /// Wall seconds of this session's loop (or of the solver).
    pub seconds: f64,
    /// First step of this session.
    pub start: u64,
    /// Steps of the whole run.
    pub steps: u64,
    /// The solver's report (solvers only).
    pub fit: Option<FitReport>,
    /// A signal stopped the loop after `steps` steps (checkpointed).
    pub stopped: bool,
}

/// The run's metrics file: new, or cut back to a resumed checkpoint's step, with the
/// losses it already holds.
pub fn metrics_log(
    run: &RunDir,
    ckpt: Option<&Checkpoint>,
) -> Result<(MetricsLog, Vec<(u64, f32)>)> {
    let path = run.join(run::METRICS_FILE);
    Ok(match ckpt {
        Some(c) => {
            let log = MetricsLog::resume(&path, c.step)?;
            (log, run::read_losses(&path)?)
        }
        None => (MetricsLog::create(&path)?, Vec::new()),
    })
}

/// The checkpoint plugin of a run (rank 0 writes into `run_dir`).
pub fn checkpoints<B: Backend>(
    cfg: &Config,
    run_dir: Option<&Path>,
    backend: &str,
    identity: Option<String>,
) -> CheckpointPlugin<B> {
    CheckpointPlugin::new(
        cfg.log.checkpoint_every as u64,
        CheckpointTarget {
            run_dir: run_dir.map(Path::to_path_buf).unwrap_or_default(),
            keep: cfg.log.checkpoint_keep as usize,
            config: cfg.to_toml(),
            backend: backend.to_string(),
            identity,
        },
    )
}

/// What the Adam loop is given besides the session.
struct Steps<'a> {
    cfg: &'a Config,
    /// Rank 0's run directory (`None` on the other ranks).
    run: Option<&'a RunDir>,
    ckpt: Option<&'a Checkpoint>,
    backend: &'a str,
    /// The run's identity (JSON), recorded in its checkpoints.
    identity: Option<String>,
    /// Raised by a first Ctrl-C / SIGTERM: the loop stops after a checkpointed step.
    signals: &'a Signals,
}

/// The Adam loop: metrics file and checkpoint plugins, the resumed state, a progress
/// bar.
///
/// `run` is `None` on the ranks other than 0 of a data-parallel job: they train in
/// lockstep (the same read-back and checkpoint steps, so the collectives line up) but
/// write nothing.
fn train_steps<B: Backend>(session: &mut Session<B>, job: Steps<'_>) -> Result<Fitted> {
    let Steps {
        cfg,
        run,
        ckpt,
        backend,
        identity,
        signals,
    } = job;
    let mut losses = Vec::new();
    if let Some(run) = run {
        let (log, before) = metrics_log(run, ckpt)?;
        losses = before;
        session.engine.add_plugin(MetricsFilePlugin::<B>::new(log));
    }
    session.engine.add_plugin(checkpoints::<B>(
        cfg,
        run.map(|r| r.path()),
        backend,
        identity,
    ));
    session.engine.initialize()?;
    session.set_stop_flag(signals.flag.clone());
    if let Some(c) = ckpt {
        session.restore(c)?;
        if let Some(run) = run {
            run.unfinish()?;
        }
    }
    let start = session.steps_done();
    info!(
        backend = %backend,
        out = %run.map_or(Path::new("(rank 0's)"), |r| r.path()).display(),
        cache = ?cfg.render.cache,
        holdout = cfg.eval.holdout,
        from_step = start,
        rss_mb = resident_bytes().map_or(0, |b| b >> 20),
        "training"
    );
    let iters = cfg.train.iterations() as u64;
    let show = cfg.log.progress && run.is_some();
    let mut bar = progress::Progress::new("train", iters, "steps", show, Cadence::of(&cfg.log));
    bar.set_position(start);
    let t0 = Instant::now();
    let mut stopped = false;
    for _ in start..iters {
        if let Err(e) = session.step() {
            bar.abandon();
            return Err(match run {
                Some(run) => diverged_context(e, run),
                None => e.into(),
            });
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
        if session.stop_requested() {
            stopped = true;
            break;
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    bar.finish();
    Ok(Fitted {
        losses,
        seconds,
        start,
        steps: session.steps_done(),
        fit: None,
        stopped,
    })
}

/// The human-readable report of a finished run (every model).
pub(crate) fn print_summary(
    cfg: &Config,
    backend: &str,
    f: &Fitted,
    quality: Option<&[Quality]>,
    eval_seconds: f64,
) {
    match &f.fit {
        None => {
            let (start, iters, seconds) = (f.start, f.steps, f.seconds);
            if start > 0 {
                println!(
                    "resumed after step {start}: trained steps {start}–{} in {seconds:.2} s on {backend}",
                    iters - 1
                );
            } else {
                println!(
                    "trained {iters} steps in {seconds:.2} s ({:.0} it/s) on {backend}",
                    (iters - start) as f64 / seconds.max(1e-9)
                );
            }
            if let Some((a, b)) = outputs::loss_windows(&f.losses) {
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
        }
        Some(r) => {
            println!(
                "solved {} level(s) {:?} by `{}` in {:.2} s on {backend}",
                r.levels.len(),
                r.levels,
                r.kind.name(),
                f.seconds
            );
            if !r.residuals.is_empty() {
                let last = r.residuals.last().map(|v| v.as_slice()).unwrap_or(&[]);
                println!(
                    "lsq: {} iterations, relative residual {:?} ({}; tol {:e}), {} operators cached, {} streamed",
                    r.iterations,
                    last.iter().map(|v| format!("{v:.2e}")).collect::<Vec<_>>(),
                    if r.converged {
                        "converged"
                    } else {
                        "not converged"
                    },
                    cfg.solve.tol,
                    r.cached,
                    r.streamed
                );
                if let Some((_, got)) = &r.placement {
                    println!("operators: {got}");
                }
            }
            println!(
                "Gaussians with no weight (zero features), per level: {:?}",
                r.unweighted
            );
        }
    }
    for q in quality.unwrap_or(&[]) {
        let line = |what: &str, e: &lsplat_engine::EvalReport| {
            let l1 = if e.mean_l1.is_finite() {
                format!(", masked L1 {:.6}", e.mean_l1)
            } else {
                String::new()
            };
            println!(
                "level {}: recovered-feature similarity on {what} cameras ({}): mean cosine {:.4}{l1} over {} valid pixels",
                q.level, e.cameras, e.mean_cosine, e.pixels
            )
        };
        line("fitted", &q.fitted);
        if let Some(h) = &q.held_out {
            line("held-out", h);
        }
    }
    if quality.is_some() {
        println!("evaluation took {eval_seconds:.2} s");
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
