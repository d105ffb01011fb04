//! The render thread: it owns the backend and renders every client's frames one at a
//! time, in the order they are asked for (one device; each connection has at most one
//! frame in flight, so clients take turns).

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use lsplat_device::Backend;
use tokio::sync::{mpsc, oneshot};

use crate::encode::{Format, encode};
use crate::frame::{Frame, FrameRequest, Renderer};
use crate::{Result, ViewError};

/// A frame to render and encode.
pub struct Job {
    /// Index of the scene.
    pub scene: usize,
    /// What to render.
    pub request: FrameRequest,
    /// How to encode it.
    pub format: Format,
    /// JPEG quality.
    pub quality: u8,
    /// Where the result goes (a dropped receiver is a client that left).
    pub reply: oneshot::Sender<Result<Rendered>>,
}

/// A rendered, encoded frame.
pub struct Rendered {
    /// The frame (its picture, timings, relevancy map).
    pub frame: Frame,
    /// The encoded image.
    pub bytes: Vec<u8>,
    /// Encoding time, ms.
    pub encode_ms: f64,
}

/// Starts the render thread over one renderer per scene; it ends when every sender
/// is dropped.
pub fn spawn<B: Backend>(
    mut renderers: Vec<Renderer<B>>,
) -> Result<(mpsc::Sender<Job>, std::thread::JoinHandle<()>)> {
    let (tx, mut rx) = mpsc::channel::<Job>(64);
    let handle = std::thread::Builder::new()
        .name("lsplat-view-render".into())
        .spawn(move || {
            while let Some(job) = rx.blocking_recv() {
                if job.reply.is_closed() {
                    continue;
                }
                let result =
                    std::panic::catch_unwind(AssertUnwindSafe(|| run(&mut renderers, &job)))
                        .unwrap_or_else(|p| {
                            let what = p
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default();
                            Err(ViewError::Request(format!("rendering failed: {what}")))
                        });
                let _ = job.reply.send(result);
            }
        })
        .map_err(|e| ViewError::Io {
            what: "starting the render thread".into(),
            error: e,
        })?;
    Ok((tx, handle))
}

fn run<B: Backend>(renderers: &mut [Renderer<B>], job: &Job) -> Result<Rendered> {
    let r = renderers
        .get_mut(job.scene)
        .ok_or_else(|| ViewError::Request(format!("no scene {}", job.scene)))?;
    // A JPEG is made on the device too where the frame is made there.
    let mut request = job.request.clone();
    request.jpeg = (job.format == Format::Jpeg).then_some(job.quality);
    let mut frame = r.render(&request)?;
    if let Some(bytes) = frame.jpeg.take() {
        let encode_ms = frame.timings.encode;
        return Ok(Rendered {
            frame,
            bytes,
            encode_ms,
        });
    }
    let t = Instant::now();
    let bytes = encode(
        &frame.rgb,
        frame.width,
        frame.height,
        job.format,
        job.quality,
        r.threads(),
    )?;
    Ok(Rendered {
        frame,
        bytes,
        encode_ms: t.elapsed().as_secs_f64() * 1e3,
    })
}
