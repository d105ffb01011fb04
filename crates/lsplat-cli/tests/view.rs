//! The viewer in a real browser: `lsplat-engine view` on a tiny V1 scene of three
//! levels (SH degree 3 colours, a random-weight autoencoder), driven in headless
//! Chromium over WebDriver. The frames the page receives (lossless PNG) are compared
//! with the engine's own `render` / `query` output for the same pose:
//! - RGB, relevancy and segmentation with exact decoding: equal, byte for byte;
//! - relevancy through the V1 code table: within the tolerance stated below;
//! - the features picture: within 1/255 (f32 sums in another order).
//!
//! Also: typing a query, a phrase the embeddings file lacks, moving the camera with
//! the mouse and the keyboard, switching modes and levels, "copy camera" read back by
//! `render --pose`, "save PNG", a second client at the same time, a client that
//! disconnects mid-frame, a run that does not exist (404) and a wrong token (403).
//! With LSPLAT_VIEW_SHOTS=DIR the test writes its screenshots there (docs/viewer.md).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::browser::*;
use common::cli::*;
use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::{SinkExt, StreamExt};
use lsplat_data::npy::read_npy;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// Frame size of the tiny scene's cameras.
const W: u32 = 96;
const H: u32 = 72;
/// Relevancy through the code table against exact decoding: at most this share of
/// picture values may differ by more than 8/255 (the turbo map is steep, and pixels
/// near r = 0.5 can switch between the heat map and the dimmed colours).
const TABLE_SHARE: f64 = 0.02;
/// ... and the mean difference at most this.
const TABLE_MEAN: f64 = 1.0;

/// The tiny scene: the demo's 1500 Gaussians with SH degree-3 colours, a 512-D synth
/// dataset, an autoencoder trained for 3 epochs, the 3-D codes solved at levels 1-3.
struct Scene {
    _dir: tempfile::TempDir,
    root: PathBuf,
    run: PathBuf,
    ae: PathBuf,
    text: PathBuf,
}

fn scene() -> Scene {
    let dir = tempfile::tempdir().unwrap();
    // synth owns its folder: the splat file lives beside it.
    let root = dir.path().join("scene");
    let ply_path = dir.path().join("tiny.ply");
    let demo = lsplat_data::demo::generate(
        &lsplat_core::config::DemoConfig {
            gaussians: 1500,
            objects: 3,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let g = demo.scene.gaussians;
    let n = g.len();
    // Colours from the position (a smooth gradient), with view-dependent terms.
    let mut rng = lsplat_core::Rng::new(11);
    let c0 = 0.282_094_8f32;
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    for m in &g.means {
        for k in 0..3 {
            lo[k] = lo[k].min(m[k]);
            hi[k] = hi[k].max(m[k]);
        }
    }
    let sh_dc = g
        .means
        .iter()
        .map(|m| [0, 1, 2].map(|k| ((m[k] - lo[k]) / (hi[k] - lo[k]).max(1e-6) * 0.8 - 0.3) / c0))
        .collect();
    let sh_rest = (0..n * 45).map(|_| 0.08 * rng.normal()).collect();
    let ply = lsplat_data::ply::SplatPly {
        gaussians: g,
        sh_degree: 3,
        sh_dc,
        sh_rest,
        extra_names: Vec::new(),
        extra: Vec::new(),
    };
    lsplat_data::ply::write_ply(&ply_path, &ply).unwrap();
    ok(&[
        "synth",
        "--splats",
        s(&ply_path),
        "--orbit",
        "4",
        "--width",
        &W.to_string(),
        "--height",
        &H.to_string(),
        "--up",
        "z",
        "--objects",
        "3",
        "--dim",
        "512",
        "--out",
        s(&root),
    ]);
    ok(&[
        "import",
        "langsplat",
        "--source",
        s(&root.join("language_features")),
        "--out",
        s(&root.join("d512")),
    ]);
    let ae = root.join("ae.safetensors");
    ok(&[
        "autoencoder",
        "train",
        "--dataset",
        s(&root.join("d512")),
        "--out",
        s(&ae),
        "--epochs",
        "30",
        "--quiet",
    ]);
    ok(&[
        "autoencoder",
        "encode",
        "--model",
        s(&ae),
        "--dataset",
        s(&root.join("d512")),
        "--out",
        s(&root.join("d3")),
    ]);
    let run = root.join("run");
    ok(&[
        "solve",
        "--scene",
        s(&scene_with(&root, "d3")),
        "--method",
        "average",
        "--levels",
        "1,2,3",
        "--set",
        "log.progress=false",
        "--out",
        s(&run),
    ]);
    let text = write_view_text(&root, &run, &ae);
    Scene {
        _dir: dir,
        root,
        run,
        ae,
        text,
    }
}

/// The text table the viewer test asks, made from what level 1 renders at
/// frame_00001 (its codes decoded by the autoencoder): "thing 1" is the decoded
/// feature least like the picture's mean, "thing 0" the most like it, "thing 2" one
/// between; the canonical phrases lie near the mean (plus a little noise), as CLIP's
/// "object", "things", "stuff" and "texture" lie near every crop. So a query lights up
/// the part of the picture that looks like it (random canonical embeddings, as
/// `write_text` makes, lose to every feature: the heat map covered the picture).
fn write_view_text(root: &Path, run: &Path, ae: &Path) -> PathBuf {
    let out = root.join("text_render");
    ok(&[
        "render",
        "--run",
        s(&run.join("level_1")),
        "--cameras",
        "frame_00001",
        "--out",
        s(&out),
        "--force",
    ]);
    let img = read_npy(&out.join("frame_00001.npy")).unwrap();
    let c = img.shape[2];
    let codes: Vec<f32> = img
        .data
        .chunks_exact(c)
        .flat_map(|r| r[..3].to_vec())
        .collect();
    let model = lsplat_ae::load_model(ae).unwrap().model;
    let d = model.input_dim();
    let feats = model.decode(&codes, 1).unwrap();
    let mut mean = vec![0f32; d];
    for f in feats.chunks_exact(d) {
        for (m, x) in mean.iter_mut().zip(f) {
            *m += x;
        }
    }
    let n = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    mean.iter_mut().for_each(|m| *m /= n);
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    let mut by_likeness: Vec<(f32, usize)> = feats
        .chunks_exact(d)
        .enumerate()
        .map(|(i, f)| (dot(f, &mean), i))
        .collect();
    by_likeness.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let pick = [by_likeness.len() - 1, 0, by_likeness.len() / 2].map(|k| by_likeness[k].1);
    let mut rng = lsplat_core::Rng::new(9);
    let mut names: Vec<String> = ["object", "things", "stuff", "texture"]
        .map(String::from)
        .into();
    let mut values = Vec::new();
    for _ in 0..4 {
        values.extend(
            mean.iter()
                .map(|m| m + 0.01 * rng.normal() / (d as f32).sqrt()),
        );
    }
    for (k, &i) in pick.iter().enumerate() {
        names.push(format!("thing {k}"));
        values.extend_from_slice(&feats[i * d..(i + 1) * d]);
    }
    let p = root.join("text512.npy");
    lsplat_data::io::write_npy_f32(&p, &[names.len(), d], &values).unwrap();
    std::fs::write(p.with_extension("txt"), names.join("\n")).unwrap();
    p
}

/// The last full frame's header once `ready` holds for it.
async fn wait_full(c: &Client, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let h = c
            .execute(
                "const f = lsplatViewer.state.lastFull; return f ? f.header : null;",
                vec![],
            )
            .await
            .unwrap();
        if !h.is_null() && ready(&h) {
            return h;
        }
        if t.elapsed() > Duration::from_secs(180) {
            let errors = c
                .execute("return lsplatViewer.state.errors;", vec![])
                .await
                .unwrap();
            panic!("no full frame with {what} (last: {h}; errors: {errors})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last full frame's picture.
async fn full_picture(c: &Client) -> (u32, u32, Vec<u8>) {
    let v = c
        .execute(
            "return Array.from(lsplatViewer.state.lastFull.image);",
            vec![],
        )
        .await
        .unwrap();
    let bytes: Vec<u8> = serde_json::from_value(v).unwrap();
    decode_png(&bytes)
}

async fn click(c: &Client, css: &str) {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

async fn screenshot(c: &Client, name: &str) {
    if let Ok(dir) = std::env::var("LSPLAT_VIEW_SHOTS") {
        let png = c.screenshot().await.unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(Path::new(&dir).join(format!("{name}.png")), png).unwrap();
    }
}

fn png_file(p: &Path) -> Vec<u8> {
    let (w, h, rgb) = decode_png(&std::fs::read(p).unwrap());
    assert_eq!((w, h), (W, H), "{}", p.display());
    rgb
}

/// Appends `--cameras CAMERA` or `--pose FILE` to `args`; returns the name the
/// outputs are written under (the camera's, or "view" for a pose file).
fn pose_args(args: &mut Vec<String>, camera: Option<&str>, pose: Option<&Path>) -> String {
    match (camera, pose) {
        (Some(c), _) => {
            args.extend(["--cameras".into(), c.into()]);
            c.to_string()
        }
        (None, Some(p)) => {
            args.extend(["--pose".into(), s(p).into()]);
            "view".to_string()
        }
        _ => unreachable!("a camera or a pose file"),
    }
}

/// `render --colours` of a camera (or a pose file) of level 1: the RGB picture.
fn rendered_rgb(sc: &Scene, camera: Option<&str>, pose: Option<&Path>, out: &str) -> Vec<u8> {
    let out = sc.root.join(out);
    let mut args: Vec<String> = [
        "render",
        "--run",
        s(&sc.run.join("level_1")),
        "--colours",
        "--png-only",
        "--out",
        s(&out),
    ]
    .map(String::from)
    .to_vec();
    let name = pose_args(&mut args, camera, pose);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&a);
    png_file(&out.join(format!("{name}_rgb.png")))
}

/// `query` of "thing 1" on level 1 at a camera (or a pose file): the relevancy map.
fn queried(sc: &Scene, camera: Option<&str>, pose: Option<&Path>, out: &str) -> Vec<f32> {
    let out = sc.root.join(out);
    let mut args: Vec<String> = [
        "query",
        "--run",
        s(&sc.run.join("level_1")),
        "--text",
        s(&sc.text),
        "--model",
        s(&sc.ae),
        "--query",
        "thing 1",
        "--out",
        s(&out),
    ]
    .map(String::from)
    .to_vec();
    let name = pose_args(&mut args, camera, pose);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&a);
    let m = read_npy(&out.join(name).join("thing_1.npy")).unwrap();
    assert_eq!(m.shape, vec![H as usize, W as usize]);
    m.data
}

/// The features picture of level 1 at a camera, from the library: the band renderer
/// `render` uses, the autoencoder, and the level's fixed PCA.
fn features_picture(sc: &Scene, cam: &lsplat_core::Camera) -> Vec<u8> {
    let run = lsplat_data::run_dir::load_run(&sc.run.join("level_1")).unwrap();
    let reader = |d: &Path| lsplat_data::run_dir::load_run(d);
    let scene = lsplat_view::scene::ViewScene::load(
        &sc.run,
        &lsplat_view::scene::SceneOptions {
            reader: &reader,
            model: Some(&sc.ae),
            text: None,
            table_cells: 64,
            threads: 1,
        },
    )
    .unwrap();
    let pca = scene.level(1).unwrap().pca.clone().unwrap();
    let model = lsplat_ae::load_model(&sc.ae).unwrap().model;
    let dev = lsplat_render::CpuBackend::new(1);
    let views =
        lsplat_render::views::Views::new(&dev, &run.gaussians, &run.features, 3, &run.config)
            .unwrap();
    let mut out = Vec::new();
    views
        .render::<lsplat_device::DeviceError>(cam, |b| {
            let phi = model.decode(b.features, 1).unwrap();
            for (f, a) in phi.chunks_exact(512).zip(b.alpha) {
                let p = [0, 1, 2].map(|k| {
                    f.iter()
                        .zip(&pca.axes[k * 512..(k + 1) * 512])
                        .map(|(x, y)| x * y)
                        .sum::<f32>()
                });
                out.extend(if *a <= 1e-6 { [0; 3] } else { pca.rgb(p, *a) });
            }
            Ok(())
        })
        .unwrap();
    out
}

fn assert_same(what: &str, got: &[u8], want: &[u8]) {
    let (max, mean, _) = compare(got, want, 0);
    assert!(max == 0, "{what}: differs (max {max}, mean {mean:.3})");
}

/// A raw WebSocket client (the second page).
async fn ws_client(
    v: &Viewer,
    run: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let url = format!(
        "{}/ws?token={}&run={run}",
        v.base.replace("http://", "ws://"),
        v.token
    );
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// The next full frame on a raw connection: its header and image.
async fn next_full<S>(ws: &mut S) -> (Value, Vec<u8>)
where
    S: StreamExt<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let m = tokio::time::timeout(Duration::from_secs(180), ws.next())
            .await
            .expect("a frame within 180 s")
            .unwrap()
            .unwrap();
        if let Message::Binary(b) = m {
            let n = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
            let h: Value = serde_json::from_slice(&b[4..4 + n]).unwrap();
            if h["kind"] == "full" {
                return (h, b[4 + n..].to_vec());
            }
        } else if let Message::Text(t) = m {
            let j: Value = serde_json::from_str(t.as_str()).unwrap();
            assert_ne!(j["type"], "error", "{j}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_in_a_browser() {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let sc = scene();
    let v = start_viewer(&[
        "--run",
        s(&sc.run),
        "--model",
        s(&sc.ae),
        "--text",
        s(&sc.text),
    ]);
    let run_name = "run";

    // Wrong tokens and unknown runs, before any page.
    let (code, body) = http_get(&v.base, "/?token=0123");
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("token"));
    let (code, _) = http_get(&v.base, "/");
    assert_eq!(code, 403);
    let (code, _) = http_get(&v.base, "/ws?token=nope&run=run");
    assert_eq!(code, 403);
    let (code, body) = http_get(&v.base, &format!("/?token={}&run=elsewhere", v.token));
    assert_eq!(code, 404);
    assert!(
        body.contains("elsewhere") && body.contains("runs: run"),
        "{body}"
    );
    let e = tokio_tungstenite::connect_async(format!(
        "{}/ws?token={}&run=elsewhere",
        v.base.replace("http://", "ws://"),
        v.token
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("404"), "{e}");
    let e = tokio_tungstenite::connect_async(format!(
        "{}/ws?token=wrong",
        v.base.replace("http://", "ws://")
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("403"), "{e}");
    let (code, body) = http_get(&v.base, &format!("/api/runs?token={}", v.token));
    assert_eq!((code, body.as_str()), (200, "[\"run\"]"));

    let (_driver, wd) = start_driver(&driver);
    let profile = tempfile::tempdir().unwrap();
    let c = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(chrome_capabilities(&chromium, profile.path()))
        .connect(&wd)
        .await
        .expect("a Chromium session");
    c.goto(&format!("{}&lossless=1", v.url)).await.unwrap();

    // 1. RGB at the first training camera = `render --colours`.
    let h = wait_full(&c, "rgb at frame_00001", |h| {
        h["mode"] == "rgb" && h["camera"]["name"] == "frame_00001"
    })
    .await;
    assert_eq!(
        (h["width"].as_u64(), h["height"].as_u64()),
        (Some(W as u64), Some(H as u64))
    );
    let (_, _, rgb) = full_picture(&c).await;
    let want_rgb = rendered_rgb(&sc, Some("frame_00001"), None, "r1");
    assert_same("RGB at frame_00001", &rgb, &want_rgb);
    screenshot(&c, "rgb").await;

    // 2. A phrase the embeddings file lacks: a clear message.
    let q = c.find(Locator::Id("query")).await.unwrap();
    q.send_keys("purple elephant\n").await.unwrap();
    let t = Instant::now();
    let msg = loop {
        let m = c
            .find(Locator::Id("query-msg"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if !m.is_empty() || t.elapsed() > Duration::from_secs(30) {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        msg.contains("purple elephant") && msg.contains("text512.npy"),
        "{msg}"
    );

    // 3. Type a query: relevancy through the code table, then exact.
    q.clear().await.unwrap();
    q.send_keys("thing 1\n").await.unwrap();
    let h = wait_full(&c, "relevancy of thing 1", |h| {
        h["mode"] == "relevancy" && h["query"] == "thing 1"
    })
    .await;
    assert!(h["top"].as_f64().unwrap() > 0.0);
    let (_, _, table) = full_picture(&c).await;
    let map = queried(&sc, Some("frame_00001"), None, "q1");
    // The query lights up part of the picture, not all of it.
    let lit = map.iter().filter(|&&r| r > 0.5).count();
    eprintln!("thing 1: {lit} of {} pixels above 0.5", map.len());
    assert!(
        lit > 0 && lit < map.len() / 2,
        "{lit} of {} pixels above 0.5",
        map.len()
    );
    let want = lsplat_query::picture::heat_over(&map, &want_rgb);
    let (max, mean, share) = compare(&table, &want, 8);
    eprintln!(
        "relevancy, code table vs exact: max {max}, mean {mean:.3}, {:.2}% of values off by > 8",
        100.0 * share
    );
    assert!(
        share <= TABLE_SHARE && mean <= TABLE_MEAN,
        "table relevancy: {share} {mean}"
    );
    screenshot(&c, "relevancy").await;
    click(&c, "#exact").await;
    wait_full(&c, "exact relevancy", |h| {
        h["mode"] == "relevancy" && h["decode"]["pixels"].as_u64() > Some(0)
    })
    .await;
    let (_, _, exact) = full_picture(&c).await;
    assert_same("exact relevancy", &exact, &want);
    let history = c
        .find(Locator::Css("#history li"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(history, "thing 1");

    // 4. Segmentation with the slider at 0.3.
    click(&c, "#modes button[data-mode=segmentation]").await;
    c.execute(
        "const t = document.getElementById('threshold'); t.value = '0.3'; t.dispatchEvent(new Event('input'));",
        vec![],
    )
    .await
    .unwrap();
    let hs = wait_full(&c, "segmentation at 0.3", |h| h["mode"] == "segmentation").await;
    let _ = hs;
    // The page may send the slider's move as previews first: wait for its full frame.
    tokio::time::sleep(Duration::from_millis(600)).await;
    wait_full(&c, "segmentation at 0.3", |h| h["mode"] == "segmentation").await;
    let (_, _, seg) = full_picture(&c).await;
    let mask = lsplat_view::frame::segment(&map, W as usize, H as usize, 0.3);
    assert!(mask.iter().any(|&m| m != 0) && mask.contains(&0));
    assert_same(
        "segmentation",
        &seg,
        &lsplat_view::frame::segmentation_picture(&mask, &want_rgb),
    );
    screenshot(&c, "segmentation").await;

    // 5. Features: the PCA of the decoded features (exact decoding).
    click(&c, "#modes button[data-mode=features]").await;
    wait_full(&c, "features", |h| h["mode"] == "features").await;
    let (_, _, feat) = full_picture(&c).await;
    let cams = lsplat_data::run_dir::load_run(&sc.run.join("level_1"))
        .unwrap()
        .cameras;
    let (max, mean, _) = compare(&feat, &features_picture(&sc, &cams[0]), 1);
    assert!(max <= 1, "features: max {max}, mean {mean}");
    screenshot(&c, "features").await;

    // 6. Move the camera with the mouse (RGB), then "copy camera" → `render --pose`.
    click(&c, "#modes button[data-mode=rgb]").await;
    wait_full(&c, "rgb again", |h| h["mode"] == "rgb").await;
    let canvas = c.find(Locator::Id("view")).await.unwrap();
    let drag = MouseActions::new("mouse".into())
        .then(PointerAction::MoveToElement {
            element: canvas.clone(),
            duration: None,
            x: 0.0,
            y: 0.0,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        })
        .then(PointerAction::MoveBy {
            duration: Some(Duration::from_millis(300)),
            x: 60.0,
            y: 25.0,
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    c.perform_actions(drag).await.unwrap();
    let h = wait_full(&c, "a moved camera", |h| {
        h["mode"] == "rgb" && h["camera"]["name"] == "view"
    })
    .await;
    click(&c, "#copy").await;
    let copied: Value = serde_json::from_str(
        &c.find(Locator::Id("pose"))
            .await
            .unwrap()
            .prop("value")
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(copied, h["camera"]);
    let pose = sc.root.join("pose.json");
    std::fs::write(&pose, copied.to_string()).unwrap();
    let (_, _, moved) = full_picture(&c).await;
    let want_moved = rendered_rgb(&sc, None, Some(&pose), "r2");
    assert_same("RGB at the moved camera", &moved, &want_moved);
    assert!(compare(&moved, &want_rgb, 0).0 > 0, "the view changed");
    // Relevancy (exact) at the moved camera = `query --pose`.
    click(&c, "#modes button[data-mode=relevancy]").await;
    wait_full(&c, "relevancy at the moved camera", |h| {
        h["mode"] == "relevancy" && h["camera"]["name"] == "view"
    })
    .await;
    let (_, _, rel) = full_picture(&c).await;
    let map2 = queried(&sc, None, Some(&pose), "q2");
    assert_same(
        "relevancy at the moved camera",
        &rel,
        &lsplat_query::picture::heat_over(&map2, &want_moved),
    );

    // 7. A second client at the same time: a raw WebSocket asks for RGB at the third
    // camera while the page switches to level 2.
    let mut ws = ws_client(&v, run_name).await;
    let hello = loop {
        if let Some(Ok(Message::Text(t))) = ws.next().await {
            let j: Value = serde_json::from_str(t.as_str()).unwrap();
            if j["type"] == "hello" {
                break j;
            }
        }
    };
    assert_eq!(hello["levels"].as_array().unwrap().len(), 3);
    let cam2 = hello["cameras"][2].clone();
    ws.send(Message::Text(
        json!({"type": "view", "seq": 1, "camera": cam2, "mode": "rgb", "level": 1, "lossless": true})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    let level = c.find(Locator::Id("level")).await.unwrap();
    level.select_by_value("2").await.unwrap();
    let (h2, img2) = next_full(&mut ws).await;
    assert_eq!(h2["camera"]["name"], "frame_00003");
    let (_, _, rgb3) = decode_png(&img2);
    assert_same(
        "the second client's RGB",
        &rgb3,
        &rendered_rgb(&sc, Some("frame_00003"), None, "r3"),
    );
    wait_full(&c, "level 2", |h| h["level"] == 2).await;

    // 8. A client that leaves mid-frame: a large frame asked for, the socket dropped.
    let mut big = cam2.clone();
    for (k, f) in [
        ("width", 8.0),
        ("height", 8.0),
        ("fx", 8.0),
        ("fy", 8.0),
        ("cx", 8.0),
        ("cy", 8.0),
    ] {
        big[k] = json!(big[k].as_f64().unwrap() * f);
    }
    ws.send(Message::Text(
        json!({"type": "view", "seq": 2, "camera": big, "mode": "relevancy", "query": "thing 1", "level": 1, "exact": true})
            .to_string()
            .into(),
    ))
    .await
    .unwrap();
    drop(ws);
    // The page goes on: keyboard flight (W) gives a new full frame.
    let before = c
        .execute("return lsplatViewer.state.lastFull.header.seq;", vec![])
        .await
        .unwrap()
        .as_u64()
        .unwrap();
    canvas.send_keys("w").await.unwrap();
    let h = wait_full(&c, "a frame after flying forward", |h| {
        h["seq"].as_u64() > Some(before)
    })
    .await;
    assert_eq!(h["camera"]["name"], "view");
    assert!(v.proc.0.id() > 0);
    // A new client still gets its hello.
    let mut ws = ws_client(&v, run_name).await;
    let m = tokio::time::timeout(Duration::from_secs(60), ws.next())
        .await
        .unwrap();
    assert!(matches!(m, Some(Ok(Message::Text(_)))));
    drop(ws);

    // 9. Save PNG: a lossless frame of the current view.
    click(&c, "#save").await;
    let t = Instant::now();
    while c
        .execute("return lsplatViewer.state.saves;", vec![])
        .await
        .unwrap()
        .as_u64()
        < Some(1)
    {
        assert!(t.elapsed() < Duration::from_secs(120), "no saved frame");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let saved: Vec<u8> = serde_json::from_value(
        c.execute(
            "return Array.from(lsplatViewer.state.lastSave.image);",
            vec![],
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let (_, _, last) = full_picture(&c).await;
    assert_same("the saved PNG", &decode_png(&saved).2, &last);
    screenshot(&c, "moved").await;

    // 10. Chromium reads the viewer's own JPEG (what a GPU makes: restart intervals,
    // 4:2:0 below quality 90 and 4:4:4 from it) as well as the jpeg-encoder crate's
    // JPEG of the same picture.
    for quality in [75u8, 92] {
        let ours = lsplat_view::jpeg::encode(&want_rgb, W, H, quality, 2).unwrap();
        let mut theirs = Vec::new();
        jpeg_encoder::Encoder::new(&mut theirs, quality)
            .encode(&want_rgb, W as u16, H as u16, jpeg_encoder::ColorType::Rgb)
            .unwrap();
        let (a, b) = (
            psnr(&browser_jpeg(&c, &ours).await, &want_rgb),
            psnr(&browser_jpeg(&c, &theirs).await, &want_rgb),
        );
        eprintln!("Chromium, quality {quality}: ours {a:.2} dB, jpeg-encoder's {b:.2} dB");
        assert!(
            a > 28.0 && a > b - 0.5,
            "quality {quality}: ours {a:.2} dB, jpeg-encoder's {b:.2} dB in Chromium"
        );
    }
    c.close().await.unwrap();
}

/// A JPEG decoded by the browser (RGB of a W×H picture).
async fn browser_jpeg(c: &Client, jpeg: &[u8]) -> Vec<u8> {
    let v = c
        .execute_async(
            "const done = arguments[arguments.length - 1];
             const blob = new Blob([new Uint8Array(arguments[0])], {type: 'image/jpeg'});
             createImageBitmap(blob).then(b => {
               const cv = new OffscreenCanvas(b.width, b.height);
               const x = cv.getContext('2d');
               x.drawImage(b, 0, 0);
               done([b.width, b.height, Array.from(x.getImageData(0, 0, b.width, b.height).data)]);
             }).catch(e => done(String(e)));",
            vec![json!(jpeg)],
        )
        .await
        .unwrap();
    let (w, h, rgba): (u32, u32, Vec<u8>) =
        serde_json::from_value(v.clone()).unwrap_or_else(|_| panic!("Chromium: {v}"));
    assert_eq!((w, h), (W, H));
    rgba.chunks_exact(4)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect()
}

fn psnr(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mse = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum::<f64>()
        / a.len() as f64;
    10.0 * (255.0f64.powi(2) / mse.max(1e-12)).log10()
}

/// Bad input to `view` (no browser needed): a run that does not exist, a non-loopback
/// host (a warning), a wrong size for --bench; and --bench's table.
#[test]
fn view_refuses_bad_input_and_benches() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing");
    let e = fails(&[
        "view",
        "--run",
        s(&missing),
        "--host",
        "0.0.0.0",
        "--port",
        "0",
    ]);
    assert!(e.contains("warning: --host 0.0.0.0"), "{e}");
    assert!(
        e.contains("nothing") && e.contains("no such run folder"),
        "{e}"
    );
    let run = dir.path().join("run");
    ok(&[
        "train",
        "--set",
        "train.iterations=5",
        "--set",
        "demo.gaussians=300",
        "--set",
        "demo.cameras=2",
        "--set",
        "demo.width=32",
        "--set",
        "demo.height=24",
        "--set",
        "log.progress=false",
        "--out",
        s(&run),
    ]);
    let e = fails(&["view", "--run", s(&run), "--bench", "64by48"]);
    assert!(e.contains("WIDTHxHEIGHT"), "{e}");
    let out = ok(&[
        "view",
        "--run",
        s(&run),
        "--bench",
        "64x48",
        "--repeats",
        "2",
    ]);
    assert!(
        out.contains("rgb") && out.contains("features") && out.contains("64x48"),
        "{out}"
    );
}
