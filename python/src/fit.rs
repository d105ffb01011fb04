//! `solve` and `train`: a `Session` of the engine, set up and run as `lsplat-engine
//! solve` / `train` run it, with the GIL released while it works.

use std::time::Instant;

use lsplat_core::Config;
use lsplat_core::config::SolverKind;
use lsplat_data::{ImageLabels, SceneData};
use lsplat_device::Backend;
use lsplat_engine::{Quality, Session};
use lsplat_render::{BackendVisitor, Device};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict};

use crate::arrays::to_numpy;
use crate::errors::{Error, Result};
use crate::scene::Scene;

struct SolveJob<'a> {
    cfg: &'a Config,
    data: SceneData,
    more: Vec<Vec<ImageLabels>>,
}

impl BackendVisitor for SolveJob<'_> {
    type Output = Result<(Vec<f32>, usize)>;

    fn visit<B: Backend>(self, dev: B) -> Self::Output {
        let mut s = Session::with_levels(dev, self.cfg, self.data, self.more)?;
        s.fit()?;
        let width = s.channels() * s.levels().len();
        Ok((s.features()?, width))
    }
}

/// Fits the per-Gaussian features without training (`lsplat-engine solve`).
#[pyfunction]
#[pyo3(signature = (scene, method, levels=None, config=Vec::new()))]
pub fn solve<'py>(
    py: Python<'py>,
    scene: &Bound<'py, Scene>,
    method: &str,
    levels: Option<Vec<u8>>,
    config: Vec<String>,
) -> Result<Bound<'py, PyAny>> {
    let scene = scene.get();
    let mut cfg = scene.config_with(&config)?;
    if !matches!(method, "average" | "lsq") {
        return Err(Error::Value(format!(
            "method: {method:?}, expected \"average\" or \"lsq\""
        )));
    }
    cfg.set(&format!("train.solver={method}"))?;
    if let Some(levels) = &levels {
        let list: Vec<String> = levels.iter().map(|l| l.to_string()).collect();
        cfg.set(&format!("solve.levels=[{}]", list.join(",")))
            .map_err(|e| Error::Value(format!("levels: {e}")))?;
    }
    lsplat_plugins::check(&cfg)?;
    let (features, width) = py.detach(|| -> Result<_> {
        let (data, more) = scene.data(&cfg)?;
        lsplat_plugins::check_dataset(&cfg, &data)?;
        let dev = Device::open(&cfg.device, &cfg.simt)?;
        dev.visit(SolveJob {
            cfg: &cfg,
            data,
            more,
        })
    })?;
    let n = scene.gaussians.len();
    Ok(to_numpy(py, features, &[n, width])?.into_any())
}

/// How a training loop ended.
#[derive(Clone, Copy, PartialEq)]
enum End {
    /// Every step ran.
    Done,
    /// The callback returned False.
    Stopped,
    /// Ctrl-C (KeyboardInterrupt) between two windows.
    Interrupted,
}

/// What `train` returns (made into `lsplat.Trained` by the Python layer).
struct Trained {
    features: Vec<f32>,
    parameters: Vec<f32>,
    channels: usize,
    losses: Vec<(u64, f32)>,
    steps: u64,
    seconds: f64,
    end: End,
    quality: Vec<Quality>,
}

struct TrainJob<'py> {
    py: Python<'py>,
    cfg: Config,
    data: SceneData,
    more: Vec<Vec<ImageLabels>>,
    callback: Option<Bound<'py, PyAny>>,
}

impl BackendVisitor for TrainJob<'_> {
    type Output = Result<Trained>;

    fn visit<B: Backend>(self, dev: B) -> Self::Output {
        let TrainJob {
            py,
            cfg,
            data,
            more,
            callback,
        } = self;
        let mut session = py.detach(|| -> Result<Session<B>> {
            let mut s = Session::with_levels(dev, &cfg, data, more)?;
            if let Some(loss) = lsplat_plugins::loss::<B>(&cfg) {
                s.use_loss(loss)?;
            }
            Ok(s)
        })?;
        let iters = u64::from(
            cfg.train
                .iterations
                .unwrap_or(lsplat_core::config::DEFAULT_ITERATIONS),
        );
        let every = u64::from(cfg.log.every.max(1));
        let mut losses = Vec::new();
        let mut end = End::Done;
        let t0 = Instant::now();
        while session.steps_done() < iters {
            // One logging window: its steps run without the GIL; the engine reads the
            // window's losses back at its last step.
            let last = ((session.steps_done() / every + 1) * every).min(iters);
            let fresh = py.detach(|| -> Result<_> {
                while session.steps_done() < last {
                    session.step()?;
                }
                session.drain_cache_reports();
                Ok(session.drain_records())
            })?;
            losses.extend(fresh.iter().map(|r| (r.step, r.loss)));
            if let (Some(cb), Some(r)) = (&callback, fresh.last()) {
                let mean =
                    fresh.iter().map(|r| f64::from(r.loss)).sum::<f64>() / fresh.len() as f64;
                match cb.call1((r.step, mean)) {
                    Ok(v) if v.cast::<PyBool>().is_ok_and(|b| !b.is_true()) => {
                        end = End::Stopped;
                        break;
                    }
                    Ok(_) => {}
                    Err(e) if e.is_instance_of::<PyKeyboardInterrupt>(py) => {
                        end = End::Interrupted;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            if let Err(e) = py.check_signals() {
                if e.is_instance_of::<PyKeyboardInterrupt>(py) {
                    end = End::Interrupted;
                    break;
                }
                return Err(e.into());
            }
        }
        let seconds = t0.elapsed().as_secs_f64();
        py.detach(|| -> Result<Trained> {
            let quality = if cfg.log.eval && end != End::Interrupted {
                session.quality()?
            } else {
                Vec::new()
            };
            Ok(Trained {
                features: session.features()?,
                parameters: session.parameters()?,
                channels: session.channels(),
                losses,
                steps: session.steps_done(),
                seconds,
                end,
                quality,
            })
        })
    }
}

/// Trains LangSplat's per-Gaussian features by Adam steps (`lsplat-engine train`).
#[pyfunction]
#[pyo3(signature = (scene, iterations=None, callback=None, config=Vec::new()))]
pub fn train<'py>(
    py: Python<'py>,
    scene: &Bound<'py, Scene>,
    iterations: Option<u32>,
    callback: Option<Bound<'py, PyAny>>,
    config: Vec<String>,
) -> Result<Bound<'py, PyDict>> {
    let scene = scene.get();
    let mut cfg = scene.config_with(&config)?;
    if let Some(n) = iterations {
        cfg.set(&format!("train.iterations={n}"))
            .map_err(|e| Error::Value(format!("iterations: {e}")))?;
    }
    if cfg.train.solver != SolverKind::Adam {
        return Err(Error::Config(format!(
            "train.solver = {} fits without steps: call lsplat.solve(scene, method=\"{}\")",
            cfg.train.solver.name(),
            cfg.train.solver.name()
        )));
    }
    lsplat_plugins::check(&cfg)?;
    lsplat_plugins::resolve_iterations(&mut cfg);
    if cfg.train.model != lsplat_plugins::BUILT_IN_MODEL {
        return Err(Error::Config(format!(
            "train.model = {}: the Python package trains the built-in model; train this model with `lsplat-engine train` and open its run with lsplat.Run.open",
            cfg.train.model
        )));
    }
    if let Some(cb) = &callback
        && !cb.is_callable()
    {
        return Err(Error::Type(
            "callback: expected a callable (step, loss)".into(),
        ));
    }
    let (data, more) = py.detach(|| -> Result<_> {
        let (data, more) = scene.data(&cfg)?;
        lsplat_plugins::check_dataset(&cfg, &data)?;
        Ok((data, more))
    })?;
    let dev = py.detach(|| Device::open(&cfg.device, &cfg.simt))?;
    let t = dev.visit(TrainJob {
        py,
        cfg: cfg.clone(),
        data,
        more,
        callback,
    })?;
    let n = scene.gaussians.len();
    let out = PyDict::new(py);
    let width = t.features.len() / n.max(1);
    out.set_item("features", to_numpy(py, t.features, &[n, width])?)?;
    out.set_item("parameters", to_numpy(py, t.parameters, &[n, t.channels])?)?;
    let (steps, losses): (Vec<u64>, Vec<f32>) = t.losses.into_iter().unzip();
    let k = steps.len();
    out.set_item("loss_steps", to_numpy(py, steps, &[k])?)?;
    out.set_item("losses", to_numpy(py, losses, &[k])?)?;
    out.set_item("steps", t.steps)?;
    out.set_item("seconds", t.seconds)?;
    out.set_item("stopped", t.end == End::Stopped)?;
    out.set_item("interrupted", t.end == End::Interrupted)?;
    out.set_item("config_toml", cfg.to_toml())?;
    let quality = pyo3::types::PyList::empty(py);
    for q in &t.quality {
        let d = PyDict::new(py);
        d.set_item("level", q.level)?;
        d.set_item("fitted", report(py, &q.fitted)?)?;
        match &q.held_out {
            Some(h) => d.set_item("held_out", report(py, h)?)?,
            None => d.set_item("held_out", py.None())?,
        }
        quality.append(d)?;
    }
    out.set_item("quality", quality)?;
    Ok(out)
}

/// An evaluation report as a dict.
fn report<'py>(py: Python<'py>, e: &lsplat_engine::EvalReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("mean_cosine", e.mean_cosine)?;
    d.set_item("mean_l1", e.mean_l1)?;
    d.set_item("pixels", e.pixels)?;
    d.set_item("cameras", e.cameras)?;
    Ok(d)
}
