//! The engine end to end on the GPU backend, run by the simt runtime: the demo trained
//! with `device.backend = simt` recovers the teacher as well as the CPU backend does,
//! and every cache level trains.

use lsplat_core::Config;
use lsplat_core::config::{BackendKind, CacheMode};
use lsplat_cpu::CpuBackend;
use lsplat_data::demo;
use lsplat_device::Backend;
use lsplat_engine::Session;
use lsplat_render::Device;
use lsplat_render::device::BackendVisitor;

fn demo_config() -> Config {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenes/demo.toml");
    Config::load(&path).unwrap()
}

/// The simt device, or `None` (skipped with a message) unless `LSPLAT_REQUIRE_SIMT=1`.
fn simt(cfg: &Config) -> Option<Device> {
    let mut device = cfg.device.clone();
    device.backend = BackendKind::Simt;
    match Device::open(&device, &cfg.simt) {
        Ok(d) => Some(d),
        Err(e) => {
            let required = std::env::var("LSPLAT_REQUIRE_SIMT").is_ok_and(|v| v == "1");
            assert!(!required, "LSPLAT_REQUIRE_SIMT=1 but: {e}");
            eprintln!("SKIPPED (no simt runtime): {e}");
            None
        }
    }
}

/// Trains `cfg` and returns (initial L1, final L1, final mean cosine, seconds).
struct Train<'a>(&'a Config);

impl BackendVisitor for Train<'_> {
    type Output = (f64, f64, f64, f64);
    fn visit<B: Backend>(self, dev: B) -> Self::Output {
        let cfg = self.0;
        let d = demo::generate(&cfg.demo, cfg.scene.level).unwrap();
        let mut s = Session::new(dev, cfg, d.scene).unwrap();
        let before = s.evaluate().unwrap();
        let t0 = std::time::Instant::now();
        for _ in 0..cfg.train.iterations() {
            s.step().unwrap();
        }
        let secs = t0.elapsed().as_secs_f64();
        let after = s.evaluate().unwrap();
        (before.mean_l1, after.mean_l1, after.mean_cosine, secs)
    }
}

#[test]
fn simt_demo_recovers_the_teacher_like_the_cpu() {
    let cfg = demo_config();
    let Some(dev) = simt(&cfg) else { return };
    let (l0, l1, cos_simt, secs) = dev.visit(Train(&cfg));
    let (_, _, cos_cpu, cpu_secs) = Train(&cfg).visit(CpuBackend::new(0));
    eprintln!(
        "simt: {} steps in {secs:.1} s ({:.0} it/s), L1 {l0:.5} -> {l1:.5}, cosine {cos_simt:.4}; \
         cpu: cosine {cos_cpu:.4} in {cpu_secs:.1} s",
        cfg.train.iterations(),
        cfg.train.iterations() as f64 / secs
    );
    assert!(
        (cos_simt - cos_cpu).abs() <= 0.005,
        "recovered similarity: simt {cos_simt:.4} vs cpu {cos_cpu:.4}"
    );
    assert!(cos_simt >= 0.95, "simt recovered only {cos_simt:.4}");
}

#[test]
fn every_cache_level_trains_on_simt() {
    for cache in [CacheMode::None, CacheMode::Geometry, CacheMode::Operator] {
        let mut cfg = demo_config();
        cfg.train.iterations = Some(40);
        cfg.train.init_std = 0.1;
        cfg.render.cache = cache;
        cfg.render.tile_size = 8;
        let Some(dev) = simt(&cfg) else { return };
        let (l0, l1, cos, _) = dev.visit(Train(&cfg));
        let (c0, c1, ccos, _) = Train(&cfg).visit(CpuBackend::new(0));
        eprintln!(
            "{cache:?}: simt L1 {l0:.5} -> {l1:.5} ({cos:.4}); cpu {c0:.5} -> {c1:.5} ({ccos:.4})"
        );
        assert!(l1 < 0.9 * l0, "{cache:?}: simt did not train");
        assert!(
            (l0 - c0).abs() <= 1e-4 * c0,
            "{cache:?}: initial loss differs"
        );
        assert!(
            (l1 - c1).abs() <= 0.02 * c1,
            "{cache:?}: final loss {l1} vs cpu {c1}"
        );
    }
}
