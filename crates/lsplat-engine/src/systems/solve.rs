//! Fit: the solver plugins' system, a thin adapter from the world (geometry,
//! cameras, labels of every level, held-out marks) to `lsplat_solve`.

use std::time::Instant;

use bevy_ecs::prelude::*;
use lsplat_core::config::SolverKind;
use lsplat_device::Backend;
use lsplat_solve::{LsqOptions, Problem, RenderParams, Visits};

use crate::EngineError;
use crate::components::{CameraView, FeatureParams, Geometry, HeldOut, Labels, MoreLevels};
use crate::resources::{
    CameraIndex, Dev, Fault, FitEvent, FitOperators, FitProgress, FitReport, RenderSettings,
    SolverSettings,
};

/// Borrows the world's geometry, cameras and labels as a solver problem (all
/// cameras; the held-out ones are excluded from `fit`), and runs `f` on it.
pub fn with_problem<B: Backend, R>(
    world: &mut World,
    f: impl FnOnce(&World, &B, &Problem<'_, B>) -> Result<R, EngineError>,
) -> Result<R, EngineError> {
    let mut geometry = world.query::<&Geometry<B>>();
    let world = &*world;
    let geometry = geometry
        .single(world)
        .map_err(|e| EngineError::Config(format!("no splat cloud: {e}")))?;
    let index = &world.resource::<CameraIndex>().0;
    let render = &world.resource::<RenderSettings>().0;
    let mut cameras = Vec::with_capacity(index.len());
    let mut levels: Vec<Vec<_>> = Vec::new();
    let mut fit = Vec::new();
    for (i, &e) in index.iter().enumerate() {
        let (Some(view), Some(labels)) = (world.get::<CameraView>(e), world.get::<Labels>(e))
        else {
            return Err(EngineError::Config(format!("camera {i} has no labels")));
        };
        cameras.push(view.camera.clone());
        let more = world.get::<MoreLevels>(e).map_or(&[][..], |m| &m.0[..]);
        if levels.is_empty() {
            levels = vec![Vec::with_capacity(index.len()); 1 + more.len()];
        }
        levels[0].push(&labels.0);
        for (l, lab) in more.iter().enumerate() {
            levels[l + 1].push(lab);
        }
        if world.get::<HeldOut>(e).is_none() {
            fit.push(i);
        }
    }
    let progress = world.get_resource::<FitProgress>().cloned();
    let on_camera = progress.as_ref().map(|p| {
        let p = p.0.clone();
        move |done, total| p(FitEvent::Cameras { done, total })
    });
    let problem = Problem::<B> {
        geometry: &geometry.buffers,
        gaussians: geometry.count,
        cameras: &cameras,
        levels,
        fit,
        render: RenderParams::from(render),
        on_camera: on_camera
            .as_ref()
            .map(|f| f as &(dyn Fn(usize, usize) + Sync)),
    };
    f(world, &world.resource::<Dev<B>>().0, &problem)
}

/// Runs the configured solver over the fitted cameras and stores the solution in
/// the splat cloud's features (`[N, L·C]`, composited as stored).
pub fn fit<B: Backend>(world: &mut World) {
    let settings = world.resource::<SolverSettings>().clone();
    let progress = world.get_resource::<FitProgress>().cloned();
    let t0 = Instant::now();
    let mut channels = 1;
    let mut placement = None;
    let solved = with_problem::<B, _>(world, |_, dev, p| {
        channels = p.channels().max(1);
        let mut visits = Visits::new(p.cameras.len());
        let eps = settings.solve.eps;
        Ok(match settings.kind {
            SolverKind::Lsq => {
                let opts = LsqOptions {
                    tol: settings.solve.tol,
                    max_iters: settings.solve.max_iters,
                    lambda: settings.solve.lambda,
                    eps,
                    budget: settings.budget,
                    spill: settings.spill.clone(),
                };
                let max = opts.max_iters;
                let r = lsplat_solve::lsq(dev, p, &opts, &mut visits, |it, res| {
                    tracing::info!(iteration = it, relative_residual = ?res, "lsq");
                    if let Some(p) = &progress {
                        (p.0)(FitEvent::Iteration {
                            iteration: it,
                            max,
                            residuals: res.to_vec(),
                        });
                    }
                })
                .map_err(solve_error)?;
                let report = (r.iterations, r.residuals.clone(), r.converged);
                placement = r.placement;
                let counts = (r.cached, r.streamed, r.average.unweighted.clone());
                let x = r.x.clone();
                (x, report, counts, Some(r.into_operators()), visits)
            }
            _ => {
                let a = lsplat_solve::average(dev, p, eps, &mut visits).map_err(solve_error)?;
                (
                    a.x,
                    (0, Vec::new(), true),
                    (0, 0, a.unweighted),
                    None,
                    visits,
                )
            }
        })
    });
    let (mut x, (iterations, residuals, converged), (cached, streamed, unweighted), ops, visits) =
        match solved {
            Ok(s) => s,
            Err(e) => {
                world.resource_mut::<Fault>().0 = Some(e);
                return;
            }
        };
    if settings.solve.unit_rows {
        lsplat_solve::unit_rows(&mut x, channels);
    }
    let uploaded = world.resource::<Dev<B>>().0.upload(&x);
    let mut q = world.query::<&mut FeatureParams<B>>();
    match (uploaded, q.single_mut(world)) {
        (Ok(buf), Ok(mut params)) => params.x = buf,
        (Err(e), _) => {
            world.resource_mut::<Fault>().0 = Some(e.into());
            return;
        }
        (_, Err(e)) => {
            world.resource_mut::<Fault>().0 =
                Some(EngineError::Config(format!("no splat cloud: {e}")));
            return;
        }
    }
    if let Some(ops) = ops {
        world.insert_resource(FitOperators::<B>(ops));
    }
    world.insert_resource(FitReport {
        kind: settings.kind,
        levels: settings.levels.clone(),
        seconds: t0.elapsed().as_secs_f64(),
        unweighted,
        iterations,
        residuals,
        converged,
        cached,
        streamed,
        placement,
        visits,
    });
}

pub(crate) fn solve_error(e: lsplat_solve::SolveError) -> EngineError {
    match e {
        lsplat_solve::SolveError::Device(d) => d.into(),
        lsplat_solve::SolveError::Problem(m) => EngineError::Config(m),
    }
}
