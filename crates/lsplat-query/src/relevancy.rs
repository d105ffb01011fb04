//! LangSplat's relevancy (workload.md §4): for a pixel feature φ (unit), a query
//! embedding t and canonical negatives n_j (all unit),
//! `rel = min_j softmax(10·[φ·t, φ·n_j])₀ = min_j 1 / (1 + e^{10(φ·n_j − φ·t)})`.

use lsplat_cpu::gemm::{MatRef, gemm};

use crate::QueryError;

/// The canonical negative phrases.
pub const CANONICAL: [&str; 4] = ["object", "things", "stuff", "texture"];
/// The softmax temperature's inverse.
pub const TEMPERATURE: f32 = 10.0;

/// Scales each row of `[rows, dim]` to unit length in place (a zero row stays zero).
pub fn normalize_rows(x: &mut [f32], dim: usize) {
    for row in x.chunks_exact_mut(dim) {
        let n = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        if n > 0.0 {
            row.iter_mut().for_each(|v| *v /= n);
        }
    }
}

/// Relevancy of `[pixels, dim]` unit features for each of `[queries, dim]` positive
/// embeddings against `[negatives, dim]` canonical ones; returns `[pixels, queries]`.
pub fn relevancy(
    features: &[f32],
    dim: usize,
    positives: &[f32],
    negatives: &[f32],
) -> Result<Vec<f32>, QueryError> {
    if dim == 0
        || !features.len().is_multiple_of(dim)
        || !positives.len().is_multiple_of(dim)
        || negatives.is_empty()
        || !negatives.len().is_multiple_of(dim)
    {
        return Err(QueryError::Shape(format!(
            "relevancy: features ({}), positives ({}) and negatives ({}) are not rows of {dim}",
            features.len(),
            positives.len(),
            negatives.len()
        )));
    }
    let (p, q, n) = (
        features.len() / dim,
        positives.len() / dim,
        negatives.len() / dim,
    );
    let mut text = Vec::with_capacity((q + n) * dim);
    text.extend_from_slice(positives);
    text.extend_from_slice(negatives);
    let mut sims = vec![0f32; p * (q + n)];
    gemm(
        1.0,
        MatRef::new(features, p, dim),
        MatRef::new(&text, q + n, dim).t(),
        0.0,
        &mut sims,
    );
    let mut out = Vec::with_capacity(p * q);
    for row in sims.chunks_exact(q + n) {
        let (pos, neg) = row.split_at(q);
        out.extend(pos.iter().map(|&s| from_similarities(s, neg)));
    }
    Ok(out)
}

/// The relevancy of a feature whose similarity with the query is `s` and with the
/// negatives `neg`: `min_j 1/(1 + e^{10(neg_j − s)})`.
pub fn from_similarities(s: f32, neg: &[f32]) -> f32 {
    neg.iter()
        .map(|&sn| 1.0 / (1.0 + (TEMPERATURE * (sn - s)).exp()))
        .fold(f32::INFINITY, f32::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_closed_form_and_the_softmax() {
        let dim = 3;
        let feats = vec![1.0, 0.0, 0.0, 0.6, 0.8, 0.0, 0.0, 0.0, 0.0];
        let pos = vec![0.0, 1.0, 0.0];
        let neg = vec![1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
        let r = relevancy(&feats, dim, &pos, &neg).unwrap();
        for (k, f) in feats.chunks(3).enumerate() {
            let dot = |a: &[f32], b: &[f32]| -> f64 {
                a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
            };
            let s = dot(f, &pos);
            let want = neg
                .chunks(3)
                .map(|n| {
                    // softmax(10·[s, sn])₀ computed the long way.
                    let (a, b) = ((10.0 * s).exp(), (10.0 * dot(f, n)).exp());
                    a / (a + b)
                })
                .fold(f64::INFINITY, f64::min);
            assert!((r[k] as f64 - want).abs() < 1e-6, "{k}: {} vs {want}", r[k]);
        }
        // A zero feature is exactly as relevant as any phrase: 0.5.
        assert_eq!(r[2], 0.5);
        assert!(relevancy(&feats, 2, &pos, &neg).is_err());
    }
}
