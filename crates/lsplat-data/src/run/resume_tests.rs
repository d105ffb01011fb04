//! Resuming: damaged checkpoints are named, the newest intact one of the run is taken.

use std::path::Path;

use lsplat_core::Config;

use super::checkpoint::xxh3_hex;
use super::identity::RunIdentity;
use super::*;

/// A checkpoint after `step` steps of a run of `cfg`.
fn ckpt_of(cfg: &Config, step: u64) -> Checkpoint {
    let (n, c) = (5, 3);
    let v = |k: f32| (0..n * c).map(|i| i as f32 * k).collect::<Vec<f32>>();
    Checkpoint {
        step,
        sampler_position: step * cfg.train.batch_size as u64,
        gaussians: n,
        channels: c,
        backend: "cpu".into(),
        config: cfg.to_toml(),
        params: v(0.5),
        adam_m: v(-1e-3),
        adam_v: v(1e-6),
        model: None,
        extra: Vec::new(),
        identity: RunIdentity::of(cfg).ok().map(|i| i.to_json()),
        checksummed: true,
    }
}

/// The header of a safetensors file as JSON, and where its data starts.
fn header(bytes: &[u8]) -> (serde_json::Map<String, serde_json::Value>, usize) {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    (serde_json::from_slice(&bytes[8..8 + n]).unwrap(), 8 + n)
}

/// `bytes` with its header replaced.
fn with_header(bytes: &[u8], h: &serde_json::Map<String, serde_json::Value>) -> Vec<u8> {
    let (_, data) = header(bytes);
    let mut text = serde_json::to_vec(h).unwrap();
    while !text.len().is_multiple_of(8) {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend(text);
    out.extend(&bytes[data..]);
    out
}

fn parse_err(bytes: &[u8]) -> String {
    Checkpoint::parse(bytes, Path::new("c.safetensors"))
        .unwrap_err()
        .to_string()
}

#[test]
fn a_flipped_bit_nan_negative_moment_or_overlap_is_named_as_corruption_of_the_file() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("c.safetensors");
    let cfg = Config::default();
    ckpt_of(&cfg, 4).write(&p).unwrap();
    let good = std::fs::read(&p).unwrap();
    let back = Checkpoint::parse(&good, &p).unwrap();
    assert!(back.checksummed && back == ckpt_of(&cfg, 4));
    let (h, data) = header(&good);
    // One flipped bit in `adam_m` (the second tensor).
    let mut flipped = good.clone();
    flipped[data + 15 * 4 + 2] ^= 0x10;
    let e = parse_err(&flipped);
    assert!(
        e.starts_with("c.safetensors")
            && e.contains("`adam_m` is corrupt")
            && e.contains("checksum"),
        "{e}"
    );
    // A NaN and a negative second moment, with matching checksums (written as such).
    let mut nan = ckpt_of(&cfg, 4);
    nan.params[2] = f32::NAN;
    nan.write(&p).unwrap();
    let e = parse_err(&std::fs::read(&p).unwrap());
    assert!(
        e.contains("`params` is corrupt: value 2 is NaN") && !e.contains("lr"),
        "{e}"
    );
    let mut neg = ckpt_of(&cfg, 4);
    neg.adam_v[7] = -1.0;
    neg.write(&p).unwrap();
    let e = parse_err(&std::fs::read(&p).unwrap());
    assert!(
        e.contains("`adam_v` is corrupt: value 7 is -1") && e.contains("never negative"),
        "{e}"
    );
    // `adam_m` pointing at `params`' bytes (checksum made to match): an overlap.
    let mut o = h.clone();
    o["adam_m"]["data_offsets"] = o["params"]["data_offsets"].clone();
    o["__metadata__"]["xxh3.adam_m"] = o["__metadata__"]["xxh3.params"].clone();
    let e = parse_err(&with_header(&good, &o));
    assert!(e.contains("overlap"), "{e}");
    // A file of an older version (no checksums) still reads, marked unchecked.
    let mut old = h.clone();
    let meta = old["__metadata__"].as_object_mut().unwrap();
    meta.retain(|k, _| !k.starts_with("xxh3."));
    let c = Checkpoint::parse(&with_header(&good, &old), &p).unwrap();
    assert!(!c.checksummed && c.params == ckpt_of(&cfg, 4).params);
    // Half the checksums missing is damage, not an old file.
    let mut half = h.clone();
    half["__metadata__"]
        .as_object_mut()
        .unwrap()
        .remove("xxh3.adam_v");
    assert!(parse_err(&with_header(&good, &half)).contains("`adam_v` has no checksum"));
    assert_eq!(xxh3_hex(b""), "2d06800538d394c2");
}

/// A run directory of `cfg` (config.toml with its [run] record) with checkpoints.
fn run_of(dir: &Path, cfg: &Config, steps: &[u64]) {
    let run = RunDir::create(dir, false).unwrap();
    let id = RunIdentity::of(cfg).unwrap();
    run.write_config(&format!("{}{}", cfg.to_toml(), id.to_toml()))
        .unwrap();
    for &s in steps {
        save_checkpoint(dir, &ckpt_of(cfg, s), 10).unwrap();
    }
}

fn file_scene(dir: &Path) -> Config {
    let mut cfg = Config::default();
    let ds = dir.join("dataset");
    std::fs::create_dir_all(&ds).unwrap();
    std::fs::write(ds.join("masks.parquet"), b"masks").unwrap();
    std::fs::write(ds.join("features.parquet"), b"features").unwrap();
    std::fs::write(dir.join("s.ply"), b"ply").unwrap();
    std::fs::write(dir.join("cameras.json"), b"[]").unwrap();
    cfg.scene.splats = Some(dir.join("s.ply"));
    cfg.scene.cameras = Some(dir.join("cameras.json"));
    cfg.scene.dataset = Some(ds);
    cfg.train.batch_size = 2;
    cfg.train.iterations = Some(100);
    cfg
}

#[test]
fn resume_takes_the_newest_intact_checkpoint_of_the_run_and_says_what_it_skipped() {
    let t = tempfile::tempdir().unwrap();
    let cfg = file_scene(t.path());
    let dir = t.path().join("run");
    run_of(&dir, &cfg, &[10, 20, 30]);
    let id = RunIdentity::read(&dir.join(CONFIG_FILE)).unwrap().unwrap();
    assert_eq!(id, RunIdentity::of(&cfg).unwrap());
    assert_eq!(id.inputs.len(), 4, "{id:?}");
    // Config::load reads the config.toml back as configuration.
    assert_eq!(Config::load(&dir.join(CONFIG_FILE)).unwrap(), cfg);
    let c = resume::newest_valid(&dir).unwrap();
    assert_eq!((c.ckpt.step, c.skipped.len(), c.warnings.len()), (30, 0, 0));
    // Damage the newest: it is skipped, with why.
    let p30 = dir.join(CHECKPOINT_DIR).join(checkpoint_name(30));
    let mut b = std::fs::read(&p30).unwrap();
    let at = b.len() - 3;
    b[at] ^= 1;
    std::fs::write(&p30, &b).unwrap();
    // A checkpoint named after another step, and one of another run (another lr).
    let p40 = dir.join(CHECKPOINT_DIR).join(checkpoint_name(40));
    std::fs::copy(dir.join(CHECKPOINT_DIR).join(checkpoint_name(20)), &p40).unwrap();
    let mut other = cfg.clone();
    other.train.lr = 0.01;
    ckpt_of(&other, 50)
        .write(&dir.join(CHECKPOINT_DIR).join(checkpoint_name(50)))
        .unwrap();
    // A sampler position that cannot be.
    let mut far = ckpt_of(&cfg, 60);
    far.sampler_position = 7;
    far.write(&dir.join(CHECKPOINT_DIR).join(checkpoint_name(60)))
        .unwrap();
    let c = resume::newest_valid(&dir).unwrap();
    assert_eq!(c.ckpt.step, 20);
    let why: Vec<String> = c
        .skipped
        .iter()
        .map(|(p, w)| format!("{}: {w}", p.display()))
        .collect();
    assert_eq!(why.len(), 4, "{why:?}");
    assert!(
        why[0].contains("step-000000060") && why[0].contains("sampler position 7"),
        "{why:?}"
    );
    assert!(
        why[1].contains("step-000000050") && why[1].contains("`train.lr`"),
        "{why:?}"
    );
    assert!(
        why[2].contains("step-000000040") && why[2].contains("metadata says step 20"),
        "{why:?}"
    );
    assert!(
        why[3].contains("step-000000030") && why[3].contains("corrupt"),
        "{why:?}"
    );
    // Nothing usable: every reason listed.
    for s in [10, 20] {
        std::fs::remove_file(dir.join(CHECKPOINT_DIR).join(checkpoint_name(s))).unwrap();
    }
    let e = resume::newest_valid(&dir).unwrap_err().to_string();
    assert!(
        e.contains("no usable checkpoint") && e.contains("step-000000030"),
        "{e}"
    );
}

#[test]
fn a_checkpoint_of_other_inputs_or_changed_inputs_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let cfg = file_scene(t.path());
    let dir = t.path().join("run");
    run_of(&dir, &cfg, &[10]);
    // A checkpoint whose recorded inputs differ (another dataset of the same path).
    let mut c = ckpt_of(&cfg, 20);
    let mut id = RunIdentity::of(&cfg).unwrap();
    id.inputs[0].bytes += 1;
    c.identity = Some(id.to_json());
    c.write(&dir.join(CHECKPOINT_DIR).join(checkpoint_name(20)))
        .unwrap();
    let chosen = resume::newest_valid(&dir).unwrap();
    assert_eq!(chosen.ckpt.step, 10);
    assert!(
        chosen.skipped[0].1.contains("belongs to another run"),
        "{:?}",
        chosen.skipped
    );
    // The dataset changed since the run started: no checkpoint is read at all.
    std::fs::write(t.path().join("dataset/masks.parquet"), b"other masks").unwrap();
    let e = resume::newest_valid(&dir).unwrap_err().to_string();
    assert!(
        e.contains("masks.parquet") && e.contains("changed since the run started"),
        "{e}"
    );
    std::fs::remove_file(t.path().join("dataset/masks.parquet")).unwrap();
    let e = resume::newest_valid(&dir).unwrap_err().to_string();
    assert!(e.contains("masks.parquet") && e.contains("is gone"), "{e}");
}

#[test]
fn runs_of_older_versions_resume_with_warnings() {
    let t = tempfile::tempdir().unwrap();
    let cfg = Config::default();
    let dir = t.path().join("run");
    let run = RunDir::create(&dir, false).unwrap();
    run.write_config(&cfg.to_toml()).unwrap();
    drop(run);
    let p = dir.join(CHECKPOINT_DIR).join(checkpoint_name(5));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let mut c = ckpt_of(&cfg, 5);
    c.identity = None;
    c.write(&p).unwrap();
    let b = std::fs::read(&p).unwrap();
    let (mut h, _) = header(&b);
    h["__metadata__"]
        .as_object_mut()
        .unwrap()
        .retain(|k, _| !k.starts_with("xxh3."));
    std::fs::write(&p, with_header(&b, &h)).unwrap();
    let chosen = resume::newest_valid(&dir).unwrap();
    assert_eq!(chosen.ckpt.step, 5);
    assert_eq!(chosen.warnings.len(), 2, "{:?}", chosen.warnings);
    assert!(chosen.warnings[0].contains("no [run] identity"));
    assert!(chosen.warnings[1].contains("no checksums"));
}
