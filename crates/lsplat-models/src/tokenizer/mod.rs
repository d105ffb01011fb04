//! CLIP's tokenizer: byte-level BPE over open_clip's `bpe_simple_vocab_16e6.txt.gz`,
//! equal to open_clip's `SimpleTokenizer` with its default `lower` clean-up and
//! `tokenize()` (77 tokens: `<start_of_text>`, the text's tokens, `<end_of_text>`,
//! zero padding; longer texts are cut to 77 with `<end_of_text>` last).

pub mod clean;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use regex::Regex;

use crate::ModelError;

/// CLIP's context length.
pub const CONTEXT: usize = 77;
/// Merge rules open_clip reads from the vocabulary file (49152 − 256 − 2).
pub const MERGES: usize = 48_894;
/// Tokens: 256 bytes, 256 word-final bytes, the merges, two special tokens.
pub const VOCAB_SIZE: usize = 512 + MERGES + 2;

/// A tokenized text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tokens {
    /// `[CONTEXT]` token ids, zero-padded.
    pub ids: Vec<i64>,
    /// Tokens the text had before cutting (start and end included).
    pub full_len: usize,
}

impl Tokens {
    /// Whether the text was cut to fit the context.
    pub fn truncated(&self) -> bool {
        self.full_len > CONTEXT
    }
}

/// CLIP's byte-level BPE tokenizer.
#[derive(Debug)]
pub struct Tokenizer {
    path: PathBuf,
    /// Token string → id (later entries win, as in a Python dict).
    encoder: HashMap<String, u32>,
    /// (left id, right id) → (rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// Id of byte b's character, and of the same followed by `</w>`.
    byte_id: [u32; 256],
    byte_end_id: [u32; 256],
    pattern: Regex,
    sot: u32,
    eot: u32,
}

/// GPT-2/CLIP's reversible map from bytes to printable characters: the printable
/// Latin-1 bytes stand for themselves, the others take U+0100 onwards in byte order.
fn bytes_to_unicode() -> [char; 256] {
    let printable = |b: u32| {
        (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b)
    };
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..256u32 {
        out[b as usize] = if printable(b) {
            char::from_u32(b).expect("latin-1")
        } else {
            n += 1;
            char::from_u32(255 + n).expect("bmp")
        };
    }
    out
}

impl Tokenizer {
    /// Reads a CLIP vocabulary (`bpe_simple_vocab_16e6.txt.gz`). A file that is not
    /// gzip, not UTF-8, or does not hold CLIP's 48 894 merge rules over its byte
    /// alphabet is an error naming the file.
    pub fn from_file(path: &Path) -> Result<Tokenizer, ModelError> {
        let bad = |p: String| ModelError::vocab(path, p);
        if !path.is_file() {
            return Err(bad("missing (no such file): CLIP's vocabulary `bpe_simple_vocab_16e6.txt.gz` is needed (it ships inside the open_clip_torch wheel)".into()));
        }
        let raw = std::fs::read(path).map_err(|e| ModelError::io(path, e))?;
        let mut text = String::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .map_err(|e| {
                bad(format!(
                    "not CLIP's vocabulary (a gzip file of BPE merge rules, `bpe_simple_vocab_16e6.txt.gz`): {e}"
                ))
            })?;
        Tokenizer::from_merges_text(path, &text)
    }

    fn from_merges_text(path: &Path, text: &str) -> Result<Tokenizer, ModelError> {
        let bad = |p: String| ModelError::vocab(path, format!("not CLIP's vocabulary: {p}"));
        let lines: Vec<&str> = text.split('\n').collect();
        if lines.len() < MERGES + 1 {
            return Err(bad(format!(
                "{} merge rules, CLIP's has {MERGES}",
                lines.len().saturating_sub(1)
            )));
        }
        let byte_char = bytes_to_unicode();
        // open_clip's vocabulary starts with the byte characters in the order of its
        // byte list: the printable bytes, then the others (each with and without `</w>`).
        let printable = |b: usize| byte_char[b] as usize == b;
        let order: Vec<usize> = (0..256)
            .filter(|&b| printable(b))
            .chain((0..256).filter(|&b| !printable(b)))
            .collect();
        let mut vocab: Vec<String> = order.iter().map(|&b| byte_char[b].to_string()).collect();
        vocab.extend(order.iter().map(|&b| format!("{}</w>", byte_char[b])));
        let mut encoder: HashMap<String, u32> = HashMap::with_capacity(VOCAB_SIZE);
        for (i, t) in vocab.iter().enumerate() {
            encoder.insert(t.clone(), i as u32);
        }
        let mut pairs: Vec<(String, String)> = Vec::with_capacity(MERGES);
        for (k, line) in lines[1..=MERGES].iter().enumerate() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            let [a, b] = parts[..] else {
                return Err(bad(format!(
                    "line {} is `{}`, not a merge rule of two tokens",
                    k + 2,
                    line.chars().take(40).collect::<String>()
                )));
            };
            if !encoder.contains_key(a) || !encoder.contains_key(b) {
                return Err(bad(format!(
                    "line {}: `{a} {b}` merges tokens that no earlier rule made",
                    k + 2
                )));
            }
            let merged = format!("{a}{b}");
            encoder.insert(merged.clone(), (vocab.len()) as u32);
            vocab.push(merged);
            pairs.push((a.to_string(), b.to_string()));
        }
        for special in ["<start_of_text>", "<end_of_text>"] {
            encoder.insert(special.to_string(), vocab.len() as u32);
            vocab.push(special.to_string());
        }
        let mut merges = HashMap::with_capacity(MERGES);
        for (rank, (a, b)) in pairs.iter().enumerate() {
            let key = (encoder[a], encoder[b]);
            let merged = encoder[&format!("{a}{b}")];
            // A repeated rule keeps its last rank, as open_clip's dict does.
            merges.insert(key, (rank as u32, merged));
        }
        let mut byte_id = [0u32; 256];
        let mut byte_end_id = [0u32; 256];
        for b in 0..256 {
            byte_id[b] = encoder[&byte_char[b].to_string()];
            byte_end_id[b] = encoder[&format!("{}</w>", byte_char[b])];
        }
        let pattern = Regex::new(
            r"(?i)<start_of_text>|<end_of_text>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+",
        )
        .expect("regex");
        Ok(Tokenizer {
            path: path.to_path_buf(),
            sot: encoder["<start_of_text>"],
            eot: encoder["<end_of_text>"],
            encoder,
            merges,
            byte_id,
            byte_end_id,
            pattern,
        })
    }

    /// The vocabulary file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of tokens (49 408 for CLIP).
    pub fn vocab_size(&self) -> usize {
        self.encoder.values().max().map_or(0, |m| *m as usize + 1)
    }

    /// `<start_of_text>`'s id.
    pub fn sot(&self) -> u32 {
        self.sot
    }

    /// `<end_of_text>`'s id.
    pub fn eot(&self) -> u32 {
        self.eot
    }

    /// The BPE ids of one pre-token: its UTF-8 bytes (as their printable stand-ins), the
    /// last one word-final, merged by rank.
    fn bpe(&self, token: &str, out: &mut Vec<u32>) {
        if token == "<start_of_text>" || token == "<end_of_text>" {
            out.push(self.encoder[token]);
            return;
        }
        let bytes = token.as_bytes();
        let n = bytes.len();
        let mut word: Vec<u32> = bytes
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if i + 1 == n {
                    self.byte_end_id[b as usize]
                } else {
                    self.byte_id[b as usize]
                }
            })
            .collect();
        while word.len() > 1 {
            let best = word
                .windows(2)
                .filter_map(|w| {
                    self.merges
                        .get(&(w[0], w[1]))
                        .map(|&(r, _)| (r, w[0], w[1]))
                })
                .min();
            let Some((_, first, second)) = best else {
                break;
            };
            let merged = self.merges[&(first, second)].1;
            let mut next = Vec::with_capacity(word.len());
            let mut i = 0;
            while i < word.len() {
                if word[i] == first && i + 1 < word.len() && word[i + 1] == second {
                    next.push(merged);
                    i += 2;
                } else {
                    next.push(word[i]);
                    i += 1;
                }
            }
            word = next;
        }
        out.extend(word);
    }

    /// open_clip's `SimpleTokenizer.encode`: the ids of `text` after the clean-up,
    /// without the start and end tokens.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let cleaned = clean::clean_lower(text);
        let mut ids = Vec::new();
        for m in self.pattern.find_iter(&cleaned) {
            self.bpe(m.as_str(), &mut ids);
        }
        ids
    }

    /// open_clip's `tokenize` of one text: `[CONTEXT]` ids. An empty query (nothing
    /// left after the clean-up) is an error.
    pub fn tokenize(&self, text: &str) -> Result<Tokens, ModelError> {
        let body = self.encode(text);
        if body.is_empty() {
            return Err(ModelError::Query(format!(
                "the query {text:?} is empty after CLIP's clean-up (whitespace, control characters)"
            )));
        }
        Ok(self.frame(&body))
    }

    /// `[SOT] + body + [EOT]`, cut to the context with EOT last, zero-padded.
    pub fn frame(&self, body: &[u32]) -> Tokens {
        let mut all = Vec::with_capacity(body.len() + 2);
        all.push(self.sot as i64);
        all.extend(body.iter().map(|&t| t as i64));
        all.push(self.eot as i64);
        let full_len = all.len();
        if all.len() > CONTEXT {
            all.truncate(CONTEXT);
            all[CONTEXT - 1] = self.eot as i64;
        }
        all.resize(CONTEXT, 0);
        Tokens { ids: all, full_len }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_vocab(extra: &[&str]) -> String {
        // A header, CLIP's count of rules: the first few real-looking ones, then
        // filler rules that merge single bytes into new tokens.
        let mut lines = vec!["\"bpe_simple_vocab_16e6.txt#version: 0.2".to_string()];
        lines.extend(extra.iter().map(|s| s.to_string()));
        let chars = bytes_to_unicode();
        let mut k = 0usize;
        while lines.len() < MERGES + 1 {
            // Bytes below 0x40 (no letters), so no filler rule touches the test's.
            let a = chars[k % 64];
            let b = chars[(k / 64) % 64];
            lines.push(format!("{a} {b}"));
            k += 1;
        }
        lines.join("\n")
    }

    #[test]
    fn merges_apply_lowest_rank_first_and_frame_the_text() {
        let text = tiny_vocab(&["a b", "ab c</w>", "b c</w>"]);
        let t = Tokenizer::from_merges_text(Path::new("v"), &text).unwrap();
        let ids = t.encode("ABC");
        assert_eq!(ids, vec![t.encoder["abc</w>"]]);
        let tok = t.tokenize("  abc\u{0}  ").unwrap();
        assert_eq!(tok.ids[0], t.sot as i64);
        assert_eq!(tok.ids[2], t.eot as i64);
        assert!(tok.ids[3..].iter().all(|&x| x == 0));
        assert!(t.tokenize(" \u{7}\t ").is_err());
        let long = t.tokenize(&"x ".repeat(100)).unwrap();
        assert!(long.truncated() && long.full_len == 102);
        assert_eq!(long.ids[CONTEXT - 1], t.eot as i64);
    }

    #[test]
    fn a_vocabulary_that_is_not_clips_is_refused() {
        let p = Path::new("words.txt.gz");
        let e = Tokenizer::from_merges_text(p, "#version\na b\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("words.txt.gz") && e.contains("merge rules"),
            "{e}"
        );
        let mut text = tiny_vocab(&[]);
        text = text.replacen("\n", "\nqq zz\n", 1);
        let e = Tokenizer::from_merges_text(p, &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("no earlier rule"), "{e}");
    }
}
