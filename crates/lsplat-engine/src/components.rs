//! Components: plain data, device buffers owned by handles.

use bevy_ecs::prelude::*;
use lsplat_core::Camera;
use lsplat_data::ImageLabels;
use lsplat_device::Backend;
use lsplat_render::{CacheLevel, RasterCache};

/// The frozen geometry of a splat cloud, resident on the device.
#[derive(Component)]
pub struct Geometry<B: Backend> {
    /// Backend-owned geometry.
    pub buffers: B::Geometry,
    /// Number of Gaussians.
    pub count: usize,
}

/// Trainable per-Gaussian features (`[N, C]`), and their normalised form.
#[derive(Component)]
pub struct FeatureParams<B: Backend> {
    /// Raw parameters.
    pub x: B::Buf<f32>,
    /// What is rendered: `x` normalised per row (V1) or a copy of `x`.
    pub rendered: B::Buf<f32>,
    /// Channels C.
    pub channels: usize,
}

/// Gradients of the features.
#[derive(Component)]
pub struct Gradients<B: Backend> {
    /// ∂L/∂(rendered features), accumulated over the batch.
    pub d_rendered: B::Buf<f32>,
    /// ∂L/∂x.
    pub d_x: B::Buf<f32>,
}

impl<B: Backend> Gradients<B> {
    /// What the backward of the renders accumulates into: ∂L/∂(rendered features)
    /// under the V1 normalisation, ∂L/∂x otherwise.
    pub fn target(&mut self, normalize: bool) -> &mut B::Buf<f32> {
        if normalize {
            &mut self.d_rendered
        } else {
            &mut self.d_x
        }
    }
}

/// Adam moments.
#[derive(Component)]
pub struct AdamState<B: Backend> {
    /// First moment.
    pub m: B::Buf<f32>,
    /// Second moment.
    pub v: B::Buf<f32>,
}

/// One camera view.
#[derive(Component, Clone, Debug)]
pub struct CameraView {
    /// The camera.
    pub camera: Camera,
    /// Its index in the scene's camera list.
    pub index: usize,
}

/// Host-side compact labels of the camera (source of its ground truth).
#[derive(Component)]
pub struct Labels(pub ImageLabels);

/// Host-side labels of further levels solved together with [`Labels`]' level (in
/// `solve.levels` order after the first).
#[derive(Component)]
pub struct MoreLevels(pub Vec<ImageLabels>);

/// Marks a camera held out of fitting (`eval.holdout`): it is only evaluated.
#[derive(Component, Clone, Copy, Debug)]
pub struct HeldOut;

/// Device-resident ground truth of the camera.
#[derive(Component)]
pub struct GroundTruth<B: Backend>(pub lsplat_device::GroundTruth<B>);

/// The camera's raster cache, and the best level it may hold under the budget.
#[derive(Component)]
pub struct Cache<B: Backend> {
    /// What is cached.
    pub cache: RasterCache<B>,
    /// Highest level this camera may hold (lowered by eviction).
    pub allowed: CacheLevel,
    /// Step of the last visit (for LRU eviction).
    pub last_used: u64,
}

/// Marks a camera of the current batch; `slot` picks its frame buffers.
#[derive(Component, Clone, Copy, Debug)]
#[component(storage = "SparseSet")]
pub struct InBatch {
    /// Position in the batch.
    pub slot: usize,
}

/// Rank that owns a camera under data parallelism.
#[derive(Component, Clone, Copy, Debug)]
pub struct Shard(pub usize);
