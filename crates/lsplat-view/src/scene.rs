//! A run as the viewer shows it: its levels (one run, or the `level_<l>/` folders of a
//! run that solved several), the splats' colours, the cameras, and per level what
//! turns its composited features into answers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use lsplat_ae::Autoencoder;
use lsplat_core::{Camera, Config, Gaussians};
use lsplat_data::DataError;
use lsplat_data::run_dir::RunInputs;
use lsplat_query::picture::Colouring;
use lsplat_query::{CANONICAL, TextEncoder};
use lsplat_render::colour::ShColours;

use crate::answers::{Linear, PCA_SAMPLE, Pca};
use crate::table::Decoded;
use crate::{Result, ViewError};

/// Reads one finished run folder (the CLI passes the reader of the model that wrote
/// it).
pub type RunReader = dyn Fn(&Path) -> std::result::Result<RunInputs, DataError> + Send + Sync;

/// Feature widths at or above this are taken as text-space features when no
/// embeddings say otherwise.
const TEXT_WIDTH: usize = 128;

/// How a level's features are read.
pub enum Semantic {
    /// A normalised linear map of what is composited (LangSplatV2 codebook, or
    /// CLIP-width features).
    Linear(Linear),
    /// LangSplat V1 codes through the autoencoder.
    Decoded(Decoded),
    /// No text space (codes without their autoencoder): pictures as `render` draws
    /// them, no queries.
    Plain(Colouring),
}

impl Semantic {
    /// Channels each Gaussian composites for this level.
    pub fn channels(&self, features: usize) -> usize {
        match self {
            Semantic::Linear(l) => l.k,
            Semantic::Decoded(d) => d.code_dim(),
            Semantic::Plain(_) => features,
        }
    }

    /// Text-space width, when there is a text space.
    pub fn text_dim(&self) -> Option<usize> {
        match self {
            Semantic::Linear(l) => Some(l.dim),
            Semantic::Decoded(d) => Some(d.dim()),
            Semantic::Plain(_) => None,
        }
    }

    /// A sentence for the page and the log.
    pub fn describe(&self) -> String {
        match self {
            Semantic::Linear(l) if l.k == l.dim => format!("{}-D features", l.dim),
            Semantic::Linear(l) => format!(
                "codebook weights decoded to {}-D (composited as {} directions)",
                l.dim, l.k
            ),
            Semantic::Decoded(d) => format!(
                "{}-D codes decoded to {}-D by the autoencoder",
                d.code_dim(),
                d.dim()
            ),
            Semantic::Plain(_) => "features without a text space (no queries)".to_string(),
        }
    }
}

/// One level of a run.
pub struct Level {
    /// LangSplat's level (1–3; `scene.level` for a single run).
    pub level: u8,
    /// Its folder.
    pub dir: PathBuf,
    /// What each Gaussian composites, `[N, channels]`.
    pub rows: Vec<f32>,
    /// Channels composited.
    pub channels: usize,
    /// How the composited channels become answers.
    pub semantic: Semantic,
    /// The fixed PCA of the decoded per-Gaussian features (when there is a text
    /// space).
    pub pca: Option<Pca>,
}

/// The splats' colours.
pub enum Colours {
    /// SH coefficients from the splat file.
    Sh(ShColours),
    /// One grey for every Gaussian (a scene without colours, e.g. the demo).
    Grey,
}

/// The grey of a scene without colours.
pub const GREY: f32 = 0.7;

impl Colours {
    /// Every Gaussian's `[r, g, b, 1]` seen from `eye` into `out` (`[N, 4]`).
    pub fn rows_into(&self, means: &[[f32; 3]], eye: [f32; 3], threads: usize, out: &mut [f32]) {
        match self {
            Colours::Sh(sh) => sh.colours_into(means, eye, threads, out),
            Colours::Grey => {
                for r in out.chunks_exact_mut(4) {
                    r.copy_from_slice(&[GREY, GREY, GREY, 1.0]);
                }
            }
        }
    }

    /// True when the colours do not depend on the viewpoint.
    pub fn view_independent(&self) -> bool {
        match self {
            Colours::Sh(sh) => sh.view_independent(),
            Colours::Grey => true,
        }
    }
}

/// A run ready to be viewed.
pub struct ViewScene {
    /// The name the page and URLs use (the folder's name).
    pub name: String,
    /// The run folder.
    pub dir: PathBuf,
    /// The resolved configuration of the first level (backend, tile size, clip).
    pub config: Config,
    /// The splats.
    pub gaussians: Gaussians,
    /// Their colours.
    pub colours: Colours,
    /// The training cameras, by name.
    pub cameras: Vec<Camera>,
    /// Levels, in increasing order.
    pub levels: Vec<Level>,
    /// Where query embeddings come from.
    pub text: Option<Arc<dyn TextEncoder>>,
    /// The canonical phrases' unit embeddings `[4, D]` (with a text source).
    pub canonical: Option<Vec<f32>>,
}

/// What loading needs besides the folder.
pub struct SceneOptions<'a> {
    /// The run reader.
    pub reader: &'a RunReader,
    /// A LangSplat V1 autoencoder (`--model`).
    pub model: Option<&'a Path>,
    /// Where query embeddings come from.
    pub text: Option<Arc<dyn TextEncoder>>,
    /// Cells per axis of a V1 level's code table.
    pub table_cells: usize,
    /// Threads for decoding.
    pub threads: usize,
}

/// The level folders of a run: `level_<l>/` folders holding a run, or the run itself.
pub fn level_dirs(dir: &Path) -> Result<Vec<(Option<u8>, PathBuf)>> {
    if !dir.is_dir() {
        return Err(ViewError::run(dir, "no such run folder"));
    }
    let mut levels = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(l) = name
            .strip_prefix("level_")
            .and_then(|s| s.parse::<u8>().ok())
            && e.path().join(lsplat_data::run::CONFIG_FILE).is_file()
        {
            levels.push((Some(l), e.path()));
        }
    }
    if levels.is_empty() {
        return Ok(vec![(None, dir.to_path_buf())]);
    }
    levels.sort();
    Ok(levels)
}

impl ViewScene {
    /// Loads a run folder.
    pub fn load(dir: &Path, opts: &SceneOptions<'_>) -> Result<ViewScene> {
        let model: Option<Arc<Autoencoder>> = match opts.model {
            Some(p) => Some(Arc::new(lsplat_ae::load_model(p)?.model)),
            None => None,
        };
        let mut levels = Vec::new();
        let mut first: Option<RunInputs> = None;
        for (l, d) in level_dirs(dir)? {
            let run = (opts.reader)(&d)?;
            let level = build_level(&run, l, model.as_ref(), opts)?;
            if let Some(f) = &first
                && f.gaussians.len() != run.gaussians.len()
            {
                return Err(ViewError::run(
                    &d,
                    format!(
                        "has {} Gaussians but {} has {}",
                        run.gaussians.len(),
                        f.dir.display(),
                        f.gaussians.len()
                    ),
                ));
            }
            levels.push(level);
            if first.is_none() {
                first = Some(run);
            }
        }
        let Some(run) = first else {
            return Err(ViewError::run(dir, "holds no run"));
        };
        let colours = read_colours(&run)?;
        let canonical = match &opts.text {
            Some(t) => {
                check_text_width(dir, t.as_ref(), &levels)?;
                Some(t.embed(&CANONICAL)?)
            }
            None => None,
        };
        let name = std::path::absolute(dir)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "run".to_string());
        Ok(ViewScene {
            name,
            dir: dir.to_path_buf(),
            config: run.config,
            gaussians: run.gaussians,
            colours,
            cameras: run.cameras,
            levels,
            text: opts.text.clone(),
            canonical,
        })
    }

    /// The level numbered `level`.
    pub fn level(&self, level: u8) -> Option<&Level> {
        self.levels.iter().find(|l| l.level == level)
    }
}

fn build_level(
    run: &RunInputs,
    level: Option<u8>,
    model: Option<&Arc<Autoencoder>>,
    opts: &SceneOptions<'_>,
) -> Result<Level> {
    let c = run.channels;
    let text_dim = opts.text.as_ref().map(|t| t.dim());
    let semantic = match (&run.decoder, model) {
        (Some(d), Some(_)) => {
            return Err(ViewError::run(
                &run.dir,
                format!(
                    "decodes its {c} channels through its own {}; --model applies to LangSplat V1 runs",
                    d.file.display()
                ),
            ));
        }
        (Some(d), None) => {
            if d.dim == 0 || d.matrix.len() != c * d.dim {
                return Err(ViewError::run(
                    &d.file,
                    format!("{} values are not {c} codebook rows", d.matrix.len()),
                ));
            }
            Semantic::Linear(Linear::codebook(&run.features, &d.matrix, c, d.dim))
        }
        (None, Some(m)) => {
            lsplat_ae::file::check_code_dim(
                opts.model.unwrap_or(Path::new("--model")),
                m,
                c,
                &format!("run {}", run.dir.display()),
            )?;
            Semantic::Decoded(Decoded::new(m.clone(), &run.features, opts.table_cells))
        }
        (None, None) if c >= TEXT_WIDTH || text_dim == Some(c) => {
            Semantic::Linear(Linear::direct(&run.features, c))
        }
        (None, None) => Semantic::Plain(Colouring::fit(&run.features, c)),
    };
    let (rows, pca) = match &semantic {
        Semantic::Linear(l) => (l.rows.clone(), Pca::fit(&l.sample_unit_features(), l.dim)),
        Semantic::Decoded(d) => {
            let stride = (run.features.len() / c).div_ceil(PCA_SAMPLE).max(1);
            let sample: Vec<f32> = run
                .features
                .chunks_exact(c)
                .step_by(stride)
                .flatten()
                .copied()
                .collect();
            let unit = d.decode(&sample, opts.threads)?;
            (run.features.clone(), Pca::fit(&unit, d.dim()))
        }
        Semantic::Plain(_) => (run.features.clone(), None),
    };
    let channels = semantic.channels(c);
    Ok(Level {
        level: level.unwrap_or(run.config.scene.level),
        dir: run.dir.clone(),
        rows,
        channels,
        semantic,
        pca,
    })
}

/// Every level with a text space must match the embeddings' width.
fn check_text_width(dir: &Path, text: &dyn TextEncoder, levels: &[Level]) -> Result<()> {
    for l in levels {
        if let Some(d) = l.semantic.text_dim()
            && d != text.dim()
        {
            return Err(ViewError::run(
                dir,
                format!(
                    "level {} answers in {d}-D ({}) but the text embeddings {} are {}-D",
                    l.level,
                    l.semantic.describe(),
                    text.describe(),
                    text.dim()
                ),
            ));
        }
    }
    Ok(())
}

/// The splats' SH colours from the run's splat file (grey for a scene without one).
pub fn read_colours(run: &RunInputs) -> Result<Colours> {
    let Some(path) = run
        .config
        .scene
        .splats
        .as_ref()
        .filter(|_| !run.config.scene.is_demo())
    else {
        return Ok(Colours::Grey);
    };
    let ply = lsplat_data::ply::read_ply(path)?;
    if ply.sh_dc.len() != run.gaussians.len() {
        return Err(ViewError::run(
            path,
            format!(
                "holds {} Gaussians but the run has {}",
                ply.sh_dc.len(),
                run.gaussians.len()
            ),
        ));
    }
    Ok(Colours::Sh(ShColours {
        degree: ply.sh_degree,
        dc: ply.sh_dc,
        rest: ply.sh_rest,
    }))
}
