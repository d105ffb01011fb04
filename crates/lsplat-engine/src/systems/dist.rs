//! AllReduce: the ranks' gradients averaged before the step, so every rank takes the
//! identical optimiser step.

use bevy_ecs::prelude::*;
use lsplat_device::Backend;

use crate::components::Gradients;
use crate::resources::{Collective, Dev, Fault, GradientReduce, TrainSettings};

/// Run condition: more than one rank.
pub fn multi_rank(collective: Res<Collective>) -> bool {
    collective.world_size > 1
}

/// Replaces the batch's gradient — as the renders produced it: ∂L/∂(normalised
/// features) under the V1 normalisation, whose chain rule follows in Step, else ∂L/∂x
/// — by its mean over the ranks (through a host copy: MPI host buffers on the CPU and
/// simt; staged through the host on a GPU).
pub fn all_reduce_gradients<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    collective: Res<Collective>,
    mut reduce: ResMut<GradientReduce>,
    mut grads: Single<&mut Gradients<B>>,
    mut fault: ResMut<Fault>,
) {
    let t0 = std::time::Instant::now();
    let reduce = &mut *reduce;
    let target = grads.target(settings.0.normalize);
    if fault
        .check(dev.0.download_into(target, &mut reduce.host))
        .is_none()
    {
        return;
    }
    let Some(stats) = fault.check(reduce.reducer.mean(&*collective.comm, &mut reduce.host)) else {
        return;
    };
    fault.check(dev.0.upload_into(target, &reduce.host));
    let t = &mut reduce.totals;
    t.steps += 1;
    t.sparse_steps += stats.sparse as u64;
    t.dense_bytes += stats.dense_bytes;
    t.sent_bytes += stats.sent_bytes;
    t.seconds += t0.elapsed().as_secs_f64();
}
