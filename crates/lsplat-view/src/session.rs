//! One page's connection: it reads the page's messages, keeps only the latest view,
//! and answers each view progressively — a low-resolution preview first (the only
//! frame while the camera moves), then the full frame once the view stays put.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};

use crate::encode::{Format, Quality, preview_divisor};
use crate::frame::{FrameRequest, Query};
use crate::protocol::{ClientMessage, FrameHeader, Pose, ServerMessage, ViewState, frame_message};
use crate::server::App;
use crate::worker::{Job, Rendered};
use crate::{Result, ViewError};

/// Frames smaller than this many pixels get no preview.
const NO_PREVIEW_BELOW: u64 = 160 * 120;

enum Event {
    Text(String),
    Save,
}

/// Serves one WebSocket until the page leaves.
pub async fn run(socket: WebSocket, app: Arc<App>, scene: usize) {
    let (mut sink, mut stream) = socket.split();
    let hello = ServerMessage::Hello(Box::new(app.hello(scene)));
    if send_text(&mut sink, &hello).await.is_err() {
        return;
    }
    let (view_tx, mut view_rx) = watch::channel::<Option<ViewState>>(None);
    let (evt_tx, mut evt_rx) = mpsc::unbounded_channel::<Event>();
    let reader_app = app.clone();
    let reader = tokio::spawn(async move {
        while let Some(Ok(msg)) = stream.next().await {
            let text = match msg {
                Message::Text(t) => t,
                Message::Close(_) => break,
                _ => continue,
            };
            let reply = match serde_json::from_str::<ClientMessage>(text.as_str()) {
                Ok(ClientMessage::View(v)) => {
                    let _ = view_tx.send(Some(v));
                    continue;
                }
                Ok(ClientMessage::Save) => {
                    let _ = evt_tx.send(Event::Save);
                    continue;
                }
                Ok(ClientMessage::Query { text }) => {
                    let app = reader_app.clone();
                    let t = text.clone();
                    let r = tokio::task::spawn_blocking(move || app.embed(&t))
                        .await
                        .unwrap_or_else(|e| Err(ViewError::Request(e.to_string())));
                    ServerMessage::Query {
                        text,
                        ok: r.is_ok(),
                        message: r.err().map(|e| e.to_string()).unwrap_or_default(),
                    }
                }
                Err(e) => ServerMessage::Error {
                    seq: 0,
                    message: format!("a message the viewer does not understand: {e}"),
                },
            };
            let _ = evt_tx.send(Event::Text(
                serde_json::to_string(&reply).unwrap_or_default(),
            ));
        }
    });
    let mut state = Progress {
        quality: app.quality(),
        ms_per_pixel: None,
        last_full: None,
    };
    loop {
        tokio::select! {
            changed = view_rx.changed() => {
                if changed.is_err() {
                    break;
                }
                let Some(view) = view_rx.borrow_and_update().clone() else { continue };
                if let Err(e) = state.answer(&app, scene, &view, &mut sink, &mut view_rx).await {
                    if matches!(e, Failure::Gone) {
                        break;
                    }
                    let msg = ServerMessage::Error { seq: view.seq, message: e.to_string() };
                    if send_text(&mut sink, &msg).await.is_err() {
                        break;
                    }
                }
            }
            evt = evt_rx.recv() => {
                let ok = match evt {
                    None => break,
                    Some(Event::Text(t)) => sink.send(Message::Text(t.into())).await.is_ok(),
                    Some(Event::Save) => {
                        let view = view_rx.borrow().clone();
                        match view {
                            None => true,
                            Some(v) => match state.save(&app, scene, &v, &mut sink).await {
                                Ok(()) => true,
                                Err(Failure::Gone) => false,
                                Err(e) => send_text(&mut sink, &ServerMessage::Error { seq: v.seq, message: e.to_string() }).await.is_ok(),
                            },
                        }
                    }
                };
                if !ok {
                    break;
                }
            }
        }
    }
    reader.abort();
}

type Sink = futures_util::stream::SplitSink<WebSocket, Message>;

async fn send_text(sink: &mut Sink, msg: &ServerMessage) -> std::result::Result<(), ()> {
    let text = serde_json::to_string(msg).map_err(|_| ())?;
    sink.send(Message::Text(text.into())).await.map_err(|_| ())
}

/// Why a view was not answered.
#[derive(Debug)]
enum Failure {
    /// The page left.
    Gone,
    /// The view cannot be rendered.
    View(ViewError),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Gone => write!(f, "the page left"),
            Failure::View(e) => write!(f, "{e}"),
        }
    }
}

impl From<ViewError> for Failure {
    fn from(e: ViewError) -> Self {
        Failure::View(e)
    }
}

/// A connection's stream state.
struct Progress {
    quality: Quality,
    /// Milliseconds per pixel of recent full frames (render + encode).
    ms_per_pixel: Option<f64>,
    /// The last view answered with a full frame (the preview is skipped for a view
    /// that only changes what is drawn, not where from).
    last_full: Option<ViewState>,
}

impl Progress {
    async fn answer(
        &mut self,
        app: &App,
        scene: usize,
        view: &ViewState,
        sink: &mut Sink,
        view_rx: &mut watch::Receiver<Option<ViewState>>,
    ) -> std::result::Result<(), Failure> {
        let request = app.request(scene, view)?;
        let cam = &request.camera;
        let pixels = cam.pixel_count() as u64;
        let moved = self
            .last_full
            .as_ref()
            .is_none_or(|l| l.camera != view.camera || l.level != view.level);
        if view.moving || (moved && pixels >= NO_PREVIEW_BELOW) {
            let d = preview_divisor(
                self.ms_per_pixel.unwrap_or(2e-4),
                cam.width,
                cam.height,
                app.config.preview_budget_ms,
            );
            let (w, h) = (cam.width.div_ceil(d), cam.height.div_ceil(d));
            let mut small = request.clone();
            small.camera = cam.rescaled(w, h);
            small.exact = false;
            let r = render(app, scene, small, Format::Jpeg, self.quality.preview).await?;
            send_frame(
                sink,
                view,
                "preview",
                &r,
                &request,
                Format::Jpeg,
                self.quality.preview,
            )
            .await?;
            if view.moving || view_rx.has_changed().unwrap_or(true) {
                return Ok(());
            }
        }
        let (format, q) = if view.lossless {
            (Format::Png, 0)
        } else {
            (Format::Jpeg, self.quality.full)
        };
        let r = render(app, scene, request.clone(), format, q).await?;
        let ms = r.frame.timings.total + r.encode_ms;
        self.quality.after_full_frame(ms);
        let per = ms / pixels.max(1) as f64;
        self.ms_per_pixel = Some(match self.ms_per_pixel {
            None => per,
            Some(m) => 0.5 * (m + per),
        });
        send_frame(sink, view, "full", &r, &request, format, q).await?;
        self.last_full = Some(view.clone());
        Ok(())
    }

    async fn save(
        &mut self,
        app: &App,
        scene: usize,
        view: &ViewState,
        sink: &mut Sink,
    ) -> std::result::Result<(), Failure> {
        let request = app.request(scene, view)?;
        let r = render(app, scene, request.clone(), Format::Png, 0).await?;
        send_frame(sink, view, "save", &r, &request, Format::Png, 0).await
    }
}

async fn render(
    app: &App,
    scene: usize,
    request: FrameRequest,
    format: Format,
    quality: u8,
) -> Result<Rendered> {
    let (reply, rx) = oneshot::channel();
    app.jobs
        .send(Job {
            scene,
            request,
            format,
            quality,
            reply,
        })
        .await
        .map_err(|_| ViewError::Request("the render thread has stopped".into()))?;
    rx.await
        .map_err(|_| ViewError::Request("the render thread has stopped".into()))?
}

async fn send_frame(
    sink: &mut Sink,
    view: &ViewState,
    kind: &'static str,
    r: &Rendered,
    request: &FrameRequest,
    format: Format,
    quality: u8,
) -> std::result::Result<(), Failure> {
    let header = FrameHeader {
        seq: view.seq,
        kind,
        width: r.frame.width,
        height: r.frame.height,
        format,
        quality,
        mode: request.mode,
        level: request.level,
        query: request
            .query
            .as_ref()
            .map(|q: &Arc<Query>| q.phrase.clone()),
        camera: Pose::of(&request.camera),
        timings: r.frame.timings,
        encode_ms: r.encode_ms,
        decode: r.frame.decode,
        top: r
            .frame
            .relevancy
            .as_ref()
            .map(|m| m.iter().copied().fold(f32::NEG_INFINITY, f32::max)),
    };
    sink.send(Message::Binary(frame_message(&header, &r.bytes).into()))
        .await
        .map_err(|_| Failure::Gone)
}
