//! Systems: thin adapters from components and resources to the domain functions.
//! Each submodule serves one or two phases.

pub mod batch;
pub mod cache;
pub mod checkpoint;
pub mod dist;
pub mod log;
pub mod optim;
pub mod render;
pub mod solve;
