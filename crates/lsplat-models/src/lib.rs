//! Neural models for lsplat-engine, run through ONNX Runtime.
//!
//! - [`runtime`]: finding and loading the ONNX Runtime library (once per process; the
//!   `ort` crate's `load-dynamic`: nothing is fetched at build time) and what it offers;
//! - [`session`]: [`OnnxModel`], one model in a session (execution provider from
//!   `device.backend` with a CPU fall-back, `device.threads`), its input/output contract
//!   checks and runs;
//! - [`clip`]: CLIP's text and image encoders on the contract of docs/formats.md, with
//!   unit-normalised outputs;
//! - [`tokenizer`]: CLIP's byte-level BPE, equal to open_clip's `tokenize`;
//! - [`preprocess`]: open_clip's evaluation transform (Pillow's bicubic resize of the
//!   shortest side to 224, centre crop, mean/std normalisation).

pub mod clip;
pub mod contract;
pub mod error;
pub mod preprocess;
pub mod runtime;
pub mod session;
pub mod tokenizer;

pub use clip::{ClipImage, ClipModel, ClipText};
pub use contract::{DType, TensorInfo, TensorSpec};
pub use error::ModelError;
pub use runtime::Runtime;
pub use session::{Accelerator, Input, OnnxModel, SessionOptions};
