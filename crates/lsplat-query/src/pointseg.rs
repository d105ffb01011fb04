//! Per-Gaussian semantic segmentation against a labelled point cloud, scored as
//! OpenGaussian's `scripts/eval_scannet.py` scores ScanNet scenes (the numbers
//! OpenGaussian and Dr. Splat report for 19, 15 and 10 classes).
//!
//! Each Gaussian takes the class of the nearest labelled point within a radius
//! ([`ground_truth`]; none beyond it, or when the point's label is not in the class
//! list: the Gaussian is not scored). Over the scored Gaussians, per class c:
//! `IoU_c = |true c ∧ predicted c| / |true c ∨ predicted c|` and the class accuracy
//! `|true c ∧ predicted c| / |true c|`; mIoU and mAcc are their means over the
//! classes that are true somewhere (classes only predicted do not count), and the
//! accuracy is the share of scored Gaussians predicted right.

use crate::knn::KdTree;

/// Per-Gaussian ground truth: the class index (into `classes`) of the nearest point
/// within `radius` (ties: the lowest point index), or −1. `point_labels` are the
/// points' raw labels; `classes` the raw labels evaluated, in class order.
pub fn ground_truth(
    tree: &KdTree,
    point_labels: &[u32],
    classes: &[u32],
    centres: &[[f32; 3]],
    radius: f64,
) -> Vec<i32> {
    centres
        .iter()
        .map(|&c| {
            tree.nearest_within(c, radius)
                .and_then(|(i, _)| classes.iter().position(|&k| k == point_labels[i]))
                .map_or(-1, |k| k as i32)
        })
        .collect()
}

/// Scores of one class.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassScore {
    /// Scored Gaussians truly of the class.
    pub truth: u64,
    /// Scored Gaussians predicted as the class.
    pub predicted: u64,
    /// Both.
    pub both: u64,
}

impl ClassScore {
    /// IoU (None when the class is neither true nor predicted).
    pub fn iou(&self) -> Option<f64> {
        let u = self.truth + self.predicted - self.both;
        (u > 0).then(|| self.both as f64 / u as f64)
    }

    /// Class accuracy (None when the class is not true anywhere).
    pub fn accuracy(&self) -> Option<f64> {
        (self.truth > 0).then(|| self.both as f64 / self.truth as f64)
    }
}

/// A segmentation's scores.
#[derive(Clone, Debug, PartialEq)]
pub struct SegScore {
    /// Per class.
    pub classes: Vec<ClassScore>,
    /// Gaussians scored (with a ground truth).
    pub scored: u64,
    /// Mean IoU over the classes true somewhere (NaN when none is).
    pub miou: f64,
    /// Mean class accuracy over the same classes.
    pub macc: f64,
    /// Share of scored Gaussians predicted right.
    pub accuracy: f64,
}

/// Scores predicted classes (−1: none) against the ground truth (−1: not scored) of
/// `k` classes.
pub fn score(truth: &[i32], predicted: &[i32], k: usize) -> SegScore {
    let mut classes = vec![
        ClassScore {
            truth: 0,
            predicted: 0,
            both: 0,
        };
        k
    ];
    let (mut scored, mut right) = (0u64, 0u64);
    for (&t, &p) in truth.iter().zip(predicted) {
        if t < 0 {
            continue;
        }
        scored += 1;
        right += u64::from(t == p);
        classes[t as usize].truth += 1;
        if p >= 0 && (p as usize) < k {
            classes[p as usize].predicted += 1;
            classes[p as usize].both += u64::from(t == p);
        }
    }
    let present: Vec<&ClassScore> = classes.iter().filter(|c| c.truth > 0).collect();
    let mean = |f: &dyn Fn(&ClassScore) -> Option<f64>| {
        present.iter().filter_map(|c| f(c)).sum::<f64>() / present.len() as f64
    };
    SegScore {
        miou: mean(&ClassScore::iou),
        macc: mean(&ClassScore::accuracy),
        accuracy: if scored == 0 {
            f64::NAN
        } else {
            right as f64 / scored as f64
        },
        scored,
        classes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenGaussian's `calculate_metrics` worked by hand.
    #[test]
    fn scores_as_opengaussian() {
        // Classes 0 (wall), 1 (floor), 2 (chair, never true).
        let truth = [0, 0, 0, 1, 1, -1, -1];
        let pred = [0, 0, 1, 1, 2, 2, 0];
        let s = score(&truth, &pred, 3);
        assert_eq!(s.scored, 5);
        // wall: both 2, truth 3, predicted 2 → IoU 2/3, acc 2/3; floor: both 1, truth
        // 2, predicted 2 → IoU 1/3, acc 1/2; chair: predicted 1, not true → no count.
        assert_eq!(s.classes[0].iou(), Some(2.0 / 3.0));
        assert_eq!(s.classes[1].iou(), Some(1.0 / 3.0));
        assert_eq!(s.classes[2].iou(), Some(0.0));
        assert_eq!(s.classes[2].accuracy(), None);
        assert!((s.miou - 0.5).abs() < 1e-12);
        assert!((s.macc - (2.0 / 3.0 + 0.5) / 2.0).abs() < 1e-12);
        assert_eq!(s.accuracy, 3.0 / 5.0);
        assert!(score(&[-1], &[0], 1).miou.is_nan());
    }

    /// Nearest labelled point within the radius; unlisted labels and far Gaussians
    /// are not scored; equidistant points go to the lower index.
    #[test]
    fn ground_truth_by_nearest_point() {
        let pts = [
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [3.0, 0.0, 0.0],
            [0.5, 5.0, 0.0],
        ];
        let labels = [7, 4, 9, 40];
        let tree = KdTree::new(&pts);
        let centres = [
            [0.1, 0.0, 0.0], // point 0 (label 7 → class 1)
            [0.5, 0.0, 0.0], // tie between 0 and 1 → point 0
            [0.9, 0.0, 0.0], // point 1 (label 4 → class 0)
            [3.0, 0.2, 0.0], // point 2, label 9 not listed → −1
            [2.0, 0.0, 0.0], // 1.0 from points 1 and 2: beyond the radius
            [0.5, 4.5, 0.0], // point 3 (label 40 → class 2), at exactly 0.5
        ];
        let gt = ground_truth(&tree, &labels, &[4, 7, 40], &centres, 0.5);
        assert_eq!(gt, [1, 1, 0, -1, -1, 2]);
    }
}
