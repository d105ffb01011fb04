//! What a run was made from, recorded in its `config.toml` (the `[run]` table) and in
//! every checkpoint (metadata `identity`), so that `train --resume` continues only the
//! run a checkpoint belongs to, on the inputs it started from.
//!
//! ```toml
//! [run]
//! config_hash = "9c1e…"        # XXH3-64 of the settings that decide what a step computes
//! level = 1
//! model = "langsplat"
//! [[run.inputs]]               # one per input file (none for the embedded demo)
//! key = "scene.dataset"
//! path = "/data/figurines/dataset/masks.parquet"
//! bytes = 18234112
//! modified_ns = 1763812345123456789
//! ```

use std::path::{Path, PathBuf};

use lsplat_core::Config;
use serde::{Deserialize, Serialize};

use crate::DataError;

/// The identity of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunIdentity {
    /// XXH3-64 (hex) of [`Config::result_settings`]: every setting but the few a
    /// resumed run may change.
    pub config_hash: String,
    /// `scene.level`.
    pub level: u8,
    /// `train.model`.
    pub model: String,
    /// The input files, each with its size and modification time.
    #[serde(default)]
    pub inputs: Vec<InputStamp>,
}

/// One input file as it was when the run started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputStamp {
    /// The configuration key naming it (`scene.splats`, `scene.dataset`, …).
    pub key: String,
    /// The file.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// Its modification time, nanoseconds since 1970.
    pub modified_ns: u64,
}

/// The files behind one configured input: the file itself, or the files directly
/// inside a folder (a dataset's Parquet tables, a COLMAP model's files).
fn files_of(key: &str, path: &Path) -> Result<Vec<PathBuf>, DataError> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let entries = std::fs::read_dir(path).map_err(|e| DataError::io(path, e))?;
    for e in entries {
        let e = e.map_err(|e| DataError::io(path, e))?;
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let wanted = if key == "scene.dataset" {
            name.ends_with(".parquet")
        } else {
            !name.starts_with('.')
        };
        if wanted && p.is_file() {
            files.push(p);
        }
    }
    files.sort();
    Ok(files)
}

/// The stamp of one file now.
fn stamp(key: &str, path: &Path) -> Result<InputStamp, DataError> {
    let m = std::fs::metadata(path).map_err(|e| DataError::io(path, e))?;
    let modified_ns = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    Ok(InputStamp {
        key: key.to_string(),
        path: path.to_path_buf(),
        bytes: m.len(),
        modified_ns,
    })
}

impl RunIdentity {
    /// The identity of a run of `cfg`, stamping its input files as they are now.
    pub fn of(cfg: &Config) -> Result<RunIdentity, DataError> {
        let mut inputs = Vec::new();
        let sc = &cfg.scene;
        for (key, p) in [
            ("scene.splats", &sc.splats),
            ("scene.cameras", &sc.cameras),
            ("scene.dataset", &sc.dataset),
        ] {
            if let Some(p) = p {
                for f in files_of(key, p)? {
                    inputs.push(stamp(key, &f)?);
                }
            }
        }
        Ok(RunIdentity {
            config_hash: config_hash(cfg),
            level: cfg.scene.level,
            model: cfg.train.model.clone(),
            inputs,
        })
    }

    /// The identity as the `[run]` table appended to `config.toml`.
    pub fn to_toml(&self) -> String {
        let mut t = toml::Table::new();
        t.insert(
            lsplat_core::config::RUN_RECORD.into(),
            toml::Value::try_from(self).expect("identity serialises"),
        );
        format!(
            "\n# What this run was made from (`train --resume` checks it); not configuration.\n{}",
            toml::to_string(&t).expect("identity serialises")
        )
    }

    /// The identity as one JSON line (a checkpoint's metadata `identity`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("identity serialises")
    }

    /// Reads [`RunIdentity::to_json`].
    pub fn from_json(text: &str) -> Result<RunIdentity, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The `[run]` record of a run's `config.toml`, if it has one.
    pub fn read(config_toml: &Path) -> Result<Option<RunIdentity>, DataError> {
        let text =
            std::fs::read_to_string(config_toml).map_err(|e| DataError::io(config_toml, e))?;
        let mut table: toml::Table = toml::from_str(&text)
            .map_err(|e| DataError::format(config_toml, e.message().to_string()))?;
        table
            .remove(lsplat_core::config::RUN_RECORD)
            .map(|v| {
                v.try_into().map_err(|e: toml::de::Error| {
                    DataError::format(config_toml, format!("[run]: {}", e.message()))
                })
            })
            .transpose()
    }

    /// The first way `other` differs from `self` (a checkpoint's identity against
    /// its run's), in words.
    pub fn difference(&self, other: &RunIdentity) -> Option<String> {
        if self.config_hash != other.config_hash {
            return Some("its settings hash differs (another configuration)".into());
        }
        if (self.level, &self.model) != (other.level, &other.model) {
            return Some(format!(
                "it was written for level {} of train.model = {}, not level {} of {}",
                other.level, other.model, self.level, self.model
            ));
        }
        if self.inputs.len() != other.inputs.len() {
            return Some(format!(
                "it was written for {} input files, not {}",
                other.inputs.len(),
                self.inputs.len()
            ));
        }
        self.inputs
            .iter()
            .zip(&other.inputs)
            .find(|(a, b)| a != b)
            .map(|(a, b)| {
                format!(
                    "it was written for {} ({} bytes, modified {}), not {} ({} bytes, modified {})",
                    b.path.display(),
                    b.bytes,
                    b.modified_ns,
                    a.path.display(),
                    a.bytes,
                    a.modified_ns
                )
            })
    }

    /// Checks that the input files are still those the run started from (same size
    /// and modification time); the error names the file that changed.
    pub fn check_inputs(&self) -> Result<(), DataError> {
        for s in &self.inputs {
            let now = stamp(&s.key, &s.path).map_err(|_| {
                DataError::format(
                    &s.path,
                    format!("`{}` of the run is gone (the run was made from it)", s.key),
                )
            })?;
            if (now.bytes, now.modified_ns) != (s.bytes, s.modified_ns) {
                return Err(DataError::format(
                    &s.path,
                    format!(
                        "`{}` changed since the run started ({} bytes, modified {} ns; now {} bytes, modified {} ns): a resumed run would train on other data; start a new run",
                        s.key, s.bytes, s.modified_ns, now.bytes, now.modified_ns
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// XXH3-64 (hex) of the settings that decide what a step computes.
pub fn config_hash(cfg: &Config) -> String {
    let text = toml::to_string(&cfg.result_settings()).expect("config serialises");
    super::checkpoint::xxh3_hex(text.as_bytes())
}
