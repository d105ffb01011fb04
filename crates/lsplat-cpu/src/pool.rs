//! The worker pool (bevy_tasks, sized to the physical cores) and helpers to split
//! work into contiguous, balanced ranges with disjoint outputs.

use bevy_tasks::{TaskPool, TaskPoolBuilder};

/// Number of physical cores (unique core ids across packages), falling back to the
/// logical count when the topology is not readable.
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cores = std::collections::BTreeSet::new();
    for cpu in 0..logical.max(1) {
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/topology");
        let read = |f: &str| {
            std::fs::read_to_string(format!("{base}/{f}"))
                .ok()
                .map(|s| s.trim().to_string())
        };
        match (read("physical_package_id"), read("core_id")) {
            (Some(p), Some(c)) => {
                cores.insert((p, c));
            }
            _ => return logical,
        }
    }
    cores.len().clamp(1, logical.max(1))
}

/// A pool of worker threads.
pub struct Workers {
    pool: TaskPool,
    threads: usize,
}

impl Workers {
    /// A pool with `threads` workers (0 = physical cores).
    pub fn new(threads: usize) -> Self {
        let threads = if threads == 0 {
            physical_cores()
        } else {
            threads
        };
        let pool = TaskPoolBuilder::new()
            .num_threads(threads)
            .thread_name("lsplat-cpu".into())
            .build();
        Workers { pool, threads }
    }

    /// Number of workers.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f(range, out_chunk)` over `ranges` (contiguous, ascending, covering
    /// `0..n`), where `out` is split so that range `r` owns
    /// `out[bounds(r.start)..bounds(r.end)]`. Runs inline when there is one range.
    pub fn for_ranges<T: Send>(
        &self,
        ranges: &[std::ops::Range<usize>],
        out: &mut [T],
        bounds: impl Fn(usize) -> usize + Sync,
        f: impl Fn(std::ops::Range<usize>, &mut [T]) + Sync,
    ) {
        if ranges.len() <= 1 || self.threads <= 1 {
            for r in ranges {
                let (a, b) = (bounds(r.start), bounds(r.end));
                f(r.clone(), &mut out[a..b]);
            }
            return;
        }
        let jobs = split_mut(ranges, out, bounds);
        let f = &f;
        self.pool.scope(|s| {
            for (r, chunk) in jobs {
                s.spawn(async move { f(r, chunk) });
            }
        });
    }
}

/// Splits `out` so that range `r` owns `out[bounds(r.start)..bounds(r.end)]` (ranges
/// ascending; the gaps between them are owned by nobody).
pub fn split_mut<'a, T>(
    ranges: &[std::ops::Range<usize>],
    out: &'a mut [T],
    bounds: impl Fn(usize) -> usize,
) -> Vec<(std::ops::Range<usize>, &'a mut [T])> {
    let mut rest = out;
    let mut consumed = 0;
    let mut jobs = Vec::with_capacity(ranges.len());
    for r in ranges {
        let (a, b) = (bounds(r.start), bounds(r.end));
        let tail = std::mem::take(&mut rest);
        let (_, tail) = tail.split_at_mut(a - consumed);
        let (chunk, tail) = tail.split_at_mut(b - a);
        rest = tail;
        consumed = b;
        jobs.push((r.clone(), chunk));
    }
    jobs
}

/// Splits `0..n` into at most `parts` contiguous, non-empty ranges of equal length
/// (±1): [`balanced_ranges`] for unit costs, without a pass over the items.
pub fn even_ranges(n: usize, parts: usize) -> Vec<std::ops::Range<usize>> {
    let parts = parts.clamp(1, n.max(1));
    if n == 0 {
        return Vec::new();
    }
    (0..parts)
        .map(|p| p * n / parts..(p + 1) * n / parts)
        .collect()
}

/// Splits `0..cost.len()` into at most `parts` contiguous ranges of roughly equal
/// total cost (each range non-empty).
pub fn balanced_ranges(
    cost: impl Iterator<Item = u64> + Clone,
    n: usize,
    parts: usize,
) -> Vec<std::ops::Range<usize>> {
    let total: u64 = cost.clone().sum();
    let parts = parts.clamp(1, n.max(1));
    if n == 0 {
        return Vec::new();
    }
    let target = total.div_ceil(parts as u64).max(1);
    let mut ranges = Vec::with_capacity(parts);
    let mut start = 0;
    let mut acc = 0u64;
    for (i, c) in cost.enumerate() {
        acc += c;
        if acc >= target && ranges.len() + 1 < parts {
            ranges.push(start..i + 1);
            start = i + 1;
            acc = 0;
        }
    }
    if start < n {
        ranges.push(start..n);
    }
    ranges
}

impl Workers {
    /// Runs `f` on every job (one task each; inline when there is one job or one
    /// worker) and returns the results in job order.
    pub fn run_jobs<J: Send, R: Send + 'static>(
        &self,
        jobs: Vec<J>,
        f: impl Fn(J) -> R + Sync,
    ) -> Vec<R> {
        if jobs.len() <= 1 || self.threads <= 1 {
            return jobs.into_iter().map(f).collect();
        }
        let f = &f;
        self.pool.scope(|s| {
            for j in jobs {
                s.spawn(async move { f(j) });
            }
        })
    }

    /// Runs `f` on each range and returns the results in range order.
    pub fn map_ranges<R: Send + 'static>(
        &self,
        ranges: &[std::ops::Range<usize>],
        f: impl Fn(std::ops::Range<usize>) -> R + Sync,
    ) -> Vec<R> {
        if ranges.len() <= 1 || self.threads <= 1 {
            return ranges.iter().map(|r| f(r.clone())).collect();
        }
        let f = &f;
        self.pool.scope(|s| {
            for r in ranges {
                let r = r.clone();
                s.spawn(async move { f(r) });
            }
        })
    }
}

/// Rows per block below which [`Workers`] runs plugin ops' row work in one block.
const MIN_ROWS_PER_BLOCK: usize = 256;

impl lsplat_device::HostPool for Workers {
    fn blocks(&self, rows: usize) -> usize {
        (rows.div_ceil(MIN_ROWS_PER_BLOCK)).min(4 * self.threads)
    }

    fn for_rows(
        &self,
        rows: usize,
        out: &mut [f32],
        row_len: usize,
        f: &(dyn Fn(usize, std::ops::Range<usize>, &mut [f32]) -> f64 + Sync),
    ) -> f64 {
        let blocks = self.blocks(rows);
        let ranges = even_ranges(rows, blocks);
        let jobs: Vec<_> = split_mut(&ranges, out, |r| r * row_len)
            .into_iter()
            .enumerate()
            .collect();
        self.run_jobs(jobs, |(b, (r, chunk))| f(b, r, chunk))
            .into_iter()
            .sum()
    }
}

/// Read bandwidth of main memory in bytes per second: the best of `passes` parallel
/// sums over a 256 MiB buffer (far larger than any cache) on the pool.
pub fn read_bandwidth(workers: &Workers, passes: usize) -> f64 {
    const LEN: usize = (256 << 20) / 4;
    const BLOCK: usize = 1 << 18;
    // Touch every page before timing.
    let src: Vec<f32> = (0..LEN).map(|i| (i % 1024) as f32).collect();
    let blocks = LEN / BLOCK;
    let ranges = even_ranges(blocks, workers.threads());
    let mut best = f64::INFINITY;
    for _ in 0..passes.max(1) {
        let t0 = std::time::Instant::now();
        let parts = workers.map_ranges(&ranges, |r| {
            let mut acc = [0f32; 16];
            for c in src[r.start * BLOCK..r.end * BLOCK].chunks_exact(16) {
                for (a, v) in acc.iter_mut().zip(c) {
                    *a += v;
                }
            }
            acc.iter().sum::<f32>()
        });
        std::hint::black_box(parts.iter().sum::<f32>());
        best = best.min(t0.elapsed().as_secs_f64());
    }
    (LEN * 4) as f64 / best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_and_balance() {
        let cost = [5u64, 1, 1, 1, 1, 1, 5, 0, 0, 1];
        let r = balanced_ranges(cost.iter().copied(), cost.len(), 3);
        assert_eq!(r.first().unwrap().start, 0);
        assert_eq!(r.last().unwrap().end, cost.len());
        for w in r.windows(2) {
            assert_eq!(w[0].end, w[1].start);
        }
        assert!(r.len() <= 3);
        assert!(balanced_ranges(std::iter::empty(), 0, 4).is_empty());
        assert!(even_ranges(0, 4).is_empty());
        for (n, parts) in [(1, 4), (10, 4), (10, 10), (7, 3), (152_746, 8)] {
            let r = even_ranges(n, parts);
            assert_eq!(r.len(), parts.min(n));
            assert_eq!((r[0].start, r.last().unwrap().end), (0, n));
            for w in r.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert!(w[0].len().abs_diff(w[1].len()) <= 1 && !w[0].is_empty());
            }
        }
    }

    #[test]
    fn for_ranges_writes_disjoint_chunks() {
        let w = Workers::new(2);
        let ranges = balanced_ranges(std::iter::repeat_n(1u64, 10), 10, 4);
        let mut out = vec![0usize; 20];
        w.for_ranges(
            &ranges,
            &mut out,
            |i| 2 * i,
            |r, chunk| {
                for (k, v) in chunk.iter_mut().enumerate() {
                    *v = 2 * r.start + k;
                }
            },
        );
        assert_eq!(out, (0..20).collect::<Vec<_>>());
        assert!(physical_cores() >= 1);
    }
}
