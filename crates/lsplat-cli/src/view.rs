//! `lsplat-engine view`: the interactive web viewer (crate `lsplat-view`), and
//! `view --bench`, its frame timings without a browser.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use lsplat_core::config::ViewConfig;
use lsplat_device::Backend;
use lsplat_query::{CANONICAL, TextEncoder};
use lsplat_render::BackendVisitor;
use lsplat_view::frame::{Mode, Query, Renderer};
use lsplat_view::scene::{SceneOptions, ViewScene};

use crate::clip::{ClipArgs, ClipEncoder};
use crate::views::backend_kind;

/// The JPEG quality `--bench` encodes at.
const QUALITY: u8 = 90;

/// Options of `view`.
#[derive(clap::Args, Debug)]
pub struct ViewArgs {
    /// Run folder to show: a finished run, or a run of several levels (its
    /// `level_<l>/` folders become the level selector). Repeat for several runs.
    #[arg(long, required = true)]
    pub run: Vec<PathBuf>,
    /// Port to listen on (0: any free port; the URL printed says which).
    #[arg(long, default_value_t = ViewConfig::default().port)]
    pub port: u16,
    /// Address to bind. Anything but a loopback address exposes the viewer to the
    /// network (guarded only by the token in the URL).
    #[arg(long, default_value_t = ViewConfig::default().host)]
    pub host: String,
    /// Autoencoder that decodes a LangSplat V1 run's codes (as `query --model`).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Text embeddings queries are looked up in (as `query --text`): typed phrases must
    /// be in the file, with the canonical "object", "things", "stuff", "texture".
    #[arg(long, conflicts_with = "clip")]
    pub text: Option<PathBuf>,
    /// A CLIP model that embeds whatever is typed (as `query --clip`; default:
    /// `models.clip` of the first run's configuration).
    #[command(flatten)]
    pub clip: ClipArgs,
    /// Backend to render on (default: the run's `device.backend`).
    #[arg(long)]
    pub backend: Option<String>,
    /// Cells per axis of a V1 level's code table.
    #[arg(long, default_value_t = ViewConfig::default().table_cells)]
    pub table_cells: usize,
    /// Do not serve: render every mode at the first camera resized to WIDTHxHEIGHT
    /// (e.g. 1280x720) and print each stage's minimum time over the repeats.
    #[arg(long, value_name = "WIDTHxHEIGHT")]
    pub bench: Option<String>,
    /// Repeats of each mode for --bench.
    #[arg(long, default_value_t = 5)]
    pub repeats: usize,
    /// The query of --bench's relevancy frames (default: the first phrase of --text
    /// that is not canonical; needed with --clip).
    #[arg(long)]
    pub bench_query: Option<String>,
    /// With --bench, also render each V1 level's relevancy frame with the exact
    /// per-pixel decode and print how far the code table's relevancy and segmentation
    /// (threshold 0.4) are from it (slow: the decoder at every pixel).
    #[arg(long)]
    pub bench_exact: bool,
}

/// Runs `view`.
pub fn run(args: ViewArgs) -> Result<()> {
    if args.bench.is_none() {
        if let Ok(ip) = args.host.parse::<std::net::IpAddr>() {
            if !ip.is_loopback() {
                eprintln!(
                    "warning: --host {ip} lets other machines reach the viewer; anyone with the URL (its token) can use it and read the run's pictures"
                );
            }
        } else if args.host != "localhost" {
            eprintln!(
                "warning: --host {} may not be a loopback address; anyone who can reach it with the URL can use the viewer",
                args.host
            );
        }
    }
    // The first run's settings say where CLIP and ONNX Runtime are (a run of several
    // levels keeps them in its level folders, read when the scenes load).
    let run_cfg = args
        .run
        .first()
        .map(|d| d.join(lsplat_data::run::CONFIG_FILE))
        .filter(|p| p.is_file())
        .map(|p| lsplat_core::Config::load(&p))
        .transpose()?
        .unwrap_or_default();
    let text: Option<Arc<dyn TextEncoder>> = match (&args.text, args.clip.model(&run_cfg)) {
        (Some(p), _) => Some(Arc::new(lsplat_data::embeddings::read_embeddings(p)?)),
        (None, Some((dir, vocab))) => {
            let t = ClipEncoder::load(&dir, vocab.as_deref(), &run_cfg)?;
            eprintln!("queries: {}", t.describe());
            Some(Arc::new(t))
        }
        (None, None) => None,
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let reader = |d: &std::path::Path| lsplat_plugins::load_run(d);
    let opts = SceneOptions {
        reader: &reader,
        model: args.model.as_deref(),
        text: text.clone(),
        table_cells: args.table_cells,
        threads,
    };
    let mut scenes = Vec::new();
    for dir in &args.run {
        let t = std::time::Instant::now();
        let s = ViewScene::load(dir, &opts)
            .with_context(|| format!("loading {} for the viewer", dir.display()))?;
        eprintln!(
            "{}: {} Gaussians, {} cameras, levels {} ({}), loaded in {:.1} s",
            s.name,
            s.gaussians.len(),
            s.cameras.len(),
            s.levels
                .iter()
                .map(|l| l.level.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            s.levels[0].semantic.describe(),
            t.elapsed().as_secs_f64()
        );
        scenes.push(Arc::new(s));
    }
    let mut cfg = scenes[0].config.clone();
    if let Some(b) = &args.backend {
        cfg.device.backend = backend_kind(b)?;
    }
    let dev = lsplat_render::Device::open(&cfg.device, &cfg.simt)?;
    match &args.bench {
        Some(size) => {
            let (w, h) = parse_size(size)?;
            let query = match (&text, &args.bench_query) {
                (None, _) => None,
                (Some(t), q) => {
                    let phrase = match q {
                        Some(q) => q.clone(),
                        None => t
                            .phrases()
                            .unwrap_or_default()
                            .into_iter()
                            .find(|n| !CANONICAL.contains(&n.as_str()))
                            .context(
                                "--text holds only the canonical phrases (or --clip knows no list): give --bench-query",
                            )?,
                    };
                    let unit = t.embed(&[phrase.as_str()])?;
                    Some(Arc::new(Query { phrase, unit }))
                }
            };
            dev.visit(Bench {
                scene: scenes[0].clone(),
                size: (w, h),
                query,
                repeats: args.repeats,
                exact: args.bench_exact,
                threads,
            })
        }
        None => {
            let mut config = ViewConfig {
                host: args.host.clone(),
                port: args.port,
                table_cells: args.table_cells,
                ..ViewConfig::default()
            };
            config.host = config.host.trim_matches(['[', ']']).to_string();
            let names: Vec<String> = scenes.iter().map(|s| s.name.clone()).collect();
            dev.visit(Serve {
                serve: lsplat_view::Serve {
                    scenes,
                    config,
                    threads,
                    ready: Box::new(move |url: &str| {
                        use std::io::Write;
                        let mut out = std::io::stdout().lock();
                        let _ = writeln!(out, "lsplat-engine view: {} at", names.join(", "));
                        let _ = writeln!(out, "  {url}");
                        let _ = writeln!(out, "(Ctrl-C stops it)");
                        let _ = out.flush();
                    }),
                },
            })
        }
    }
}

struct Serve {
    serve: lsplat_view::Serve,
}

impl BackendVisitor for Serve {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        Ok(lsplat_view::serve(dev, self.serve)?)
    }
}

fn parse_size(s: &str) -> Result<(u32, u32)> {
    let (w, h) = s
        .split_once('x')
        .with_context(|| format!("--bench {s}: expected WIDTHxHEIGHT, e.g. 1280x720"))?;
    let (w, h): (u32, u32) = (w.parse()?, h.parse()?);
    if w == 0 || h == 0 || w > 8192 || h > 8192 {
        bail!("--bench {s}: sizes run from 1 to 8192");
    }
    Ok((w, h))
}

struct Bench {
    scene: Arc<ViewScene>,
    size: (u32, u32),
    query: Option<Arc<Query>>,
    repeats: usize,
    exact: bool,
    threads: usize,
}

impl BackendVisitor for Bench {
    type Output = Result<()>;

    fn visit<B: Backend>(self, dev: B) -> Result<()> {
        let describe = dev.describe();
        let cam = self.scene.cameras[0].rescaled(self.size.0, self.size.1);
        let mut r = Renderer::new(Arc::new(dev), self.scene.clone(), self.threads)?;
        let mut modes = vec![(Mode::Rgb, false), (Mode::Features, false)];
        if self.query.is_some() {
            modes.extend([(Mode::Relevancy, false), (Mode::Segmentation, false)]);
        }
        println!(
            "{} at {}x{} (camera {}), {} repeats, minimum per stage, on {describe}",
            self.scene.name, cam.width, cam.height, cam.name, self.repeats
        );
        for level in &self.scene.levels {
            println!("level {}: {}", level.level, level.semantic.describe());
            let times = lsplat_view::bench::bench(
                &mut r,
                &cam,
                level.level,
                self.query.clone(),
                &modes,
                self.repeats,
                QUALITY,
            )?;
            println!(
                "  {:<14} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8} | {:>7} {:>8} | {:>9}",
                "mode",
                "colours",
                "project",
                "raster",
                "relevancy",
                "shade",
                "frame",
                "jpeg",
                "bytes",
                "cold"
            );
            for t in times {
                let m = t.min;
                println!(
                    "  {:<14} {:>8.1} {:>8.1} {:>8.1} {:>9.1} {:>8.1} {:>8.1} | {:>7.1} {:>8} | {:>9.1}{}",
                    t.label,
                    m.colours,
                    m.project,
                    m.rasterize,
                    m.relevancy,
                    m.shade,
                    m.total,
                    t.encode_ms,
                    t.jpeg_bytes,
                    t.first_ms,
                    if t.first_decode.vertices > 0 {
                        format!(" ({} table vertices decoded)", t.first_decode.vertices)
                    } else {
                        String::new()
                    }
                );
            }
            if r.device_frames() {
                let checks = lsplat_view::bench::device_vs_host(
                    &mut r,
                    &cam,
                    level.level,
                    self.query.clone(),
                    &modes,
                    self.repeats,
                    QUALITY,
                )?;
                for c in checks {
                    println!(
                        "  {:<14} made on the device vs by the host path: {} bytes differ, JPEG {} bytes differ, relevancy max |Δ| {:.2e}; host path frame {:.1} ms",
                        c.label, c.bytes_differ, c.jpeg_differ, c.map_max_abs, c.host_ms
                    );
                }
            }
        }
        println!(
            "(milliseconds; frame = colours + project + raster + relevancy + shade, + jpeg where the frame is made on the device; jpeg at quality {QUALITY})"
        );
        if self.exact
            && let Some(q) = &self.query
        {
            for level in &self.scene.levels {
                if !matches!(level.semantic, lsplat_view::scene::Semantic::Decoded(_)) {
                    continue;
                }
                let c = lsplat_view::bench::table_vs_exact(&mut r, &cam, level.level, q.clone())?;
                println!(
                    "level {}: code table vs exact decode over {} pixels: relevancy max |Δ| {:.4}, mean |Δ| {:.5}; segmentation (0.4) agrees on {:.3}% of pixels ({} differ); exact frame {:.0} ms",
                    level.level,
                    c.pixels,
                    c.max_abs,
                    c.mean_abs,
                    100.0 * c.mask_agree,
                    c.mask_differ,
                    c.exact_ms
                );
            }
        }
        Ok(())
    }
}
