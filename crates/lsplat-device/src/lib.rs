//! The `Backend` trait: the op set every lsplat-engine device implements.
//!
//! Backends own their memory layouts. Buffers are the associated type
//! [`Backend::Buf`]; intermediate results whose layout is a backend's own business
//! (projected splats, sorted tile lists, the cached sparse operator) are opaque
//! associated types. Generic code (render orchestration, the ECS engine) moves them
//! around without looking inside.
//!
//! Every op is asynchronous on devices that can be: only [`Backend::download`] and
//! [`Backend::synchronize`] wait for the device, and the training step calls neither.

mod backend;
pub mod check;
mod error;
pub mod host;
pub mod op;
mod types;

pub use backend::{Backend, check_same_len};
pub use error::DeviceError;
pub use op::{DeviceOp, HostArg, HostArgs, HostPool, OpArg, OpKernel, Scalar};
pub use types::{
    AdamParams, CameraParams, Element, GroundTruth, MemoryInfo, OperatorStats, PixelSet,
};

/// Splits `channels` into consecutive ranges of at most `max` channels (for ops
/// called with more channels than a backend's [`Backend::max_channels`]).
pub fn channel_chunks(channels: usize, max: usize) -> Vec<std::ops::Range<usize>> {
    let max = max.max(1);
    (0..channels.div_ceil(max))
        .map(|i| i * max..((i + 1) * max).min(channels))
        .collect()
}

/// Result alias of this crate.
pub type Result<T, E = DeviceError> = std::result::Result<T, E>;
