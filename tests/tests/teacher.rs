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
