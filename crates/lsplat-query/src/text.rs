//! Where text embeddings come from: the seam between the query code and a text
//! encoder. An embeddings file ([`TextEmbeddings`]) knows a fixed list of phrases; a
//! CLIP text encoder embeds any phrase. Both give unit rows of one width.

use lsplat_data::embeddings::TextEmbeddings;

use crate::{CANONICAL, QueryError};

/// Phrases → unit embeddings.
pub trait TextEncoder: Send + Sync {
    /// Width D of the embeddings.
    fn dim(&self) -> usize;
    /// Unit embeddings `[phrases, D]`; a phrase the encoder cannot embed is an error
    /// naming it.
    fn embed(&self, phrases: &[&str]) -> Result<Vec<f32>, QueryError>;
    /// What the embeddings come from (a file, a model folder), for messages.
    fn describe(&self) -> String;
    /// The phrases it knows, when that is a fixed list (an embeddings file); `None`
    /// for an encoder of free text.
    fn phrases(&self) -> Option<Vec<String>> {
        None
    }
}

impl TextEncoder for TextEmbeddings {
    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, phrases: &[&str]) -> Result<Vec<f32>, QueryError> {
        let missing: Vec<&str> = phrases
            .iter()
            .copied()
            .filter(|p| self.get(p).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(QueryError::text(
                &self.path,
                format!(
                    "no embedding for {}: this file holds only its own phrases ({}{}); add them to it, or embed free text with a CLIP model",
                    missing
                        .iter()
                        .map(|p| format!("{p:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.names
                        .iter()
                        .filter(|n| !CANONICAL.contains(&n.as_str()))
                        .take(12)
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if self.names.len() > 16 { ", …" } else { "" }
                ),
            ));
        }
        Ok(self.stack(phrases)?)
    }

    fn describe(&self) -> String {
        format!(
            "{} ({} phrases, {}-D)",
            self.path.display(),
            self.names.len(),
            self.dim
        )
    }

    fn phrases(&self) -> Option<Vec<String>> {
        Some(self.names.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_embeddings_file_embeds_its_phrases_and_names_the_missing_ones() {
        let t = TextEmbeddings {
            path: "q.parquet".into(),
            names: vec!["object".into(), "red mug".into()],
            dim: 2,
            values: vec![1.0, 0.0, 0.0, 1.0],
        };
        assert_eq!(
            t.embed(&["red mug", "object"]).unwrap(),
            vec![0.0, 1.0, 1.0, 0.0]
        );
        let e = t
            .embed(&["red mug", "blue cup", "sofa"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("q.parquet")
                && e.contains("\"blue cup\", \"sofa\"")
                && e.contains("\"red mug\""),
            "{e}"
        );
        assert_eq!(t.phrases().unwrap().len(), 2);
    }
}
