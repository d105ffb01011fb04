//! Where the embeddings of category names come from: the one place the evaluation
//! commands ask for text embeddings. Today an embeddings file (`--text`, any layout
//! `lsplat_data::embeddings` reads); the CLIP text encoder plugs in here as another
//! [`TextSource`] that encodes the names it is asked for.

use std::path::PathBuf;

use anyhow::Result;
use lsplat_data::embeddings::TextEmbeddings;
use lsplat_query::CANONICAL;

/// A source of unit text embeddings.
pub enum TextSource {
    /// A file with a row per phrase.
    File(PathBuf),
}

impl TextSource {
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
        }
    }
}
