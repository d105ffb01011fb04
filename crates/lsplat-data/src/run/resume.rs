//! Which checkpoint `train --resume` continues from: the newest one that belongs to
//! the run and reads back intact, the others skipped with their reason.

use std::path::{Path, PathBuf};

use lsplat_core::Config;

use super::identity::RunIdentity;
use super::{CONFIG_FILE, Checkpoint, list_checkpoints};
use crate::DataError;

/// The checkpoint a resumed run starts from.
#[derive(Debug)]
pub struct Chosen {
    /// The checkpoint.
    pub ckpt: Checkpoint,
    /// Its file.
    pub path: PathBuf,
    /// Its bytes (what the other ranks of a data-parallel job are sent).
    pub bytes: Vec<u8>,
    /// Newer checkpoints skipped, each with why.
    pub skipped: Vec<(PathBuf, String)>,
    /// Things the user should know (an old checkpoint without checksums, a run
    /// without a recorded identity).
    pub warnings: Vec<String>,
}

/// Checks one checkpoint against the run: the file name's step, the configuration
/// and identity of the run, the sampler position. `run_cfg` is the run's
/// `config.toml`; `identity` its `[run]` record.
pub fn check_belongs(
    ckpt: &Checkpoint,
    name_step: u64,
    run_cfg: &Config,
    identity: Option<&RunIdentity>,
) -> Result<(), String> {
    if ckpt.step != name_step {
        return Err(format!(
            "its metadata says step {}, its name step {name_step}",
            ckpt.step
        ));
    }
    let cfg = Config::from_toml(&ckpt.config, Path::new("its configuration"))
        .map_err(|e| e.to_string())?;
    if let Some(key) = run_cfg.result_changing_difference(&cfg) {
        return Err(format!(
            "it belongs to another run: its `{key}` differs from {CONFIG_FILE}'s"
        ));
    }
    if let (Some(run), Some(text)) = (identity, &ckpt.identity) {
        let mine = RunIdentity::from_json(text).map_err(|e| format!("its identity: {e}"))?;
        if let Some(d) = run.difference(&mine) {
            return Err(format!("it belongs to another run: {d}"));
        }
    }
    let per_step = cfg.train.batch_size as u64;
    if Some(ckpt.sampler_position) != ckpt.step.checked_mul(per_step) {
        return Err(format!(
            "its sampler position {} is not step × batch size = {} × {per_step}",
            ckpt.sampler_position, ckpt.step
        ));
    }
    if ckpt.step == 0 || ckpt.step > cfg.train.iterations() as u64 {
        return Err(format!(
            "its step {} is outside 1..={} (train.iterations)",
            ckpt.step,
            cfg.train.iterations()
        ));
    }
    Ok(())
}

/// The newest checkpoint of the run in `dir` that reads back intact and belongs to
/// it. Before any checkpoint is read, the run's input files must be those it started
/// from. Errors name the run, or list every checkpoint with why it was refused.
pub fn newest_valid(dir: &Path) -> Result<Chosen, DataError> {
    let cfg_path = dir.join(CONFIG_FILE);
    if !cfg_path.is_file() {
        return Err(DataError::format(
            dir,
            format!("not a run directory (no {CONFIG_FILE})"),
        ));
    }
    let run_cfg = Config::load(&cfg_path)?;
    let identity = RunIdentity::read(&cfg_path)?;
    let mut warnings = Vec::new();
    match &identity {
        Some(id) => id.check_inputs()?,
        None => warnings.push(format!(
            "{} records no [run] identity (a run of an older version): its input files are not checked",
            cfg_path.display()
        )),
    }
    let all = list_checkpoints(dir)?;
    if all.is_empty() {
        return Err(DataError::format(
            dir,
            "no checkpoint to resume from (checkpoints/ is empty); start a new run",
        ));
    }
    let mut skipped = Vec::new();
    for (step, path) in all.into_iter().rev() {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                skipped.push((path, e.to_string()));
                continue;
            }
        };
        let ckpt = match Checkpoint::parse(&bytes, &path) {
            Ok(c) => c,
            Err(e) => {
                let text = e.to_string();
                let why = text
                    .strip_prefix(&format!("{}: ", path.display()))
                    .unwrap_or(&text)
                    .to_string();
                skipped.push((path, why));
                continue;
            }
        };
        if let Err(why) = check_belongs(&ckpt, step, &run_cfg, identity.as_ref()) {
            skipped.push((path, why));
            continue;
        }
        if !ckpt.checksummed {
            warnings.push(format!(
                "{} has no checksums (written by an older version): a changed byte would go unnoticed",
                path.display()
            ));
        }
        return Ok(Chosen {
            ckpt,
            path,
            bytes,
            skipped,
            warnings,
        });
    }
    Err(DataError::format(
        dir,
        format!(
            "no usable checkpoint to resume from: {}",
            skipped
                .iter()
                .map(|(p, why)| format!("{}: {why}", p.display()))
                .collect::<Vec<_>>()
                .join("; ")
        ),
    ))
}
