//! Run directories: exclusive, finished, unique; checkpoints; the metrics file.

use super::checkpoint::{Extra, checkpoint_name, save_checkpoint};
use super::*;

fn ckpt(step: u64, n: usize, c: usize) -> Checkpoint {
    let v = |k: f32| (0..n * c).map(|i| i as f32 * k - 1.5).collect::<Vec<f32>>();
    Checkpoint {
        step,
        sampler_position: 3 * step,
        gaussians: n,
        channels: c,
        backend: "cpu (2 threads)".into(),
        config: "[train]\niterations = 7\n".into(),
        params: v(0.25),
        adam_m: v(-1e-3),
        adam_v: v(1e-7).iter().map(|x| x.abs()).collect(),
        model: None,
        extra: Vec::new(),
        identity: None,
        checksummed: true,
    }
}

#[test]
fn a_locked_directory_is_refused_at_once() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("run");
    let first = RunDir::create(&dir, false).unwrap();
    for e in [
        RunDir::create(&dir, false).unwrap_err(),
        RunDir::create(&dir, true).unwrap_err(),
        RunDir::resume(&dir).unwrap_err(),
    ] {
        assert!(e.to_string().contains("in use by another run"), "{e}");
    }
    drop(first);
    RunDir::resume(&dir).unwrap();
}

#[test]
fn finished_and_unfinished_runs_need_force() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("run");
    let run = RunDir::create(&dir, false).unwrap();
    run.write_config("x = 1\n").unwrap();
    drop(run);
    // Nothing to resume (no checkpoint): the folder does not block a new run.
    let run = RunDir::create(&dir, false).unwrap();
    assert!(
        !dir.join(CONFIG_FILE).exists(),
        "the new run clears the old one"
    );
    run.write_config("x = 1\n").unwrap();
    save_checkpoint(&dir, &ckpt(20, 2, 3), 3).unwrap();
    drop(run);
    let e = RunDir::create(&dir, false).unwrap_err().to_string();
    assert!(e.contains("after step 20") && e.contains("--resume"), "{e}");
    let run = RunDir::resume(&dir).unwrap();
    run.finish(b"{}").unwrap();
    assert!(is_finished(&dir));
    drop(run);
    let e = RunDir::create(&dir, false).unwrap_err().to_string();
    assert!(e.contains("finished run") && e.contains("--force"), "{e}");
    let _run = RunDir::create(&dir, true).unwrap();
    assert!(!is_finished(&dir) && list_checkpoints(&dir).unwrap().is_empty());
}

#[test]
fn foreign_folders_are_never_cleared() {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("thesis.tex"), b"x").unwrap();
    std::fs::write(t.path().join(SUMMARY_FILE), b"{}").unwrap();
    let e = RunDir::create(t.path(), true).unwrap_err().to_string();
    assert!(
        e.contains("not a run directory") && e.contains("thesis.tex"),
        "{e}"
    );
    assert!(t.path().join("thesis.tex").exists() && t.path().join(SUMMARY_FILE).exists());
}

#[test]
fn unique_names_never_collide() {
    let t = tempfile::tempdir().unwrap();
    let runs: Vec<RunDir> = (0..3)
        .map(|_| RunDir::create_unique(t.path(), "20261122-101010").unwrap())
        .collect();
    let names: Vec<String> = runs
        .iter()
        .map(|r| r.path().file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["20261122-101010", "20261122-101010-2", "20261122-101010-3"]
    );
    // From threads at once: every caller gets its own directory.
    let t = tempfile::tempdir().unwrap();
    let got: Vec<PathBuf> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| s.spawn(|| RunDir::create_unique(t.path(), "same").unwrap()))
            .collect();
        let runs: Vec<RunDir> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        runs.iter().map(|r| r.path().to_path_buf()).collect()
    });
    let mut dedup = got.clone();
    dedup.sort();
    dedup.dedup();
    assert_eq!(dedup.len(), 8);
}

#[test]
fn resume_removes_stale_temporary_files() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("run");
    drop(RunDir::create(&dir, false).unwrap());
    std::fs::create_dir_all(dir.join(CHECKPOINT_DIR)).unwrap();
    let stale = dir
        .join(CHECKPOINT_DIR)
        .join(".step-000000010.safetensors.77.0.tmp");
    std::fs::write(&stale, b"half").unwrap();
    std::fs::write(dir.join(".features.npy.77.1.tmp"), b"half").unwrap();
    let _run = RunDir::resume(&dir).unwrap();
    assert!(!stale.exists() && !dir.join(".features.npy.77.1.tmp").exists());
}

#[test]
fn checkpoint_round_trip_and_safetensors_layout() {
    let t = tempfile::tempdir().unwrap();
    let c = ckpt(40, 5, 3);
    let p = save_checkpoint(t.path(), &c, 3).unwrap();
    assert_eq!(p.file_name().unwrap(), checkpoint_name(40).as_str());
    assert_eq!(Checkpoint::read(&p).unwrap(), c);
    // The safetensors layout, read independently.
    let b = std::fs::read(&p).unwrap();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    assert_eq!(n % 8, 0);
    let h: serde_json::Value = serde_json::from_slice(&b[8..8 + n]).unwrap();
    assert_eq!(h["__metadata__"]["step"], "40");
    assert_eq!(h["__metadata__"]["config"], c.config);
    assert_eq!(h["adam_m"]["shape"], serde_json::json!([5, 3]));
    let [a, e] = [0, 1].map(|k| h["adam_m"]["data_offsets"][k].as_u64().unwrap() as usize);
    let m: Vec<f32> = b[8 + n + a..8 + n + e]
        .chunks_exact(4)
        .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
        .collect();
    assert_eq!(m, c.adam_m);
    assert_eq!(b.len(), 8 + n + 3 * 15 * 4);
}

/// A plugin model's checkpoint: its name and further tensors (given out of name order)
/// round-trip, are laid out after the main three in name order, and a tensor that
/// is missing, misshapen or truncated is a named error.
#[test]
fn plugin_checkpoints_carry_their_model_and_extra_tensors() {
    let t = tempfile::tempdir().unwrap();
    let mut c = ckpt(12, 4, 2);
    c.model = Some("langsplat_v2".into());
    let e = |name: &str, rows, cols, k: f32| Extra {
        name: name.into(),
        rows,
        cols,
        data: (0..rows * cols).map(|i| i as f32 * k).collect(),
    };
    c.extra = vec![e("zeta", 3, 5, 0.5), e("alpha", 2, 2, -1.0)];
    let p = save_checkpoint(t.path(), &c, 3).unwrap();
    let back = Checkpoint::read(&p).unwrap();
    assert_eq!(back.model.as_deref(), Some("langsplat_v2"));
    let names: Vec<&str> = back.extra.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["alpha", "zeta"]);
    assert_eq!(back.extra("zeta", 3, 5).unwrap(), &c.extra[0].data[..]);
    assert!(
        back.extra("zeta", 5, 3)
            .unwrap_err()
            .contains("[3, 5], not [5, 3]")
    );
    assert!(back.extra("beta", 1, 1).unwrap_err().contains("missing"));
    let b = std::fs::read(&p).unwrap();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let h: serde_json::Value = serde_json::from_slice(&b[8..8 + n]).unwrap();
    assert_eq!(h["__metadata__"]["model"], "langsplat_v2");
    let main = 3 * 8 * 4;
    assert_eq!(
        h["alpha"]["data_offsets"],
        serde_json::json!([main, main + 16])
    );
    assert_eq!(b.len(), 8 + n + main + 16 + 60);
    // The built-in model's checkpoints have neither.
    let plain = Checkpoint::read(&save_checkpoint(t.path(), &ckpt(13, 4, 2), 3).unwrap());
    assert_eq!(plain.unwrap().model, None);
    // Values past the file's end, and a name given twice.
    let cut = Checkpoint::parse(&b[..b.len() - 4], &p)
        .unwrap_err()
        .to_string();
    assert!(cut.contains("zeta"), "{cut}");
    c.extra.push(e("alpha", 1, 1, 1.0));
    let twice = c
        .write(&t.path().join("x.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(twice.contains("named twice"), "{twice}");
    assert!(!t.path().join("x.safetensors").exists());
}

#[test]
fn damaged_checkpoints_are_named_errors() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("c.safetensors");
    ckpt(1, 4, 2).write(&p).unwrap();
    let good = std::fs::read(&p).unwrap();
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let mut flipped = good.clone();
    flipped[8 + n / 2] = b'}';
    let mut huge = good.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    for bytes in [
        &good[..5],
        &good[..good.len() - 1],
        &good[..8 + n],
        &flipped,
        &huge,
    ] {
        let e = Checkpoint::parse(bytes, &p).unwrap_err().to_string();
        assert!(
            e.contains("c.safetensors") && e.contains("checkpoint"),
            "{e}"
        );
    }
    let other = String::from_utf8_lossy(&good).replace(FORMAT_PROBE, "something-else!!!");
    assert!(Checkpoint::parse(other.as_bytes(), &p).is_err());
}

const FORMAT_PROBE: &str = checkpoint::FORMAT;

#[test]
fn pruning_keeps_the_newest() {
    let t = tempfile::tempdir().unwrap();
    for s in [10, 20, 30, 40] {
        save_checkpoint(t.path(), &ckpt(s, 2, 2), 2).unwrap();
    }
    let steps: Vec<u64> = list_checkpoints(t.path())
        .unwrap()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    assert_eq!(steps, [30, 40]);
    assert_eq!(newest_checkpoint(t.path()).unwrap().unwrap().0, 40);
    let bad = ckpt(5, 2, 2);
    let mut nan = bad.clone();
    nan.adam_v[3] = f32::INFINITY;
    assert_eq!(bad.first_non_finite(), None);
    assert_eq!(nan.first_non_finite(), Some(("adam_v", 3)));
}

#[test]
fn metrics_resume_drops_later_and_torn_lines() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join(METRICS_FILE);
    let mut log = MetricsLog::create(&p).unwrap();
    log.append("{\"step\":0,\"loss\":0.5}\n{\"step\":1,\"loss\":0.25}\n")
        .unwrap();
    log.append("{\"step\":2,\"loss\":null}\n{\"step\":3,\"lo")
        .unwrap();
    drop(log);
    let mut log = MetricsLog::resume(&p, 2).unwrap();
    assert_eq!(read_losses(&p).unwrap(), [(0, 0.5), (1, 0.25)]);
    log.append("{\"step\":2,\"loss\":0.125}\n").unwrap();
    assert_eq!(read_losses(&p).unwrap().len(), 3);
    std::fs::write(&p, "{\"step\":0,\"loss\":null}\n").unwrap();
    assert!(read_losses(&p).unwrap()[0].1.is_nan());
}

#[test]
fn an_interrupted_run_is_resumable_not_finished() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("run");
    let run = RunDir::create(&dir, false).unwrap();
    run.write_config("x = 1\n").unwrap();
    save_checkpoint(&dir, &ckpt(7, 2, 3), 3).unwrap();
    run.finish(br#"{"status": "interrupted", "steps": 7}"#)
        .unwrap();
    drop(run);
    assert!(!is_finished(&dir) && interrupted_at(&dir) == Some(7));
    let e = RunDir::create(&dir, false).unwrap_err().to_string();
    assert!(
        e.contains("interrupted run") && e.contains("--resume"),
        "{e}"
    );
}

#[test]
fn other_commands_outputs_follow_the_force_rule() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("render");
    let out = RunDir::create_as(&dir, false, &layout::RENDER).unwrap();
    std::fs::write(dir.join("cam.npy"), b"x").unwrap();
    drop(out);
    // Interrupted before its marker: refused, then overwritten with --force.
    let e = RunDir::create_as(&dir, false, &layout::RENDER)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unfinished render output") && e.contains("--force"),
        "{e}"
    );
    let out = RunDir::create_as(&dir, true, &layout::RENDER).unwrap();
    assert!(!dir.join("cam.npy").exists());
    out.finish(b"{}").unwrap();
    drop(out);
    let e = RunDir::create_as(&dir, false, &layout::RENDER)
        .unwrap_err()
        .to_string();
    assert!(e.contains("finished render output"), "{e}");
    // A run directory is not a render output, even with --force.
    std::fs::write(dir.join(CONFIG_FILE), b"").unwrap();
    let e = RunDir::create_as(&dir, true, &layout::RENDER)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not a render output directory") && e.contains("config.toml"),
        "{e}"
    );
    // A file where the folder should be is named.
    let f = t.path().join("file");
    std::fs::write(&f, b"x").unwrap();
    let e = RunDir::create_as(&f, true, &layout::QUERY)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&f.display().to_string()) && e.contains("is a file"),
        "{e}"
    );
    // Query outputs: camera folders of npy/png; anything else inside stops --force.
    let q = t.path().join("query");
    let out = RunDir::create_as(&q, false, &layout::QUERY).unwrap();
    std::fs::create_dir(q.join("cam")).unwrap();
    std::fs::write(q.join("cam/mug.npy"), b"x").unwrap();
    std::fs::write(q.join("cam/notes.txt"), b"x").unwrap();
    drop(out);
    let e = RunDir::create_as(&q, true, &layout::QUERY)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("cam/notes.txt") && q.join("cam/mug.npy").exists(),
        "{e}"
    );
}
