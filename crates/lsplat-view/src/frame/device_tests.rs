//! The device frame path against the host path.

use std::path::PathBuf;
use std::sync::Arc;

use glam::Vec3;
use lsplat_ae::Autoencoder;
use lsplat_core::config::{BackendKind, DeviceConfig, SimtConfig, SimtSchedule};
use lsplat_core::{Camera, Config, Gaussians, Rng};
use lsplat_render::colour::ShColours;
use lsplat_render::{BackendVisitor, Device};

use super::*;
use crate::answers::{Linear, Pca};
use crate::frame::Query;
use crate::scene::ViewScene;
use crate::table::Decoded;

const D: usize = 24;

fn unit_rows(rng: &mut Rng, n: usize, d: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n * d).map(|_| rng.normal()).collect();
    lsplat_query::normalize_rows(&mut v, d);
    v
}

/// 600 random splats with SH colours; level 1 a V1 level (3-D codes through a
/// random autoencoder, a 16-cell table), level 2 a linear one (24-D features).
fn scene() -> (ViewScene, Vec<f32>) {
    let mut rng = Rng::new(11);
    let n = 600;
    let mut u = || rng.f32() * 2.0 - 1.0;
    let means = (0..n).map(|_| [u(), u(), u()]).collect();
    let log_scales = (0..n)
        .map(|_| [-2.6 + 0.5 * u(), -2.6 + 0.5 * u(), -2.9])
        .collect();
    let rotations = (0..n).map(|_| [1.0 + u(), u(), u(), u()]).collect();
    let opacity_logits = (0..n).map(|_| 2.0 * u()).collect();
    let dc = (0..n).map(|_| [1.5 * u(), 1.5 * u(), 1.5 * u()]).collect();
    let rest = (0..n * 45).map(|_| 0.4 * u()).collect();
    let mut gaussians = Gaussians {
        means,
        log_scales,
        rotations,
        opacity_logits,
    };
    gaussians.normalize_rotations();
    let model = Arc::new(Autoencoder::new(D, &[16, 8, 3], &[16, 32, 64, D], 4).unwrap());
    let codes = unit_rows(&mut rng, n, 3);
    let decoded = model.decode(&codes, 1).unwrap();
    let features = unit_rows(&mut rng, n, D);
    let linear = Linear::direct(&features, D);
    let levels = vec![
        Level {
            level: 1,
            dir: PathBuf::new(),
            rows: codes.clone(),
            channels: 3,
            semantic: Semantic::Decoded(Decoded::new(model.clone(), &codes, 16)),
            pca: Pca::fit(&decoded, D),
        },
        Level {
            level: 2,
            dir: PathBuf::new(),
            rows: features.clone(),
            channels: D,
            pca: Pca::fit(&linear.sample_unit_features(), D),
            semantic: Semantic::Linear(linear),
        },
    ];
    let canonical = Some(unit_rows(&mut rng, 4, D));
    let sh = ShColours {
        degree: 3,
        dc,
        rest,
    };
    // The query: Gaussian 7's feature at level 1 (its pixels are relevant).
    let query = decoded[7 * D..8 * D].to_vec();
    let scene = ViewScene {
        name: "device".into(),
        dir: PathBuf::new(),
        config: Config::default(),
        gaussians,
        colours: Colours::Sh(sh),
        cameras: Vec::new(),
        levels,
        text: None,
        canonical,
    };
    (scene, query)
}

/// Renders every mode of both levels through the host path and the device path
/// on one backend, with bands of a few tile rows; returns how many frames matched
/// and how many of their pixels were relevant.
struct SamePictures;
impl BackendVisitor for SamePictures {
    type Output = (usize, usize);
    fn visit<B: Backend>(self, dev: B) -> (usize, usize) {
        let name = dev.describe();
        let (scene, query) = scene();
        let mut r = Renderer::new(Arc::new(dev), Arc::new(scene), 3).unwrap();
        // 104 × 72 at tile 16: 28-value rows give bands of two tile rows.
        r.band_values = 104 * 16 * 28 * 2;
        // Two poses (the view-dependent colours change between them); the second
        // smaller, as the quick frame of a moving camera (buffers reused).
        let cameras = [
            (Vec3::new(0.3, -0.2, -3.2), (104, 72)),
            (Vec3::new(-1.9, 0.6, -2.4), (88, 56)),
        ]
        .map(|(eye, size)| {
            Camera::look_at(
                format!("{eye} {size:?}"),
                size,
                1.0,
                eye,
                Vec3::ZERO,
                Vec3::Y,
            )
        });
        let query = Arc::new(Query {
            phrase: "gaussian 7".into(),
            unit: query,
        });
        let (mut frames, mut relevant) = (0, 0);
        let modes = [
            Mode::Rgb,
            Mode::Features,
            Mode::Relevancy,
            Mode::Segmentation,
        ];
        let frames_to_make = cameras
            .iter()
            .flat_map(|c| [1, 2].map(|l| (c, l)))
            .flat_map(|(c, l)| modes.map(|m| (c, l, m)));
        for (camera, level, mode) in frames_to_make {
            let mut req = FrameRequest {
                camera: camera.clone(),
                mode,
                level,
                query: Some(query.clone()),
                threshold: 0.4,
                exact: false,
                jpeg: None,
            };
            let what = format!("{name}, {}, level {level}, {mode:?}", camera.name);
            r.set_device_frames(false);
            let host = r.render(&req).unwrap();
            r.set_device_frames(true);
            let on = r.render(&req).unwrap();
            let pixels = (camera.width * camera.height) as usize;
            assert_eq!(on.rgb.len(), pixels * 3, "{what}");
            let differ = on.rgb.iter().zip(&host.rgb).filter(|(a, b)| a != b).count();
            assert_eq!(differ, 0, "{what}: {differ} bytes differ");
            assert!(on.rgb.iter().any(|&v| v > 0), "{what}: a black picture");
            match (&on.relevancy, &host.relevancy) {
                (Some(a), Some(b)) => {
                    let bits = |m: &[f32]| m.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(a), bits(b), "{what}: the relevancy maps");
                    relevant += a.iter().filter(|&&v| v > 0.5).count();
                }
                (None, None) => {}
                _ => panic!("{what}: one path made a map, the other none"),
            }
            // The JPEG made on the device is the host encoder's of the host picture
            // (4:2:0 and 4:4:4 in turn).
            let quality = if frames % 2 == 0 { 75 } else { 92 };
            req.jpeg = Some(quality);
            let enc = r.render(&req).unwrap();
            assert!(enc.rgb.is_empty(), "{what}: the picture came back too");
            let want = crate::jpeg::encode(&host.rgb, camera.width, camera.height, quality, 2);
            assert_eq!(
                enc.jpeg.as_deref(),
                Some(&want.unwrap()[..]),
                "{what}: the JPEG at quality {quality}"
            );
            frames += 1;
        }
        (frames, relevant)
    }
}

/// The device path's pictures, JPEGs and relevancy maps are the host path's, bit
/// for bit: on the CPU (the ops' native implementations) and on simt (the kernels, at
/// warp 32 in order and warp 64 in a random order), for every mode of a V1 level (the code table on the device) and a linear one.
#[test]
fn device_frames_are_the_host_frames() {
    let (frames, relevant) = SamePictures.visit(lsplat_cpu::CpuBackend::new(2));
    assert_eq!(frames, 16);
    assert!(
        relevant > 100,
        "only {relevant} relevant pixels: a weak test"
    );
    let cfg = DeviceConfig {
        backend: BackendKind::Simt,
        ..Default::default()
    };
    for (warp, schedule) in [(32, SimtSchedule::InOrder), (64, SimtSchedule::Random)] {
        let simt = SimtConfig {
            warp,
            schedule,
            ..SimtConfig::default()
        };
        match Device::open(&cfg, &simt) {
            Ok(dev) => assert_eq!(dev.visit(SamePictures).0, 16),
            Err(e) => {
                let required = std::env::var("LSPLAT_REQUIRE_SIMT").is_ok_and(|v| v == "1");
                assert!(!required, "LSPLAT_REQUIRE_SIMT=1 but: {e}");
                eprintln!("SKIPPED (no simt runtime): {e}");
                return;
            }
        }
    }
}

/// The bit set the cells op fills reads back as the cells' indices.
#[test]
fn set_bits_lists_the_marked_cells() {
    let words = [0b1010u32, 0, 1 << 31];
    assert_eq!(set_bits(&words).collect::<Vec<_>>(), vec![1, 3, 95]);
}

/// The render thread sends the JPEG the device made (the frame's picture does not
/// come back), the bytes of the host's encoder; a PNG request reads the picture.
#[test]
fn the_render_thread_sends_the_device_jpeg() {
    use crate::encode::Format;
    use crate::worker::{Job, spawn};
    let (scene, _) = scene();
    let scene = Arc::new(scene);
    let camera = Camera::look_at(
        "worker",
        (72, 48),
        1.0,
        Vec3::new(0.3, -0.2, -3.2),
        Vec3::ZERO,
        Vec3::Y,
    );
    let request = FrameRequest {
        camera: camera.clone(),
        mode: Mode::Rgb,
        level: 1,
        query: None,
        threshold: 0.4,
        exact: false,
        jpeg: None,
    };
    let dev = Arc::new(lsplat_cpu::CpuBackend::new(2));
    let mut host = Renderer::new(dev.clone(), scene.clone(), 2).unwrap();
    let picture = host.render(&request).unwrap().rgb;
    let mut on = Renderer::new(dev, scene, 2).unwrap();
    on.set_device_frames(true);
    let (tx, handle) = spawn(vec![on]).unwrap();
    let ask = |format: Format| {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let job = Job {
            scene: 0,
            request: request.clone(),
            format,
            quality: 80,
            reply,
        };
        tx.blocking_send(job)
            .map_err(|_| "the render thread ended")
            .unwrap();
        rx.blocking_recv().unwrap().unwrap()
    };
    let jpeg = ask(Format::Jpeg);
    assert!(jpeg.frame.rgb.is_empty(), "the picture came back too");
    let want = crate::jpeg::encode(&picture, 72, 48, 80, 1).unwrap();
    assert_eq!(jpeg.bytes, want);
    let png = ask(Format::Png);
    assert_eq!(png.frame.rgb, picture);
    assert_eq!(&png.bytes[1..4], b"PNG");
    drop(tx);
    handle.join().unwrap();
}
