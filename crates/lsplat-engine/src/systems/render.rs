//! Project, Rasterize and Backward for the batch.

use bevy_ecs::prelude::*;
use lsplat_device::Backend;
use lsplat_render::{CacheLevel, cache};

use crate::components::{
    Cache, CameraView, FeatureParams, Geometry, Gradients, GroundTruth, InBatch,
};
use crate::resources::{Dev, Fault, Frames, RenderSettings, TileConfig, TrainSettings};

/// Run condition: some batch camera has no cache (cold, or caching is off).
pub fn any_cold_in_batch<B: Backend>(q: Query<&Cache<B>, With<InBatch>>) -> bool {
    q.iter().any(|c| c.cache.level() == CacheLevel::None)
}

/// Run condition: features are unit-normalised before rendering (LangSplat V1).
pub fn normalizing(settings: Res<TrainSettings>) -> bool {
    settings.0.normalize
}

/// Projects the Gaussians for every cold batch camera into its frame's scratch.
pub fn project_cold<B: Backend>(
    dev: Res<Dev<B>>,
    geometry: Single<&Geometry<B>>,
    render: Res<RenderSettings>,
    tiles: Res<TileConfig>,
    mut frames: ResMut<Frames<B>>,
    batch: Query<(&CameraView, &Cache<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    for (view, c, slot) in &batch {
        if c.cache.level() != CacheLevel::None {
            continue;
        }
        let cam = &view.camera;
        let grid = lsplat_core::TileGrid::new(tiles.tile_size, cam.width, cam.height);
        let clip = (render.0.near, render.0.far);
        let scratch = &mut frames.0[slot.slot].scratch;
        fault.check(cache::project(
            &dev.0,
            &geometry.buffers,
            cam,
            grid,
            clip,
            scratch,
        ));
    }
}

/// Bins every cold batch camera; the cache phase's budget logic then decides what
/// each may keep (see [`super::cache::admit_caches`]).
pub fn bin_cold<B: Backend>(
    dev: Res<Dev<B>>,
    tiles: Res<TileConfig>,
    mut frames: ResMut<Frames<B>>,
    batch: Query<(&CameraView, &Cache<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    for (view, c, slot) in &batch {
        if c.cache.level() != CacheLevel::None {
            continue;
        }
        let grid =
            lsplat_core::TileGrid::new(tiles.tile_size, view.camera.width, view.camera.height);
        fault.check(cache::bin(&dev.0, grid, &mut frames.0[slot.slot].scratch));
    }
}

/// `rendered = normalise(x)`.
pub fn normalize_features<B: Backend>(
    dev: Res<Dev<B>>,
    mut params: Single<&mut FeatureParams<B>>,
    mut fault: ResMut<Fault>,
) {
    let FeatureParams {
        x,
        rendered,
        channels,
    } = &mut **params;
    fault.check(dev.0.normalize(x, *channels, rendered));
}

/// The features the rasterizer reads.
pub(crate) fn rendered_features<B: Backend>(p: &FeatureParams<B>, normalize: bool) -> &B::Buf<f32> {
    if normalize { &p.rendered } else { &p.x }
}

/// Whether a camera's forward, loss and backward run fused (in the Loss phase).
pub(crate) fn is_fused<B: Backend>(render: &RenderSettings, cache: &Cache<B>) -> bool {
    render.0.fused && cache.cache.level() == CacheLevel::Operator
}

/// Renders the batch cameras' valid pixels into their frames (fused cameras render
/// in the Loss phase).
pub fn render_batch<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    render: Res<RenderSettings>,
    params: Single<&FeatureParams<B>>,
    mut frames: ResMut<Frames<B>>,
    batch: Query<(&Cache<B>, &GroundTruth<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    let x = rendered_features(&params, settings.0.normalize);
    for (c, gt, slot) in &batch {
        if is_fused(&render, c) {
            continue;
        }
        let frame = &mut frames.0[slot.slot];
        let r = cache::forward(
            &dev.0,
            &c.cache,
            &frame.scratch,
            &gt.0.pixels,
            x,
            params.channels,
            &mut frame.rendered,
        );
        fault.check(r);
    }
}

/// Accumulates `Wᵀ·dF` of every unfused batch camera into the gradient the Loss phase
/// zeroed (fused cameras added theirs there), then chains through the normalisation.
pub fn backward_batch<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    render: Res<RenderSettings>,
    mut q: Single<(&FeatureParams<B>, &mut Gradients<B>)>,
    frames: Res<Frames<B>>,
    batch: Query<(&Cache<B>, &GroundTruth<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    let (params, grads) = &mut *q;
    let c = params.channels;
    let normalize = settings.0.normalize;
    let target = grads.target(normalize);
    // In slot order: the sum over the batch must not depend on how the ECS happens to
    // store the cameras (it differs between an uninterrupted and a resumed run).
    let slots = settings.0.batch_size as usize;
    let ordered = (0..slots).flat_map(|s| batch.iter().filter(move |(.., b)| b.slot == s));
    for (cache, gt, slot) in ordered {
        if is_fused(&render, cache) {
            continue;
        }
        let frame = &frames.0[slot.slot];
        fault.check(cache::backward(
            &dev.0,
            &cache.cache,
            &frame.scratch,
            &gt.0.pixels,
            &frame.d_rendered,
            c,
            target,
        ));
    }
}

/// The V1 normalisation's chain rule: ∂L/∂x from ∂L/∂(normalised features). It runs
/// in the Step phase, after the AllReduce phase has averaged the gradient the renders
/// produced over the ranks (a per-Gaussian map of parameters every rank holds
/// identically), so R ranks with batch b compute bit for bit what one rank with batch
/// R·b computes.
pub fn normalize_chain<B: Backend>(
    dev: Res<Dev<B>>,
    mut q: Single<(&FeatureParams<B>, &mut Gradients<B>)>,
    mut fault: ResMut<Fault>,
) {
    let (params, grads) = &mut *q;
    let c = params.channels;
    let Gradients { d_rendered, d_x } = &mut **grads;
    fault.check(dev.0.normalize_backward(&params.x, d_rendered, c, d_x));
}
