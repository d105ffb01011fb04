//! Quality of a trained LangSplatV2 model on any cameras, fitted or held out: the
//! decoded feature `Bᵀw` of every valid pixel against its CLIP target, by cosine (the
//! model's loss), through a camera's cache when it has one and a fresh projection
//! otherwise (held-out cameras never have a cache or resident ground truth).

use bevy_ecs::prelude::*;
use lsplat_device::Backend;
use lsplat_engine::components::{Cache, CameraView, Geometry, GroundTruth, Labels};
use lsplat_engine::resources::{CameraIndex, Dev, Frames, RenderSettings};
use lsplat_engine::{EngineError, EvalReport};
use lsplat_render::RasterCache;

use crate::CODES;
use crate::model::V2State;

/// Mean cosine over the valid pixels of `cameras` (indices in the scene's order), the
/// pixels and the cameras counted. `mean_l1` is NaN: V2 is scored by the cosine of its
/// decoded 512-D feature (its loss), which the L1 of 3-D codes does not compare with.
pub fn evaluate<B: Backend>(
    world: &mut World,
    cameras: &[usize],
) -> Result<EvalReport, EngineError> {
    let mut geometry = world.query::<&Geometry<B>>();
    world.resource_scope(|world, mut state: Mut<V2State<B>>| {
        world.resource_scope(|world, mut frames: Mut<Frames<B>>| {
            let dev = &world.resource::<Dev<B>>().0;
            let st = &mut *state;
            st.finish(dev)?;
            let frame = &mut frames.0[0];
            let render = &world.resource::<RenderSettings>().0;
            let clip = (render.near, render.far);
            let geometry = geometry
                .single(world)
                .map_err(|e| EngineError::Config(format!("no splat cloud: {e}")))?;
            let index = &world.resource::<CameraIndex>().0;
            let tile = render.tile_size;
            let (mut sum, mut pixels, mut counted) = (0.0f64, 0usize, 0usize);
            for &cam in cameras {
                let e = *index
                    .get(cam)
                    .ok_or_else(|| EngineError::Config(format!("no camera {cam} to evaluate")))?;
                let (Some(view), Some(labels)) =
                    (world.get::<CameraView>(e), world.get::<Labels>(e))
                else {
                    return Err(EngineError::Config(format!("camera {cam} has no labels")));
                };
                let uploaded;
                let gt = match world.get::<GroundTruth<B>>(e) {
                    Some(g) => &g.0,
                    None => {
                        uploaded = lsplat_engine::gt::upload(dev, &labels.0, tile)?;
                        &uploaded
                    }
                };
                counted += 1;
                let v = gt.pixels.len;
                if v == 0 {
                    continue;
                }
                let cache = world.get::<Cache<B>>(e).map(|c| &c.cache);
                let cold = RasterCache::<B>::Cold;
                let cache = match cache {
                    Some(c @ (RasterCache::Operator { .. } | RasterCache::Geometry { .. })) => c,
                    _ => {
                        let grid = gt.pixels.grid;
                        let s = &mut frame.scratch;
                        lsplat_render::cache::project(
                            dev,
                            &geometry.buffers,
                            &view.camera,
                            grid,
                            clip,
                            s,
                        )?;
                        lsplat_render::cache::bin(dev, grid, s)?;
                        &cold
                    }
                };
                lsplat_render::cache::forward(
                    dev,
                    cache,
                    &frame.scratch,
                    &gt.pixels,
                    &st.dense,
                    CODES,
                    &mut frame.rendered,
                )?;
                st.decode_cosine(dev, gt, &frame.rendered, &mut frame.d_rendered, 1.0)?;
                let rho = dev.download(&st.rho)?;
                sum += rho[..v].iter().map(|&r| r as f64).sum::<f64>();
                pixels += v;
            }
            Ok(EvalReport {
                mean_cosine: if pixels > 0 {
                    1.0 - sum / pixels as f64
                } else {
                    f64::NAN
                },
                mean_l1: f64::NAN,
                pixels,
                cameras: counted,
            })
        })
    })
}
