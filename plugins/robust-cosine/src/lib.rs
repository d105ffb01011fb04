//! An example lsplat-engine plugin: a robust cosine loss, written against the public
//! API only — a [`PixelLoss`] whose two device ops ([`ops::PixelsOp`],
//! [`ops::SumOp`]) each bring a native CPU implementation and a CUDA C kernel
//! (`kernels/robust_cosine.cu`) that the GPU runtimes (cuda, hip, simt) compile and
//! cache like the engine's own. docs/plugins.md walks through it.
//!
//! The loss of one camera is `L = Σ_valid ρ(1 − cos(F, G)) / (H·W)` with the Cauchy
//! penalty `ρ(r) = s·ln(1 + r/s)`, [`SCALE`] = s: near a target it behaves like the
//! cosine loss (ρ(r) ≈ r), far from it the gradient fades as `1/(1 + r/s)`, so pixels
//! whose mask feature is wrong pull less. Select it with
//! `train.loss_plugin = "robust_cosine"`.

pub mod ops;

use std::sync::Mutex;

use lsplat_device::{Backend, DeviceError, GroundTruth, OpArg, Scalar};
use lsplat_engine::PixelLoss;

/// The plugin's name (its ops' `plugin`).
pub const PLUGIN: &str = "robust-cosine";
/// The loss's name (`train.loss_plugin`).
pub const NAME: &str = "robust_cosine";
/// The Cauchy scale s: residuals 1 − cos well below it are penalised like the cosine
/// loss, residuals well above it logarithmically.
pub const SCALE: f32 = 0.2;

/// The robust cosine loss on backend `B`.
pub struct RobustCosine<B: Backend> {
    scale: f32,
    /// Per-pixel ρ, grown to the largest camera seen (allocated on the first steps only).
    rho: Mutex<Option<B::Buf<f32>>>,
}

impl<B: Backend> Default for RobustCosine<B> {
    fn default() -> Self {
        RobustCosine::new(SCALE)
    }
}

impl<B: Backend> RobustCosine<B> {
    /// The loss with Cauchy scale `scale` (> 0).
    pub fn new(scale: f32) -> Self {
        RobustCosine {
            scale,
            rho: Mutex::new(None),
        }
    }
}

impl<B: Backend> PixelLoss<B> for RobustCosine<B> {
    fn name(&self) -> &'static str {
        NAME
    }

    fn ops(&self) -> Vec<Box<dyn lsplat_device::DeviceOp>> {
        ops::all()
    }

    fn check_channels(&self, channels: usize) -> Result<(), String> {
        if channels < 2 {
            return Err(format!(
                "a cosine needs at least 2 channels, the dataset has {channels}"
            ));
        }
        Ok(())
    }

    fn loss(
        &self,
        dev: &B,
        rendered: &B::Buf<f32>,
        gt: &GroundTruth<B>,
        weight: f32,
        d_rendered: &mut B::Buf<f32>,
        loss: &mut B::Buf<f32>,
        slot: usize,
        accumulate: bool,
    ) -> Result<(), DeviceError> {
        let v = gt.pixels.len;
        let c = gt.channels;
        let scale = weight / gt.pixels.grid.pixel_count() as f32;
        let mut held = self.rho.lock().unwrap_or_else(|e| e.into_inner());
        if held.as_ref().is_none_or(|b| B::buf_len(b) < v.max(1)) {
            *held = Some(dev.alloc::<f32>(v.max(1))?);
        }
        let rho = held.as_mut().expect("allocated above");
        let pixels = ops::PixelsOp {
            rows: gt.rows,
            channels: c,
        };
        dev.run_op(
            &pixels,
            v,
            &mut [
                OpArg::F32(rendered),
                OpArg::U32(&gt.mask),
                OpArg::F32(&gt.table),
                OpArg::F32Mut(d_rendered),
                OpArg::F32Mut(rho),
                OpArg::Scalar(Scalar::U32(c as u32)),
                OpArg::Scalar(Scalar::F32(scale)),
                OpArg::Scalar(Scalar::F32(self.scale)),
            ],
        )?;
        dev.run_op(
            &ops::SumOp,
            ops::SUM_THREADS,
            &mut [
                OpArg::F32(rho),
                OpArg::F32Mut(loss),
                OpArg::Scalar(Scalar::U32(v as u32)),
                OpArg::Scalar(Scalar::U32(slot as u32)),
                OpArg::Scalar(Scalar::F32(scale)),
                OpArg::Scalar(Scalar::U32(accumulate as u32)),
            ],
        )
    }
}

#[cfg(test)]
mod tests;
