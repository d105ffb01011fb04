//! Checkpoints in the engine: a restored session continues bit for bit, metrics are
//! read back before every checkpoint, and a diverged state is never checkpointed.

use std::path::Path;

use lsplat_core::Config;
use lsplat_cpu::CpuBackend;
use lsplat_data::run::{self, Checkpoint, MetricsLog};
use lsplat_engine::components::FeatureParams;
use lsplat_engine::systems::checkpoint::CheckpointTarget;
use lsplat_engine::{CheckpointPlugin, EngineError, MetricsFilePlugin, Session};

/// A small demo with a batch of 2, log windows (7) that do not divide the
/// checkpoint period (10), and a random start.
fn config() -> Config {
    let mut cfg = Config::default();
    for s in [
        "demo.gaussians=600",
        "demo.cameras=5",
        "demo.width=64",
        "demo.height=48",
        "train.batch_size=2",
        "train.init_std=0.01",
        "train.iterations=45",
        "log.every=7",
        "log.checkpoint_every=10",
        "log.checkpoint_keep=2",
    ] {
        cfg.set(s).unwrap();
    }
    cfg
}

fn session(cfg: &Config, dir: &Path, resume: Option<&Checkpoint>) -> Session<CpuBackend> {
    let scene = lsplat_data::demo::generate(&cfg.demo, 1).unwrap().scene;
    let mut s = Session::new(CpuBackend::new(0), cfg, scene).unwrap();
    let metrics = dir.join(run::METRICS_FILE);
    let log = match resume {
        Some(c) => MetricsLog::resume(&metrics, c.step).unwrap(),
        None => MetricsLog::create(&metrics).unwrap(),
    };
    s.engine
        .add_plugin(MetricsFilePlugin::<CpuBackend>::new(log))
        .add_plugin(CheckpointPlugin::<CpuBackend>::new(
            cfg.log.checkpoint_every as u64,
            CheckpointTarget {
                run_dir: dir.to_path_buf(),
                keep: cfg.log.checkpoint_keep as usize,
                config: cfg.to_toml(),
                backend: "cpu".into(),
                identity: None,
            },
        ));
    s.engine.initialize().unwrap();
    if let Some(c) = resume {
        s.restore(c).unwrap();
    }
    s
}

#[test]
fn a_restored_session_continues_bit_for_bit() {
    let cfg = config();
    let a = tempfile::tempdir().unwrap();
    let mut whole = session(&cfg, a.path(), None);
    for _ in 0..45 {
        whole.step().unwrap();
    }
    let steps: Vec<u64> = run::list_checkpoints(a.path())
        .unwrap()
        .iter()
        .map(|c| c.0)
        .collect();
    assert_eq!(
        steps,
        [40, 45],
        "every 10 steps and at the end, newest 2 kept"
    );
    let want = whole.checkpoint(cfg.to_toml(), "cpu".into()).unwrap();

    // Interrupted after 23 steps: the newest checkpoint is after step 20.
    let b = tempfile::tempdir().unwrap();
    let mut first = session(&cfg, b.path(), None);
    for _ in 0..23 {
        first.step().unwrap();
    }
    drop(first);
    let (step, path) = run::newest_checkpoint(b.path()).unwrap().unwrap();
    assert_eq!(step, 20);
    let ckpt = Checkpoint::read(&path).unwrap();
    assert_eq!(ckpt.sampler_position, 40, "2 cameras per step");
    let mut second = session(&cfg, b.path(), Some(&ckpt));
    for _ in 20..45 {
        second.step().unwrap();
    }
    let got = second.checkpoint(cfg.to_toml(), "cpu".into()).unwrap();
    assert_eq!(
        got, want,
        "parameters, Adam moments, step and sampler position"
    );
    let la = run::read_losses(&a.path().join(run::METRICS_FILE)).unwrap();
    let lb = run::read_losses(&b.path().join(run::METRICS_FILE)).unwrap();
    assert_eq!(la.len(), 45);
    assert_eq!(la, lb, "every step's loss logged once, equal");
    assert_eq!(
        Checkpoint::read(&run::newest_checkpoint(a.path()).unwrap().unwrap().1).unwrap(),
        Checkpoint::read(&run::newest_checkpoint(b.path()).unwrap().unwrap().1).unwrap()
    );
}

#[test]
fn a_diverged_run_stops_naming_the_step_and_keeps_the_good_checkpoint() {
    let cfg = config();
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&cfg, dir.path(), None);
    for _ in 0..22 {
        s.step().unwrap();
    }
    // The parameters become NaN after step 21 (as a blow-up would make them).
    {
        let world = &mut s.engine.world;
        let mut q = world.query::<&mut FeatureParams<CpuBackend>>();
        q.single_mut(world).unwrap().x.fill(f32::NAN);
    }
    let err = (22..45)
        .map(|_| s.step())
        .find_map(Result::err)
        .expect("the run stops");
    match err {
        EngineError::NonFinite { ref what, step } => {
            assert_eq!((what.as_str(), step), ("the loss", 22), "{err}");
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("step 22"), "{err}");
    // Found when the window of steps 21..27 was read back, before the step-30
    // checkpoint: the newest checkpoint is the good one after step 20.
    assert_eq!(
        s.steps_done(),
        28,
        "stopped after the step that read the window back"
    );
    let (step, path) = run::newest_checkpoint(dir.path()).unwrap().unwrap();
    assert_eq!(step, 20);
    assert_eq!(Checkpoint::read(&path).unwrap().first_non_finite(), None);
    // The window with the NaN is in the metrics file (as null), nothing after it.
    let losses = run::read_losses(&dir.path().join(run::METRICS_FILE)).unwrap();
    assert_eq!(losses.len(), 28);
    assert!(losses[..22].iter().all(|l| l.1.is_finite()));
    assert!(losses[22].1.is_nan());
}

#[test]
fn a_non_finite_state_is_never_checkpointed() {
    let mut cfg = config();
    cfg.set("log.every=100").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(&cfg, dir.path(), None);
    for _ in 0..12 {
        s.step().unwrap();
    }
    // Adam's second moment overflows (the loss may stay finite): caught at the
    // step-20 checkpoint.
    {
        let world = &mut s.engine.world;
        let mut q = world.query::<&mut lsplat_engine::components::AdamState<CpuBackend>>();
        q.single_mut(world).unwrap().v[5] = f32::INFINITY;
    }
    let err = (12..45).map(|_| s.step()).find_map(Result::err).unwrap();
    assert!(
        matches!(err, EngineError::NonFinite { step: 19, .. })
            && err.to_string().contains("adam_v"),
        "{err}"
    );
    assert_eq!(run::newest_checkpoint(dir.path()).unwrap().unwrap().0, 10);
}

/// A stop request (a first Ctrl-C) makes the step it arrives in the last: its losses
/// are read back and a checkpoint of it is written, from which a resumed session
/// continues as if never stopped.
#[test]
fn a_stop_request_checkpoints_the_step_it_arrives_in() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let cfg = config();
    let a = tempfile::tempdir().unwrap();
    let mut whole = session(&cfg, a.path(), None);
    for _ in 0..45 {
        whole.step().unwrap();
    }
    let want = whole.checkpoint(cfg.to_toml(), "cpu".into()).unwrap();
    let b = tempfile::tempdir().unwrap();
    let mut s = session(&cfg, b.path(), None);
    let flag = Arc::new(AtomicBool::new(false));
    s.set_stop_flag(flag.clone());
    for _ in 0..12 {
        s.step().unwrap();
        assert!(!s.stop_requested());
    }
    flag.store(true, Ordering::Relaxed);
    s.step().unwrap();
    assert!(s.stop_requested());
    drop(s);
    let (step, path) = run::newest_checkpoint(b.path()).unwrap().unwrap();
    assert_eq!(step, 13, "the step the request arrived in is checkpointed");
    let losses = run::read_losses(&b.path().join(run::METRICS_FILE)).unwrap();
    assert_eq!(losses.len(), 13, "and its losses logged");
    let ckpt = Checkpoint::read(&path).unwrap();
    let mut rest = session(&cfg, b.path(), Some(&ckpt));
    for _ in 13..45 {
        rest.step().unwrap();
    }
    assert_eq!(rest.checkpoint(cfg.to_toml(), "cpu".into()).unwrap(), want);
}
