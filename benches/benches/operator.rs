//! SpMM (`out = W·x`), transposed SpMM (`d_x += Wᵀ·d`), and direct rasterization
//! (forward and feature-only backward) on the CPU backend, on one camera of: the
//! embedded demo, a synthetic 150k-Gaussian scene at 640×480, and the biker splat at
//! 640×480 (when `../shared/data` is there); all with 25% valid pixels.
//!
//! `spmm` and `spmm_t` report throughput in decimal bytes per second (GB/s) from the
//! byte model of `lsplat_benches::spmm_bytes` / `spmm_t_bytes`; rasterization reports
//! valid pixels per second. `LSPLAT_BENCH_CHANNELS` sets C (default 3);
//! `LSPLAT_BENCH_THREADS` the worker count (default: physical cores).

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lsplat_benches::{Case, biker, demo, spmm_bytes, spmm_t_bytes, synthetic};
use lsplat_core::config::WeightPrecision;
use lsplat_cpu::CpuBackend;
use lsplat_device::Backend;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn precision_name(p: WeightPrecision) -> &'static str {
    match p {
        WeightPrecision::F32 => "f32",
        WeightPrecision::F16 => "f16",
        WeightPrecision::Bf16 => "bf16",
        WeightPrecision::Compact => "compact",
        WeightPrecision::Recompute => "recompute",
    }
}

fn bench_operator(crit: &mut Criterion) {
    let c = env_usize("LSPLAT_BENCH_CHANNELS", 3);
    let dev = CpuBackend::new(env_usize("LSPLAT_BENCH_THREADS", 0));
    eprintln!("{}, C = {c}", dev.describe());
    let mut cases: Vec<(Case, Vec<WeightPrecision>)> = vec![
        (demo(&dev), vec![WeightPrecision::F32]),
        (
            synthetic(&dev, 150_000, (640, 480), 1),
            vec![
                WeightPrecision::F32,
                WeightPrecision::F16,
                WeightPrecision::Bf16,
                WeightPrecision::Compact,
                WeightPrecision::Recompute,
            ],
        ),
    ];
    if let Some(b) = biker(&dev, (640, 480)) {
        cases.push((
            b,
            vec![
                WeightPrecision::F32,
                WeightPrecision::Bf16,
                WeightPrecision::Compact,
            ],
        ));
    }

    for (case, precisions) in &cases {
        let x = case.features(c, 2);
        let d = {
            let mut rng = lsplat_core::Rng::new(3);
            (0..case.rows() * c)
                .map(|_| rng.range(-1.0, 1.0))
                .collect::<Vec<f32>>()
        };
        for &p in precisions {
            let op = case.operator(&dev, p);
            let (fwd, bwd) = (spmm_bytes(&op, c), spmm_t_bytes(&op, c));
            eprintln!(
                "{} [{}]: spmm moves {fwd} bytes, spmm_t {bwd} bytes per call",
                case.describe(&op),
                precision_name(p)
            );
            let id = BenchmarkId::new(&case.name, format!("{}/C{c}", precision_name(p)));

            let mut g = crit.benchmark_group("spmm");
            g.throughput(Throughput::BytesDecimal(fwd));
            let mut out = vec![0f32; case.rows() * c];
            g.bench_function(id.clone(), |b| {
                b.iter(|| dev.spmm(&op, black_box(&x), c, &mut out).unwrap())
            });
            g.finish();

            let mut g = crit.benchmark_group("spmm_t");
            g.throughput(Throughput::BytesDecimal(bwd));
            let mut dx = vec![0f32; case.gaussians * c];
            g.bench_function(id.clone(), |b| {
                b.iter(|| dev.spmm_t(&op, black_box(&d), c, &mut dx).unwrap())
            });
            g.finish();

            // One camera's forward → masked L1 → backward: fused, and as three ops.
            if c == case.gt.channels {
                let mut g = crit.benchmark_group("loss_step");
                g.throughput(Throughput::BytesDecimal(op.bytes() as u64));
                let mut loss = vec![0f32; 1];
                let (mut r, mut dr) = (vec![0f32; case.rows() * c], vec![0f32; case.rows() * c]);
                for fused in [true, false] {
                    let kind = lsplat_core::config::LossKind::MaskedL1;
                    let name = BenchmarkId::new(
                        format!("{}/{}", case.name, if fused { "fused" } else { "two_pass" }),
                        precision_name(p),
                    );
                    g.bench_function(name, |b| {
                        b.iter(|| {
                            if fused {
                                dev.operator_loss_step(
                                    kind,
                                    &op,
                                    black_box(&x),
                                    &case.gt,
                                    1.0,
                                    (&mut r, &mut dr),
                                    &mut dx,
                                    &mut loss,
                                    0,
                                    false,
                                )
                                .unwrap()
                            } else {
                                dev.spmm(&op, black_box(&x), c, &mut r).unwrap();
                                dev.pixel_loss(
                                    kind, &r, &case.gt, 1.0, &mut dr, &mut loss, 0, false,
                                )
                                .unwrap();
                                dev.spmm_t(&op, &dr, c, &mut dx).unwrap();
                            }
                        })
                    });
                }
                g.finish();
            }
        }

        let id = BenchmarkId::new(&case.name, format!("C{c}"));
        let mut g = crit.benchmark_group("rasterize");
        g.throughput(Throughput::Elements(case.rows() as u64));
        let mut out = vec![0f32; case.rows() * c];
        g.bench_function(id.clone(), |b| {
            b.iter(|| {
                dev.rasterize(
                    &case.projection,
                    &case.bins,
                    &case.pixels,
                    black_box(&x),
                    c,
                    &mut out,
                )
                .unwrap()
            })
        });
        g.finish();

        let mut g = crit.benchmark_group("rasterize_backward");
        g.throughput(Throughput::Elements(case.rows() as u64));
        let mut dx = vec![0f32; case.gaussians * c];
        g.bench_function(id, |b| {
            b.iter(|| {
                dev.rasterize_backward(
                    &case.projection,
                    &case.bins,
                    &case.pixels,
                    black_box(&d),
                    c,
                    &mut dx,
                )
                .unwrap()
            })
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(10);
    targets = bench_operator
}
criterion_main!(benches);
