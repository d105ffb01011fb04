//! The CUDA backend of lsplat-engine.
pub mod nvrtc;
