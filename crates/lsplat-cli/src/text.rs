//! Where the embeddings of category names come from: the one place the evaluation
//! commands ask for text embeddings. An embeddings file (`--text`, any layout
//! `lsplat_data::embeddings` reads), or the CLIP text encoder (`--clip DIR` or
//! `models.clip`), which encodes the names it is asked for and caches them in the run.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use lsplat_core::Config;
use lsplat_data::embeddings::TextEmbeddings;
use lsplat_query::CANONICAL;

use crate::clip::ClipArgs;

/// A source of unit text embeddings.
pub enum TextSource {
    /// A file with a row per phrase.
    File(PathBuf),
    /// A CLIP model folder (and vocabulary) on the configuration's ONNX Runtime and
    /// device; encoded phrases are cached in `cache_run`.
    Clip {
        dir: PathBuf,
        vocab: Option<PathBuf>,
        config: Box<Config>,
        cache_run: PathBuf,
    },
}

impl TextSource {
    /// The source a command's options name: `--text FILE`, else the CLIP model of
    /// `--clip` or of `cfg` (`models.clip`); neither is an error saying how to give one.
    pub fn from_args(
        text: Option<&Path>,
        clip: &ClipArgs,
        cfg: &Config,
        run_dir: &Path,
    ) -> Result<Self> {
        match (text, clip.model(cfg)) {
            (Some(t), _) => Ok(TextSource::File(t.to_path_buf())),
            (None, Some((dir, vocab))) => Ok(TextSource::Clip {
                dir,
                vocab,
                config: Box::new(cfg.clone()),
                cache_run: run_dir.to_path_buf(),
            }),
            (None, None) => bail!(
                "no text embeddings: give --text FILE (docs/formats.md), or a CLIP model with --clip DIR (or `models.clip` in {}'s config.toml) to encode the category names",
                run_dir.display()
            ),
        }
    }

    /// The embeddings of `names` and of the canonical phrases (LangSplat's negatives),
    /// in one set; a name without an embedding is an error naming the source and
    /// every missing name.
    pub fn embed(&self, names: &[String]) -> Result<TextEmbeddings> {
        match self {
            TextSource::File(path) => {
                let text = lsplat_data::embeddings::read_embeddings(path)?;
                let mut wanted: Vec<&str> = names.iter().map(String::as_str).collect();
                wanted.extend(CANONICAL);
                text.stack(&wanted)?;
                Ok(text)
            }
            TextSource::Clip {
                dir,
                vocab,
                config,
                cache_run,
            } => {
                if names.is_empty() {
                    bail!("no category names to encode");
                }
                crate::clip::encode_phrases(dir, vocab.as_deref(), config, names, Some(cache_run))
            }
        }
    }
}
