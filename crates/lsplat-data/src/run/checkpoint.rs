//! Checkpoints: a safetensors file written and read by our own code.
//!
//! Layout (the safetensors format, so `safetensors.numpy.load_file` or a few lines of
//! numpy read it): an 8-byte little-endian header length, a JSON header (padded with
//! spaces to a multiple of 8 bytes), then the raw little-endian tensors. The header
//! maps each tensor name to `{"dtype": "F32", "shape": [N, C], "data_offsets":
//! [begin, end]}` and `__metadata__` to string values: `format`
//! (`lsplat-checkpoint`), `version`, `step` (steps completed), `sampler_position`
//! (cameras drawn so far), `gaussians`, `channels`, `backend` and `config` (the
//! resolved configuration, TOML), `model` when a plugin model wrote it, `identity`
//! (the run's identity, JSON: [`super::identity::RunIdentity`]) and `xxh3.<tensor>`
//! for every tensor (XXH3-64 of its bytes, 16 hex digits). Tensors: `params` (the raw
//! trained parameters, before V1 normalisation), `adam_m`, `adam_v`, then a plugin
//! model's further 2-D F32 tensors ([`Checkpoint::extra`]) by name.
//!
//! Reading checks everything a resumed run relies on: the byte ranges of the tensors
//! lie inside the file without overlapping, every checksum matches (a file without
//! checksums, from an older version, is read with [`Checkpoint::checksummed`] false),
//! every value is finite and every second moment (`adam_v`, `*_v`) is non-negative.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::DataError;

/// Value of the `format` metadata key.
pub const FORMAT: &str = "lsplat-checkpoint";
/// Version of the checkpoint layout.
pub const VERSION: u32 = 1;
/// Largest header accepted (bytes).
const MAX_HEADER: u64 = 1 << 26;
/// Tensor names, in file order.
const TENSORS: [&str; 3] = ["params", "adam_m", "adam_v"];

/// A further named `[rows, cols]` F32 tensor of a plugin model's checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct Extra {
    /// Its name in the file (not one of the three main tensors').
    pub name: String,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// `rows × cols` values, row-major.
    pub data: Vec<f32>,
}

/// Everything needed to continue a run bit for bit.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    /// Steps completed (the next step to run).
    pub step: u64,
    /// Cameras the sampler has drawn.
    pub sampler_position: u64,
    /// Number of Gaussians N.
    pub gaussians: usize,
    /// Channels C.
    pub channels: usize,
    /// Backend that wrote it (informative).
    pub backend: String,
    /// The resolved configuration (TOML).
    pub config: String,
    /// Raw parameters `[N, C]`.
    pub params: Vec<f32>,
    /// Adam first moment `[N, C]`.
    pub adam_m: Vec<f32>,
    /// Adam second moment `[N, C]`.
    pub adam_v: Vec<f32>,
    /// The `train.model` that wrote it when not the built-in one (metadata `model`).
    pub model: Option<String>,
    /// A plugin model's further tensors, in name order (empty for the built-in model).
    pub extra: Vec<Extra>,
    /// The run's identity (JSON, metadata `identity`), when recorded.
    pub identity: Option<String>,
    /// Whether the file carried checksums (always true for a file this version
    /// writes; false for an older one, which is read unchecked).
    pub checksummed: bool,
}

/// XXH3-64 of `bytes`, as 16 hex digits.
pub fn xxh3_hex(bytes: &[u8]) -> String {
    format!("{:016x}", twox_hash::XxHash3_64::oneshot(bytes))
}

/// The little-endian bytes of `values`.
fn le_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// True for a tensor holding Adam second moments (never negative).
fn is_second_moment(name: &str) -> bool {
    name == "adam_v" || name.ends_with("_v")
}

impl Checkpoint {
    fn tensors(&self) -> [&[f32]; 3] {
        [&self.params, &self.adam_m, &self.adam_v]
    }

    /// The first tensor holding a non-finite value, with the value's index.
    pub fn first_non_finite(&self) -> Option<(&str, usize)> {
        let extra = self.extra.iter().map(|e| (e.name.as_str(), &e.data[..]));
        TENSORS
            .iter()
            .copied()
            .zip(self.tensors())
            .chain(extra)
            .find_map(|(name, t)| t.iter().position(|v| !v.is_finite()).map(|i| (name, i)))
    }

    /// The extra tensor `name`, which must be `[rows, cols]`.
    pub fn extra(&self, name: &str, rows: usize, cols: usize) -> Result<&[f32], String> {
        match self.extra.iter().find(|e| e.name == name) {
            Some(e) if (e.rows, e.cols) == (rows, cols) => Ok(&e.data),
            Some(e) => Err(format!(
                "tensor `{name}` is [{}, {}], not [{rows}, {cols}]",
                e.rows, e.cols
            )),
            None => Err(format!("tensor `{name}` missing")),
        }
    }

    /// Writes the checkpoint to `path` atomically.
    pub fn write(&self, path: &Path) -> Result<(), DataError> {
        let n = self.gaussians * self.channels;
        for (name, t) in TENSORS.iter().zip(self.tensors()) {
            if t.len() != n {
                return Err(DataError::format(
                    path,
                    format!(
                        "tensor `{name}` has {} values, not {}×{}",
                        t.len(),
                        self.gaussians,
                        self.channels
                    ),
                ));
            }
        }
        let mut header = serde_json::Map::new();
        let meta: BTreeMap<&str, String> = [
            ("format", FORMAT.to_string()),
            ("version", VERSION.to_string()),
            ("step", self.step.to_string()),
            ("sampler_position", self.sampler_position.to_string()),
            ("gaussians", self.gaussians.to_string()),
            ("channels", self.channels.to_string()),
            ("backend", self.backend.clone()),
            ("config", self.config.clone()),
        ]
        .into_iter()
        .chain(self.model.iter().map(|m| ("model", m.clone())))
        .chain(self.identity.iter().map(|m| ("identity", m.clone())))
        .collect();
        let mut meta: BTreeMap<String, String> =
            meta.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let mut extra: Vec<&Extra> = self.extra.iter().collect();
        extra.sort_by(|a, b| a.name.cmp(&b.name));
        for (i, e) in extra.iter().enumerate() {
            if TENSORS.contains(&e.name.as_str()) || extra[..i].iter().any(|o| o.name == e.name) {
                return Err(DataError::format(
                    path,
                    format!("tensor `{}` named twice", e.name),
                ));
            }
            if e.data.len() != e.rows * e.cols {
                return Err(DataError::format(
                    path,
                    format!(
                        "tensor `{}` has {} values, not {}×{}",
                        e.name,
                        e.data.len(),
                        e.rows,
                        e.cols
                    ),
                ));
            }
        }
        let named = TENSORS
            .iter()
            .copied()
            .zip(self.tensors())
            .chain(extra.iter().map(|e| (e.name.as_str(), &e.data[..])));
        for (name, t) in named {
            meta.insert(format!("xxh3.{name}"), xxh3_hex(&le_bytes(t)));
        }
        header.insert("__metadata__".into(), serde_json::json!(meta));
        let bytes = (n * 4) as u64;
        for (k, name) in TENSORS.iter().enumerate() {
            header.insert(
                name.to_string(),
                serde_json::json!({
                    "dtype": "F32",
                    "shape": [self.gaussians, self.channels],
                    "data_offsets": [k as u64 * bytes, (k as u64 + 1) * bytes],
                }),
            );
        }
        let mut at = TENSORS.len() as u64 * bytes;
        for e in &extra {
            let end = at + 4 * e.data.len() as u64;
            header.insert(
                e.name.clone(),
                serde_json::json!({
                    "dtype": "F32",
                    "shape": [e.rows, e.cols],
                    "data_offsets": [at, end],
                }),
            );
            at = end;
        }
        let mut text = serde_json::to_string(&header)
            .map_err(|e| DataError::format(path, e.to_string()))?
            .into_bytes();
        while !text.len().is_multiple_of(8) {
            text.push(b' ');
        }
        crate::io::write_atomic(path, |w| {
            w.write_all(&(text.len() as u64).to_le_bytes())?;
            w.write_all(&text)?;
            for t in self
                .tensors()
                .into_iter()
                .chain(extra.iter().map(|e| &e.data[..]))
            {
                for v in t {
                    w.write_all(&v.to_le_bytes())?;
                }
            }
            Ok(())
        })
    }

    /// Reads and checks a checkpoint written by [`Checkpoint::write`].
    pub fn read(path: &Path) -> Result<Checkpoint, DataError> {
        let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
        Checkpoint::parse(&bytes, path)
    }

    /// Parses checkpoint bytes; `path` names the file in errors.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Checkpoint, DataError> {
        let bad = |p: String| DataError::format(path, format!("not a usable checkpoint: {p}"));
        let len = bytes
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| bad("shorter than its 8-byte header length".into()))?;
        if len > MAX_HEADER || 8 + len > bytes.len() as u64 {
            return Err(bad(format!(
                "header length {len} exceeds the file ({} bytes)",
                bytes.len()
            )));
        }
        let (head, data) = bytes[8..].split_at(len as usize);
        let header: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(head).map_err(|e| bad(format!("header: {e}")))?;
        let meta = header
            .get("__metadata__")
            .and_then(|m| m.as_object())
            .ok_or_else(|| bad("no __metadata__".into()))?;
        let text = |k: &str| {
            meta.get(k)
                .and_then(|v| v.as_str())
                .ok_or_else(|| bad(format!("metadata `{k}` missing")))
        };
        let number = |k: &str| {
            text(k)?
                .parse::<u64>()
                .map_err(|_| bad(format!("metadata `{k}` is not a number")))
        };
        if text("format")? != FORMAT {
            return Err(bad(format!("format is `{}`", text("format")?)));
        }
        let version = number("version")?;
        if version != VERSION as u64 {
            return Err(bad(format!(
                "layout version {version}; this build reads version {VERSION}"
            )));
        }
        let (gaussians, channels) = (number("gaussians")?, number("channels")?);
        gaussians
            .checked_mul(channels)
            .filter(|n| n.checked_mul(4).is_some_and(|b| b <= data.len() as u64))
            .ok_or_else(|| bad(format!("{gaussians}×{channels} values exceed the file")))?;
        // A file of this version carries a checksum for every tensor; an older one none.
        let checksummed = meta.keys().any(|k| k.starts_with("xxh3."));
        let ranges = std::cell::RefCell::new(Vec::<(std::ops::Range<usize>, String)>::new());
        // A 2-D F32 tensor's values; `want` is its required shape, if any.
        let tensor = |name: &str,
                      want: Option<[u64; 2]>|
         -> Result<(usize, usize, Vec<f32>), DataError> {
            let t = header
                .get(name)
                .ok_or_else(|| bad(format!("tensor `{name}` missing")))?;
            let shape: Option<Vec<u64>> = t["shape"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_u64()).collect());
            let (rows, cols) = match (shape.as_deref(), want) {
                (Some(&[r, c]), None) => (r, c),
                (Some(&[r, c]), Some(w)) if [r, c] == w => (r, c),
                _ => {
                    let want = want.map_or("2-D".to_string(), |[r, c]| format!("[{r}, {c}]"));
                    return Err(bad(format!("tensor `{name}` is not F32 {want}")));
                }
            };
            let values = rows
                .checked_mul(cols)
                .filter(|&v| v.checked_mul(4).is_some_and(|b| b <= data.len() as u64))
                .ok_or_else(|| {
                    bad(format!(
                        "tensor `{name}`: {rows}×{cols} values exceed the file"
                    ))
                })?;
            if t["dtype"] != "F32" {
                return Err(bad(format!("tensor `{name}` is not F32")));
            }
            let off: Vec<u64> = t["data_offsets"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_u64()).collect())
                .unwrap_or_default();
            let range = match off[..] {
                [a, b] if b >= a && b - a == 4 * values && b <= data.len() as u64 => {
                    a as usize..b as usize
                }
                _ => return Err(bad(format!("tensor `{name}` has bad data offsets"))),
            };
            let bytes = &data[range.clone()];
            match meta.get(&format!("xxh3.{name}")).map(|v| v.as_str()) {
                Some(Some(want)) if want == xxh3_hex(bytes) => {}
                Some(Some(want)) => {
                    return Err(bad(format!(
                        "tensor `{name}` is corrupt: its checksum is {}, the file records {want} (a changed byte)",
                        xxh3_hex(bytes)
                    )));
                }
                Some(None) => return Err(bad(format!("metadata `xxh3.{name}` is not a string"))),
                None if checksummed => {
                    return Err(bad(format!(
                        "tensor `{name}` has no checksum (metadata `xxh3.{name}`)"
                    )));
                }
                None => {}
            }
            let values = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect::<Vec<f32>>();
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(bad(format!(
                    "tensor `{name}` is corrupt: value {i} is {} (a checkpoint only ever holds finite values)",
                    values[i]
                )));
            }
            if is_second_moment(name)
                && let Some(i) = values.iter().position(|v| *v < 0.0)
            {
                return Err(bad(format!(
                    "tensor `{name}` is corrupt: value {i} is {}, but a second moment is never negative",
                    values[i]
                )));
            }
            ranges.borrow_mut().push((range, name.to_string()));
            Ok((rows as usize, cols as usize, values))
        };
        let mut tensors = Vec::with_capacity(3);
        for name in TENSORS {
            tensors.push(tensor(name, Some([gaussians, channels]))?.2);
        }
        let mut extra = Vec::new();
        for name in header.keys() {
            if name != "__metadata__" && !TENSORS.contains(&name.as_str()) {
                let (rows, cols, data) = tensor(name, None)?;
                extra.push(Extra {
                    name: name.clone(),
                    rows,
                    cols,
                    data,
                });
            }
        }
        extra.sort_by(|a, b| a.name.cmp(&b.name));
        let mut ranges = ranges.into_inner();
        ranges.sort_by_key(|(r, _)| (r.start, r.end));
        for w in ranges.windows(2) {
            if w[1].0.start < w[0].0.end {
                return Err(bad(format!(
                    "tensors `{}` and `{}` overlap in the file (bytes {:?} and {:?})",
                    w[0].1, w[1].1, w[0].0, w[1].0
                )));
            }
        }
        let adam_v = tensors.pop().unwrap_or_default();
        let adam_m = tensors.pop().unwrap_or_default();
        let params = tensors.pop().unwrap_or_default();
        Ok(Checkpoint {
            step: number("step")?,
            sampler_position: number("sampler_position")?,
            gaussians: gaussians as usize,
            channels: channels as usize,
            backend: text("backend")?.to_string(),
            config: text("config")?.to_string(),
            params,
            adam_m,
            adam_v,
            model: meta
                .get("model")
                .map(|m| {
                    m.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad("metadata `model` is not a string".into()))
                })
                .transpose()?,
            extra,
            identity: meta
                .get("identity")
                .map(|m| {
                    m.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad("metadata `identity` is not a string".into()))
                })
                .transpose()?,
            checksummed,
        })
    }
}

/// File name of the checkpoint after `step` steps.
pub fn checkpoint_name(step: u64) -> String {
    format!("step-{step:09}.safetensors")
}

/// The checkpoints of a run directory, by ascending step.
pub fn list_checkpoints(run_dir: &Path) -> Result<Vec<(u64, PathBuf)>, DataError> {
    let dir = run_dir.join(super::CHECKPOINT_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(DataError::io(&dir, e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(|e| DataError::io(&dir, e))?;
        let name = e.file_name().to_string_lossy().into_owned();
        let step = name
            .strip_prefix("step-")
            .and_then(|s| s.strip_suffix(".safetensors"))
            .and_then(|s| s.parse::<u64>().ok());
        if let Some(step) = step {
            out.push((step, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The checkpoint with the highest step, if any.
pub fn newest_checkpoint(run_dir: &Path) -> Result<Option<(u64, PathBuf)>, DataError> {
    Ok(list_checkpoints(run_dir)?.pop())
}

/// Writes `ckpt` into the run directory's checkpoint folder and removes all but the
/// newest `keep` checkpoints (at least one is always kept). Returns its path.
pub fn save_checkpoint(
    run_dir: &Path,
    ckpt: &Checkpoint,
    keep: usize,
) -> Result<PathBuf, DataError> {
    let dir = run_dir.join(super::CHECKPOINT_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| DataError::io(&dir, e))?;
    let path = dir.join(checkpoint_name(ckpt.step));
    ckpt.write(&path)?;
    prune_checkpoints(run_dir, keep)?;
    Ok(path)
}

/// Removes all but the newest `keep` (≥ 1) checkpoints.
pub fn prune_checkpoints(run_dir: &Path, keep: usize) -> Result<(), DataError> {
    let all = list_checkpoints(run_dir)?;
    let drop = all.len().saturating_sub(keep.max(1));
    for (_, p) in &all[..drop] {
        std::fs::remove_file(p).map_err(|e| DataError::io(p, e))?;
    }
    Ok(())
}
