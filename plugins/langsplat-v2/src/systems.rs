//! The systems of [`crate::model::LangSplatV2`] in the engine's phases, and the
//! evaluation of the final model.

use bevy_ecs::prelude::*;
use lsplat_device::{AdamParams, Backend, OpArg, Scalar};
use lsplat_engine::components::{Cache, CameraView, GroundTruth, InBatch};
use lsplat_engine::resources::{Dev, Fault, Frames, Metrics, Step, TrainSettings};

use crate::model::V2State;
use crate::{CODES, TOP_K, ops};

/// Whether this step needs [`select_codes`]: before the first Adam pass, which
/// selects for the next step, and whenever a batch camera is composited through the
/// dense weights (it holds no operator cache yet).
pub(crate) fn dense_needed<B: Backend>(
    state: Res<V2State<B>>,
    batch: Query<&Cache<B>, With<InBatch>>,
) -> bool {
    !state.selected
        || batch
            .iter()
            .any(|c| c.cache.level() != lsplat_render::CacheLevel::Operator)
}

/// Every Gaussian takes part in this step (a batch camera composites the dense
/// weights, or nothing is selected yet).
pub(crate) fn mark_all<B: Backend>(
    dev: Res<Dev<B>>,
    mut state: ResMut<V2State<B>>,
    mut fault: ResMut<Fault>,
) {
    fault.check(dev.0.fill(&mut state.vis, 1.0));
}

/// The Gaussians the batch cameras see: `vis[g] = 1` where a batch camera's operator
/// has weight on Gaussian g, else 0. A camera's set is probed once (`Wᵀ·1`, a
/// 1-channel sparse product) and kept as bits: geometry is frozen.
pub(crate) fn probe_visible<B: Backend>(
    dev: Res<Dev<B>>,
    mut state: ResMut<V2State<B>>,
    batch: Query<(&Cache<B>, &CameraView), With<InBatch>>,
    mut fault: ResMut<Fault>,
) {
    let (dev, st) = (&dev.0, &mut *state);
    let n = st.gaussians;
    fault.check(dev.fill(&mut st.vis, 0.0));
    for (c, view) in &batch {
        let k = view.index;
        if !st.seen_known[k] {
            fault.check(dev.fill(&mut st.probe, 0.0));
            let r = lsplat_render::cache::backward_sparse(
                dev,
                &c.cache,
                &st.probe_idx,
                &st.ones,
                1,
                1,
                &mut st.probe,
            );
            // `dense_needed` routes a camera without an operator to `mark_all`.
            if let Ok(false) = r {
                fault.check(dev.fill(&mut st.vis, 1.0));
                continue;
            }
            if fault.check(r).is_none() {
                continue;
            }
            fault.check(dev.run_op(
                &ops::VisBitsOp { gaussians: n },
                ops::vis_words(n),
                &mut [
                    OpArg::F32(&st.probe),
                    OpArg::U32Mut(&mut st.seen_bits[k]),
                    OpArg::Scalar(Scalar::U32(n as u32)),
                ],
            ));
            st.seen_known[k] = true;
        }
        fault.check(dev.run_op(
            &ops::VisOrOp { gaussians: n },
            n,
            &mut [OpArg::U32(&st.seen_bits[k]), OpArg::F32Mut(&mut st.vis)],
        ));
    }
}

/// Lazy Adam: the Gaussians this step's cameras see get the zero-gradient steps they
/// missed (and their selection) before they are composited.
pub(crate) fn catch_up<B: Backend>(
    dev: Res<Dev<B>>,
    mut state: ResMut<V2State<B>>,
    mut fault: ResMut<Fault>,
) {
    fault.check(state.catch_up(&dev.0));
}

/// Top-4 softmax of every Gaussian's logits into `idx`, `val` and the dense weights.
pub(crate) fn select_codes<B: Backend>(
    dev: Res<Dev<B>>,
    mut state: ResMut<V2State<B>>,
    mut fault: ResMut<Fault>,
) {
    fault.check(state.select(&dev.0));
}

/// Composites every batch camera's weights into its frame: the 4 (code, weight) pairs
/// per Gaussian through its operator, or the dense weights without one.
pub(crate) fn render_weights<B: Backend>(
    dev: Res<Dev<B>>,
    state: Res<V2State<B>>,
    mut frames: ResMut<Frames<B>>,
    batch: Query<(&Cache<B>, &GroundTruth<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    let (dev, st) = (&dev.0, &*state);
    for (c, gt, slot) in &batch {
        let frame = &mut frames.0[slot.slot];
        let out = &mut frame.rendered;
        let r = lsplat_render::cache::forward_sparse(
            dev, &c.cache, &st.idx, &st.val, TOP_K, CODES, out,
        )
        .and_then(|done| match done {
            true => Ok(()),
            false => lsplat_render::cache::forward(
                dev,
                &c.cache,
                &frame.scratch,
                &gt.0.pixels,
                &st.dense,
                CODES,
                out,
            ),
        });
        fault.check(r);
    }
}

/// Decode + cosine loss of every batch camera (slot order), the weight gradients
/// into the frames, the codebook gradient, and the batch-mean loss on the device.
pub(crate) fn decode_loss<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    step: Res<Step>,
    mut metrics: ResMut<Metrics<B>>,
    mut frames: ResMut<Frames<B>>,
    mut state: ResMut<V2State<B>>,
    batch: Query<(&GroundTruth<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    let dev = &dev.0;
    let st = &mut *state;
    let weight = 1.0 / settings.0.batch_size as f32;
    let slot = (step.0 % metrics.every) as u32;
    fault.check(dev.fill(&mut st.d_codebook, 0.0));
    let slots = settings.0.batch_size as usize;
    let ordered = (0..slots).flat_map(|s| batch.iter().filter(move |(_, b)| b.slot == s));
    for (i, (gt, b)) in ordered.enumerate() {
        let gt = &gt.0;
        let frame = &mut frames.0[b.slot];
        let (rows, v, d) = (gt.rows, gt.pixels.len, st.dim);
        let scale = weight / gt.pixels.grid.pixel_count() as f32;
        let r = (|| {
            st.decode_cosine(dev, gt, &frame.rendered, &mut frame.d_rendered, scale)?;
            let acc = ops::AccOp { rows, pixels: v };
            dev.run_op(
                &acc,
                acc.items(),
                &mut [
                    OpArg::F32(&frame.rendered),
                    OpArg::U32(&gt.mask),
                    OpArg::F32(&st.coef),
                    OpArg::F32Mut(&mut st.u),
                    OpArg::F32Mut(&mut st.s),
                    OpArg::F32Mut(&mut st.acc_part),
                    OpArg::U32Mut(&mut st.acc_count),
                    OpArg::Scalar(Scalar::U32(v as u32)),
                    OpArg::Scalar(Scalar::U32(rows as u32)),
                ],
            )?;
            dev.run_op(
                &ops::CodebookGradOp { rows, dim: d },
                CODES * d,
                &mut [
                    OpArg::F32(&st.u),
                    OpArg::F32(&st.s),
                    OpArg::F32(&gt.table),
                    OpArg::F32(&st.codebook),
                    OpArg::F32Mut(&mut st.d_codebook),
                    OpArg::Scalar(Scalar::U32(rows as u32)),
                ],
            )?;
            dev.run_op(
                &ops::SumOp,
                ops::SUM_THREADS,
                &mut [
                    OpArg::F32(&st.rho),
                    OpArg::F32Mut(&mut metrics.loss),
                    OpArg::Scalar(Scalar::U32(v as u32)),
                    OpArg::Scalar(Scalar::U32(slot)),
                    OpArg::Scalar(Scalar::F32(scale)),
                    OpArg::Scalar(Scalar::U32(u32::from(i > 0))),
                ],
            )
        })();
        fault.check(r);
    }
}

/// `Wᵀ` of every batch camera's weight gradient (slot order) at each Gaussian's
/// selected codes into `d_val`.
pub(crate) fn backward<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    frames: Res<Frames<B>>,
    mut state: ResMut<V2State<B>>,
    batch: Query<(&Cache<B>, &GroundTruth<B>, &InBatch)>,
    mut fault: ResMut<Fault>,
) {
    let dev = &dev.0;
    let st = &mut *state;
    fault.check(dev.fill(&mut st.d_val, 0.0));
    let mut dense = false;
    let slots = settings.0.batch_size as usize;
    let ordered = (0..slots).flat_map(|s| batch.iter().filter(move |(.., b)| b.slot == s));
    for (c, gt, b) in ordered {
        let frame = &frames.0[b.slot];
        let sparse = lsplat_render::cache::backward_sparse(
            dev,
            &c.cache,
            &st.idx,
            &frame.d_rendered,
            TOP_K,
            CODES,
            &mut st.d_val,
        );
        // Ran, or failed (the fault is kept): nothing dense to do for this camera.
        if fault.check(sparse) != Some(false) {
            continue;
        }
        if !dense {
            fault.check(dev.fill(&mut st.d_dense, 0.0));
            dense = true;
        }
        fault.check(lsplat_render::cache::backward(
            dev,
            &c.cache,
            &frame.scratch,
            &gt.0.pixels,
            &frame.d_rendered,
            CODES,
            &mut st.d_dense,
        ));
    }
    if dense {
        let n = st.gaussians;
        fault.check(dev.run_op(
            &ops::GatherAddOp { gaussians: n },
            n,
            &mut [
                OpArg::U32(&st.idx),
                OpArg::F32(&st.d_dense),
                OpArg::F32Mut(&mut st.d_val),
            ],
        ));
    }
}

/// Adam over the logits of the Gaussians this step's cameras see, fused with the
/// top-4 backward and their next selection (the others are caught up when next
/// seen), then Adam over the codebook.
pub(crate) fn adam<B: Backend>(
    dev: Res<Dev<B>>,
    settings: Res<TrainSettings>,
    step: Res<Step>,
    mut state: ResMut<V2State<B>>,
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
    let st = &mut *state;
    let n = st.gaussians;
    let k = ops::StepConstants::new(&hp);
    st.steps = hp.step;
    let bufs = ops::AdamSelectBufs {
        logits: &mut st.logits,
        m: &mut st.m_logits,
        v: &mut st.v_logits,
        idx: &mut st.idx,
        val: &mut st.val,
        d_val: &st.d_val,
        vis: &st.vis,
        last: &mut st.last,
    };
    fault.check(ops::AdamSelectOp { gaussians: n }.run(&dev.0, bufs, hp.step, &k));
    st.selected = true;
    fault.check(dev.0.adam_step(
        &mut st.codebook,
        &st.d_codebook,
        &mut st.m_codebook,
        &mut st.v_codebook,
        &hp,
    ));
}
