//! Frame timings without a browser (`lsplat-engine view --bench`): every mode at one
//! camera, repeated, the minimum of each stage reported (the machine may be shared).

use std::sync::Arc;
use std::time::Instant;

use lsplat_core::Camera;
use lsplat_device::Backend;

use crate::Result;
use crate::encode::{Format, encode};
use crate::frame::{FrameRequest, Mode, Query, Renderer, Timings};
use crate::table::DecodeStats;

/// The timings of one mode.
#[derive(Clone, Debug)]
pub struct ModeTimes {
    /// The mode (and "exact" for V1 per-pixel decoding).
    pub label: String,
    /// Per-stage minimum over the repeats (each stage's own minimum).
    pub min: Timings,
    /// JPEG encoding at the quality given, minimum.
    pub encode_ms: f64,
    /// Bytes of that JPEG.
    pub jpeg_bytes: usize,
    /// The first repeat's total (cold: tables empty, buffers unallocated).
    pub first_ms: f64,
    /// Decoding work of the first repeat.
    pub first_decode: DecodeStats,
}

/// The bench's request: LangSplat's threshold 0.4.
fn request(
    camera: &Camera,
    mode: Mode,
    level: u8,
    query: Option<Arc<Query>>,
    exact: bool,
) -> FrameRequest {
    FrameRequest {
        camera: camera.clone(),
        mode,
        level,
        query,
        threshold: 0.4,
        exact,
        jpeg: None,
    }
}

/// The name of a mode as the page and the bench print it.
fn mode_name(mode: Mode) -> String {
    serde_json::to_value(mode)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Renders `modes` at `camera` `repeats` times each on `level`.
pub fn bench<B: Backend>(
    r: &mut Renderer<B>,
    camera: &Camera,
    level: u8,
    query: Option<Arc<Query>>,
    modes: &[(Mode, bool)],
    repeats: usize,
    quality: u8,
) -> Result<Vec<ModeTimes>> {
    let mut out = Vec::new();
    for &(mode, exact) in modes {
        let mut req = request(camera, mode, level, query.clone(), exact);
        req.jpeg = Some(quality);
        let mut best: Option<Timings> = None;
        let (mut enc_ms, mut bytes, mut first, mut first_decode) = (f64::INFINITY, 0, 0.0, None);
        for _ in 0..repeats.max(1) {
            let f = r.render(&req)?;
            // Encoded on the device where the frame was made there, else on the host.
            let (ms, len) = match &f.jpeg {
                Some(j) => (f.timings.encode, j.len()),
                None => {
                    let t = Instant::now();
                    let jpg = encode(
                        &f.rgb,
                        f.width,
                        f.height,
                        Format::Jpeg,
                        quality,
                        r.threads(),
                    )?;
                    (t.elapsed().as_secs_f64() * 1e3, jpg.len())
                }
            };
            enc_ms = enc_ms.min(ms);
            bytes = len;
            if first_decode.is_none() {
                first = f.timings.total;
                first_decode = Some(f.decode);
            }
            let t = f.timings;
            best = Some(match best {
                None => t,
                Some(b) => Timings {
                    colours: b.colours.min(t.colours),
                    project: b.project.min(t.project),
                    rasterize: b.rasterize.min(t.rasterize),
                    relevancy: b.relevancy.min(t.relevancy),
                    shade: b.shade.min(t.shade),
                    encode: b.encode.min(t.encode),
                    total: b.total.min(t.total),
                },
            });
        }
        let name = mode_name(mode);
        out.push(ModeTimes {
            label: if exact {
                format!("{name} (exact)")
            } else {
                name
            },
            min: best.unwrap_or_default(),
            encode_ms: enc_ms,
            jpeg_bytes: bytes,
            first_ms: first,
            first_decode: first_decode.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// The code table's answers against the exact per-pixel decode on one frame.
#[derive(Clone, Debug)]
pub struct TableCheck {
    /// Pixels compared.
    pub pixels: usize,
    /// Largest |relevancy difference|.
    pub max_abs: f32,
    /// Mean |relevancy difference|.
    pub mean_abs: f64,
    /// Share of pixels whose segmentation (threshold 0.4) is the same.
    pub mask_agree: f64,
    /// Pixels whose segmentation differs.
    pub mask_differ: usize,
    /// The exact frame's time.
    pub exact_ms: f64,
}

/// Renders the relevancy frame of `query` at `camera` through the code table and with
/// the exact decode, and compares the relevancy maps and LangSplat's segmentation of
/// each (threshold 0.4).
pub fn table_vs_exact<B: Backend>(
    r: &mut Renderer<B>,
    camera: &Camera,
    level: u8,
    query: Arc<Query>,
) -> Result<TableCheck> {
    let mut req = FrameRequest {
        camera: camera.clone(),
        mode: Mode::Relevancy,
        level,
        query: Some(query),
        threshold: 0.4,
        exact: false,
        jpeg: None,
    };
    let table = r.render(&req)?;
    req.exact = true;
    let exact = r.render(&req)?;
    let (a, b) = (
        table.relevancy.unwrap_or_default(),
        exact.relevancy.unwrap_or_default(),
    );
    let (w, h) = (camera.width as usize, camera.height as usize);
    let diff: Vec<f32> = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).collect();
    let (ma, mb) = (
        crate::frame::segment(&a, w, h, 0.4),
        crate::frame::segment(&b, w, h, 0.4),
    );
    let differ = ma.iter().zip(&mb).filter(|(x, y)| x != y).count();
    Ok(TableCheck {
        pixels: a.len(),
        max_abs: diff.iter().copied().fold(0.0, f32::max),
        mean_abs: diff.iter().map(|&d| f64::from(d)).sum::<f64>() / diff.len().max(1) as f64,
        mask_agree: 1.0 - differ as f64 / ma.len().max(1) as f64,
        mask_differ: differ,
        exact_ms: exact.timings.total,
    })
}

/// A frame made on the device against the same frame made by the host path.
#[derive(Clone, Debug)]
pub struct PathCheck {
    /// The mode.
    pub label: String,
    /// Bytes of the RGB8 pictures that differ.
    pub bytes_differ: usize,
    /// Bytes of the device's JPEG that differ from the host's JPEG of the host
    /// path's picture ([`crate::jpeg::encode`]), the length difference included.
    pub jpeg_differ: usize,
    /// Largest |difference| of the relevancy maps (0 without a query).
    pub map_max_abs: f32,
    /// The host path's frame, minimum over the repeats.
    pub host_ms: f64,
}

/// With device frames on ([`Renderer::device_frames`]): every mode of `modes` made on
/// the device and by the host path (timed over `repeats`), compared. Leaves device
/// frames on.
pub fn device_vs_host<B: Backend>(
    r: &mut Renderer<B>,
    camera: &Camera,
    level: u8,
    query: Option<Arc<Query>>,
    modes: &[(Mode, bool)],
    repeats: usize,
    quality: u8,
) -> Result<Vec<PathCheck>> {
    let mut out = Vec::new();
    for &(mode, _) in modes {
        let mut req = request(camera, mode, level, query.clone(), false);
        r.set_device_frames(true);
        let on = r.render(&req)?;
        req.jpeg = Some(quality);
        let on_jpeg = r.render(&req)?.jpeg.unwrap_or_default();
        req.jpeg = None;
        r.set_device_frames(false);
        let mut host_ms = f64::INFINITY;
        let mut host = None;
        for _ in 0..repeats.max(1) {
            let f = r.render(&req)?;
            host_ms = host_ms.min(f.timings.total);
            host = Some(f);
        }
        r.set_device_frames(true);
        let host = host.ok_or_else(|| crate::ViewError::Request("no frame".into()))?;
        let map_max_abs = match (&on.relevancy, &host.relevancy) {
            (Some(a), Some(b)) => a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f32::max),
            _ => 0.0,
        };
        let host_jpeg = crate::jpeg::encode(&host.rgb, host.width, host.height, quality, 1)?;
        out.push(PathCheck {
            label: mode_name(mode),
            jpeg_differ: on_jpeg
                .iter()
                .zip(&host_jpeg)
                .filter(|(a, b)| a != b)
                .count()
                + on_jpeg.len().abs_diff(host_jpeg.len()),
            bytes_differ: on.rgb.iter().zip(&host.rgb).filter(|(a, b)| a != b).count()
                + on.rgb.len().abs_diff(host.rgb.len()),
            map_max_abs,
            host_ms,
        });
    }
    Ok(out)
}
