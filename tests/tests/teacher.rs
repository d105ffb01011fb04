//! Teacher recovery on the embedded demo.

use lsplat_core::Config;
use lsplat_cpu::CpuBackend;
use lsplat_data::demo;
use lsplat_device::Backend;
use lsplat_render::cache::render_image;

/// The teacher's own features, rendered, match the targets on valid pixels: the demo
/// is learnable.
#[test]
fn teacher_features_reproduce_the_targets() {
    let cfg = Config::default();
    let d = demo::generate(&cfg.demo, 1).unwrap();
    let g = &d.scene.gaussians;
    let feats: Vec<f32> = (0..g.len())
        .flat_map(|i| demo::teacher_feature(&d, i, 1).unwrap_or([0.0; 3]))
        .collect();
    let dev = CpuBackend::new(0);
    let geom = dev.upload_geometry(g).unwrap();
    let x = dev.upload(&feats).unwrap();
    let (mut cos, mut n) = (0f64, 0usize);
    let mut worst = Vec::new();
    for (cam, lab) in d.scene.cameras.iter().zip(&d.scene.labels) {
        let img = render_image(&dev, &geom, cam, 16, (0.01, 1e10), &x, 3).unwrap();
        let mut cam_cos = 0.0;
        for (&p, &m) in lab.valid.iter().zip(&lab.mask) {
            let f = &img[p as usize * 3..p as usize * 3 + 3];
            let t = &lab.features[m as usize * 3..m as usize * 3 + 3];
            let dot: f32 = f.iter().zip(t).map(|(a, b)| a * b).sum();
            let nf = f.iter().map(|a| a * a).sum::<f32>().sqrt();
            let c = (dot / nf.max(1e-12)) as f64;
            cos += c;
            cam_cos += c;
            n += 1;
        }
        worst.push(cam_cos / lab.valid.len() as f64);
    }
    eprintln!(
        "teacher cosine {:.4}; per camera {:?}",
        cos / n as f64,
        worst
    );
    assert!(cos / n as f64 > 0.97);
}

/// Training the demo from zero features, LangSplat's exact setting (the embedded demo
/// scene's configuration with `train.init_std = 0`), lowers the loss at least tenfold
/// and recovers every segment's feature.
#[test]
fn training_recovers_the_teacher() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenes/demo.toml");
    let mut cfg = Config::load(&path).unwrap();
    cfg.set("train.init_std=0").unwrap();
    recovers_the_teacher(&cfg, 10.0, 0.95);
}

/// From the default start (a small seeded random initialisation) 300 steps already
/// recover the teacher.
#[test]
fn the_default_start_recovers_the_teacher_in_300_steps() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenes/demo.toml");
    let mut cfg = Config::load(&path).unwrap();
    assert_eq!(cfg.train.init_std, 0.01);
    cfg.set("train.iterations=300").unwrap();
    recovers_the_teacher(&cfg, 10.0, 0.98);
}

/// Trains `cfg` and asserts the evaluated L1 falls `fall`-fold and the mean cosine
/// reaches `cosine`.
fn recovers_the_teacher(cfg: &Config, fall: f64, cosine: f64) {
    let d = demo::generate(&cfg.demo, cfg.scene.level).unwrap();
    let mut s = lsplat_engine::Session::new(CpuBackend::new(0), cfg, d.scene).unwrap();
    let before = s.evaluate().unwrap();
    let t0 = std::time::Instant::now();
    for _ in 0..cfg.train.iterations() {
        s.step().unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    let after = s.evaluate().unwrap();
    let records = s.drain_records();
    assert_eq!(
        records.len(),
        cfg.train.iterations() as usize,
        "every step's loss is read back"
    );
    eprintln!(
        "{} steps in {secs:.1} s: eval L1 {:.5} -> {:.5} ({:.1}x), mean cosine {:.4}",
        cfg.train.iterations(),
        before.mean_l1,
        after.mean_l1,
        before.mean_l1 / after.mean_l1,
        after.mean_cosine
    );
    assert!(
        before.mean_l1 / after.mean_l1 >= fall,
        "loss fell only {:.1}x",
        before.mean_l1 / after.mean_l1
    );
    assert!(
        after.mean_cosine >= cosine,
        "mean cosine {:.4}",
        after.mean_cosine
    );
}
