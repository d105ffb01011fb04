//! `lsplat-engine view`: an interactive web viewer of a run.
//!
//! A local HTTP server (axum on tokio) serves an embedded page and renders frames on
//! the engine's backend for the pose, mode and query each page asks for, streaming
//! them as JPEG (PNG on request) over a WebSocket: a quick low-resolution frame while
//! the camera moves, the full frame when it stops.
//!
//! - [`scene`]: a run folder (one level or `level_<l>/` folders) with the splats'
//!   colours and what turns its features into answers.
//! - [`answers`], [`table`]: per-pixel dot products with text-space targets, without
//!   forming the 512-D features.
//! - [`frame`]: one frame of one mode on a backend, with its timings.
//! - [`ops`]: the device ops that make a frame's pictures where the rasterizer ran.
//! - [`jpeg`]: baseline JPEG in independent blocks and restart intervals, so a
//!   frame is encoded on many threads or on the device.

pub mod answers;
pub mod bench;
pub mod encode;
pub mod error;
pub mod frame;
pub mod jpeg;
pub mod jpeg_ops;
pub mod ops;
pub mod protocol;
pub mod scene;
pub mod segment_ops;
pub mod server;
mod session;
pub mod table;
pub mod worker;

pub use error::{Result, ViewError};
pub use server::{Serve, serve};
