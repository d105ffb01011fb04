//! Memory bandwidth of this machine, to compare with the SpMM's achieved GB/s: a
//! 256 MB copy on one thread and on the CPU backend's worker pool (counted as read +
//! write, 2 × 256 MB per copy), and a 256 MB read (a sum) on the pool.
//! `LSPLAT_BENCH_THREADS` sets the pool size (default: physical cores).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lsplat_cpu::pool::{Workers, balanced_ranges};

const BYTES: usize = 256 << 20;
const LEN: usize = BYTES / 4;
/// Elements per work item of the parallel passes (1 MiB).
const BLOCK: usize = 1 << 18;

fn bench_memory(crit: &mut Criterion) {
    let threads = std::env::var("LSPLAT_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let workers = Workers::new(threads);
    // Touch every page before timing.
    let src: Vec<f32> = (0..LEN).map(|i| (i % 1024) as f32).collect();
    let mut dst = vec![1f32; LEN];
    let blocks = LEN / BLOCK;
    let ranges = balanced_ranges(std::iter::repeat_n(1u64, blocks), blocks, workers.threads());

    let mut g = crit.benchmark_group("memory");
    g.throughput(Throughput::BytesDecimal(2 * BYTES as u64));
    g.bench_function("copy_256MB/1thread", |b| {
        b.iter(|| dst.copy_from_slice(black_box(&src)))
    });
    g.bench_function(format!("copy_256MB/{}threads", workers.threads()), |b| {
        b.iter(|| {
            workers.for_ranges(
                &ranges,
                &mut dst,
                |blk| blk * BLOCK,
                |r, chunk| chunk.copy_from_slice(&src[r.start * BLOCK..r.end * BLOCK]),
            )
        })
    });
    g.throughput(Throughput::BytesDecimal(BYTES as u64));
    g.bench_function(format!("read_256MB/{}threads", workers.threads()), |b| {
        b.iter(|| {
            let parts = workers.map_ranges(&ranges, |r| {
                let mut acc = [0f32; 16];
                for c in src[r.start * BLOCK..r.end * BLOCK].chunks_exact(16) {
                    for (a, v) in acc.iter_mut().zip(c) {
                        *a += v;
                    }
                }
                acc.iter().sum::<f32>()
            });
            black_box(parts.iter().sum::<f32>())
        })
    });
    g.finish();
    black_box(&dst);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(10);
    targets = bench_memory
}
criterion_main!(benches);
