//! LangSplat's folders as they are: `-s SOURCE -m MODEL --feature_level L`.
//!
//! - `SOURCE` is a LangSplat / 3DGS source folder: `images/`, the cameras as a COLMAP
//!   model in `sparse/0` (or a `transforms_train.json` / `transforms.json`), and the
//!   language features LangSplat's preprocessing writes, `language_features/` (512-D)
//!   or `language_features_dim3/` (the autoencoder's codes), `<image>_f.npy` and
//!   `<image>_s.npy` per image.
//! - `MODEL` is a 3DGS model folder: `point_cloud/iteration_<n>/point_cloud.ply` (the
//!   highest `n` is taken); its `cfg_args` names the source when `-s` is not given.
//!
//! The language features are imported into an engine dataset on first use and cached
//! inside the model folder, `MODEL/lsplat_cache/<features folder>-<key>/`, where the
//! key hashes every feature file's name, size and modification time: a later run on
//! the same files reuses it, a changed, added or removed file gives a new key and a
//! new import (the stale cache of that folder is removed). Runs go to `MODEL_<L>`, as
//! LangSplat's own `train.py` names them, with the resolved scene in `scene.toml`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use lsplat_core::Config;

/// The cache folder inside a model folder.
pub const CACHE_DIR: &str = "lsplat_cache";
/// What the key of a cached import covers besides the files (bump when the import
/// changes what it writes).
const IMPORT_VERSION: &str = "lsplat-import-1";

/// LangSplat's folder options (`train`, `solve`, `bench`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct FolderArgs {
    /// LangSplat / 3DGS source folder: `images/`, `sparse/0` (COLMAP) or
    /// `transforms_train.json`, and `language_features/` (`<image>_f.npy`,
    /// `<image>_s.npy`). Default with -m: the `source_path` in MODEL/cfg_args.
    #[arg(
        short = 's',
        long = "source_path",
        alias = "source-path",
        value_name = "SOURCE",
        conflicts_with = "scene"
    )]
    pub source: Option<PathBuf>,
    /// 3DGS model folder (`point_cloud/iteration_*/point_cloud.ply`; the highest
    /// iteration is used). The dataset import is cached inside it; runs go to
    /// `MODEL_<level>` unless --out is given.
    #[arg(
        short = 'm',
        long = "model_path",
        alias = "model-path",
        value_name = "MODEL",
        conflicts_with = "scene"
    )]
    pub model: Option<PathBuf>,
    /// LangSplat's feature level: 1 (subparts), 2 (parts) or 3 (wholes); sets
    /// `scene.level`.
    #[arg(long = "feature_level", alias = "feature-level", value_name = "LEVEL",
          value_parser = clap::value_parser!(u8).range(1..=3))]
    pub feature_level: Option<u8>,
    /// The language-feature folder inside SOURCE (default: `language_features_dim3`
    /// when it exists and the model is LangSplat V1, else `language_features`).
    #[arg(
        long = "language_features_name",
        alias = "language-features-name",
        value_name = "NAME"
    )]
    pub language_features: Option<String>,
}

impl FolderArgs {
    /// Whether any folder option was given.
    pub fn given(&self) -> bool {
        self.source.is_some()
            || self.model.is_some()
            || self.feature_level.is_some()
            || self.language_features.is_some()
    }
}

/// What was found in the folders.
#[derive(Debug)]
pub struct Found {
    /// The source folder.
    pub source: PathBuf,
    /// The model folder.
    pub model: PathBuf,
    /// The splats (the highest iteration's PLY).
    pub splats: PathBuf,
    /// The cameras (a COLMAP folder or a JSON file).
    pub cameras: PathBuf,
    /// The language-feature folder.
    pub features: PathBuf,
    /// The engine dataset (cached import).
    pub dataset: PathBuf,
    /// Whether this run imported it (else it was reused).
    pub imported: bool,
}

/// The model folder's splats: `point_cloud/iteration_<n>/point_cloud.ply` of the
/// highest `n`. A folder holding only PyTorch checkpoints (`chkpnt*.pth`) is refused
/// with what to do.
pub fn model_splats(model: &Path) -> Result<PathBuf> {
    if !model.is_dir() {
        bail!("-m {}: no such model folder", model.display());
    }
    let pc = model.join("point_cloud");
    let mut best: Option<(u64, PathBuf)> = None;
    if let Ok(entries) = std::fs::read_dir(&pc) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(n) = name
                .strip_prefix("iteration_")
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            let ply = e.path().join("point_cloud.ply");
            if ply.is_file() && best.as_ref().is_none_or(|(b, _)| n > *b) {
                best = Some((n, ply));
            }
        }
    }
    if let Some((_, ply)) = best {
        return Ok(ply);
    }
    let checkpoints: Vec<String> = std::fs::read_dir(model)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("chkpnt") && n.ends_with(".pth"))
                .collect()
        })
        .unwrap_or_default();
    if !checkpoints.is_empty() {
        bail!(
            "-m {}: holds PyTorch checkpoints ({}) but no point_cloud/iteration_*/point_cloud.ply; the engine reads the 3DGS PLY, not .pth files: export it with 3DGS (train.py saves it at its --save_iterations, or render.py/`gaussians.save_ply`) and run again",
            model.display(),
            checkpoints.join(", ")
        );
    }
    bail!(
        "-m {}: no point_cloud/iteration_*/point_cloud.ply (a 3DGS model folder holds the trained splats there)",
        model.display()
    )
}

/// `source_path='…'` of a 3DGS `cfg_args` file (a Python `Namespace(...)` repr).
pub fn cfg_args_source(text: &str) -> Option<String> {
    let at = text.find("source_path=")? + "source_path=".len();
    let rest = &text[at..];
    let quote = rest.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let body = &rest[1..];
    let mut out = String::new();
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next()?),
            c if c == quote => return Some(out),
            c => out.push(c),
        }
    }
    None
}

/// The source folder: `-s`, or the `source_path` the model's `cfg_args` names.
fn source_folder(args: &FolderArgs, model: &Path) -> Result<PathBuf> {
    if let Some(s) = &args.source {
        if !s.is_dir() {
            bail!("-s {}: no such source folder", s.display());
        }
        return Ok(s.clone());
    }
    let cfg_args = model.join("cfg_args");
    let named = std::fs::read_to_string(&cfg_args)
        .ok()
        .and_then(|t| cfg_args_source(&t));
    match named {
        Some(p) if Path::new(&p).is_dir() => Ok(PathBuf::from(p)),
        Some(p) => bail!(
            "give -s SOURCE: {} names source_path {p:?}, which is not a folder here",
            cfg_args.display()
        ),
        None => bail!(
            "give -s SOURCE (the folder with sparse/0 and language_features/): {} names no source_path",
            cfg_args.display()
        ),
    }
}

/// The cameras of a source folder (or the model's `cameras.json`).
fn cameras(source: &Path, model: &Path) -> Result<PathBuf> {
    let candidates = [
        source.join("sparse/0"),
        source.join("transforms_train.json"),
        source.join("transforms.json"),
        model.join("cameras.json"),
    ];
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .with_context(|| {
            format!(
                "-s {}: no cameras (looked for sparse/0, transforms_train.json and transforms.json there, and cameras.json in -m {})",
                source.display(),
                model.display()
            )
        })
}

/// The language-feature folder: the one named, else `language_features_dim3` for the
/// built-in model when present, else `language_features`.
fn feature_folder(args: &FolderArgs, source: &Path, cfg: &Config) -> Result<PathBuf> {
    let names: Vec<&str> = match &args.language_features {
        Some(n) => vec![n.as_str()],
        None if cfg.train.model == crate::plugins::BUILT_IN_MODEL => {
            vec!["language_features_dim3", "language_features"]
        }
        None => vec!["language_features"],
    };
    for n in &names {
        let dir = source.join(n);
        if dir.is_dir() {
            if feature_files(&dir)?.is_empty() {
                bail!(
                    "{}: no `<image>_f.npy` / `<image>_s.npy` files",
                    dir.display()
                );
            }
            return Ok(dir);
        }
    }
    bail!(
        "-s {}: no language-feature folder ({}); LangSplat's preprocess.py writes language_features/",
        source.display(),
        names.join(" or ")
    )
}

/// The `_f.npy` / `_s.npy` files of a feature folder, sorted by name.
fn feature_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("_f.npy") || n.ends_with("_s.npy"))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// FNV-1a (64-bit): a stable hash for cache keys.
fn fnv(h: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *h ^= u64::from(*b);
        *h = h.wrapping_mul(0x0100_0000_01b3);
    }
}

/// The cache key of a feature folder: its files' names, sizes and modification times.
pub fn cache_key(dir: &Path) -> Result<String> {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    fnv(&mut h, IMPORT_VERSION.as_bytes());
    for f in feature_files(dir)? {
        let m = std::fs::metadata(&f).with_context(|| format!("reading {}", f.display()))?;
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        fnv(
            &mut h,
            f.file_name().map_or(&[][..], |n| n.as_encoded_bytes()),
        );
        fnv(&mut h, &m.len().to_le_bytes());
        fnv(&mut h, &mtime.to_le_bytes());
    }
    Ok(format!("{h:016x}"))
}

/// The engine dataset of `features`, cached in `model/lsplat_cache`: reused when its
/// key matches, imported (into a temporary folder, renamed when complete) otherwise.
fn cached_dataset(features: &Path, model: &Path) -> Result<(PathBuf, bool)> {
    let name = features
        .file_name()
        .map_or_else(|| "features".into(), |n| n.to_string_lossy().into_owned());
    let cache = model.join(CACHE_DIR);
    let dir = cache.join(format!("{name}-{}", cache_key(features)?));
    let complete = |d: &Path| {
        d.join(lsplat_data::dataset::FEATURES_FILE).is_file()
            && d.join(lsplat_data::dataset::MASKS_FILE).is_file()
    };
    if complete(&dir) {
        return Ok((dir, false));
    }
    std::fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let tmp = cache.join(format!(
        ".import-{}-{}",
        std::process::id(),
        dir.file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    eprintln!(
        "importing {} into {} (first use; later runs reuse it)",
        features.display(),
        dir.display()
    );
    let mut bar = crate::progress::Progress::new("import", 0, "images", true, Default::default());
    let mut seen = 0u64;
    let r = lsplat_data::dataset::import_langsplat_with_progress(features, &tmp, &mut |d, t| {
        if seen == 0 {
            bar.set_length(t as u64);
        }
        bar.inc(d as u64 - seen);
        seen = d as u64;
    });
    if let Err(e) = r {
        bar.abandon();
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e.into());
    }
    bar.finish();
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => {}
        // Another process finished the same import first: keep its copy.
        Err(_) if complete(&dir) => {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e).with_context(|| format!("moving the import to {}", dir.display()));
        }
    }
    // Imports of this folder's earlier contents are stale.
    let prefix = format!("{name}-");
    if let Ok(entries) = std::fs::read_dir(&cache) {
        for e in entries.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with(&prefix) && e.path() != dir {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    Ok((dir, true))
}

/// Finds the scene in the folders and fills `cfg.scene` (splats, cameras, the cached
/// dataset, and the level from `--feature_level`); imports the features on first use.
pub fn apply(args: &FolderArgs, cfg: &mut Config) -> Result<Found> {
    let Some(model) = &args.model else {
        bail!(
            "-m MODEL (the 3DGS model folder with point_cloud/) is needed with -s and --feature_level"
        );
    };
    for (key, set) in [
        ("splats", cfg.scene.splats.is_some()),
        ("cameras", cfg.scene.cameras.is_some()),
        ("dataset", cfg.scene.dataset.is_some()),
    ] {
        if set {
            bail!("--set scene.{key} conflicts with -s/-m, which find the scene's files");
        }
    }
    if let Some(l) = args.feature_level {
        cfg.scene.level = l;
    }
    let model = std::path::absolute(model)?;
    let splats = model_splats(&model)?;
    let source = std::path::absolute(source_folder(args, &model)?)?;
    let cameras = cameras(&source, &model)?;
    let features = feature_folder(args, &source, cfg)?;
    cfg.scene.splats = Some(splats.clone());
    cfg.scene.cameras = Some(cameras.clone());
    cfg.validate()?;
    let (dataset, imported) = cached_dataset(&features, &model)?;
    cfg.scene.dataset = Some(dataset.clone());
    Ok(Found {
        source,
        model,
        splats,
        cameras,
        features,
        dataset,
        imported,
    })
}

/// LangSplat's run folder for the model folder and level(s): `MODEL_<level>`
/// (`MODEL_<l1>-<l2>-…` for several levels solved together).
pub fn run_dir(model: &Path, levels: &[u8]) -> PathBuf {
    let tag: Vec<String> = levels.iter().map(u8::to_string).collect();
    let name = model
        .file_name()
        .map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
    model.with_file_name(format!("{name}_{}", tag.join("-")))
}

impl Found {
    /// The scene as a scene file (`train --scene` reads it), with where it came from.
    pub fn scene_toml(&self, level: u8) -> String {
        format!(
            "# The scene lsplat-engine found in LangSplat's folders:\n\
             #   -s {}\n#   -m {}\n\
             # (language features {}, imported into the dataset below).\n\
             # Edit it and train with `lsplat-engine train --scene scene.toml`.\n\
             [scene]\nsplats = {:?}\ncameras = {:?}\ndataset = {:?}\nlevel = {level}\n",
            self.source.display(),
            self.model.display(),
            self.features.display(),
            self.splats.display().to_string(),
            self.cameras.display().to_string(),
            self.dataset.display().to_string(),
        )
    }

    /// The printed summary of what was found.
    pub fn describe(&self, level: u8) -> String {
        format!(
            "scene from LangSplat folders:\n  splats   {}\n  cameras  {}\n  features {}\n  dataset  {} ({})\n  level    {level}",
            self.splats.display(),
            self.cameras.display(),
            self.features.display(),
            self.dataset.display(),
            if self.imported {
                "imported now"
            } else {
                "cached, reused"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_args_names_the_source() {
        let t = "Namespace(data_device='cuda', eval=False, images='images', model_path='../out', resolution=-1, sh_degree=3, source_path='D:\\\\noname\\\\data', white_background=False)";
        assert_eq!(cfg_args_source(t).as_deref(), Some("D:\\noname\\data"));
        assert_eq!(
            cfg_args_source("Namespace(source_path=\"/data/figurines\")").as_deref(),
            Some("/data/figurines")
        );
        assert_eq!(cfg_args_source("Namespace(eval=False)"), None);
        assert_eq!(cfg_args_source("Namespace(source_path='unterminated"), None);
    }

    /// The highest iteration by number (500 < 7000 < 30000, unlike by name), and
    /// checkpoints alone are refused with what to do.
    #[test]
    fn the_highest_iteration_is_taken_and_checkpoints_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let m = t.path().join("model");
        for it in [500, 7000, 30000] {
            let d = m.join(format!("point_cloud/iteration_{it}"));
            std::fs::create_dir_all(&d).unwrap();
            if it != 30000 {
                std::fs::write(d.join("point_cloud.ply"), b"ply").unwrap();
            }
        }
        assert_eq!(
            model_splats(&m).unwrap(),
            m.join("point_cloud/iteration_7000/point_cloud.ply")
        );
        let c = t.path().join("ckpt");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("chkpnt30000.pth"), b"torch").unwrap();
        let e = model_splats(&c).unwrap_err().to_string();
        assert!(
            e.contains("chkpnt30000.pth") && e.contains("point_cloud.ply") && e.contains("export"),
            "{e}"
        );
        assert_eq!(
            run_dir(Path::new("/o/figurines"), &[1]),
            Path::new("/o/figurines_1")
        );
        assert_eq!(
            run_dir(Path::new("out/f"), &[1, 2, 3]),
            Path::new("out/f_1-2-3")
        );
    }
}
