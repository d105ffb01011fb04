//! LangSplatV2's pass over the logits (`lv2_adam_select`: top-k backward, Adam on 64
//! logits, the next top-4 selection) on the CPU backend, in rows per second: 256 rows
//! (in L2), 4 096 rows (in L3), and 152 746 rows streamed from memory, all of them or
//! a random 45 % (about what one camera of the biker scene sees).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use langsplat_v2::ops::{AdamSelectBufs, AdamSelectOp, StepConstants};
use langsplat_v2::{CODES, TOP_K};
use lsplat_core::Rng;
use lsplat_device::Backend;

fn pass(crit: &mut Criterion, name: &str, n: usize, density: f32) {
    let dev = lsplat_cpu::CpuBackend::new(2);
    let mut rng = Rng::new(1);
    let mut logits = dev
        .upload(&(0..n * CODES).map(|_| rng.normal()).collect::<Vec<_>>())
        .unwrap();
    let mut m = dev.upload(&vec![0.0f32; n * CODES]).unwrap();
    let mut v = dev.upload(&vec![0.0f32; n * CODES]).unwrap();
    let mut idx = dev
        .upload(
            &(0..n * TOP_K)
                .map(|i| (i % TOP_K) as u32)
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let mut val = dev.upload(&vec![0.25f32; n * TOP_K]).unwrap();
    let d_val = dev
        .upload(
            &(0..n * TOP_K)
                .map(|_| 1e-4 * rng.normal())
                .collect::<Vec<_>>(),
        )
        .unwrap();
    let vis: Vec<f32> = (0..n)
        .map(|_| if rng.f32() < density { 1.0 } else { 0.0 })
        .collect();
    let seen = vis.iter().filter(|&&s| s != 0.0).count();
    let vis = dev.upload(&vis).unwrap();
    let mut last = dev.upload(&vec![0u32; n]).unwrap();
    let mut group = crit.benchmark_group("v2_adam");
    group.throughput(Throughput::Elements(seen as u64));
    let mut step = 0u32;
    group.bench_function(name, |b| {
        b.iter(|| {
            step += 1;
            let k = StepConstants::at(0.0025, 0.9, 0.999, 1e-15, step);
            let bufs = AdamSelectBufs {
                logits: &mut logits,
                m: &mut m,
                v: &mut v,
                idx: &mut idx,
                val: &mut val,
                d_val: &d_val,
                vis: &vis,
                last: &mut last,
            };
            AdamSelectOp { gaussians: n }
                .run(&dev, bufs, step, &k)
                .unwrap();
        })
    });
    group.finish();
}

fn bench_adam(crit: &mut Criterion) {
    pass(crit, "l2_256_all", 256, 1.0);
    pass(crit, "l3_4096_all", 4096, 1.0);
    pass(crit, "memory_152746_all", 152_746, 1.0);
    pass(crit, "memory_152746_45pct", 152_746, 0.45);
}

criterion_group!(benches, bench_adam);
criterion_main!(benches);
