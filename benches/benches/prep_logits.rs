//! One mask's logits to a mask at the image's size, per family: SAM's two bilinear
//! stages (256² → 1024², padding cut, → 1264×832) against EfficientSAM's one bicubic
//! stage (256² → 1264×832), each evaluating only the box its bound allows. The logits
//! imitate a decoder's: a blob (+15 at its centre, falling 3 per low-resolution pixel)
//! over a smooth background between −35 and −5, not clipped at a constant, so the
//! bicubic bound cannot lean on a flat floor. Small (radius 6) and large (radius 60)
//! blobs.
//!
//! `cargo bench -p lsplat-benches --bench prep_logits`

use criterion::{Criterion, criterion_group, criterion_main};
use lsplat_prep::resize::cubic::CubicResize;
use lsplat_prep::resize::logits::MaskResize;

const M: usize = 256;
const W: usize = 1264;
const H: usize = 832;

fn logits(radius: f32) -> Vec<f32> {
    let (cx, cy) = (128.0f32, 80.0f32);
    (0..M * M)
        .map(|i| {
            let (x, y) = ((i % M) as f32, (i / M) as f32);
            let d = ((x - cx).powi(2) + (y - cy).powi(2)).sqrt();
            let ground = -20.0 + 15.0 * (x / 17.0).sin() * (y / 23.0).cos();
            (3.0 * (radius - d)).min(15.0).max(ground)
        })
        .collect()
}

fn bench_logits(crit: &mut Criterion) {
    let mut group = crit.benchmark_group("prep_logits");
    let bilinear = MaskResize::new(M, 1024, (1024, 674), (W, H), (0, 0), (W as u32, H as u32));
    let bicubic = CubicResize::new(M, (W, H), (0, 0), (W as u32, H as u32));
    for (name, radius) in [("small", 6.0), ("large", 60.0)] {
        let l = logits(radius);
        let mut scratch = Vec::new();
        group.bench_function(format!("sam_bilinear_{name}"), |b| {
            b.iter(|| bilinear.apply(&l, 1.0, &mut scratch).above_lo)
        });
        group.bench_function(format!("efficient_sam_bicubic_{name}"), |b| {
            b.iter(|| bicubic.apply(&l, 1.0, &mut scratch).above_lo)
        });
    }
    group.finish();
}

criterion_group!(benches, bench_logits);
criterion_main!(benches);
