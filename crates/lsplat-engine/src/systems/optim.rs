//! Loss and Step.

use bevy_ecs::prelude::*;
use lsplat_device::{AdamParams, Backend};

use lsplat_render::RasterCache;

use super::render;
use crate::ActiveLoss;
use crate::components::{AdamState, Cache, FeatureParams, Gradients, GroundTruth, InBatch};
use crate::resources::{Dev, Fault, Frames, Metrics, RenderSettings, Step, TrainSettings};

/// Zeroes the gradient the backward accumulates into, then computes the configured
/// loss on each batch camera: from its rendered frame, or — for a camera whose
/// operator is cached, with `render.fused` — forward, loss and backward in one pass
/// over the operator. The batch mean goes to the step's metrics slot on the device.
pub fn loss_batch<B: Backend>(
    dev: Res<Dev<B>>,
    loss: Res<ActiveLoss<B>>,
    settings: Res<TrainSettings>,
    render: Res<RenderSettings>,
    step: Res<Step>,
    mut metrics: ResMut<Metrics<B>>,
    mut frames: ResMut<Frames<B>>,
    mut q: Single<(&FeatureParams<B>, &mut Gradients<B>)>,
    batch: Query<(&GroundTruth<B>, &Cache<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    let weight = 1.0 / settings.0.batch_size as f32;
    let slot = (step.0 % metrics.every) as usize;
    let normalize = settings.0.normalize;
    let (params, grads) = &mut *q;
    let target = grads.target(normalize);
    fault.check(dev.0.fill(target, 0.0));
    let x = render::rendered_features(params, normalize);
    // In slot order: the first camera writes the step's loss, the others add to it.
    // (A camera drawn twice in one batch, across an epoch boundary, holds one slot.)
    let slots = settings.0.batch_size as usize;
    let ordered = (0..slots).flat_map(|s| batch.iter().filter(move |(.., b)| b.slot == s));
    for (i, (gt, cache, b)) in ordered.enumerate() {
        let frame = &mut frames.0[b.slot];
        let r = match (&cache.cache, loss.0.fused_kind()) {
            (RasterCache::Operator { op }, Some(kind)) if render.0.fused => {
                dev.0.operator_loss_step(
                    kind,
                    op,
                    x,
                    &gt.0,
                    weight,
                    (&mut frame.rendered, &mut frame.d_rendered),
                    target,
                    &mut metrics.loss,
                    slot,
                    i > 0,
                )
            }
            _ => loss.0.loss(
                &dev.0,
                &frame.rendered,
                &gt.0,
                weight,
                &mut frame.d_rendered,
                &mut metrics.loss,
                slot,
                i > 0,
            ),
        };
        fault.check(r);
    }
}

/// One fused Adam step over the features.
pub fn adam_step<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    step: Res<Step>,
    mut q: Single<(&mut FeatureParams<B>, &Gradients<B>, &mut AdamState<B>)>,
    mut fault: ResMut<Fault>,
) {
    let t = &settings.0;
    let hp = AdamParams {
        lr: t.lr,
        beta1: t.beta1,
        beta2: t.beta2,
        eps: t.eps,
        step: (step.0 + 1) as u32,
        grad_scale: 1.0,
    };
    let (params, grads, state) = &mut *q;
    let AdamState { m, v } = &mut **state;
    fault.check(dev.0.adam_step(&mut params.x, &grads.d_x, m, v, &hp));
}
