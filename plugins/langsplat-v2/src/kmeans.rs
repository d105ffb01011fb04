//! Mini-batch k-means, used to initialise the codebook (LangSplatV2 fits sklearn's
//! `MiniBatchKMeans(n_clusters = 64)` to every CLIP feature row).
//!
//! Follows sklearn's defaults in simplified form:
//! - greedy k-means++ (2 + ⌊ln k⌋ candidates per centre) on `init_size` distinct rows
//!   drawn at random (default 3·batch_size, at least k, at most all rows);
//! - Sculley's update: each step draws `batch_size` rows with replacement, assigns
//!   them to the nearest centre (ties: lower index), and moves each centre to the
//!   running mean of every row it has been assigned (learning rate 1/count);
//! - `max_iter` passes over the data, i.e. `max_iter · ⌈n / batch_size⌉` steps, with
//!   sklearn's early stop: when the exponentially weighted batch inertia has not
//!   improved for `max_no_improvement` steps;
//! - every 10 steps, centres never assigned a row are moved to random data rows.
//!
//! Everything is drawn from one [`Rng`] seeded by `seed`: the same seed and input give
//! bit-identical centres.

use lsplat_core::Rng;

use crate::check::{positive, rows_of};
use crate::error::{Error, Result};
use crate::kmeans_pp::{kmeans_pp, nearest, sample_rows};

/// Steps between reassignments of never-used centres.
const REASSIGN_EVERY: usize = 10;

/// Options of [`minibatch_kmeans`]; `Default` gives sklearn's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct KMeansOptions {
    /// Rows per mini-batch (sklearn: 1024).
    pub batch_size: usize,
    /// Passes over the data (sklearn: 100).
    pub max_iter: usize,
    /// Rows used by the k-means++ initialisation (None: 3·batch_size).
    pub init_size: Option<usize>,
    /// Early stop after this many steps without improvement of the smoothed batch
    /// inertia (sklearn: 10); None disables it.
    pub max_no_improvement: Option<usize>,
}

impl Default for KMeansOptions {
    fn default() -> Self {
        KMeansOptions {
            batch_size: 1024,
            max_iter: 100,
            init_size: None,
            max_no_improvement: Some(10),
        }
    }
}

/// Mini-batch k-means of the rows of `data` (`[n, dim]`) into `k` centres
/// (`[k, dim]`, returned). See the module docs for the algorithm.
///
/// Errors: `dim`, `k` or `batch_size` zero, `data.len()` not a multiple of `dim`,
/// fewer rows than `k`, or a non-finite value (the first bad row is named).
pub fn minibatch_kmeans(
    data: &[f32],
    dim: usize,
    k: usize,
    seed: u64,
    opts: &KMeansOptions,
) -> Result<Vec<f32>> {
    positive("dim", dim)?;
    positive("k", k)?;
    positive("batch_size", opts.batch_size)?;
    let n = rows_of("data", data.len(), dim)?;
    if n < k {
        return Err(Error::TooFewRows { rows: n, k });
    }
    if let Some(row) = data
        .chunks_exact(dim)
        .position(|r| !r.iter().all(|v| v.is_finite()))
    {
        return Err(Error::NonFinite { what: "data", row });
    }
    let mut rng = Rng::new(seed);
    let batch = opts.batch_size.min(n);
    let init_size = opts
        .init_size
        .unwrap_or(3usize.saturating_mul(opts.batch_size));
    let sample = sample_rows(&mut rng, n, init_size.max(k).min(n));
    let mut centres = kmeans_pp(data, dim, &sample, k, &mut rng);

    let mut counts = vec![0u64; k];
    let mut hits = vec![0u64; k];
    let mut sums = vec![0.0f64; k * dim];
    let alpha = (2.0 * batch as f64 / (n as f64 + 1.0)).min(1.0);
    let (mut ewa, mut ewa_min, mut stale) = (None::<f64>, f64::INFINITY, 0usize);
    let steps = opts.max_iter.saturating_mul(n.div_ceil(batch));
    for step in 0..steps {
        hits.fill(0);
        sums.fill(0.0);
        let mut inertia = 0.0f64;
        for _ in 0..batch {
            let x = &data[rng.below(n as u64) as usize * dim..][..dim];
            let (j, d) = nearest(x, &centres, dim);
            inertia += f64::from(d);
            hits[j] += 1;
            for (s, &v) in sums[j * dim..][..dim].iter_mut().zip(x) {
                *s += f64::from(v);
            }
        }
        for j in (0..k).filter(|&j| hits[j] > 0) {
            let (old, total) = (counts[j] as f64, (counts[j] + hits[j]) as f64);
            let c = &mut centres[j * dim..][..dim];
            for (cv, &s) in c.iter_mut().zip(&sums[j * dim..][..dim]) {
                *cv = ((f64::from(*cv) * old + s) / total) as f32;
            }
            counts[j] += hits[j];
        }
        if (step + 1) % REASSIGN_EVERY == 0 {
            for j in (0..k).filter(|&j| counts[j] == 0) {
                let r = rng.below(n as u64) as usize;
                centres[j * dim..][..dim].copy_from_slice(&data[r * dim..][..dim]);
            }
        }
        let b = inertia / batch as f64;
        let e = ewa.map_or(b, |e| e * (1.0 - alpha) + b * alpha);
        if ewa.is_some() && e >= ewa_min {
            stale += 1;
            if opts.max_no_improvement.is_some_and(|m| stale >= m) {
                break;
            }
        } else {
            (ewa_min, stale) = (e, 0);
        }
        ewa = Some(e);
    }
    Ok(centres)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 blobs (σ = 0.1) around centres 10·e_j in 8 dimensions; returns (data, centres).
    fn blobs(seed: u64, per: usize) -> (Vec<f32>, Vec<f32>) {
        let (k, dim) = (4, 8);
        let mut rng = Rng::new(seed);
        let mut truth = vec![0.0f32; k * dim];
        for j in 0..k {
            truth[j * dim + j] = 10.0;
            truth[j * dim + 7] = -5.0 * j as f32;
        }
        let mut data = Vec::with_capacity(k * per * dim);
        for i in 0..k * per {
            let c = &truth[(i % k) * dim..][..dim];
            data.extend(c.iter().map(|&v| v + 0.1 * rng.normal()));
        }
        (data, truth)
    }

    fn small() -> KMeansOptions {
        KMeansOptions {
            batch_size: 64,
            max_iter: 10,
            ..KMeansOptions::default()
        }
    }

    #[test]
    fn recovers_separated_blobs() {
        let (data, truth) = blobs(3, 200);
        for seed in 0..5 {
            let centres = minibatch_kmeans(&data, 8, 4, seed, &small()).unwrap();
            let mut matched = [0usize; 4];
            let mut worst = 0.0f32;
            for c in centres.chunks_exact(8) {
                let (j, d) = nearest(c, &truth, 8);
                matched[j] += 1;
                worst = worst.max(d.sqrt());
            }
            eprintln!("k-means seed {seed}: max distance to a true centre {worst:.3}");
            assert_eq!(matched, [1; 4], "seed {seed}");
            assert!(worst < 0.1, "seed {seed}: {worst}");
        }
    }

    #[test]
    fn same_seed_same_centres() {
        let (data, _) = blobs(4, 100);
        let opts = KMeansOptions {
            batch_size: 32,
            init_size: Some(50),
            max_no_improvement: None,
            ..KMeansOptions::default()
        };
        let a = minibatch_kmeans(&data, 8, 6, 42, &opts).unwrap();
        assert_eq!(a, minibatch_kmeans(&data, 8, 6, 42, &opts).unwrap());
        assert_ne!(a, minibatch_kmeans(&data, 8, 6, 43, &opts).unwrap());
        assert_eq!(a.len(), 6 * 8);
    }

    #[test]
    fn k_equal_to_rows_and_duplicates() {
        let data = [1.0f32, 1.0, 1.0, 1.0, 1.0, 1.0];
        let c = minibatch_kmeans(&data, 2, 3, 1, &small()).unwrap();
        assert_eq!(c, data);
    }

    #[test]
    fn errors() {
        let opts = small();
        let data = vec![0.5f32; 24];
        assert_eq!(
            minibatch_kmeans(&data, 8, 4, 0, &opts),
            Err(Error::TooFewRows { rows: 3, k: 4 })
        );
        assert!(matches!(
            minibatch_kmeans(&data, 0, 2, 0, &opts),
            Err(Error::Param { what: "dim", .. })
        ));
        assert!(matches!(
            minibatch_kmeans(&data, 8, 0, 0, &opts),
            Err(Error::Param { what: "k", .. })
        ));
        assert!(matches!(
            minibatch_kmeans(&data, 5, 2, 0, &opts),
            Err(Error::NotMultiple { .. })
        ));
        let zero_batch = KMeansOptions {
            batch_size: 0,
            ..opts.clone()
        };
        assert!(matches!(
            minibatch_kmeans(&data, 8, 2, 0, &zero_batch),
            Err(Error::Param { .. })
        ));
        let mut bad = data.clone();
        bad[19] = f32::NAN;
        assert_eq!(
            minibatch_kmeans(&bad, 4, 2, 0, &opts),
            Err(Error::NonFinite {
                what: "data",
                row: 4
            })
        );
    }
}
