//! 3D-OVS's scoring (its `renderer.py`, `evaluation_segmentation_test`): every pixel
//! gets the class of largest similarity (`argmax` of the softmax over the class list;
//! here the first class on ties), and each view is scored with scikit-learn's
//! `jaccard_score(gt, one_hot, average=None)` (per class IoU, 0 when the class is
//! neither true nor predicted anywhere in the view) and `accuracy_score` (the share of
//! pixels whose whole one-hot row is right: a pixel of no class, or of two, is wrong
//! whatever is predicted). mIoU is the mean over (view, class).

/// Per-pixel classes from `[P, K]` similarities, the first of the largest on ties.
/// With `negatives` (`[P, J]`, LangSplat's `get_semantic_map` rule), a pixel whose
/// largest similarity is a negative's (strictly larger than every class's) is −1.
pub fn label_pixels(sims: &[f32], k: usize, negatives: Option<(&[f32], usize)>) -> Vec<i32> {
    if k == 0 {
        return Vec::new();
    }
    sims.chunks_exact(k)
        .enumerate()
        .map(|(p, row)| {
            let mut best = 0;
            for (c, v) in row.iter().enumerate() {
                if *v > row[best] {
                    best = c;
                }
            }
            let beaten = negatives
                .is_some_and(|(n, j)| n[p * j..(p + 1) * j].iter().any(|&v| v > row[best]));
            if beaten { -1 } else { best as i32 }
        })
        .collect()
}

/// One view's score.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewScore {
    /// Per class: IoU (0 when neither true nor predicted).
    pub ious: Vec<f64>,
    /// Per class: true somewhere in the view.
    pub present: Vec<bool>,
    /// Pixels labelled by class (−1 and others excluded).
    pub predicted: Vec<u64>,
    /// Share of pixels whose one-hot row is right.
    pub accuracy: f64,
}

/// Scores per-pixel classes against per-class 0/1 masks (`[K][P]`).
pub fn score_view(labels: &[i32], masks: &[Vec<u8>]) -> ViewScore {
    let k = masks.len();
    let (mut inter, mut union, mut predicted) = (vec![0u64; k], vec![0u64; k], vec![0u64; k]);
    let mut present = vec![false; k];
    let mut right = 0u64;
    for (p, &l) in labels.iter().enumerate() {
        let mut row_ok = true;
        for c in 0..k {
            let (g, q) = (masks[c][p] != 0, l == c as i32);
            inter[c] += u64::from(g && q);
            union[c] += u64::from(g || q);
            predicted[c] += u64::from(q);
            present[c] |= g;
            row_ok &= g == q;
        }
        right += u64::from(row_ok);
    }
    let ious = inter
        .iter()
        .zip(&union)
        .map(|(&i, &u)| if u == 0 { 0.0 } else { i as f64 / u as f64 })
        .collect();
    ViewScore {
        ious,
        present,
        predicted,
        accuracy: right as f64 / labels.len().max(1) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arg_max_with_ties_and_negatives() {
        // Pixel 0: class 1; pixel 1: a tie → class 0; pixel 2: all equal → class 0.
        let sims = [0.1, 0.9, 0.2, 0.5, 0.5, 0.1, 0.3, 0.3, 0.3];
        assert_eq!(label_pixels(&sims, 3, None), [1, 0, 0]);
        // A negative above the best class makes the pixel −1; equal does not.
        let neg = [0.95, 0.5, 0.0];
        assert_eq!(label_pixels(&sims, 3, Some((&neg, 1))), [-1, 0, 0]);
    }

    /// Scikit-learn's numbers worked by hand: a 2×3 view, classes {a, b, c}, c
    /// absent and never predicted (IoU 0), one pixel of no class (always wrong) and
    /// one of two classes.
    #[test]
    fn view_scores_follow_scikit_learn() {
        let a = vec![1, 1, 0, 0, 0, 1];
        let b = vec![0, 0, 1, 1, 0, 1];
        let c = vec![0; 6];
        let labels = [0, 1, 1, 1, 0, 0];
        let s = score_view(&labels, &[a, b, c]);
        // a: true {0,1,5}, predicted {0,4,5} → 2/4; b: true {2,3,5}, predicted
        // {1,2,3} → 2/4; c: 0.
        assert_eq!(s.ious, [0.5, 0.5, 0.0]);
        assert_eq!(s.present, [true, true, false]);
        assert_eq!(s.predicted, [3, 3, 0]);
        // Right rows: pixels 0, 2, 3 (pixel 4 has no class, 5 has two, 1 is wrong).
        assert_eq!(s.accuracy, 0.5);
    }
}
