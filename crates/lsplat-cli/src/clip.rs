//! CLIP in the command-line tool: `embed`, the phrases `query` and `eval lerf` encode
//! themselves, the embedding cache of a run, and `info`'s ONNX Runtime line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use lsplat_core::Config;
use lsplat_data::embeddings::{TextEmbeddings, read_embeddings, write_embeddings};
use lsplat_models::clip::{ClipModel, ClipText, TEXT_FILE};
use lsplat_models::{SessionOptions, runtime};
use lsplat_query::{CANONICAL, QueryError, TextEncoder};

/// Where a command finds its CLIP model.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClipArgs {
    /// CLIP model folder (`text.onnx`, `image.onnx`, `bpe_simple_vocab_16e6.txt.gz`;
    /// docs/formats.md) to encode the phrases with (default: `models.clip` of the
    /// configuration).
    #[arg(long, value_name = "DIR")]
    pub clip: Option<PathBuf>,
    /// CLIP's vocabulary when the folder has none (default: `models.clip_vocab`).
    #[arg(long, value_name = "FILE")]
    pub vocab: Option<PathBuf>,
}

impl ClipArgs {
    /// The model folder and vocabulary: the options, else the configuration's.
    pub fn model(&self, cfg: &Config) -> Option<(PathBuf, Option<PathBuf>)> {
        let dir = self.clip.clone().or_else(|| cfg.models.clip.clone())?;
        let vocab = self.vocab.clone().or_else(|| cfg.models.clip_vocab.clone());
        Some((dir, vocab))
    }
}

/// `embed` options.
#[derive(clap::Args, Debug)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub clip: ClipArgs,
    /// A phrase to encode (repeat the option); LangSplat's canonical phrases
    /// ("object", "things", "stuff", "texture") are always added.
    #[arg(long = "text", value_name = "PHRASE", required = true)]
    pub texts: Vec<String>,
    /// Output: the embeddings Parquet file `query --text` and `eval lerf --text` read.
    #[arg(long)]
    pub out: PathBuf,
    /// Configuration values, e.g. `--set onnx.runtime=/path/libonnxruntime.so`,
    /// `--set device.backend=cuda`, `--set device.threads=4`, `--set models.batch=64`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Runs `embed`.
pub fn embed(a: EmbedArgs) -> Result<()> {
    if a.out.extension().is_none_or(|e| e != "parquet") {
        bail!("{}: the output must be a .parquet file", a.out.display());
    }
    let mut cfg = Config::default();
    for s in &a.set {
        cfg.set(s).with_context(|| format!("--set {s}"))?;
    }
    cfg.resolve_paths(Path::new("."));
    let Some((dir, vocab)) = a.clip.model(&cfg) else {
        bail!("give the CLIP model folder with --clip DIR (or --set models.clip=DIR)");
    };
    let text = encode_phrases(&dir, vocab.as_deref(), &cfg, &a.texts, None)?;
    write_embeddings(&a.out, &text.names, text.dim, &text.values)?;
    println!(
        "wrote {} ({} phrases, {}-D)",
        a.out.display(),
        text.names.len(),
        text.dim
    );
    Ok(())
}

/// The canonical phrases followed by `phrases`, each once, in order.
fn with_canonical(phrases: &[String]) -> Vec<String> {
    let mut names: Vec<String> = CANONICAL.iter().map(|s| s.to_string()).collect();
    for p in phrases {
        if !names.contains(p) {
            names.push(p.clone());
        }
    }
    names
}

/// Unit text embeddings of the canonical phrases and `phrases`, encoded with the CLIP
/// model in `dir` on the configuration's ONNX Runtime and device. With `run_dir`, a
/// phrase's embedding is looked up in (and added to) the run's cache
/// `clip_text/<model identity>.parquet`, so a phrase is encoded once per model.
pub fn encode_phrases(
    dir: &Path,
    vocab: Option<&Path>,
    cfg: &Config,
    phrases: &[String],
    run_dir: Option<&Path>,
) -> Result<TextEmbeddings> {
    let names = with_canonical(phrases);
    let clip = ClipModel::at(dir, vocab)?;
    let cache = match run_dir {
        Some(r) => Some(
            r.join("clip_text")
                .join(format!("{}.parquet", clip.text_identity()?)),
        ),
        None => None,
    };
    let cached = match cache.as_deref().filter(|p| p.is_file()) {
        Some(p) => match read_embeddings(p) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("ignoring the embedding cache: {e}");
                None
            }
        },
        None => None,
    };
    let todo: Vec<&str> = names
        .iter()
        .filter(|n| cached.as_ref().is_none_or(|c| c.get(n).is_none()))
        .map(String::as_str)
        .collect();
    let mut all_names: Vec<String> = cached.as_ref().map_or(Vec::new(), |c| c.names.clone());
    let mut all_values: Vec<f32> = cached.as_ref().map_or(Vec::new(), |c| c.values.clone());
    let mut dim = cached.as_ref().map_or(0, |c| c.dim);
    if !todo.is_empty() {
        let mut enc = text_encoder(&clip, cfg)?;
        let mut bar = crate::progress::Progress::new(
            "clip",
            todo.len() as u64,
            "phrases",
            cfg.log.progress,
            crate::progress::Cadence::of(&cfg.log),
        );
        let t0 = std::time::Instant::now();
        let (d, values) = enc.encode(&todo, &mut |done, total| {
            bar.set_length(total as u64);
            if done as u64 > bar.position() {
                bar.inc(done as u64 - bar.position());
            }
        })?;
        bar.finish();
        let s = t0.elapsed().as_secs_f64();
        println!(
            "CLIP: encoded {} phrases ({} cached) with {} on {} in {s:.2} s ({:.1} phrases/s)",
            todo.len(),
            names.len() - todo.len(),
            enc.model().path().display(),
            enc.model().provider(),
            todo.len() as f64 / s.max(1e-9)
        );
        if dim != 0 && d != dim {
            tracing::warn!(
                "the embedding cache holds {dim}-D rows, the model gives {d}-D: replacing it"
            );
            all_names.clear();
            all_values.clear();
        }
        dim = d;
        all_names.extend(todo.iter().map(|s| s.to_string()));
        all_values.extend(values);
        if let Some(p) = &cache {
            let written = p
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .map_err(anyhow::Error::from)
                .and_then(|()| Ok(write_embeddings(p, &all_names, dim, &all_values)?));
            if let Err(e) = written {
                tracing::warn!("the embedding cache {} was not written: {e:#}", p.display());
            }
        }
    }
    let mut values = Vec::with_capacity(names.len() * dim);
    for n in &names {
        let i = all_names
            .iter()
            .position(|m| m == n)
            .expect("every phrase is cached or encoded");
        values.extend_from_slice(&all_values[i * dim..(i + 1) * dim]);
    }
    Ok(TextEmbeddings {
        path: dir.join(TEXT_FILE),
        names,
        dim,
        values,
    })
}

/// The text embeddings of a command: the `--text` file, or `phrases` encoded with the
/// CLIP model of `clip` (or of the configuration), cached in `run_dir`.
pub fn text_embeddings(
    text: Option<&Path>,
    clip: &ClipArgs,
    cfg: &Config,
    phrases: &[String],
    run_dir: &Path,
) -> Result<TextEmbeddings> {
    match (text, clip.model(cfg)) {
        (Some(t), _) => Ok(read_embeddings(t)?),
        (None, Some((dir, vocab))) => {
            if phrases.is_empty() {
                bail!("no query phrases to encode: give them with --query");
            }
            encode_phrases(&dir, vocab.as_deref(), cfg, phrases, Some(run_dir))
        }
        (None, None) => bail!(
            "no text embeddings: give --text FILE (docs/formats.md), or a CLIP model with --clip DIR (or `models.clip` in {}'s config.toml) to encode the phrases",
            run_dir.display()
        ),
    }
}

/// The text encoder of `clip` on the configuration's ONNX Runtime, device and batch.
fn text_encoder(clip: &ClipModel, cfg: &Config) -> Result<ClipText> {
    let rt = runtime::load(cfg.onnx.runtime.as_deref())?;
    let mut enc = ClipText::load(clip, rt, &SessionOptions::from_device(&cfg.device))?;
    enc.batch = cfg.models.batch as usize;
    Ok(enc)
}

/// CLIP's text encoder as a text source of free text (the viewer's typed queries):
/// loaded once, each phrase encoded on first use and kept for the server's life.
pub struct ClipEncoder {
    dir: PathBuf,
    dim: usize,
    state: std::sync::Mutex<(ClipText, HashMap<String, Vec<f32>>)>,
}

impl ClipEncoder {
    /// Loads the text encoder of the CLIP folder `dir` on the configuration's ONNX
    /// Runtime and device and encodes the canonical phrases (which fixes the width).
    pub fn load(dir: &Path, vocab: Option<&Path>, cfg: &Config) -> Result<ClipEncoder> {
        let mut enc = text_encoder(&ClipModel::at(dir, vocab)?, cfg)?;
        let (dim, values) = enc.encode(&CANONICAL, &mut |_, _| {})?;
        let known = CANONICAL
            .iter()
            .zip(values.chunks_exact(dim))
            .map(|(p, v)| (p.to_string(), v.to_vec()))
            .collect();
        Ok(ClipEncoder {
            dir: dir.to_path_buf(),
            dim,
            state: std::sync::Mutex::new((enc, known)),
        })
    }
}

impl TextEncoder for ClipEncoder {
    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, phrases: &[&str]) -> Result<Vec<f32>, QueryError> {
        let mut state = self.state.lock().map_err(|_| {
            QueryError::text(&self.dir, "the CLIP encoder stopped on an earlier error")
        })?;
        let (enc, known) = &mut *state;
        let mut todo: Vec<&str> = Vec::new();
        for p in phrases {
            if !known.contains_key(*p) && !todo.contains(p) {
                todo.push(p);
            }
        }
        if !todo.is_empty() {
            let (dim, values) = enc
                .encode(&todo, &mut |_, _| {})
                .map_err(|e| QueryError::text(&self.dir, e.to_string()))?;
            if dim != self.dim {
                return Err(QueryError::text(
                    &self.dir,
                    format!(
                        "the text encoder gave {dim}-D rows after {}-D ones",
                        self.dim
                    ),
                ));
            }
            for (p, v) in todo.iter().zip(values.chunks_exact(dim)) {
                known.insert(p.to_string(), v.to_vec());
            }
        }
        Ok(phrases
            .iter()
            .flat_map(|p| known[*p].iter().copied())
            .collect())
    }

    fn describe(&self) -> String {
        format!("CLIP {} ({}-D, free text)", self.dir.display(), self.dim)
    }
}

/// `info`'s ONNX Runtime line: the library found, its version and execution
/// providers, or why none.
pub fn describe_runtime() -> String {
    match runtime::load(None) {
        Ok(rt) => format!(
            "ONNX Runtime {} at {} (execution providers: {})",
            rt.version,
            rt.path.display(),
            rt.providers.join(", ")
        ),
        Err(e) => format!("ONNX Runtime: {e}"),
    }
}
