//! The loss the Loss phase computes: a built-in [`LossKind`] or one a plugin brings.

use bevy_ecs::prelude::*;
use lsplat_core::config::LossKind;
use lsplat_device::{Backend, DeviceError, GroundTruth};

/// A per-pixel loss on the valid pixels of one camera, with the contract of
/// [`Backend::pixel_loss`]: write `d_rendered = weight · ∂L/∂rendered` and add
/// `weight · L` to `loss[slot]` (store it when `accumulate` is false). Plugins
/// implement it over [`Backend::run_op`], so it runs on every backend.
pub trait PixelLoss<B: Backend>: Send + Sync + 'static {
    /// The loss's name (`train.loss` / `train.loss_plugin`).
    fn name(&self) -> &'static str;
    /// A built-in kind the fused operator step can run instead; `None` renders,
    /// evaluates and back-propagates in separate passes.
    fn fused_kind(&self) -> Option<LossKind> {
        None
    }
    /// Every device op the loss runs (prepared — GPU kernels compiled — when the loss
    /// is installed, so a kernel that does not compile stops the run before its first
    /// step).
    fn ops(&self) -> Vec<Box<dyn lsplat_device::DeviceOp>> {
        Vec::new()
    }
    /// Refuses feature widths the loss is not meant for (checked before any step).
    fn check_channels(&self, channels: usize) -> Result<(), String> {
        let _ = channels;
        Ok(())
    }
    /// The loss and its gradient for one camera.
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
    ) -> Result<(), DeviceError>;
}

impl<B: Backend> PixelLoss<B> for LossKind {
    fn name(&self) -> &'static str {
        LossKind::name(*self)
    }

    fn fused_kind(&self) -> Option<LossKind> {
        Some(*self)
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
        dev.pixel_loss(
            *self, rendered, gt, weight, d_rendered, loss, slot, accumulate,
        )
    }
}

/// The active loss.
#[derive(Resource)]
pub struct ActiveLoss<B: Backend>(pub Box<dyn PixelLoss<B>>);
