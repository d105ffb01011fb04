//! One frame: a camera, a mode and a level rendered on a backend into an RGB8 picture,
//! with the time of each stage.
//!
//! Each level's Gaussians carry one row `[r, g, b, 1, semantic channels…]` (padded to
//! a channel count the CPU rasterizer specialises), composited in one pass, band by
//! band (bands of whole tile rows bound the memory of wide features). The colours
//! come from the splats' SH: for SH of degree ≥ 1 they are evaluated for the camera
//! centre every frame; the RGB mode composites `[r, g, b, 1]` alone.
//!
//! Two paths make the picture from the composited rows. On a backend whose buffers
//! are host memory (the CPU) the rows are read in place and shaded on the host's
//! threads. Elsewhere (simt, CUDA, HIP) [`device`] makes it with the viewer's device
//! ops, and only the RGB8 picture and the relevancy map are read back. Both give the
//! same bits.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use lsplat_core::{Camera, TileGrid};
use lsplat_device::{Backend, CameraParams, PixelSet};
use lsplat_query::lerf::{Protocol, blend, threshold};
use lsplat_query::picture::{heat_over_into, heat_top, round_u8};
use lsplat_render::Scratch;

use crate::answers::relevancy;
use crate::ops::ALPHA_MIN;
use crate::scene::{Level, Semantic, ViewScene};
use crate::table::{DecodeStats, Reduce};
use crate::{Result, ViewError};

pub(crate) mod device;

/// Values a band holds at most (64 MB of f32).
const BAND_VALUES: usize = 16 << 20;
/// Resolutions whose pixel sets are kept.
const KEPT_SIZES: usize = 4;

/// What a frame shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The splats' colours.
    Rgb,
    /// The PCA of the decoded language features.
    Features,
    /// LangSplat's relevancy of a query as a heat map over the colours.
    Relevancy,
    /// The query's segmentation (LangSplat's smoothing, normalised threshold and
    /// clean-up) over the colours.
    Segmentation,
}

impl Mode {
    /// True for the modes that need a query.
    pub fn needs_query(self) -> bool {
        matches!(self, Mode::Relevancy | Mode::Segmentation)
    }
}

/// A query's unit embedding.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    /// The phrase.
    pub phrase: String,
    /// Its unit embedding `[D]`.
    pub unit: Vec<f32>,
}

/// What to render.
#[derive(Clone, Debug)]
pub struct FrameRequest {
    /// The camera (pose, intrinsics, size).
    pub camera: Camera,
    /// The mode.
    pub mode: Mode,
    /// The level (LangSplat's number).
    pub level: u8,
    /// The query of the relevancy and segmentation modes.
    pub query: Option<Arc<Query>>,
    /// The segmentation threshold on the normalised map (LangSplat: 0.4).
    pub threshold: f32,
    /// Decode every pixel exactly (LangSplat V1) instead of through the code table.
    pub exact: bool,
    /// Where the frame is made on the device, also encode it there as a JPEG of this
    /// quality (the frame's `jpeg`; its `rgb` is then empty, and only the compressed
    /// bytes come back). The host path ignores it.
    pub jpeg: Option<u8>,
}

/// Milliseconds spent per stage.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Timings {
    /// SH colours of the Gaussians for this camera.
    pub colours: f64,
    /// Projection and binning.
    pub project: f64,
    /// Compositing and reading the bands back.
    pub rasterize: f64,
    /// Per-pixel answers: decoding (V1's table or decoder, V2's codebook directions)
    /// and relevancy.
    pub relevancy: f64,
    /// Turning values into the picture (heat map, segmentation, PCA colours).
    pub shade: f64,
    /// Encoding the JPEG on the device (0 when the host encodes it).
    pub encode: f64,
    /// The whole frame.
    pub total: f64,
}

/// A rendered frame.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// RGB8, row-major (empty when `jpeg` holds the picture).
    pub rgb: Vec<u8>,
    /// The picture as a JPEG made on the device (see [`FrameRequest::jpeg`]).
    pub jpeg: Option<Vec<u8>>,
    /// The relevancy map (relevancy and segmentation modes), row-major.
    pub relevancy: Option<Vec<f32>>,
    /// Stage times.
    pub timings: Timings,
    /// Decoding work of a V1 level.
    pub decode: DecodeStats,
}

struct BandSet<B: Backend> {
    y0: u32,
    /// Per pixel of the band (row-major from row `y0`), its position in the
    /// rasterizer's tile-ordered output.
    source: Vec<u32>,
    /// `source` on the device (for the device frame path).
    source_buf: B::Buf<u32>,
    set: PixelSet<B>,
}

/// A scene resident on a backend, rendering frames.
pub struct Renderer<B: Backend> {
    dev: Arc<B>,
    scene: Arc<ViewScene>,
    geometry: B::Geometry,
    rgb_rows: Vec<f32>,
    rgb_buf: B::Buf<f32>,
    level_rows: HashMap<u8, (Vec<f32>, B::Buf<f32>, usize)>,
    scratch: Scratch<B>,
    bands: Vec<((u32, u32, usize), Vec<BandSet<B>>)>,
    out: Option<B::Buf<f32>>,
    /// Host copy of `out` (kept between frames: a fresh 30 MB vector per band costs
    /// its page faults every frame).
    tiled: Vec<f32>,
    /// One band's rows in image order (kept between frames, as `tiled`).
    band: Vec<f32>,
    colours_for: Option<[f32; 3]>,
    threads: usize,
    /// Make the pictures with the device ops (`crate::ops`) where the rasterizer ran;
    /// on by default where the backend's buffers are not host memory.
    device_frames: bool,
    /// Values a band holds at most ([`BAND_VALUES`]; smaller in tests).
    band_values: usize,
    /// The device path's buffers (kept between frames).
    dbufs: device::Buffers<B>,
}

/// The padded row width of `4 + k` channels (the CPU rasterizer's fixed counts).
fn padded(k: usize) -> usize {
    match 4 + k {
        n @ (4 | 8 | 9 | 12 | 16) => n,
        n if n < 8 => 8,
        n if n < 12 => 12,
        n if n < 16 => 16,
        n => n,
    }
}

impl<B: Backend> Renderer<B> {
    /// Uploads the scene's splats and colours.
    /// Host threads the renderer (and the host's JPEG) uses.
    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn new(dev: Arc<B>, scene: Arc<ViewScene>, threads: usize) -> Result<Self> {
        let n = scene.gaussians.len();
        let rgb_rows = vec![0f32; n * 4];
        let geometry = dev.upload_geometry(&scene.gaussians)?;
        let rgb_buf = dev.upload(&rgb_rows)?;
        let device_frames = dev.host_view(&rgb_buf).is_none();
        let mut r = Renderer {
            dev,
            scene,
            geometry,
            rgb_rows,
            rgb_buf,
            level_rows: HashMap::new(),
            scratch: Scratch::default(),
            bands: Vec::new(),
            out: None,
            tiled: Vec::new(),
            band: Vec::new(),
            colours_for: None,
            threads: threads.max(1),
            device_frames,
            band_values: BAND_VALUES,
            dbufs: device::Buffers::default(),
        };
        r.update_colours([0.0; 3])?;
        Ok(r)
    }

    /// The backend.
    pub fn device(&self) -> &B {
        &self.dev
    }

    /// Makes frames' pictures on the device (`true`, the default on backends whose
    /// buffers are not host memory) or on the host's threads after reading the
    /// rendered rows back (`false`, the default on the CPU). The pictures are the same
    /// bits either way, up to the device's `expf` on a real GPU.
    pub fn set_device_frames(&mut self, on: bool) {
        if on != self.device_frames {
            // The colours are re-made by the chosen path at the next frame.
            self.colours_for = None;
            for (rows, _, _) in self.level_rows.values_mut() {
                rows.clear();
            }
        }
        self.device_frames = on;
    }

    /// True when frames' pictures are made on the device.
    pub fn device_frames(&self) -> bool {
        self.device_frames
    }

    /// The scene.
    pub fn scene(&self) -> &Arc<ViewScene> {
        &self.scene
    }

    /// Re-evaluates view-dependent colours for `eye` (once for view-independent ones).
    fn update_colours(&mut self, eye: [f32; 3]) -> Result<()> {
        let scene = self.scene.clone();
        let colours = &scene.colours;
        if self.colours_for.is_some()
            && (colours.view_independent() || self.colours_for == Some(eye))
        {
            return Ok(());
        }
        if self.sh_on_device(eye, None)? {
            self.colours_for = Some(eye);
            return Ok(());
        }
        colours.rows_into(
            &scene.gaussians.means,
            eye,
            self.threads,
            &mut self.rgb_rows,
        );
        self.dev.upload_into(&mut self.rgb_buf, &self.rgb_rows)?;
        self.colours_for = Some(eye);
        // Levels' rows carry the colours too: refreshed when next used.
        for (rows, _, _) in self.level_rows.values_mut() {
            rows.clear();
        }
        Ok(())
    }

    /// The level's `[N, stride]` rows on the device (built on first use, colours
    /// refreshed after they change).
    fn level_buf(&mut self, level: &Level) -> Result<usize> {
        let stride = padded(level.channels);
        let entry = self.level_rows.entry(level.level);
        let (rows, buf, _) = match entry {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let n = self.scene.gaussians.len();
                let buf = self.dev.alloc::<f32>(n * stride)?;
                v.insert((Vec::new(), buf, stride))
            }
        };
        let built = rows.is_empty();
        if built {
            let n = self.scene.gaussians.len();
            rows.resize(n * stride, 0.0);
            for ((dst, rgb), sem) in rows
                .chunks_exact_mut(stride)
                .zip(self.rgb_rows.chunks_exact(4))
                .zip(level.rows.chunks_exact(level.channels))
            {
                dst[..4].copy_from_slice(rgb);
                dst[4..4 + level.channels].copy_from_slice(sem);
            }
            self.dev.upload_into(buf, rows)?;
        }
        // Colours evaluated on the device are not in `rgb_rows`: written in place.
        if let (true, Some(eye)) = (built, self.colours_for) {
            self.sh_on_device(eye, Some(level.level))?;
        }
        Ok(stride)
    }

    /// The bands of a `width × height` image for rows of `stride` values.
    fn bands_for(&mut self, grid: TileGrid, stride: usize) -> Result<usize> {
        let key = (grid.width, grid.height, stride);
        if let Some(i) = self.bands.iter().position(|(k, _)| *k == key) {
            return Ok(i);
        }
        let tile = grid.tile_size;
        let tile_rows =
            (self.band_values / (grid.width as usize * tile as usize * stride)).max(1) as u32;
        let band_h = tile_rows * tile;
        let mut sets = Vec::new();
        for y0 in (0..grid.height).step_by(band_h as usize) {
            let y1 = (y0 + band_h).min(grid.height);
            let width = grid.width;
            let (order, offsets) = grid.select_pixels(|p| (y0..y1).contains(&(p / width)));
            let set = PixelSet::upload(&*self.dev, grid, &order, &offsets)?;
            let base = y0 as usize * width as usize;
            let mut source = vec![0u32; ((y1 - y0) * width) as usize];
            for (i, &p) in order.iter().enumerate() {
                source[p as usize - base] = i as u32;
            }
            let source_buf = self.dev.upload(&source)?;
            sets.push(BandSet {
                y0,
                source,
                source_buf,
                set,
            });
        }
        if self.bands.len() >= KEPT_SIZES {
            self.bands.remove(0);
        }
        self.bands.push((key, sets));
        Ok(self.bands.len() - 1)
    }

    /// Composites band `band` of band set `bi` (rows of `stride` values: the RGB rows
    /// at 4, else `level`'s) into `self.out`, tile-ordered; false for an empty band.
    fn rasterize_band(&mut self, bi: usize, band: usize, level: u8, stride: usize) -> Result<bool> {
        let bs = &self.bands[bi].1[band];
        if bs.set.len == 0 {
            return Ok(false);
        }
        let features = if stride == 4 {
            &self.rgb_buf
        } else {
            &self.level_rows[&level].1
        };
        let need = bs.set.len * stride;
        let out = match self.out.take() {
            Some(o) if B::buf_len(&o) >= need => o,
            _ => self.dev.alloc::<f32>(need)?,
        };
        let out = self.out.insert(out);
        self.dev.rasterize(
            &self.scratch.projection,
            &self.scratch.bins,
            &bs.set,
            features,
            stride,
            out,
        )?;
        Ok(true)
    }

    /// Renders one frame.
    pub fn render(&mut self, req: &FrameRequest) -> Result<Frame> {
        let t0 = Instant::now();
        let mut tm = Timings::default();
        let cam = &req.camera;
        if cam.width == 0 || cam.height == 0 {
            return Err(ViewError::Request(format!(
                "a frame of {}x{} pixels",
                cam.width, cam.height
            )));
        }
        let scene = self.scene.clone();
        let level = scene.level(req.level).ok_or_else(|| {
            ViewError::Request(format!(
                "no level {} in {} (levels: {})",
                req.level,
                scene.name,
                scene
                    .levels
                    .iter()
                    .map(|l| l.level.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let query = match (req.mode.needs_query(), &req.query) {
            (false, _) => None,
            (true, Some(q)) => Some(q.clone()),
            (true, None) => return Err(ViewError::Request("type a query first".into())),
        };
        if query.is_some() && scene.canonical.is_none() {
            return Err(ViewError::Request(
                "no text embeddings: start the viewer with --text (or --clip) to ask queries"
                    .into(),
            ));
        }
        if req.mode != Mode::Rgb && matches!(level.semantic, Semantic::Plain(_)) && query.is_some()
        {
            return Err(ViewError::Request(format!(
                "level {}: {}: give --model (the autoencoder) to ask queries",
                level.level,
                level.semantic.describe()
            )));
        }

        let t = Instant::now();
        let c = cam.centre();
        self.update_colours([c.x, c.y, c.z])?;
        tm.colours = ms(t);

        let t = Instant::now();
        let cfg = &scene.config.render;
        let grid = TileGrid::new(cfg.tile_size, cam.width, cam.height);
        self.dev.project(
            &self.geometry,
            &CameraParams::new(cam, cfg.near, cfg.far),
            grid,
            &mut self.scratch.projection,
        )?;
        self.dev
            .bin_and_sort(&self.scratch.projection, grid, &mut self.scratch.bins)?;
        tm.project = ms(t);

        let stride = if req.mode == Mode::Rgb {
            4
        } else {
            self.level_buf(level)?
        };
        let bi = self.bands_for(grid, stride)?;
        if self.device_frames && device::handles(level, req) {
            let targets = self.targets(level, req.mode, query.as_deref());
            let mut frame = self.render_on_device(req, level, bi, stride, targets, tm)?;
            frame.timings.total = ms(t0);
            return Ok(frame);
        }
        let (w, h) = (cam.width as usize, cam.height as usize);
        let mut rgb = vec![0u8; w * h * 3];
        let mut map = query.as_ref().map(|_| vec![0f32; w * h]);
        let mut feature_rgb = if req.mode == Mode::Features {
            vec![0u8; w * h * 3]
        } else {
            Vec::new()
        };
        let mut decode = DecodeStats::default();
        let targets = self.targets(level, req.mode, query.as_deref());
        let mut band = std::mem::take(&mut self.band);
        for b in 0..self.bands[bi].1.len() {
            let t = Instant::now();
            if !self.rasterize_band(bi, b, level.level, stride)? {
                continue;
            }
            let (Some(out), bs) = (self.out.as_ref(), &self.bands[bi].1[b]) else {
                continue;
            };
            gather_band(
                &*self.dev,
                out,
                &bs.source,
                stride,
                self.threads,
                &mut self.tiled,
                &mut band,
            )?;
            let base = bs.y0 as usize * w;
            tm.rasterize += ms(t);

            let t = Instant::now();
            let px = &mut rgb[base * 3..(base + band.len() / stride) * 3];
            par_pixels(self.threads, px, 3, &band, stride, |_, o, r| {
                for k in 0..3 {
                    o[k] = round_u8(r[k].clamp(0.0, 1.0) * 255.0);
                }
            });
            tm.shade += ms(t);
            if req.mode == Mode::Rgb {
                continue;
            }
            let t = Instant::now();
            let (dots, st, reduced) =
                self.dots(level, &band, stride, &targets, req.mode, req.exact)?;
            decode.vertices += st.vertices;
            decode.pixels += st.pixels;
            let nt = targets.as_ref().map_or(0, |t| t.1);
            if let (Some(m), true) = (map.as_mut(), nt > 0) {
                if reduced {
                    m[base..base + dots.len()].copy_from_slice(&dots);
                } else {
                    let rows = dots.len() / nt;
                    let out = &mut m[base..base + rows];
                    par_pixels(self.threads, out, 1, &dots, nt, |_, o, d| {
                        o[0] = relevancy(d[4], &d[..4]);
                    });
                }
            }
            tm.relevancy += ms(t);
            if req.mode == Mode::Features {
                let t = Instant::now();
                let px = &mut feature_rgb[base * 3..(base + band.len() / stride) * 3];
                self.feature_colours(level, &band, stride, &dots, nt, px);
                tm.shade += ms(t);
            }
        }
        self.band = band;
        let t = Instant::now();
        let picture = match req.mode {
            Mode::Rgb => rgb,
            Mode::Features => feature_rgb,
            Mode::Relevancy => {
                let m = map.as_deref().unwrap_or_default();
                let top = heat_top(m);
                let mut out = vec![0u8; rgb.len()];
                par_pixels(self.threads, &mut out, 3, &rgb, 3, |i, o, px| {
                    heat_over_into(&m[i..i + 1], px, top, o);
                });
                out
            }
            Mode::Segmentation => {
                let m = map.as_deref().unwrap_or_default();
                let mask = segment_on(m, w, h, req.threshold, self.threads);
                let mut out = vec![0u8; rgb.len()];
                par_pixels(self.threads, &mut out, 3, &rgb, 3, |i, o, px| {
                    segment_pixel(mask[i], px, o);
                });
                out
            }
        };
        tm.shade += ms(t);
        tm.total = ms(t0);
        Ok(Frame {
            width: cam.width,
            height: cam.height,
            rgb: picture,
            jpeg: None,
            relevancy: map,
            timings: tm,
            decode,
        })
    }

    /// The unit targets of a frame and their count: relevancy `[canonical 4, query]`,
    /// features `[3 PCA axes]`; in the level's target space.
    fn targets(
        &self,
        level: &Level,
        mode: Mode,
        query: Option<&Query>,
    ) -> Option<(Vec<f32>, usize)> {
        let unit: Vec<f32> = match (mode, query) {
            (Mode::Rgb, _) => return None,
            (Mode::Features, _) => level.pca.as_ref()?.axes.clone(),
            (_, Some(q)) => {
                let mut v = self.scene.canonical.clone()?;
                v.extend_from_slice(&q.unit);
                v
            }
            (_, None) => return None,
        };
        let dim = level.semantic.text_dim()?;
        let n = unit.len() / dim;
        Some(match &level.semantic {
            Semantic::Linear(l) => (l.targets(&unit), n),
            _ => (unit, n),
        })
    }

    /// Dot products `[P, T]` of a band's pixels with the targets; for a V1 level in a
    /// query mode, the relevancy `[P]` itself (its code table holds relevancy), which
    /// the third value says.
    fn dots(
        &self,
        level: &Level,
        band: &[f32],
        stride: usize,
        targets: &Option<(Vec<f32>, usize)>,
        mode: Mode,
        exact: bool,
    ) -> Result<(Vec<f32>, DecodeStats, bool)> {
        let Some((t, _)) = targets else {
            return Ok((Vec::new(), DecodeStats::default(), false));
        };
        Ok(match &level.semantic {
            Semantic::Linear(l) => (
                l.dots(band, stride, 4, t, self.threads),
                DecodeStats::default(),
                false,
            ),
            Semantic::Decoded(d) => {
                let reduce = if mode.needs_query() {
                    Reduce::Relevancy
                } else {
                    Reduce::Dots
                };
                let (v, st) = d.dots(band, stride, 4, t, reduce, exact, self.threads)?;
                (v, st, reduce == Reduce::Relevancy)
            }
            Semantic::Plain(_) => (Vec::new(), DecodeStats::default(), false),
        })
    }

    /// The features picture of a band: the PCA colours of the decoded features, or,
    /// without a text space, the picture `render` draws.
    fn feature_colours(
        &self,
        level: &Level,
        band: &[f32],
        stride: usize,
        dots: &[f32],
        nt: usize,
        out: &mut [u8],
    ) {
        match (&level.semantic, &level.pca) {
            (Semantic::Plain(col), _) => {
                let c = level.channels;
                let feats: Vec<f32> = band
                    .chunks_exact(stride)
                    .flat_map(|r| r[4..4 + c].iter().copied())
                    .collect();
                let alpha: Vec<f32> = band.chunks_exact(stride).map(|r| r[3]).collect();
                out.copy_from_slice(&col.rgb(&feats, &alpha));
            }
            // A text space too narrow for three axes: black.
            (_, None) => out.fill(0),
            (_, Some(pca)) => {
                let nt = nt.max(1);
                par_pixels(self.threads, out, 3, band, stride, |i, o, r| {
                    let a = r[3];
                    let c = if a <= ALPHA_MIN {
                        [0; 3]
                    } else {
                        let d = &dots[i * nt..i * nt + 3];
                        pca.rgb([d[0], d[1], d[2]], a)
                    };
                    o.copy_from_slice(&c);
                });
            }
        }
    }
}

/// A band's rendered rows (`[P, stride]` in `out`, tile order) put in image order in
/// `band`, whose pixel `q` is row `source[q]`: read in place where the backend's
/// buffers are host memory (no copy of the band), downloaded into `tiled` otherwise,
/// then gathered on `threads` threads.
fn gather_band<B: Backend>(
    dev: &B,
    out: &B::Buf<f32>,
    source: &[u32],
    stride: usize,
    threads: usize,
    tiled: &mut Vec<f32>,
    band: &mut Vec<f32>,
) -> Result<()> {
    let rows = dev.read_host(out, tiled)?;
    band.clear();
    band.resize(source.len() * stride, 0.0);
    par_pixels(threads, band, stride, source, 1, |_, o, i| {
        let i = i[0] as usize * stride;
        o.copy_from_slice(&rows[i..i + stride]);
    });
    Ok(())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// LangSplat's segmentation of one relevancy map: the 30×30 box blend, the
/// normalised threshold, the 7×7 majority vote.
pub fn segment(map: &[f32], w: usize, h: usize, thresh: f32) -> Vec<u8> {
    segment_on(map, w, h, thresh, 1)
}

/// [`segment`] with the box filter and the vote on `threads` threads (the same mask).
pub fn segment_on(map: &[f32], w: usize, h: usize, thresh: f32, threads: usize) -> Vec<u8> {
    let p = Protocol::LangSplat;
    let blended = blend(map, &p.smooth_on(map, w, h, threads));
    p.clean_on(&threshold(&blended, thresh), w, h, threads)
}

/// The segmentation over the colours: inside, the colours tinted orange; outside,
/// the colours at 35%.
pub fn segmentation_picture(mask: &[u8], rgb: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; rgb.len()];
    for ((m, px), o) in mask
        .iter()
        .zip(rgb.chunks_exact(3))
        .zip(out.chunks_exact_mut(3))
    {
        segment_pixel(*m, px, o);
    }
    out
}

/// One pixel of [`segmentation_picture`].
#[inline]
pub(crate) fn segment_pixel(m: u8, px: &[u8], o: &mut [u8]) {
    const TINT: [f32; 3] = [255.0, 120.0, 20.0];
    for k in 0..3 {
        let v = px[k] as f32;
        o[k] = if m != 0 {
            round_u8(0.45 * v + 0.55 * TINT[k])
        } else {
            round_u8(0.35 * v)
        };
    }
}

/// Runs `f(pixel index, out pixel, in pixel)` over pixels `out` (`oc` values each) and
/// `inp` (`ic` values each) on `threads` threads, in chunks of whole pixels.
fn par_pixels<O: Send, I: Sync>(
    threads: usize,
    out: &mut [O],
    oc: usize,
    inp: &[I],
    ic: usize,
    f: impl Fn(usize, &mut [O], &[I]) + Sync,
) {
    let n = out.len() / oc;
    let per = n.div_ceil(threads.max(1)).max(16_384);
    let f = &f;
    std::thread::scope(|s| {
        for (c, (o, i)) in out
            .chunks_mut(per * oc)
            .zip(inp.chunks(per * ic))
            .enumerate()
        {
            s.spawn(move || {
                for (k, (o, i)) in o.chunks_exact_mut(oc).zip(i.chunks_exact(ic)).enumerate() {
                    f(c * per + k, o, i);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use lsplat_core::config::{BackendKind, DeviceConfig, SimtConfig};
    use lsplat_render::{BackendVisitor, Device};

    use super::*;

    /// Gathers a seeded permutation of 40 001 rows of 8 values on `dev`.
    struct Gather;
    impl BackendVisitor for Gather {
        type Output = (Vec<f32>, Vec<f32>, Vec<u32>);
        fn visit<B: Backend>(self, dev: B) -> Self::Output {
            let (n, stride) = (40_001, 8);
            let rows: Vec<f32> = (0..n * stride).map(|i| i as f32 * 0.5 - 7.0).collect();
            let mut rng = lsplat_core::Rng::new(5);
            let mut source: Vec<u32> = (0..n as u32).collect();
            for i in (1..n).rev() {
                source.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let out = dev.upload(&rows).unwrap();
            let (mut tiled, mut band) = (Vec::new(), Vec::new());
            gather_band(&dev, &out, &source, stride, 3, &mut tiled, &mut band).unwrap();
            (rows, band, source)
        }
    }

    fn check((rows, band, source): (Vec<f32>, Vec<f32>, Vec<u32>), what: &str) {
        assert_eq!(band.len(), rows.len(), "{what}");
        for (q, &s) in source.iter().enumerate() {
            let s = s as usize;
            assert_eq!(
                band[q * 8..q * 8 + 8],
                rows[s * 8..s * 8 + 8],
                "{what}: pixel {q}"
            );
        }
    }

    /// In place on the CPU backend, through a download on the GPU backend (simt): the
    /// same image-order rows.
    #[test]
    fn bands_gather_into_image_order_on_every_backend() {
        check(Gather.visit(lsplat_cpu::CpuBackend::new(2)), "cpu");
        let cfg = DeviceConfig {
            backend: BackendKind::Simt,
            ..Default::default()
        };
        match Device::open(&cfg, &SimtConfig::default()) {
            Ok(dev) => check(dev.visit(Gather), "simt"),
            Err(e) => {
                let required = std::env::var("LSPLAT_REQUIRE_SIMT").is_ok_and(|v| v == "1");
                assert!(!required, "LSPLAT_REQUIRE_SIMT=1 but: {e}");
                eprintln!("SKIPPED (no simt runtime): {e}");
            }
        }
    }
}
