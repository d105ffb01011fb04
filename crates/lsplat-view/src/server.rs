//! The HTTP side: routes, the access token, the embedded page, and starting it all.
//!
//! Every route but the page's static script and style sheet wants the token the
//! server printed (`?token=…`, as Jupyter does), so another user of the machine
//! cannot drive the viewer; a wrong or missing token is 403.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Query as UrlQuery, State, WebSocketUpgrade};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use lsplat_core::config::ViewConfig;
use lsplat_device::Backend;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::encode::Quality;
use crate::frame::{FrameRequest, Query, Renderer};
use crate::protocol::{Hello, LevelInfo, Pose, ViewState};
use crate::scene::{Colours, Semantic, ViewScene};
use crate::worker::Job;
use crate::{Result, ViewError};

const INDEX_HTML: &str = include_str!("../assets/index.html");
const VIEWER_JS: &str = include_str!("../assets/viewer.js");
const VIEWER_CSS: &str = include_str!("../assets/viewer.css");

/// Phrases whose embeddings are kept.
const KEPT_QUERIES: usize = 256;

/// What every connection shares.
pub struct App {
    /// The scenes, in the order given.
    pub scenes: Vec<Arc<ViewScene>>,
    /// The access token.
    pub token: String,
    /// Frames to render.
    pub jobs: mpsc::Sender<Job>,
    /// Server and frame settings.
    pub config: ViewConfig,
    /// The backend, in words.
    pub backend: String,
    queries: Mutex<HashMap<String, Arc<Query>>>,
}

impl App {
    /// A fresh JPEG quality policy for a connection.
    pub fn quality(&self) -> Quality {
        let (lo, hi) = self.config.jpeg_quality;
        Quality::new(
            lo,
            hi,
            self.config.preview_quality,
            self.config.frame_budget_ms,
        )
    }

    /// The unit embedding of a phrase (cached).
    pub fn embed(&self, phrase: &str) -> Result<Arc<Query>> {
        let phrase = phrase.trim();
        if phrase.is_empty() {
            return Err(ViewError::Request("an empty query".into()));
        }
        if let Some(q) = self.lock().get(phrase) {
            return Ok(q.clone());
        }
        let text = self.scenes[0].text.as_ref().ok_or_else(|| {
            ViewError::Request(
                "no text embeddings: start the viewer with --text FILE (or --clip DIR) to ask queries"
                    .into(),
            )
        })?;
        let unit = text.embed(&[phrase])?;
        let q = Arc::new(Query {
            phrase: phrase.to_string(),
            unit,
        });
        let mut cache = self.lock();
        if cache.len() >= KEPT_QUERIES {
            cache.clear();
        }
        cache.insert(phrase.to_string(), q.clone());
        Ok(q)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Query>>> {
        self.queries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The frame request of a page's view.
    pub fn request(&self, scene: usize, view: &ViewState) -> Result<FrameRequest> {
        let camera = view.camera.camera().map_err(ViewError::Request)?;
        let query = match view.query.as_deref().map(str::trim) {
            Some(q) if !q.is_empty() && view.mode.needs_query() => Some(self.embed(q)?),
            _ => None,
        };
        if self.scenes[scene].level(view.level).is_none() {
            return Err(ViewError::Request(format!("no level {}", view.level)));
        }
        Ok(FrameRequest {
            camera,
            mode: view.mode,
            level: view.level,
            query,
            threshold: view.threshold,
            exact: view.exact,
            jpeg: None,
        })
    }

    /// The hello of a scene.
    pub fn hello(&self, scene: usize) -> Hello {
        let s = &self.scenes[scene];
        let (centre, radius) = extent(&s.gaussians.means);
        let mut up = glam::Vec3::ZERO;
        for c in &s.cameras {
            up -= c.rotation.row(1);
        }
        let up = up.normalize_or(glam::Vec3::Z);
        Hello {
            run: s.name.clone(),
            runs: self.scenes.iter().map(|s| s.name.clone()).collect(),
            levels: s
                .levels
                .iter()
                .map(|l| LevelInfo {
                    level: l.level,
                    describe: l.semantic.describe(),
                    queries: !matches!(l.semantic, Semantic::Plain(_)) && s.canonical.is_some(),
                    table: matches!(l.semantic, Semantic::Decoded(_)),
                })
                .collect(),
            cameras: s.cameras.iter().map(Pose::of).collect(),
            centre,
            radius,
            up: up.to_array(),
            colours: match &s.colours {
                Colours::Sh(sh) => format!("SH degree {}", sh.degree),
                Colours::Grey => "none (grey)".to_string(),
            },
            text: s.text.as_ref().map(|t| t.describe()).unwrap_or_default(),
            phrases: s
                .text
                .as_ref()
                .and_then(|t| t.phrases())
                .unwrap_or_default()
                .into_iter()
                .filter(|p| !lsplat_query::CANONICAL.contains(&p.as_str()))
                .collect(),
            backend: self.backend.clone(),
        }
    }

    fn scene_index(&self, name: Option<&str>) -> Option<usize> {
        match name {
            None | Some("") => Some(0),
            Some(n) => self.scenes.iter().position(|s| s.name == n),
        }
    }
}

/// The median of the means and the distance holding 90% of them.
fn extent(means: &[[f32; 3]]) -> ([f32; 3], f32) {
    if means.is_empty() {
        return ([0.0; 3], 1.0);
    }
    let mut c = [0f32; 3];
    for (k, ck) in c.iter_mut().enumerate() {
        let mut v: Vec<f32> = means.iter().map(|m| m[k]).collect();
        v.sort_by(f32::total_cmp);
        *ck = v[v.len() / 2];
    }
    let mut d: Vec<f32> = means
        .iter()
        .map(|m| ((m[0] - c[0]).powi(2) + (m[1] - c[1]).powi(2) + (m[2] - c[2]).powi(2)).sqrt())
        .collect();
    d.sort_by(f32::total_cmp);
    (c, d[(d.len() * 9 / 10).min(d.len() - 1)].max(1e-3))
}

#[derive(Deserialize)]
struct Params {
    token: Option<String>,
    run: Option<String>,
}

/// Compares tokens in time independent of where they differ.
fn token_ok(app: &App, given: Option<&str>) -> bool {
    let Some(g) = given else { return false };
    let (a, b) = (g.as_bytes(), app.token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        "403 Forbidden: wrong or missing token (open the URL `lsplat-engine view` printed)\n",
    )
        .into_response()
}

fn unknown_run(app: &App, name: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        format!(
            "404 Not Found: no run `{name}` in this viewer (runs: {})\n",
            app.scenes
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
        .into_response()
}

async fn index(State(app): State<Arc<App>>, UrlQuery(p): UrlQuery<Params>) -> Response {
    if !token_ok(&app, p.token.as_deref()) {
        return forbidden();
    }
    if app.scene_index(p.run.as_deref()).is_none() {
        return unknown_run(&app, p.run.as_deref().unwrap_or_default());
    }
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        INDEX_HTML,
    )
        .into_response()
}

async fn runs(State(app): State<Arc<App>>, UrlQuery(p): UrlQuery<Params>) -> Response {
    if !token_ok(&app, p.token.as_deref()) {
        return forbidden();
    }
    let names: Vec<&str> = app.scenes.iter().map(|s| s.name.as_str()).collect();
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_string(&names).unwrap_or_default(),
    )
        .into_response()
}

async fn ws(
    State(app): State<Arc<App>>,
    UrlQuery(p): UrlQuery<Params>,
    upgrade: std::result::Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    if !token_ok(&app, p.token.as_deref()) {
        return forbidden();
    }
    let Some(scene) = app.scene_index(p.run.as_deref()) else {
        return unknown_run(&app, p.run.as_deref().unwrap_or_default());
    };
    let upgrade = match upgrade {
        Ok(u) => u,
        Err(e) => return e.into_response(),
    };
    upgrade
        .max_message_size(1 << 20)
        .on_upgrade(move |socket| crate::session::run(socket, app, scene))
}

fn asset(mime: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, mime)], body).into_response()
}

/// The routes of a running viewer.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/api/runs", get(runs))
        .route("/ws", get(ws))
        .route(
            "/viewer.js",
            get(|| async { asset("text/javascript; charset=utf-8", VIEWER_JS) }),
        )
        .route(
            "/viewer.css",
            get(|| async { asset("text/css; charset=utf-8", VIEWER_CSS) }),
        )
        .with_state(app)
}

/// A fresh random token (128 bits from the operating system, as hex).
pub fn new_token() -> Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| ViewError::Io {
            what: "reading /dev/urandom for the access token".into(),
            error: e,
        })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Where the viewer listens and what it says when it is ready.
pub struct Serve {
    /// The scenes.
    pub scenes: Vec<Arc<ViewScene>>,
    /// Settings (host, port, qualities, budgets).
    pub config: ViewConfig,
    /// Threads for decoding and colours.
    pub threads: usize,
    /// Called with the URL (token included) once the socket is bound.
    pub ready: Box<dyn FnOnce(&str) + Send>,
}

/// Renders on `dev` and serves until the process ends.
pub fn serve<B: Backend>(dev: B, s: Serve) -> Result<()> {
    let backend = dev.describe();
    let dev = Arc::new(dev);
    let renderers = s
        .scenes
        .iter()
        .map(|sc| Renderer::new(dev.clone(), sc.clone(), s.threads))
        .collect::<Result<Vec<_>>>()?;
    let (jobs, _render) = crate::worker::spawn(renderers)?;
    let app = Arc::new(App {
        scenes: s.scenes,
        token: new_token()?,
        jobs,
        config: s.config.clone(),
        backend,
        queries: Mutex::new(HashMap::new()),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ViewError::Io {
            what: "starting the server's runtime".into(),
            error: e,
        })?;
    rt.block_on(async move {
        let addr = format!("{}:{}", s.config.host, s.config.port);
        let listener = tokio::net::TcpListener::bind(&addr).await.map_err(|e| {
            ViewError::Server(format!(
                "cannot listen on {addr}: {e} (another port: --port, or --port 0 for any free one)"
            ))
        })?;
        let local: SocketAddr = listener.local_addr().map_err(|e| ViewError::Io {
            what: "reading the bound address".into(),
            error: e,
        })?;
        let host = if local.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else if local.is_ipv6() {
            format!("[{}]", local.ip())
        } else {
            local.ip().to_string()
        };
        let url = format!("http://{host}:{}/?token={}", local.port(), app.token);
        (s.ready)(&url);
        axum::serve(listener, router(app))
            .await
            .map_err(|e| ViewError::Io {
                what: "serving".into(),
                error: e,
            })
    })
}
