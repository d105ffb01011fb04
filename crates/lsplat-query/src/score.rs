//! Summaries of per-(frame, query) IoUs, as LERF-OVS tables report them: mIoU (the
//! mean over pairs), mAcc@0.25 and mAcc@0.5 (the share of pairs whose IoU is above
//! the bound, strictly, as OpenGaussian's `scripts/compute_lerf_iou.py` counts them),
//! and the same per category.

use crate::QueryError;

/// The bounds of mAcc.
pub const ACC_BOUNDS: [f64; 2] = [0.25, 0.5];

/// A summary of IoUs.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Pairs summarised.
    pub pairs: usize,
    /// Mean IoU.
    pub miou: f64,
    /// Share of IoUs above 0.25.
    pub acc_25: f64,
    /// Share of IoUs above 0.5.
    pub acc_50: f64,
}

impl Summary {
    fn of(ious: &[f64]) -> Summary {
        let n = ious.len().max(1) as f64;
        let above = |b: f64| ious.iter().filter(|&&v| v > b).count() as f64 / n;
        Summary {
            pairs: ious.len(),
            miou: ious.iter().sum::<f64>() / n,
            acc_25: above(ACC_BOUNDS[0]),
            acc_50: above(ACC_BOUNDS[1]),
        }
    }
}

/// A summary over all pairs and one per category (in order of first appearance).
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Every pair.
    pub all: Summary,
    /// `(category, its pairs' summary)`.
    pub categories: Vec<(String, Summary)>,
}

/// Summarises `(category, IoU)` pairs; no pairs is an error (a mean of nothing).
pub fn summarize(pairs: &[(String, f64)]) -> Result<Report, QueryError> {
    if pairs.is_empty() {
        return Err(QueryError::Shape(
            "nothing to score: no (frame, query) pairs".into(),
        ));
    }
    let all: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    let mut names: Vec<&str> = Vec::new();
    for (c, _) in pairs {
        if !names.contains(&c.as_str()) {
            names.push(c);
        }
    }
    let categories = names
        .iter()
        .map(|&c| {
            let v: Vec<f64> = pairs.iter().filter(|p| p.0 == c).map(|p| p.1).collect();
            (c.to_string(), Summary::of(&v))
        })
        .collect();
    Ok(Report {
        all: Summary::of(&all),
        categories,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_and_strict_bounds() {
        let p = |c: &str, v: f64| (c.to_string(), v);
        let r = summarize(&[p("mug", 0.25), p("bear", 0.9), p("mug", 0.5), p("mug", 0.0)]).unwrap();
        assert_eq!(r.all.pairs, 4);
        assert!((r.all.miou - 1.65 / 4.0).abs() < 1e-12);
        // 0.25 and 0.5 are not above their bounds.
        assert_eq!((r.all.acc_25, r.all.acc_50), (0.5, 0.25));
        assert_eq!(r.categories[0].0, "mug");
        assert_eq!(r.categories[0].1.pairs, 3);
        assert!((r.categories[0].1.miou - 0.25).abs() < 1e-12);
        assert_eq!(r.categories[0].1.acc_25, 1.0 / 3.0);
        assert_eq!(
            (r.categories[1].0.as_str(), r.categories[1].1.acc_50),
            ("bear", 1.0)
        );
        assert!(summarize(&[]).is_err());
    }
}
